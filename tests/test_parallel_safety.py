"""parallel_sum / parallel_map under adverse use: calls nested in a task of
the executor they were given, hung items (timeout=), BLAS running several
threads, randomness in recomputed forwards, lost workers, and a caller
killed mid-call (nothing may be left in /dev/shm or the process table)."""
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import cloudpickle
import numpy as np
import pytest

import tapestry as tp
from parallel_checks import assert_bits
from tapestry.parallel import ParallelTimeoutError, WorkerDiedError, arena

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pytest.importorskip("loky")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def term(v, s):
    return np.sin(v * s)


# --- no hangs ------------------------------------------------------------------------------
def test_call_from_a_task_of_the_same_thread_pool_runs_inline():
    X = np.arange(8.0)
    with ThreadPoolExecutor(2) as pool:
        def task(s):
            return tp.grad(lambda s: tp.parallel_sum(term, X, s, executor=pool,
                                                     chunk_size=1))(s)
        futures = [pool.submit(task, s) for s in (0.5, 1.5)]
        got = [f.result(timeout=20) for f in futures]  # a deadlock fails here, not hangs
    for s, g in zip((0.5, 1.5), got):
        assert np.isclose(g, np.sum(X * np.cos(X * s)))


_FORK_POOL = {}


def _task_in_fork_pool(s):
    return tp.parallel_sum(term, np.arange(6.0), s, executor=_FORK_POOL["pool"], chunk_size=2)


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_call_from_a_worker_of_the_same_process_pool_runs_inline():
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(2, mp_context=ctx) as pool:
        _FORK_POOL["pool"] = pool  # inherited by the forked workers
        got = pool.submit(_task_in_fork_pool, 0.7).result(timeout=30)
        _FORK_POOL.clear()
    assert np.isclose(got, np.sum(np.sin(np.arange(6.0) * 0.7)))


_release = threading.Event()


def hangs_on_5(v, s):
    if v == 5.0:
        _release.wait(10)
    return v * s


def test_timeout_with_threads_names_the_items_not_finished():
    _release.clear()
    t0 = time.monotonic()
    try:
        with pytest.raises(ParallelTimeoutError, match=r"item 5 not finished") as e:
            tp.grad(lambda s: tp.parallel_sum(hangs_on_5, np.arange(8.0), s,
                                              executor="threads", chunk_size=1,
                                              timeout=0.3))(1.0)
    finally:
        _release.set()
    assert time.monotonic() - t0 < 5 and isinstance(e.value, TimeoutError)
    assert e.value.items == [range(5, 6)]
    # the next call gets a fresh pool and works
    assert tp.parallel_sum(term, np.arange(4.0), 1.0, executor="threads") == \
        tp.parallel_sum(term, np.arange(4.0), 1.0)


def test_backward_after_another_call_retired_the_thread_pool():
    """The pullback held the pool a later timed-out call retired: its tasks
    never started and it timed out too (or ran in the caller alone)."""
    X, W = np.random.default_rng(0).standard_normal((8, 3)), np.ones((3, 2))
    y, pullback = tp.vjp(lambda W: tp.parallel_map(lambda r, W: np.tanh(r @ W), X, W,
                                                   executor="threads", n_workers=2,
                                                   chunk_size=1, timeout=10), W)
    _release.clear()
    try:
        with pytest.raises(ParallelTimeoutError):
            tp.parallel_sum(hangs_on_5, np.arange(8.0), 1.0, executor="threads",
                            n_workers=2, chunk_size=1, timeout=0.3)
    finally:
        _release.set()
    t0 = time.monotonic()
    g, = pullback(np.ones_like(y))
    assert time.monotonic() - t0 < 5
    assert np.allclose(g, tp.grad(lambda W: np.sum(np.tanh(X @ W)))(W))


