"""The function's containers and the aux data of its results, across replays.

A jitted function may append to a list or set a dict item it was given
(the trace's copies are mirrored back into the caller's containers), and
may return a registered class or dataclass whose aux data it made (a fresh
copy at every replay, so a caller's edit never shows in a later result).
Used by the forward calls (api.py) and by ``grad(jit(f))``'s split
forward (reverse.py).
"""
from __future__ import annotations

import copy as _copy

import numpy as np

from ..core.pytree import tree_flatten
from .env import unstaged

def fresh_aux_builder(out_td, env, arg_td, objects=()):
    """``None``, or ``build(leaves)`` for an output tree whose aux data (a
    registered class's, a dataclass's static fields) holds a mutable value
    the function made (``Out(y, meta=["a"])``): the plain call makes a new
    one every call, so each call gets a deep copy of it (the caller may
    change what it got).  Values from the arguments' aux data or the
    function's environment are handed out as they are, as the plain call
    does."""
    from ..core import pytree
    outside: dict = {}
    for kind, holder, key, obj, label in env.bindings:
        _gather(obj, outside)
        if kind == "seq":
            _gather(holder, outside)
    for a, *_ in env.arrays:
        outside[id(a)] = a
    for o in objects:
        _gather(o, outside)
    for v in _aux_values(arg_td.node if arg_td is not None else None, pytree):
        _gather(v, outside)
    made = [v for v in _aux_values(out_td.node, pytree)
            if not _frozen(v) and id(v) not in outside]
    if not made:
        return None

    def copied(td, ids):
        memo = dict(outside)
        return _map_aux_values(
            td, lambda v: _copy.deepcopy(v, memo) if id(v) in ids else v, pytree)
    # (the first call hands out the function's own objects: keep copies)
    template = copied(out_td, {id(v) for v in made})
    ids = {id(v) for v in _aux_values(template.node, pytree)
           if not _frozen(v) and id(v) not in outside}

    def build(leaves):
        return copied(template, ids).unflatten(leaves)
    return build


def _aux_values(node, pytree):
    """The aux data values of a tree's nodes: each static field of a
    dataclass, the whole aux data of a registered class."""
    if node is None or node is pytree._LEAF:
        return
    k, t, meta, children = node
    if k == pytree._DATACLASS:
        yield from (v for _, v in meta[1])
    elif k == pytree._CUSTOM:
        yield meta
    for c in children:
        yield from _aux_values(c, pytree)


def _map_aux_values(treedef, fn, pytree):
    """``treedef`` with ``fn`` applied to each value :func:`_aux_values` gives."""
    def node_map(node):
        if node is None or node is pytree._LEAF:
            return node
        k, t, meta, children = node
        if k == pytree._DATACLASS:
            meta = (meta[0], tuple((n, fn(v)) for n, v in meta[1]))
        elif k == pytree._CUSTOM:
            meta = fn(meta)
        return (k, t, meta, [node_map(c) for c in children])
    return pytree.TreeDef(node_map(treedef.node), treedef.n_leaves)


_FROZEN = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis), type, np.dtype,
           np.generic, range, slice)


def _frozen(v):
    """Whether nothing in ``v`` can be changed in place."""
    if isinstance(v, _FROZEN):
        return True
    if isinstance(v, (tuple, frozenset)):
        return all(_frozen(x) for x in v)
    return False


def _copied_containers(orig, copy, out):
    """``{id(copy): (copy, original)}`` for the mutable containers (lists,
    dicts, dataclass objects) of the argument tree ``orig`` and their copies
    in ``copy``, the tree the trace passes (same structure, staged leaves)."""
    c = orig.__class__
    if copy.__class__ is not c or orig is copy:
        return out
    if isinstance(orig, (list, tuple)):
        out[id(copy)] = (copy, orig)  # (a tuple: the caller's own, not rebuilt)
        for a, b in zip(orig, copy):
            _copied_containers(a, b, out)
    elif isinstance(orig, dict):
        out[id(copy)] = (copy, orig)
        for k, v in orig.items():
            if k in copy:
                _copied_containers(v, copy[k], out)
    elif hasattr(c, "__dataclass_fields__") and hasattr(orig, "__dict__"):
        out[id(copy)] = (copy, orig)
        for n in c.__dataclass_fields__:
            _copied_containers(getattr(orig, n, None), getattr(copy, n, None), out)
    return out


def _mirror(copies, back=None):
    """Do to the caller's argument containers what the function did to their
    copies (``history.append(loss)``, ``p["w"] = ...``), with values in place
    of staged values and the caller's containers in place of their copies
    (``back``: ``{id(value): (value, the caller's leaf)}``, the caller's
    own leaves where the copies hold their values)."""
    seen: set = set()

    def value(v):
        got = copies.get(id(v))
        if got is not None and got[0] is v:
            return got[1]
        if back is not None:
            got = back.get(id(v))
            if got is not None and got[0] is v:
                return got[1]
        return unstaged(v, seen)
    for copy, orig in copies.values():
        if isinstance(orig, tuple):
            continue
        if isinstance(orig, list):
            orig[:] = [value(v) for v in copy]
        elif isinstance(orig, dict):
            items = [(k, value(v)) for k, v in copy.items()]
            orig.clear()
            orig.update(items)
        else:
            for n in type(orig).__dataclass_fields__:
                if hasattr(copy, n):
                    object.__setattr__(orig, n, value(getattr(copy, n)))


def _containers_changed(tree, treedef, leaves):
    """Whether the function changed the structure or the items of the
    argument containers it was given (``tree``, built from ``leaves``)."""
    now, td = tree_flatten(tree)
    return td != treedef or any(a is not b for a, b in zip(now, leaves))


#: Output leaves a replay may hand back as they are (immutable values).
_PLAIN_OUTPUTS = (np.ndarray, np.generic, int, float, complex, bool, str, bytes, type(None),
                  np.dtype, type, slice, type(Ellipsis))


def _gather(x, out, depth=0):
    """``out[id(o)] = o`` for ``x`` and the containers' contents inside it."""
    if id(x) in out or depth > 8 or _frozen(x):
        return
    out[id(x)] = x
    if isinstance(x, (list, tuple, set, frozenset)):
        for v in x:
            _gather(v, out, depth + 1)
    elif isinstance(x, dict):
        for v in x.values():
            _gather(v, out, depth + 1)


def returned_container(out, copies, env):
    """Where the function returns a list, dict or dataclass object that it
    was passed (``copies``: the trace's copies of the caller's) or that its
    environment holds (``return self.params``): ``"an argument"`` or ``"its
    environment"``, else ``None``.  The plain call hands back that very
    object (an edit of the result changes the caller's argument or the
    environment); a replay would build a new one."""
    outside: dict = {}
    for kind, holder, key, obj, label in env.bindings:
        _gather(obj, outside)
    return _find_container(out, copies, outside, set(), 0)


def _find_container(x, copies, outside, seen, depth):
    if depth > 64 or id(x) in seen or _frozen(x) or isinstance(x, np.ndarray):
        return None
    seen.add(id(x))
    c = x.__class__
    fields = getattr(c, "__dataclass_fields__", None)
    if c is not tuple and isinstance(x, (list, dict)) or fields is not None:
        if id(x) in copies:
            return "an argument"
        if id(x) in outside:
            return "its environment"
    if isinstance(x, (list, tuple)):
        items = x
    elif isinstance(x, dict):
        items = x.values()
    elif fields is not None:
        items = [getattr(x, n, None) for n in fields]
    else:
        return None
    for v in items:
        got = _find_container(v, copies, outside, seen, depth + 1)
        if got is not None:
            return got
    return None
