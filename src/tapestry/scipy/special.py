"""``import tapestry.scipy.special as tss``: the scipy.special functions
that are plain Python, not ufuncs, with rules.

scipy.special's ufuncs (``gamma``, ``iv``, ``betainc``, ...) dispatch on
traced arrays by themselves and need nothing from here (docs/special.md).
A few of its functions are Python wrappers that convert their input with
``np.asarray`` first, which a traced array refuses; they are called from
here instead.  On plain arrays they are SciPy's own:

- ``polygamma(n, x)``: d/dx psi^(n)(x) = psi^(n+1)(x), differentiable to
  any order in ``x``; ``n`` (an integer) is a constant.
- ``multigammaln(a, d)``: ``d(d-1)/4 log(pi) + sum_j gammaln(a - j/2)``,
  differentiable in ``a``; ``d`` is an integer.
- ``spherical_jn``, ``spherical_yn``, ``spherical_in``, ``spherical_kn``
  ``(n, z, derivative=False)``: SciPy's ufuncs behind them have rules; real
  ``z < 0`` is reflected as SciPy does (DLMF 10.47(v)) for ``jn``, ``yn``,
  ``in``; ``kn`` of a traced negative real ``z`` is refused.
- ``logsumexp(a, axis, b, keepdims)``, ``softmax(x, axis)``,
  ``log_softmax(x, axis)``: SciPy's signatures and defaults (``axis=None``:
  over all elements), tapestry's stable rules (``tapestry.numpy``'s).

Every other name is scipy.special's own object (the ufuncs dispatch).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as _sp
from scipy.special import _ufuncs as _spu

from ..core.primitive import Primitive
from ..core.batched import NESTED
from ..core.staged import plain_call
from ..core.var import unwrap_all
from ..ops.elementwise import unbroadcasting
from ..ops import reductions as _reductions
from ..ops.reductions import logsumexp as _logsumexp
from ..ops.special_common import real_only

__all__ = ["polygamma", "multigammaln", "spherical_jn", "spherical_yn", "spherical_in",
           "spherical_kn", "logsumexp", "softmax", "log_softmax"]


def _polygamma_x(g, ans, n, x):
    """d/dx psi^(n)(x) = psi^(n+1)(x): the same primitive one order up."""
    return g * _polygamma(n + 1, real_only(x, "polygamma"))


_polygamma = Primitive(_sp.polygamma, "scipy.special.polygamma",
                       vjps=(None, unbroadcasting(_polygamma_x, 1)))


def polygamma(n, x):
    """scipy.special.polygamma(n, x), differentiable in ``x``."""
    return _polygamma(n, x)


def multigammaln(a, d):
    """scipy.special.multigammaln(a, d) (the log of the multivariate gamma
    function), differentiable in ``a``; SciPy's checks on ``d`` and ``a``."""
    if a.__class__ not in NESTED:  # a staged a: SciPy's call, recorded (see plain_call)
        return plain_call(_sp.multigammaln, a, d)
    _sp.multigammaln(unwrap_all(a), d)  # SciPy's own argument checks, on the values
    d = int(d)
    terms = [_sp.gammaln(a - 0.5 * j) for j in range(d)]
    return d * (d - 1) / 4 * math.log(math.pi) + sum(terms[1:], terms[0])


def _spherical(kind, sign_n_even):
    value, slope = getattr(_spu, f"_spherical_{kind}"), getattr(_spu, f"_spherical_{kind}_d")
    scipy_fun = getattr(_sp, f"spherical_{kind}")

    def spherical(n, z, derivative=False):
        if z.__class__ not in NESTED:
            return plain_call(scipy_fun, n, z, derivative)
        n = np.asarray(n, dtype=np.dtype("long"))
        f = slope if derivative else value
        if np.iscomplexobj(z):
            return f(n, z)
        negative = unwrap_all(z) < 0
        if not np.any(negative):
            return f(n, z)
        if sign_n_even is None:
            raise NotImplementedError(
                f"tapestry: tapestry.scipy.special.spherical_{kind} of a traced negative real "
                "argument has no rule (SciPy reflects it through a complex value); pass "
                "z >= 0 or use tapestry.custom_vjp.")
        # f(n, -z) = s f(n, z) with s = +-1 by the parity of n (and one more - for f')
        s = np.where(n % 2 == 0, sign_n_even, -sign_n_even) * (-1 if derivative else 1)
        return f(n, np.abs(z)) * np.where(negative, s, 1).astype(np.result_type(unwrap_all(z)))
    spherical.__name__ = spherical.__qualname__ = f"spherical_{kind}"
    spherical.__doc__ = (f"scipy.special.spherical_{kind}(n, z, derivative), "
                         "differentiable in ``z``.")
    return spherical


spherical_jn = _spherical("jn", 1)
spherical_yn = _spherical("yn", -1)
spherical_in = _spherical("in", 1)
spherical_kn = _spherical("kn", None)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """scipy.special.logsumexp, differentiable in ``a`` and ``b``."""
    if a.__class__ not in NESTED and b.__class__ not in NESTED:
        return plain_call(_sp.logsumexp, a, axis, b, keepdims, return_sign)
    return _logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


def log_softmax(x, axis=None):
    """scipy.special.log_softmax: ``x - logsumexp(x, axis)`` (SciPy's default:
    every element; ``tnp.log_softmax`` defaults to the last axis)."""
    if x.__class__ not in NESTED:
        return plain_call(_sp.log_softmax, x, axis)
    return _reductions.log_softmax(x, axis)


def softmax(x, axis=None):
    """scipy.special.softmax: ``exp(x - logsumexp(x, axis))`` (SciPy's default:
    every element; ``tnp.softmax`` defaults to the last axis)."""
    if x.__class__ not in NESTED:
        return plain_call(_sp.softmax, x, axis)
    return _reductions.softmax(x, axis)


def __getattr__(name):
    """Every other name: scipy.special's own (its ufuncs dispatch on traced arrays)."""
    return getattr(_sp, name)
