"""The dict key order of ``tapestry.jit``'s arguments, part of its cache key.

A tree structure does not include its dicts' key order (equal dicts give
equal structures, as in JAX), though unflattening restores it.  A function
iterating a dict (``p.values()``, ``**kwargs``) depends on the order, so
``jit`` keys its cache on it too (:func:`dict_order`): a program traced for
one order is never replayed for another.
"""
from __future__ import annotations

from collections import OrderedDict, defaultdict

import numpy as np

#: Leaf types :func:`dict_order` does not look into.
_FLAT_LEAVES = frozenset({np.ndarray, float, int, complex, bool, str, type(None)})


def dict_order(x):
    """Where the dicts in ``x`` (through tuples, lists, dicts, dataclasses)
    are not in sorted key order, which the pytree flattening uses: a
    hashable description for :func:`in_order`, or ``None`` (all sorted).
    Part of the cache key: the function sees its dicts in the caller's
    order, and iterating one (``p.values()``, ``**kwargs``) depends on it."""
    c = x.__class__
    if c is tuple or c is list:
        inner = _inner_orders(x)
        return None if inner is None else ("seq", inner)
    if c is dict or c is defaultdict or c is OrderedDict:
        inner = _inner_orders(x.values())
        if inner is None and (len(x) < 2 or c is OrderedDict):
            return None
        keys = tuple(x)
        try:
            ordered = c is OrderedDict or keys == tuple(sorted(keys))
        except TypeError:  # keys that do not compare: keep their order
            ordered = False
        if ordered and inner is None:
            return None
        return ("dict", keys, inner or (None,) * len(keys))
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        inner = _inner_orders(x)
        return None if inner is None else ("seq", inner)
    fields = getattr(c, "__dataclass_fields__", None)
    if fields is not None and not isinstance(x, type):
        names = tuple(fields)
        inner = _inner_orders([getattr(x, n, None) for n in names])
        return None if inner is None else ("fields", names, inner)
    return None


def _inner_orders(values):
    """The orders of ``values`` (one per value), or ``None`` if all are sorted."""
    inner = None
    k = 0
    for v in values:
        if v.__class__ not in _FLAT_LEAVES:
            o = dict_order(v)
            if o is not None:
                if inner is None:
                    inner = [None] * len(values)
                inner[k] = o
        k += 1
    return None if inner is None else tuple(inner)
