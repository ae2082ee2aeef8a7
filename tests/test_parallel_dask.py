"""parallel_sum / parallel_map on a Dask LocalCluster (2 worker processes,
started once for this module): gradients bit-identical to the serial ones,
and a worker killed mid-run is survived through Dask's own retries."""
import os
import subprocess
import sys
import time

import cloudpickle
import numpy as np
import pytest

import tapestry as tp
from tapestry.parallel import executors

distributed = pytest.importorskip("distributed")
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def term(m, x):
    return np.sum(np.tanh(m["W"] @ x) * m["b"])


def _problem():
    rng = np.random.default_rng(3)
    ms = [{"W": rng.standard_normal((4, 3)), "b": rng.standard_normal(())} for _ in range(9)]
    return ms, rng.standard_normal((3, 5))


def _vg(ms, x, ex):
    return tp.value_and_grad(lambda ms, x: tp.parallel_sum(term, ms, x, executor=ex,
                                                           chunk_size=2),
                             argnums=(0, 1))(ms, x)


def _bits(a, b):
    for u, v in zip(tp.tree_flatten(a)[0], tp.tree_flatten(b)[0]):
        assert np.array_equal(u, v)


def test_dask_sum_gradient_is_bit_identical_to_serial(client, monkeypatch):
    ms, x = _problem()
    ref = _vg(ms, x, "serial")
    _bits(_vg(ms, x, client), ref)
    # executor="dask" uses the default client; point it at this cluster
    monkeypatch.setitem(executors._dask_default, "client", client)
    _bits(_vg(ms, x, "dask"), ref)


def test_shared_memory_arrays_go_by_value_to_dask(client):
    """Dask workers may be on other machines: shared arrays are shipped."""
    X = tp.parallel.share(np.random.default_rng(5).standard_normal((7, 3)))
    loss = (lambda w, ex: tp.parallel_sum(lambda r, w: np.sum(np.tanh(r * w)), X, w,
                                          executor=ex, chunk_size=3))
    w = np.array([0.5, -1.0, 2.0])
    _bits(tp.value_and_grad(loss)(w, client), tp.value_and_grad(loss)(w, "serial"))


def test_dask_map_backward_recomputes_chunks(client):
    X, W = np.random.default_rng(4).standard_normal((6, 3)), np.eye(3)[:, :2]

    def loss(X, W, ex):
        return np.sum(tp.parallel_map(lambda r, W: np.sin(r @ W), X, W, executor=ex,
                                      chunk_size=4) ** 2)
    _bits(tp.value_and_grad(loss, argnums=(0, 1))(X, W, client),
          tp.value_and_grad(loss, argnums=(0, 1))(X, W, "serial"))


def test_forward_mode_through_dask_matches_serial(client):
    X, W = np.random.default_rng(6).standard_normal((6, 3)), np.eye(3)[:, :2]
    V = np.random.default_rng(7).standard_normal(W.shape)

    def fm(W, ex):
        return tp.parallel_map(lambda r, W: np.sin(r @ W), X, W, executor=ex, chunk_size=4)
    _bits(tp.jvp(lambda W: fm(W, client), (W,), (V,)),
          tp.jvp(lambda W: fm(W, "serial"), (W,), (V,)))
    assert np.allclose(tp.jacfwd(lambda W: fm(W, client))(W),
                       tp.jacfwd(lambda W: np.sin(X @ W))(W))


def fails_on(v, bad, exits):
    if v == bad:
        raise ValueError(f"bad item {v}")
    if v == exits:
        sys.exit(2)
    return v


def test_errors_in_dask_tasks_name_the_item(client):
    with pytest.raises(tp.parallel.ParallelItemError, match="ValueError on item 1") as e:
        tp.parallel_sum(fails_on, np.arange(4.0), 1.0, -1.0, executor=client, chunk_size=1)
    assert isinstance(e.value.__cause__, ValueError)
    t0 = time.monotonic()  # sys.exit in f: named, and no worker dies
    with pytest.raises(tp.parallel.ParallelItemError, match="SystemExit on item 3"):
        tp.parallel_sum(fails_on, np.arange(4.0), -1.0, 3.0, executor=client, chunk_size=1)
    assert time.monotonic() - t0 < 5


