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
