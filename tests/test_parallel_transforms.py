"""parallel_sum / parallel_map composed with jit, vmap and grad on every
executor: the same bits as the serial executor, errors that name the same
item wherever the chunks ran, and no hang in a process forked from a
caller whose thread pools (tapestry's own, jit's fused-loop pool) exist."""
import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import cloudpickle
import numpy as np
import pytest

import tapestry as tp
from parallel_checks import assert_bits

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pytest.importorskip("loky")

EXECUTORS = ["serial", "threads", "processes"]


def _close(a, b, rtol=1e-13):
    for u, v in zip(tp.tree_flatten(a)[0], tp.tree_flatten(b)[0]):
        np.testing.assert_allclose(u, v, rtol=rtol)


def _stack(out):
    return np.stack(out) if isinstance(out, list) else out


def _term(it, a, b):
    return np.sum(np.tanh(a * it["x"]) ** 2) * b + it["y"] * a


def _items(dtype=np.float64):
    r = np.random.default_rng(0)
    return {"x": r.normal(size=(7, 4)).astype(dtype), "y": r.normal(size=7).astype(dtype)}


# --- jitted item functions ------------------------------------------------------------------
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_jitted_item_function_gives_the_serial_bits(executor, dtype):
    """parallel_sum / parallel_map of jit(f) under value_and_grad, shared
    arguments changing between calls, items as a dict of arrays and as a
    list of tuples: every executor gives the serial executor's bits (each
    worker has its own programs), within rounding of the un-jitted f."""
    jf = tp.jit(_term)
    items = _items(dtype)
    pairs = [(x, y) for x, y in zip(items["x"], items["y"])]
    jt = tp.jit(lambda it, a, b: _term({"x": it[0], "y": it[1]}, a, b))

    def run(f, its, ex):
        vg = tp.value_and_grad(lambda a, its: tp.parallel_sum(f, its, a, dtype(1.5),
                                                              executor=ex, chunk_size=2),
                               argnums=(0, 1))
        gm = tp.grad(lambda a: np.sum(_stack(tp.parallel_map(f, its, a, dtype(1.5),
                                                             executor=ex, chunk_size=3)) ** 2))
        return [vg(a, its) + (gm(a),) for a in (dtype(0.3), dtype(1.3))]
    assert_bits(run(jf, items, executor), run(jf, items, "serial"))
    assert_bits(run(jt, pairs, executor), run(jt, pairs, "serial"))
    _close(run(jf, items, executor), run(_term, items, "serial"),
           rtol=1e-5 if dtype == np.float32 else 1e-13)
    assert np.result_type(run(jf, items, executor)[0][0]) == dtype


@pytest.mark.parametrize("executor", EXECUTORS)
def test_jit_of_value_and_grad_of_a_parallel_sum_on_any_executor(executor):
    """jit(value_and_grad(parallel_sum(...))) traces the chunks into the
    program: every call with new items and parameters has the un-jitted
    serial call's bits, and items read from a closure and changed in place
    are seen."""
    items = _items()
    step = tp.jit(tp.value_and_grad(lambda a, its: tp.parallel_sum(
        _term, its, a, 2.0, executor=executor, chunk_size=2), argnums=(0, 1)))
    closed = {k: v.copy() for k, v in items.items()}
    step_c = tp.jit(tp.value_and_grad(lambda a: tp.parallel_sum(
        _term, closed, a, 2.0, executor=executor, chunk_size=2)))
    for k in range(3):
        its = {n: v * (1 + k) for n, v in items.items()}
        assert_bits(step(0.3 + k, its), tp.value_and_grad(lambda a, its: tp.parallel_sum(
            _term, its, a, 2.0, chunk_size=2), argnums=(0, 1))(0.3 + k, its))
        assert_bits(step_c(0.5), tp.value_and_grad(lambda a: tp.parallel_sum(
            _term, closed, a, 2.0, chunk_size=2))(0.5))
        closed["x"] *= 1.5


# --- vectorize=True and vmap ---------------------------------------------------------------
def _f(x, w, c):
    return np.sum(np.tanh(x * w)) * c


