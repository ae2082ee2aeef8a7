"""Where chunks run: serial, a persistent thread pool, loky processes, any
``concurrent.futures.Executor``, or a Dask cluster.

Every adapter offers one operation, ``run(fn, tasks) -> iterator of
(task_number, result)`` in completion order; the callers put results back
in task order themselves, so what an executor does never changes the bits.

Why the pieces below exist:

* **Inline when nested.**  A worker that calls ``parallel_sum`` again would
  wait on the pool it is occupying (a deadlock with a bounded pool); a
  thread-local flag marks worker threads and process tasks, and nested calls
  there run serially in place.
* **BLAS limits.**  Two workers each running a 2-thread OpenBLAS on two
  cores oversubscribe them.  OpenBLAS's thread count is process-global, so
  thread workers share a reference-counted limit (first entrant sets 1, last
  leaver restores); process workers set it once per process.
* **Worker death.**  A killed loky worker breaks the pool; the pool is
  rebuilt and the lost tasks run once more, then a clear error.
"""
from __future__ import annotations

import atexit
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Executor, ThreadPoolExecutor, wait

from .faults import WorkerDiedError

_local = threading.local()
_lock = threading.Lock()


def in_worker():
    """True inside a tapestry worker (thread or process task)."""
    return getattr(_local, "in_worker", False)


class _WorkerScope:
    """Marks the current thread as a worker for the duration of a task."""

    def __enter__(self):
        self.prev = in_worker()
        _local.in_worker = True

    def __exit__(self, *exc):
        _local.in_worker = self.prev


# --- BLAS thread limits ------------------------------------------------------------
_blas = {"controller": None, "users": 0, "restore": None}


def _controller():
    if _blas["controller"] is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # optional: without it workers may oversubscribe
            _blas["controller"] = False
        else:
            _blas["controller"] = ThreadpoolController()
    return _blas["controller"]


class blas_single_thread:
    """Context: BLAS uses one thread while any parallel region is running."""

    def __enter__(self):
        with _lock:
            c = _controller()
            if c and _blas["users"] == 0:
                _blas["restore"] = c.limit(limits=1)
            _blas["users"] += 1

    def __exit__(self, *exc):
        with _lock:
            _blas["users"] -= 1
            if _blas["users"] == 0 and _blas["restore"] is not None:
                _blas["restore"].restore_original_limits()
                _blas["restore"] = None


_process_limited = False


def _limit_blas_in_process():
    """Once per worker process: BLAS on one thread.  (The allocator settings
    of :mod:`tapestry.core.allocator` come with ``import tapestry`` there.)"""
    global _process_limited
    if not _process_limited:
        c = _controller()
        if c:
            c.limit(limits=1)  # kept for the life of the worker process
        _process_limited = True


# --- the adapters ----------------------------------------------------------------------
class SerialExecutor:
    """Runs tasks one after another in the calling thread."""
    name = "serial"
    n_workers = 1

    def run(self, fn, tasks):
        for k, t in enumerate(tasks):
            yield k, fn(t)


def _thread_task(fn, t):
    with _WorkerScope():
        return fn(t)


class ThreadExecutor:
    """A persistent pool of threads (NumPy and BLAS release the GIL)."""
    name = "threads"

    def __init__(self, pool, n_workers):
        self.pool, self.n_workers = pool, n_workers

    def run(self, fn, tasks):
        with blas_single_thread():
            futures = {self.pool.submit(_thread_task, fn, t): k for k, t in enumerate(tasks)}
            yield from _as_completed(futures)


def _as_completed(futures):
    """Yield ``(k, result)`` as futures finish; on an error cancel the rest."""
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                yield futures[f], f.result()
    finally:
        for f in pending:
            f.cancel()


def _pickled_task(payload):
    """Process-side trampoline: ``payload`` is cloudpickle(fn, task), so
    lambdas and closures work with any process executor."""
    import cloudpickle
    fn, t = cloudpickle.loads(payload)
    _limit_blas_in_process()
    with _WorkerScope():
        return fn(t)


def _packed_task(p):
    """Process-side entry for a pre-packed group (see :mod:`.transport`)."""
    from .transport import run_packed
    _limit_blas_in_process()
    with _WorkerScope():
        return run_packed(p)


def _dumps(fn, t):
    try:
        import cloudpickle
    except ImportError as e:
        raise ImportError("tapestry.parallel: process and Dask executors need "
                          "cloudpickle; pip install 'tapestry[processes]'.") from e
    return cloudpickle.dumps((fn, t))


def _submission(fn, t):
    """``(callable, argument)`` to submit for ``fn(t)`` in another process:
    packed groups go as they are, anything else cloudpickled."""
    from .transport import Packed
    if type(t) is Packed:
        return _packed_task, t
    return _pickled_task, _dumps(fn, t)


class FuturesExecutor:
    """Any ``concurrent.futures.Executor`` given by the user.  Thread pools
    get the callables as they are; other executors get them cloudpickled."""
    name = "futures"
    local = True

    def __init__(self, executor):
        self.executor = executor
        self.threaded = isinstance(executor, ThreadPoolExecutor)
        self.n_workers = getattr(executor, "_max_workers", None) or os.cpu_count() or 1

    def run(self, fn, tasks):
        if self.threaded:
            with blas_single_thread():
                futures = {self.executor.submit(_thread_task, fn, t): k
                           for k, t in enumerate(tasks)}
                yield from _as_completed(futures)
        else:
            futures = {self.executor.submit(*_submission(fn, t)): k
                       for k, t in enumerate(tasks)}
            yield from _as_completed(futures)


