"""Lowering a recorded trace to a straight-line Python function.

The recorder (:mod:`tapestry.core.staged`) wrote down every NumPy call the
traced function made on staged values -- for ``jit(grad(f))`` that is the
forward *and* the reverse sweep, with every decision of the engine (which
inputs are active, which rules run, where cotangents accumulate) already
taken.  :func:`lower` turns it into Python source, one statement per
step, and compiles it: calling it runs NumPy directly, with no ``Var``,
no dispatch and no node recording.

Steps nobody reads are dropped (guards are always kept: a guard on a value
the program never uses still protects a decision Python made with it).
Constant arrays the program holds are private copies, except arrays of the
function's environment, which the environment's guards compare with their
trace-time value before every replay.  Outputs are fresh arrays: a constant
output is copied on every call, so a caller writing into a result never
changes a later one.
"""
from __future__ import annotations

import math
import operator
import sys

import numpy as np

from ..core.staged import Slot


class GuardFailed(Exception):
    """A replay met a value that differs from the trace's (``step`` is the
    index of the guard in the program's step list)."""

    def __init__(self, step):
        super().__init__(step)
        self.step = step


def same_array(a, pinned):
    """Bitwise equality of a value with a pinned one (shape, dtype, bits)."""
    a = np.asarray(a)
    if a.shape != pinned.shape or a.dtype != pinned.dtype:
        return False
    if a.dtype.hasobject:
        return bool(np.all(a == pinned))
    return a.tobytes() == pinned.tobytes()


def same_float(a, b):
    """Two Python floats with the same bits (NaN equals NaN, -0.0 differs)."""
    return a == b and (a != 0.0 or math.copysign(1.0, a) == math.copysign(1.0, b)) \
        or (a != a and b != b)


class Program:
    """A lowered trace: ``run(*inputs) -> output leaves``, plus what
    ``explain`` prints."""

    def __init__(self, source, run, steps, n_calls, n_guards, consts):
        self.source = source
        self.run = run
        self.steps = steps
        self.n_calls = n_calls
        self.n_guards = n_guards
        self.consts = consts


def lower(rec, inputs, outputs, env_arrays=(), name="replay"):
    """Compile the steps of ``rec`` into a function of the input slots
    ``inputs`` returning ``outputs`` (a list of ``Slot`` or constants)."""
    steps = rec.steps
    live = _live_steps(steps, outputs)
    ns = {"GuardFailed": GuardFailed, "same_array": same_array, "same_float": same_float,
          "slice": slice, "Ellipsis": Ellipsis, "int": int, "float": float, "bool": bool,
          "index": operator.index, "np": np}
    names: dict = {}      # id(obj) -> name in ns
    keep: list = []       # constants, held alive
    env_ids = {id(a) for a in env_arrays}

    def const(obj, copy=True):
        key = id(obj)
        got = names.get(key)
        if got is not None:
            return got
        held = obj
        if copy and obj.__class__ is np.ndarray and id(_root(obj)) not in env_ids:
            # private (a later write by anyone cannot reach it), in the same
            # memory order: BLAS sums a transposed view in another order
            held = obj.copy(order="K")
        n = f"c{len(names)}"
        if callable(obj) and not isinstance(obj, (np.ndarray, np.generic, type)):
            n = f"{_ident(getattr(obj, '__name__', 'f'))}_{len(names)}"
        names[key] = n
        ns[n] = held
        keep.append(obj)  # ``obj`` stays alive, so its id is not reused meanwhile
        return n

    def expr(t):
        c = t.__class__
        if c is Slot:
            return f"v{t.i}"
        if c is tuple:
            inner = ", ".join(expr(v) for v in t)
            return f"({inner},)" if len(t) == 1 else f"({inner})"
        if c is list:
            return "[" + ", ".join(expr(v) for v in t) + "]"
        if c is dict and all(type(k) is str for k in t):
            return "{" + ", ".join(f"{k!r}: {expr(v)}" for k, v in t.items()) + "}"
        if c is slice:
            return f"slice({expr(t.start)}, {expr(t.stop)}, {expr(t.step)})"
        if t is None or t is Ellipsis or c is bool or c is int or c is str:
            return repr(t)
        if c is float and math.isfinite(t):
            return repr(t)
        return const(t)

    def call(step):
        fn = getattr(step.fn, "_implementation", step.fn)  # skips NumPy's dispatch
        parts = [expr(a) for a in step.args]
        if step.kwargs:
            for k, v in step.kwargs.items():
                parts.append(f"{k}={expr(v)}")
        return f"{const(fn, copy=False)}({', '.join(parts)})"

    lines = [f"def {name}({', '.join(f'v{s}' for s in inputs)}):"]
    n_calls = n_guards = 0
    for k, step in enumerate(steps):
        if not live[k]:
            continue
        kind = step.kind
        pad = "    "
        if step.err:  # the function's np.errstate around this call
            lines.append(f"    with np.errstate(**{step.err!r}):")
            pad = "        "
        if kind == "call":
            n_calls += 1
            if step.out is None:
                lines.append(f"{pad}{call(step)}")
            else:
                lines.append(f"{pad}v{step.out} = {call(step)}")
            continue
        if kind == "item":
            lines.append(f"    v{step.out} = v{step.args[0].i}[{step.args[1]!r}]")
            continue
        n_guards += 1
        v = f"v{step.args[0].i}" if kind != "raises" else None  # a raise: a call's args
        if kind == "bool":
            lines.append(f"    if {'not ' if step.value else ''}{v}: raise GuardFailed({k})")
        elif kind in ("int", "index"):
            conv = "int" if kind == "int" else "index"
            lines.append(f"    if {conv}({v}) != {step.value!r}: raise GuardFailed({k})")
        elif kind == "float":
            lines.append(f"    if not same_float(float({v}), {expr(step.value)}): "
                         f"raise GuardFailed({k})")
        elif kind == "pin":
            lines.append(f"    if not same_array({v}, {const(step.value, copy=False)}): "
                         f"raise GuardFailed({k})")
        elif kind == "shape":
            shape, dtype = step.value
            lines.append(f"    if {v}.shape != {shape!r} or {v}.dtype != "
                         f"{const(dtype, copy=False)}: raise GuardFailed({k})")
        elif kind == "raises":
            lines.append(f"{pad}try:")
            lines.append(f"{pad}    {call(step)}")
            lines.append(f"{pad}except {const(step.value, copy=False)}:")
            lines.append(f"{pad}    pass")
            lines.append(f"{pad}else:")
            lines.append(f"{pad}    raise GuardFailed({k})")
        else:  # pragma: no cover - a step kind added without lowering it
            raise AssertionError(kind)
    outs = []
    for o in outputs:
        if o.__class__ is Slot:
            outs.append(f"v{o.i}")
        elif o.__class__ is np.ndarray:
            outs.append(f"{const(o)}.copy()")  # a fresh array on every call
        else:
            outs.append(expr(o))
    lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    code = compile(source, f"<tapestry.jit {name}>", "exec")
    exec(code, ns)
    return Program(source, ns[name], steps, n_calls, n_guards, keep)


