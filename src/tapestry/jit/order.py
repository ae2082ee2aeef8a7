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

:func:`call_key` keys the common call (plain containers of arrays and
numbers) in one walk, structure, key order and signature together, without
building the tree structure; other calls take the general key (api.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..core.pytree import _NAMEDTUPLE, TreeDef, _kind


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


# --- the key of a call in one walk ------------------------------------------------
#
# A cache hit used to flatten the arguments into a TreeDef, build the
# signature from the leaves and walk the tree again for its dict order: three
# walks and many small objects per call, most of a small item's time.  For
# arguments made of tuples, namedtuples, lists and dicts (str or int keys)
# holding arrays, numbers, strings, bools and None, :func:`call_key` makes a
# key that says all three in one walk; anything else takes the general path.
#
# The key is a flat sequence of tokens read left to right: an array is its
# shape (a tuple) then its dtype; a runtime number its class (float, int,
# complex); a NumPy scalar its class then its dtype; a static value (bool,
# str, bytes) its class then the value; None itself; a tuple, namedtuple or
# list its class then its length, then its items; a dict ``dict`` then its
# keys in its own order, then its values; keyword arguments a marker, then
# as a dict.  Each token's role follows from the tokens before it, so equal
# keys mean equal tree structures (dict key order included), shapes, dtypes
# and static values: what the general key compares.

_RUNTIME_NUMBERS = frozenset({float, int, complex})
_STATIC_VALUES = frozenset({bool, str, bytes})


class _CallKey:
    """Marks the keys :func:`call_key` makes (first token)."""

    __slots__ = ()

    def __repr__(self):
        return "<call key>"


CALL_KEY = _CallKey()


class _Keywords:
    """Marks where the keyword arguments start in a key."""

    __slots__ = ()

    def __repr__(self):
        return "<keyword arguments>"


KEYWORDS = _Keywords()


def call_key(args, kwargs=None):
    """``(key, inputs)`` of a call's arguments: the cache key and the
    runtime leaves (arrays and numbers) in walk order (the positional
    arguments, then the keyword arguments' values in their order; dict
    values in the dict's own order; :func:`input_order` puts them in the
    program's order), ``args`` itself when every argument is a positional
    array or number; or ``None`` where an argument holds anything else
    (then the general path runs)."""
    key = [CALL_KEY]
    inputs = None
    n = 0
    for a in args:
        c = a.__class__
        if c is np.ndarray:
            key.append(a.shape)
            key.append(a.dtype)
        elif c in _RUNTIME_NUMBERS:
            key.append(c)
        else:
            if inputs is None:
                inputs = list(args[:n])
            if not _walk(a, c, key, inputs):
                return None
            n += 1
            continue
        if inputs is not None:
            inputs.append(a)
        n += 1
    if kwargs:
        if inputs is None:
            inputs = list(args)
        key.append(KEYWORDS)
        if not _walk(kwargs, dict, key, inputs):
            return None
    if inputs is None:
        inputs = args
    n = len(inputs)
    if n > 1 and (inputs[0] is inputs[1] if n == 2 else len(set(map(id, inputs))) < n) \
            and _repeats_array(inputs):
        return None  # f(x, x): one input seen twice, which the general key says
    return tuple(key), inputs


def _repeats_array(inputs):
    """Whether an array is among ``inputs`` twice (numbers may be: a repeated
    one is two inputs of one value, as the general key has it)."""
    seen = set()
    for x in inputs:
        if x.__class__ is np.ndarray:
            if id(x) in seen:
                return True
            seen.add(id(x))
    return False


def _walk(x, c, key, inputs):
    """Append the tokens of ``x`` (of class ``c``) to ``key`` and its runtime
    leaves to ``inputs``; False where it holds something :func:`call_key`
    does not handle."""
    if c is dict:
        keys = tuple(x)
        for k in keys:
            kc = k.__class__
            if kc is not str and kc is not int:  # (their order and equality agree)
                return False
        key.append(dict)
        key.append(keys)
        items = x.values()
    elif c is tuple or c is list:
        key.append(c)
        key.append(len(x))
        items = x
    elif c is np.ndarray:
        key.append(x.shape)
        key.append(x.dtype)
        inputs.append(x)
        return True
    elif c in _RUNTIME_NUMBERS:
        key.append(c)
        inputs.append(x)
        return True
    elif c in _STATIC_VALUES:
        key.append(c)
        key.append(x)
        return True
    elif x is None:  # (before _kind below: None's kind must stay unset)
        key.append(None)
        return True
    elif isinstance(x, np.generic):
        key.append(c)
        key.append(x.dtype)
        inputs.append(x)
        return True
    elif _kind(c) == _NAMEDTUPLE:  # (the class, as the tree structure has it)
        key.append(c)
        key.append(len(x))
        items = x
    else:
        return False
    for v in items:
        cv = v.__class__
        if cv is np.ndarray:
            key.append(v.shape)
            key.append(v.dtype)
            inputs.append(v)
        elif cv in _RUNTIME_NUMBERS:
            key.append(cv)
            inputs.append(v)
        elif not _walk(v, cv, key, inputs):
            return False
    return True


class _Position:
    """A runtime leaf's place in :func:`call_key`'s walk."""

    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k


def input_order(args, kwargs, runtime):
    """Where the program's inputs are among :func:`call_key`'s ``inputs``
    for arguments like ``args, kwargs`` (the runtime leaves in the order
    ``tree_flatten`` gives them, dict values by sorted key): a tuple of
    positions, or ``None`` where the two orders agree.  ``runtime``: the
    positions of the runtime leaves among the flattened leaves, which this
    checks the walk against."""
    from ..core.pytree import tree_flatten
    count = [0]
    leaves, _ = tree_flatten((_numbered(args, count), _numbered(kwargs, count)))
    found = [i for i, v in enumerate(leaves) if v.__class__ is _Position]
    if found != list(runtime):
        raise RuntimeError("tapestry.jit: internal error: the call key's walk and the "
                           "flattening disagree on where the inputs are; please report "
                           "it with the arguments' structure.")
    order = tuple(leaves[i].k for i in found)
    return None if order == tuple(range(len(order))) else order


def _numbered(x, count):
    """``x`` with each runtime leaf replaced by its :class:`_Position` in
    :func:`call_key`'s walk (the same containers, in their own key order)."""
    c = x.__class__
    if c is tuple or c is list:
        return c([_numbered(v, count) for v in x])
    if c is dict:
        return {k: _numbered(v, count) for k, v in x.items()}
    if c is np.ndarray or c in _RUNTIME_NUMBERS or isinstance(x, np.generic):
        count[0] += 1
        return _Position(count[0] - 1)
    if x is None:  # (before _kind: None's kind must stay unset, an empty subtree)
        return x
    if _kind(c) == _NAMEDTUPLE:  # (not through its __new__, which may check its fields)
        return tuple.__new__(c, [_numbered(v, count) for v in x])
    return x
