"""Pytrees, as in JAX: nested containers whose leaves are arrays.

Containers: ``tuple``, ``list``, ``dict`` (leaves in sorted key order, so
equal dicts give equal structures; unflattening rebuilds a dict in the key
order it had, so code iterating ``p.values()`` sees the caller's order under
every transformation), ``OrderedDict`` (insertion order),
``defaultdict`` (sorted keys; the default factory is part of the
structure), namedtuples, dataclasses, and any class registered with
:func:`register_pytree_node` or :func:`register_dataclass`.  ``None`` is an
empty subtree (no leaf).  Everything else is a leaf, sets included (as in
JAX: a set has no order to flatten in).

Dataclasses that were not registered explicitly flatten field by field;
a field marked ``field(metadata={"static": True})``, or holding a Python
``int``, ``bool``, ``str`` or ``bytes`` value, is *static*: part of the
structure, not a leaf (it could not be differentiated anyway: tapestry only
differentiates floats).  ``register_dataclass`` follows JAX exactly.

A :class:`TreeDef` is picklable (process workers receive it); a registered
class must be registered in the worker too, which happens when the module
that registers it is imported there.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from collections import OrderedDict, defaultdict

import numpy as np


class _LeafMarker:
    """Marks a leaf position in a tree definition; pickled by reference, so
    a TreeDef sent to a worker process still recognises its leaves."""

    __slots__ = ()

    def __reduce__(self):
        return "_LEAF"

    def __repr__(self):
        return "*"


_LEAF = _LeafMarker()

# How each type splits, decided once per type (whether a type is a dict, a
# namedtuple or a dataclass never changes): flattening is on the path of
# every grad call and every parallel chunk, and most leaves are arrays.
# A node of a TreeDef is ``_LEAF``, ``None`` or ``(kind, type, meta, children)``.
_SEQ, _DICT, _ODICT, _DDICT, _NAMEDTUPLE, _DATACLASS, _CUSTOM = 1, 2, 3, 4, 5, 6, 7
_KIND: dict = {tuple: _SEQ, list: _SEQ, dict: _DICT, OrderedDict: _ODICT,
               defaultdict: _DDICT, np.ndarray: 0, float: 0}
_CUSTOM_RULES: dict = {}  # type -> (flatten, unflatten)
_STATIC_VALUE_TYPES = (int, str, bytes)  # bool is an int


def _kind(t):
    k = _KIND.get(t)
    if k is None:
        if t in _CUSTOM_RULES:
            k = _CUSTOM
        elif issubclass(t, OrderedDict):
            k = _ODICT
        elif issubclass(t, defaultdict):
            k = _DDICT
        elif issubclass(t, dict):
            k = _DICT
        elif issubclass(t, tuple) and hasattr(t, "_fields"):
            k = _NAMEDTUPLE
        elif dataclasses.is_dataclass(t):  # instances only: a class's type is ``type``
            k = _DATACLASS
        else:
            k = 0  # a leaf
        _KIND[t] = k
    return k


def register_pytree_node(cls, flatten, unflatten):
    """Make ``cls`` a container (JAX's signature): ``flatten(x) -> (children,
    aux_data)`` and ``unflatten(aux_data, children) -> x``.  ``aux_data`` is
    static structure (compared with ``==``; keep it hashable and picklable)."""
    if not isinstance(cls, type):
        raise TypeError(f"tapestry.tree_util.register_pytree_node: expected a class, "
                        f"got {cls!r}.")
    if cls in _CUSTOM_RULES or cls in (tuple, list, dict, OrderedDict, defaultdict):
        raise ValueError(f"tapestry.tree_util.register_pytree_node: {cls.__name__} is "
                         "already a pytree container.")
    if cls in (int, float, complex, bool, str, bytes, type(None), np.ndarray) or \
            issubclass(cls, np.generic):
        # every such value would become a container: ints in params silently
        # lost (rebuilt by unflatten), arrays no longer leaves
        raise ValueError(f"tapestry.tree_util.register_pytree_node: {cls.__name__} is a "
                         "leaf type (numbers, strings, None and arrays are leaves); "
                         "register a class of your own.")
    for what, fn in (("flatten", flatten), ("unflatten", unflatten)):
        if not callable(fn):
            raise TypeError(f"tapestry.tree_util.register_pytree_node({cls.__name__}): "
                            f"{what} must be a function, got {type(fn).__name__}.")
    _CUSTOM_RULES[cls] = (flatten, unflatten)
    _KIND[cls] = _CUSTOM
    return cls


def _static_marked(f):
    return bool(f.metadata.get("static", False))


def register_dataclass(cls, data_fields=None, meta_fields=None):
    """Register dataclass ``cls`` (JAX's signature): ``data_fields`` are
    children (differentiable), ``meta_fields`` static structure.  Left out,
    they are read from the fields: those with ``metadata={"static": True}``
    are meta fields.  Instances are rebuilt with ``cls(**fields)``.  Usable
    as a decorator."""
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError("tapestry.tree_util.register_dataclass: give data_fields and "
                            f"meta_fields, or pass a dataclass (got {cls.__name__}).")
        fields = [f for f in dataclasses.fields(cls) if f.init]
        data_fields = [f.name for f in fields if not _static_marked(f)]
        meta_fields = [f.name for f in fields if _static_marked(f)]
    elif data_fields is None or meta_fields is None:
        raise TypeError("tapestry.tree_util.register_dataclass: give both data_fields "
                        "and meta_fields, or neither.")
    data_fields, meta_fields = _field_names(data_fields), _field_names(meta_fields)
    _check_fields(cls, data_fields, meta_fields)

    def flatten(x):
        return ([getattr(x, n) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(meta, children):
        return cls(**dict(zip(data_fields, children)), **dict(zip(meta_fields, meta)))

    register_pytree_node(cls, flatten, unflatten)
    return cls


def _check_init_parameters(cls, names, where):
    """For a class that is not a dataclass, the fields against
    ``cls.__init__``: unflatten calls ``cls(**fields)``, so a required
    parameter left out failed at the first tree_map (after flatten had
    silently dropped it), and a name it does not take failed the same way."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):  # no signature to check against
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    by_name = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                   inspect.Parameter.KEYWORD_ONLY)]
    required = [p.name for p in params if p.name in by_name
                and p.default is inspect.Parameter.empty]
    missing = [n for n in required if n not in names]
    unknown = [n for n in names if n not in by_name]
    if missing or unknown:
        raise ValueError(
            f"{where}({cls.__name__}): instances are rebuilt with {cls.__name__}(**fields), "
            f"so data_fields and meta_fields must name parameters of its __init__ "
            f"({by_name}), every required one included. "
            + (f"Missing: {missing}. " if missing else "")
            + (f"Not parameters of {cls.__name__}: {unknown}." if unknown else ""))


