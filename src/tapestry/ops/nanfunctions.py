"""The ``nan*`` reductions and scans that ignore NaNs: nanprod, nanvar,
nanstd, nancumsum, nancumprod, nanquantile, nanpercentile, nanmedian
(nansum, nanmean, nanmax and nanmin live in :mod:`.reductions`).

Each replaces the NaNs by the operation's neutral value *before* any
arithmetic, so that no NaN reaches a rule: the cotangent of a NaN entry is
exactly zero (a ``np.where`` after the fact would give ``0 * nan = nan``).
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import implements
from ..core.var import reject_out, unwrap_all
from ..core.batched import Batched, all_items, constant_values
from .reductions import extremum_entry, extremum_primitive, no_out, sum_, where_mask
from .common import traced
from .sorting import _keep, _moved_sorted, check_quantiles, quantile_position, quantile_slope


def _nan_mask(a):
    return np.isnan(constant_values(a))


def _any_nan(a):
    """Whether ``a`` holds a NaN; of any item, where a vmap runs outside the
    differentiation (``vmap(grad(f))``: one branch for the batch, and the
    NaN-aware one gives each item without NaNs what the other would)."""
    mask = _nan_mask(a)
    if mask.__class__ is Batched:
        return bool(np.isnan(all_items(a)).any())
    return mask.any()


def _tuple(axis):
    return tuple(axis) if isinstance(axis, list) else axis


@implements(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    reject_out("nanprod", out)
    kw = {} if where is None else {"where": where}
    return np.prod(np.where(_nan_mask(a), 1.0, a), axis=_tuple(axis), dtype=dtype,
                   keepdims=keepdims, initial=initial, **kw)


@implements(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    reject_out("nancumsum", out)
    return np.cumsum(np.where(_nan_mask(a), 0.0, a), axis=axis, dtype=dtype)


@implements(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    reject_out("nancumprod", out)
    return np.cumprod(np.where(_nan_mask(a), 1.0, a), axis=axis, dtype=dtype)


def _nanvar(a, axis, ddof, keepdims, where):
    """Variance of the non-NaN entries, with every denominator kept away
    from zero on the values it does not decide (all-NaN slices and
    ``n <= ddof`` give NaN, as in NumPy, without NaN in other gradients)."""
    valid = ~_nan_mask(a)
    if where is not None:
        valid = valid & constant_values(where, bool)
    a0 = np.where(valid, a, 0.0)
    ft = np.result_type(unwrap_all(a0))  # counts in a's float type: no promotion
    n = np.sum(valid, axis=axis, keepdims=True)
    m = np.sum(a0, axis=axis, keepdims=True) / np.maximum(n, 1).astype(ft)
    d = np.where(valid, a0 - m, 0.0)
    dof = np.sum(valid, axis=axis, keepdims=keepdims) - ddof
    if ft.kind == "c":  # |d|^2, real (as NumPy's): d * d is not the variance of complex values
        sq, ft = np.real(d) ** 2 + np.imag(d) ** 2, np.finfo(ft).dtype
    else:
        sq = d * d
    v = np.sum(sq, axis=axis, keepdims=keepdims) / np.where(dof > 0, dof, 1).astype(ft)
    return np.where(dof > 0, v, np.nan), dof > 0


def _moment_args(name, out, mean, correction, ddof):
    reject_out(name, out)
    if mean is not None:
        raise NotImplementedError(f"tapestry: np.{name}(..., mean=...) is not supported; "
                                  "let NumPy compute the mean.")
    return correction if correction is not None else ddof


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    ddof = _moment_args("nanvar", out, mean, correction, ddof)
    return _nanvar(a, _tuple(axis), ddof, keepdims, where)[0]


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """sqrt(nanvar), with derivative 0 where the variance is 0 (the
    subgradient of least norm, as np.std's rule)."""
    ddof = _moment_args("nanstd", out, mean, correction, ddof)
    v, ok = _nanvar(a, _tuple(axis), ddof, keepdims, where)
    flat = (constant_values(v) == 0) | ~ok
    s = np.where(flat, 0.0, np.sqrt(np.where(flat, 1.0, v)))
    return s if np.all(all_items(ok)) else np.where(ok, s, np.nan)


def _cast(y, dtype):
    return y if np.result_type(unwrap_all(y)) == dtype else y.astype(dtype)


def _quantile_dtype(a, q):
    """NumPy's result dtype: ``a``'s, promoted by ``q`` unless ``q`` is a
    Python scalar (weak under NEP 50)."""
    q = unwrap_all(q)
    q = q if isinstance(q, (float, int, np.ndarray, np.generic)) else np.asarray(q)
    return np.result_type(np.result_type(unwrap_all(a)), q, np.float16)


def _positions(q, column, nvalid, method):
    """The position of each quantile ``q`` among each slice's ``nvalid``
    valid values (shape ``column`` broadcast against ``nvalid``; 0 in a
    slice of NaNs only, whose result is then NaN, as NumPy's)."""
    if method == "linear":
        return np.reshape(q, column) * (nvalid - 1)
    pos = np.zeros(np.broadcast_shapes(column, np.shape(nvalid)))
    counts = all_items(nvalid) if nvalid.__class__ is Batched else nvalid
    for n in np.unique(counts):
        if n > 0:
            pos = np.where(nvalid == n, np.reshape(quantile_position(q, n, method), column), pos)
    return pos


@implements(np.nanquantile)
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """Interpolation between the order statistics of the non-NaN entries of
    each slice, placed as np.quantile's ``method`` places them among that
    many values; without NaNs, np.quantile's rule."""
    reject_out("nanquantile", out)
    dtype = _quantile_dtype(a, q)
    if weights is not None or not _any_nan(a):
        return _cast(np.quantile(a, q, axis=axis, method=method, keepdims=keepdims,
                                 weights=weights), dtype)
    q_plain = np.asarray(unwrap_all(q), dtype=float)
    check_quantiles(q_plain)
    s, axes = _moved_sorted(a, _tuple(axis))  # NaNs sort last
    rest = np.shape(s)[1:]
    nvalid = np.sum(~np.isnan(constant_values(s)), axis=0)
    column = q_plain.shape + (1,) * len(rest)
    pos = _positions(q_plain, column, nvalid, method)
    lo = np.clip(np.floor(pos), 0, None).astype(np.intp)
    hi = np.clip(np.minimum(np.ceil(pos), nvalid - 1), 0, None).astype(np.intp)
    frac = np.clip(pos - lo, 0, 1)
    if traced(q):  # the position moves with q inside each slice's valid values
        frac = frac + quantile_slope(np.reshape(q, column), np.reshape(q_plain, column), pos,
                                     nvalid - 1, method)
    frac = _cast(frac, dtype)
    q = q_plain
    flat = (-1,) + rest
    vlo = np.take_along_axis(s, np.reshape(lo, flat), axis=0)
    vhi = np.take_along_axis(s, np.reshape(hi, flat), axis=0)
    res = np.reshape(vlo * (1 - np.reshape(frac, flat)) + vhi * np.reshape(frac, flat),
                     q.shape + rest)
    return _cast(_keep(res, a, axes, keepdims, q.ndim), dtype)


@implements(np.nanpercentile)
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    check_quantiles(q, percent=True)
    if traced(q):
        q = q / 100.0
    else:
        q = unwrap_all(q)
        q = q / 100.0 if isinstance(q, (float, int)) else np.asarray(q) / 100.0
    return nanquantile(a, q, axis, out, overwrite_input, method, keepdims, weights=weights)


@implements(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return nanquantile(a, 0.5, axis, out, keepdims=keepdims)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """NaNs count as zero, so they get a zero gradient."""
    no_out("nansum", out)
    return sum_(np.where(np.isnan(a), 0.0, a), axis, dtype=dtype, keepdims=keepdims,
                initial=initial, where=where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    no_out("nanmean", out)
    valid = ~np.isnan(a)
    if where_mask(where) is not None:
        valid = valid & where_mask(where)
    count = np.sum(valid, axis=_tuple(axis), keepdims=keepdims)
    total = sum_(np.where(valid, a, 0.0), axis, dtype=dtype, keepdims=keepdims)
    return total / count.astype(np.result_type(unwrap_all(total), np.float16))


_nanmax, _nanmin = extremum_primitive(np.nanmax, "nanmax"), extremum_primitive(np.nanmin, "nanmin")


implements(np.nansum)(nansum)
implements(np.nanmean)(nanmean)


implements(np.nanmax)(extremum_entry(_nanmax, "nanmax", np.fmax, np.nanmax))
implements(np.nanmin)(extremum_entry(_nanmin, "nanmin", np.fmin, np.nanmin))
