"""Running chunk tasks on an executor and getting results back in order.

Every call runs under one BLAS limit (one thread, see :mod:`.executors`),
taken once here for all its chunks, whatever the executor.

Process-based executors pay for every task (pickling, a round trip), so
consecutive chunks are grouped into a few tasks per worker there; grouping
never changes a chunk's result, only how many round trips carry them.
Lost tasks and deadlines come back from the executors as
:class:`~.faults.Lost` / :class:`~.faults.Timedout` (task numbers) and are
raised here as errors naming the items those tasks held.
"""
from __future__ import annotations

import functools
import itertools
import sys
import threading
import time

from . import transport
from .executors import SerialExecutor, ThreadExecutor, _thread_task, _WorkerScope, \
    blas_single_thread
from .faults import Failure, Lost, ParallelTimeoutError, Timedout, WorkerDiedError, span_text
from ..progress import Progress
from .work import Task, task_span

#: Tasks per worker for process and Dask executors.  One task per worker
#: (each holding consecutive chunks) measured best here: W6 at 100,000
#: groups 19.6 ms vs 22.4 ms with two, W4 (64 models) 25.2 vs 27.9 ms, at
#: the price of no load balancing between uneven chunks (M=512 W4: 207 vs
#: 197 ms).
TASKS_PER_WORKER = 1

#: Thread pools are woken only when the chunks left after the first are
#: estimated (from the first chunk's time) to take longer than this:
#: waking a pool thread costs ~50-100 us here, and a call that small runs
#: faster in the caller alone.
MIN_PARALLEL_SECONDS = 3e-4


def _run_group(fn, group):
    return [fn(t) for t in group]


def in_process(ex):
    """True when tasks run in this process (child tapes can be kept)."""
    return isinstance(ex, (SerialExecutor, ThreadExecutor)) or getattr(ex, "threaded", False)


def run_chunks(ex, fn, tasks, opname, progress=False, timeout=None):
    """``[fn(t) for t in tasks]`` on ``ex``, in task order, BLAS on one
    thread; a :class:`Failure` from any chunk is raised here, naming its
    item; ``timeout`` (seconds) bounds the whole call."""
    if not tasks:
        return []
    deadline = None if timeout is None else time.monotonic() + timeout
    with blas_single_thread(getattr(ex, "name", type(ex).__name__), in_process(ex)):
        if isinstance(ex, SerialExecutor):
            return _run_serial(fn, tasks, opname, progress, deadline, timeout)
        if in_process(ex):
            return _run_self_scheduled(ex, fn, tasks, opname, progress, deadline, timeout)
        groups = _split(tasks, TASKS_PER_WORKER * max(1, ex.n_workers))
        spans = [_group_span(g) for g in groups]
        try:
            if isinstance(tasks[0], Task):  # chunk tasks of one call: pack them
                return _run_packed(ex, fn, groups, opname, progress, deadline)
            call = functools.partial(_run_group, fn)
            return _collect(ex, call, groups, len(groups), None, opname, progress, deadline,
                            len(tasks))
        except (Lost, Timedout) as e:
            raise _public(e, spans, opname, ex, timeout) from getattr(e, "cause", None)


def _run_serial(fn, tasks, opname, progress, deadline, timeout):
    # (no bar object unless asked for: a call of a few chunks is ~0.5 ms)
    bar = Progress(opname, len(tasks), progress, unit=" chunks") if progress else None
    out = []
    for k, t in enumerate(tasks):
        if deadline is not None and k and time.monotonic() > deadline:
            raise _public(Timedout(range(k, len(tasks))), [task_span(x) for x in tasks],
                          opname, None, timeout)
        r = fn(t)
        if isinstance(r, Failure):
            r.raise_in_caller(opname)
        out.append(r)
        if bar is not None:
            bar.advance()
    return out


def _group_span(group):
    spans = [task_span(t) for t in group]
    return range(spans[0].start, spans[-1].stop)


def _public(e, spans, opname, ex, timeout):
    """The user-facing error for a lost task or a passed deadline."""
    if isinstance(e, Timedout):
        items = [spans[k] for k in e.ks]
        what = ", ".join(span_text(r) for r in items)
        where = e.note or _timeout_note(ex)
        return ParallelTimeoutError(
            f"tapestry.{opname}: timeout of {timeout} s passed with {what} not finished "
            f"({where}).", items)
    r = spans[e.k]
    name = type(e.cause).__name__
    if getattr(ex, "name", "") == "processes":
        msg = (f"a process worker died twice while running {span_text(r)}; giving up. "
               "f may crash the interpreter (segfault, os._exit, out of memory).")
    elif getattr(ex, "name", "") == "dask":
        msg = (f"Dask lost the worker running {span_text(r)} ({name}) after its retries; "
               "f may crash the interpreter (segfault, out of memory).")
    else:
        msg = (f"the executor given broke ({name}) while running {span_text(r)}; tapestry "
               "does not own its workers, so it does not retry: give a new executor, or "
               "use executor='processes', which replaces dead workers." + _guard_hint(ex))
    return WorkerDiedError(f"tapestry.{opname}: {msg}", r)


