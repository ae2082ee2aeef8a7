"""The methods of binary ufuncs on traced arrays: ``reduce``, ``accumulate``,
``outer``, ``reduceat`` and ``at``.

``np.add.reduce`` and friends map to the reductions that have rules
(``np.sum``, ``np.prod``, ``np.max``, ...); the other differentiable binary
ufuncs (``subtract``, ``divide``, ``power``, ``logaddexp``, ``hypot``, ...)
reduce as a left fold of the ufunc itself, so every ufunc with a rule has
methods with rules.  ``ufunc.at`` writes in place: into a traced array it
is item assignment; :func:`add_at` is its functional form (``a.at[idx].add(v)``
in JAX).

:func:`tapestry.core.var.dispatch_ufunc` reaches these through the
``"ufunc.<method>"`` entries of the function registry.
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive, dtype_of, implements
from ..core.var import Var, unwrap_all
from ..core.batched import TRACED, Batched, item_by_item
from .indexing import dense_scatter
from .common import axis_tuple

#: Binary ufuncs whose reduce/accumulate are reductions with their own rules.
_REDUCE = {np.add: np.sum, np.multiply: np.prod, np.maximum: np.max,
           np.minimum: np.min, np.fmax: np.nanmax, np.fmin: np.nanmin}
_ACCUMULATE = {np.add: np.cumsum, np.multiply: np.cumprod}


def _name(ufunc, method):
    return f"np.{ufunc.__name__}.{method}"


def _plain_check(ufunc, method, inputs, kwargs):
    """Run the method on plain values: NumPy's own errors for bad arguments
    (a non-reorderable ufunc over several axes, an empty reduction without
    identity), and its result when no traced value matters."""
    return getattr(ufunc, method)(*unwrap_all(inputs), **unwrap_all(kwargs))


def _batched(a):
    """Whether ``a``'s values are batched by a vmap (under its
    differentiation levels, if any): the fold of the ufunc then runs on the
    whole batch at once, each step one batched call."""
    while a.__class__ is Var:
        a = a._value
    return a.__class__ is Batched


def _front(a, axis):
    """``a`` with the reduced axes merged into one leading axis."""
    nd = np.ndim(a)
    if axis is None:
        return np.reshape(a, (-1,)), tuple(range(nd))
    axes = axis_tuple(axis if np.ndim(axis) == 0 else tuple(axis), nd)
    rest = tuple(i for i in range(nd) if i not in axes)
    moved = np.transpose(a, axes + rest)
    return np.reshape(moved, (-1,) + tuple(np.shape(a)[i] for i in rest)), axes


def _fold(ufunc, a, initial):
    """``ufunc(...ufunc(ufunc(initial, a[0]), a[1])..., a[n-1])`` over axis 0."""
    n = np.shape(a)[0]
    acc, start = (a[0], 1) if initial is None else (initial, 0)
    for i in range(start, n):
        acc = ufunc(acc, a[i])
    return acc


def ufunc_reduce(ufunc, inputs, kwargs):
    """``ufunc.reduce(a, axis=0, dtype, out, keepdims, initial, where)``."""
    kwargs = dict(kwargs)
    axis = kwargs.pop("axis", 0)
    if ufunc in _REDUCE:
        return _REDUCE[ufunc](inputs[0], axis=axis, **kwargs)
    plain = _plain_check(ufunc, "reduce", inputs, {"axis": axis, **kwargs})
    where = kwargs.get("where", True)
    if where is not True:
        raise NotImplementedError(f"tapestry: {_name(ufunc, 'reduce')}(..., where=...) "
                                  "has no gradient rule; select the entries with np.where "
                                  "before reducing.")
    initial = kwargs.get("initial", np._NoValue)
    initial = None if initial is np._NoValue else initial
    a, axes = _front(inputs[0], axis)
    if np.shape(a)[0] == 0 and initial is None:
        return plain  # the identity: no entry to differentiate
    out = _fold(ufunc, a, initial)
    out = np.broadcast_to(out, np.shape(a)[1:]) if np.shape(out) != np.shape(a)[1:] else out
    if kwargs.get("keepdims", False):
        out = np.reshape(out, np.shape(plain))
    _same_as_numpy(ufunc, "reduce", out, plain)
    dtype = kwargs.get("dtype")
    return out if dtype is None else out.astype(dtype)


def _same_as_numpy(ufunc, method, out, plain):
    """The fold must give NumPy's value.  It does not always: NumPy 2's
    contiguous 1-D ``power.reduce`` and ``arctan2.reduce`` loops return
    ``ufunc(a[0], a[-1])``.  Differentiating a different function than the
    one NumPy computes would be silently wrong, so that case is refused."""
    if not np.allclose(np.asarray(unwrap_all(out)), plain, rtol=1e-6, atol=0, equal_nan=True):
        raise NotImplementedError(
            f"tapestry: {_name(ufunc, method)} here returns {plain!r} from NumPy, which is "
            f"not the left fold {ufunc.__name__}({ufunc.__name__}(a[0], a[1]), a[2])... "
            "that tapestry differentiates; write the fold you mean explicitly (a loop "
            "over the axis) so that both agree.")


def ufunc_accumulate(ufunc, inputs, kwargs):
    """``ufunc.accumulate(a, axis=0, dtype, out)``: the running fold."""
    kwargs = dict(kwargs)
    axis = kwargs.pop("axis", 0)
    if ufunc in _ACCUMULATE:
        return _ACCUMULATE[ufunc](inputs[0], axis=axis, **kwargs)
    if not _batched(inputs[0]):  # (a batched value: NumPy would hand the check back here)
        _plain_check(ufunc, "accumulate", inputs, {"axis": axis, **kwargs})
    a = np.moveaxis(inputs[0], axis, 0)
    if np.shape(a)[0] == 0:
        return _plain_check(ufunc, "accumulate", inputs, {"axis": axis, **kwargs})
    steps = [a[0]]
    for i in range(1, np.shape(a)[0]):
        steps.append(ufunc(steps[-1], a[i]))
    out = np.moveaxis(np.stack(steps), 0, axis)
    dtype = kwargs.get("dtype")
    return out if dtype is None else out.astype(dtype)


def ufunc_outer(ufunc, inputs, kwargs):
    """``ufunc.outer(A, B)`` is ``ufunc(A[..., None, ...], B)``."""
    if ufunc.nin != 2 or len(inputs) != 2:  # NumPy's own error
        return _plain_check(ufunc, "outer", inputs, kwargs)
    a, b = inputs
    a = np.reshape(a, np.shape(a) + (1,) * np.ndim(b))
    return ufunc(a, b, **kwargs)


def ufunc_reduceat(ufunc, inputs, kwargs):
    """``ufunc.reduceat(a, indices, axis=0)``: one reduce per segment, and
    ``a[indices[i]]`` where a segment is empty (NumPy's rule)."""
    kwargs = dict(kwargs)
    a, indices = inputs[0], np.asarray(unwrap_all(inputs[1]))
    axis = kwargs.pop("axis", 0)
    dtype = kwargs.pop("dtype", None)
    _plain_check(ufunc, "reduceat", (a, indices), {"axis": axis, "dtype": dtype, **kwargs})
    a = np.moveaxis(a, axis, 0)
    n = np.shape(a)[0]
    segs = []
    for i, start in enumerate(indices):
        end = indices[i + 1] if i + 1 < len(indices) else n
        segs.append(ufunc_reduce(ufunc, (a[start:end],), {"axis": 0}) if start < end
                    else a[start])
    out = np.moveaxis(np.stack(segs), 0, axis)
    return out if dtype is None else out.astype(dtype)


# --- ufunc.at and its functional form ---------------------------------------------------
def _key(indices):
    return indices if isinstance(indices, tuple) else (indices,)


def _plain_at_key(indices):
    """``ufunc.at``'s ``indices`` as an indexing key: a tuple whose lists and
    traced entries are plain index arrays (an index has no derivative)."""
    return tuple(np.asarray(unwrap_all(k)) if k.__class__ in TRACED or isinstance(k, list)
                 else k for k in _key(indices))


def _scatter_fwd(v, key, shape):
    """Zeros of ``shape`` with ``v`` added at ``key``; a value traced on an
    enclosing tape (nested differentiation) is scattered on that tape."""
    if v.__class__ in TRACED:
        return _scatter(v, key, shape)
    return dense_scatter(v, key, shape)


_scatter = Primitive(_scatter_fwd, "add_at", vjps=(
    lambda g, ans, v, key, shape: g[key],))


def add_at(a, indices, values):
    """``np.add.at`` without the side effect: a new array equal to ``a`` with
    ``values`` added at ``indices`` (repeated indices accumulate), like
    JAX's ``a.at[indices].add(values)``.  Differentiable in ``a`` and
    ``values``."""
    key = _plain_at_key(indices)
    target = np.shape(np.empty(np.shape(a), bool)[key])
    v = values if np.shape(values) == target else np.broadcast_to(values, target)
    return a + _scatter(v, key, np.shape(a))


def _in_place_help(ufunc):
    if ufunc in (np.add, np.subtract):
        v = "v" if ufunc is np.add else "-v"
        return (f"use the functional form a = tapestry.ops.ufunc_methods.add_at(a, idx, {v}), "
                f"which returns a new array (for 1-D a and integer idx, also "
                f"a + np.bincount(idx, weights={v}, minlength=len(a)))")
    return "build the result functionally instead (np.where, indexing, np.concatenate)"


def ufunc_at(ufunc, inputs, kwargs):
    """``ufunc.at`` writes into its first argument.  Into a traced (or
    batched) array it is item assignment (:func:`_at_into`); a traced value
    into a plain array, or into a staged value under ``jit``, is refused with
    the way out."""
    if inputs[0].__class__ is Var or inputs[0].__class__ is Batched:
        return _at_into(ufunc, inputs[0], inputs[1], inputs[2:])
    if inputs[0].__class__ in TRACED:
        what = "into its first argument, a traced array, which cannot change in place"
    else:
        what = ("a traced value into its first argument, a plain array, which cannot "
                "hold one")
    err = TypeError(f"tapestry: {_name(ufunc, 'at')} writes {what}; "
                    f"{_in_place_help(ufunc)}.")
    raise err if inputs[0].__class__ in TRACED else item_by_item(err, inputs)


def _at_into(ufunc, a, indices, values):
    """``ufunc.at(a, indices, *values)`` on a traced ``a``, as the item
    assignment NumPy's unbuffered loop amounts to: ``add``/``subtract``
    accumulate repeated indices (``a[...] = add_at(a, indices, +-v)``);
    any other ufunc writes ``a[key] = ufunc(a[key], *values)``, exact when
    no element is written twice (repeats are refused: NumPy would apply the
    ufunc once per repeat, in order)."""
    if len(values) != ufunc.nin - 1:
        raise TypeError(f"tapestry: {_name(ufunc, 'at')} takes {ufunc.nin - 1} value "
                        f"argument(s) after the indices, got {len(values)}.")
    if ufunc is np.add or ufunc is np.subtract:
        v = values[0] if ufunc is np.add else np.negative(values[0])
        a[...] = add_at(a, indices, v)
        return None
    key = _plain_at_key(indices)
    written = np.arange(int(np.prod(np.shape(a))), dtype=np.intp).reshape(np.shape(a))[key]
    if np.unique(written).size != np.size(written):
        raise TypeError(f"tapestry: {_name(ufunc, 'at')} on a traced array with repeated "
                        "indices (NumPy applies it once per repeat, in order) is not "
                        "supported; use unique indices, or np.add.at / np.subtract.at, "
                        "which accumulate repeats.")
    a[key] = ufunc(a[key], *values)
    return None


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    """``np.copyto`` writes in place: refused for traced values.  NumPy's
    ``full``/``full_like`` call it with their fill value, so a traced fill
    into a plain array lands here."""
    if dst.__class__ is Var or dst.__class__ is Batched:
        return _copy_into(dst, src, casting, where)
    if dst.__class__ in TRACED:
        raise TypeError("tapestry: np.copyto writes a traced value into an array inside "
                        "jit, which cannot hold one; build a new array "
                        "(np.where(mask, src, dst)).")
    if src.__class__ not in TRACED:  # a traced mask is used by value (it is boolean)
        return np.copyto(dst, src, casting=casting, where=unwrap_all(where))
    raise item_by_item(TypeError(
        "tapestry: np.copyto would write a traced value into a plain array, which "
        "cannot hold one (np.full and np.full_like(a, v) with a plain a and a traced v "
        "come here). Use np.broadcast_to(v, shape) (differentiable), or "
        "np.full_like(a, v) with a traced a."), (src,))


def _copy_into(dst, src, casting, where):
    """``np.copyto`` into a traced or batched ``dst``: item assignment
    (``dst[...] = src``, or at ``where``), after NumPy's casting check."""
    st = dtype_of(src)
    if not np.can_cast(st, dst.dtype, casting):
        raise TypeError(f"Cannot cast array data from {st!r} to {dst.dtype!r} according "
                        f"to the rule {casting!r}")
    where = unwrap_all(where)
    if where is True:
        dst[...] = src
        return
    if where.__class__ in TRACED:
        raise TypeError("tapestry.vmap: np.copyto(dst, src, where=mask) with a mask that "
                        "differs per item: write np.where(mask, src, dst) instead.")
    w = np.broadcast_to(np.asarray(where, dtype=bool), dst.shape)
    dst[w] = np.broadcast_to(src, dst.shape)[w]


implements("ufunc.reduce")(ufunc_reduce)
implements("ufunc.accumulate")(ufunc_accumulate)
implements("ufunc.outer")(ufunc_outer)
implements("ufunc.reduceat")(ufunc_reduceat)
implements("ufunc.at")(ufunc_at)
