"""What the steps of a recorded program read, and objects the outputs rebuild.

Shared by the lowering (:mod:`tapestry.jit.program`) and the fusion pass
(:mod:`tapestry.jit.fuse`), which both walk steps' argument templates.
"""
from __future__ import annotations

from ..core.staged import Slot, instances_in


class Rebuild:
    """An output object made at every call from parts (slots or constants):
    ``fn(*parts)`` (a sparse gradient: ``AxisSparse._trusted``)."""

    __slots__ = ("fn", "parts")

    def __init__(self, fn, parts):
        self.fn, self.parts = fn, tuple(parts)


def output_slots(outputs):
    """The slots the outputs read (a Rebuild's parts included)."""
    got = set()
    for o in outputs:
        if o.__class__ is Slot:
            got.add(o.i)
        elif o.__class__ is Rebuild:
            got.update(p.i for p in o.parts if p.__class__ is Slot)
    return got


def slots_in(t, out):
    """Append the slot numbers a structure of arguments reads to ``out``."""
    out.extend(s.i for s in instances_in(t, Slot, []))
    return out


def reads_of(step):
    r = slots_in(step.args, [])
    if step.kwargs:
        slots_in(step.kwargs, r)
    return r


#: Output trees past these sizes are rebuilt by ``TreeDef.unflatten``
#: (the generated expression would be long or nested past the parser's limits).
_BUILD_MAX_LEAVES, _BUILD_MAX_DEPTH = 256, 32


def output_builder(treedef):
    """``build(leaves) -> tree``: ``treedef.unflatten`` as one generated
    function where the tree is tuples, lists and plain dicts (in their own
    key order, as unflatten rebuilds them): a replay rebuilds its outputs on
    every call.  Other trees get ``treedef.unflatten`` itself."""
    from ..core import pytree
    if treedef.n_leaves > _BUILD_MAX_LEAVES:
        return treedef.unflatten
    ns: dict = {}
    names = iter(range(treedef.n_leaves))
    try:
        expr = _build_expr(treedef.node, names, ns, pytree, 0)
    except _NotBuilt:
        return treedef.unflatten
    params = ", ".join(f"a{i}" for i in range(treedef.n_leaves))
    src = f"def build(leaves):\n    [{params}] = leaves\n    return {expr}\n"
    exec(compile(src, "<tapestry.jit outputs>", "exec"), ns)
    return ns["build"]


class _NotBuilt(Exception):
    """A node :func:`output_builder` leaves to ``TreeDef.unflatten``."""


def _build_expr(node, names, ns, pytree, depth):
    if node is pytree._LEAF:
        return f"a{next(names)}"
    if node is None:
        return "None"
    kind, t, meta, children = node
    if depth > _BUILD_MAX_DEPTH:
        raise _NotBuilt
    if kind == pytree._SEQ:
        inner = [_build_expr(c, names, ns, pytree, depth + 1) for c in children]
        if t is list:
            return "[" + ", ".join(inner) + "]"
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
    if kind == pytree._DICT and t is dict:
        values = dict(zip(meta, (_build_expr(c, names, ns, pytree, depth + 1)
                                 for c in children)))
        own = getattr(meta, "order", None) or meta
        items = []
        for key in own:
            n = f"k{len(ns)}"
            ns[n] = key
            items.append(f"{n}: {values[key]}")
        return "{" + ", ".join(items) + "}"
    raise _NotBuilt
