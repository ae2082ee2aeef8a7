"""Minimal pytrees: nested dict / list / tuple / namedtuple / dataclass with
array leaves.  ``None`` is an empty subtree (no leaf), as in JAX."""
from __future__ import annotations

import dataclasses

class _LeafMarker:
    """Marks a leaf position in a tree definition; pickled by reference, so
    a TreeDef sent to a worker process still recognises its leaves."""

    __slots__ = ()

    def __reduce__(self):
        return "_LEAF"

    def __repr__(self):
        return "*"


_LEAF = _LeafMarker()


class TreeDef:
    """How to rebuild a tree from its leaves (opaque to callers)."""

    __slots__ = ("node", "n_leaves")

    def __init__(self, node, n_leaves):
        self.node = node
        self.n_leaves = n_leaves

    def __getstate__(self):
        return (self.node, self.n_leaves)

    def __setstate__(self, s):
        self.node, self.n_leaves = s

    def unflatten(self, leaves):
        it = iter(leaves)
        return _build(self.node, it)

    def __eq__(self, other):
        return isinstance(other, TreeDef) and _same(self.node, other.node)

    def __repr__(self):
        return f"TreeDef(n_leaves={self.n_leaves})"


def _same(a, b):
    if a is _LEAF or b is _LEAF or a is None or b is None:
        return a is b
    if a[0] is not b[0] or len(a[2]) != len(b[2]) or a[1] != b[1]:
        return False
    return all(_same(x, y) for x, y in zip(a[2], b[2]))


# How each type splits, decided once per type (whether a type is a dict, a
# namedtuple or a dataclass never changes): flattening is on the path of
# every grad call and every parallel chunk, and most leaves are arrays.
_SEQ, _DICT, _NAMEDTUPLE, _DATACLASS = 1, 2, 3, 4
_KIND: dict = {tuple: _SEQ, list: _SEQ, dict: _DICT}


def _kind(t):
    k = _KIND.get(t)
    if k is None:
        if issubclass(t, dict):
            k = _DICT
        elif issubclass(t, tuple) and hasattr(t, "_fields"):
            k = _NAMEDTUPLE
        elif dataclasses.is_dataclass(t):  # instances only: a class's type is ``type``
            k = _DATACLASS
        else:
            k = 0  # a leaf
        _KIND[t] = k
    return k


def _split(x, leaves):
    if x is None:
        return None
    t = type(x)
    k = _KIND.get(t)
    if k is None:
        k = _kind(t)
    if k == 0:
        leaves.append(x)
        return _LEAF
    if k == _SEQ or k == _NAMEDTUPLE:
        return (t, None, [_split(c, leaves) for c in x])
    if k == _DICT:
        keys = tuple(x)
        return (t, keys, [_split(x[c], leaves) for c in keys])
    names = tuple(f.name for f in dataclasses.fields(x))
    return (t, names, [_split(getattr(x, n), leaves) for n in names])


def _build(node, it):
    if node is None:
        return None
    if node is _LEAF:
        return next(it)
    t, meta, children = node
    built = [_build(c, it) for c in children]
    if t is tuple or t is list:
        return t(built)
    if issubclass(t, dict):
        d = dict(zip(meta, built))
        return d if t is dict else t(d)
    if issubclass(t, tuple):  # namedtuple
        return t(*built)
    obj = object.__new__(t)  # dataclass, possibly frozen
    for n, v in zip(meta, built):
        object.__setattr__(obj, n, v)
    return obj


def tree_flatten(tree):
    """Return ``(leaves, treedef)``."""
    leaves = []
    node = _split(tree, leaves)
    return leaves, TreeDef(node, len(leaves))


def tree_unflatten(treedef, leaves):
    return treedef.unflatten(leaves)


def tree_map(f, tree, *rest):
    """Apply ``f`` leaf-wise over ``tree`` and trees of the same structure."""
    leaves, td = tree_flatten(tree)
    others = [tree_flatten(r)[0] for r in rest]
    return td.unflatten([f(*xs) for xs in zip(leaves, *others)])


def tree_leaves(tree):
    return tree_flatten(tree)[0]
