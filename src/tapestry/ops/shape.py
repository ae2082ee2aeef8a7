"""Shape and layout operations: reshape, transpose, broadcasting, joining,
splitting, flipping, padding, diagonals.  Their VJPs only move cotangents
around, and are written with the same operations, so they nest.

Ops that only change the shape of their input (expand_dims, squeeze,
atleast_nd, ravel) are a reshape: NumPy computes the new shape on a
zero-sized probe, so its own error messages and conventions apply.
"""
from __future__ import annotations

import numpy as np

from ..core import batching
from ..core.primitive import KEEP_SHAPES, Primitive, implements, shape_of, unbroadcast
from ..core.registry import FUNCTIONS
from ..core.var import Var, copy_of_0d, reject_out, unwrap_all
from ..core.batched import NESTED, TRACED
from .common import implements_if, plain_dtype, probe, axis_index, axis_tuple
from .indexing import float_source, gather_by_labels

try:
    from numpy.lib.array_utils import normalize_axis_tuple
except ImportError:  # NumPy < 2
    from numpy.core.numeric import normalize_axis_tuple


# --- reshape and friends -----------------------------------------------------------
# Shape-only rules read ``a.shape`` (the node keeps just shapes: KEEP_SHAPES).
#: ``order`` of the reshape that is ``np.ravel``: NumPy's ravel copies an
#: array that is not contiguous in that order (``y[::-1]``, ``y[::2]``),
#: where a reshape to the same 1-d shape views it; the copy is what an update
#: of ``y`` in place must not reach (and what a view of it, ``r.ravel()``,
#: shares).
_RAVEL = {"ravel C": "C", "ravel F": "F"}


def _reshape_fun(a, shape, order):
    """``np.reshape``; an ndarray's own method skips NumPy's Python wrapper."""
    if order in _RAVEL:
        return np.ravel(a, order=_RAVEL[order])
    if type(a) is np.ndarray:
        return a.reshape(shape, order=order)
    return np.reshape(a, shape, order=order)


def _batch_reshape(prim, args, batched, kwargs):
    a, shape, order = args
    if order in _RAVEL:  # (per item: whether a copy, mark_view asks NumPy)
        order = _RAVEL[order]
        if order == "C":
            # the items laid out as NumPy's ravel leaves them: a strided
            # item is copied compact (a ravel of that copy views it)
            from ..core.var import _guard_layout, _innermost
            _guard_layout(a)
            p = _innermost(a)
            if isinstance(p, np.ndarray) and not p.flags.c_contiguous:
                a = np.copy(a, order="C")
    if order != "C" or any(batched[1:]):
        return NotImplemented  # Fortran order interleaves the batch axis
    shape = batching.item_reshape(shape, shape_of(a)[1:])
    return prim(a, (shape_of(a)[0],) + shape, order)


_reshape = Primitive(_reshape_fun, "reshape", keep=KEEP_SHAPES, linear_in=(0,),
                     batch=_batch_reshape, vjps=(
                         lambda g, ans, a, shape, order:
                         _reshape_fun(g, a.shape, _RAVEL.get(order, order)),))


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    shape = shape if shape is not None else newshape
    if order not in ("C", "F"):
        raise NotImplementedError(f"tapestry: np.reshape(order={order!r}) has no "
                                  "gradient rule; use order='C' or 'F'.")
    return _reshape(a, shape, order)


def _reshape_item(a, shape):
    """``np.reshape(a, shape)``; a traced ``a`` goes to :func:`reshape`
    (where NumPy's dispatch would send it) directly."""
    if a.__class__ is Var:
        return _reshape(a, shape, "C")
    return np.reshape(a, shape)


batching.RESHAPE[0] = _reshape_item