def _timeout_note(ex):
    """What became of unfinished tasks, when the executor did not say."""
    if ex is None or isinstance(ex, SerialExecutor):
        return "serial calls check the deadline between chunks only"
    if isinstance(ex, ThreadExecutor):
        return ("thread workers cannot be stopped: a hung item keeps its thread (and "
                "CPU) until f returns, and later calls use a new pool")
    if in_process(ex):
        return ("thread workers cannot be stopped: a hung item keeps its thread of your "
                "pool (and CPU) until f returns; tapestry does not own that pool, so later "
                "calls given it wait behind the item: pass a new pool, or "
                "executor='processes' for items that may hang")
    if getattr(ex, "name", "") == "processes":
        return "the process workers running them were killed and are replaced"
    return ("tasks not started were cancelled; tapestry cannot stop tasks already running "
            "on an executor it does not own: they keep their workers until f returns")


def _guard_hint(ex):
    """A process pool whose workers import the main script again ('spawn',
    'forkserver') breaks at once when the script lacks the main guard."""
    main = sys.modules.get("__main__")
    if in_process(ex) or getattr(main, "__file__", None) is None:
        return ""
    return (" If this runs from a script: a pool that starts its workers with 'spawn' or "
            "'forkserver' makes them import the script again, so the code that calls "
            "parallel_sum / parallel_map must be under `if __name__ == \"__main__\":`.")


