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
Constant arrays the program holds are private copies, laid out in memory as
the trace's were (NumPy sums in layout order), except arrays of the
function's environment, which the environment's guards compare with their
trace-time value before every replay.  Outputs are fresh arrays: a constant
output is copied on every call, so a caller writing into a result never
changes a later one.
"""
from __future__ import annotations

import contextlib
import math
import operator
import sys
import warnings

import numpy as np

from ..core.staged import Slot, Step, instances_in
from . import split as slices
from .split import c_ordered
from .slots import Rebuild, output_slots, reads_of  # noqa: F401  (Rebuild: for api)


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
    """Two Python floats with the same value and sign (NaN equals NaN of its
    sign: ``math.copysign(1, -nan)`` is -1; -0.0 differs from 0.0)."""
    return (a == b or (a != a and b != b)) and \
        math.copysign(1.0, a) == math.copysign(1.0, b)


class Program:
    """A lowered trace: ``run(*inputs) -> output leaves``, plus what
    ``explain`` prints."""

    def __init__(self, source, run, steps, n_calls, n_guards, consts, n_runs=0):
        self.n_runs = n_runs  # fused loops (tapestry.jit.fuse)
        self.whole = False  # one numba function (tapestry.jit.whole)
        self.kernel = None  # its whole.Kernel (tapestry.jit.items calls it in a loop)
        self.not_whole = None  # why not (explain prints it)
        self.source = source
        self.run = run
        self.steps = steps
        self.n_calls = n_calls
        self.n_guards = n_guards
        self.consts = consts


def lower(rec, inputs, outputs, env_arrays=(), name="replay", fuse=False):
    """Compile the steps of ``rec`` into a function of the input slots
    ``inputs`` returning ``outputs`` (a list of ``Slot`` or constants);
    with ``fuse``, runs of elementwise steps become compiled loops
    (:mod:`tapestry.jit.fuse`)."""
    steps, outputs = simplify(rec.steps, outputs, rec.meta)
    live = _live_steps(steps, outputs)
    n_runs = 0
    if fuse:
        from .fuse import fuse as fuse_runs
        steps, live, n_runs = fuse_runs(steps, live, outputs, rec.meta, rec.scalars)
    ns = {"GuardFailed": GuardFailed, "same_array": same_array, "same_float": same_float,
          "slice": slice, "Ellipsis": Ellipsis, "int": int, "float": float, "bool": bool,
          "index": operator.index, "np": np, "c_ordered": c_ordered, "filtered": filtered}
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
            held = private_copy(obj)  # a later write by anyone cannot reach it
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

    reuse = _buffer_plan(steps, live, outputs, inputs, rec.meta)
    schedule = slices.Schedule()  # cut the large steps or not: one choice per program

    def call(step, k=None):
        fn = getattr(step.fn, "_implementation", step.fn)  # skips NumPy's dispatch
        parts = [expr(a) for a in step.args]
        if step.kwargs:
            for key, v in step.kwargs.items():
                parts.append(f"{key}={expr(v)}")
        cut = _split_step(step, rec.meta, schedule)  # a large call: slices on threads
        got = reuse.get(k)
        plain = f"{const(cut or fn, copy=False)}({', '.join(parts)})"
        if got is None:
            return plain
        into, own_checks = got
        checks = _layout_checks(step, rec.meta, into)
        if checks is None:
            return plain
        checks = list(dict.fromkeys(checks + list(own_checks)))  # each test once
        # a dead buffer of the same shape takes the result
        ufunc = const(cut or _UFUNC_OF.get(step.fn, step.fn), copy=False)
        reused = f"{ufunc}({', '.join(parts + [f'out=v{into}'])})"
        return f"({reused} if {' and '.join(checks)} else {plain})" if checks else reused

    dead = _last_uses(steps, live, outputs, inputs)
    lines = [f"def {name}({', '.join(f'v{s}' for s in inputs)}):"]
    n_calls = n_guards = 0
    for k, step in enumerate(steps):
        if not live[k]:
            continue
        kind = step.kind
        pad = "    "
        if step.err:  # the function's np.errstate (and warning filters) around this call
            err = dict(step.err)
            added = err.pop("warning_filters", None)
            ctx = [f"np.errstate(**{err!r})"] if err else []
            if added:
                ctx.append(f"filtered({const(added, copy=False)})")
            lines.append(f"    with {', '.join(ctx)}:")
            pad = "        "
        if kind == "call":
            n_calls += 1
            if step.out is None:
                lines.append(f"{pad}{call(step)}")
            else:
                lines.append(f"{pad}v{step.out} = {call(step, k)}")
            _release(lines, dead.get(k))
            continue
        if kind == "item":
            lines.append(f"    v{step.out} = v{step.args[0].i}[{step.args[1]!r}]")
            _release(lines, dead.get(k))
            continue
        n_guards += 1
        v = f"v{step.args[0].i}" if step.args and kind != "raises" else None  # a raise: a call's args
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
        elif kind == "state":
            lines.append(f"    if {const(step.fn, copy=False)}() != "
                         f"{const(step.value, copy=False)}: raise GuardFailed({k})")
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
        _release(lines, dead.get(k))
    outs = []
    fresh = _fresh_constants(outputs, const, lines)
    for o in outputs:
        if o.__class__ is Slot:
            outs.append(f"v{o.i}")
        elif o.__class__ is np.ndarray:
            # a fresh array on every call, laid out as the constant (an F-order
            # array the function made stays F-order, as the plain call's)
            outs.append(fresh(o))
        elif o.__class__ is Rebuild:
            parts = [fresh(p) if p.__class__ is np.ndarray else expr(p) for p in o.parts]
            outs.append(f"{const(o.fn, copy=False)}({', '.join(parts)})")
        else:
            outs.append(expr(o))
    lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    code = compile(source, f"<tapestry.jit {name}>", "exec")
    exec(code, ns)
    return Program(source, ns[name], steps, n_calls, n_guards, keep, n_runs)


def _fresh_constants(outputs, const, lines):
    """``fresh(a)``: the expression of this call's new copy of the constant
    output ``a``, made once per call for each constant (appended to
    ``lines``).  Constants the function returns that share memory (one array
    returned twice, an array and a view of it: ``return c, c[1:]``) share it
    in the copies too, as in the plain call, where a write into one output
    shows in the other: their common base is copied once and each is a view
    of that copy at its own offset and strides (a layout it cannot make
    again raises: the function then runs uncompiled).  An array of the environment the
    function returns is not among them: it is handed out as it is."""
    consts = []
    for o in outputs:
        for p in (o.parts if o.__class__ is Rebuild else (o,)):
            if p.__class__ is np.ndarray and all(p is not q for q in consts):
                consts.append(p)
    groups: dict = {}
    for a in consts:
        groups.setdefault(id(_root(a)), []).append(a)
    made: dict = {}

    def fresh(a):
        got = made.get(id(a))
        if got is not None:
            return got
        n = f"o{len(made)}"
        root = _root(a)
        members = groups[id(root)]
        if len(members) == 1:
            lines.append(f"    {n} = {const(a)}.copy(order='K')")
            made[id(a)] = n
            return n
        off = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        obj = root.dtype.hasobject
        if root.__class__ is not np.ndarray or not (
                root.flags.c_contiguous or root.flags.f_contiguous) or \
                (obj and (a.dtype != root.dtype or off % root.itemsize)):
            # (lowering fails: the function runs uncompiled, as the plain call)
            raise ValueError("it returns arrays it made that share memory, in a layout "
                             "the program cannot make again")
        b = made.get(("base", id(root)))
        if b is None:
            b = made[("base", id(root))] = f"o{len(made)}b"
            lines.append(f"    {b} = {const(root)}.copy(order='K')")  # (same layout)
        if a is root:
            lines.append(f"    {n} = {b}")
        elif obj:  # (NumPy makes no object array over a buffer)
            lines.append(f"    {n} = np.lib.stride_tricks.as_strided({b}.reshape(-1, "
                         f"order='A')[{off // root.itemsize}:], {a.shape!r}, {a.strides!r})")
        else:
            lines.append(f"    {n} = np.ndarray({a.shape!r}, {const(a.dtype, copy=False)}, "
                         f"buffer={b}, offset={off}, strides={a.strides!r})")
        made[id(a)] = n
        return n
    return fresh


def _split_step(step, meta, schedule):
    """A :class:`tapestry.jit.split.Split` to call in place of a plain
    ufunc step (no keywords) whose result is large enough to cut over
    threads, or ``None``."""
    if step.out is None or step.kwargs or not _fresh_step(step) or step.out not in meta \
            or slices.THREADS < 2:
        return None
    return slices.split_for(step.fn, *meta[step.out], schedule)


#: Python operators as the ufuncs that take ``out=`` (``**`` is left out:
#: ``x ** 2`` is NumPy's ``square`` fast path, not ``power``).
_UFUNC_OF = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
             operator.truediv: np.true_divide, operator.neg: np.negative}
#: Smallest array whose buffer is worth reusing (below it an ``out=`` saves
#: less than it costs to pass).
REUSE_MIN_SIZE = 256


def _last_uses(steps, live, outputs, inputs):
    """step index -> slots whose last read is that step (``del`` them
    after it, so a replay holds no more memory than the plain call does).
    Outputs are kept; so are slots written in place (a view may alias them)."""
    keep = output_slots(outputs)
    keep.update(s.inplace for s in steps if s.kind == "call" and s.out is None)
    last = {}
    for k, s in enumerate(steps):
        if live[k]:
            for i in reads_of(s):
                last[i] = k
    dead: dict = {}
    for i, k in last.items():
        if i not in keep:
            dead.setdefault(k, []).append(i)
    return dead


def _release(lines, slots):
    if slots:
        lines.append(f"    del {', '.join(f'v{i}' for i in sorted(set(slots)))}")


#: Operators whose result is always new memory (never a view of an operand).
_FRESH_OPERATORS = frozenset(_UFUNC_OF) | {operator.matmul, operator.pow}


def _fresh_step(step):
    """A call whose result is new memory (a ufunc, arithmetic)."""
    return step.kind == "call" and step.out is not None and not step.kwargs and \
        (isinstance(step.fn, np.ufunc) or step.fn in _FRESH_OPERATORS)


def _reusing_step(step):
    """A call that can write its result into a given buffer (``out=``)."""
    return _fresh_step(step) and (step.fn in _UFUNC_OF or (
        isinstance(step.fn, np.ufunc) and step.fn.nout == 1 and step.fn.signature is None))


def _buffer_plan(steps, live, outputs, inputs, meta):
    """step index -> ``(slot, checks)``: a plain ufunc (or arithmetic
    operator) call may write its result into the buffer of an argument
    that dies there and has the result's shape and dtype, when no live
    value can see that memory any more (:func:`_private_buffers`);
    ``checks`` are the run-time tests the buffer itself must pass besides
    the operands' layout (:func:`_layout_checks`): a buffer reached
    through a view (W4's ``add`` into a reshaped matmul result) must be
    C-contiguous and writeable, and then the result is no output (the
    caller gets memory that owns itself, as from the plain call)."""
    private = _private_buffers(steps, live, outputs, inputs)
    returned = _may_be_returned(steps, outputs)
    plan = {}
    taken = set()
    for k, s in enumerate(steps):
        if not live[k] or not _reusing_step(s) or s.out not in meta:
            continue
        want = meta[s.out]
        if int(np.prod(want[0])) < REUSE_MIN_SIZE:
            continue
        read = reads_of(s)
        for a in s.args:
            if a.__class__ is not Slot or a.i in taken or meta.get(a.i) != want:
                continue
            got = private.get(a.i)
            if got is None or got[0] != k:
                continue
            group, direct = got[1], got[2]
            if any(j != a.i and j in group for j in read):
                continue  # another view of the buffer is an operand
            if not direct and s.out in returned:
                continue
            plan[k] = (a.i, () if direct else (f"v{a.i}.flags.c_contiguous",
                                                f"v{a.i}.flags.writeable"))
            taken.update(group)
            break
    return plan


def _private_buffers(steps, live, outputs, inputs):
    """slot -> ``(step, group, direct)`` for each slot whose memory is the
    program's own and dead after ``step``: every slot that may share it
    (``group``, by :func:`_memory_groups`) was made by a live step from
    slots of the group only (a view of a constant, an input or an output
    is no such memory), none is written in place, and none is read after
    ``step`` (the slot's own last read).  ``direct``: the slot is an array
    that owns its memory (:func:`_owner`), laid out as NumPy lays out a
    ufunc's result (no run-time test needed beyond the operands' layout)."""
    live_steps = [s for k, s in enumerate(steps) if live[k]]
    groups = _memory_groups(live_steps)
    outs = output_slots(outputs)
    made = {}
    last = {}
    written = set()
    for k, s in enumerate(steps):
        if not live[k]:
            continue
        for i in reads_of(s):
            last[i] = k
        if s.kind == "call" and s.out is None:
            written.add(s.inplace)
        elif s.out is not None:
            made[s.out] = s
    barred = set(inputs) | outs | written

    def own(j):
        s = made.get(j)
        if s is None or j in barred:
            return False
        if s.kind == "call" and (_fresh_step(s) or _new_memory(s.fn)):
            return True
        return not instances_in((s.args, s.kwargs), np.ndarray, [])  # a view of a constant
    private = {}
    for i, k in last.items():
        s = made.get(i)
        if s is None or not (s.kind == "call" and _fresh_step(s)) and i not in groups:
            continue  # neither fresh nor a view of anything the program made
        group = groups.get(i, frozenset((i,)))
        if all(own(j) and last.get(j, -1) <= k for j in group):
            private[i] = (k, group, _owner(s, made))
    return private


def _owner(s, made):
    """Whether step ``s`` makes an array that owns its memory: a fresh
    ufunc call, or an element of a fused loop's tuple of new arrays."""
    if s.kind == "call":
        return _fresh_step(s)
    if s.kind == "item" and s.args[0].__class__ is Slot:
        t = made.get(s.args[0].i)
        return t is not None and t.kind == "call" and getattr(t.fn, "new_memory", False) is True
    return False


def _layout_checks(step, meta, target=None):
    """The run-time tests under which ``out=`` a dead buffer gives the
    result NumPy would allocate: a C-contiguous one.  NumPy lays a ufunc's
    result out like its operands (``np.exp(a.T)`` is Fortran-ordered), and
    a later reduction sums in layout order: the same values laid out
    otherwise round differently.  With at most one axis longer than 1 every
    contiguous layout is the same (no test); otherwise every operand of two
    or more dimensions must be C-contiguous (then so is NumPy's result), or,
    besides the buffer (slot ``target``), C-ordered (:func:`c_ordered`: a
    broadcast view such as W4's ``W2.T`` cotangent).
    ``None``: never (a constant operand laid out otherwise)."""
    if sum(d > 1 for d in meta[step.out][0]) < 2:
        return []
    checks = []
    for a in step.args:
        if a.__class__ is Slot:
            m = meta.get(a.i)
            if m is not None and len(m[0]) >= 2:
                flag = f"v{a.i}.flags.c_contiguous"
                checks.append(flag if a.i == target else f"({flag} or c_ordered(v{a.i}))")
        elif a.__class__ is np.ndarray and a.ndim >= 2 and not a.flags.c_contiguous:
            return None
    return checks


def private_copy(a):
    """A copy of ``a`` laid out in memory exactly as ``a`` is: the same
    strides, zero strides (a broadcast) and negative ones (a reversed view)
    included.  NumPy and BLAS choose their loop, and with it the order of
    a sum, by layout: a broadcast constant copied contiguous goes to BLAS
    where the trace ran NumPy's own matmul loop, and the replay rounds
    differently from the trace (a difference of 1e-13 in W4's gradients)."""
    if a.dtype.hasobject or a.size == 0 or a.flags.c_contiguous:
        return a.copy(order="K")
    lo = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0) + a.itemsize
    buf = np.empty(hi - lo, np.uint8)
    held = np.ndarray(a.shape, a.dtype, buffer=buf, offset=-lo, strides=a.strides)
    np.copyto(held, a)  # overlapping elements (zero strides) hold one value
    held.flags.writeable = a.flags.writeable
    return held


