"""Helpers that several rule modules share: probing NumPy's own argument
checks on zero-cost arrays, testing for traced values, axis arithmetic."""
from __future__ import annotations

import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from ..core.primitive import declares_rules, implements
from ..core.var import unwrap_all
from ..core.batched import NESTED, TRACED


@declares_rules
def implements_if(name):
    """``implements(np.<name>)``, skipped where this NumPy lacks the function
    (astype, cumulative_sum/prod and unstack are NumPy 2 functions)."""
    fun = getattr(np, name, None)
    return implements(fun) if fun is not None else (lambda impl: impl)


def plain_dtype(x):
    """The dtype of ``x``'s value, whatever tracing levels wrap it."""
    return np.result_type(unwrap_all(x))


def probe(shape, dtype=bool):
    """A zero-cost array of ``shape``: NumPy's own checks run on it."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def traced(*xs):
    """Whether any of ``xs`` (or an element of a list/tuple among them) is
    traced by an enclosing differentiation or vmap (``NESTED``: a staged
    value takes the plain path, see ``core.batched``)."""
    for x in xs:
        if x.__class__ in NESTED:
            return True
        if type(x) in (list, tuple) and traced(*x):
            return True
    return False


def as_array(x):
    """A traced array as is; anything else (lists, scalars) as an ndarray."""
    return x if x.__class__ in TRACED else np.asarray(x)


def along(v, axis, ndim):
    """Reshape 1-D ``v`` so it broadcasts along ``axis`` of an ``ndim`` array."""
    shape = [1] * ndim
    shape[axis] = -1
    return np.reshape(v, shape)


def axis_slice(ndim, axis, s):
    """The index that applies slice ``s`` along ``axis`` of an ``ndim`` array."""
    key = [slice(None)] * ndim
    key[axis] = s
    return tuple(key)


def series(u, coefficients):
    """sum_k c_k u**k by Horner's rule (a traced ``u`` stays traced)."""
    out = coefficients[-1]
    for c in coefficients[-2::-1]:
        out = out * u + c
    return out


def near_point(x, at, radius, near, away, fill=1.0, near_fill=None):
    """``near(x)`` where ``|x - at| < radius``, ``away(x)`` elsewhere.

    The rule of a function with a removable singularity at ``at`` (sinc's
    ``(cos(pi x) - sinc(x)) / x`` at 0): ``near`` is a series, which is a
    differentiable expression, so the rule's own derivatives -- the
    function's higher derivatives -- are right at and near the point too;
    ``np.where(x == at, limit, ...)`` would give a constant there, whose
    derivative is 0.  Each branch is evaluated only on inputs where it is
    finite (``near_fill``, by default ``at``, for ``near``; ``fill`` for
    ``away``), so neither sends a NaN through ``np.where``'s derivative."""
    small = np.abs(unwrap_all(x) - at) < radius
    near_in = np.where(small, x, at if near_fill is None else near_fill)
    return np.where(small, near(near_in), away(np.where(small, fill, x)))


def axis_index(axis, ndim):
    """``axis`` (negative allowed) as an index into ``ndim`` axes, with
    NumPy's ``AxisError`` when there is no such axis: an entry point that
    wrapped it with ``axis % ndim`` instead quietly worked along another
    axis (``np.cumsum(x, axis=2)`` on a matrix summed down axis 0)."""
    return normalize_axis_index(operator.index(axis), ndim)


def is_one_axis(axis):
    """Whether ``axis`` names one axis as NumPy takes one: a Python or NumPy
    integer, or a 0-d integer array (``axis=np.argmax(x.shape)``), as
    opposed to None or a sequence of axes."""
    return isinstance(axis, (int, np.integer)) or (
        axis.__class__ is np.ndarray and axis.ndim == 0 and axis.dtype.kind in "iu")


def axis_tuple(axes, ndim):
    """:func:`axis_index` of each of ``axes`` (an int or a sequence), with
    NumPy's errors for a missing or a repeated axis."""
    return normalize_axis_tuple(axes, ndim)
