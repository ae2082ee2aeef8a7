"""What ``tapestry.jit``'s cache key holds besides the tree structure.

A tree structure does not include its dicts' key order (equal dicts give
equal structures, as in JAX), though unflattening restores it.  A function
iterating a dict (``p.values()``, ``**kwargs``) depends on the order, so
``jit`` keys its cache on it too (:func:`aux_key`): a program traced for
one order is never replayed for another.

Nor does a tree structure tell apart aux data that is equal but not the
same: ``{1: x}``, ``{True: x}`` and ``{1.0: x}`` have one structure, as do
a dataclass's static field ``0.0`` and ``-0.0``, though ``np.full(2, k)``
or ``1 / k`` differ and the program would hand back the trace's keys.
:func:`aux_key` is the typed part of the aux data (:func:`typed`), and
static arguments are keyed by :func:`typed` too.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..core.pytree import TreeDef


def typed(x):
    """A hashable key equal only for values the function cannot tell apart.
    ``==`` says ``1 == 1.0 == True``, ``0.0 == -0.0``, ``(1, 2) == (1.0,
    2.0)`` and a namedtuple equals a tuple, but ``1 / x`` or ``np.array(t)``
    differ: the class of every value inside is part of the key, and floats
    count by their bits (so a nan finds itself again).  A frozen dataclass
    counts by its fields; an object whose own class defines ``__eq__``
    (equal objects may still differ where the function reads them) by its
    class and attributes, and an unhashable one (an array in aux data) by
    identity (the key holds the object, so its id stays unique)."""
    c = x.__class__
    if c is str or c is int or c is bool or x is None:
        return (c, x)
    if c is TreeDef:  # (a static structure: grad(jit(f))'s pullback program)
        return (c, x, aux_key(x))
    if c is float or c is complex or isinstance(x, np.inexact):
        return (c, np.asarray(x).tobytes())
    if isinstance(x, (tuple, list)):
        return (c, tuple([typed(v) for v in x]))
    if isinstance(x, (frozenset, set)):
        return (c, frozenset([typed(v) for v in x]))
    if isinstance(x, dict):
        return (c, tuple([(typed(k), typed(v)) for k, v in x.items()]))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (c, tuple([(f.name, typed(getattr(x, f.name, None)))
                          for f in dataclasses.fields(x)]))
    try:
        hash(x)
    except TypeError:
        return (c, _Same(x))
    if _own_eq(c):
        return (c, _ByState(x))
    return (c, x)


def _own_eq(c):
    """Whether the ``__eq__`` of class ``c`` is the user's (not Python's,
    NumPy's or tapestry's, whose equal values are interchangeable)."""
    for k in c.__mro__:
        if "__eq__" in k.__dict__:
            root = (k.__module__ or "").partition(".")[0]
            return root not in ("numpy", "builtins", "fractions", "decimal", "enum",
                                "tapestry", "datetime", "pathlib")
    return False


class _Same:
    """Compares by identity (holds the object: its id stays unique)."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return other.__class__ is _Same and other.x is self.x

    def __hash__(self):
        return id(self.x)


class _ByState:
    """An object whose class defines its own ``__eq__``: equal to itself,
    and to an object of its class whose attributes are the same
    (:func:`typed`) -- never by the user's ``==`` alone, which may call
    objects equal that the function reads differently."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        if other.__class__ is not _ByState:
            return False
        a, b = self.x, other.x
        return a is b or (a.__class__ is b.__class__ and _state(a) == _state(b))

    def __hash__(self):
        return hash(self.x.__class__)  # (the user's hash may be by identity)


def _state(x):
    """The typed attributes of an object (its ``__dict__`` and slots), or
    a new object (equal to nothing) where they cannot be read."""
    try:
        d = dict(getattr(x, "__dict__", None) or {})
        for k in type(x).__mro__:
            for n in k.__dict__.get("__slots__", ()):
                if isinstance(n, str) and n not in ("__dict__", "__weakref__") and \
                        hasattr(x, n):
                    d[n] = getattr(x, n)
        return tuple(sorted((n, typed(v)) for n, v in d.items()))
    except Exception:  # noqa: BLE001
        return object()


def aux_key(treedef):
    """The typed aux data of ``treedef`` (dict keys, static fields, a
    registered class's aux) where it is not all strings, and its dicts' own
    key orders where they are not sorted: ``None`` in the common case
    (dicts keyed by names, in sorted order), else a hashable description
    (:func:`typed`) that tells apart ``{1: x}`` from ``{True: x}``."""
    node = treedef.node
    if node.__class__ is not tuple:
        return None
    out = []
    _aux_walk(node, out, [0])
    return tuple(out) if out else None


def _aux_walk(node, out, count):
    meta = node[2]
    count[0] += 1
    if meta is not None:
        if not _plain(meta):
            out.append((count[0], typed(meta)))
        keys = meta if isinstance(meta, list) else \
            meta[1] if meta.__class__ is tuple and len(meta) == 2 else None
        order = getattr(keys, "order", None)  # a dict's own key order (tree_util._Keys)
        if order is not None:
            out.append((count[0], "order", order))
    for c in node[3]:
        if c.__class__ is tuple:
            _aux_walk(c, out, count)


def _plain(meta):
    """Whether ``meta`` is strings only (nested in plain tuples and lists)."""
    c = meta.__class__
    if c is str:
        return True
    if c is tuple or isinstance(meta, list):
        for v in meta:
            if v.__class__ is not str and not _plain(v):
                return False
        return True
    return False
