"""Indexing: ``x[key]``, ``np.take``, ``np.take_along_axis``.

The forward pass is NumPy's own indexing.  The VJP puts the cotangent back
where it was read from:

* a *gather along one axis* -- one integer array, integer or 1-D boolean
  mask on one axis, full slices ``:`` (or ``...``) on the others, e.g.
  ``W[S]``, ``W[:, S]``, ``W[S, :]``, ``E[tokens]``, ``np.take(W, S, axis=a)``
  -- gives an :class:`~tapestry.sparse.AxisSparse` cotangent: O(|S|), no
  zeros of ``W``'s size.  Repeated indices are kept and add up when the
  cotangent is coalesced or applied.
* any other key gives a dense scatter: plain assignment for basic indexing
  (no index can repeat), ``np.add.at`` when advanced indices may repeat.
* under nested differentiation (the cotangent is itself traced) the scatter
  is a primitive whose VJP is the gather, so higher derivatives work.

``np.take`` and ``np.take_along_axis`` are rewritten as ``x[key]`` with the
equivalent key, so they share this rule.
"""
from __future__ import annotations

import operator

import numpy as np

from ..core import batching
from ..core.primitive import (KEEP_SHAPES, Primitive, dtype_of, implements, shape_of,
                              unbroadcast)
from ..core.var import Var, astype as _var_astype, reject_out, unwrap_all
from ..core.staged import Staged
from ..core.batched import (NESTED, TRACED, Batched, Unbatched, batched_above, batched_call,
                            constant_values)
from ..sparse import AxisSparse, densify
from .common import plain_dtype, axis_index


def _holds_batched(key):
    return any(k.__class__ is Batched for k in key)


def _key_tuple(key):
    """``key`` as a tuple of entries the rules can read: lists as arrays, and
    vmap's proxy for a shared index array (``in_axes=None``) as the array
    itself -- kept as the proxy, an index array would pass for a basic index
    (no accumulation of repeats, wrong axis layout)."""
    key = key if type(key) is tuple else (key,)
    return tuple(np.asarray(k) if isinstance(k, list) else
                 k._value if k.__class__ is Unbatched else k for k in key)


def _is_full_slice(k):
    return isinstance(k, slice) and k == slice(None)


def _expand_ellipsis(entries, ndim):
    """Replace ``...`` by full slices; ``None`` if the key is not simple."""
    n_ell = sum(1 for k in entries if k is Ellipsis)
    if n_ell > 1:
        return None
    if n_ell:
        i = next(j for j, k in enumerate(entries) if k is Ellipsis)
        fill = ndim - (len(entries) - 1)
        if fill < 0:
            return None
        entries = entries[:i] + [slice(None)] * fill + entries[i + 1:]
    if len(entries) > ndim:
        return None
    return entries + [slice(None)] * (ndim - len(entries))


def gather_axis(key, shape):
    """``(axis, indices, index_shape)`` when ``x[key]`` reads whole slices
    along one axis (``index_shape`` replaces ``shape[axis]`` in the result),
    else ``None``.  Negative indices are made non-negative."""
    entries = list(_key_tuple(key))
    if any(k is None for k in entries):
        return None
    entries = _expand_ellipsis(entries, len(shape))
    if entries is None:
        return None
    found = None
    for j, k in enumerate(entries):
        if _is_full_slice(k):
            continue
        if found is not None:
            return None
        if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            idx, ishape = np.array([int(k)]), ()
        elif (isinstance(k, np.ndarray) or k.__class__ is Staged) and k.dtype.kind in "iu":
            idx, ishape = k.reshape(-1), k.shape  # (staged: jit's input indices)
        elif (isinstance(k, np.ndarray) or k.__class__ is Staged) and k.dtype == bool \
                and k.ndim == 1:
            # (staged: a mask made inside jit, ``x[x > 0]``; its gather gets
            # the sparse cotangent the plain sweep gets, which adds into a
            # dense one at the selected rows only: ``-0.0`` elsewhere stays)
            found = (j, np.flatnonzero(k), None)  # (never negative)
            continue
        else:
            return None
        found = (j, idx, ishape)
    if found is None:
        return None
    axis, idx, ishape = found
    if ishape is None:
        return axis, idx, idx.shape
    if idx.size and idx.min() < 0:
        idx = np.where(idx < 0, idx + shape[axis], idx)
    return axis, idx, ishape


