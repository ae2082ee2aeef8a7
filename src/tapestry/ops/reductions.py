"""Reductions and scans: sum, mean, prod, max/min, var/std, cumsum/cumprod,
logsumexp.  Each NumPy entry point normalizes its arguments (positional or
keyword) into a primitive with explicit ``axis`` / ``keepdims``.

Every rule is written with NumPy functions (never in-place on a value that
may be traced), so the rules are themselves differentiable: ``grad(grad(f))``
works through all of them.
"""
from __future__ import annotations

import operator

import numpy as np

from ..core import batching
from ..core.primitive import KEEP_SHAPES, Primitive, declares_rules, implements, shape_of
from ..core.var import Var, astype as _var_astype, reject_out, unwrap_all
from ..core.batched import DIRECT, NESTED, TRACED, Batched, all_items, constant_values
from ..core.staged import Staged
from .common import implements_if, plain_dtype, axis_index, is_one_axis
from .elementwise import _over_nonzero


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if is_one_axis(axis):
        axis = (operator.index(axis),)
    return tuple(sorted(a % ndim if ndim else 0 for a in axis))


def expand_reduced(g, shape, axis, keepdims):
    """Broadcast a reduction's cotangent back to the input ``shape`` (a view)."""
    if axis is None and type(g) not in TRACED and len(shape) and _size(shape) < 4096:
        return np.full(shape, g, dtype=g.dtype)  # small: cheaper than broadcast_to's checks
    if axis is None and g.__class__ is Staged and len(shape) and _size(shape) < 4096:
        # inside jit: the same contiguous array np.full makes (a product's rule
        # rounds by its operand's layout), as recorded steps
        return np.copy(np.broadcast_to(g, shape))
    if not keepdims:
        g = np.reshape(g, _kept_shape(shape, axis))
    return np.broadcast_to(g, shape)


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _kept_shape(shape, axis):
    """The reduction's output shape with ``keepdims=True``."""
    axes = _axes(axis, len(shape))
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _tuple(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def no_out(name, out, where=None):
    reject_out(name, out)
    if where is not None and where is not np._NoValue and where is not True:
        raise NotImplementedError(f"tapestry: np.{name}(..., where=...) has no "
                                  "gradient rule; multiply by the mask instead.")


def where_mask(where):
    """The ``where=`` mask of a reduction as a plain boolean array, or None."""
    if where is None or where is np._NoValue or where is True:
        return None
    return constant_values(where, bool)


def _masked(a, where, fill):
    """``a`` with the entries ``where=`` leaves out replaced by the
    reduction's neutral ``fill`` (so they get a zero cotangent)."""
    w = where_mask(where)
    return a if w is None else np.where(w, a, fill)


def _float(dtype, name):
    if dtype is not None and np.dtype(dtype).kind not in "fc":
        raise TypeError(f"tapestry: np.{name}(..., dtype={np.dtype(dtype)}) makes an "
                        "integer result, which has no gradient; drop dtype=.")


def _in_dtype(a, dtype, name, integer=False):
    """``a`` in the float ``dtype=`` NumPy accumulates in (a float32 array's
    ``np.cumsum(x, dtype=np.float64)`` is float64 and summed in float64);
    without this the traced prod/cumsum/cumprod/var/std ignored ``dtype=``.
    With ``integer`` (sum, mean, prod, cumsum, cumprod: NumPy casts each
    element to the integer ``dtype`` and accumulates there, as these do on
    the cast array) an integer ``dtype`` is refused only for a value being
    differentiated: a vmapped item that is not gets NumPy's integer result."""
    if integer and dtype is not None and np.dtype(dtype).kind in "iu" and \
            not _differentiated(a):
        return _var_astype(a, dtype)
    _float(dtype, name)
    if dtype is None or np.dtype(dtype) == plain_dtype(a):
        return a
    return _var_astype(a, dtype)


def _initial_as(initial, r):
    """A plain ``initial=`` in the dtype of the reduction ``r``, as NumPy
    casts it (an int array's ``np.sum(x, initial=0.5)`` is an int; a float32
    one's ``np.max(x, initial=np.float64(0))`` float32); a traced one as is."""
    if initial.__class__ in TRACED:
        return initial
    return np.asarray(initial).astype(plain_dtype(r))


def _as_int(r, dtype):
    """``r`` in an integer ``dtype=`` (NumPy sums an int8 array in int64
    unless told otherwise; wrapping in the smaller type commutes with the
    sum and product)."""
    if dtype is None or np.dtype(dtype).kind not in "iu" or np.dtype(dtype) == plain_dtype(r):
        return r
    return _var_astype(r, dtype)


def _differentiated(a):
    """Whether ``a`` is traced for differentiation (at any vmap level)."""
    while a.__class__ is Batched:
        a = a._value
    return a.__class__ is Var


def _count(shape, axis):
    return int(np.prod([shape[i] for i in _axes(axis, len(shape))], dtype=np.int64))


# --- sum / mean -----------------------------------------------------------------
def _sum_fun(a, axis, keepdims):
    """``np.sum``; a float ndarray goes straight to ``np.add.reduce`` (what
    ``np.sum`` calls after ~2 us of Python argument handling)."""
    if type(a) is np.ndarray and a.dtype.kind in "fc":
        return np.add.reduce(a, axis=axis, keepdims=keepdims)
    return np.sum(a, axis=axis, keepdims=keepdims)


def batch_reduce(prim, args, batched, kwargs):
    """Batching rule of a reduction ``prim(a, axis, keepdims, ...)``: the
    item's axes shift one right (``None``: all of the item's)."""
    a, axis = args[0], args[1]
    nd = batching.item_ndim(a, batched[0])
    if not batched[0] or any(batched[1:]) or (nd == 0 and axis not in (None, ())):
        return NotImplemented
    full = [a, batching.shift_axes(axis, nd), *args[2:]]
    if (prim is _sum or prim is _row_sum) and not kwargs:
        prim = _row_sum  # every item's sum: one einsum when its rows are short
    return prim(*full, **kwargs) if kwargs else prim(*full)


def _sum_vjp(g, ans, a, axis, keepdims):
    return expand_reduced(g, a.shape, axis, keepdims)


_sum = Primitive(_sum_fun, "sum", keep=KEEP_SHAPES, linear_in=(0,), batch=batch_reduce,
                 vjps=(_sum_vjp,))


def _row_sum_fun(a, axis, keepdims):
    """The sum of each item of a batch (``axis``: the item's axes): one
    einsum over short trailing rows (:func:`~tapestry.core.batching.trailing_sum`),
    else ``np.sum``."""
    if type(a) is np.ndarray or a.__class__ is Staged:
        nd = len(a.shape)
        s = batching.trailing_sum(a, _axes(axis, nd) if axis is not None or nd else ())
    else:
        s = None
    if s is None:
        return _sum_fun(a, axis, keepdims)
    return np.reshape(s, _kept_shape(a.shape, axis)) if keepdims else s


_row_sum = Primitive(_row_sum_fun, "sum_per_item", keep=KEEP_SHAPES, linear_in=(0,), batch=batch_reduce,
                     vjps=(_sum_vjp,))


def sum_(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    no_out("sum", out)
    a = _in_dtype(a, dtype, "sum", integer=True)
    s = _sum(_masked(a, where, 0), _tuple(axis), keepdims)
    return _as_int(s if initial is None else s + _initial_as(initial, s), dtype)


def _mean_vjp(g, ans, a, axis, keepdims):
    n = _count(a.shape, axis)
    if n == 0:  # a mean over no values (nan): an empty cotangent, without 1/0's warning
        return expand_reduced(g * 0, a.shape, axis, keepdims)
    return expand_reduced(g / n, a.shape, axis, keepdims)


_mean = Primitive(lambda a, axis, keepdims: np.mean(a, axis=axis, keepdims=keepdims), "mean",
                  keep=KEEP_SHAPES, linear_in=(0,), batch=batch_reduce, vjps=(_mean_vjp,))


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    no_out("mean", out)
    a = _in_dtype(a, dtype, "mean", integer=True)
    w = where_mask(where)
    if w is not None:  # the mean of the selected entries: sum / count
        count = np.sum(np.broadcast_to(w, np.shape(a)), axis=_tuple(axis), keepdims=keepdims
                       ).astype(np.result_type(unwrap_all(a), np.float16))
        with np.errstate(invalid="ignore", divide="ignore"):
            m = sum_(a, axis, keepdims=keepdims, where=w) / count
        return m if dtype is None else m.astype(dtype)
    m = _mean(a, _tuple(axis), keepdims)
    return m if dtype is None else m.astype(dtype)


# --- prod -------------------------------------------------------------------------
def _to_last(a, axis):
    """Move the reduced axes of ``a`` to the end and merge them into one.

    Returns the (n_kept..., n) array and the information to undo it."""
    shape = np.shape(a)
    axes = _axes(axis, len(shape))
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    perm = kept + axes
    moved = np.transpose(a, perm)
    lead = tuple(shape[i] for i in kept)
    n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    return np.reshape(moved, lead + (n,)), (perm, np.shape(moved))


def _from_last(b, info):
    perm, moved_shape = info
    return np.transpose(np.reshape(b, moved_shape), tuple(np.argsort(perm)))


def _exclusive_cumprod(b):
    """Products of the elements strictly before each position (last axis)."""
    ones = np.ones(np.shape(b)[:-1] + (1,), dtype=np.result_type(b))
    return np.cumprod(np.concatenate([ones, b[..., :-1]], axis=-1), axis=-1)


def _prod_vjp(g, ans, a, axis, keepdims):
    """d prod(a) / d a_i = prod_{j != i} a_j, computed exactly (zeros included)
    as the product of the exclusive cumulative products from both ends."""
    if np.size(a) == 0:
        return np.zeros(np.shape(a), np.result_type(g))
    b, info = _to_last(a, axis)
    left = _exclusive_cumprod(b)
    right = np.flip(_exclusive_cumprod(np.flip(b, -1)), -1)
    others = _from_last(left * right, info)
    return expand_reduced(g, np.shape(a), axis, keepdims) * others


_prod = Primitive(lambda a, axis, keepdims: np.prod(a, axis=axis, keepdims=keepdims), "prod",
                  batch=batch_reduce,
                  vjps=(_prod_vjp,))


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    no_out("prod", out)
    a = _in_dtype(a, dtype, "prod", integer=True)
    p = _prod(_masked(a, where, 1), _tuple(axis), keepdims)
    return _as_int(p if initial is None else p * _initial_as(initial, p), dtype)


# --- max / min ----------------------------------------------------------------------
def _extremum_vjp(g, ans, a, axis, keepdims):
    """The cotangent goes to the elements equal to the extremum, split evenly
    among ties (so max(x, x) has derivative 1, like the binary maximum).  A
    NaN result (np.max propagates NaN) sends it to the NaN entries."""
    shape = np.shape(a)
    ans_e = np.reshape(ans, _kept_shape(shape, axis))
    hit = a == ans_e
    plain = unwrap_all(ans)
    if plain.__class__ in TRACED or np.isnan(plain).any():  # batched: no branch per item
        hit = hit | (np.isnan(a) & np.isnan(ans_e))
    count = np.sum(hit, axis=_axes(axis, len(shape)), keepdims=True)
    weight = (hit / np.maximum(count, 1)).astype(np.result_type(ans), copy=False)
    # np.where, not a product: forward mode transposes this rule with the
    # tangent as g, and nanmax's NaN entries may carry NaN tangents
    return np.where(hit, expand_reduced(g, shape, axis, keepdims) * weight, 0)


@declares_rules
def extremum_primitive(np_fun, name):
    return Primitive(lambda a, axis, keepdims: np_fun(a, axis=axis, keepdims=keepdims), name,
                     batch=batch_reduce, vjps=(_extremum_vjp,))


_max, _min = extremum_primitive(np.max, "max"), extremum_primitive(np.min, "min")


def extremum_entry(prim, name, combine, np_fun):
    """max/min with NumPy's ``initial=`` (the result when nothing is
    reduced, and a floor/ceiling otherwise) and ``where=`` (the entries left
    out take the value ``initial``, which NumPy requires with a mask)."""
    def extremum(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        no_out(name, out)
        axis = _tuple(axis)
        if where_mask(where) is not None:
            if initial is None:  # NumPy's own error: no identity without initial
                np_fun(unwrap_all(a), axis=axis, keepdims=keepdims, where=where_mask(where))
            a = _masked(a, where, _initial_as(initial, a))
        if initial is not None and _count(np.shape(a), axis) == 0:
            plain = np_fun(unwrap_all(a), axis=axis, keepdims=keepdims,
                           initial=unwrap_all(initial))
            return plain if initial.__class__ not in TRACED else \
                np.broadcast_to(initial, np.shape(plain)).astype(plain.dtype)
        m = prim(a, axis, keepdims)
        return m if initial is None else combine(m, _initial_as(initial, m))
    extremum.__name__ = name
    return extremum


implements(np.sum)(sum_)


def _sum_of_items(v):
    """``np.sum(x)`` of one batched ``x`` (its value ``v``): what
    :func:`sum_`'s call ``_sum(x, None, False)`` runs, through its batching
    rule, reached directly (every vmapped item's ``np.sum``)."""
    return batch_reduce(_sum, [v, None, False], (True, False, False), {})


DIRECT[np.sum] = _sum_of_items
implements(np.mean)(mean)
implements(np.prod)(prod)
implements(np.max, np.amax)(extremum_entry(_max, "max", np.maximum, np.max))
implements(np.min, np.amin)(extremum_entry(_min, "min", np.minimum, np.min))


# --- var / std -------------------------------------------------------------------
def _centered(a, axis):
    return a - np.mean(a, axis=axis, keepdims=True)


def _centered_conj(g, a, axis, keepdims):
    """``Re(g)`` broadcast back, and ``conj(a - mean(a))``: var and std of a
    complex array are real (mean of ``|a - mean(a)|^2``), and
    d|a - m|^2 = 2 Re(conj(a - m) d(a - m)); the ``dm`` terms sum to zero.
    For a real array these are ``g`` and ``a - mean(a)``."""
    c = _centered(a, axis)
    if np.iscomplexobj(c):
        g, c = np.real(g), np.conjugate(c)
    return expand_reduced(g, np.shape(a), axis, keepdims), c


def _var_vjp(g, ans, a, axis, ddof, keepdims):
    """d var / d a = 2 conj(a - mean(a)) / (n - ddof)."""
    with np.errstate(divide="ignore"):  # ddof >= n: NumPy's divisor 0, var inf
        scale = np.float64(2.0) / max(_count(np.shape(a), axis) - ddof, 0)
    g, c = _centered_conj(g, a, axis, keepdims)
    return g * (c * scale)


def _std_vjp(g, ans, a, axis, ddof, keepdims):
    """d std / d a = conj(a - mean(a)) / ((n - ddof) std); 0 where std == 0
    (all entries equal: the subgradient of least norm, whose own derivative,
    std's second, is NaN there: see elementwise._over_nonzero).  Over one
    entry per group std is 0 whatever ``a`` is: every derivative is 0 (a
    zero cotangent, whose own derivatives are zero, not NaN)."""
    if _count(np.shape(a), axis) == 1:
        g, c = _centered_conj(g, a, axis, keepdims)
        return g * (c * 0.0)
    std_e = np.reshape(ans, _kept_shape(np.shape(a), axis))
    g, c = _centered_conj(g, a, axis, keepdims)
    return g * _over_nonzero(c, std_e * (_count(np.shape(a), axis) - ddof))


_var = Primitive(lambda a, axis, ddof, keepdims:
                 np.var(a, axis=axis, ddof=ddof, keepdims=keepdims), "var", vjps=(_var_vjp,),
                 batch=batch_reduce)
_std = Primitive(lambda a, axis, ddof, keepdims:
                 np.std(a, axis=axis, ddof=ddof, keepdims=keepdims), "std", vjps=(_std_vjp,),
                 batch=batch_reduce)


def _moment_entry(prim, name):
    def moment(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
               where=None, mean=None, correction=None):
        no_out(name, out)
        ddof = correction if correction is not None else ddof
        a = _in_dtype(a, dtype, name)
        w = where_mask(where)
        if mean is not None:
            v = _var_about(a, mean, _tuple(axis), ddof, keepdims, w)
            return v if prim is _var else _sqrt_or_zero(v)
        if w is not None:
            v = _masked_var(a, _tuple(axis), ddof, keepdims, w)
            return v if prim is _var else _sqrt_or_zero(v)
        return prim(a, _tuple(axis), ddof, keepdims)
    moment.__name__ = name
    return moment


def _masked_var(a, axis, ddof, keepdims, w):
    """``np.var(a, where=w)``: the mean square deviation of the selected
    entries from their own mean, over ``count - ddof``; a composite of
    differentiable operations (entries left out get a zero cotangent)."""
    w = np.broadcast_to(w, np.shape(a))
    count = np.sum(w, axis=axis, keepdims=True).astype(np.result_type(unwrap_all(a), np.float16))
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.sum(np.where(w, a, 0), axis=axis, keepdims=True) / count
        dev = np.where(w, a - mu, 0)
        sq = np.real(dev * np.conjugate(dev)) if np.iscomplexobj(unwrap_all(dev)) else dev * dev
        v = np.sum(sq, axis=axis, keepdims=True) / (count - ddof)
    return v if keepdims else np.squeeze(v, axis=_axes(axis, np.ndim(a)))


def _var_about(a, mean, axis, ddof, keepdims, w):
    """``np.var(a, mean=m)`` (NumPy 2): the mean square deviation from the
    given ``m`` (keepdims-shaped, as NumPy requires), over ``count - ddof``
    (floored at 0, as NumPy's); differentiable in ``a`` and in ``m``."""
    dev = a - mean
    sq = np.real(dev * np.conjugate(dev)) if np.iscomplexobj(unwrap_all(dev)) else dev * dev
    if w is None:
        count = _count(np.shape(a), axis)
        total = np.sum(sq, axis=axis, keepdims=keepdims)
    else:
        w = np.broadcast_to(w, np.shape(a))
        count = np.sum(w, axis=axis, keepdims=keepdims)
        total = np.sum(np.where(w, sq, 0), axis=axis, keepdims=keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / np.maximum(count - ddof, 0)


def _sqrt_or_zero(v):
    """``sqrt(v)`` whose gradient is 0 where ``v == 0`` (std of equal
    entries: the convention of np.std's own rule) instead of inf * 0."""
    pos = v > 0
    return np.where(pos, np.sqrt(np.where(pos, v, 1)), 0 * v)  # 0 * v: keeps a NaN


implements(np.var)(_moment_entry(_var, "var"))
implements(np.std)(_moment_entry(_std, "std"))


# --- cumsum / cumprod ------------------------------------------------------------
def _reverse_cumsum(g, axis):
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


def batch_scan(prim, args, batched, kwargs):
    """Batching rule of a scan ``prim(a, axis)``: the axis shifts one right;
    ``None`` (the flattened item) scans each item's own ravel."""
    a, axis = args
    if not batched[0] or batched[1]:  # a per-item axis: the caller loops
        return NotImplemented
    if axis is None:
        return prim(batching.flat_items(a), 1)
    return prim(a, batching.shift_axis(axis, batching.item_ndim(a, True)))


_cumsum = Primitive(lambda a, axis: np.cumsum(a, axis=axis), "cumsum", batch=batch_scan,
                    linear_in=(0,), vjps=(lambda g, ans, a, axis: _reverse_cumsum(g, axis),))


def _cumprod_vjp(g, ans, a, axis):
    """d ans_k / d a_i = prod_{j <= k, j != i} a_j for k >= i.

    Away from zeros that is ans_k / a_i, giving reverse_cumsum(g ans) / a.
    Entries after the first zero along the axis get 0; the first zero itself
    gets reverse_cumsum(g c) with c the cumprod of a with that zero set to 1.
    Exact with zeros, O(n).  Where a slice holds two zeros or more and the
    rule is itself differentiated, the 0 of the later entries is not a
    constant (it moves with the first zero): :func:`_cumprod_vjp_exact`."""
    zero = unwrap_all(a) == 0
    safe = np.where(zero, 1.0, a)
    regular = _reverse_cumsum(g * ans, axis) / safe
    if not all_items(zero).any():  # any item's zeros: the general path is exact for all
        return regular
    if a.__class__ in NESTED and np.count_nonzero(all_items(zero)) >= 2:
        return _cumprod_vjp_exact(g, a, axis)
    first = zero & (np.cumsum(zero, axis=axis) == 1)
    at_first = _reverse_cumsum(g * np.cumprod(np.where(first, 1.0, a), axis=axis), axis)
    return np.where(zero, np.where(first, at_first, 0.0), regular)


def _cumprod_vjp_exact(g, a, axis):
    """The cumprod cotangent without division, exact to every order:
    ``L_i R_i`` with ``L_i = prod_{j<i} a_j`` and the reverse recurrence
    ``R_i = g_i + a_{i+1} R_{i+1}``.  One step per entry of the axis, so it
    is kept for the rare slice with two zeros or more under a nested
    derivative (the quotient form drops the second derivative there)."""
    b, gb = np.moveaxis(a, axis, -1), np.moveaxis(g, axis, -1)
    n = np.shape(b)[-1]
    rs = [gb[..., n - 1]]
    for i in range(n - 2, -1, -1):
        rs.append(gb[..., i] + b[..., i + 1] * rs[-1])
    out = _exclusive_cumprod(b) * np.stack(rs[::-1], axis=-1)
    return np.moveaxis(out, -1, axis)


_cumprod = Primitive(lambda a, axis: np.cumprod(a, axis=axis), "cumprod", batch=batch_scan,
                     vjps=(_cumprod_vjp,))


def _scan_entry(prim, name):
    def scan(a, axis=None, dtype=None, out=None):
        no_out(name, out)
        a = _in_dtype(a, dtype, name, integer=True)
        if axis is None:
            return _as_int(prim(np.ravel(a), 0), dtype)
        return _as_int(prim(a, axis_index(axis, max(np.ndim(a), 1))), dtype)
    scan.__name__ = name
    return scan


implements(np.cumsum)(_scan_entry(_cumsum, "cumsum"))
implements(np.cumprod)(_scan_entry(_cumprod, "cumprod"))


# --- logsumexp --------------------------------------------------------------------
def _logsumexp_fwd(a, b, axis, keepdims):
    m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(a - m)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(e if b is None else b * e, axis=axis, keepdims=True)) + m
    if keepdims:
        return out
    axes = _axes(axis, np.ndim(a))
    return np.reshape(out, tuple(n for i, n in enumerate(np.shape(a)) if i not in axes))


def _lse_weights(ans, a, axis, keepdims):
    """exp(a - logsumexp(a)): the softmax weights."""
    return np.exp(a - np.reshape(ans, _kept_shape(np.shape(a), axis)))


def _lse_vjp_a(g, ans, a, b, axis, keepdims):
    """d/da log sum b e^a = b e^a / sum(b e^a)."""
    w = _lse_weights(ans, a, axis, keepdims)
    w = w if b is None else w * b
    return expand_reduced(g, np.shape(a), axis, keepdims) * w


def _lse_vjp_b(g, ans, a, b, axis, keepdims):
    """d/db log sum b e^a = e^a / sum(b e^a)."""
    from ..core.primitive import unbroadcast
    w = _lse_weights(ans, a, axis, keepdims)
    return unbroadcast(expand_reduced(g, np.shape(w), axis, keepdims) * w, np.shape(b))


def _batch_logsumexp(prim, args, batched, kwargs):
    """``logsumexp(a, b, axis, keepdims)``: the axes shift one right; ``b``
    batched with ``a`` or absent."""
    a, b, axis, keepdims = args
    if not batched[0] or (b is not None and not batched[1]):
        return NotImplemented
    if b is not None:
        b = batching.expand_item(b, batching.item_ndim(a, True))
    return prim(a, b, batching.shift_axes(axis, batching.item_ndim(a, True)), keepdims)


_logsumexp = Primitive(_logsumexp_fwd, "logsumexp", batch=_batch_logsumexp,
                       vjps=(_lse_vjp_a, _lse_vjp_b))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(a), axis))``, computed stably; the signature of
    ``scipy.special.logsumexp``.  Differentiable in ``a`` and ``b``."""
    if b is not None:
        shape = np.broadcast_shapes(np.shape(a), np.shape(b))
        a = a if np.shape(a) == shape else np.broadcast_to(a, shape)
    if return_sign:
        return _logsumexp_signed(a, b, _tuple(axis), keepdims)
    return _logsumexp(a, b, _tuple(axis), keepdims)


def _logsumexp_signed(a, b, axis, keepdims):
    """``(log|sum(b e^a)|, sign(sum(b e^a)))``, SciPy's ``return_sign=True``
    (a negative ``b`` can make the sum negative, where the log alone is NaN).
    A composite of differentiable operations, so every transform follows:
    the shift by the maximum is held constant (the result does not depend
    on it), the sign is a constant, and ``d log|s| = ds / s``."""
    from ..core.api import stop_gradient
    m = stop_gradient(np.max(a, axis=axis, keepdims=True))
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(a - m)
    s = np.sum(e if b is None else b * e, axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        out = np.log(np.abs(s)) + m
    sign = np.sign(s)
    if not keepdims:
        axes = _axes(axis, np.ndim(a))
        out, sign = np.squeeze(out, axis=axes), np.squeeze(sign, axis=axes)
    return out, sign


def log_softmax(x, axis):
    """``x - logsumexp(x, axis)``: the one implementation behind
    ``tnp.log_softmax`` (default ``axis=-1``, as ``jax.nn``) and
    ``tapestry.scipy.special.log_softmax`` (default ``axis=None``, as SciPy)."""
    return x - logsumexp(x, axis=axis, keepdims=True)


def softmax(x, axis):
    """``exp(log_softmax(x, axis))``, stable; see :func:`log_softmax`."""
    return np.exp(log_softmax(x, axis))


def _cumulative(scan, initial, name):
    def cumulative(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        reject_out(name, out)
        shape = shape_of(x)
        # NumPy's checks (they depend on the number of axes only): a tiny probe.
        getattr(np, name)(np.zeros(tuple(min(n, 1) for n in shape)), axis=axis)
        if dtype is not None:
            x = _var_astype(x, dtype)
            if np.dtype(dtype).kind not in "fc":
                return getattr(np, name)(x, axis=axis, include_initial=include_initial)
        axis = 0 if axis is None else axis_index(axis, len(shape))
        y = scan(x, axis=axis)
        if not include_initial:
            return y
        first = list(shape)
        first[axis] = 1
        return np.concatenate([np.full(first, initial, plain_dtype(y)), y], axis=axis)
    cumulative.__name__ = name
    return cumulative


implements_if("cumulative_sum")(_cumulative(np.cumsum, 0, "cumulative_sum"))
implements_if("cumulative_prod")(_cumulative(np.cumprod, 1, "cumulative_prod"))
