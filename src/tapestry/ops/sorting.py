"""Sorting and order statistics: sort, partition, median, quantile/percentile.

The permutation is computed on the plain values (it is piecewise constant),
then applied as a gather; the VJP scatters the cotangent back through the
inverse permutation.  Ties follow the stable sort: each tied element gets
the cotangent of the output position it was sorted to.
"""
from __future__ import annotations

import numpy as np

from ..core import batching

from ..core.primitive import Primitive, implements
from ..core.var import reject_out, unwrap_all
from .common import axis_index, axis_tuple, traced


def _inverse_permutation(idx, axis):
    """The permutation undoing ``idx`` along ``axis``.  A batched ``idx``
    (the sort ran under a vmap outside the tape) cannot be written into in
    place; the inverse of a permutation is its argsort, which batches."""
    if idx.__class__ is not np.ndarray:
        return np.argsort(idx, axis=axis, kind="stable")
    inv = np.empty_like(idx)
    n = idx.shape[axis]
    shape = [1] * idx.ndim
    shape[axis] = n
    np.put_along_axis(inv, idx, np.arange(n).reshape(shape), axis)
    return inv


# ā = ḡ gathered by the inverse permutation (a permutation's transpose).
def _batch_take_along(prim, args, batched, kwargs):
    """take_along_axis with a batched array or index: the other broadcast
    along the batch, the axis shifted one right."""
    a, idx, axis = args
    n = batching.batch_size(args[:2], batched[:2])
    nd = batching.item_ndim(a, batched[0])
    a = a if batched[0] else np.broadcast_to(a, (n,) + tuple(batching.shape_of(a)))
    idx = idx if batched[1] else np.broadcast_to(idx, (n,) + tuple(np.shape(idx)))
    return prim(a, idx, batching.shift_axis(axis, nd))


_gather = Primitive(lambda a, idx, axis: np.take_along_axis(a, idx, axis), "sort",
                    batch=_batch_take_along, vjps=(lambda g, ans, a, idx, axis: np.take_along_axis(
                        g, _inverse_permutation(idx, axis), axis),))


def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    if order is not None:
        raise NotImplementedError("tapestry: np.sort(order=...) sorts structured "
                                  "arrays, which have no gradient.")
    if axis is None:
        a, axis = np.ravel(a), 0
    if np.ndim(a) == 0:
        return a
    axis = axis_index(axis, np.ndim(a))
    idx = np.argsort(unwrap_all(a), axis=axis, kind=kind, stable=stable)
    return _gather(a, idx, axis)


def partition(a, kth, axis=-1, kind="introselect", order=None):
    if axis is None:
        a, axis = np.ravel(a), 0
    axis = axis_index(axis, np.ndim(a))
    idx = np.argpartition(unwrap_all(a), kth, axis=axis)
    return _gather(a, idx, axis)


def _moved_sorted(a, axis):
    """Sort along ``axis`` (None: flattened) and move that axis to the front."""
    if axis is None:
        return sort(np.ravel(a)), None
    if isinstance(axis, (tuple, list)):
        axes = axis_tuple(tuple(axis), np.ndim(a))
        rest = [i for i in range(np.ndim(a)) if i not in axes]
        moved = np.transpose(a, axes + tuple(rest))
        shape = np.shape(moved)
        flat = np.reshape(moved, (-1,) + shape[len(axes):])
        return sort(flat, axis=0), axes
    axis = axis_index(axis, np.ndim(a))
    return np.moveaxis(sort(a, axis=axis), axis, 0), (axis,)


def _keep(out, a, axes, keepdims, n_q_dims):
    if not keepdims:
        return out
    nd = np.ndim(a)
    axes = tuple(range(nd)) if axes is None else axes
    qshape = np.shape(out)[:n_q_dims]
    rest = iter(np.shape(out)[n_q_dims:])
    shape = tuple(1 if i in axes else next(rest) for i in range(nd))
    return np.reshape(out, qshape + shape)


#: NumPy's continuous quantile methods: ``(alpha, beta)`` place quantile
#: ``q`` of ``n`` sorted values at ``n q + alpha + q (1 - alpha - beta) - 1``
#: (clipped to the ends).  The other methods pick one order statistic or
#: the midpoint of two: piecewise constant in ``q``.
_CONTINUOUS = {"linear": (1.0, 1.0), "weibull": (0.0, 0.0), "hazen": (0.5, 0.5),
               "interpolated_inverted_cdf": (0.0, 1.0), "median_unbiased": (1 / 3, 1 / 3),
               "normal_unbiased": (3 / 8, 3 / 8)}