def _staged_sparse(g):
    """An AxisSparse whose values or indices are jit's staged values."""
    return isinstance(g, AxisSparse) and (g.values.__class__ is Staged
                                         or g.indices.__class__ is Staged)


def _has_advanced(key):
    return any(isinstance(k, np.ndarray) or isinstance(k, (bool, np.bool_))
               or (k.__class__ is Staged and k._value.__class__ is np.ndarray)
               for k in _key_tuple(key))


def dense_scatter(g, key, shape, dtype=None):
    """Zeros of ``shape`` with ``g`` added at ``key`` (repeats accumulate)."""
    key = _key_tuple(key)
    if dtype is None and _holds_batched(key):
        # per-item indices of a vmap below the differentiation that calls this
        # (vmap(grad(grad(f))) with W[i]): NumPy's add.at would convert them
        return scatter_add(g, key, shape)
    out = np.zeros(shape, dtype=dtype or np.result_type(g))
    if _has_advanced(key):
        np.add.at(out, key, g)
    else:
        out[key] = g
    return out


def _getitem_vjp(g, ans, x, key):
    """x̄ = scatter-add of ḡ at ``key``; sparse for a gather along one axis."""
    shape = x.shape
    # inside jit: a staged cotangent, or a staged key with a plain
    # cotangent (``np.sum(W[i, j])`` hands its gather a constant one) --
    # the scatter must be a step of the program, run on each call's key
    staged = g.__class__ is Staged or _staged_sparse(g) or \
        any(k.__class__ is Staged for k in _key_tuple(key))
    if g.__class__ in NESTED:  # nested differentiation: keep the scatter traced
        return scatter_add(g, key, shape)
    gather = gather_axis(key, shape)
    if gather is None:
        if staged:  # inside jit: the scatter is one step of the program
            return scatter_add(densify(g, "getitem (general key)"), key, shape)
        return dense_scatter(densify(g, "getitem (general key)"), key, shape)
    axis, idx, ishape = gather
    if isinstance(g, AxisSparse):
        if len(ishape) == 1 and g.axis == axis:  # x[S][T] along the same axis
            return AxisSparse(axis, np.take(idx, g.indices), g.values, shape)  # staged: recorded
        g = densify(g, "getitem (cotangent of the gathered array)")
    values = np.reshape(g, shape[:axis] + (idx.size,) + shape[axis + 1:])
    return AxisSparse._trusted(axis, idx, values, tuple(shape))


# The rule reads only x's shape and the key, so the node keeps neither x nor
# the result alive; the key is always passed as a tuple (x[S] == x[(S,)]), so
# its index arrays are kept.
def _advanced_adjacent(key):
    """Whether a batch axis put in front of ``key`` stays in front: NumPy
    moves the axes of advanced indices to the front when they are not
    adjacent (integers count as advanced when an array is present)."""
    key = [k._value if k.__class__ is Staged else k for k in key]  # (jit: as the plain key)
    arrays = [j for j, k in enumerate(key) if isinstance(k, (np.ndarray, list))]
    if not arrays:
        return True
    adv = [j for j, k in enumerate(key)
           if j in arrays or isinstance(k, (int, np.integer))]
    return adv == list(range(adv[0], adv[0] + len(adv)))


def _batch_getitem(prim, args, batched, kwargs):
    """``x[key]`` for a batched ``x``: the key gains a leading ``:``.  A key
    holding one batched index array (``u[j]`` with ``j`` per item, under
    tapestry.vmap) is one gather: on an unbatched ``x`` the index array is
    used whole and its batch axis moved to the front; on a batched ``x``,
    an index in first place is paired with the item number."""
    x, key = args
    key = _key_tuple(key)
    if not any(batched[1:]):
        if not _advanced_adjacent(key):
            return NotImplemented
        return prim(x, (slice(None),) + key)
    return _batch_gather(prim, x, batched[0], key)


