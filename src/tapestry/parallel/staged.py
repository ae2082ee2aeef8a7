"""``parallel_sum`` inside a ``jit`` trace: its chunks as one step of the
program, run on the executor at every replay.

Traced inline, a ``parallel_sum`` in a jitted function becomes the chunks'
steps one after the other: every replay runs them on the calling thread,
whatever ``executor=`` says.  Here the trace records one step instead,
whose function runs the chunks on the executor -- in this process, each
chunk replays one jitted program per chunk signature (:class:`CompiledChunks`:
``value_and_grad`` of the chunk's sum, the child tape's bits); in worker
processes, :func:`~.work.sum_chunk` -- and returns the sum and the gradient of each shared argument and item
being differentiated, assembled as the eager call assembles them: the
replay's result has the eager call's bits, on every executor.  ``f`` runs
on the replay's values each time, so what it reads from its closure is
read afresh, as without jit.

Not taken (the chunks are traced inline, as before) for the serial
executor, for ``f`` reaching a value traced by jit or another
transformation through its closure (it must be traced with the chunks),
for values traced at several levels or batched, and for a complex sum.
"""
from __future__ import annotations

import copy
import functools

import numpy as np

from ..core.backward import JointRule
from ..core.batched import Batched
from ..core.primitive import record
from ..core.staged import Staged, Unstageable
from ..core.var import Var
from .chunks import add_in_order, sum_pullback
from .executors import get_executor
from .runner import in_process, run_chunks
from .work import sum_chunk


class _Opaque:
    """Items passed to the step as one constant (a list of plain items is
    not taken apart into the program's arguments)."""

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = items


def staged_recorder(plan, executor):
    """The jit trace's recorder where ``plan``'s chunks can run as one step
    (see the module's docstring), else ``None``."""
    if executor is None or executor == "serial":
        return None
    leaves = ([] if plan.item_counts is not None else
              [x for l in plan.item_values for x in l] if plan.is_list else
              list(plan.item_values)) + list(plan.shared_values)
    rec = None
    for x in leaves:
        c = x.__class__
        if c is Var or c is Batched:
            return None
        if c is Staged:
            if rec is not None and x._rec is not rec:
                return None
            rec = x._rec
    if rec is not None and rec.inline_sums:
        return None  # (a trace found f's world changed after the step: see staged_sum)
    return rec


def staged_sum(rec, plan, f, bounds, executor, n_workers, progress, timeout):
    """The sum (and, when differentiated, its node on ``plan.top``) from one
    step of ``rec``'s program; ``None`` where the chunks must be traced
    inline instead."""
    seen = _environment(f, plan)
    if seen is None:
        return None
    step = _ChunksStep(plan, f, bounds, executor, n_workers, progress, timeout)
    args = step.arguments()
    first = step.run(*[_concrete(a) for a in args])  # (at the trace: the sum's own values)
    if first is None:
        return None
    rec.end_checks.append(functools.partial(_unchanged_since_the_step, seen))
    step.first, step.layout = _parts(first)
    out = rec.call(step, args, None)
    value, stored = out[0], _rebuilt(out[1:], step.layout)
    if plan.top is None:
        return value
    return record(plan.top, value, plan.parents(), JointRule(sum_pullback(stored, plan.top)),
                  (), {})


def _environment(f, plan):
    """What ``f`` reads (and the list of plain items, which the step holds
    as it is), walked as jit walks a function's environment; ``None`` where
    ``f`` reaches a traced value (it must be traced with the chunks) or
    something jit cannot guard."""
    from ..jit.env import ReachesTraced, environment
    try:
        return environment(f, [plan.items] if plan.item_counts is not None else [])
    except (ReachesTraced, Unstageable):
        return None


def _unchanged_since_the_step(seen):
    """The trace's end check (:attr:`~tapestry.core.staged.Recorder.end_checks`)
    of a step: every replay calls ``f`` on what it reads *then*, which the
    rest of the trace must not have changed -- an ``f`` or items the
    function made and then changed (``c = 2.0`` after the sum, ``m.s = 10``,
    ``items.append(...)``, an ``f`` that counts its calls), where each plain
    call starts afresh.  ``None``, or what changed."""
    why = seen.changed()
    if why is None:
        return None
    return f"parallel_sum's f: {why} after the chunks ran"


def _concrete(x):
    if x.__class__ is Staged:
        return x._value
    if x.__class__ is tuple:
        return tuple(_concrete(v) for v in x)
    return x


