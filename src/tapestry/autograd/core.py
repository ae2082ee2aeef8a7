"""autograd's ``core`` names used by programs: ``make_vjp`` and ``make_jvp``
(unary forms)."""
from __future__ import annotations

from .differential_operators import make_jvp_unary as make_jvp
from .differential_operators import make_vjp_unary as make_vjp
from .extend import (def_linear, defjvp, defjvp_argnum, defjvp_argnums, defvjp,
                     defvjp_argnum, primitive, vspace)

__all__ = ["make_vjp", "make_jvp", "defvjp", "defvjp_argnum", "defjvp", "defjvp_argnum",
           "defjvp_argnums", "def_linear", "primitive", "vspace"]
