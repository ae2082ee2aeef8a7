"""autograd's ``core`` names used by programs: ``make_vjp`` (unary form)."""
from __future__ import annotations

from .differential_operators import make_vjp_unary as make_vjp  # noqa: F401
from .extend import defvjp, defvjp_argnum, primitive, vspace  # noqa: F401

__all__ = ["make_vjp", "defvjp", "defvjp_argnum", "primitive", "vspace"]