def _field_names(names):
    if isinstance(names, str):  # "ab" would be two one-letter fields
        return (names,)
    return tuple(names)


def _check_fields(cls, data_fields, meta_fields):
    """Refuse at registration what would fail (or silently lose a field) at
    the first flatten: every name a string, no name twice, and for a
    dataclass exactly its ``init`` fields (JAX checks the same)."""
    where = "tapestry.tree_util.register_dataclass"
    names = data_fields + meta_fields
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{where}({cls.__name__}): field names must be strings, got "
                            f"{n!r}.")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{where}({cls.__name__}): {twice} listed more than once; each "
                         "field is either a data field or a meta field.")
    if not dataclasses.is_dataclass(cls):
        _check_init_parameters(cls, names, where)
        return
    init = [f.name for f in dataclasses.fields(cls) if f.init]
    missing = [n for n in init if n not in names]
    unknown = [n for n in names if n not in init]
    if missing or unknown:
        raise ValueError(
            f"{where}({cls.__name__}): data_fields and meta_fields must list every "
            f"init field of the dataclass, and only those ({init}). "
            + (f"Missing: {missing}. " if missing else "")
            + (f"Not init fields of {cls.__name__}: {unknown}. " if unknown else "")
            + "Add each field to data_fields (differentiated) or meta_fields (static).")


