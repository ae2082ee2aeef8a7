"""autograd's ``core`` names used by programs: ``make_vjp`` and ``make_jvp``
(unary forms)."""
from __future__ import annotations

from .differential_operators import make_jvp_unary as make_jvp  # noqa: F401
from .differential_operators import make_vjp_unary as make_vjp  # noqa: F401
from .extend import (def_linear, defjvp, defjvp_argnum, defjvp_argnums,  # noqa: F401
                     defvjp, defvjp_argnum, primitive, vspace)