class _ChunksStep:
    """The step: ``(item leaves, shared leaves) -> (sum, gradient, ...)``."""

    def __init__(self, plan, f, bounds, executor, n_workers, progress, timeout):
        self.differentiate = plan.top is not None
        plan = copy.copy(plan)  # (without the trace's tape and traced values)
        plan.top = plan.item_leaves = plan.shared_leaves = None
        self.plan, self.f, self.bounds = plan, f, bounds
        self.executor, self.n_workers = executor, n_workers
        self.progress, self.timeout = progress, timeout
        self.first = None  # the trace's result, handed to the recorder once
        self.layout = None  # its gradients' kinds (:func:`_parts`)
        self.__name__ = "parallel_sum_chunks"
        self.compiled = CompiledChunks(f)

    def arguments(self):
        p = self.plan
        if p.item_counts is not None:
            items = _Opaque(p.items)
        elif p.is_list:
            items = tuple(x for l in p.item_values for x in l)
        else:
            items = tuple(p.item_values)
        return items, tuple(p.shared_values)

    def __call__(self, items, shared):
        if self.first is not None:
            out, self.first = self.first, None
            return out
        out = self.run(items, shared)
        flat, layout = (None, None) if out is None else _parts(out)  # (None: complex)
        if layout != self.layout:  # (the replay raises: jit traces the call again)
            raise _LayoutChanged("tapestry.parallel_sum: the chunks' results are laid out "
                                 "otherwise than at the trace (complex, sparse or dense)")
        return flat

    def run(self, items, shared):
        """The chunks on the executor: ``(sum, *gradients)``, or ``None`` for
        a complex sum (traced inline instead)."""
        p = copy.copy(self.plan)
        if items.__class__ is _Opaque:
            p.items = items.items
        elif p.is_list:
            vals, k = [], 0
            for l in self.plan.item_values:
                vals.append(list(items[k:k + len(l)]))
                k += len(l)
            p.item_values = vals
            p.items_as_given = False  # (the trace's items hold its staged values)
        else:
            p.item_values = list(items)
        p.shared_values = list(shared)
        differentiate = self.differentiate
        tasks = p.tasks(self.f, self.bounds, differentiate, stack_items=False)
        ex = get_executor(self.executor, self.n_workers)
        fn = sum_chunk
        if in_process(ex) and differentiate and not self.plan.batched:
            fn = self.compiled.sum_chunk  # one program per chunk signature
        results = run_chunks(ex, fn, tasks, "parallel_sum", self.progress, self.timeout)
        if any(len(r) == 3 for r in results) or \
                np.iscomplexobj(results[0][0]):
            return None
        value = add_in_order([r[0] for r in results])
        if not differentiate:
            return (value,)
        stored = p.assemble(self.bounds, [r[1] for r in results])
        return (value, *stored)


class _LayoutChanged(TypeError):
    """A replay's sum or gradients differ in kind from the trace's."""


def _parts(out):
    """``(value, *gradients)`` as arrays a program can hold, and their
    layout: a sparse gradient (:class:`~tapestry.AxisSparse`, as the chunks'
    child tapes give it) goes as its indices and values, and
    :func:`_rebuilt` makes it again in the trace.  Kept sparse, it meets the
    cotangent and the caller's other contributions as the eager call's does
    (densified here, its rows would be added in another order, and a
    gradient ``grad`` returns sparse would come back dense)."""
    flat, layout = [out[0]], []
    for c in out[1:]:
        if c is not None and c.__class__ is not np.ndarray and hasattr(c, "todense") \
                and hasattr(c, "indices"):
            flat += [c.indices, c.values]
            layout.append((c.__class__, c.axis, c.shape, c.coalesced))
        else:
            flat.append(c)
            layout.append(None if c is None else "dense")
    return tuple(flat), tuple(layout)


def _rebuilt(parts, layout):
    """The gradients from the step's outputs (see :func:`_parts`)."""
    out, k = [], 0
    for lay in layout:
        if lay is None or lay == "dense":
            out.append(parts[k])
            k += 1
        else:
            cls, axis, shape, coalesced = lay
            out.append(cls._trusted(axis, parts[k], parts[k + 1], shape, coalesced))
            k += 2
    return out


class CompiledChunks:
    """A chunk's value and gradient as a jitted program: ``value_and_grad``
    of the in-order sum of ``f`` over the chunk's items, with respect to the
    chunk's active leaves -- what :func:`~.work.sum_chunk` computes on its
    child tape, so a replay has its bits.  Chunks of one signature (the
    same number of items, shapes and active leaves) share one program;
    threads replay it at once.  A chunk whose program raises runs
    :func:`~.work.sum_chunk` instead, which names the item."""

    def __init__(self, f):
        self.f = f
        self.programs = {}  # active positions -> jit

    def sum_chunk(self, task):
        prog = self.programs.get(task.active)
        if prog is None:
            prog = self.programs.setdefault(task.active, _chunk_program(self.f, task.active))
        try:
            value, grads = prog(task.chunk, task.shared)
        except Exception:
            return sum_chunk(task)
        if np.iscomplexobj(value):
            return sum_chunk(task)
        return value, list(grads)


def _chunk_program(f, active):
    from ..core.api import _value_and_grad
    from ..core.pytree import tree_flatten
    from ..core.tracing import AS_SWEPT
    from ..jit.api import jit

    def chunk_value_and_grad(chunk, shared):
        leaves, td = tree_flatten((chunk, shared))

        def total(*xs):
            full = list(leaves)
            for k, x in zip(active, xs):
                full[k] = x
            items, sh = td.unflatten(full)
            values = [f(item, *sh) for item in items]
            out = values[0]
            for v in values[1:]:
                out = out + v
            return out
        # (the gradients as the child tape's sweep gives them: sparse ones
        # sparse, in their own dtype, and none as None)
        return _value_and_grad(total, tuple(range(len(active))), False, AS_SWEPT,
                               "parallel_sum")(*[leaves[k] for k in active])
    return jit(chunk_value_and_grad)