_batch_getitem.takes_batched_keys = True


def _batched_index_block(key):
    """A key with per-item index arrays, laid out for the batch:
    ``(p, k, adv)`` where the advanced entries (integers, integer arrays,
    batched integer arrays) are ``key[p:p + len(adv)]``, contiguous, with
    only slices elsewhere; ``k`` is the number of axes their broadcast has
    per item; ``adv`` holds them with each batched array's batch axis first
    and 1-axes after it, so that they broadcast per item.  ``None`` for
    other keys (``...``, ``None``, masks, advanced entries apart)."""
    adv = [j for j, k in enumerate(key) if type(k) is not slice]
    if not adv or adv != list(range(adv[0], adv[-1] + 1)):
        return None
    block = key[adv[0]:adv[-1] + 1]
    nds = []
    for k in block:
        v = k._value if k.__class__ is Batched else k
        if isinstance(k, (bool, np.bool_)) or not (
                isinstance(v, (int, np.integer)) or getattr(v, "dtype", np.dtype("f")).kind in "iu"):
            return None
        nds.append(len(shape_of(v)) - (1 if k.__class__ is Batched else 0))
    k_nd = max(nds)
    out = []
    for k, nd in zip(block, nds):
        if k.__class__ is Batched:
            v = k._value
            sh = shape_of(v)
            k = np.reshape(v, (sh[0],) + (1,) * (k_nd - nd) + tuple(sh[1:]))
        out.append(k)
    return adv[0], k_nd, tuple(out)


def _batch_gather(prim, x, x_batched, key):
    """The batched-index case of :func:`_batch_getitem`: one gather, the
    item numbers paired with the indices when ``x`` is batched."""
    found = _batched_index_block(key)
    if found is None:
        return NotImplemented
    p, k, adv = found
    n = next(shape_of(a._value)[0] for a in key if a.__class__ is Batched)
    rest = key[p + len(adv):]
    if not x_batched:  # the block stays in place: its batch axis goes to the front
        out = prim(x, key[:p] + adv + rest)
        return out if p == 0 else np.moveaxis(out, p, 0)
    items = np.arange(n).reshape((n,) + (1,) * k)
    out = prim(x, (items,) + key[:p] + adv + rest)
    # with slices before the block, NumPy puts the advanced axes first
    return out if p == 0 else np.moveaxis(out, tuple(range(1, 1 + k)), tuple(range(1 + p, 1 + p + k)))


getitem = Primitive(operator.getitem, "getitem", keep=KEEP_SHAPES, linear_in=(0,),
                    batch=_batch_getitem, vjps=(_getitem_vjp,))
@implements(operator.getitem)
def _getitem_entry(x, key):
    """``x[key]``.  A key holding an index batched by a vmap above ``x``'s
    tape (``u[j]``, ``u`` differentiated, ``j`` per item) goes to the batch
    first: the primitive's fast path looks only at ``x``."""
    key = _key_tuple(key)
    if x.__class__ is Var and batched_above(key, x._tape.level):
        if len(key) == 1:  # u[j]: an item's index into a shared array
            j = key[0]
            trace = j._trace
            v = j._value
            if v.__class__ is np.ndarray and v.dtype.kind in "iu" and trace.open \
                    and trace.size:
                # what the batching rule (_batch_gather) does with this key
                return Batched(getitem(x, (v,)), trace)
        return batched_call(getitem, (x, key), {})
    return getitem(x, key)

def _batch_scatter_add(prim, args, batched, kwargs):
    g, key, shape = args
    key = _key_tuple(key)
    if batched[1]:
        return _batch_scatter_at(prim, g, batched[0], key, shape)
    if batched[2] or not _advanced_adjacent(key):
        return NotImplemented
    return prim(g, (slice(None),) + key, (shape_of(g)[0],) + tuple(shape))