@implements(np.ravel)
def ravel(a, order="C"):
    if order not in ("C", "F", "A", "K"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    if order in ("A", "K"):  # the order of the value's memory: read its layout
        v = _plain_layout(a)
        if v is None and sum(d > 1 for d in shape_of(a)) > 1:
            # a batched value: its items' layouts (x.T in the item) are not
            # the batch's; vmap's per-item fallback would read them wrongly
            raise TypeError(
                f"tapestry: np.ravel / ndarray.ravel / flatten with order={order!r} reads "
                "the item's memory layout, which vmap does not track; write order='C' "
                "(row-major) or order='F' (column-major).")
        if v is None or v.ndim <= 1 or v.flags.c_contiguous:
            order = "C"
        elif v.flags.f_contiguous:
            order = "F"
        elif order == "A":
            order = "C"
        else:  # memory order of a strided value: a gather of its elements
            return _reshape(a, (-1,), "C")[_memory_order(v)]
    return _reshape(a, (-1,), "ravel F" if order == "F" else "ravel C")


def _plain_layout(a):
    """The plain array under the wrappers of ``a`` (``None`` for a batched
    value, whose items' layout is not the batch's), its layout guarded
    inside a jit trace."""
    from ..core.var import _guard_layout, _innermost
    if a.__class__ is not Var and a.__class__ is not np.ndarray:
        return None
    _guard_layout(a._value if a.__class__ is Var else a)
    v = _innermost(a)
    return v if isinstance(v, np.ndarray) else None


def _memory_order(v):
    """Positions (in C order) of ``np.ravel(v, order="K")``'s elements: the
    ravel of an index array laid out as ``v``."""
    lo = sum((n - 1) * st for n, st in zip(v.shape, v.strides) if st < 0)
    span = sum((n - 1) * abs(st) for n, st in zip(v.shape, v.strides)) + 8
    if any(st % 8 for st in v.strides):
        raise NotImplementedError("tapestry: np.ravel(x, order='K') of an array whose "
                                  "strides are not multiples of 8 bytes has no gradient "
                                  "rule; copy it first (x.copy()).")
    w = np.ndarray(v.shape, np.int64, buffer=np.zeros(span, np.uint8), offset=-lo,
                   strides=v.strides)
    w[...] = np.arange(v.size).reshape(v.shape)
    return np.ravel(w, order="K")


@implements(np.expand_dims)
def expand_dims(a, axis):
    return reshape(a, np.expand_dims(probe(np.shape(a)), axis).shape)


@implements(np.squeeze)
def squeeze(a, axis=None):
    return reshape(a, np.squeeze(probe(np.shape(a)), axis).shape)


def _atleast(np_fun):
    def atleast(*arys):
        out = [reshape(a, np_fun(probe(np.shape(a))).shape) for a in arys]
        return out[0] if len(out) == 1 else tuple(out)
    return atleast


implements(np.atleast_1d)(_atleast(np.atleast_1d))
implements(np.atleast_2d)(_atleast(np.atleast_2d))
implements(np.atleast_3d)(_atleast(np.atleast_3d))


# --- broadcasting ----------------------------------------------------------------
def _batch_broadcast_to(prim, args, batched, kwargs):
    a, shape = args
    if any(batched[1:]):
        return NotImplemented  # a per-item shape/shift/axes: the caller loops
    shape = tuple(shape)
    return prim(batching.expand_item(a, len(shape)), (shape_of(a)[0],) + shape)


_broadcast_to = Primitive(lambda a, shape: np.broadcast_to(a, shape), "broadcast_to",
                          keep=KEEP_SHAPES, linear_in=(0,), batch=_batch_broadcast_to,
                          vjps=(lambda g, ans, a, shape: unbroadcast(g, a.shape),))


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    if np.shape(array) == shape:
        return array
    return _broadcast_to(array, shape)


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    return tuple(broadcast_to(a, shape) for a in args)


# --- axis permutations ---------------------------------------------------------------
def _batch_transpose(prim, args, batched, kwargs):
    a, axes = args
    if any(batched[1:]):
        return NotImplemented  # a per-item shape/shift/axes: the caller loops
    nd = batching.item_ndim(a, True)
    axes = tuple(range(nd - 1, -1, -1)) if axes is None else axes
    return prim(a, (0,) + tuple(batching.shift_axis(int(i), nd) for i in axes))


_transpose = Primitive(lambda a, axes: np.transpose(a, axes), "transpose", keep=KEEP_SHAPES,
                       linear_in=(0,), batch=_batch_transpose,
                       vjps=(lambda g, ans, a, axes: np.transpose(
                           g, None if axes is None else tuple(np.argsort(axes))),))


@implements(np.transpose)
def transpose(a, axes=None):
    if axes is not None:
        axes = axis_tuple(tuple(int(i) for i in axes), np.ndim(a))
    return _transpose(a, axes)


def _batch_axis_args(*positions):
    """The batching rule of a primitive whose arguments at ``positions`` are
    axes (ints or tuples of ints) of its first argument: each shifts right."""
    def batch_axis_args(prim, args, batched, kwargs):
        if not batched[0] or any(batched[1:]):
            return NotImplemented
        nd = batching.item_ndim(args[0], True)
        full = list(args)
        for p in positions:
            full[p] = batching.shift_axes(full[p], nd)
        return prim(*full, **kwargs) if kwargs else prim(*full)
    return batch_axis_args


_swapaxes = Primitive(lambda a, i, j: np.swapaxes(a, i, j), "swapaxes", keep=KEEP_SHAPES,
                      linear_in=(0,), batch=_batch_axis_args(1, 2),
                      vjps=(lambda g, ans, a, i, j: np.swapaxes(g, i, j),))
implements(np.swapaxes)(lambda a, axis1, axis2: _swapaxes(a, axis1, axis2))
implements(np.matrix_transpose)(lambda x: _swapaxes(x, -1, -2))

_moveaxis = Primitive(lambda a, src, dst: np.moveaxis(a, src, dst), "moveaxis",
                      keep=KEEP_SHAPES, linear_in=(0,), batch=_batch_axis_args(1, 2),
                      vjps=(lambda g, ans, a, src, dst: np.moveaxis(g, dst, src),))
implements(np.moveaxis)(lambda a, source, destination: _moveaxis(a, source, destination))


@implements(np.rollaxis)
def rollaxis(a, axis, start=0):
    n = np.ndim(a)
    axis, start = axis % n, start % (n + 1)
    return _moveaxis(a, axis, start - 1 if start > axis else start)


# --- joining ---------------------------------------------------------------------
def _concat_vjp(i, g, ans, args, kwargs):
    axis = kwargs["axis"]
    start = sum(np.shape(x)[axis] for x in args[:i])
    stop = start + np.shape(args[i])[axis]
    return g[(slice(None),) * axis + (slice(start, stop),)]


def _batch_join(prim, args, batched, kwargs):
    """concatenate / stack: unbatched operands broadcast along the batch,
    the axis shifts one right (for stack, relative to the stacked result)."""
    n = batching.batch_size(args, batched)
    nd = batching.item_ndim(args[0], batched[0]) + (1 if prim is _stack else 0)
    xs = [x if b else np.broadcast_to(x, (n,) + tuple(shape_of(x))) for x, b in zip(args, batched)]
    return prim(*xs, axis=batching.shift_axis(kwargs["axis"], nd))


_concatenate = Primitive(lambda *xs, axis: np.concatenate(xs, axis=axis), "concatenate",
                         batch=_batch_join,
                         vjp_argnum=_concat_vjp)


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    reject_out("concatenate", out)
    arrays = list(arrays)
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    if not arrays:
        raise ValueError("tapestry: np.concatenate needs at least one array.")
    ndim = np.ndim(arrays[0])
    if ndim == 0:
        raise ValueError("tapestry: np.concatenate of zero-dimensional arrays; use "
                         "np.stack.")
    out = _concatenate(*arrays, axis=axis_index(axis, ndim))
    return out if dtype is None else out.astype(dtype)


def _stack_vjp(i, g, ans, args, kwargs):
    return g[(slice(None),) * kwargs["axis"] + (i,)]


_stack = Primitive(lambda *xs, axis: np.stack(xs, axis=axis), "stack", vjp_argnum=_stack_vjp,
                   batch=_batch_join)


@implements(np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    reject_out("stack", out)
    arrays = list(arrays)
    if not arrays:
        raise ValueError("tapestry: np.stack needs at least one array.")
    out = _stack(*arrays, axis=axis_index(axis, np.ndim(arrays[0]) + 1))
    return out if dtype is None else out.astype(dtype)


def _as_list(a):
    a = FUNCTIONS[np.atleast_1d](a)
    return list(a) if isinstance(a, tuple) else [a]


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    arrs = [FUNCTIONS[np.atleast_1d](a) for a in tup]
    return concatenate(arrs, axis=0 if np.ndim(arrs[0]) == 1 else 1, dtype=dtype)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    return concatenate([FUNCTIONS[np.atleast_2d](a) for a in tup], axis=0, dtype=dtype)


@implements(np.dstack)
def dstack(tup):
    return concatenate([FUNCTIONS[np.atleast_3d](a) for a in tup], axis=2)


@implements(np.column_stack)
def column_stack(tup):
    cols = [reshape(a, (-1, 1)) if np.ndim(a) < 2 else a for a in tup]
    return concatenate(cols, axis=1)


@implements(np.append)
def append(arr, values, axis=None):
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


# --- splitting ------------------------------------------------------------------
def _split_vjp(g, ans, a, sections, axis, np_split):
    """The pieces' cotangents, concatenated back (zeros for unused pieces)."""
    parts = [np.zeros(np.shape(p), np.result_type(p)) if c is None else c
             for c, p in zip(g, ans)]
    return np.concatenate(parts, axis=axis)


def _batch_split(prim, args, batched, kwargs):
    """Splits of a batched array: along the item's axis, one further right."""
    a, sections, axis, np_split = args
    if any(batched[1:]):
        return NotImplemented
    return prim(a, sections, batching.shift_axis(axis, batching.item_ndim(a, True)), np_split)


# n_outputs=None: the number of outputs is len(ans), known only per call.
_split = Primitive(lambda a, sections, axis, np_split: tuple(np_split(a, sections, axis)),
                   "split", n_outputs=None, batch=_batch_split, vjps=(_split_vjp,))


def _split_entry(np_split, default_axis=0):
    def split(ary, indices_or_sections, axis=default_axis):
        if np_split is np.split and np.ndim(indices_or_sections) == 0:
            np.split(probe(np.shape(ary)), indices_or_sections, axis)  # NumPy's error
        if ary.__class__ not in NESTED:  # a staged ary: NumPy's call, recorded
            return np_split(ary, indices_or_sections, axis)
        return list(_split(ary, indices_or_sections, axis_index(axis, np.ndim(ary)), np_split))
    return split


implements(np.split)(_split_entry(np.split))
implements(np.array_split)(_split_entry(np.array_split))
implements(np.hsplit)(lambda ary, ios: FUNCTIONS[np.split](
    ary, ios, axis=0 if np.ndim(ary) == 1 else 1))
implements(np.vsplit)(lambda ary, ios: FUNCTIONS[np.split](ary, ios, axis=0))
implements(np.dsplit)(lambda ary, ios: FUNCTIONS[np.split](ary, ios, axis=2))


# --- flips, rolls, tiling, repeating ---------------------------------------------
_flip = Primitive(lambda m, axis: np.flip(m, axis), "flip", linear_in=(0,),
                  batch=_batch_axis_args(1), vjps=(lambda g, ans, m, axis: np.flip(g, axis),))
implements(np.flip)(lambda m, axis=None: _flip(m, _tuple(axis)))
implements(np.fliplr)(lambda m: _flip(m, 1))
implements(np.flipud)(lambda m: _flip(m, 0))


def _tuple(axis):
    return tuple(axis) if isinstance(axis, list) else axis


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    k %= 4
    a0, a1 = axes
    if k == 0:
        return m
    if k == 2:
        return _flip(m, (a0, a1))
    perm = list(range(np.ndim(m)))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(_flip(m, a1), perm)
    return _flip(transpose(m, perm), a1)


def _neg(shift):
    return tuple(-s for s in shift) if isinstance(shift, (tuple, list)) else -shift


def _batch_roll(prim, args, batched, kwargs):
    a, shift, axis = args
    if any(batched[1:]):
        return NotImplemented  # a per-item shape/shift/axes: the caller loops
    if axis is None:  # the item is rolled flat
        return np.reshape(prim(batching.flat_items(a), shift, 1), shape_of(a))
    return _batch_axis_args(2)(prim, args, batched, kwargs)


_roll = Primitive(lambda a, shift, axis: np.roll(a, shift, axis), "roll", linear_in=(0,),
                  batch=_batch_roll,
                  vjps=(lambda g, ans, a, shift, axis: np.roll(g, _neg(shift), axis),))
implements(np.roll)(lambda a, shift, axis=None: _roll(a, shift, _tuple(axis)))


def _tile_vjp(g, ans, a, reps):
    """Sum the cotangent over the copies: view it as (r0, s0, r1, s1, ...)."""
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    d = max(np.ndim(a), len(reps))
    shape = (1,) * (d - np.ndim(a)) + tuple(np.shape(a))
    reps = (1,) * (d - len(reps)) + reps
    split = tuple(x for r, s in zip(reps, shape) for x in (r, s))
    g = np.sum(np.reshape(g, split), axis=tuple(range(0, 2 * d, 2)))
    return np.reshape(g, np.shape(a))


def _batch_tile(prim, args, batched, kwargs):
    a, reps = args
    if any(batched[1:]):
        return NotImplemented  # a per-item shape/shift/axes: the caller loops
    reps = (int(reps),) if np.ndim(reps) == 0 else tuple(reps)
    nd = max(batching.item_ndim(a, True), len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    return prim(batching.expand_item(a, nd), (1,) + reps)


_tile = Primitive(lambda a, reps: np.tile(a, reps), "tile", linear_in=(0,), batch=_batch_tile,
                  vjps=(_tile_vjp,))
implements(np.tile)(lambda A, reps: _tile(A, reps))


def _repeat_vjp(g, ans, a, repeats, axis):
    """Sum the cotangent over each element's copies along ``axis``."""
    n = np.shape(a)[axis]
    if np.ndim(repeats) == 0 or np.size(repeats) == 1:
        r = int(np.reshape(repeats, ()))
        shape = np.shape(a)
        g = np.reshape(g, shape[:axis] + (n, r) + shape[axis + 1:])
        return np.sum(g, axis=axis + 1)
    repeats = np.asarray(repeats)
    ends = np.cumsum(repeats)
    # Segment sums as differences of a cumulative sum (nestable: no reduceat).
    cs = np.cumsum(g, axis=axis)
    zero = np.zeros_like(unwrap_all(g)[(slice(None),) * axis + (slice(0, 1),)])
    cs = np.concatenate([zero, cs], axis=axis)
    take = lambda idx: cs[(slice(None),) * axis + (idx,)]  # noqa: E731
    return take(ends) - take(ends - repeats)


_repeat = Primitive(lambda a, repeats, axis: np.repeat(a, repeats, axis), "repeat",
                    linear_in=(0,), batch=_batch_axis_args(2), vjps=(_repeat_vjp,))


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    if axis is None:
        a, axis = ravel(a), 0
    return _repeat(a, unwrap_all(repeats), axis_index(axis, max(np.ndim(a), 1)))


# --- padding ---------------------------------------------------------------------
def _pad_vjp(g, ans, array, pad_width, constant_values):
    return g[tuple(slice(lo, lo + n) for (lo, _), n in zip(pad_width, np.shape(array)))]


def _batch_pad(prim, args, batched, kwargs):
    """Constant padding of a batched array: nothing added along the batch."""
    a, pad_width, constant_values = args
    if any(batched[1:]) or np.ndim(constant_values) != 0:
        return NotImplemented
    return prim(a, ((0, 0),) + tuple(tuple(p) for p in pad_width), constant_values)


_pad = Primitive(lambda a, pad_width, constant_values:
                 np.pad(a, pad_width, mode="constant", constant_values=constant_values),
                 "pad", vjps=(_pad_vjp,), batch=_batch_pad)


#: Modes whose padding copies input entries: a gather along each axis.
_GATHER_PAD_MODES = ("edge", "reflect", "symmetric", "wrap")


def _pad_by_gather(array, width, mode, kwargs):
    """``edge``/``reflect``/``symmetric``/``wrap`` padding: each padded
    entry is a copy of an input entry, so padding is ``np.take`` of the
    indices NumPy's own pad gives to ``arange(n)`` (differentiable; the
    copies' cotangents add up on their source)."""
    out = array
    for axis, (lo, hi) in enumerate(width.tolist()):
        if lo == hi == 0:
            continue
        n = np.shape(out)[axis]
        idx = np.pad(np.arange(n), (lo, hi), mode=mode, **kwargs)
        out = np.take(out, idx, axis=axis)
    return out


#: Modes whose padding is a statistic of the entries next to it.
_STAT_PAD_MODES = {"maximum": np.max, "minimum": np.min, "mean": np.mean, "median": np.median}


def _axis_slice(out, start, stop, axis):
    return out[(slice(None),) * axis + (slice(start, stop),)]


def _pad_by_stat(array, width, mode, stat_length):
    """``maximum``/``minimum``/``mean``/``median`` padding, NumPy's way: axis
    by axis (earlier axes already padded), each side the statistic of the
    first / last ``stat_length`` entries (all of them by default), so the
    pads differentiate through that reduction."""
    from numpy.lib._arraypad_impl import _as_pairs
    stat = _STAT_PAD_MODES[mode]
    lengths = _as_pairs(stat_length, np.ndim(array), as_index=True)
    out = array
    for axis, ((lo, hi), (sl, sh)) in enumerate(zip(width.tolist(), lengths)):
        if lo == hi == 0:
            continue
        n = np.shape(out)[axis]
        sl = n if sl is None or sl > n else sl
        sh = n if sh is None or sh > n else sh
        if (sl == 0 or sh == 0) and mode in ("maximum", "minimum"):
            raise ValueError("stat_length of 0 yields no value for padding")
        left = stat(_axis_slice(out, 0, sl, axis), axis=axis, keepdims=True)
        right = stat(_axis_slice(out, n - sh, n, axis), axis=axis, keepdims=True)
        shape = list(np.shape(out))
        parts = []
        for piece, k in ((left, lo), (out, None), (right, hi)):
            if k is None:
                parts.append(piece)
            elif k:
                shape[axis] = k
                parts.append(np.broadcast_to(piece, tuple(shape)))
        out = np.concatenate(parts, axis=axis)
    return out


def _pad_linear_ramp(array, width, end_values):
    """``linear_ramp`` padding, NumPy's way: axis by axis, each side
    np.linspace(end value, edge entry, width, endpoint=False) (reversed on
    the right), linear in the edge entries and the end values."""
    from numpy.lib._arraypad_impl import _as_pairs
    if _traced_leaf(end_values):
        raise TypeError("tapestry: np.pad(mode='linear_ramp') with traced end_values is not "
                        "differentiable; pass them as constants.")
    ends = _as_pairs(end_values, np.ndim(array))
    out = array
    for axis, ((lo, hi), (el, eh)) in enumerate(zip(width.tolist(), ends)):
        if lo == hi == 0:
            continue
        n = np.shape(out)[axis]
        parts = []
        for edge, end, k, rev in ((0, el, lo, False), (n - 1, eh, hi, True)):
            if not k:
                continue
            e = np.take(out, edge, axis=axis)
            ramp = np.linspace(np.asarray(end, dtype=np.result_type(out)), e, k,
                               endpoint=False, axis=axis)
            parts.append(np.flip(ramp, axis) if rev else ramp)
        out = np.concatenate(parts[:1] * bool(lo) + [out] + parts[bool(lo):], axis=axis)
    return out


def _traced_leaf(v):
    return v.__class__ in NESTED or (isinstance(v, (tuple, list))
                                     and any(_traced_leaf(u) for u in v))


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    width = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (np.ndim(array), 2))
    if mode in _GATHER_PAD_MODES:
        if kwargs.get("reflect_type", "even") != "even":
            raise NotImplementedError("tapestry: np.pad(reflect_type='odd') has no "
                                      "gradient rule; use reflect_type='even'.")
        return _pad_by_gather(array, width, mode, {})
    if mode in _STAT_PAD_MODES and np.size(array):
        if np.result_type(array).kind not in "fc":
            raise NotImplementedError(f"tapestry: np.pad(mode={mode!r}) of an integer traced "
                                      "array (NumPy rounds the statistic) has no rule.")
        return _pad_by_stat(array, width, mode, kwargs.get("stat_length"))
    if mode == "linear_ramp" and np.size(array):
        return _pad_linear_ramp(array, width, kwargs.get("end_values", 0))
    if mode != "constant":
        raise NotImplementedError(
            f"tapestry: np.pad(mode={mode!r}) has no gradient rule; the differentiable "
            f"modes are 'constant', 'linear_ramp', {', '.join(map(repr, _GATHER_PAD_MODES))}, "
            f"{', '.join(map(repr, _STAT_PAD_MODES))}. Build others from np.concatenate "
            "and slices.")
    cv = kwargs.get("constant_values", 0)
    if _traced_leaf(cv):  # a staged constant is a constant of the gradient
        raise TypeError("tapestry: np.pad with traced constant_values is not "
                        "differentiable; add the constant after padding with zeros.")
    return _pad(array, tuple(map(tuple, width.tolist())), cv)


# --- diagonals and triangles -----------------------------------------------------
def _embed_diagonal(d, n, m, offset):
    """An (..., n, m) array, zero but for ``d`` (..., k) on diagonal ``offset``.

    Built from concatenate/reshape only (flat position of entry t is
    start + t (m + 1)), so it is differentiable and nests."""
    lead = np.shape(d)[:-1]
    k = np.shape(d)[-1]
    dt = np.result_type(d)
    start = offset if offset >= 0 else -offset * m
    z = np.zeros(lead + (k, m), dt)
    flat = np.reshape(np.concatenate([np.expand_dims(d, -1), z], axis=-1),
                      lead + (k * (m + 1),))
    flat = np.concatenate([np.zeros(lead + (start,), dt), flat], axis=-1)
    total = n * m
    have = start + k * (m + 1)
    if have >= total:
        flat = flat[..., :total]
    else:
        flat = np.concatenate([flat, np.zeros(lead + (total - have,), dt)], axis=-1)
    return np.reshape(flat, lead + (n, m))


def _diagonal_vjp(g, ans, a, offset, axis1, axis2):
    shape = np.shape(a)
    n, m = shape[axis1], shape[axis2]
    full = _embed_diagonal(g, n, m, offset)
    return np.moveaxis(full, (-2, -1), (axis1, axis2))


_diagonal = Primitive(lambda a, offset, axis1, axis2: np.diagonal(a, offset, axis1, axis2),
                      "diagonal", linear_in=(0,), batch=_batch_axis_args(2, 3),
                      vjps=(_diagonal_vjp,))


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    nd = np.ndim(a)
    axis1, axis2 = axis_index(axis1, nd), axis_index(axis2, nd)
    if axis1 == axis2:
        raise ValueError("axis1 and axis2 cannot be the same")
    return _diagonal(a, offset, axis1, axis2)


@implements(np.diag)
def diag(v, k=0):
    if np.ndim(v) == 2:
        return diagonal(v, k)
    if np.ndim(v) != 1:
        raise ValueError("tapestry: np.diag needs a 1-D or 2-D input.")
    n = np.shape(v)[0] + abs(k)
    return _embed_diagonal(v, n, n, k)


implements(np.diagflat)(lambda v, k=0: diag(ravel(v), k))

def _batch_triangle(prim, args, batched, kwargs):
    """triu/tril act on the last two axes; a 1-D item is first made the
    rows of a matrix by NumPy (that case loops)."""
    if batching.item_ndim(args[0], True) < 2 or any(batched[1:]):
        return NotImplemented
    return prim(*args)


def _as_rows(m):
    """A 1-D ``m`` as NumPy's triu/tril see it: the rows of a square
    matrix (``m`` broadcast; its gradient sums them)."""
    return np.broadcast_to(m, (np.shape(m)[0],) * 2) if np.ndim(m) == 1 else m


_triu = Primitive(lambda m, k: np.triu(m, k), "triu", linear_in=(0,), batch=_batch_triangle,
                  vjps=(lambda g, ans, m, k: np.triu(g, k),))
implements(np.triu)(lambda m, k=0: _triu(_as_rows(m), k))
_tril = Primitive(lambda m, k: np.tril(m, k), "tril", linear_in=(0,), batch=_batch_triangle,
                  vjps=(lambda g, ans, m, k: np.tril(g, k),))
implements(np.tril)(lambda m, k=0: _tril(_as_rows(m), k))


# --- copies, real/imag, where ---------------------------------------------------
# Traced arrays are never written in place, so a copy is the array itself
# (a view gets an object of its own that is no view: Var.copy).
implements(np.copy)(lambda a, order="K", subok=False:
                    copy_of_0d(a, a.copy(order), array=True)
                    if hasattr(type(a), "_root") else a)
implements(np.ascontiguousarray)(lambda a, dtype=None, *, like=None: a)
implements(np.asfortranarray)(lambda a, dtype=None, *, like=None: a)


@implements(np.delete)
def delete(arr, obj, axis=None):
    obj = unwrap_all(obj)
    return gather_by_labels(lambda ls: np.delete(ls, obj, axis), arr)


@implements(np.resize)
def resize(a, new_shape):
    """``a``'s elements repeated in order; an empty ``a`` gives zeros (a constant)."""
    if 0 in shape_of(a):
        return np.resize(unwrap_all(a), new_shape)
    return gather_by_labels(lambda ls: np.resize(ls, new_shape), a)


@implements(np.insert)
def insert(arr, obj, values, axis=None):
    """``values`` (cast to ``arr``'s dtype) placed among ``arr``'s elements;
    both may be traced.  An integer ``arr`` gives a plain integer result."""
    obj, dtype = unwrap_all(obj), plain_dtype(arr)
    if dtype.kind not in "fc":
        return np.insert(unwrap_all(arr), obj, unwrap_all(values), axis)
    if not isinstance(values, TRACED):
        values = np.asarray(values)
    return gather_by_labels(lambda A, V: np.insert(A, obj, V, axis), arr,
                             float_source(values, dtype))


@implements_if("unstack")
def unstack(x, /, *, axis=0):
    np.unstack(probe(shape_of(x)), axis=axis)  # NumPy's checks
    moved = np.moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(shape_of(moved)[0]))


@implements(np.trim_zeros)
def trim_zeros(filt, trim="fb", axis=None):
    """A slice: the bounding box of the nonzero entries, found on the values.
    It moves only when an entry at its edge is exactly zero (a set of
    measure zero); the entries trimmed away are zeros and get no cotangent."""
    fv = unwrap_all(filt)
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"unexpected character(s) in `trim`: {trim!r}")
    axes = range(fv.ndim) if axis is None else normalize_axis_tuple(axis, fv.ndim, "axis")
    if not axes:
        return filt
    nz = np.argwhere(fv)
    start = nz.min(axis=0) if len(nz) else np.zeros(fv.ndim, int)
    stop = nz.max(axis=0) + 1 if len(nz) else np.zeros(fv.ndim, int)
    sl = tuple(slice(start[d] if "f" in trim else None, stop[d] if "b" in trim else None)
               if d in axes else slice(None) for d in range(fv.ndim))
    return filt[sl]