class _Keys(list):
    """A dict's keys in the sorted order its children are flattened in,
    with ``order``: the dict's own key order where it differs (else
    ``None``), which unflattening restores.  Equality is the list's: the
    order is not part of the structure (``{"b": 1, "a": 2}`` and
    ``{"a": 2, "b": 1}`` have one structure, as in JAX)."""

    __slots__ = ("order",)

    def __reduce__(self):
        return (_keys_of, (list(self), self.order))


def _keys_of(keys, order):
    k = _Keys(keys)
    k.order = order
    return k


def _sorted_keys(x):
    try:
        keys = _Keys(sorted(x))
    except TypeError:  # keys that do not compare: a deterministic order anyway
        keys = _Keys(sorted(x, key=lambda k: (type(k).__name__, repr(k))))
    own = list(x)
    keys.order = None if own == keys else tuple(own)
    return keys


def _in_own_order(keys, d):
    """``d`` (built in sorted key order) in the order ``keys.order`` keeps."""
    order = getattr(keys, "order", None)
    return d if order is None else {k: d[k] for k in order}


def _dataclass_parts(x):
    """(child names, static (name, value) pairs) of an unregistered dataclass."""
    names, static = [], []
    for f in dataclasses.fields(x):
        v = getattr(x, f.name)
        if _static_marked(f) or isinstance(v, _STATIC_VALUE_TYPES):
            static.append((f.name, v))
        else:
            names.append(f.name)
    return (tuple(names), tuple(static))


def _parts(k, t, x):
    """(meta, children) of container ``x`` of kind ``k``, type ``t``."""
    if k == _SEQ or k == _NAMEDTUPLE:
        return None, x
    if k == _DICT:
        keys = _sorted_keys(x)
        return keys, [x[c] for c in keys]
    if k == _ODICT:
        keys = tuple(x)
        return keys, [x[c] for c in keys]
    if k == _DDICT:
        keys = _sorted_keys(x)
        return (x.default_factory, keys), [x[c] for c in keys]
    if k == _DATACLASS:
        meta = _dataclass_parts(x)
        return meta, [getattr(x, n) for n in meta[0]]
    children, aux = _CUSTOM_RULES[t][0](x)
    return aux, list(children)


def _split(x, leaves):
    k = _KIND.get(type(x))
    if k == 0:
        leaves.append(x)
        return _LEAF
    if k is None:
        if x is None:
            return None
        k = _kind(type(x))
        if k == 0:
            leaves.append(x)
            return _LEAF
    if k == _SEQ:
        return (k, type(x), None, _split_all(x, leaves))
    if k == _DICT and type(x) is dict:
        keys = _sorted_keys(x)
        nodes = []
        for key in keys:
            c = x[key]
            if _KIND.get(type(c)) == 0:
                leaves.append(c)
                nodes.append(_LEAF)
            else:
                nodes.append(_split(c, leaves))
        return (k, dict, keys, nodes)
    meta, children = _parts(k, type(x), x)
    return (k, type(x), meta, _split_all(children, leaves))


def _split_all(children, leaves):
    """``[_split(c, leaves) for c in children]``, with known leaf types
    (arrays, floats) handled inline: most children are leaves."""
    nodes = []
    for c in children:
        if _KIND.get(type(c)) == 0:
            leaves.append(c)
            nodes.append(_LEAF)
        else:
            nodes.append(_split(c, leaves))
    return nodes


def _split_is_leaf(x, leaves, is_leaf):
    if is_leaf(x):  # before the None check: ``is_leaf=lambda x: x is None`` works
        leaves.append(x)
        return _LEAF
    if x is None:
        return None
    t = type(x)
    k = _KIND.get(t)
    if k is None:
        k = _kind(t)
    if k == 0:
        leaves.append(x)
        return _LEAF
    meta, children = _parts(k, t, x)
    return (k, t, meta, [_split_is_leaf(c, leaves, is_leaf) for c in children])


