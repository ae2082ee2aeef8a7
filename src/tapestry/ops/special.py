"""scipy.special ufuncs common in likelihoods and neural nets.

The families beyond these live in sibling modules, registered here:
special_gamma (gamma, beta, zeta, incomplete integrals, distributions),
special_bessel (Bessel, Struve, Kelvin, Airy), special_misc (error
functions, elementary, exponential and elliptic integrals) and special_poly
(orthogonal polynomials, hypergeometric functions).

SciPy's special functions are ufuncs, so traced arrays reach them through
``__array_ufunc__`` like NumPy's own: ``scipy.special.expit(x)`` just works.
Registered on the first traced call of a ufunc that has no rule (a loader
in ``tapestry.ops``, see ``core.registry.add_loader``), and only when SciPy
is installed (the ``scipy`` extra).
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive
from .elementwise import defbinary, defunary
from .special_common import x_over_y

try:
    import scipy.special as sp
except ImportError:  # the scipy extra is not installed: nothing to register
    sp = None

_SQRT_2PI = np.sqrt(2 * np.pi)


def _real_only(x, name):
    """``x``, or a refusal naming the function when it is complex (SciPy has
    no complex polygamma for the derivative)."""
    if np.iscomplexobj(x):
        raise NotImplementedError(f"tapestry: scipy.special.{name} of a complex array has "
                                  "no gradient rule (no complex polygamma in SciPy); use "
                                  "tapestry.custom_vjp.")
    return x


def register_rules():
    """Declare the rules (run by the registry's loader on first use, so
    importing this module has no side effect)."""
    if sp is None:
        return
    # trigamma as a primitive of its own, so digamma's rule stays differentiable
    _trigamma = Primitive(lambda x: sp.polygamma(1, x), "trigamma",
                          vjps=(lambda g, ans, x: g * sp.polygamma(2, x),))

    defunary(sp.expit, lambda g, ans, x: g * ans * (1 - ans))
    defunary(sp.log_expit, lambda g, ans, x: g * sp.expit(-x))
    defunary(sp.logit, lambda g, ans, x: g / (x * (1 - x)))
    defunary(sp.gammaln, lambda g, ans, x: g * sp.digamma(x))
    defunary(sp.digamma, lambda g, ans, x: g * _trigamma(_real_only(x, "digamma")))
    defunary(sp.erf, lambda g, ans, x: g * (2 / np.sqrt(np.pi)) * np.exp(-x * x))
    defunary(sp.erfc, lambda g, ans, x: g * (-2 / np.sqrt(np.pi)) * np.exp(-x * x))
    defunary(sp.ndtr, lambda g, ans, x: g * np.exp(-0.5 * x * x) / _SQRT_2PI)
    defunary(sp.log_ndtr, lambda g, ans, x: g * np.exp(-0.5 * x * x - ans) / _SQRT_2PI)
    # xlogy(x, y) = x log y (0 where x == 0); d/dx = log y, d/dy = x / y (0 at x = 0,
    # y = 0 too: xlogy(0, y) is 0 for every y)
    defbinary(sp.xlogy, lambda g, ans, x, y: g * np.log(y),
              lambda g, ans, x, y: g * x_over_y(x, y))
    defbinary(sp.xlog1py, lambda g, ans, x, y: g * np.log1p(y),
              lambda g, ans, x, y: g * x_over_y(x, 1 + y))
    from . import special_bessel, special_gamma, special_misc, special_poly
    for family in (special_gamma, special_bessel, special_misc, special_poly):
        family.register()