@pytest.mark.parametrize("executor", EXECUTORS)
def test_vectorize_with_jit_around_and_inside(executor):
    r = np.random.default_rng(1)
    X, w = r.normal(size=(9, 3)), r.normal(size=3)

    def vg(f, ex):
        return tp.value_and_grad(lambda w: tp.parallel_sum(f, X, w, 2.0, executor=ex,
                                                           vectorize=True, chunk_size=4))
    ref = vg(_f, "serial")(w)
    assert_bits(vg(_f, executor)(w), ref)
    assert_bits(vg(tp.jit(_f), executor)(w), ref)
    assert_bits(tp.jit(vg(_f, executor))(w), ref)
    np.testing.assert_allclose(ref[0], sum(_f(x, w, 2.0) for x in X), rtol=1e-13)
    m = tp.parallel_map(_f, X, w, 2.0, executor=executor, vectorize=True, chunk_size=4)
    np.testing.assert_allclose(m, [_f(x, w, 2.0) for x in X], rtol=1e-13)
    for n, cs in [(0, None), (1, None), (1, 5), (5, 1), (5, 2), (5, 5)]:
        got = tp.grad(lambda w: tp.parallel_sum(_f, X[:n], w, 2.0, executor=executor,
                                                vectorize=True, chunk_size=cs))(w)
        want = tp.grad(lambda w: sum((_f(x, w, 2.0) for x in X[:n]), 0.0 * np.sum(w)))(w)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("vectorize", [False, True])
def test_parallel_sum_inside_vmap_of_grad(executor, vectorize):
    """Batched shared arguments (vmap over grad) run the chunks in the
    calling thread whatever the executor: the loop's gradients."""
    r = np.random.default_rng(2)
    X, U = r.normal(size=(6, 3)), r.normal(size=(4, 3))

    def f(x, u):
        return np.sum(np.sin(x * u)) ** 2
    loss = lambda u: tp.parallel_sum(f, X, u, executor=executor, chunk_size=2,  # noqa: E731
                                     vectorize=vectorize)
    want = np.array([tp.grad(lambda u: sum(f(x, u) for x in X))(u) for u in U])
    np.testing.assert_allclose(tp.vmap(tp.grad(loss))(U), want, rtol=1e-12)
    np.testing.assert_allclose(tp.jit(tp.vmap(tp.grad(loss)))(U), want, rtol=1e-12)
    np.testing.assert_allclose(tp.vmap(loss)(U), [sum(f(x, u) for x in X) for u in U],
                               rtol=1e-12)


@pytest.mark.parametrize("executor", ["serial", "processes"])
def test_vectorize_refuses_items_it_cannot_stack_saying_so(executor):
    items = [np.ones(3), np.ones(3), np.ones(4), np.ones(3)]
    with pytest.raises(tp.parallel.ParallelItemError, match="vectorize=False") as e:
        tp.parallel_sum(lambda x, a: np.sum(x * a), items, 2.0, executor=executor,
                        vectorize=True, chunk_size=2)
    assert e.value.index == "2..3"


# --- errors name the same item on every executor ------------------------------------------
def _fails_late_on_item_0(x, w):
    """Item 0 raises after a while, item 3 at once: on two process workers
    the chunk of item 3 comes back first."""
    if x[0] == 0.0:
        time.sleep(0.2)
        raise ValueError("item 0 is bad")
    if x[0] == 3.0:
        raise ValueError("item 3 is bad")
    return np.sum(x * w)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("jitted", [False, True])
def test_the_lowest_failing_item_is_named_on_every_executor(executor, jitted):
    """Two items raise: the error names the lower one, as the serial run
    does.  Process workers used to report whichever failing chunk came
    back first (here item 3)."""
    X = np.arange(4.0)[:, None] * np.ones((4, 2))
    f = tp.jit(_fails_late_on_item_0) if jitted else _fails_late_on_item_0
    with pytest.raises(tp.parallel.ParallelItemError) as e:
        tp.parallel_sum(f, X, np.ones(2), executor=executor, n_workers=2, chunk_size=1,
                        timeout=60)
    assert e.value.index == 0 and isinstance(e.value.__cause__, ValueError)
    with pytest.raises(tp.parallel.ParallelItemError) as e:
        tp.grad(lambda w: np.sum(tp.parallel_map(f, X, w, executor=executor, n_workers=2,
                                                 chunk_size=1, timeout=60)))(np.ones(2))
    assert e.value.index == 0


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_names_the_lowest_failing_item_and_gives_the_serial_bits(dask_client):
    X = np.arange(4.0)[:, None] * np.ones((4, 2))
    with pytest.raises(tp.parallel.ParallelItemError) as e:
        tp.parallel_sum(tp.jit(_fails_late_on_item_0), X, np.ones(2), executor=dask_client,
                        chunk_size=1, timeout=60)
    assert e.value.index == 0
    jf, items = tp.jit(_term), _items()
    vg = lambda ex: tp.value_and_grad(lambda a, its: tp.parallel_sum(  # noqa: E731
        jf, its, a, 1.5, executor=ex, chunk_size=2), argnums=(0, 1))(0.3, items)
    assert_bits(vg(dask_client), vg("serial"))


