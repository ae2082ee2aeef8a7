"""Where chunks run: serial, a persistent thread pool, loky processes, any
``concurrent.futures.Executor``, or a Dask cluster.

Every adapter offers one operation, ``run(fn, tasks, deadline) -> iterator
of (task_number, result)`` in completion order; the callers put results
back in task order themselves, so what an executor does never changes the
bits.  A lost task raises :class:`~.faults.Lost`, a passed deadline
(``time.monotonic()`` value) :class:`~.faults.Timedout`; the runner turns
them into errors that name the items.

Why the pieces below exist:

* **Inline when nested.**  A task that calls ``parallel_sum`` again on the
  pool it is running in would wait for itself (a deadlock with a bounded
  pool).  Nested calls run serially in place: inside tapestry's workers (a
  thread-local flag), inside a thread of the user's ``ThreadPoolExecutor``
  given as ``executor``, inside a process pool's worker that inherited the
  pool object (fork), and inside a Dask worker.
* **BLAS limits.**  Every call, serial included, runs its chunks with BLAS
  on one thread, so a GEMM gives the same bits on every executor (OpenBLAS
  splits the sum differently on two threads).  OpenBLAS's thread count is
  process-global, so concurrent calls share a reference-counted limit
  (first entrant sets 1, last leaver restores; ~1 us); process workers get
  ``OPENBLAS_NUM_THREADS=1`` and set the limit once per process.
* **Worker death.**  A killed loky worker breaks the pool; the pool is
  rebuilt and the lost tasks run once more, then a clear error.  Workers
  watch their parent and exit when it dies.
* **Hung items.**  tapestry's thread pool uses daemon threads, and a pool
  with a hung thread is retired, so a hung item never blocks the
  interpreter's exit; loky workers past a deadline are killed.
"""
from __future__ import annotations

import atexit
import os
import queue
import sys
import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Executor, Future, \
    ThreadPoolExecutor, wait

import numpy as np

from .faults import Lost, Timedout

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
_blas = {"controller": None, "users": 0, "restore": None, "modules": 0}
_BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _controller(executor="serial", in_this_process=True):
    """threadpoolctl's controller, or False without threadpoolctl (warned
    once, worded for the first call's executor: its name, and whether its
    chunks run in this process).  Made again when modules were imported
    since (numba's OpenMP layer, torch, scipy: libraries loaded since then
    would keep their threads), the cheap sign of a new library."""
    n_modules = len(sys.modules)
    if _blas["controller"] and _blas["modules"] != n_modules:
        _blas["controller"] = None
    _blas["modules"] = n_modules
    if _blas["controller"] is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _blas["controller"] = False
            _warn_no_threadpoolctl(executor, in_this_process)
        else:
            _blas["controller"] = ThreadpoolController()
    return _blas["controller"]


def _warn_no_threadpoolctl(executor="serial", in_this_process=True):
    """The fallback without threadpoolctl: process workers still get one
    BLAS thread (environment), but this process keeps its own setting; the
    warning says which side the call that found out is on."""
    if os.environ.get("OPENBLAS_NUM_THREADS") == "1":  # already one thread everywhere
        return
    if in_this_process:
        what = (f"this {executor} call runs BLAS with its default number of threads, "
                "not one")
    else:
        what = ("BLAS keeps its default number of threads in this process and in any "
                f"{executor} worker started without OPENBLAS_NUM_THREADS=1 (tapestry's "
                "own process pool sets it)")
    warnings.warn(f"tapestry.parallel: threadpoolctl is not installed, so {what}; results "
                  "with large matrix products may then differ in the last bits between "
                  "executors. pip install threadpoolctl, or set OPENBLAS_NUM_THREADS=1 "
                  "before starting Python.", RuntimeWarning, stacklevel=4)


class blas_single_thread:
    """Context: BLAS uses one thread while any parallel call is running
    (``executor``: the call's executor name; ``in_this_process``: whether
    its chunks run here, serially or on threads; both word the warning)."""

    def __init__(self, executor="serial", in_this_process=True):
        self.executor, self.in_this_process = executor, in_this_process

    def __enter__(self):
        with _lock:
            c = _controller(self.executor, self.in_this_process)
            if c and _blas["users"] == 0:
                _blas["restore"] = _one_thread(c)
            _blas["users"] += 1

    def __exit__(self, *exc):
        with _lock:
            _blas["users"] -= 1
            if _blas["users"] == 0 and _blas["restore"] is not None:
                for lib, n in _blas["restore"]:
                    lib.set_num_threads(n)
                _blas["restore"] = None