def _block_depth(arrays):
    return 1 + _block_depth(arrays[0]) if isinstance(arrays, list) and arrays else 0


def _block_probe(arrays):
    if isinstance(arrays, list):
        return [_block_probe(a) for a in arrays]
    return probe(shape_of(arrays))


@implements(np.block)
def block(arrays):
    """Nested lists joined as NumPy does: the innermost lists along the last
    axis, each level out along one axis earlier (np.concatenate's rule)."""
    np.block(_block_probe(arrays))  # NumPy's checks of the nesting
    depth = _block_depth(arrays)
    ndim = max(depth, _max_ndim(arrays))

    def join(a, level):
        if not isinstance(a, list):
            shape = shape_of(a)
            return np.reshape(a, (1,) * (ndim - len(shape)) + tuple(shape))
        return np.concatenate([join(b, level + 1) for b in a], axis=level - depth)
    return join(arrays, 0)


def _max_ndim(arrays):
    if isinstance(arrays, list):
        return max(_max_ndim(a) for a in arrays)
    return len(shape_of(arrays))


def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """Windows as a gather: the same NumPy call on an array of positions
    says which element each window entry reads (a copy, not a view)."""
    if writeable:
        raise TypeError("tapestry: sliding_window_view(..., writeable=True) would let "
                        "code write into a traced array; drop writeable=.")
    pos = np.arange(int(np.prod(np.shape(x), dtype=np.int64))).reshape(np.shape(x))
    idx = np.lib.stride_tricks.sliding_window_view(pos, window_shape, axis)
    return np.take(np.ravel(x), idx)


implements(np.lib.stride_tricks.sliding_window_view)(sliding_window_view)