# --- simplification ------------------------------------------------------------------
def simplify(steps, outputs, meta):
    """Two rewrites that never change a value, applied before lowering:

    - a call repeated with the same function and arguments (a cotangent
      summed twice by two rules) is computed once;
    - ``g * y`` where ``g`` is a broadcast constant 1 of ``y``'s shape and
      dtype (the cotangent a ``sum`` hands its input) is ``y``.

    Both make a later step read an earlier slot instead, so neither applies
    to a value the program returns or that a returned value may view (the
    caller gets distinct fresh arrays, never a view of an argument, as from
    the plain call), nor in a program that writes in place."""
    if any(s.kind == "call" and s.out is None for s in steps):
        return steps, outputs
    returned = _may_be_returned(steps, outputs)
    alias: dict = {}
    seen: dict = {}
    out = []
    for s in steps:
        args = _rename(s.args, alias) if alias else s.args
        kwargs = _rename(s.kwargs, alias) if alias and s.kwargs else s.kwargs
        if args is not s.args or kwargs is not s.kwargs:
            s = Step(s.kind, s.fn, args, kwargs, s.out, s.value, s.site, s.inplace, s.err)
        if s.kind == "call" and s.out is not None and s.out not in returned and not s.err:
            same = _times_one(s, meta)
            if same is not None:
                alias[s.out] = same
                continue
            key = _call_key(s)
            if key is not None:
                got = seen.get(key)
                if got is not None:
                    alias[s.out] = got
                    continue
                seen[key] = s.out
        out.append(s)
    return out, outputs