def _one_thread(c):
    """What ``c.limit(limits=1)`` does -- every library ``c`` controls set
    to one thread -- without its cost (it reads each library's full
    description, ~10 us a call, paid by every serial call too): a library
    already on one thread (``OPENBLAS_NUM_THREADS=1``, a limit of the
    caller's) is only asked.  Returns ``[(library, threads before)]`` to
    restore on leaving."""
    restore = []
    for lib in c.lib_controllers:
        n = lib.get_num_threads()
        if n != 1:
            lib.set_num_threads(1)
            restore.append((lib, n))
    return restore


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


def _worker_init(parent):
    """loky worker start-up: exit as soon as the parent process is gone
    (a SIGKILLed caller would otherwise leave idle workers for minutes)."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)
    threading.Thread(target=watch, name="tapestry-parent-watch", daemon=True).start()


# --- the adapters ----------------------------------------------------------------------
class SerialExecutor:
    """Runs tasks one after another in the calling thread (a deadline is
    checked between tasks: a running item cannot be interrupted)."""
    name = "serial"
    n_workers = 1

    def run(self, fn, tasks, deadline=None):
        tasks = list(tasks)
        for k, t in enumerate(tasks):
            if deadline is not None and time.monotonic() > deadline:
                raise Timedout(range(k, len(tasks)))
            yield k, fn(t)


def _thread_task(fn, t):
    with _WorkerScope():
        return fn(t)


class DaemonPool:
    """A minimal thread pool of daemon threads: a thread stuck in a hung
    item does not block the interpreter's exit (``ThreadPoolExecutor``
    joins its threads at exit)."""

    def __init__(self, n):
        self.q, self.threads, self.retired = queue.SimpleQueue(), [], False
        for k in range(n):
            t = threading.Thread(target=self._work, name=f"tapestry-{k}", daemon=True)
            t.start()
            self.threads.append(t)

    def _work(self):
        while True:
            job = self.q.get()
            if job is None:
                return
            fut, fn, args = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # handed to the caller through the future
                fut.set_exception(e)

    def submit(self, fn, *args):
        fut = Future()
        self.q.put((fut, fn, args))
        return fut

    def shutdown(self):
        """Idle threads exit; a busy one exits when its task returns."""
        self.retired = True
        for _ in self.threads:
            self.q.put(None)


class ThreadExecutor:
    """A persistent pool of daemon threads (NumPy and BLAS release the GIL)."""
    name = "threads"

    def __init__(self, pool, n_workers):
        self._pool, self.n_workers = pool, n_workers

    @property
    def pool(self):
        """The live pool: a backward or tangent pass run after another call
        retired this one (a hung item) gets the new pool, not threads that
        have exited (its tasks would never start)."""
        if self._pool.retired:
            self._pool = thread_pool(self.n_workers)
        return self._pool

    def run(self, fn, tasks, deadline=None):
        futures = {self.pool.submit(_thread_task, fn, t): k for k, t in enumerate(tasks)}
        yield from _as_completed(futures, deadline)

    def abandon(self):
        """After a timeout: a thread may be stuck, so later calls get a new pool."""
        retire_thread_pool(self._pool)


def _as_completed(futures, deadline=None, lost=(BrokenExecutor,)):
    """Yield ``(k, result)`` as futures finish; on an error cancel the rest.
    A future failing with one of ``lost`` raises :class:`Lost`."""
    pending = set(futures)
    try:
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            if not done:
                raise Timedout([futures[f] for f in pending])
            for f in done:
                try:
                    r = f.result()
                except lost as e:
                    raise Lost(futures[f], e) from e
                yield futures[f], r
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
    get the callables as they are; other executors get them cloudpickled.
    A broken executor raises :class:`Lost` (tapestry does not own its
    workers, so it neither retries nor replaces them)."""
    name = "futures"
    local = True

    def __init__(self, executor):
        self.executor = executor
        self.threaded = isinstance(executor, ThreadPoolExecutor)
        self.n_workers = getattr(executor, "_max_workers", None) or _default_workers()

    def run(self, fn, tasks, deadline=None):
        futures = {}
        for k, t in enumerate(tasks):
            try:
                job = (_thread_task, fn, t) if self.threaded else _submission(fn, t)
                futures[self.executor.submit(*job)] = k
            except BrokenExecutor as e:  # broken by a task submitted before
                for f in futures:
                    f.cancel()
                raise Lost(k, e) from e
        yield from _as_completed(futures, deadline)