def _split(tasks, n_groups):
    """Consecutive tasks in ``n_groups`` groups (never changes a result)."""
    size = -(-len(tasks) // min(len(tasks), n_groups))
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def _run_packed(ex, fn, groups, opname, progress, deadline):
    """Chunk tasks packed for other processes (see :mod:`.transport`)."""
    packed = transport.Call(fn, groups, local=getattr(ex, "local", True))
    try:
        results = _collect(ex, None, packed.payloads, len(groups), packed.unpack, opname,
                           progress, deadline, sum(map(len, groups)))
    except BaseException:
        packed.done(clean=False)  # tasks may still be running: their arena is dropped
        raise
    packed.done()
    return results


def _collect(ex, call, payloads, n, unpack, opname, progress, deadline, n_chunks=None):
    """Run ``n`` payloads (groups of ``n_chunks`` chunks in all); chunk
    results in order, or the failure of the lowest chunk raised, as a
    serial run would: a failing group is reported once every group before
    it is back (groups finish in any order, and raising the first to come
    back named whichever item the scheduling happened to finish first)."""
    results = [None] * n
    failed = n  # the lowest group seen failing
    bar = Progress(opname, n_chunks or n, progress, unit=" chunks")
    for k, r in ex.run(call, payloads, deadline):
        if unpack is not None:
            r = unpack(r)
        results[k] = r
        if k < failed and any(isinstance(x, Failure) for x in r):
            failed = k
        if failed < n and all(results[j] is not None for j in range(failed)):
            _raise_failures(results[failed], opname)
        bar.advance(len(r))
    return [x for r in results for x in r]


class _Scheduler:
    """Chunks handed out from a shared counter to whichever runner asks."""

    def __init__(self, fn, tasks, opname, progress):
        self.fn, self.tasks, self.n = fn, tasks, len(tasks)
        self.results = [None] * self.n
        self.counter, self.stop = itertools.count(), []
        self.bar = Progress(opname, self.n, progress, unit=" chunks")
        self.progress, self.lock = progress, threading.Lock()

    def run_one(self, k):
        try:
            r = self.fn(self.tasks[k])
        except BaseException:
            self.stop.append(True)
            raise
        self.results[k] = r
        if isinstance(r, Failure):
            self.stop.append(True)
        elif self.progress:
            with self.lock:
                self.bar.advance()

    def runner(self, _=None):
        while not self.stop:
            k = next(self.counter)
            if k >= self.n:
                return
            self.run_one(k)


class _Tuner:
    """Per call site (chunk function, ``f``'s code, number of chunks): the
    best recent wall time of the call run by the caller alone and with the pool.
    Engine-bound items hold the GIL, and two threads then run slower than
    one (W7 batched: x0.63); so a call site runs alone twice, then once
    with the pool, then the faster way, trying the other every
    ``RETRY`` calls.  Never changes a result: only who runs the chunks."""

    RETRY = 16

    def __init__(self):
        self.times = {}

    def key(self, fn, tasks):
        t = tasks[0][0] if type(tasks[0]) is tuple else tasks[0]
        f = getattr(t, "f", None)
        code = getattr(f, "__code__", None) or getattr(getattr(f, "fun", None), "__code__", None)
        return fn, code, len(tasks)  # (a jitted f: its function's code)

    def use_pool(self, key):
        alone, pooled, calls = self.times.get(key, (None, None, 0))
        self.times[key] = (alone, pooled, calls + 1)
        if calls < 2 or alone is None:  # two alone first: a first call runs cold
            return False
        if pooled is None:
            return True
        if calls % self.RETRY == 0:
            return pooled > alone
        return pooled < alone

    def worth_a_pool(self, key):
        """Whether this call site has run alone for long enough, in a
        recent call, that waking the pool is worth it before its first chunk."""
        alone = self.times.get(key, (None, None, 0))[0]
        return alone is not None and alone >= 2 * MIN_PARALLEL_SECONDS

    def record(self, key, pooled, seconds):
        """Keep each way's best time (robust to a loaded machine's spikes);
        every ``4 * RETRY`` calls both are measured afresh."""
        alone, with_pool, calls = self.times.get(key, (None, None, 0))
        if calls % (4 * self.RETRY) == 0:
            alone = with_pool = None
        if pooled:
            with_pool = seconds if with_pool is None else min(with_pool, seconds)
        else:
            alone = seconds if alone is None else min(alone, seconds)
        self.times[key] = (alone, with_pool, calls)


_tuner = _Tuner()


def _run_self_scheduled(ex, fn, tasks, opname, progress, deadline, timeout):
    """Thread pools: runners take the next chunk from a shared counter
    until none is left (dynamic balance, one wake-up of the caller per
    thread).  The caller is one of the runners; it wakes the pool only when
    the chunks left are worth it (the first chunk's time, and what
    :class:`_Tuner` measured at this call site); helpers that have not
    started when the caller runs out of chunks are cancelled.  With a
    ``timeout`` the caller only waits (it cannot interrupt itself).

    Speedups over serial, three rotations each, one pool task per chunk ->
    self-scheduled runners: W6 at 100,000 groups (16 chunks of ~2 ms)
    x1.12 / 1.73 / 1.23 -> x1.29 / 1.91 / 1.24; W4, 64 models x1.20 / 1.06 /
    1.17 -> x1.26 / 1.25 / 1.32.
    """
    s = _Scheduler(fn, tasks, opname, progress)
    helpers = min(s.n, max(1, ex.n_workers))
    key, pooled, worth = _tuner.key(fn, tasks), True, False
    if deadline is None and s.n > 1 and _tuner.worth_a_pool(key):
        # known from earlier calls: the pool is woken before the first chunk,
        # which a runner then takes like any other (the caller alone first
        # would leave an odd number of chunks to two runners: W4 heavy's 16
        # chunks ran as 1 + 8 chunk-times instead of 8)
        t0, worth = time.perf_counter(), True
        pooled = _tuner.use_pool(key)
        helpers = helpers - 1 if pooled else 0
    elif deadline is None:
        with _WorkerScope():
            t0 = time.perf_counter()
            s.run_one(next(s.counter))
            one = time.perf_counter() - t0
            worth = not (s.n == 1 or s.stop or one * (s.n - 1) < MIN_PARALLEL_SECONDS)
            pooled = worth and _tuner.use_pool(key)
            helpers = helpers - 1 if pooled else 0
    futures = _submit(ex, s.runner, helpers)
    if deadline is None:
        with _WorkerScope():
            s.runner()
        for f in futures:
            f.cancel()
    try:
        for _ in _drain(futures, deadline):
            pass
    except Timedout:
        s.stop.append(True)
        if hasattr(ex, "abandon"):
            ex.abandon()
        spans = [task_span(t) for t in tasks]
        raise _public(Timedout([k for k in range(s.n) if s.results[k] is None]), spans,
                      opname, ex, timeout) from None
    if worth:
        _tuner.record(key, pooled, time.perf_counter() - t0)
    for r in s.results:  # the failure of the lowest chunk, as a serial run would
        if isinstance(r, Failure):
            r.raise_in_caller(opname)
    return s.results


def _submit(ex, runner, k):
    submit = ex.pool.submit if isinstance(ex, ThreadExecutor) else ex.executor.submit
    return {submit(_thread_task, runner, None): j for j in range(k)}


def _drain(futures, deadline):
    from .executors import _as_completed
    live = {f: k for f, k in futures.items() if not f.cancelled()}
    return _as_completed(live, deadline)


def _raise_failures(r, opname):
    for x in r:
        if isinstance(x, Failure):
            x.raise_in_caller(opname)