@pytest.mark.parametrize("pool", [ThreadPoolExecutor, ProcessPoolExecutor])
def test_timeout_on_a_users_executor_says_what_became_of_the_items(pool):
    """tapestry neither replaces nor kills a pool it was given: the message
    said 'serial' (process pools) or promised a new pool (thread pools)."""
    _release.clear()
    with pool(2) as ex:
        try:
            with pytest.raises(ParallelTimeoutError, match="not finished") as e:
                tp.parallel_sum(hangs_on_5 if pool is ThreadPoolExecutor else sleeps_on_5,
                                np.arange(8.0), 1.0, executor=ex, chunk_size=1, timeout=0.5)
        finally:
            _release.set()
    msg = str(e.value)
    assert any(5 in r for r in e.value.items)
    assert "serial" not in msg and "later calls use a new pool" not in msg
    assert ("your pool" if pool is ThreadPoolExecutor else "does not own") in msg


def sleeps_on_5(v, s):
    if v == 5.0:
        time.sleep(2)
    return v * s


def sleeps_on_3(v):
    if v == 3.0:
        time.sleep(60)
    return v + os.getpid() * 0.0


def test_timeout_with_processes_kills_and_replaces_the_workers():
    t0 = time.monotonic()
    with pytest.raises(ParallelTimeoutError, match=r"items 2\.\.3 not finished.*killed"):
        tp.parallel_sum(sleeps_on_3, np.arange(4.0), executor="processes", n_workers=2,
                        timeout=1.0)
    assert time.monotonic() - t0 < 10
    assert tp.parallel_sum(sleeps_on_2_never, np.arange(4.0), executor="processes",
                           n_workers=2, timeout=20) == 6.0


def sleeps_on_2_never(v):
    return v


def dies_once_then_hangs(v, marker):
    if v == 0.0 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    if v == 1.0:
        time.sleep(30)
    return v


def test_timeout_during_the_retry_kills_the_new_pool(tmp_path):
    """A worker died, its tasks went to a new pool, and the deadline passed
    there: the old (broken) pool was killed, the stuck worker of the new
    one kept running and the next call waited behind it."""
    marker = str(tmp_path / "died")
    with pytest.raises(ParallelTimeoutError):
        tp.parallel_sum(dies_once_then_hangs, np.arange(4.0), marker, executor="processes",
                        n_workers=1, chunk_size=1, timeout=4)
    assert os.path.exists(marker)
    t0 = time.monotonic()
    assert tp.parallel_sum(sleeps_on_2_never, np.arange(4.0), executor="processes",
                           n_workers=1, chunk_size=1, timeout=15) == 6.0
    assert time.monotonic() - t0 < 10


# --- bit-identical whatever BLAS does --------------------------------------------------------
def gemm_term(a, W):
    return np.sum(np.tanh(a @ W))


def test_items_with_threaded_gemms_are_bit_identical_on_every_executor():
    rng = np.random.default_rng(0)
    items = [rng.standard_normal((128, 256)) for _ in range(4)]
    W = rng.standard_normal((256, 300)) * 0.05

    def vg(ex):
        return tp.value_and_grad(lambda W: tp.parallel_sum(gemm_term, items, W, executor=ex,
                                                           chunk_size=1))(W)
    ref = vg("serial")
    for ex in ("threads", "processes"):
        assert_bits(vg(ex), ref)
    with ThreadPoolExecutor(2) as pool:
        assert_bits(vg(pool), ref)


# --- recompute sees the same randomness --------------------------------------------------------
def dropout_layer(r, W):
    mask = np.random.random_sample(W.shape[1]) < 0.5
    return np.tanh(r @ W) * mask / 0.5, mask


def dropout_with_generator(r, W, gen):
    mask = gen.random(W.shape[1]) < 0.5
    return np.tanh(r @ W) * mask / 0.5, mask


@pytest.mark.parametrize("f", [dropout_layer, dropout_with_generator])
def test_recomputing_map_replays_the_random_state(f):
    """The gradient must belong to the masks the returned values used."""
    X, W = np.random.default_rng(1).standard_normal((6, 3)), np.ones((3, 4)) * 0.3
    extra = (np.random.default_rng(7),) if f is dropout_with_generator else ()
    out = {}

    def loss(W):
        ys = tp.parallel_map(f, list(X), W, *extra, executor="processes", chunk_size=2)
        out["masks"] = [np.asarray(m._value if hasattr(m, "_value") else m) for _, m in ys]
        return sum(np.sum(y) for y, _ in ys)
    g = tp.grad(loss)(W)
    ref = sum(np.outer(r, m / 0.5 * (1 - np.tanh(r @ W) ** 2))
              for r, m in zip(X, out["masks"]))
    assert np.allclose(g, ref)