def _build(node, it):
    if node is None:
        return None
    if node is _LEAF:
        return next(it)
    k, t, meta, children = node
    built = [next(it) if c is _LEAF else _build(c, it) for c in children]
    if k == _SEQ:
        return t(built)
    if k == _DICT or k == _ODICT:
        d = _in_own_order(meta, dict(zip(meta, built)))
        return d if t is dict else t(d)
    if k == _DDICT:
        return t(meta[0], _in_own_order(meta[1], dict(zip(meta[1], built))).items())
    if k == _NAMEDTUPLE:
        return t(*built)
    if k == _DATACLASS:
        obj = object.__new__(t)  # possibly frozen; fields set as they were
        for n, v in zip(meta[0], built):
            object.__setattr__(obj, n, v)
        for n, v in meta[1]:
            object.__setattr__(obj, n, v)
        return obj
    rules = _CUSTOM_RULES.get(t)
    if rules is None:
        raise TypeError(f"tapestry.tree_util: {t.__name__} is not a registered pytree "
                        "node here; register it at import time of its module so that "
                        "worker processes see the registration too.")
    return rules[1](meta, built)


def _meta_equal(a, b):
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001  (arrays in aux data: compare by identity)
        return False


def _same(a, b):
    if a is _LEAF or b is _LEAF or a is None or b is None:
        return a is b
    if a[1] is not b[1] or len(a[3]) != len(b[3]) or not _meta_equal(a[2], b[2]):
        return False
    return all(_same(x, y) for x, y in zip(a[3], b[3]))


def _describe(node):
    if node is None or node is _LEAF:
        return repr(node)
    k, t, meta, children = node
    inner = [_describe(c) for c in children]
    if k == _SEQ:
        return ("(%s)" if t is tuple else "[%s]") % ", ".join(inner)
    if k in (_DICT, _ODICT, _DDICT):
        keys = meta[1] if k == _DDICT else meta
        body = ", ".join(f"{key!r}: {c}" for key, c in zip(keys, inner))
        return "{%s}" % body if t is dict else f"{t.__name__}({{{body}}})"
    return f"{t.__name__}({', '.join(inner)})"


def _paths(node, prefix, out):
    if node is _LEAF:
        out.append(prefix)
        return
    if node is None:
        return
    for step, c in zip(_child_keys(node), node[3]):
        _paths(c, prefix + step, out)


def leaf_paths(treedef, root=""):
    """Each leaf's path, in leaf order, written as Python would reach it from
    ``root``: ``"['w']"``, ``"[0]['b']"``, ``".weight"`` (dataclass and
    namedtuple fields); a tree that is one leaf gives ``root`` itself.  Used
    where a message or a saved file must name a leaf readably."""
    out = []
    _paths(treedef.node, root, out)
    return out


def _aux_leaves(node):
    """The values of ``node``'s aux data: a registered class's flatten aux
    (flattened, as a pytree), a dataclass's static fields."""
    k, _, meta, _ = node
    if k == _DATACLASS:
        return [v for _, v in meta[1]]
    if k == _CUSTOM:
        return tree_flatten(meta)[0]
    return []


def aux_holding(treedef, pick):
    """``(path, type name)`` of the first node of ``treedef`` whose aux data
    holds a value that ``pick`` selects, or ``None``.  Transformations
    rebuild their outputs with the aux data as it was: a traced value there
    would come back as a dead wrapper (a ``Var``, a batched or staged value)
    instead of a value, so they check with this and say so."""
    def walk(node):  # the steps to the node, innermost first, or None
        k = node[0]
        if (k == _DATACLASS or k == _CUSTOM) and any(pick(v) for v in _aux_leaves(node)):
            return [node[1].__name__]
        for i, c in enumerate(node[3]):
            if c.__class__ is tuple:
                found = walk(c)
                if found is not None:
                    return found + [_child_keys(node)[i]]  # (paths only when found)
        return None
    node = treedef.node
    found = walk(node) if node.__class__ is tuple else None
    return None if found is None else ("".join(reversed(found[1:])), found[0])