class ProcessExecutor:
    """loky's reusable process pool: workers survive between calls; a pool
    broken by a dead worker is rebuilt and its lost tasks rerun once; past
    a deadline the workers are killed (the next call starts new ones).

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
        pool = get_reusable_executor(max_workers=self.n_workers, timeout=300,
                                     initializer=_worker_init, initargs=(os.getpid(),),
                                     env={k: "1" for k in _BLAS_ENV})
        _stop_at_child_exit(pool)
        return pool

    def run(self, fn, tasks, deadline=None):
        from concurrent.futures.process import BrokenProcessPool
        payloads, futures, refused = [], {}, []
        pool = self._pool()
        for k, t in enumerate(tasks):  # submit each as soon as it is packed
            payloads.append(_submission(fn, t))
            try:
                futures[pool.submit(*payloads[k])] = k
            except BrokenProcessPool as e:  # a task submitted before killed its worker
                refused.append((k, e))
        self.current = pool
        try:
            yield from self._retrying(pool, payloads, futures, deadline, refused)
        except Timedout:  # the pool running the tasks: a new one after a retry
            self.current.shutdown(wait=False, kill_workers=True)
            raise

    def _retrying(self, pool, payloads, futures, deadline, refused=()):
        """Tasks lost to a broken pool (``refused``: those it would not even
        take) run once more on a new pool."""
        from concurrent.futures.process import BrokenProcessPool
        todo = []  # the tasks lost on the first attempt
        for attempt in (0, 1):
            if attempt:
                pool = self.current = self._pool()
                futures, refused = {}, []
                for k in todo:
                    try:
                        futures[pool.submit(*payloads[k])] = k
                    except BrokenProcessPool as e:
                        refused.append((k, e))
            lost = list(refused)
            for f in _wait_all(futures, deadline):
                k = futures[f]
                try:
                    r = f.result()
                except BrokenProcessPool as e:
                    lost.append((k, e))
                    continue
                yield k, r
            if not lost:
                return
            if attempt:
                k, e = min(lost, key=lambda x: x[0])
                raise Lost(k, e, twice=True) from e
            todo = sorted(k for k, _ in lost)


_loky = {"pool": None, "hook": None}


def _stop_at_child_exit(pool):
    """In a worker of the user's process pool (a multiprocessing child):
    stop our loky workers when it exits.  Such a process exits through
    multiprocessing, which joins its child processes without running
    ``atexit`` (where loky stops them), and loky's idle workers wait 300 s
    before leaving: the user's ``pool.shutdown()`` hung that long."""
    _loky["pool"] = pool
    if _loky["hook"] is not None:
        return
    import multiprocessing
    if multiprocessing.parent_process() is None:
        return
    from multiprocessing.util import Finalize
    _loky["hook"] = Finalize(None, _stop_loky, exitpriority=100)


def _stop_loky():
    pool, _loky["pool"] = _loky["pool"], None
    if pool is not None:
        pool.shutdown(wait=True, kill_workers=True)


def _wait_all(futures, deadline=None):
    """Futures in completion order (errors are raised by ``f.result()`` in
    the caller); :class:`Timedout` past the deadline."""
    pending = set(futures)
    while pending:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
        if not done:
            raise Timedout([futures[f] for f in pending])
        yield from done