def test_checkpoint_replays_global_and_argument_random_state():
    x = np.random.default_rng(2).standard_normal(50)

    def drop(x):
        return np.sum(np.sin(x) * (np.random.random_sample(x.shape) < 0.5))
    np.random.seed(3)
    ref = tp.value_and_grad(drop)(x)
    np.random.seed(3)
    got = tp.value_and_grad(tp.checkpoint(drop))(x)
    assert_bits(got, ref)
    after = np.random.random_sample()
    np.random.seed(3)
    np.random.random_sample(x.shape)
    assert after == np.random.random_sample()  # the recompute did not advance the stream


# --- errors name items ------------------------------------------------------------------------
def dies(v):
    os._exit(1)


def test_broken_user_process_pool_names_the_items():
    with ProcessPoolExecutor(2) as pool:
        with pytest.raises(WorkerDiedError, match=r"broke \(BrokenProcessPool\) while "
                                                  r"running items (0\.\.1|2\.\.3)") as e:
            tp.parallel_sum(dies, np.arange(4.0), executor=pool, chunk_size=1)
    assert e.value.items in (range(0, 2), range(2, 4))  # a pool breaks all its tasks
    assert type(e.value.__cause__).__name__ == "BrokenProcessPool"


# --- nothing left behind ----------------------------------------------------------------------
_CALLER = """
import os, sys, time
import numpy as np
import tapestry as tp
X = tp.parallel.share(np.ones(512))
def f(row, X, s):
    open(os.path.join(sys.argv[1], "worker-%d" % os.getpid()), "w").close()
    time.sleep(60)
    return np.sum(row * X[:200] * s)
items = [np.ones(200) for _ in range(4)]  # >= 1 KiB each: they travel in an arena
tp.grad(lambda s: tp.parallel_sum(f, items, X, s, executor="processes", n_workers=2))(1.0)
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "\nState:\tZ" not in fh.read()
    except OSError:
        return False


def _until(cond, seconds):
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:
        time.sleep(0.05)
    return cond()


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.path.isdir("/proc"),
                    reason="Linux shared memory and process table")
def test_sigkilled_caller_leaves_no_shared_memory_and_no_workers(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.Popen([sys.executable, "-c", _CALLER, str(tmp_path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _until(lambda: len(os.listdir(tmp_path)) == 2, 30), "workers never started"
    finally:
        proc.kill()
        proc.wait()
    mine = (f"tapestry-{proc.pid}-", f"tapestry-arena-{proc.pid}-")
    workers = [int(n.split("-")[1]) for n in os.listdir(tmp_path)]
    assert _until(lambda: not any(n.startswith(mine) for n in os.listdir("/dev/shm")), 5), \
        [n for n in os.listdir("/dev/shm") if n.startswith(mine)]
    assert _until(lambda: not any(map(_alive, workers)), 5)


def test_arena_pool_is_bounded():
    sizes = [3 << 20, 40 << 20, 1 << 20, 20 << 20]
    got = [arena.acquire(n) for n in sizes]
    for a in got:
        arena.release(a)
    assert len(arena._pool) <= 2
    assert sum(a.capacity for a in arena._pool) <= arena.MAX_POOLED_BYTES
    dropped = [a for a in got if a not in arena._pool]
    assert dropped and not any(os.path.exists(a.path) for a in dropped)
    smallest = min(a.capacity for a in arena._pool if a.capacity >= 2 << 20)
    a = arena.acquire(2 << 20)
    assert a.capacity == smallest  # the smallest that fits
    arena.release(a)


def test_checkpoint_replays_a_generator_passed_as_argument():
    x = np.random.default_rng(2).standard_normal(50)

    def drop(x, gen):
        return np.sum(np.sin(x) * (gen.random(x.shape) < 0.5))
    ref = tp.value_and_grad(drop)(x, np.random.default_rng(5))
    gen = np.random.default_rng(5)
    assert_bits(tp.value_and_grad(tp.checkpoint(drop))(x, gen), ref)
    again = np.random.default_rng(5)
    again.random(x.shape)
    assert gen.random() == again.random()  # advanced by the forward only


@pytest.mark.parametrize("pool_time, later", [(2.0, False), (0.5, True)])
def test_thread_calls_keep_the_faster_way_and_retry_the_other(pool_time, later):
    from tapestry.parallel.runner import _Tuner
    t, used = _Tuner(), []
    for _ in range(2 * _Tuner.RETRY):
        use = t.use_pool("site")
        used.append(use)
        t.record("site", use, pool_time if use else 1.0)
    assert used[:3] == [False, False, True]  # alone twice (cold start), then the pool
    rest = used[3:]
    assert rest.count(later) == len(rest) - 1  # the faster way, but for one retry


def test_a_site_known_to_pay_wakes_the_pool_before_its_first_chunk(monkeypatch):
    """Once a call site has run alone long enough to pay for the pool, later
    calls wake it before running any chunk (the caller running the first
    chunk alone left an odd number of chunks to two runners); a site not
    known yet runs its first chunk alone, to time it.  Same results."""
    from tapestry.parallel import runner
    from tapestry.parallel.executors import get_executor
    taken = []
    orig = runner._submit

    def spy(ex, run, k):
        done = sum(r is not None for r in run.__self__.results)  # chunks run so far
        taken.append((done, k))
        return orig(ex, run, k)
    monkeypatch.setattr(runner, "_submit", spy)
    monkeypatch.setattr(runner, "_tuner", runner._Tuner())
    ex = get_executor("threads", 2)

    def slow(t):
        time.sleep(0.002)
        return t * 2
    tasks = list(range(8))
    for _ in range(4):
        assert runner.run_chunks(ex, slow, tasks, "parallel_sum") == [t * 2 for t in tasks]
    assert taken[0] == (1, 0)  # not known: the first chunk timed alone, then no helper
    # known from then on: the pool decided before any chunk (alone once more, for a
    # cold start, then one helper; the fourth call keeps whichever way was faster)
    assert [c for c, _ in taken[1:]] == [0, 0, 0]
    assert taken[1][1] == 0 and taken[2][1] == 1
    assert runner._tuner.worth_a_pool(runner._tuner.key(slow, tasks))


class _RefusesAfter(ThreadPoolExecutor):
    """A stand-in for a loky pool broken by a worker that died while the
    caller was still submitting: submits after the first ``n`` raise."""

    def __init__(self, n):
        super().__init__(1)
        self.n = n

    def submit(self, fn, *args):
        from concurrent.futures.process import BrokenProcessPool
        if self.n == 0:
            raise BrokenProcessPool("a worker died")
        self.n -= 1
        return super().submit(fn, *args)


@pytest.mark.parametrize("second_pool_refuses", [False, True])
def test_pool_broken_while_submitting_retries_the_tasks_it_refused(monkeypatch,
                                                                   second_pool_refuses):
    from tapestry.parallel import executors
    from tapestry.parallel.faults import Lost
    pools = [_RefusesAfter(1), _RefusesAfter(0 if second_pool_refuses else 9)]
    monkeypatch.setattr(executors.ProcessExecutor, "_pool", lambda self: pools.pop(0))
    monkeypatch.setattr(executors, "_limit_blas_in_process", lambda: None)
    run = executors.ProcessExecutor(2).run(lambda t: t * 10, [1, 2, 3])
    if second_pool_refuses:
        with pytest.raises(Lost) as e:
            dict(run)
        assert e.value.k == 1 and e.value.twice
    else:
        assert dict(run) == {0: 10, 1: 20, 2: 30}


def test_spawned_user_pool_in_a_script_without_the_main_guard_says_so(tmp_path):
    script = tmp_path / "noguard.py"
    script.write_text(
        "import multiprocessing as mp\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "import numpy as np\nimport tapestry as tp\n"
        "ex = ProcessPoolExecutor(2, mp_context=mp.get_context('spawn'))\n"
        "tp.parallel_sum(lambda v: v, np.arange(4.0), executor=ex)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, env=env, cwd=tmp_path)
    assert r.returncode != 0
    last = [l for l in r.stderr.splitlines() if "WorkerDiedError" in l][-1]
    assert 'if __name__ == "__main__":' in last