def _may_be_returned(steps, outputs):
    """The slots whose memory the outputs may share: the outputs, and the
    operands of every step that made one of those without being sure to
    make new memory (a view, a reshape, an element of a tuple)."""
    got = output_slots(outputs)
    for s in reversed(steps):
        if s.out in got and not _fresh_step(s) and not _new_memory(s.fn):
            got.update(reads_of(s))
    return got


def _new_memory(fn):
    """Whether ``fn`` returns new memory whatever its arguments' layout:
    reductions, products, joins, copies (a reshape or ``np.einsum`` may
    return a view: not listed)."""
    if fn in _NEW_MEMORY or getattr(fn, "new_memory", False) is True:  # (a fused loop)
        return True
    u = getattr(fn, "__self__", None)
    return isinstance(u, np.ufunc) and getattr(fn, "__name__", "") in (
        "reduce", "accumulate", "outer", "reduceat")


def _new_memory_functions():
    from ..core.staged import _method
    from ..ops.reductions import _sum_fun
    fns = {np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.dot, np.vdot,
           np.inner, np.outer, np.tensordot, np.var, np.std, np.cumsum, np.cumprod,
           np.concatenate, np.stack, np.copy, np.zeros_like, np.ones_like, np.empty_like,
           np.full_like, np.linalg.inv, np.linalg.solve, np.linalg.det, np.sort,
           np.argsort, np.take, np.all, np.any, np.argmax, np.argmin, _sum_fun}
    fns.update(_method(n) for n in ("sum", "mean", "max", "min", "prod", "copy", "flatten",
                                    "dot", "std", "var", "cumsum", "cumprod", "all", "any",
                                    "argmax", "argmin", "argsort"))
    return frozenset(fns)