class DaskExecutor:
    """A ``dask.distributed.Client``: tasks are submitted to its cluster;
    workers lost mid-task are retried by Dask's scheduler (``retries=1``),
    then reported as :class:`Lost`.  ``owned``: tapestry started the
    cluster (``executor="dask"``), so it may restart its workers."""
    name = "dask"
    local = False  # workers may be on other machines: no shared memory

    def __init__(self, client, owned=False):
        self._client, self.owned = client, owned
        try:
            self.n_workers = max(1, len(client.scheduler_info()["workers"]))
        except Exception:  # an unreachable scheduler: one worker assumed
            self.n_workers = 1

    @property
    def client(self):
        """The client; for tapestry's own cluster the current one (a backward
        pass run after close_dask() starts a new cluster, as a new call would)."""
        if self.owned and getattr(self._client, "status", "running") in ("closing", "closed"):
            self._client = dask_client()
        return self._client

    def run(self, fn, tasks, deadline=None):
        from distributed import as_completed
        from distributed.scheduler import KilledWorker
        futures = {self.client.submit(*_submission(fn, t), pure=False,
                                      retries=1): k for k, t in enumerate(tasks)}
        done = set()
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            for f in as_completed(list(futures), timeout=left):
                try:
                    r = f.result()
                except KilledWorker as e:
                    raise Lost(futures[f], e, twice=True) from e
                done.add(futures[f])
                yield futures[f], r
        except TimeoutError as e:
            note = self.free([f for f, k in futures.items() if k not in done])
            raise Timedout(set(futures.values()) - done, note) from e
        finally:
            for f in futures:
                f.cancel()

    def free(self, stuck):
        """After a deadline: cancel the unfinished tasks and say what was done.
        Dask cannot cancel a task that is running Python code: it keeps its
        worker's thread, and every later call would queue behind it.  So the
        workers running them are restarted when tapestry owns the cluster;
        a user's client is left alone and the message says how to free them."""
        keys = {f.key for f in stuck}
        try:
            busy = sorted(w for w, ks in self.client.processing().items() if keys & set(ks))
        except Exception:  # a scheduler that does not answer: nothing more to do here
            busy = []
        self.client.cancel(stuck)
        if not busy:
            try:
                none = not self.client.scheduler_info()["workers"]
            except Exception:
                none = False
            return ("the Dask cluster has no workers (still starting, or lost)" if none else
                    "Dask cancelled them before they started")
        if not self.owned:
            return (f"tapestry cancelled them, but a Dask task that is already running "
                    f"cannot be stopped: it keeps its worker ({', '.join(busy)}) until f "
                    f"returns, and later calls on this client wait behind it. tapestry "
                    f"does not restart the workers of a client it did not start: call "
                    f"client.restart_workers({busy!r}) (or client.restart()) to free them")
        try:
            self._kill(busy)
        except Exception as e:  # say so rather than hide it behind the timeout
            return (f"tapestry cancelled them and tried to restart the Dask workers "
                    f"running them ({', '.join(busy)}), which failed ({e!r}); later calls "
                    f"may wait behind them: tapestry.parallel.executors.close_dask() "
                    f"closes that cluster")
        return (f"the Dask workers running them ({', '.join(busy)}) were killed and their "
                f"nannies start new ones, since a running task cannot be cancelled")

    def _kill(self, workers, wait=10.0):
        """End the processes of tapestry's own ``workers`` at once (their
        nannies start new ones) and wait until the scheduler has let them go,
        so that the next call is not sent to them.  ``restart_workers`` would
        first ask each worker to close and wait 4 s for a stuck one."""
        self.client.run(_exit_process, workers=workers, wait=False)
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not set(workers) & set(self.client.scheduler_info()["workers"]):
                return
            time.sleep(0.05)
        raise TimeoutError(f"workers still registered after {wait} s")


async def _exit_process():
    """Run in a stuck Dask worker of tapestry's own cluster (see
    DaskExecutor._kill); a coroutine, so it runs on the worker's event loop,
    not on the executor thread that the stuck task holds."""
    os._exit(1)


# --- choosing one --------------------------------------------------------------------
_thread_pools: dict = {}
_dask_default = {}


