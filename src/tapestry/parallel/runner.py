"""Running chunk tasks on an executor and getting results back in order.

Process-based executors pay for every task (pickling, a round trip), so
consecutive chunks are grouped into a few tasks per worker there; grouping
never changes a chunk's result, only how many round trips carry them.
"""
from __future__ import annotations

import functools

from . import transport
from .executors import SerialExecutor, ThreadExecutor
from .faults import Failure
from .progress import Progress
from .work import Task

#: Tasks per worker for process and Dask executors.  One task per worker
#: (each holding consecutive chunks) measured best here: W6 at 100,000
#: groups 19.6 ms vs 22.4 ms with two, W4 (64 models) 25.2 vs 27.9 ms, at
#: the price of no load balancing between uneven chunks (M=512 W4: 207 vs
#: 197 ms).
TASKS_PER_WORKER = 1


def _run_group(fn, group):
    return [fn(t) for t in group]


def _in_process(ex):
    return isinstance(ex, (SerialExecutor, ThreadExecutor)) or getattr(ex, "threaded", False)


def run_chunks(ex, fn, tasks, opname, progress=False):
    """``[fn(t) for t in tasks]`` on ``ex``, in task order; a
    :class:`Failure` from any chunk is raised here, naming its item."""
    if _in_process(ex):
        groups = [[t] for t in tasks]
        call, payloads, unpack = (lambda g: [fn(g[0])]), groups, None  # noqa: E731
    else:
        n_groups = min(len(tasks), TASKS_PER_WORKER * max(1, ex.n_workers))
        size = -(-len(tasks) // n_groups)
        groups = [tasks[i:i + size] for i in range(0, len(tasks), size)]
        if isinstance(tasks[0], Task):  # chunk tasks of one call: pack them
            return _run_packed(ex, fn, groups, opname, progress)
        call, payloads, unpack = functools.partial(_run_group, fn), groups, None
    return _collect(ex, call, payloads, len(groups), unpack, opname, progress)


def _run_packed(ex, fn, groups, opname, progress):
    """Chunk tasks packed for other processes (see :mod:`.transport`)."""
    packed = transport.Call(fn, groups, local=getattr(ex, "local", True))
    try:
        results = _collect(ex, None, packed.payloads, len(groups), packed.unpack, opname,
                           progress)
    except BaseException:
        packed.done(clean=False)  # tasks may still be running: their arena is dropped
        raise
    packed.done()
    return results


def _collect(ex, call, payloads, n, unpack, opname, progress):
    """Run ``n`` payloads; chunk results in order, or the first failure raised."""
    results = [None] * n
    bar = Progress(opname, n, progress)
    for k, r in ex.run(call, payloads):
        if unpack is not None:
            r = unpack(r)
        _raise_failures(r, opname)
        results[k] = r
        bar.step()
    return [x for r in results for x in r]


def _raise_failures(r, opname):
    for x in r:
        if isinstance(x, Failure):
            x.raise_in_caller(opname)


def in_process(ex):
    """True when tasks run in this process (child tapes can be kept)."""
    return _in_process(ex)
