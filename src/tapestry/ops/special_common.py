"""Helpers shared by the scipy.special rule modules (special_gamma,
special_bessel, special_misc): declaring a ufunc's rules by argument, the
rules of multi-output ufuncs, and numerically stable pieces that several
derivatives share.

Every rule is written with differentiable operations (NumPy ufuncs and
scipy.special ufuncs that have rules themselves), so that the rule of a
rule -- a second derivative -- is recorded like any other computation.
Constants are Python floats, which keep float32 arrays float32.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.primitive import Primitive, declares_rules, implements
from ..core.var import unwrap_all
from .common import near_point, series
from .elementwise import unbroadcasting
from ..coverage.refused import Refused

try:
    import scipy.special as sp
    from scipy.special import _ufuncs as spu
except ImportError:  # the scipy extra is not installed: the rule modules register nothing
    sp = spu = None

SQRT_PI = math.sqrt(math.pi)
SQRT_2PI = math.sqrt(2 * math.pi)


def ZERO(g, ans, *args):
    """The rule of an argument the result is piecewise constant in (SciPy
    rounds it down to an integer): a zero cotangent."""
    return None


@declares_rules
def define(ufunc, *rules, name=None):
    """Register ``ufunc`` with one rule per input (``None``: not
    differentiable in that argument, which raises by name when a traced
    value is passed there; missing trailing rules are ``None``).  Rules
    are written as if no broadcasting happened.  For a ufunc of several
    outputs ``g`` is a list (``None`` where an output got no cotangent)
    and ``ans`` a tuple."""
    rules = rules + (None,) * (ufunc.nin - len(rules))
    vjps = tuple(None if r is None else (r if ufunc.nin == 1 else unbroadcasting(r, i))
                 for i, r in enumerate(rules))
    label = name or f"scipy.special.{ufunc.__name__}"
    return implements(ufunc)(Primitive(ufunc, label, vjps=vjps, n_outputs=ufunc.nout))


@declares_rules
def refuse(ufunc, name, reason):
    """Refuse a private ufunc that public scipy.special functions call
    (``zeta`` calls ``_riemann_zeta``), under its public name."""
    implements(ufunc)(Refused(name, reason))


def outputs(*derivatives):
    """The rule of a one-input, several-output ufunc from the derivatives
    of its outputs, each ``d(ans, x)``: ``sum_k g_k * d_k``."""
    def multi_output_rule(g, ans, x):
        total = None
        for gk, d in zip(g, derivatives):
            if gk is not None:
                term = gk * d(ans, x)
                total = term if total is None else total + term
        return total
    return multi_output_rule


def real_only(x, name):
    """``x``, or a refusal naming the function when it is complex (its
    derivative there is not holomorphic or has no SciPy function)."""
    if np.iscomplexobj(x):
        raise NotImplementedError(
            f"tapestry: scipy.special.{name} of a complex array has no gradient rule; "
            "use tapestry.custom_vjp.")
    return x


def safe(x, at, value=1.0):
    """``x`` with the entries where ``at`` holds replaced by ``value`` (so a
    guarded branch of ``np.where`` stays finite, and so does its derivative)."""
    return np.where(at, value, x)


def x_over_y(x, y):
    """x / y, and 0 where both are 0: the y-derivative of x log y (xlogy,
    rel_entr, kl_div) at x = 0, where the function is constant in y."""
    both = (unwrap_all(x) == 0) & (unwrap_all(y) == 0)
    return x / np.where(both, 1.0, y)


# exprel'(u) = (u e^u - e^u + 1) / u^2 = sum_n (n+1) u^n / (n+2)!
# (twelve terms: the rule's own derivatives -- exprel's third and fourth -- stay exact)
_EXPREL_D1 = tuple((n + 1) / math.factorial(n + 2) for n in range(12))


def exprel_d1(u):
    """The derivative of exprel(u) = (e^u - 1)/u, stable at 0: a series for
    |u| < 0.2 (truncation below 1e-18), ``(e^u - exprel(u)) / u`` elsewhere
    (whose cancellation, and its derivatives', stays below 1e-13 there)."""
    return near_point(u, 0.0, 0.2, lambda t: series(t, _EXPREL_D1),
                      lambda t: (np.exp(t) - sp.exprel(t)) / t)


# h(v) = log1p(v)/v;  h'(v) = (v/(1+v) - log1p(v)) / v^2 = sum_k (-1)^k k v^(k-1)/(k+1)
_LOG1P_OVER_D1 = tuple((-1) ** k * k / (k + 1) for k in range(1, 13))


def log1p_over_d1(v):
    """The derivative of log1p(v)/v, stable at 0: a series for |v| < 0.05
    (truncation below 1e-15)."""
    return near_point(v, 0.0, 0.05, lambda t: series(t, _LOG1P_OVER_D1),
                      lambda t: (t / (1 + t) - np.log1p(t)) / (t * t))


def gamma_density(a, x):
    """d/dx gammainc(a, x) = x^(a-1) e^(-x) / Gamma(a)."""
    return np.exp(sp.xlogy(a - 1, x) - x - sp.gammaln(a))


def beta_density(a, b, x):
    """d/dx betainc(a, b, x) = x^(a-1) (1-x)^(b-1) / B(a, b)."""
    return np.exp(sp.xlogy(a - 1, x) + sp.xlog1py(b - 1, -x) - sp.betaln(a, b))