def _default_workers():
    """The cores this process may run on: its CPU affinity where the system
    has one (taskset, a batch scheduler's allocation), which ``os.cpu_count``
    ignores (16 threads on 2 allowed cores only contend)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # (no affinity here: macOS, Windows)
        return max(1, os.cpu_count() or 1)


def thread_pool(n_workers=None):
    """The persistent pool with ``n_workers`` threads (created once)."""
    n = n_workers or _default_workers()
    with _lock:
        pool = _thread_pools.get(n)
        if pool is None:
            pool = _thread_pools[n] = DaemonPool(n)
    return pool


def _forget_pools_in_child():
    """In a process forked from this one (a worker of the user's process
    pool started with 'fork'): the pool objects came along, their threads
    did not, so a task put on them would never start (a call with
    ``timeout=`` waited it out and reported every item as hung).  The
    child starts its own pools, and gets a lock no thread of the parent
    holds."""
    global _lock
    _lock = threading.Lock()
    _thread_pools.clear()
    _loky.update(pool=None, hook=None)  # (multiprocessing drops the parent's hooks)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_in_child)


def retire_thread_pool(pool):
    """Stop handing out ``pool`` (one of its threads may be stuck)."""
    with _lock:
        for n, p in list(_thread_pools.items()):
            if p is pool:
                del _thread_pools[n]
    pool.shutdown()


_GUARD = (" Its workers are new processes that import your main module again: in a "
          "script, call parallel_sum / parallel_map only from code under "
          "`if __name__ == \"__main__\":` (or from functions called there), or the "
          "workers run the call again and fail to start.")


def _refuse_while_importing_main():
    """A worker process of the LocalCluster imports the main module again
    (multiprocessing's spawn); a script without the main guard would start
    a cluster from there, and multiprocessing's own error then surfaces as
    "Nanny failed to start".  Say what to do instead."""
    import multiprocessing
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError("tapestry.parallel: executor='dask' was called while a new "
                           "process was importing the main module." + _GUARD)


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
            _refuse_while_importing_main()
            try:
                cluster = LocalCluster(n_workers=_default_workers(), threads_per_worker=1,
                                       processes=True, dashboard_address=":0")
            except Exception as e:
                raise RuntimeError(f"tapestry.parallel: executor='dask' could not start "
                                   f"its LocalCluster ({type(e).__name__}: {e}).{_GUARD}"
                                   ) from e
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


def _inside(executor):
    """Whether this thread is one of ``executor``'s own workers (a call
    from a task of the pool it would wait on)."""
    threads = getattr(executor, "_threads", None)
    if threads is not None and threading.current_thread() in threads:
        return True
    # A process pool inherited by a forked worker: its call queue (a
    # multiprocessing Queue) records the process that created it.
    owner = getattr(getattr(executor, "_call_queue", None), "_opid", None)
    return owner is not None and owner != os.getpid()


def _in_dask_worker():
    dist = sys.modules.get("distributed")
    if dist is None:
        return False
    try:
        dist.get_worker()
    except ValueError:
        return False
    return True


def _is_dask_client(executor):
    return type(executor).__name__ == "Client" and hasattr(executor, "submit")


def check_options(opname, executor, n_workers, timeout):
    """Refuse a bad ``executor=``, ``n_workers=`` or ``timeout=`` before
    anything runs, whatever path the call then takes (a call with no items,
    or one run in place for higher derivatives, never reaches an executor);
    returns the timeout (``None`` for no limit; ``inf`` means none)."""
    if not (executor is None or (isinstance(executor, str) and executor in _NAMES)
            or isinstance(executor, Executor) or _is_dask_client(executor)):
        raise _unknown_executor(executor)
    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(
            n_workers, (int, np.integer)) or n_workers < 1):
        raise ValueError(f"tapestry.{opname}: n_workers must be a positive integer (how many "
                         f"workers the built-in pools start) or None (one per CPU core), got "
                         f"{n_workers!r}.")
    if n_workers is not None and not (executor is None or isinstance(executor, str)):
        raise ValueError(f"tapestry.{opname}: n_workers sizes tapestry's own pools, and "
                         f"{type(executor).__name__} given as executor has its own workers; "
                         "size that executor instead, or leave n_workers out.")
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer,
                                                             np.floating)) \
            or not timeout > 0:
        raise ValueError(f"tapestry.{opname}: timeout must be a positive number of seconds "
                         f"for the whole call, or None for no limit, got {timeout!r}.")
    return None if timeout == float("inf") else float(timeout)


def _unknown_executor(executor):
    return ValueError(
        f"tapestry.parallel: unknown executor {executor!r}; use one of "
        f"{', '.join(map(repr, _NAMES))}, a concurrent.futures.Executor, or a "
        "dask.distributed.Client.")


def get_executor(executor, n_workers=None):
    """Normalize the user's ``executor=`` argument to an adapter (serial,
    run in place, for a call nested in a task of that same executor)."""
    if in_worker() or executor is None or executor == "serial":
        return SerialExecutor()
    if executor == "threads":
        n = n_workers or _default_workers()
        return ThreadExecutor(thread_pool(n), n)
    if executor == "processes":
        return ProcessExecutor(n_workers or _default_workers())
    if executor == "dask" or _is_dask_client(executor):
        if _in_dask_worker():
            return SerialExecutor()
        if executor == "dask":
            return DaskExecutor(dask_client(), owned=True)
        return DaskExecutor(executor)
    if isinstance(executor, Executor):
        return SerialExecutor() if _inside(executor) else FuturesExecutor(executor)
    raise _unknown_executor(executor)
