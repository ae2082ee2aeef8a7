"""Items given as a list, stacked leaf by leaf into one array per leaf.

A list of plain items (arrays, or dicts / tuples / lists of arrays and
Python ints and floats, all of one structure, shapes and dtypes) is what
users pass to ``parallel_sum`` item by item.  ``vectorize=True`` and the
loops over a chunk's items of :mod:`tapestry.jit.items` need those items
as one array per leaf.  Stacking column by column costs ~0.5 us per item of
W7 (four leaves), where a ``tree_map`` of ``np.stack`` over the items costs
~6 us: flattening each item and rebuilding them.
"""
from __future__ import annotations

import numpy as np

from ..core.pytree import _sorted_keys

#: Python numbers among the leaves, gathered into arrays of these dtypes
#: (what ``np.stack`` makes of them).
_ITEM_SCALARS = {int: np.int64, float: np.float64}


def columns(chunk):
    """The items' leaves stacked along a new axis 0, leaf by leaf in the
    order tree_flatten gives them; ``None`` unless every item is an array,
    or a dict / tuple / list of arrays and Python ints or floats, with the
    first item's keys (in its order), leaf types, shapes and dtypes."""
    if not chunk:
        return None
    ref = chunk[0]
    c = ref.__class__
    if c is np.ndarray:
        cols = [chunk]
    elif c is dict:
        keys = _sorted_keys(ref)
        order = tuple(ref)
        # (C-level loops: ~40 us for W7's 1,000 items where a Python loop took ~110)
        if set(map(type, chunk)) != {dict} or not all(map(order.__eq__, map(tuple, chunk))):
            return None
        if not all(k.__class__ is str for k in order) \
                and any(not _same_key_types(it, ref) for it in chunk):
            return None  # ({1: x} and {1.0: x}: f may tell the keys apart)
        cols = [[it[k] for it in chunk] for k in keys]
    elif c is tuple or c is list:
        n = len(ref)
        if set(map(type, chunk)) != {c} or set(map(len, chunk)) != {n}:
            return None
        cols = [[it[k] for it in chunk] for k in range(n)]
    else:
        return None
    out = []
    for col in cols:
        first = col[0]
        fc = first.__class__
        if fc is np.ndarray:
            stacked = _stack_arrays(col, first)
            if stacked is None:
                return None
            out.append(stacked)
        elif fc in _ITEM_SCALARS:
            if len(set(map(type, col))) != 1:
                return None
            try:
                out.append(np.array(col, dtype=_ITEM_SCALARS[fc]))
            except OverflowError:
                return None
        else:
            return None
    return out


def _stack_arrays(col, first):
    """The arrays of ``col`` (``first`` among them) stacked along a new
    axis 0, or ``None`` unless all are ndarrays of one dtype and shape.

    One ``np.concatenate`` with ``casting="no"`` checks the dtypes (it
    raises where any would be cast) and every axis but the first; ``len``
    checks the first.  With the type check, all C-level: W7's 1,000 rows
    of 20 stack in ~150 us per leaf, where ``np.array(col)`` and a set of
    dtypes took ~300 (``np.stack`` ~370)."""
    if set(map(type, col)) != {np.ndarray}:
        return None
    if first.ndim == 0:
        if len({x.dtype for x in col}) != 1:
            return None
        return np.array(col)
    if set(map(len, col)) != {first.shape[0]}:
        return None
    try:
        flat = np.concatenate(col, dtype=first.dtype, casting="no")
    except (TypeError, ValueError):  # (a dtype that differs; another axis that does)
        return None
    return flat.reshape((len(col),) + first.shape)


def same_form(a, b):
    """Whether items ``a`` and ``b`` have one form as :func:`columns` sees
    it: the same class, and for dicts the same keys, of the same types, in
    the same order (a function iterating ``item.values()`` or testing
    ``isinstance(item, dict)`` may tell other forms apart even where their
    columns stack alike)."""
    c = a.__class__
    if b.__class__ is not c:
        return False
    if c is dict:
        return tuple(a) == tuple(b) and _same_key_types(a, b)
    if c is tuple or c is list:
        return len(a) == len(b)
    return True


def _same_key_types(a, b):
    return all(x.__class__ is y.__class__ for x, y in zip(a, b))


def stacked(items):
    """The items as one pytree of the first item's structure whose leaves
    are :func:`columns`; ``None`` where :func:`columns` declines (the
    caller then stacks them as it did)."""
    cols = columns(items)
    if cols is None:
        return None
    ref = items[0]
    c = ref.__class__
    if c is np.ndarray:
        return cols[0]
    if c is dict:
        by_key = dict(zip(_sorted_keys(ref), cols))
        return {k: by_key[k] for k in ref}  # (the item's own key order)
    return c(cols)