def map_aux(treedef, fn):
    """``treedef`` with ``fn`` applied to every leaf of every node's aux data
    (registered classes' aux data and dataclasses' static fields)."""
    def node_map(node):
        if node is None or node is _LEAF:
            return node
        k, t, meta, children = node
        if k == _DATACLASS:
            meta = (meta[0], tuple((n, fn(v)) for n, v in meta[1]))
        elif k == _CUSTOM:
            meta = tree_map(fn, meta)
        return (k, t, meta, [node_map(c) for c in children])
    return TreeDef(node_map(treedef.node), treedef.n_leaves)


def map_dict_keys(treedef, pick, fn):
    """``treedef`` with ``fn`` applied to the dict keys that ``pick``
    selects (their order kept), or ``treedef`` itself where none is: a key
    computed from a traced value (``{k: x}`` inside ``jit``) is rebuilt as
    its value, not as the dead wrapper."""
    found = [False]

    def keys_map(keys):
        if not any(pick(k) for k in keys):
            return keys
        found[0] = True
        order = getattr(keys, "order", None)
        new = [fn(k) for k in keys]
        if keys.__class__ is _Keys:
            return _keys_of(new, None if order is None else tuple(fn(k) for k in order))
        return tuple(new)

    def node_map(node):
        if node is None or node is _LEAF:
            return node
        k, t, meta, children = node
        if k == _DICT or k == _ODICT:
            meta = keys_map(meta)
        elif k == _DDICT:
            meta = (meta[0], keys_map(meta[1]))
        return (k, t, meta, [node_map(c) for c in children])
    new = TreeDef(node_map(treedef.node), treedef.n_leaves)
    return new if found[0] else treedef


class TreeDef:
    """How to rebuild a tree from its leaves (compare with ``==``; picklable)."""

    __slots__ = ("node", "n_leaves")

    def __init__(self, node, n_leaves):
        self.node = node
        self.n_leaves = n_leaves

    def __getstate__(self):
        return (self.node, self.n_leaves)

    def __setstate__(self, s):
        self.node, self.n_leaves = s

    @property
    def num_leaves(self):
        return self.n_leaves

    def is_leaf(self):
        """Whether the whole tree is one leaf (a bare array or number)."""
        return self.node is _LEAF

    def unflatten(self, leaves):
        if type(leaves) is not list and type(leaves) is not tuple:
            leaves = list(leaves)
        if len(leaves) != self.n_leaves:
            raise ValueError(f"tapestry.tree_util: {self!r} takes {self.n_leaves} leaves, "
                             f"got {len(leaves)}.")
        if self.node is _LEAF:
            return leaves[0]
        return _build(self.node, iter(leaves))

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TreeDef) or self.n_leaves != other.n_leaves:
            return False
        try:
            # nodes are nested tuples: Python compares them in C, each part by
            # identity first, then ``==`` -- what _same does, ~10x faster
            return bool(self.node == other.node)
        except Exception:  # noqa: BLE001  (an array in aux data: compare by identity)
            return _same(self.node, other.node)

    def __hash__(self):
        top = self.node[1] if isinstance(self.node, tuple) else self.node
        return hash((self.n_leaves, top if top is not None else 0))

    def __repr__(self):
        return f"TreeDef({_describe(self.node)})"


def tree_flatten(tree, is_leaf=None):
    """Return ``(leaves, treedef)``; ``is_leaf(x)`` True stops descending."""
    leaves = []
    node = _split(tree, leaves) if is_leaf is None else _split_is_leaf(tree, leaves, is_leaf)
    return leaves, TreeDef(node, len(leaves))


