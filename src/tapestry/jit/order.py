"""Dicts in the caller's key order through ``tapestry.jit``.

The pytree flattening sorts a dict's keys (equal dicts give equal
structures), so a tree rebuilt from its leaves has its dicts sorted.  A
function iterating a dict (``p.values()``, ``**kwargs``) depends on the
order, so ``jit`` keys its cache on it (:func:`dict_order`), rebuilds the
arguments in the caller's order and the results in the function's
(:func:`in_order`, :class:`OrderedTree`).
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


def in_order(x, order):
    """``x`` (rebuilt from flattened leaves: dicts in sorted key order) with
    its dicts in the order ``order`` (:func:`dict_order`) describes."""
    if order is None:
        return x
    kind = order[0]
    if kind == "dict":
        pairs = [(k, in_order(x[k], o)) for k, o in zip(order[1], order[2])]
        c = x.__class__
        return c(x.default_factory, pairs) if c is defaultdict else c(pairs)
    if kind == "fields":  # a dataclass rebuilt by the flattening: set in place
        for n, o in zip(order[1], order[2]):
            if o is not None:
                object.__setattr__(x, n, in_order(getattr(x, n), o))
        return x
    items = [in_order(v, o) for v, o in zip(x, order[1])]
    return x.__class__(*items) if hasattr(x, "_fields") else x.__class__(items)


class OrderedTree:
    """A tree structure whose dicts are not all in sorted key order:
    unflattened with their keys in the order they had."""

    __slots__ = ("td", "order")

    def __init__(self, td, order):
        self.td, self.order = td, order

    def __eq__(self, other):
        return isinstance(other, OrderedTree) and self.td == other.td and \
            self.order == other.order

    def __hash__(self):
        return hash((self.td, self.order))

    @staticmethod
    def of(td, tree):
        order = dict_order(tree)
        return td if order is None else OrderedTree(td, order)

    def unflatten(self, leaves):
        return in_order(self.td.unflatten(leaves), self.order)