def kills_worker_once(v, x, marker):
    if v == 2.0 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return np.sum(x * v)


def test_dask_survives_a_killed_worker(client, tmp_path):
    marker = str(tmp_path / "died")
    x = np.arange(3.0)
    got = tp.grad(lambda x: tp.parallel_sum(kills_worker_once, np.arange(4.0), x, marker,
                                            executor=client, chunk_size=1))(x)
    assert os.path.exists(marker)
    assert np.array_equal(got, np.full(3, 6.0))


def nested_on_dask(s):
    return tp.parallel_sum(lambda v, s: np.sin(v * s), np.arange(6.0), s, executor="dask",
                           chunk_size=2)


def test_call_inside_a_dask_task_runs_inline(client):
    got = client.submit(nested_on_dask, 0.7, pure=False).result(timeout=30)
    assert np.isclose(got, np.sum(np.sin(np.arange(6.0) * 0.7)))


def stuck_on_three(v, seconds):
    if v == 3.0:
        time.sleep(seconds)
    return v * 2.0


def test_timed_out_call_frees_the_workers_of_tapestrys_cluster(client, monkeypatch):
    """A running Dask task cannot be cancelled: on tapestry's own cluster the
    worker running it is replaced, so the next call does not queue behind it."""
    monkeypatch.setitem(executors._dask_default, "client", client)
    with pytest.raises(tp.parallel.ParallelTimeoutError) as e:
        tp.parallel_sum(stuck_on_three, np.arange(8.0), 30.0, executor="dask", timeout=2,
                        chunk_size=1)
    t0 = time.monotonic()
    got = tp.parallel_sum(stuck_on_three, np.arange(8.0), 0.0, executor="dask", timeout=12,
                          chunk_size=1)
    assert time.monotonic() - t0 < 10
    assert got == 56.0
    assert "were killed" in str(e.value) and "serial calls" not in str(e.value)
    assert any(3 in r for r in e.value.items)
    client.wait_for_workers(2, timeout=30)


def test_timeout_on_a_users_client_leaves_its_workers_and_says_how_to_free_them(client):
    with pytest.raises(tp.parallel.ParallelTimeoutError, match="restart_workers") as e:
        tp.parallel_sum(stuck_on_three, np.arange(8.0), 3.0, executor=client, timeout=0.5,
                        chunk_size=1)
    assert "tcp://" in str(e.value) and "serial calls" not in str(e.value)
    assert len(client.scheduler_info()["workers"]) == 2  # none restarted
    # the stuck item ends by itself; the client then works as before
    assert tp.parallel_sum(stuck_on_three, np.arange(8.0), 0.0, executor=client,
                           timeout=20, chunk_size=1) == 56.0


def test_dask_in_a_script_without_the_main_guard_says_so(tmp_path):
    script = tmp_path / "noguard.py"
    script.write_text("import numpy as np\nimport tapestry as tp\n"
                      "tp.parallel_sum(lambda v: v, np.arange(4.0), executor='dask')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, env=env, cwd=tmp_path)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert "tapestry.parallel: executor='dask'" in last
    assert 'if __name__ == "__main__":' in last


def test_backward_after_close_dask_uses_a_new_cluster():
    """The pullback held tapestry's client after close_dask() had closed it."""
    X, W = np.random.default_rng(8).standard_normal((6, 3)), np.ones((3, 2))
    try:
        y, pullback = tp.vjp(lambda W: tp.parallel_map(lambda r, W: np.tanh(r @ W), X, W,
                                                       executor="dask", chunk_size=3), W)
        executors.close_dask()
        g, = pullback(np.ones_like(y))
    finally:
        executors.close_dask()
    assert np.allclose(g, tp.grad(lambda W: np.sum(np.tanh(X @ W)))(W))
