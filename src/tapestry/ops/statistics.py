"""Weighted averages and spreads: average, ptp (cov and corrcoef: composite.py).  Composites
of sums and products, differentiable in the data and in the weights."""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from ..core.primitive import Primitive, implements, shape_of
from ..core.var import astype as _var_astype, reject_out, unwrap_all
from ..core import batching
from ..core.batched import NESTED, Batched, all_items
from .common import plain_dtype, traced, axis_tuple

_range = builtins.range  # ``range`` is also NumPy's argument name below


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """``sum(a w) / sum(w)``; differentiable in ``a`` and ``weights``."""
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        scl = np.asarray(np.size(unwrap_all(a)) / max(np.size(unwrap_all(avg)), 1),
                         dtype=np.result_type(unwrap_all(avg)))
    else:
        w = weights
        if np.shape(a) != np.shape(w):
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights "
                                "differ.")
            if np.ndim(w) != 1 and np.ndim(axis) == 0:
                raise TypeError("1D weights expected when shapes of a and weights differ.")
            axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
            axes = axis_tuple(axes, np.ndim(a))
            w = np.broadcast_to(np.reshape(w, [np.shape(a)[i] if i in axes else 1
                                               for i in range(np.ndim(a))]), np.shape(a))
        scl = np.sum(w, axis=axis, keepdims=keepdims)
        if np.any(all_items(scl) == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(a * w, axis=axis, keepdims=keepdims) / scl
    if not returned:
        return avg
    if np.shape(scl) != np.shape(avg):
        scl = np.broadcast_to(scl, np.shape(avg))
    return avg, scl


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    reject_out("ptp", out)
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


# --- statistics ------------------------------------------------------------------------
def _cov_rows(m, y, rowvar, dtype):
    """The variables as rows of one 2-D array, in ``dtype`` (NumPy's layout)."""
    for a, name in ((m, "m"), (y, "y")):
        if a is not None and np.ndim(unwrap_all(a)) > 2:
            raise ValueError(f"{name} has more than 2 dimensions")
    X = np.atleast_2d(m)
    if not rowvar and shape_of(X)[0] != 1:
        X = np.transpose(X)
    if y is not None:
        Y = np.atleast_2d(y)
        if not rowvar and shape_of(Y)[0] != 1:
            Y = np.transpose(Y)
        X = np.concatenate([X, Y], axis=0)
    return X if plain_dtype(X) == dtype else _var_astype(X, dtype)


def _cov_weights(fweights, aweights, n):
    """NumPy's weight checks, then the combined weights fweights * aweights
    (or None).  Either may be traced (aweights are floats)."""
    w = None
    for weights, name in ((fweights, "fweights"), (aweights, "aweights")):
        if weights is None:
            continue
        if isinstance(weights, (list, tuple)):
            weights = np.asarray(weights)
        wv = unwrap_all(weights)
        np.cov(np.zeros((1, n)), **{name: wv})  # NumPy's own checks and messages
        w = weights if w is None else w * weights
    return w


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """The covariance as NumPy computes it, with differentiable operations
    (``(X - mean) (X - mean)^H / fact``); traced weights are differentiable too."""
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if dtype is None:
        dtype = np.result_type(plain_dtype(m), np.float64) if y is None else \
            np.result_type(plain_dtype(m), plain_dtype(y), np.float64)
    X = _cov_rows(m, y, rowvar, np.dtype(dtype))
    rows, n = shape_of(X)
    if rows == 0:
        return np.cov(np.zeros((0, n), dtype)).astype(dtype)
    ddof = (0 if bias else 1) if ddof is None else ddof
    w = _cov_weights(fweights, aweights, n)
    if w is None:
        avg, w_sum, fact = np.mean(X, axis=1), n, n - ddof
    else:
        w_sum = np.sum(w)
        avg = np.sum(X * w, axis=1) / w_sum
        fact = w_sum if ddof == 0 else (w_sum - ddof if aweights is None
                                        else w_sum - ddof * np.sum(w * aweights) / w_sum)
    if np.all(unwrap_all(fact) <= 0):
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    Xc = X - avg[:, None]
    XT = np.transpose(Xc if w is None else Xc * w)
    return np.squeeze(np.dot(Xc, np.conjugate(XT)) / fact)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """cov / (sd_i sd_j), the real and imaginary parts clipped to [-1, 1] as
    NumPy does (the clip passes the gradient at the bounds; on the diagonal,
    where the value is 1, the true derivative is 0 up to rounding)."""
    c = cov(x, y, rowvar, dtype=dtype)
    if np.ndim(unwrap_all(c)) == 0:
        return c / c
    sd = np.sqrt(np.real(np.diagonal(c)))
    c = c / sd[:, None] / sd[None, :]
    if np.iscomplexobj(unwrap_all(c)):
        return np.clip(np.real(c), -1, 1) + 1j * np.clip(np.imag(c), -1, 1)
    return np.clip(c, -1, 1)


# --- bincount ------------------------------------------------------------------------
def _bincount_w_vjp(g, ans, x, w, minlength):
    """Each weight lands in bin ``x[i]``: its cotangent is ``g[x[i]]``."""
    c = np.take(g, x)
    return c if np.result_type(unwrap_all(c)) == w.dtype else c.astype(w.dtype)


def _batch_bincount(prim, args, batched, kwargs):
    """bincount of each item's indices (and weights) at once: item ``k``'s
    indices offset by ``k`` times the item's length, one bincount, split
    into rows.  Items whose counts would differ in length (their largest
    index past ``minlength`` differs) loop, and fail to stack as a loop's
    results would."""
    x, minlength = args[0], args[-1]
    n = batching.batch_size(args, batched)
    x = np.asarray(x)
    if x.ndim != (2 if batched[0] else 1) or x.dtype.kind not in "iub" or \
            (n == 0 and batched[0]):
        return NotImplemented  # NumPy's own error, or no item to size the counts: the loop's
    items = x if batched[0] else x[None]
    m = x.shape[-1]
    lengths = {max(int(minlength), int(v.max()) + 1 if m else 0) for v in items}
    if len(lengths) > 1:
        raise batching.PerItemParameter("tapestry.vmap: np.bincount of items whose counts "
                                        "differ in length")
    size = lengths.pop()
    x = x if batched[0] else np.broadcast_to(x, (n, m))
    flat = (x + size * np.arange(n)[:, None]).reshape(n * m)
    if len(args) == 2:
        return np.reshape(prim(flat, n * size), (n, size))
    w = args[1] if batched[1] else np.broadcast_to(args[1], (n,) + tuple(np.shape(args[1])))
    return np.reshape(prim(flat, np.reshape(w, (n * m,)), n * size), (n, size))


_bincount = Primitive(lambda x, w, minlength: np.bincount(x, w, minlength), "bincount",
                      vjps=(None, _bincount_w_vjp), batch=_batch_bincount)
_counts = Primitive(lambda x, minlength: np.bincount(x, minlength=minlength), "bincount(counts)",
                    batch=_batch_bincount)


@implements(np.bincount)
def bincount(x, weights=None, minlength=0):
    """Counts are constant; with ``weights`` the result is linear in them.
    Per-item indices or weights under vmap are one bincount (see
    :func:`_batch_bincount`)."""
    if x.__class__ is Batched:
        if weights is None:
            return _counts(x, minlength)
        return _bincount(x, weights, minlength)
    x = unwrap_all(x)
    if weights is None or weights.__class__ not in NESTED:  # staged: NumPy's call
        return np.bincount(x, unwrap_all(weights), minlength)
    return _bincount(np.asarray(x), weights, minlength)


# --- histogram -----------------------------------------------------------------------
def bin_index(a, edges):
    """The bin of each value of flat ``a`` for sorted ``edges``, as NumPy
    assigns it (half-open bins, the last one closed), and which values fall
    inside."""
    idx = np.searchsorted(edges, a, side="right") - 1
    n = len(edges) - 1
    idx = np.where(a == edges[-1], n - 1, idx)
    inside = (a >= edges[0]) & (a <= edges[-1])
    return np.clip(idx, 0, max(n - 1, 0)), inside


def hist_edges(a, bins, range_, plain_edges):
    """The bin edges, traced where they move with ``a`` (an int or string
    ``bins`` spans ``range`` or the data's min and max) or with ``bins`` or
    ``range`` themselves; the plain edges otherwise."""
    from .creation import linspace
    if np.ndim(unwrap_all(bins)) == 1:
        return bins if bins.__class__ in NESTED else plain_edges
    if range_ is not None:
        first, last = range_
    elif np.size(unwrap_all(a)) == 0:
        return plain_edges
    else:
        first, last = np.min(a), np.max(a)
    if not traced(first, last):
        return plain_edges
    if unwrap_all(first) == unwrap_all(last):
        first, last = first - 0.5, last + 0.5
    e = linspace(first, last, len(plain_edges))
    return e if np.result_type(unwrap_all(e)) == plain_edges.dtype else e.astype(
        plain_edges.dtype)


def _weighted_counts(flat_bins, inside, weights, n, dtype):
    """The weights summed per bin, those of values outside the range as 0
    (not dropped: the shapes stay those of the input, the same for every
    item under vmap, where which values fall outside differs per item)."""
    w = np.where(inside, np.ravel(weights), 0)
    c = _bincount(flat_bins, w, n)
    return c if np.result_type(unwrap_all(c)) == dtype else c.astype(dtype)


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """Counts are piecewise constant in ``a``; weighted counts are linear in
    the weights; the edges (and so ``density=True``) move with the data's
    range when NumPy picks them."""
    ap, wp = unwrap_all(a), unwrap_all(weights)
    counts, edges_p = np.histogram(ap, unwrap_all(bins), unwrap_all(range), weights=wp)
    edges = hist_edges(a, bins, range, edges_p)
    if weights.__class__ in NESTED:
        idx, inside = bin_index(np.ravel(ap), edges_p)
        counts = _weighted_counts(idx, inside, weights, len(edges_p) - 1, counts.dtype)
    if density:
        counts = counts / np.diff(edges) / np.sum(counts)
    return counts, edges


@implements(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    edges_p = np.histogram_bin_edges(unwrap_all(a), unwrap_all(bins), unwrap_all(range),
                                     unwrap_all(weights))
    return hist_edges(a, bins, range, edges_p)


def _sample_columns(sample):
    if isinstance(sample, (list, tuple)):
        return [np.ravel(s) for s in sample]
    if np.ndim(sample) == 1:
        return [sample]
    return [sample[:, d] for d in range(np.shape(sample)[1])]


def _dim_arg(arg, d, ndim):
    """The per-dimension entry of a ``bins``/``range`` argument."""
    if arg is None:
        return None
    if isinstance(arg, (list, tuple)) and len(arg) == ndim:
        return arg[d]
    return arg


@implements(np.histogramdd)
def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """The d-dimensional histogram: weighted counts linear in ``weights``,
    edges traced as in :func:`histogram`."""
    cols = _sample_columns(sample)
    plain_cols = [np.asarray(unwrap_all(c)) for c in cols]
    counts, edges_p = np.histogramdd(np.stack(plain_cols, -1) if plain_cols else sample,
                                     unwrap_all(bins), unwrap_all(range),
                                     weights=unwrap_all(weights))
    nd = len(cols)
    edges = [hist_edges(cols[d], _dim_arg(bins, d, nd), _dim_arg(range, d, nd), edges_p[d])
             for d in _range(nd)]
    if weights.__class__ in NESTED:
        idx, inside = zip(*[bin_index(plain_cols[d], edges_p[d]) for d in _range(nd)])
        shape = tuple(len(e) - 1 for e in edges_p)
        flat = np.ravel_multi_index(idx, shape) if nd else np.zeros(0, np.intp)
        ok = np.logical_and.reduce(inside)
        counts = np.reshape(_weighted_counts(flat, ok, weights, int(np.prod(shape)),
                                             counts.dtype), shape)
    if density:
        total = np.sum(counts)
        for d in _range(nd):
            counts = counts / np.reshape(np.diff(edges[d]), [-1 if k == d else 1
                                                             for k in _range(nd)])
        counts = counts / total
    return counts, edges


@implements(np.histogram2d)
def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n != 1 and n != 2:
        bins = [bins, bins]
    h, edges = histogramdd([x, y], bins, range, density, weights)
    return h, edges[0], edges[1]