_batch_scatter_add.takes_batched_keys = True


def _batch_scatter_at(prim, g, g_batched, key, shape):
    """The transpose of :func:`_batch_gather` on a batched array: each item's
    ``g`` added at its own indices, one ``np.add.at`` on the batch with the
    item numbers paired with the indices."""
    found = _batched_index_block(key)
    if found is None or shape.__class__ is Batched:
        return NotImplemented
    p, k, adv = found
    n = next(shape_of(a._value)[0] for a in key if a.__class__ is Batched)
    if not g_batched:
        g = np.broadcast_to(g, (n,) + tuple(shape_of(g)))
    if p:  # NumPy's layout of out[items, ..., block]: the advanced axes first
        g = np.moveaxis(g, tuple(range(1 + p, 1 + p + k)), tuple(range(1, 1 + k)))
    items = np.arange(n).reshape((n,) + (1,) * k)
    return prim(g, (items,) + key[:p] + adv + key[p + len(adv):], (n,) + tuple(shape))


scatter_add = Primitive(dense_scatter, "scatter_add", linear_in=(0,), batch=_batch_scatter_add,
                        vjps=(lambda gg, ans, g, key, shape: getitem(gg, key),))


# --- np.take / np.take_along_axis: rewritten as x[key] ------------------------
def _index_array(indices, opname):
    """``indices`` as an index array: a plain one, or a batched one (an index
    that differs per item of a vmap running outside the tape), which the
    gather takes as it is -- converting it would need one value per item."""
    idx = unwrap_all(indices)
    if idx.__class__ not in TRACED:
        idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"tapestry: np.{opname} needs integer indices, got dtype "
                        f"{idx.dtype}; cast them with .astype(int).")
    return idx


def take(a, indices, axis=None, out=None, mode="raise"):
    """``np.take`` as ``a[(:,)*axis + (indices,)]`` (a gather along ``axis``)."""
    reject_out("take", out)
    idx = _index_array(indices, "take")
    if axis is None:
        if np.ndim(a) != 1:
            a = np.reshape(a, (-1,))
        axis = 0
    axis = axis_index(axis, np.ndim(a))
    n = np.shape(a)[axis]
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    elif mode != "raise":
        raise ValueError(f"tapestry: np.take mode={mode!r}; use 'raise', 'wrap' or 'clip'.")
    return _getitem_entry(a, (slice(None),) * axis + (idx,))


def take_along_axis(arr, indices, axis=-1):
    """``np.take_along_axis`` as fancy indexing; when ``indices`` has length 1
    on every other axis it is a gather along ``axis`` (sparse cotangent)."""
    idx = _index_array(indices, "take_along_axis")
    if axis is None:
        arr = np.reshape(arr, (-1,))
        axis = 0
    ndim = np.ndim(arr)
    if idx.ndim != ndim:
        raise ValueError(f"tapestry: np.take_along_axis needs indices with {ndim} "
                         f"dimensions (like arr), got {idx.ndim}.")
    axis = axis_index(axis, ndim)
    if all(idx.shape[j] == 1 for j in range(ndim) if j != axis):
        return _getitem_entry(arr, (slice(None),) * axis + (idx.reshape(-1),))
    shape = np.shape(arr)
    fancy = []
    for j in range(ndim):
        if j == axis:
            fancy.append(idx)
        else:
            fancy.append(np.arange(shape[j]).reshape([-1 if i == j else 1
                                                      for i in range(ndim)]))
    return _getitem_entry(arr, tuple(fancy))


implements(np.take)(take)
implements(np.take_along_axis)(take_along_axis)


# --- gathers NumPy positions: labels in, one np.take out ---------------------------------
def labels(sources):
    """Integer labels numbering the elements of ``sources`` one after the other."""
    out, start = [], 0
    for s in sources:
        shape = shape_of(s)
        n = int(np.prod(shape, dtype=np.int64))
        out.append(np.arange(start, start + n, dtype=np.intp).reshape(shape))
        start += n
    return out