def held_constants(steps, outputs, known=()):
    """The arrays among the record's constants (or owning their memory)
    that something besides the record holds: a cache (``lru_cache``), a
    container or an object the environment walk cannot see, foreign memory
    (``np.frombuffer``).  Their contents can change between calls, so they
    are guarded like the environment's arrays instead of copied.  A
    temporary the function made is held by the record alone (its reference
    count says so) and stays a private copy; constant outputs always count.
    ``known``: ids of arrays already guarded."""
    occ: dict = {}
    members: dict = {}

    def visit(t):
        c = t.__class__
        if c is np.ndarray:
            occ[id(t)] = occ.get(id(t), 0) + 1
            members[id(t)] = t
        elif c is tuple or c is list:
            for v in t:
                visit(v)
        elif c is dict:
            for v in t.values():
                visit(v)
        elif c is slice:
            visit((t.start, t.stop, t.step))
    for st in steps:
        if st.kind == "call" or st.kind == "raises":
            visit(st.args)
            if st.kwargs:
                visit(st.kwargs)
    held = {}
    for o in outputs:
        if o.__class__ is np.ndarray:
            r = _root(o)
            held[id(r)] = r
    base_refs: dict = {}
    for a in list(members.values()):  # the chains of bases, each base once
        while isinstance(a.base, np.ndarray):
            base_refs[id(a.base)] = base_refs.get(id(a.base), 0) + 1
            if id(a.base) in members:
                break
            members[id(a.base)] = a = a.base
        else:
            if a.base is not None:  # memory of a non-array (bytes, mmap)
                held[id(a)] = a
    control = np.empty(0)
    members[id(control)] = control
    baseline = None
    for k, m in members.items():  # held by: members, m, getrefcount's argument
        if m is control:
            baseline = sys.getrefcount(m)
            break
    del members[id(control)]
    for k, m in members.items():
        extra = sys.getrefcount(m) - baseline - occ.get(k, 0) - base_refs.get(k, 0)
        if extra > 0:
            r = _root(m)
            held[id(r)] = r
    return [a for k, a in held.items() if k not in known]


def _root(a):
    """The array that owns ``a``'s memory (a view's base, recursively)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _ident(name):
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name))
    return name if name and not name[0].isdigit() else "f" + name


def _live_steps(steps, outputs):
    """Which steps the outputs or a guard need.  Guards and writes in place
    are always kept (a write into a view changes the array it views, which
    a liveness by slot would not see); the rest by a backward pass over the
    steps, repeated until nothing more is needed."""
    needed = {o.i for o in outputs if o.__class__ is Slot}
    live = [False] * len(steps)
    changed = True
    while changed:
        changed = False
        for k in range(len(steps) - 1, -1, -1):
            if live[k]:
                continue
            s = steps[k]
            if s.kind == "call" or s.kind == "item":
                if s.out is not None and s.out not in needed:
                    continue
            live[k] = changed = True
            _reads(s.args, needed)
            if s.kwargs:
                _reads(s.kwargs, needed)
    return live


def _reads(t, needed):
    c = t.__class__
    if c is Slot:
        needed.add(t.i)
    elif c is tuple or c is list:
        for v in t:
            _reads(v, needed)
    elif c is dict:
        for v in t.values():
            _reads(v, needed)
    elif c is slice:
        _reads((t.start, t.stop, t.step), needed)