def tree_unflatten(treedef, leaves):
    """The tree of structure ``treedef`` holding ``leaves``."""
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def _child_keys(node):
    """Path steps to ``node``'s children, written as JAX writes key paths:
    ``[0]`` (sequences), ``['w']`` (dicts), ``.name`` (dataclasses and
    namedtuples), ``[i]`` (flattened children of registered classes)."""
    k, t, meta, children = node
    if k in (_DICT, _ODICT):
        return [f"[{key!r}]" for key in meta]
    if k == _DDICT:
        return [f"[{key!r}]" for key in meta[1]]
    if k == _DATACLASS:
        return [f".{n}" for n in meta[0]]
    if k == _NAMEDTUPLE:
        return [f".{n}" for n in t._fields]
    return [f"[{i}]" for i in range(len(children))]


def _summary(node):
    """One node, without its children: what a mismatch message shows."""
    if node is None:
        return "None"
    if node is _LEAF:
        return "a leaf"
    k, t, meta, children = node
    if k in (_DICT, _ODICT, _DDICT):
        keys = list(meta[1] if k == _DDICT else meta)
        return f"a {t.__name__} with keys {keys}"
    if k == _DATACLASS:
        return f"a {t.__name__} with fields {list(meta[0])}"
    if k == _CUSTOM:
        return f"a {t.__name__} with {len(children)} children (aux data {meta!r})"
    return f"a {t.__name__} of length {len(children)}"


def _first_difference(a, b, where):
    """``(path, summary in a, summary in b)`` where nodes ``a`` and ``b``
    first differ, or ``None`` if the structures are equal."""
    if a is _LEAF or b is _LEAF or a is None or b is None:
        return None if a is b else (where, _summary(a), _summary(b))
    if a[1] is not b[1] or len(a[3]) != len(b[3]) or not _meta_equal(a[2], b[2]):
        return (where, _summary(a), _summary(b))
    for key, x, y in zip(_child_keys(a), a[3], b[3]):
        d = _first_difference(x, y, where + key)
        if d is not None:
            return d
    return None


def structure_mismatch(expected, got, what_expected, what_got):
    """A sentence saying where tree structures ``expected`` and ``got``
    (TreeDefs) first differ and what each holds there, then both structures;
    ``None`` if they are equal."""
    d = _first_difference(expected.node, got.node, "")
    if d is None:
        return None
    where, e, g = d
    return (f"they differ at {where or 'the root'}: {e} in {what_expected}, {g} in "
            f"{what_got}. {what_expected[0].upper() + what_expected[1:]}: {expected!r}; "
            f"{what_got}: {got!r}")


def _up_to(node, x, out, where, loose):
    """Leaves of ``x`` cut at ``node``'s leaves (``x`` may go deeper there).
    With ``loose``, a list may stand for a tuple (or a namedtuple) and the
    other way round."""
    if node is _LEAF:
        out.append(x)
        return
    if node is None:
        if x is not None:
            raise TreeMismatch(where, "None", f"a {type(x).__name__}")
        return
    k, t, meta, children = node
    if type(x) is not t and not (loose and k in (_SEQ, _NAMEDTUPLE)
                                 and type(x) in (list, tuple)):
        raise TreeMismatch(where, _summary(node), f"a {type(x).__name__}")
    xmeta, xchildren = _parts(k, t, x)
    xnode = (k, t, xmeta, [_LEAF] * len(xchildren))
    if len(xchildren) != len(children) or not _meta_equal(meta, xmeta):
        raise TreeMismatch(where, _summary(node), _summary(xnode))
    for key, c, xc in zip(_child_keys(node), children, xchildren):
        _up_to(c, xc, out, where + key, loose)


class TreeMismatch(ValueError):
    """A tree that does not have the expected structure: ``args`` are
    ``(path, what the structure has there, what the tree has there)``."""


def match_up_to(treedef, tree, loose=False):
    """:func:`flatten_up_to` raising :class:`TreeMismatch` (so a caller can
    word its own error); ``loose`` lets lists and tuples stand for each other."""
    out = []
    _up_to(treedef.node, tree, out, "", loose)
    return out


