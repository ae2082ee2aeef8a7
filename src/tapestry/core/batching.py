"""Batching rules: a primitive applied once to arguments that carry an extra
leading batch axis, as if it had been applied to each slice.

A rule is ``batch(prim, args, batched, kwargs) -> out`` (see
:class:`~tapestry.core.primitive.Primitive`): ``batched[i]`` says whether
``args[i]`` has the leading batch axis; the result has it too.  The rule
gets the primitive, so one rule serves a family (every reduction, every
elementwise ufunc).  Keeping the
batch axis first (``np.moveaxis`` is a view) lets most rules be a shift of
their axis arguments.  Forward mode uses the rules for ``jacfwd``'s many
tangents at once; ``tapestry.vmap`` for batched values.

This module holds the helpers every family's rules share, and the rule of
the largest family, elementwise ufuncs, which is derived, not written: a
primitive whose forward is an elementwise ufunc gets it at declaration.
"""
from __future__ import annotations

import operator

import numpy as np


def shape_of(x):
    """Shape of an array, scalar or traced array."""
    s = getattr(x, "shape", None)
    return np.shape(x) if s is None else s


def batch_size(args, batched):
    """The length of the batch axis (the first batched argument's)."""
    for a, b in zip(args, batched):
        if b:
            return shape_of(a)[0]
    raise ValueError("tapestry: a batching rule was called with no batched argument.")


def item_ndim(x, is_batched):
    """The number of axes one item of ``x`` has."""
    return len(shape_of(x)) - (1 if is_batched else 0)


class PerItemParameter(TypeError):
    """A batching rule met a batched value where it reads a parameter in
    Python (an axis given per item): :func:`~tapestry.core.batched.batched_call`
    catches it and runs the operation once per item instead."""


def _check_static(axis):
    if axis.__class__ is np.ndarray and axis.ndim:
        raise PerItemParameter("tapestry.vmap: an axis given per item (a batched value)")


def shift_axis(axis, nd):
    """An axis of an item (``nd`` axes; negative allowed) on the batched
    array: one further right.  A batched axis (one per item) raises
    :class:`PerItemParameter`: the caller loops."""
    _check_static(axis)
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(axis, nd)
    return axis % nd + 1


def shift_axes(axis, nd):
    """:func:`shift_axis` for an int or a sequence of them; ``None`` (every
    axis of the item) becomes ``(1, ..., nd)``."""
    if axis is None:
        return tuple(range(1, nd + 1))
    _check_static(axis)
    if isinstance(axis, (int, np.integer)) or (axis.__class__ is np.ndarray and axis.ndim == 0):
        return shift_axis(operator.index(axis), nd)  # (a 0-d integer array: axis=np.argmax(...))
    return tuple(shift_axis(int(a), nd) for a in axis)


def flat_items(x):
    """A batched ``x`` with each item raveled: shape ``(n, item size)``,
    spelled out (``(n, -1)`` is ambiguous for an empty batch)."""
    shape = shape_of(x)
    return np.reshape(x, (shape[0], int(np.prod(shape[1:], dtype=np.int64))))


def item_reshape(shape, item_shape):
    """The item shape ``np.reshape`` gives for ``shape`` (``-1`` resolved
    against the item, not the batch: an empty batch leaves it ambiguous)."""
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    return np.broadcast_to(np.zeros((), np.int8), tuple(item_shape)).reshape(shape).shape


def expand_item(x, nd):
    """A batched ``x`` with 1-axes inserted after the batch axis, so that its
    items have ``nd`` axes and broadcast (from the right) like NumPy would
    broadcast the items."""
    shape = shape_of(x)
    missing = nd - (len(shape) - 1)
    if missing <= 0:
        return x
    return RESHAPE[0](x, (shape[0],) + (1,) * missing + tuple(shape[1:]))


#: ``[reshape(x, shape)]``: ``np.reshape``, which :mod:`tapestry.ops.shape`
#: replaces by a function calling its reshape primitive directly on a traced
#: array (the call ``np.reshape`` dispatches to, without NumPy's wrapper).
RESHAPE = [np.reshape]


def elementwise(prim, args, batched, kwargs):
    """The batching rule of an elementwise (broadcasting) primitive: align
    the batched arguments' items to the result's number of axes, then one
    call (unbatched arguments broadcast from the right as they are)."""
    if kwargs.get("where") is not None:
        return NotImplemented  # a mask of its own shape: the caller loops
    nd = max(item_ndim(a, b) for a, b in zip(args, batched))
    full = [expand_item(a, nd) if b else a for a, b in zip(args, batched)]
    return prim(*full, **kwargs) if kwargs else prim(*full)


# --- sums over trailing axes ---------------------------------------------------------
#: Lengths of a trailing reduction where one ``np.einsum`` beats ``np.add.reduce``:
#: NumPy's reduce pays ~25 ns per output element for short rows (a (1000, 20)
#: array's row sums: 23 us; einsum 6 us; rows of 3: 102 against 40 us).
ROW_SUM_MIN, ROW_SUM_MAX, ROW_SUM_ROWS = 2, 256, 8
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def trailing_sum(a, axes):
    """``a`` summed over ``axes`` (sorted, non-negative) with one einsum when
    they are its trailing axes, of a float array with many short rows --
    every item's sum under vmap, a (rows, 1) input's cotangent; ``None``
    when that does not apply (the caller reduces as usual).

    Decided from the shape and dtype alone (never the memory layout), so a
    jit replay takes the same path as the call it recorded.  The bits may
    differ from ``np.sum``'s pairwise order in the last place; they do not
    depend on a row's position in the batch (like ``np.sum``'s, they may
    depend on the memory layout)."""
    shape = a.shape
    nd, k = len(shape), len(axes)
    if not k or k > nd or axes != tuple(range(nd - k, nd)) or nd > len(_LETTERS):
        return None
    dt = a.dtype
    if dt != np.float64 and dt != np.float32:
        return None
    n = rows = 1
    for d in shape[nd - k:]:
        n *= d
    for d in shape[:nd - k]:
        rows *= d
    if not ROW_SUM_MIN <= n <= ROW_SUM_MAX or rows < ROW_SUM_ROWS:
        return None
    spec = _ROW_SUM_SPECS.get((nd, k))
    if spec is None:
        spec = _ROW_SUM_SPECS[(nd, k)] = f"{_LETTERS[:nd]}->{_LETTERS[:nd - k]}"
    return np.einsum(spec, a)


#: (axes, axes summed) -> the einsum subscripts of :func:`trailing_sum`.
_ROW_SUM_SPECS: dict = {}