def gather_by_labels(call, *sources):
    """``call`` (a NumPy function of the sources) run on their labels, then
    one gather of the sources' elements at the labels it returns.  NumPy
    itself decides the positions (block, choose, compress, delete, extract,
    insert, resize, unstack, trim_zeros), so the result is one ``np.take``
    and its cotangent a scatter-add."""
    index = call(*labels(sources))
    flat = [np.ravel(s) for s in sources]
    flat = flat[0] if len(flat) == 1 else np.concatenate(flat)
    return np.take(flat, index)


def float_source(s, dtype):
    """A source of a gather in the result's ``dtype`` (NumPy casts too)."""
    return s if plain_dtype(s) == dtype else _var_astype(s, dtype)


@implements(np.choose)
def choose(a, choices, out=None, mode="raise"):
    """An elementwise pick among the broadcast choices; ``a`` is an index."""
    reject_out("choose", out)
    a = unwrap_all(a)
    if isinstance(choices, (list, tuple)):
        return gather_by_labels(lambda *ls: np.choose(a, ls, mode=mode), *choices)
    return gather_by_labels(lambda ls: np.choose(a, ls, mode=mode), choices)


@implements(np.compress)
def compress(condition, a, axis=None, out=None):
    reject_out("compress", out)
    cond = unwrap_all(condition)
    return gather_by_labels(lambda ls: np.compress(cond, ls, axis), a)


@implements(np.extract)
def extract(condition, arr):
    cond = unwrap_all(condition)
    return gather_by_labels(lambda ls: np.extract(cond, ls), arr)