class StructureMismatch(ValueError):
    """Where a tree (a cotangent, a tangent) differs from the tree it must
    match: ``where`` is the key path, ``expected`` and ``got`` say how."""

    def __init__(self, where, expected, got):
        super().__init__(where, expected, got)
        self.where, self.expected, self.got = where, expected, got


def _n_leaves(node):
    if node is None:
        return 0
    if node is _LEAF:
        return 1
    return sum(_n_leaves(c) for c in node[3])


def child_key(k, meta, i):
    """How child ``i`` of a node of kind ``k`` is reached: ``['w']``, ``[0]``, ``.name``."""
    if k == _DATACLASS:
        return f".{meta[0][i]}"
    if k in (_DICT, _ODICT):
        return f"[{meta[i]!r}]"
    if k == _DDICT:
        return f"[{meta[1][i]!r}]"
    return f"[{i}]"


def match_leaves(node, c, where, out):
    """Append the leaves of ``c`` (a cotangent or tangent) to ``out``,
    walking the tree ``node`` (a TreeDef's ``.node``) that it must match:
    same containers and keys; ``None`` stands for a zero subtree (its
    leaves are appended as ``None``).  Never by position alone: a dict with
    other keys is an error (:class:`StructureMismatch`), not a relabelling."""
    if c is None:
        out.extend([None] * _n_leaves(node))
        return
    if node is _LEAF:
        c_node = tree_flatten(c)[1].node
        if c_node is not _LEAF:
            raise StructureMismatch(where, "an array", f"a {type(c).__name__}")
        out.append(c)
        return
    if node is None:
        raise StructureMismatch(where, "None", f"a {type(c).__name__}")
    k, t, meta, children = node
    if type(c) is not t and not (k == _SEQ and type(c) in (list, tuple)):
        raise StructureMismatch(where, f"a {t.__name__}", f"a {type(c).__name__}")
    c_meta, c_children = _parts(k, t, c)  # a list for a tuple: the same sequence
    if k in (_DICT, _ODICT, _DDICT):
        keys = list(meta[1] if k == _DDICT else meta)
        c_keys = list(c_meta[1] if k == _DDICT else c_meta)
        if sorted(map(repr, keys)) != sorted(map(repr, c_keys)):
            raise StructureMismatch(where, f"keys {keys}", f"keys {c_keys}")
    elif len(c_children) != len(children):
        raise StructureMismatch(where, f"a {t.__name__} of length {len(children)}",
                                 f"length {len(c_children)}")
    elif k != _SEQ and not _meta_equal(meta, c_meta):
        raise StructureMismatch(where, f"{t.__name__} with {meta!r}",
                                 f"{t.__name__} with {c_meta!r}")
    for i, (child, cc) in enumerate(zip(children, c_children)):
        match_leaves(child, cc, where + child_key(k, meta, i), out)


def dataclass_prefix_as_tuples(prefix, tree):
    """``(prefix, tree)`` with every unregistered dataclass node of ``prefix``
    that meets one of ``tree``'s type replaced, in both, by the tuple of the
    fields ``tree``'s node has as children.

    An unregistered dataclass's int fields are static (part of the
    structure), so a prefix of axes like vmap's ``in_axes=(P(W=0, b=None),
    None)`` flattened on its own lost its axes to the structure, and never
    matched ``P(W=array, b=array)``.  Read against the tree, the prefix's
    fields are the tree's children (JAX's registered dataclasses behave so:
    their data fields are children whatever they hold)."""
    if prefix is None or isinstance(prefix, (int, np.integer)):
        return prefix, tree
    t = type(prefix)
    if type(tree) is t and _kind(t) == _DATACLASS:
        names = _dataclass_parts(tree)[0]
        pairs = [dataclass_prefix_as_tuples(getattr(prefix, n), getattr(tree, n))
                 for n in names]
        return tuple(p for p, _ in pairs), tuple(c for _, c in pairs)
    if t in (tuple, list) and type(tree) in (tuple, list) and len(prefix) == len(tree):
        pairs = [dataclass_prefix_as_tuples(p, c) for p, c in zip(prefix, tree)]
        return t(p for p, _ in pairs), type(tree)(c for _, c in pairs)
    if isinstance(prefix, dict) and isinstance(tree, dict) and prefix.keys() == tree.keys() \
            and type(prefix) is type(tree) and t in (dict, OrderedDict):
        pairs = {k: dataclass_prefix_as_tuples(prefix[k], tree[k]) for k in prefix}
        return t((k, p) for k, (p, _) in pairs.items()), t((k, c) for k, (_, c) in pairs.items())
    return prefix, tree