class ProcessExecutor:
    """loky's reusable process pool: workers survive between calls; a pool
    broken by a dead worker is rebuilt and its lost tasks rerun once.

    The caller only waits: letting it run one group itself (as OpenMP's
    master thread does) measured W4 at 64 models x1.47 instead of x1.37 and
    W6 x1.58 instead of x1.52, but a crash in ``f`` would then take the
    caller down instead of one replaceable worker.
    """
    name = "processes"
    local = True

    def __init__(self, n_workers):
        self.n_workers = n_workers

    def _pool(self):
        try:
            from loky import get_reusable_executor
        except ImportError as e:
            raise ImportError("tapestry.parallel: executor='processes' needs loky; "
                              "pip install 'tapestry[processes]'.") from e
        return get_reusable_executor(max_workers=self.n_workers, timeout=300)

    def run(self, fn, tasks):
        from concurrent.futures.process import BrokenProcessPool
        payloads, futures, attempt = [], {}, 0
        pool = self._pool()
        for k, t in enumerate(tasks):  # submit each as soon as it is packed
            payloads.append(_submission(fn, t))
            futures[pool.submit(*payloads[k])] = k
        todo = list(range(len(payloads)))
        while todo:
            if attempt:
                pool = self._pool()
                futures = {pool.submit(*payloads[k]): k for k in todo}
            lost = []
            for f in _wait_all(futures):
                k = futures[f]
                try:
                    r = f.result()
                except BrokenProcessPool as e:
                    lost.append((k, e))
                    continue
                yield k, r
            if not lost:
                return
            if attempt == 1:
                k, e = lost[0]
                raise WorkerDiedError(
                    f"tapestry.parallel: a process worker died twice while running "
                    f"task {k} (of {len(payloads)}); giving up. The function may crash "
                    "the interpreter (segfault, os._exit, out of memory).") from e
            attempt += 1
            todo = sorted(k for k, _ in lost)


def _wait_all(futures):
    """Futures in completion order; errors other than a broken pool cancel
    the rest (raised by ``f.result()`` in the caller)."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield from done


class DaskExecutor:
    """A ``dask.distributed.Client``: tasks are submitted to its cluster;
    workers lost mid-task are retried by Dask's scheduler."""
    name = "dask"
    local = False  # workers may be on other machines: no shared memory

    def __init__(self, client):
        self.client = client
        try:
            self.n_workers = max(1, len(client.scheduler_info()["workers"]))
        except Exception:
            self.n_workers = 1

    def run(self, fn, tasks):
        from distributed import as_completed
        futures = {self.client.submit(*_submission(fn, t), pure=False,
                                      retries=1): k for k, t in enumerate(tasks)}
        try:
            for f in as_completed(list(futures)):
                yield futures[f], f.result()
        finally:
            for f in futures:
                f.cancel()


# --- choosing one --------------------------------------------------------------------
_thread_pools: dict = {}
_dask_default = {}


def _default_workers():
    return max(1, os.cpu_count() or 1)


def thread_pool(n_workers=None):
    """The persistent pool with ``n_workers`` threads (created once)."""
    n = n_workers or _default_workers()
    with _lock:
        pool = _thread_pools.get(n)
        if pool is None:
            pool = _thread_pools[n] = ThreadPoolExecutor(n, thread_name_prefix="tapestry")
    return pool


def dask_client():
    """A LocalCluster client started on first use and closed at exit."""
    with _lock:
        client = _dask_default.get("client")
        if client is None:
            try:
                from distributed import Client, LocalCluster
            except ImportError as e:
                raise ImportError("tapestry.parallel: executor='dask' needs "
                                  "dask.distributed; pip install 'tapestry[dask]'.") from e
            cluster = LocalCluster(n_workers=_default_workers(), threads_per_worker=1,
                                   processes=True, dashboard_address=":0")
            client = _dask_default["client"] = Client(cluster)
            atexit.register(close_dask)
    return client


def close_dask():
    """Close the LocalCluster that ``executor="dask"`` started (if any); the
    next such call starts a new one.  An idle cluster still wakes its
    processes (heartbeats, monitors), which benchmarks should not pay."""
    client = _dask_default.pop("client", None)
    if client is not None:
        cluster = client.cluster
        client.close()
        cluster.close()


_NAMES = ("serial", "threads", "processes", "dask")


def get_executor(executor, n_workers=None):
    """Normalize the user's ``executor=`` argument to an adapter."""
    if in_worker():  # nested call inside a worker: run in place
        return SerialExecutor()
    if executor is None or executor == "serial":
        return SerialExecutor()
    if executor == "threads":
        n = n_workers or _default_workers()
        return ThreadExecutor(thread_pool(n), n)
    if executor == "processes":
        return ProcessExecutor(n_workers or _default_workers())
    if executor == "dask":
        return DaskExecutor(dask_client())
    if isinstance(executor, Executor):
        return FuturesExecutor(executor)
    if type(executor).__name__ == "Client" and hasattr(executor, "submit"):
        return DaskExecutor(executor)
    raise ValueError(
        f"tapestry.parallel: unknown executor {executor!r}; use one of "
        f"{', '.join(map(repr, _NAMES))}, a concurrent.futures.Executor, or a "
        "dask.distributed.Client.")