# --- selection -----------------------------------------------------------------------------
@implements(np.select)
def select(condlist, choicelist, default=0):
    """The first choice whose condition holds, as a chain of ``np.where``."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(choicelist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    conds = [constant_values(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != bool:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    shape = np.broadcast_shapes(*[np.shape(c) for c in conds],
                                *[np.shape(c) for c in choicelist], np.shape(default))
    out = np.broadcast_to(default, shape)
    for c, v in zip(reversed(conds), reversed(list(choicelist))):
        out = np.where(c, v, out)
    return out


def _piece_conditions(x, condlist, n_funcs):
    xv = unwrap_all(x)
    if np.isscalar(condlist) or (not isinstance(condlist[0], (list, np.ndarray, Staged))
                                 and np.ndim(xv) != 0):
        condlist = [condlist]
    conds = [constant_values(c, bool) for c in condlist]
    if n_funcs == len(conds) + 1:
        rest = ~np.any(np.stack([np.broadcast_to(c, np.shape(xv)) for c in conds]), axis=0) \
            if conds else np.ones(np.shape(xv), bool)
        conds.append(rest)
    elif n_funcs != len(conds):
        raise ValueError(f"with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected")
    return [np.broadcast_to(c, np.shape(xv)) for c in conds]


@implements(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """Each function is evaluated only where its condition holds (as NumPy
    does); its values are spread back with a gather and merged with
    ``np.where``, later conditions winning."""
    conds = _piece_conditions(x, condlist, len(funclist))
    shape = np.shape(x)
    y = np.zeros(shape, np.result_type(unwrap_all(x)))
    for c, fn in zip(conds, funclist):
        if not c.any():
            continue
        if not callable(fn):
            y = np.where(c, fn, y)
            continue
        vals = fn(np.ravel(x)[np.flatnonzero(c)], *args, **kw)
        if np.ndim(vals) == 0:
            y = np.where(c, vals, y)
            continue
        pos = np.clip(np.cumsum(c.ravel()) - 1, 0, None).reshape(shape)
        y = np.where(c, np.take(np.ravel(vals), pos), y)
    want = np.result_type(unwrap_all(x))  # NumPy fills an array of x's dtype
    return y if np.result_type(unwrap_all(y)) == want or want.kind not in "fc" \
        else y.astype(want)


where_ = Primitive(np.where, "where", batch=batching.elementwise, vjps=(
    None,  # the condition is piecewise constant
    # 0.0, not 0.0 * g: the branch not taken gets an exact zero even where
    # g is inf or nan (the masked-NaN idiom np.where(ok, f(x), 0.0))
    lambda g, ans, c, x, y: unbroadcast(np.where(c, g, 0.0), np.shape(x)),
    lambda g, ans, c, x, y: unbroadcast(np.where(c, 0.0, g), np.shape(y))))


@implements(np.where)
def where(condition, x=None, y=None):
    """np.where(c, x, y): the cotangent goes to x where c holds, to y elsewhere.
    The condition is a constant (a traced condition is used by value)."""
    condition = unwrap_all(condition)
    if x is None and y is None:
        return np.where(condition)
    return where_(condition, x, y)


# --- y[key] = v: the array with v written at key --------------------------------
def _set_item(y, v, key):
    """NumPy's ``y[key] = v`` on a copy of ``y``: the traced array never
    changes in place (``Var.__setitem__`` moves the result into ``y``'s
    object, :func:`tapestry.core.var.assign_item`). A 0-d value is written
    as the 0-d array it may stand for (a traced 0-d input is one)."""
    out = np.array(y)
    out[key] = v
    return out


def _integer_arrays(key):
    """Whether ``key`` holds an integer index array: only then can two
    writes land on one element (slices, integers and masks never repeat)."""
    return any(getattr(k, "dtype", None) is not None and k.dtype.kind in "iu"
               and len(getattr(k, "shape", ())) for k in key)


def _last_writes(key, shape):
    """Over ``y[key]``'s shape: True for each write NumPy keeps where
    integer arrays repeat an element (``y[[0, 0]] = v``: the last), found by
    letting NumPy itself do the writes of their numbers; ``None`` where every
    write is kept. Only the kept ones reach ``y``, so only they get a
    gradient."""
    if not _integer_arrays(key):
        return None
    owner = np.full(shape, -1, dtype=np.intp)
    sel = owner[key].shape
    ids = np.arange(int(np.prod(sel)), dtype=np.intp).reshape(sel)
    owner[key] = ids
    kept = owner[key] == ids
    return None if kept.all() else kept


def _set_item_vjp_y(g, ans, y, v, key):
    """ȳ = ḡ with the written elements zeroed: their old values are gone."""
    return set_item(densify(g, "setitem"), 0.0, key)


def _set_item_vjp_v(g, ans, y, v, key):
    """v̄ = ḡ read back at ``key``, summed over the axes v was broadcast
    along; a write that a later repeat of its element overwrote gets none."""
    gk = getitem(densify(g, "setitem"), key)
    kept = _last_writes(key, tuple(shape_of(y)))
    if kept is not None:
        gk = np.where(kept, gk, 0.0)
    return unbroadcast(gk, tuple(shape_of(v)))


def _batch_set_item(prim, args, batched, kwargs):
    """``y[key] = v`` per item, one write on the batch: the key gains a
    leading ``:`` and a batched ``v`` 1-axes after its batch axis, so that
    it broadcasts per item as NumPy broadcasts it against ``y[key]``."""
    y, v, key = args
    if any(isinstance(k, (bool, np.bool_)) for k in key):
        return NotImplemented
    if batched[2]:
        full = _batched_write_key(key)
        if full is None:
            return NotImplemented
        n = full[0].shape[0]
    elif _advanced_adjacent(key):
        n = shape_of(y)[0] if batched[0] else shape_of(v)[0]
        full = (slice(None),) + key
    else:
        return NotImplemented
    if not batched[0]:
        y = np.broadcast_to(y, (n,) + tuple(shape_of(y)))
    if batched[1]:
        sel = len(_selected_shape(shape_of(y), full)) - 1
        vs = tuple(shape_of(v)[1:])
        if len(vs) > sel:
            return NotImplemented
        v = np.reshape(v, (n,) + (1,) * (sel - len(vs)) + vs)
    return prim(y, v, full)


def _batched_write_key(key):
    """The batch's key for ``y[key] = v`` with per-item index arrays: the item
    numbers paired with the indices (as :func:`_batch_gather` reads them),
    where the advanced block comes first (else NumPy would lay the written
    elements out in another order than each item's), or ``None``."""
    found = _batched_index_block(key)
    if found is None or found[0] != 0:
        return None
    _, k, adv = found
    n = next(shape_of(a._value)[0] for a in key if a.__class__ is Batched)
    return (np.arange(n).reshape((n,) + (1,) * k),) + adv + key[len(adv):]


_batch_set_item.takes_batched_keys = True


def _selected_shape(shape, key):
    """``y[key].shape`` for a ``y`` of ``shape`` (NumPy works it out on a
    stand-in that takes no memory)."""
    return np.broadcast_to(np.zeros((), np.int8), tuple(shape))[key].shape


set_item = Primitive(_set_item, "setitem", keep=KEEP_SHAPES, batch=_batch_set_item,
                     vjps=(_set_item_vjp_y, _set_item_vjp_v))


def _plain_key(key):
    """``key`` as :func:`_key_tuple` gives it, with traced index entries
    used by value (an index has no derivative)."""
    return tuple(unwrap_all(k) if k.__class__ is Var else k for k in _key_tuple(key))


@implements("setitem")
def set_item_entry(y, key, v):
    """The array ``y[key] = v`` makes, as a new value: ``v`` broadcast to
    ``y[key]``'s shape and cast to ``y``'s dtype, as NumPy writes it."""
    key = _plain_key(key)
    if isinstance(v, (list, tuple)):
        if any(e.__class__ is not float and e.__class__ is not int and
               not isinstance(e, (np.generic, bool)) for e in v):
            raise TypeError(
                "tapestry: y[...] = [a, b, ...] with arrays or traced values in the list: "
                "NumPy converts the list with np.asarray, which cannot keep a gradient. "
                "Write y[...] = np.stack([a, b, ...]).")
        v = np.asarray(v)
    dt, vt = dtype_of(y), dtype_of(v)
    if vt.kind == "c" and dt.kind != "c":
        raise TypeError(
            f"tapestry: y[...] = v with a complex v into a real y ({dt}): NumPy would drop "
            "the imaginary part (ComplexWarning), which has no derivative. Write "
            "y[...] = np.real(v) (or make y complex).")
    if vt != dt:
        v = _var_astype(v, dt) if v.__class__ is Var else \
            (v.astype(dt) if hasattr(v, "astype") else np.asarray(v, dtype=dt))
    if len(key) == 1 and key[0] is Ellipsis and v.__class__ is Var and y.__class__ is Var and \
            v._tape is y._tape and v.shape == y.shape:
        return v  # y[...] = v of y's shape (y += 1): the new array is v, no node
    return set_item(y, v, key)


# --- NumPy's other writes into an array: item assignment at NumPy's positions ----
def _writable(a, name):
    """Whether ``a`` is a traced or batched array, which NumPy's ``name``
    writes into by item assignment (``a[key] = values``: var.assign_item);
    a plain ``a`` written with traced values keeps its refusal."""
    if a.__class__ in NESTED:
        return True
    raise TypeError(
        f"tapestry: np.{name} would write a traced value into a plain array, which "
        "cannot hold one. Make the array traced first (a = x * 0.0 + a, or a copy of "
        "a traced array), or build a new array (np.where, np.stack).")


def _plain_positions(p, name):
    """A position argument (indices, a mask) as a plain array: per-item
    positions (a vmap's batched ones) cannot be written at once."""
    if p.__class__ is Batched:
        raise TypeError(
            f"tapestry.vmap: np.{name} with positions that differ per item: write "
            "y[idx] = v (item assignment takes per-item indices and masks) or "
            "np.where(mask, v, y) instead.")
    return np.asarray(unwrap_all(p))


def _cycled(v, n, name):
    """``v``'s elements, flattened and repeated to ``n`` (NumPy's put,
    putmask, place and fill_diagonal repeat a short ``v``)."""
    size = int(np.prod(shape_of(v)))
    if size == n:
        return np.reshape(v, (n,))
    if size == 0:
        if n == 0:
            return np.reshape(v, (0,))
        raise ValueError(f"tapestry: np.{name}: cannot write from an empty array "
                         "(NumPy refuses it too).")
    flat = np.reshape(v, (size,))
    return flat[np.arange(n) % size]


def _write_flat(a, pos, values):
    """``a.flat[pos] = values`` as item assignment (the last of repeated
    positions wins, as NumPy's sequential writes)."""
    a[np.unravel_index(pos, a.shape) if a.shape else ()] = values


@implements(np.put)
def put(a, ind, v, mode="raise"):
    """``np.put(a, ind, v)``: ``a.flat[ind] = v``, ``v`` repeated."""
    _writable(a, "put")
    ind = _plain_positions(ind, "put").ravel().astype(np.intp)
    n = int(np.prod(a.shape))
    if mode == "wrap" and n:
        ind = ind % n
    elif mode == "clip":
        ind = np.clip(ind, 0, max(n - 1, 0))
    elif ind.size and (ind.max() >= n or ind.min() < -n):
        bad = ind[(ind >= n) | (ind < -n)][0]
        raise IndexError(f"index {bad} is out of bounds for axis 0 with size {n}")
    _write_flat(a, np.where(ind < 0, ind + n, ind), _cycled(v, ind.size, "put"))


@implements(np.putmask)
def putmask(a, mask, values):
    """``np.putmask(a, mask, values)``: where ``mask``, the value at the same
    flat position of ``values`` repeated to ``a``'s size."""
    _writable(a, "putmask")
    mask = _plain_positions(mask, "putmask").astype(bool)
    if mask.shape != tuple(a.shape):
        raise ValueError("putmask: mask and data must be the same size")
    n = int(np.prod(a.shape))
    pos = np.flatnonzero(mask)
    _write_flat(a, pos, _cycled(values, n, "putmask")[pos] if pos.size else
                _cycled(values, 0, "putmask"))


@implements(np.place)
def place(arr, mask, vals):
    """``np.place(arr, mask, vals)``: the True positions of ``mask`` get
    ``vals`` in order, repeated."""
    _writable(arr, "place")
    mask = _plain_positions(mask, "place").astype(bool)
    pos = np.flatnonzero(mask)
    _write_flat(arr, pos, _cycled(vals, pos.size, "place"))


@implements(np.put_along_axis)
def put_along_axis(arr, indices, values, axis):
    """``np.put_along_axis``: the positions NumPy's take_along_axis reads,
    written with ``values`` broadcast to them."""
    _writable(arr, "put_along_axis")
    indices = _plain_positions(indices, "put_along_axis")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        n = int(np.prod(arr.shape))
        ind = np.where(indices < 0, indices + n, indices)
        _write_flat(arr, ind, np.broadcast_to(values, ind.shape) if shape_of(values) != ind.shape
                    else values)
        return
    numbers = np.arange(int(np.prod(arr.shape))).reshape(arr.shape)
    np.take_along_axis(numbers, indices, axis)  # NumPy's own checks of the arguments
    key = tuple(indices if d == axis % arr.ndim else
                np.arange(n).reshape([-1 if k == d else 1 for k in range(arr.ndim)])
                for d, n in enumerate(arr.shape))
    arr[key] = values


@implements(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    """``np.fill_diagonal(a, val, wrap)``: the positions NumPy fills,
    found by letting it fill a mask, written with ``val`` repeated."""
    _writable(a, "fill_diagonal")
    mask = np.zeros(a.shape, dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)  # NumPy's checks of a's shape
    pos = np.flatnonzero(mask)
    _write_flat(a, pos, _cycled(val, pos.size, "fill_diagonal"))