def _rename(t, alias):
    c = t.__class__
    if c is Slot:
        j = alias.get(t.i)
        return t if j is None else Slot(j)
    if c is tuple or c is list:
        new = [_rename(v, alias) for v in t]
        return t if all(a is b for a, b in zip(new, t)) else c(new)
    if c is dict:
        new = {k: _rename(v, alias) for k, v in t.items()}
        return t if all(new[k] is t[k] for k in t) else new
    if c is slice:
        new = _rename((t.start, t.stop, t.step), alias)
        return t if new == (t.start, t.stop, t.step) else slice(*new)
    return t


def _times_one(s, meta):
    """The slot ``s`` multiplies by a broadcast 1 of its own shape, or ``None``."""
    if s.fn is not np.multiply and s.fn is not operator.mul or len(s.args) != 2:
        return None
    a, b = s.args
    if a.__class__ is Slot:
        a, b = b, a
    if b.__class__ is not Slot or a.__class__ is not np.ndarray or any(a.strides) \
            or a.dtype.kind not in "biuf":  # complex: (1+0j) * (0-0j) is 0+0j
        return None
    want = meta.get(s.out)
    if want is None or meta.get(b.i) != want or a.shape != want[0] or a.dtype != want[1] \
            or a.size == 0 or a.flat[0] != 1:
        return None
    return b.i