def flatten_up_to(treedef, tree):
    """The subtrees of ``tree`` at ``treedef``'s leaf positions."""
    try:
        return match_up_to(treedef, tree)
    except TreeMismatch as e:
        where, first, other = e.args
        raise ValueError(f"tapestry.tree_util.flatten_up_to: the tree differs from "
                         f"{treedef!r} at {where or 'the root'}: {first} expected, "
                         f"{other} given.") from None


def tree_map(f, tree, *rest, is_leaf=None):
    """Apply ``f`` leaf-wise over ``tree`` and trees of the same structure
    (the others may hold whole subtrees where ``tree`` has leaves)."""
    leaves, td = tree_flatten(tree, is_leaf)
    others = []
    for n, r in enumerate(rest, 2):
        rl, rtd = tree_flatten(r)
        if rtd == td:
            others.append(rl)
            continue
        try:
            out = match_up_to(td, r)
        except TreeMismatch as e:
            where, first, other = e.args
            raise ValueError(
                f"tapestry.tree_map: tree {n} does not have the first tree's structure; "
                f"they differ at {where or 'the root'}: {first} in the first tree, "
                f"{other} in tree {n}. First tree: {td!r}; tree {n}: {rtd!r}.") from None
        others.append(out)
    return td.unflatten([f(*xs) for xs in zip(leaves, *others)])


def tree_reduce(f, tree, initializer=None, is_leaf=None):
    """``functools.reduce(f, leaves)`` (with ``initializer`` when given)."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is None:
        return functools.reduce(f, leaves)
    return functools.reduce(f, leaves, initializer)


def ravel_pytree(tree):
    """``(flat, unravel)``: every leaf ravelled into one 1-d vector (dtype:
    the leaves' common type), and ``unravel(flat)`` rebuilding the tree with
    each leaf's shape and dtype (float32 leaves come back float32).  Works on
    traced leaves too, so it can sit inside a differentiated function."""
    leaves, td = tree_flatten(tree)
    shapes = [np.shape(x) for x in leaves]
    dtypes = [np.result_type(x) for x in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    if leaves:
        flat = np.concatenate([np.ravel(x) for x in leaves])
        if flat.dtype != dtype:
            flat = flat.astype(dtype)
    else:
        flat = np.zeros(0, dtype)
    ends = np.cumsum(sizes).tolist()

    def unravel(v):
        if np.shape(v) != (ends[-1] if ends else 0,):
            raise ValueError(f"tapestry.ravel_pytree: unravel expects a vector of shape "
                             f"({ends[-1] if ends else 0},), got {np.shape(v)}.")
        if np.result_type(v).kind == "c" and any(dt.kind != "c" for dt in dtypes):
            raise TypeError("tapestry.ravel_pytree: unravel was given a complex vector for "
                            "a tree with real leaves; casting would drop the imaginary "
                            "part. Pass np.real(v), or ravel a complex tree.")
        out, start = [], 0
        for end, shape, dt in zip(ends, shapes, dtypes):
            piece = np.reshape(v[start:end], shape)
            if piece.dtype != dt:
                piece = piece.astype(dt)
            out.append(piece)
            start = end
        return td.unflatten(out)

    return flat, unravel
