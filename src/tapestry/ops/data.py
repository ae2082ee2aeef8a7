"""Counting and set routines whose values depend on float arguments:
``bincount`` and ``histogram`` (linear in their weights; histogram bin edges
move with the data's range), ``unique`` (its values are the first
occurrences: a gather) and ``full_like`` with a traced fill value
(``sort_complex`` is in ops/elementwise.py).

Their integer by-products (bin indices, inverse indices, counts) are
piecewise constant and come back as plain arrays.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..core.primitive import Primitive, implements
from ..core.var import Var, unwrap_all


_range = builtins.range  # ``range`` is also NumPy's argument name below


def _traced(*xs):
    return any(x.__class__ is Var for x in xs)


# --- bincount ------------------------------------------------------------------------
def _bincount_w_vjp(g, ans, x, w, minlength):
    """Each weight lands in bin ``x[i]``: its cotangent is ``g[x[i]]``."""
    c = np.take(g, x)
    return c if np.result_type(unwrap_all(c)) == w.dtype else c.astype(w.dtype)


_bincount = Primitive(lambda x, w, minlength: np.bincount(x, w, minlength), "bincount",
                      vjps=(None, _bincount_w_vjp))


@implements(np.bincount)
def bincount(x, weights=None, minlength=0):
    """Counts are constant; with ``weights`` the result is linear in them."""
    x = unwrap_all(x)
    if weights is None or weights.__class__ is not Var:
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
    from .numerics import linspace
    if np.ndim(unwrap_all(bins)) == 1:
        return bins if bins.__class__ is Var else plain_edges
    if range_ is not None:
        first, last = range_
    elif np.size(unwrap_all(a)) == 0:
        return plain_edges
    else:
        first, last = np.min(a), np.max(a)
    if not _traced(first, last):
        return plain_edges
    if unwrap_all(first) == unwrap_all(last):
        first, last = first - 0.5, last + 0.5
    e = linspace(first, last, len(plain_edges))
    return e if np.result_type(unwrap_all(e)) == plain_edges.dtype else e.astype(
        plain_edges.dtype)


def _weighted_counts(flat_bins, inside, weights, n, dtype):
    w = np.ravel(weights)[np.flatnonzero(inside)]
    c = _bincount(flat_bins[inside], w, n)
    return c if np.result_type(unwrap_all(c)) == dtype else c.astype(dtype)


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """Counts are piecewise constant in ``a``; weighted counts are linear in
    the weights; the edges (and so ``density=True``) move with the data's
    range when NumPy picks them."""
    ap, wp = unwrap_all(a), unwrap_all(weights)
    counts, edges_p = np.histogram(ap, unwrap_all(bins), unwrap_all(range), weights=wp)
    edges = hist_edges(a, bins, range, edges_p)
    if weights.__class__ is Var:
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
    if weights.__class__ is Var:
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


# --- unique ---------------------------------------------------------------------------
def _tie_split_rule(g, ans, x, first, inverse, counts, axis):
    """Each occurrence of a repeated value gets an equal share of that
    value's cotangent (as np.maximum splits ties): moving all copies
    together moves the value one for one, so the shares sum to 1."""
    share = np.take(g, inverse, axis=axis)
    scale = np.reshape(1.0 / counts[inverse], (-1,) + (1,) * (np.ndim(share) - axis - 1))
    return share * scale.astype(np.result_type(ans), copy=False)


#: ``np.unique``'s values: the first occurrences (NumPy's exact values),
#: with ties' cotangent split evenly over the copies.
_unique_values = Primitive(
    lambda x, first, inverse, counts, axis: np.take(x, first, axis=axis), "unique",
    vjps=(_tie_split_rule,))


def _unique_values_of(ar, axis, equal_nan=True):
    """Traced unique values of ``ar`` (flattened when ``axis`` is None)."""
    p = np.asarray(unwrap_all(ar))
    flat = axis is None
    _, first, inverse, counts = np.unique(np.ravel(p) if flat else p, True, True, True,
                                          axis=None if flat else axis, equal_nan=equal_nan)
    x = np.ravel(ar) if flat else ar
    return _unique_values(x, first, np.ravel(inverse), counts, 0 if flat else axis % p.ndim)


@implements(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           **kw):
    """The values are the first occurrences of each distinct entry (a
    gather, differentiable; repeated entries share the cotangent evenly);
    indices, inverse and counts are constants."""
    p = np.asarray(unwrap_all(ar))
    res = np.unique(p, True, return_inverse, return_counts, axis, **kw)
    values = _unique_values_of(ar, axis, kw.get("equal_nan", True))
    out = (values,) + ((res[1],) if return_index else ()) + tuple(res[2:])
    return out if len(out) > 1 else values


def _array_api_unique(np_fun):
    def unique_fn(x):
        p = np.asarray(unwrap_all(x))
        res = np_fun(p)
        vals = res if isinstance(res, np.ndarray) else res.values
        # the array API's unique_* keep every NaN (equal_nan=False)
        traced_vals = np.reshape(_unique_values_of(x, None, equal_nan=False), np.shape(vals))
        return traced_vals if isinstance(res, np.ndarray) else res._replace(values=traced_vals)
    unique_fn.__name__ = np_fun.__name__
    return unique_fn


for _f in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
    if hasattr(np, _f):
        implements(getattr(np, _f))(_array_api_unique(getattr(np, _f)))


# --- full_like ----------------------------------------------------------
@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    """Constant in ``a``; a traced ``fill_value`` is broadcast (its gradient
    is the sum of the output's).  ``np.full`` itself does not dispatch to
    tapestry (NumPy gives it no array argument to dispatch on)."""
    plain = np.full_like(unwrap_all(a), unwrap_all(fill_value), dtype, order, subok, shape,
                         **kw)
    if fill_value.__class__ is not Var or plain.dtype.kind not in "fc":
        return plain
    return full(plain.shape, fill_value, plain.dtype)


def full(shape, fill_value, dtype=None):
    """``np.full`` that keeps a traced ``fill_value`` traced."""
    if fill_value.__class__ is not Var:
        return np.full(shape, fill_value, dtype)
    out = np.broadcast_to(fill_value, shape)
    dtype = np.result_type(unwrap_all(fill_value)) if dtype is None else np.dtype(dtype)
    if dtype.kind not in "fc":
        return np.full(shape, unwrap_all(fill_value), dtype)
    return out if np.result_type(unwrap_all(out)) == dtype else out.astype(dtype)