def _call_key(s):
    """A hashable key of a call step (function and arguments), or ``None``
    when an argument is not hashable by value (an array: by identity)."""
    try:
        key = (s.fn, _freeze(s.args), _freeze(s.kwargs) if s.kwargs else None)
        hash(key)
        return key
    except TypeError:
        return None


def _freeze(t):
    c = t.__class__
    if c is Slot:
        return ("slot", t.i)
    if c is tuple or c is list:
        return (c.__name__,) + tuple(_freeze(v) for v in t)
    if c is dict:
        return ("dict",) + tuple((k, _freeze(v)) for k, v in sorted(t.items()))
    if c is slice:
        return ("slice", _freeze(t.start), _freeze(t.stop), _freeze(t.step))
    if c is np.ndarray:
        return ("array", id(t))  # the same constant object (held by the steps)
    if c is float:
        return ("float", t.hex())  # -0.0 and 0.0 differ; nan equals itself
    if c is complex:
        return ("complex", t.real.hex(), t.imag.hex())
    if isinstance(t, np.generic) and not t.dtype.hasobject:
        return (c, t.tobytes())  # np.float64(-0.0) == 0.0: compare the bits
    if c in _BY_VALUE:
        return (c, t)
    return ("object", id(t))  # equality may be coarser than the value (held by the steps)