def quantile_position(q, n, method):
    """The plain position of quantile ``q`` among ``n`` sorted values (a float
    between two neighbours), as NumPy's ``method`` places it: NumPy's own
    quantile of the positions ``0, ..., n-1``."""
    if method == "linear":
        return q * (n - 1)
    return np.quantile(np.arange(float(n)), q, method=method)


def quantile_slope(q, q_plain, pos, last, method):
    """How the position moves with a traced ``q``: ``slope * (q - q_plain)``,
    zero in value, the derivative of the position in ``q`` (0 at the clipped
    ends, where the position sits at ``0`` or ``last``, and for the methods
    that pick order statistics)."""
    ab = _CONTINUOUS.get(method)
    if ab is None:
        return 0.0
    slope = (last + 2.0 - ab[0] - ab[1]) * ((pos > 0) & (pos < last))
    return slope * (q - q_plain)


def check_quantiles(q, percent=False):
    """NumPy's check of ``q`` (a quantile in [0, 1], a percentile in
    [0, 100]; a nan is neither): outside, the interpolation below would
    read past the ends or extrapolate, a value where NumPy raises."""
    q = np.asarray(unwrap_all(q), dtype=float)
    top = 100.0 if percent else 1.0
    if not np.all((q >= 0.0) & (q <= top)):
        what = "Percentiles must be in the range [0, 100]" if percent else \
            "Quantiles must be in the range [0, 1]"
        raise ValueError(what)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    """Interpolation between order statistics: differentiable in ``a``
    (piecewise linear) and in ``q`` (the continuous methods; the others
    are piecewise constant in it).  Every ``method`` NumPy has places ``q``
    between two neighbouring order statistics (:func:`quantile_position`)."""
    if weights is not None:
        raise NotImplementedError("tapestry: np.quantile(weights=...) is not differentiable; "
                                  "sort the values, accumulate their weights (np.cumsum) and "
                                  "interpolate instead.")
    if interpolation is not None:
        method = interpolation  # (NumPy's deprecated name of method)
    reject_out("quantile", out)
    q_plain = np.asarray(unwrap_all(q), dtype=float)
    check_quantiles(q_plain)
    s, axes = _moved_sorted(a, axis)
    n = np.shape(s)[0]
    pos = quantile_position(q_plain, n, method)
    lo = np.floor(pos).astype(np.intp)
    hi = np.ceil(pos).astype(np.intp)
    frac = pos - lo
    if traced(q):
        frac = frac + quantile_slope(q, q_plain, pos, n - 1, method)
    dtype = np.result_type(unwrap_all(s))
    frac = frac.astype(dtype) if np.result_type(unwrap_all(frac)) != dtype else frac
    frac = np.reshape(frac, np.shape(q_plain) + (1,) * (np.ndim(s) - 1))
    res = s[lo] * (1 - frac) + s[hi] * frac
    return _keep(res, a, axes, keepdims, np.ndim(q_plain))


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    check_quantiles(q, percent=True)
    q = q / 100.0 if traced(q) else np.asarray(unwrap_all(q)) / 100.0
    return quantile(a, q, axis, out, overwrite_input, method, keepdims, weights=weights,
                    interpolation=interpolation)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The 0.5 quantile; over no values NumPy's median is the mean of an
    empty slice (nan, with its warning), where a quantile would raise."""
    shape = np.shape(a)
    axes = range(len(shape)) if axis is None else \
        [ax % len(shape) for ax in (axis if isinstance(axis, tuple) else (axis,))]
    if shape and any(shape[ax] == 0 for ax in axes):
        reject_out("median", out)
        return np.mean(a, axis=axis, keepdims=keepdims)
    return quantile(a, 0.5, axis, out, keepdims=keepdims)


implements(np.sort)(sort)
implements(np.partition)(partition)
implements(np.quantile)(quantile)
implements(np.percentile)(percentile)
implements(np.median)(median)


@implements(np.sort_complex)
def sort_complex(a):
    """A permutation along the last axis (real part first, then imaginary,
    NumPy's order), gathered with take_along_axis so its cotangent is the
    inverse permutation; the result is complex, as NumPy's."""
    plain = unwrap_all(a)
    order = np.argsort(plain, axis=-1, kind="stable")
    out = np.take_along_axis(a, order, axis=-1)
    dtype = np.sort_complex(np.zeros((1,), np.result_type(plain))).dtype
    return out if out.dtype == dtype else out.astype(dtype)