# --- processes forked from a caller with live thread pools --------------------------------
def _in_forked_child(fn, timeout=20):
    """``fn()`` in a worker of a 'fork' process pool; a hang fails the test
    (the worker is then killed, so nothing waits on it at exit)."""
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    try:
        return pool.submit(fn).result(timeout=timeout)
    finally:
        for p in list(getattr(pool, "_processes", {}).values()):
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
        pool.shutdown(wait=False, cancel_futures=True)


def _sum_on_threads():
    items = [np.linspace(0, 1, 50) * k for k in range(8)]
    return tp.parallel_sum(lambda x, a: np.sum(np.sin(x * a)), items, 1.1,
                           executor="threads", chunk_size=1, timeout=5)


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_threads_executor_in_a_forked_child(monkeypatch):
    """The child inherits the pool object but not its threads: a call with
    a timeout waited on tasks that never started and reported every item
    as hung.  The child now starts its own pool."""
    from tapestry.parallel import runner
    monkeypatch.setattr(runner, "MIN_PARALLEL_SECONDS", 0.0)
    monkeypatch.setattr(runner._tuner, "use_pool", lambda key: True)
    want = _sum_on_threads()  # the parent's pool exists, its threads are running
    assert _in_forked_child(_sum_on_threads) == want


def _fused_pieces():
    from tapestry.jit import fuse

    def kern(x, out, lo, hi):
        np.multiply(x[lo:hi], 2.0, out=out[lo:hi])
        return False
    x = np.arange(8.0)
    out = np.empty(8)
    fuse._in_threads(kern, [x, out], 8, 2)
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_fused_loop_pool_in_a_forked_child():
    """A fused loop cut over jit's thread pool, in a child forked after the
    parent used that pool: the pieces were queued on threads the child
    does not have, and the call waited forever."""
    np.testing.assert_array_equal(_fused_pieces(), np.arange(8.0) * 2)  # the pool exists
    np.testing.assert_array_equal(_in_forked_child(_fused_pieces), np.arange(8.0) * 2)


# --- a Python number differentiated under jit -----------------------------------------
_X32 = np.linspace(0.1, 1, 6).astype(np.float32)


def _sum32(a):
    return np.sum(np.tanh(_X32 * a) * _X32)


def _map32(a):
    return np.tanh(_X32 * a)


@pytest.mark.parametrize("name, transform", [
    ("value_and_grad", lambda a: tp.value_and_grad(_sum32)(a)),
    ("hessian", lambda a: tp.hessian(_sum32)(a)),
    ("jvp", lambda a: tp.jvp(_sum32, (a,), (1.0,))),
    ("jacfwd", lambda a: tp.jacfwd(_map32)(a)),
    ("jacobian", lambda a: tp.jacobian(_map32)(a)),
    ("parallel_sum", lambda a: tp.value_and_grad(lambda a: tp.parallel_sum(
        lambda x, a: np.tanh(x * a), _X32, a, chunk_size=2))(a)),
    ("parallel_sum vectorize", lambda a: tp.value_and_grad(lambda a: tp.parallel_sum(
        lambda x, a: np.tanh(x * a), _X32, a, chunk_size=2, vectorize=True))(a)),
])
def test_a_python_float_differentiated_under_jit_is_a_float64(name, transform):
    """grad(f)(0.7) differentiates 0.7 as a float64 scalar, so float32 data
    times it is float64; jit(grad(f))(0.7) kept the number weakly typed and
    computed in float32: other dtypes, other bits, no warning."""
    plain, jitted = transform(0.7), tp.jit(transform)(0.7)
    for u, v in zip(tp.tree_flatten(plain)[0], tp.tree_flatten(jitted)[0]):
        assert np.result_type(u) == np.result_type(v), name
        assert np.array_equal(u, v), name


def _sum_on_processes():
    items = [np.linspace(0, 1, 10) * k for k in range(4)]
    return tp.parallel_sum(lambda x, a: np.sum(np.sin(x * a)), items, 1.1,
                           executor="processes", n_workers=1, chunk_size=1)


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_processes_executor_in_a_worker_of_a_fork_pool_lets_it_exit():
    """The worker exits through multiprocessing, which joins the loky
    workers it started without running atexit (where loky stops them);
    they idle 300 s before leaving, so the user's pool.shutdown() hung."""
    import threading
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    workers = []
    try:
        assert pool.submit(_sum_on_processes).result(timeout=60) == _sum_on_processes()
        workers = list(pool._processes.values())
        stop = threading.Thread(target=pool.shutdown, daemon=True)
        stop.start()
        stop.join(timeout=20)
        assert not stop.is_alive(), "the pool's worker did not exit"
    finally:
        for p in workers:  # (a hung worker is not left behind)
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