_NEW_MEMORY = _new_memory_functions()
#: Constants whose equality is their value (a key by value merges only equal calls).
_BY_VALUE = frozenset({int, bool, str, bytes, type(None), type(Ellipsis), np.dtype, type})


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
        for part in (o.parts if o.__class__ is Rebuild else (o,)):
            if part.__class__ is np.ndarray:
                r = _root(part)
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


@contextlib.contextmanager
def filtered(added):
    """The warning filters ``added`` (those the function put ahead of its
    caller's around a call) ahead of the caller's filters now, as the plain
    call's ``catch_warnings`` + ``simplefilter`` puts them."""
    with warnings.catch_warnings():
        warnings.filters[:0] = added
        warnings._filters_mutated()
        yield


def _root(a):
    """The array that owns ``a``'s memory (a view's base, recursively)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _ident(name):
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name))
    return name if name and not name[0].isdigit() else "f" + name


#: Calls that cannot raise or warn on a value of the traced shape and dtype
#: (views and fresh buffers): dropped where nothing reads them.
_QUIET = frozenset({np.swapaxes, np.transpose, np.broadcast_to, np.reshape, np.expand_dims,
                    np.squeeze, np.moveaxis, np.ravel, np.zeros, np.ones, np.empty,
                    np.zeros_like, np.ones_like, np.empty_like, np.copy, np.shape,
                    np.ndim, np.size})


def _quiet(fn):
    try:
        return fn in _QUIET
    except TypeError:  # (an unhashable callable object)
        return False


def _live_steps(steps, outputs):
    """Which steps the outputs or a guard need.  Guards and writes in place
    are always kept (a write into a view changes the array it views, which
    a liveness by slot would not see), and so is every call that can raise
    or warn on the values it gets: the plain call runs it, so its error is
    the plain call's (``np.linalg.cholesky(a)`` called to check ``a``, a
    ``log`` of a zero under ``np.errstate(divide="raise")``, the loss value
    ``jit(grad(f))`` does not return).  The rest (items, views, fresh
    buffers) by a backward pass over the steps, repeated until nothing more
    is needed."""
    needed = output_slots(outputs)
    live = [False] * len(steps)
    changed = True
    while changed:
        changed = False
        for k in range(len(steps) - 1, -1, -1):
            if live[k]:
                continue
            s = steps[k]
            if s.kind == "item" or (s.kind == "call" and _quiet(s.fn)):
                if s.out is not None and s.out not in needed:
                    continue
            live[k] = changed = True
            needed.update(reads_of(s))
    return live


# --- partial evaluation: a joint program split into forward and backward -----------------
class _Part:
    """The steps of one half of a split record, as ``lower`` reads a recorder."""

    __slots__ = ("steps", "meta", "scalars")

    def __init__(self, steps, meta, scalars):
        self.steps, self.meta, self.scalars = steps, meta, scalars


class Split:
    """A joint program (forward and reverse sweep of ``vjp(f)`` at a point,
    applied to cotangents) cut in two, as JAX's partial evaluation cuts
    ``vjp(jit(f))``: ``forward(*known inputs) -> outputs + residuals`` runs
    every step that does not read a cotangent, and
    ``backward(*residuals, *cotangents) -> the joint's other outputs`` runs
    the rest.  ``residuals`` are the slots the backward reads of the
    forward's (nothing else is kept); ``env_reads``: ids of the
    environment's arrays the backward reads itself (not through a
    residual); ``halves``: what each program was lowered from (to lower
    them again with fused loops)."""

    __slots__ = ("forward", "backward", "residuals", "env_reads", "halves")

    def __init__(self, forward, backward, residuals, env_reads, halves):
        self.forward, self.backward = forward, backward
        self.residuals, self.env_reads, self.halves = residuals, env_reads, halves

    def lower_again(self, fuse):
        """``(forward, backward)`` lowered again (``fuse``: with fused loops)."""
        return tuple(lower(*h[:4], name=h[4], fuse=fuse) for h in self.halves)


def split(rec, known_inputs, unknown_inputs, known_outputs, unknown_outputs,
          env_arrays=(), name="replay", fuse=False):
    """Lower ``rec`` as two programs (:class:`Split`), or return a sentence
    saying why it cannot be split (then the joint program is used as is).

    ``known_outputs`` (the function's own outputs) must not read an unknown
    input; ``unknown_outputs`` (the cotangents) may read anything.  A
    backward step never writes into memory the forward made (a residual is
    read, never changed: a pullback may be called twice), and an output of
    the backward that is, or views, a residual is copied (the caller may
    write into what it gets)."""
    steps = rec.steps
    got = partial_eval(steps, unknown_inputs)
    if isinstance(got, str):
        return got
    known, unknown = got
    if output_slots(known_outputs) & unknown:
        return "an output of the function reads a cotangent"
    state = [s for s in steps if s.kind == "state"]  # checked by both halves
    fwd_steps = [s for k, s in enumerate(steps) if known[k]]
    bwd_steps = state + [s for k, s in enumerate(steps) if not known[k]]
    reads = set()
    for s in bwd_steps:
        reads.update(reads_of(s))
    reads |= output_slots(unknown_outputs)
    residuals = sorted(i for i in reads if i not in unknown)
    bwd_outputs, meta = _copy_shared(bwd_steps, unknown_outputs, set(residuals), rec)
    env_arrays = list(env_arrays)
    halves = ((_Part(fwd_steps, rec.meta, rec.scalars), list(known_inputs),
               list(known_outputs) + [Slot(i) for i in residuals], env_arrays,
               f"{name}_forward"),
              (_Part(bwd_steps, meta, rec.scalars), residuals + list(unknown_inputs),
               bwd_outputs, env_arrays, f"{name}_backward"))
    fwd, bwd = (lower(*h[:4], name=h[4], fuse=fuse) for h in halves)
    env_ids = {id(a) for a in env_arrays}
    consts = instances_in([(s.args, s.kwargs) for s in bwd_steps], np.ndarray, [])
    for o in bwd_outputs:
        consts += [p for p in (o.parts if o.__class__ is Rebuild else (o,))
                   if p.__class__ is np.ndarray]
    reads_env = {id(_root(a)) for a in consts} & env_ids
    return Split(fwd, bwd, residuals, reads_env, halves)


def partial_eval(steps, unknown_inputs):
    """``(known, unknown)``: whether each step runs in the forward (it
    reads no value that depends on an unknown input) and the slots that
    depend on one; or a sentence saying why the steps cannot be split.

    NumPy values are mutable, which JAX's are not: a write in place (a step
    with no result) is where the split can go wrong.  A backward write must
    land in memory the backward made (else a residual would change, and a
    second call of the pullback would see the first one's write), and a
    forward write, run earlier than its place in the record, must not come
    after a backward step that read the memory it writes.  Memory sharing
    is followed through every step that may return a view."""
    unknown = set(unknown_inputs)
    known = [True] * len(steps)
    for k, s in enumerate(steps):
        if s.kind == "state":
            continue  # reads nothing: both halves check it
        if any(i in unknown for i in reads_of(s)):
            known[k] = False
            if s.out is not None:
                unknown.add(s.out)
    groups = _memory_groups(steps)
    for k, s in enumerate(steps):
        if s.kind != "call" or s.out is not None:
            continue
        members = groups.get(s.inplace, (s.inplace,))
        if not known[k]:
            if any(i not in unknown for i in members):
                return "the reverse sweep writes into memory the forward made"
            continue
        for j in range(k):
            if not known[j] and any(i in members for i in reads_of(steps[j])):
                return "the forward writes into memory the reverse sweep read before"
    return known, unknown


def _memory_groups(steps):
    """slot -> the slots that may share its memory (itself included), for
    the slots some step may have made a view of or from: a step that may
    return a view of an operand (anything but fresh arithmetic and the
    functions that make new memory) joins its result to its operands."""
    parent: dict = {}

    def find(i):
        while parent.get(i, i) != i:
            i = parent[i]
        return i
    for s in steps:
        if s.out is None or s.kind not in ("call", "item"):
            continue
        if s.kind == "call" and (_fresh_step(s) or _new_memory(s.fn)):
            continue
        for i in reads_of(s):
            a, b = find(i), find(s.out)
            if a != b:
                parent[b] = a
    members: dict = {}
    for i in list(parent):
        members.setdefault(find(i), {find(i)}).add(i)
    return {i: frozenset(m) for m in members.values() for i in m}


def _copy_shared(steps, outputs, residuals, rec):
    """The backward's outputs, with a copy step (and its slot) for each
    output array that is, or may view, a residual: what the caller gets is
    then never memory a later call of the pullback reads.  Returns
    ``(outputs, meta)``."""
    meta = rec.meta
    n = max([rec.n] + [s.out + 1 for s in steps if s.out is not None])
    new_outputs = []

    def own(o):
        nonlocal n, meta
        if o.__class__ is not Slot or o.i not in meta:
            return o
        shared = _may_be_returned(steps, [o])
        if not (shared & residuals):
            return o
        if meta is rec.meta:
            meta = dict(meta)
        meta[n] = meta[o.i]
        steps.append(Step("call", np.copy, (o,), None, n))
        n += 1
        return Slot(n - 1)
    for o in outputs:
        if o.__class__ is Rebuild:
            o = Rebuild(o.fn, [own(p) for p in o.parts])
        else:
            o = own(o)
        new_outputs.append(o)
    return new_outputs, meta
