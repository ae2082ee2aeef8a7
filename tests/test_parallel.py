"""parallel_sum / parallel_map: gradients against finite differences, bit-identical
results across executors and worker counts, faults, nesting, thread safety."""
import os
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import cloudpickle
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapestry as tp
from parallel_checks import assert_bits, run_concurrently
from tapestry.core.tape import open_tape
from tapestry.core.var import Var
from tapestry.parallel import ParallelItemError, WorkerDiedError
from tapestry.parallel.chunks import chunk_bounds
from tapestry.testing import check_grads

# Worker processes cannot import this test module: ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

RNG = np.random.default_rng(0)


def mlp(m, x):
    h = np.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
    return np.sum(m["W2"] @ h + m["b2"])


def models(n, dtype=np.float64, hidden=5, d=3):
    rng = np.random.default_rng(1)
    return [{"W1": rng.standard_normal((hidden, d)).astype(dtype),
             "b1": rng.standard_normal(hidden).astype(dtype),
             "W2": rng.standard_normal((1, hidden)).astype(dtype),
             "b2": rng.standard_normal(1).astype(dtype)} for _ in range(n)]


# --- gradients against finite differences ------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("executor", ["serial", "threads"])
def test_sum_over_models_grad(dtype, executor):
    ms, x = models(5, dtype), RNG.standard_normal((3, 4)).astype(dtype)
    check_grads(lambda ms, x: tp.parallel_sum(mlp, ms, x, executor=executor,
                                              chunk_size=2), (ms, x))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 7), cols=st.sampled_from([(), (1,), (3,)]),
       chunk=st.integers(1, 4), batched=st.booleans(), dtype=st.sampled_from(["f8", "f4"]))
def test_sliced_items_with_broadcasting(n, cols, chunk, batched, dtype):
    """Rows of X (0-d rows when cols == ()) against a broadcast shared w."""
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n,) + cols).astype(dtype)
    w = rng.standard_normal((3,) if cols == (3,) else ()).astype(dtype)
    f = (lambda x, w: np.sum(np.sin(x * w) + x ** 2))
    check_grads(lambda X, w: tp.parallel_sum(f, X, w, chunk_size=chunk, batched=batched,
                                             executor="threads"), (X, w))


def test_pytree_of_arrays_sliced_together():
    u, y = RNG.standard_normal(6), RNG.standard_normal((6, 2))
    f = (lambda it, a: np.sum((it["y"] - it["u"] * a) ** 2))
    check_grads(lambda u, a: tp.parallel_sum(f, {"u": u, "y": y}, a, chunk_size=4),
                (u, 0.7))


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
def test_map_grad_stacked_and_list(executor):
    X, W = RNG.standard_normal((7, 3)), RNG.standard_normal((3, 2))
    f = (lambda r, W: np.tanh(r @ W))
    check_grads(lambda X, W: tp.parallel_map(f, X, W, executor=executor, chunk_size=3),
                (X, W))
    ms, x = models(4), RNG.standard_normal((3, 2))
    g = (lambda m, x: {"h": np.tanh(m["W1"] @ x), "s": np.sum(m["b1"])})
    check_grads(lambda ms, x: tp.parallel_map(g, ms, x, executor=executor, chunk_size=3),
                (ms, x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_map_batched_and_partial_cotangent(dtype):
    X, w = RNG.standard_normal((5, 2)).astype(dtype), RNG.standard_normal(2).astype(dtype)
    f = (lambda c, w: (np.exp(c * w), c[:, :1]))
    check_grads(lambda X, w: tp.parallel_map(f, X, w, batched=True, chunk_size=2,
                                             executor="threads")[0], (X, w))


def test_higher_derivatives_run_inline():
    x = RNG.standard_normal(4)
    f = (lambda xi, s: np.sin(xi * s) * s)
    h = tp.hessian(lambda s: tp.parallel_sum(f, x, s, executor="threads", chunk_size=3))(1.3)
    h_ref = tp.hessian(lambda s: np.sum(np.sin(x * s) * s))(1.3)
    assert np.allclose(h, h_ref)


# --- bit-identical across executors -----------------------------------------------------
@pytest.fixture(scope="module")
def w4_small():
    rng = np.random.default_rng(2)
    return models(13, hidden=16, d=8), rng.standard_normal((8, 32))


def _sum_grad(ms, x, **kw):
    return tp.value_and_grad(lambda ms, x: tp.parallel_sum(mlp, ms, x, chunk_size=3, **kw),
                             argnums=(0, 1))(ms, x)


def test_bit_identical_across_executors_and_worker_counts(w4_small):
    ms, x = w4_small
    ref = _sum_grad(ms, x, executor="serial")
    runs = [dict(executor="threads", n_workers=k) for k in (1, 2, 8)]
    runs += [dict(executor="processes", n_workers=2)]
    for kw in runs:
        assert_bits(_sum_grad(ms, x, **kw), ref)
    with ThreadPoolExecutor(3) as pool:
        assert_bits(_sum_grad(ms, x, executor=pool), ref)
    with ProcessPoolExecutor(2) as pool:
        assert_bits(_sum_grad(ms, x, executor=pool), ref)


def _group_logp(g, u, a, b):
    """W7's item: one group's Poisson log density; ``u[j]`` is a gather, so
    each chunk's gradient of ``u`` is sparse (indices repeat across chunks)."""
    uj = u[g["j"]]
    eta = a + b * g["x"] + uj
    return np.sum(g["y"] * eta - np.exp(eta)) - 0.5 * uj * uj


def test_vectorize_bit_identical_across_executors_and_worker_counts():
    """vectorize=True over stacked items: the same bits on every executor
    and worker count (chunks of 7 and a last one of 2: each its own vmap
    call and tape), with only the shared arguments differentiated and with
    the items too; and the item-by-item sum's value and gradient."""
    rng = np.random.default_rng(3)
    items = {"x": rng.standard_normal((30, 5)), "y": rng.poisson(2.0, (30, 5)) * 1.0,
             "j": np.arange(30) % 11}
    u, a, b = rng.standard_normal(11) * 0.3, np.float64(0.2), np.float64(0.4)

    def run(argnums, **kw):  # (argument 0: the items' x)
        return tp.value_and_grad(lambda x, u, a, b: tp.parallel_sum(
            _group_logp, dict(items, x=x), u, a, b, chunk_size=7, vectorize=True, **kw),
            argnums=argnums)(items["x"], u, a, b)
    for argnums in ((1, 2, 3), (0, 1, 2, 3)):
        ref = run(argnums)
        for kw in [dict(executor="threads", n_workers=k) for k in (1, 2, 8)] + \
                [dict(executor="processes", n_workers=2)]:
            assert_bits(run(argnums, **kw), ref)
        with ThreadPoolExecutor(3) as pool:
            assert_bits(run(argnums, executor=pool), ref)
    plain = [{k: v[i] for k, v in items.items()} for i in range(30)]
    want = tp.value_and_grad(lambda u, a, b: sum(_group_logp(g, u, a, b) for g in plain),
                             argnums=(0, 1, 2))(u, a, b)
    np.testing.assert_allclose(ref[0], want[0], rtol=1e-12)
    for got, w in zip(ref[1][1:], want[1]):
        np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-12, atol=1e-12)


def test_vectorized_default_chunks_hold_at_least_min_vectorized_chunk_items():
    """A vectorized call's default chunks hold at least MIN_VECTORIZED_CHUNK
    items (each chunk has a fixed cost), still decided by ``len(items)``
    alone: the default gives the bits of that chunk size on every executor;
    an item-by-item or hand-batched call keeps 16 chunks."""
    from tapestry.parallel.chunks import MIN_VECTORIZED_CHUNK
    from tapestry.parallel.chunks import chunk_bounds
    n = 2 * MIN_VECTORIZED_CHUNK + 100
    assert chunk_bounds(n, None, vectorized=True) == [
        (0, MIN_VECTORIZED_CHUNK), (MIN_VECTORIZED_CHUNK, 2 * MIN_VECTORIZED_CHUNK),
        (2 * MIN_VECTORIZED_CHUNK, n)]
    assert len(chunk_bounds(n, None)) == 16
    assert len(chunk_bounds(40 * MIN_VECTORIZED_CHUNK, None, vectorized=True)) == 16
    assert chunk_bounds(5, None, vectorized=True) == [(0, 5)]
    rng = np.random.default_rng(4)
    items = {"x": rng.standard_normal((n, 3)), "y": rng.poisson(2.0, (n, 3)) * 1.0,
             "j": np.arange(n) % 13}
    u, a, b = rng.standard_normal(13) * 0.3, np.float64(0.2), np.float64(0.4)

    def run(**kw):
        return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
            _group_logp, items, u, a, b, vectorize=True, **kw), argnums=(0, 1, 2))(u, a, b)
    ref = run(chunk_size=MIN_VECTORIZED_CHUNK)
    assert_bits(run(), ref)
    assert_bits(run(executor="threads", n_workers=2), ref)
    odd = run(chunk_size=(n + 15) // 16)  # the item-by-item default: other chunks, other bits
    np.testing.assert_allclose(odd[0], ref[0], rtol=1e-12)


def test_blas_runs_on_one_thread_in_every_call_and_is_restored():
    """Every parallel call runs its chunks with BLAS on one thread (the same
    bits as on a worker), then gives back the caller's setting."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    libs = threadpoolctl.ThreadpoolController().lib_controllers
    if not libs:
        pytest.skip("threadpoolctl finds no BLAS or OpenMP library here")
    seen = []

    def f(x):
        seen.append([lib.get_num_threads() for lib in libs])
        return np.sum(x)
    before = [lib.get_num_threads() for lib in libs]
    with threadpoolctl.threadpool_limits(limits=2):
        outer = [lib.get_num_threads() for lib in libs]
        tp.grad(lambda x: tp.parallel_sum(f, x, chunk_size=2))(np.ones((4, 3)))
        assert [lib.get_num_threads() for lib in libs] == outer
    assert [lib.get_num_threads() for lib in libs] == before
    assert seen and all(n == [1] * len(libs) for n in seen), \
        [(lib.internal_api, lib.prefix, lib.filepath) for lib in libs]


def test_map_bit_identical_threads_vs_recompute(w4_small):
    ms, x = w4_small

    def loss(ms, x, ex):
        outs = tp.parallel_map(lambda m, x: np.tanh(m["W1"] @ x), ms, x, executor=ex,
                               chunk_size=4)
        return sum(np.sum(o * o) for o in outs)
    ref = tp.value_and_grad(loss, argnums=(0, 1))(ms, x, "serial")
    for ex in ("threads", "processes"):
        assert_bits(tp.value_and_grad(loss, argnums=(0, 1))(ms, x, ex), ref)


def test_serial_matches_plain_loop(w4_small):
    ms, x = w4_small
    val, (gm, gx) = _sum_grad(ms, x, executor="serial")
    assert np.isclose(val, sum(mlp(m, x) for m in ms))
    for m, g in zip(ms, gm):
        ref = tp.grad(mlp)(m, x)
        assert all(np.allclose(g[k], ref[k]) for k in m)


def test_chunks_depend_only_on_count_and_size():
    assert chunk_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_bounds(64, None) == [(4 * k, 4 * k + 4) for k in range(16)]
    assert chunk_bounds(3, None) == [(0, 1), (1, 2), (2, 3)]


# --- values only, nesting, thread safety ------------------------------------------------
def test_no_traced_args_is_plain_value():
    X = RNG.standard_normal((9, 2))
    v = tp.parallel_sum(lambda r: np.sum(r ** 2), X, executor="threads", chunk_size=2)
    assert not isinstance(v, Var) and np.isclose(v, np.sum(X ** 2))
    y = tp.parallel_map(lambda r: r * 2, X, executor="threads")
    assert type(y) is np.ndarray and np.array_equal(y, X * 2)
    assert tp.parallel_sum(np.sum, []) == 0.0


def test_nested_parallel_inside_worker_runs_inline():
    X = RNG.standard_normal((4, 3))

    def outer(row, s):
        return tp.parallel_sum(lambda v, s: np.sin(v * s), row, s, executor="threads",
                               n_workers=1)
    g = tp.grad(lambda s: tp.parallel_sum(outer, X, s, executor="threads", n_workers=1,
                                          chunk_size=1))(0.5)
    assert np.isclose(g, np.sum(X * np.cos(X * 0.5)))


def test_concurrent_grads_from_several_threads(w4_small):
    ms, x = w4_small
    ref = _sum_grad(ms, x, executor="serial")
    results = run_concurrently(lambda: _sum_grad(ms, x, executor="threads", n_workers=2))
    for r in results:
        assert_bits(r, ref)


# --- faults ------------------------------------------------------------------------------------
def fails_on_5(v, s):
    if v == 5.0:
        raise ValueError("bad item")
    return v * s


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
def test_error_names_item_and_keeps_traceback(executor):
    with open_tape() as tape:
        s = Var(np.float64(2.0), tape, 0)
        tape.nodes.append(None)
        with pytest.raises(ParallelItemError, match="ValueError on item 5: bad item") as e:
            tp.parallel_sum(fails_on_5, np.arange(8.0), s, executor=executor, chunk_size=3)
        assert len(tape.nodes) == 1  # nothing recorded: no partial gradient
    assert e.value.index == 5
    assert "fails_on_5" in e.value.worker_traceback
    assert isinstance(e.value.__cause__, ValueError)


def _bwd_fails_at_2(x, g):
    if np.any(x == 2.0):
        raise ValueError("bwd fails at 2")
    return (g * np.cos(x),)


@tp.custom_vjp
def sin_bwd_fails_at_2(x):
    return np.sin(x)


sin_bwd_fails_at_2.defvjp(lambda x: (np.sin(x), x), _bwd_fails_at_2)


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
@pytest.mark.parametrize("op", ["sum", "map"])
def test_error_in_the_reverse_sweep_names_the_item(executor, op):
    """Not only f's own exceptions: one raised by a rule in the chunk's
    reverse sweep names the item too, and keeps the original as its cause
    (with processes it came back as an unrelated unpickling error)."""
    def loss(s):
        if op == "sum":
            return tp.parallel_sum(lambda v, s: sin_bwd_fails_at_2(v * s), np.arange(4.0), s,
                                   executor=executor, chunk_size=1)
        return np.sum(tp.parallel_map(lambda v, s: sin_bwd_fails_at_2(v * s), np.arange(4.0),
                                      s, executor=executor, chunk_size=1))
    with pytest.raises(ParallelItemError, match="reverse sweep through f raised ValueError "
                                                "on item 2: bwd fails at 2") as e:
        tp.grad(loss)(1.0)
    assert e.value.index == 2 and isinstance(e.value.__cause__, ValueError)
    if op == "map":  # forward mode transposes that rule: its tangent sweep fails there
        with pytest.raises(ParallelItemError, match="tangent sweep through f raised "
                                                    "ValueError on item 2") as e:
            tp.jvp(loss, (1.0,), (1.0,))
        assert e.value.index == 2


def exits_on_2(v):
    if v == 2.0:
        sys.exit(3)
    return v


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
def test_sys_exit_in_f_names_the_item(executor):
    """It ended the caller silently (serial, threads, processes) or killed
    Dask workers until Dask gave up."""
    with pytest.raises(ParallelItemError, match="f raised SystemExit on item 2") as e:
        tp.parallel_sum(exits_on_2, np.arange(4.0), executor=executor, chunk_size=1)
    assert isinstance(e.value.__cause__, SystemExit) and e.value.index == 2


def test_batched_error_names_item_range():
    with pytest.raises(ParallelItemError, match="items 3..5"):
        tp.parallel_sum(lambda c, s: fails_on_5(c[2], s) + np.sum(c), np.arange(8.0), 1.0,
                        chunk_size=3, batched=True)


def dies_once(v, x, marker):
    if v == 3.0 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return np.sum(x * v)


def test_killed_process_worker_is_replaced_and_chunk_retried(tmp_path):
    marker = str(tmp_path / "died")
    x = RNG.standard_normal(3)
    open(marker, "w").close()  # the serial reference must not die
    ref = tp.value_and_grad(lambda x: tp.parallel_sum(dies_once, np.arange(6.0), x, marker,
                                                      chunk_size=2), )(x)
    os.remove(marker)
    got = tp.value_and_grad(lambda x: tp.parallel_sum(dies_once, np.arange(6.0), x, marker,
                                                      executor="processes", n_workers=2,
                                                      chunk_size=2))(x)
    assert os.path.exists(marker)  # a worker really died
    assert_bits(got, ref)


def always_dies(v):
    os._exit(1)


def test_worker_dying_twice_is_a_clear_error():
    with pytest.raises(WorkerDiedError, match="died twice"):
        tp.parallel_sum(always_dies, np.arange(2.0), executor="processes", n_workers=2)


# --- bad input -------------------------------------------------------------------------------
def test_bad_arguments_are_named():
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="unknown executor 'gpu'"):
        tp.parallel_sum(np.sum, X, executor="gpu")
    with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
        tp.parallel_sum(np.sum, X, chunk_size=0)
    with pytest.raises(ValueError, match="same leading length"):
        tp.parallel_sum(lambda it: np.sum(it[0]), (X, np.ones(3)))
    with pytest.raises(ParallelItemError, match=r"f returned an array of shape \(2,\)"):
        tp.parallel_sum(lambda r: r, X)
    with pytest.raises(ValueError, match="another structure for item 1"):
        tp.parallel_map(lambda r: (r,) if r[0] > 0 else [r], np.array([[1.0], [-1.0]]))


@pytest.mark.parametrize("op", [tp.parallel_sum, tp.parallel_map])
@pytest.mark.parametrize("items", [np.ones((4, 2)), []])
def test_bad_options_are_refused_on_every_path(op, items):
    """Also with no items, and inline (higher derivatives): paths that
    never reach an executor accepted timeout=-1 or a misspelt executor."""
    calls = [lambda **kw: op(np.sum, items, **kw),
             lambda **kw: tp.hessian(lambda s: np.sum(op(lambda r, s: np.sum(r) * s ** 3,
                                                          np.ones((3, 2)), s, **kw)))(1.0)]
    for call in calls:
        for bad, match in [({"timeout": -1}, "timeout must be a positive number"),
                           ({"timeout": 0}, "timeout must be a positive number"),
                           ({"timeout": float("nan")}, "timeout must be a positive number"),
                           ({"timeout": "10"}, "timeout must be a positive number"),
                           ({"n_workers": -1}, "n_workers must be a positive integer"),
                           ({"n_workers": 0}, "n_workers must be a positive integer"),
                           ({"n_workers": 1.5}, "n_workers must be a positive integer"),
                           ({"executor": "thread"}, "unknown executor 'thread'"),
                           ({"chunk_size": -1}, "chunk_size must be a positive integer")]:
            with pytest.raises(ValueError, match=match):
                call(executor=bad.pop("executor", "threads"), **bad)
    with ThreadPoolExecutor(2) as pool:  # would be ignored: refused
        for call in calls:
            with pytest.raises(ValueError, match="size that executor instead"):
                call(executor=pool, n_workers=4)
    # what is allowed
    call(executor="threads", n_workers=2, timeout=30)
    call(executor="threads", timeout=float("inf"))


@pytest.mark.parametrize("executor", ["serial", "processes"])
def test_map_outputs_that_cannot_be_joined_name_the_items(executor):
    """A batched f returning one row per chunk was joined silently into a
    result shorter than the items; numpy's stacking error named no item."""
    X = np.arange(6.0).reshape(6, 1)
    for f, match in [(lambda c: c if c[0, 0] == 0 else np.sum(c, axis=0),
                      r"chunk of 2 items .* for items 2\.\.3 its output leaf 0 has shape "
                      r"\(1,\)"),
                     (lambda c: np.sum(c), r"for items 0\.\.1 its output leaf 0 has shape "
                                           r"\(\)")]:
        with pytest.raises(ValueError, match=match):
            tp.parallel_map(f, X, batched=True, chunk_size=2, executor=executor)
    with pytest.raises(ValueError, match=r"leaf 0 of shape \(2,\) for item 1 but \(1,\) "
                                         "for item 0"):
        tp.parallel_map(lambda r: np.ones(int(r[0]) % 2 + 1), X, chunk_size=2,
                        executor=executor)
    with pytest.raises(ValueError, match="another structure for item 3 than for item 0"):
        tp.parallel_map(lambda r: (r,) if r[0] != 3 else [r], X, executor=executor)


FUNNY_VALUES = [(None, "f returned None; .*return statement"),
                ("abc", r"f returned a str \('abc'\)"),
                (True, "f returned a bool .*logical or"),
                (np.bool_(True), "f returned a NumPy bool scalar .*logical or"),
                ([1.0, 2.0], "f returned a list .*use parallel_map"),
                (np.array(1.0, dtype=object), r"f returned an array of shape \(\) and dtype "
                                              "object"),
                (np.ones(2), r"f returned an array of shape \(2,\).*use parallel_map")]


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
@pytest.mark.parametrize("value,match", FUNNY_VALUES)
def test_sum_of_values_that_are_not_numbers_names_the_item(executor, value, match):
    """None gave a bare TypeError from '+', strings were concatenated and
    NumPy booleans or-ed, silently."""
    def f(v, s):
        return value if v == 3.0 else v * s
    for run in (lambda: tp.parallel_sum(f, np.arange(5.0), 1.0, executor=executor,
                                        chunk_size=2),
                lambda: tp.grad(lambda s: tp.parallel_sum(f, np.arange(5.0), s,
                                                          executor=executor,
                                                          chunk_size=2))(1.0)):
        with pytest.raises(ParallelItemError, match="tapestry.parallel_sum: on item 3, " +
                           match) as e:
            run()
        assert e.value.index == 3


VECTORIZED_FUNNY = [(lambda x, s: x * s, r"f returned an array of shape \(3,\) and dtype "
                                          r"float64 for each item.*use parallel_map"),
                    (lambda x, s: x[0] > s, "f returned a bool value for each item.*logical or"),
                    (lambda x, s: (x[0] * s, x[1]), "f returned a tuple for each item")]


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
@pytest.mark.parametrize("f,match", VECTORIZED_FUNNY)
def test_vectorized_sum_of_values_that_are_not_numbers_names_the_items(executor, f, match):
    """vectorize=True refuses what f item by item is refused for: it added
    up every item's array (or counted the booleans, or added a tuple's
    parts) with np.sum and returned that number, silently."""
    X = np.arange(12.0).reshape(4, 3)
    for run in (lambda: tp.parallel_sum(f, X, 1.0, executor=executor, chunk_size=2,
                                        vectorize=True),
                lambda: tp.grad(lambda s: tp.parallel_sum(f, X, s, executor=executor,
                                                          chunk_size=2, vectorize=True))(1.0)):
        with pytest.raises(ParallelItemError, match="tapestry.parallel_sum: on items 0..1, " +
                           match):
            run()
        with pytest.raises(ParallelItemError, match="f returned"):  # item by item: the same
            tp.parallel_sum(f, X, 1.0, executor=executor, chunk_size=2)


def test_progress_is_shown(capsys):
    tp.parallel_sum(np.sum, np.ones((5, 2)), chunk_size=1, progress=True)
    assert "parallel_sum: 5/5 chunks" in capsys.readouterr().err


# --- process transport: shared memory, packed tasks ---------------------------------------------
def poisson_part(g, a):
    eta = a + g["x"] + np.reshape(g["u"], (-1, 1))
    return np.sum(g["y"] * eta - np.exp(eta))


def test_shared_arrays_travel_as_references_and_give_the_same_bits():
    from tapestry.parallel import share, transport
    from tapestry.parallel.chunks import Plan
    from tapestry.parallel.work import sum_chunk
    rng = np.random.default_rng(4)
    data = {"x": rng.standard_normal((40, 5)), "y": rng.poisson(2.0, (40, 5)).astype(float)}
    shared = {k: share(v) for k, v in data.items()}
    assert all(type(v) is np.ndarray and np.array_equal(v, data[k]) for k, v in shared.items())
    u = rng.standard_normal(40)

    def vg(d, ex):
        return tp.value_and_grad(lambda u, a: tp.parallel_sum(
            poisson_part, dict(d, u=u), a, executor=ex, batched=True, chunk_size=7),
            argnums=(0, 1))(u, 0.3)
    ref = vg(data, "serial")
    for ex in ("serial", "threads", "processes"):
        assert_bits(vg(shared, ex), ref)
    plan = Plan(dict(shared, u=u), (0.3,), True, "parallel_sum")
    call = transport.Call(sum_chunk, [plan.tasks(poisson_part, [(0, 40)], False)])
    packed = list(call.payloads)
    assert packed[0].refs and len(packed[0].body) < data["x"].nbytes  # no copy of x, y
    # x and y are not copied into the call's arena either: only u (320 bytes, pickled)
    assert call.arena is None
    call.done()


def test_writes_to_a_shared_array_are_seen_by_process_workers():
    from tapestry.parallel import share
    X = share(np.ones((6, 2)))
    f = (lambda r: np.sum(r))
    assert tp.parallel_sum(f, X, executor="processes", chunk_size=2) == 12.0
    X[...] = 2.0
    assert tp.parallel_sum(f, X, executor="processes", chunk_size=2) == 24.0


def test_shared_file_is_removed_with_the_array():
    import gc

    from tapestry.parallel import shm
    X = shm.share(np.arange(5.0))
    path = shm._ref_of(X).path
    view = X[1:3]
    del X
    gc.collect()
    assert os.path.exists(path)  # a view keeps it alive
    del view
    gc.collect()
    assert not os.path.exists(path)


def test_share_refuses_object_arrays():
    from tapestry.parallel import share
    with pytest.raises(TypeError, match="share: object arrays"):
        share(np.array([{}, []], dtype=object))


def test_items_plain_pickle_refuses_fall_back_to_cloudpickle():
    items = [{"w": np.float64(k), "act": (lambda v: v * v)} for k in range(5)]
    f = (lambda it, s: it["act"](it["w"] * s))
    ref = tp.value_and_grad(lambda s: tp.parallel_sum(f, items, s, chunk_size=2))(1.5)
    got = tp.value_and_grad(lambda s: tp.parallel_sum(f, items, s, chunk_size=2,
                                                      executor="processes"))(1.5)
    assert_bits(got, ref)



def test_generator_items_are_taken_as_a_list():
    gen = (np.full(2, float(i)) for i in range(4))
    f = lambda x, w: np.sum(x * w)  # noqa: E731
    w = np.array([1.0, 2.0])
    total, g = tp.value_and_grad(lambda w: tp.parallel_sum(f, gen, w))(w)
    assert total == 18.0 and np.array_equal(g, [6.0, 6.0])
    assert tp.parallel_sum(f, map(float, range(3)), 2.0) == 6.0


# --- forward mode (jvp, linearize, jacfwd, jvp over grad) through parallel calls --------
def _row_net(r, W):
    return np.tanh(r @ W)


def _model_out(m, x):
    return {"h": np.tanh(m["W1"] @ x), "s": np.sum(m["b1"] * m["b1"])}


FORWARD_CASES = {
    # name: (parallel version (..., executor), the same without parallel calls, args)
    "map_stacked": (lambda X, W, ex: tp.parallel_map(_row_net, X, W, executor=ex,
                                                     chunk_size=3),
                    lambda X, W: np.tanh(X @ W),
                    (RNG.standard_normal((7, 3)), RNG.standard_normal((3, 2)))),
    "map_batched": (lambda X, W, ex: tp.parallel_map(_row_net, X, W, executor=ex,
                                                     chunk_size=2, batched=True),
                    lambda X, W: np.tanh(X @ W),
                    (RNG.standard_normal((5, 3)), RNG.standard_normal((3, 2)))),
    "map_list": (lambda ms, x, ex: tp.parallel_map(_model_out, ms, x, executor=ex,
                                                   chunk_size=3),
                 lambda ms, x: [_model_out(m, x) for m in ms],
                 (models(4, hidden=3, d=2), RNG.standard_normal((2, 2)))),
    "sum": (lambda ms, x, ex: tp.parallel_sum(mlp, ms, x, executor=ex, chunk_size=2),
            lambda ms, x: sum(mlp(m, x) for m in ms),
            (models(3, hidden=3, d=2), RNG.standard_normal((2, 2)))),
}


def _like(tree, seed):
    rng = np.random.default_rng(seed)
    return tp.tree_map(lambda a: rng.standard_normal(np.shape(a)).astype(np.result_type(a)),
                       tree)


def _close(a, b, dtype):
    tol = 1e-4 if dtype == np.float32 else 1e-10
    la, lb = tp.tree_flatten(a)[0], tp.tree_flatten(b)[0]
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        assert np.shape(u) == np.shape(v)
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol)


def _cast(tree, dtype):
    return tp.tree_map(lambda a: np.asarray(a, dtype), tree)


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
@pytest.mark.parametrize("case", sorted(FORWARD_CASES))
def test_forward_mode_through_parallel_calls(case, executor):
    par, ref, args = FORWARD_CASES[case]
    for dtype in (np.float64, np.float32):
        a = _cast(args, dtype)
        ts = (_like(a[0], 1), _like(a[1], 2))
        p = (lambda *xs: par(*xs, executor))
        _close(tp.jvp(p, a, ts), tp.jvp(ref, a, ts), dtype)
        _, lin = tp.linearize(p, *a)
        _, lin_ref = tp.linearize(ref, *a)
        for seed in (3, 4):  # the kept trace pushes several tangents
            u = (_like(a[0], seed), _like(a[1], seed + 10))
            _close(lin(*u), lin_ref(*u), dtype)
        _close(tp.jacfwd(p, argnums=(0, 1))(*a), tp.jacfwd(ref, argnums=(0, 1))(*a), dtype)

        def scalar(f):
            return lambda *xs: sum(np.sum(y ** 2) for y in tp.tree_flatten(f(*xs))[0])
        # forward over reverse: hessian, and jvp of grad
        _close(tp.hessian(scalar(p), argnums=1)(*a), tp.hessian(scalar(ref), argnums=1)(*a),
               dtype)
        g, g_ref = tp.grad(scalar(p), argnums=(0, 1)), tp.grad(scalar(ref), argnums=(0, 1))
        _close(tp.jvp(g, a, ts), tp.jvp(g_ref, a, ts), dtype)


def test_forward_mode_on_processes_uses_the_replayed_random_state():
    """The recomputed chunk draws the masks its value was computed with."""
    def dropout(r, W):  # global np.random: each worker's state moves on between tasks
        return np.tanh(r @ W) * (np.random.random(W.shape[1]) < 0.5)

    X, W, V = RNG.standard_normal((6, 3)), RNG.standard_normal((3, 40)), np.ones((3, 40))
    y, t = tp.jvp(lambda W: tp.parallel_map(dropout, X, W, executor="processes",
                                            chunk_size=2), (W,), (V,))
    assert np.any(y == 0) and np.any(y != 0)
    assert np.array_equal(y == 0, t == 0)


# --- complex values --------------------------------------------------------------------
def _phase(v, x, z):
    """Complex for v >= 2, real below: chunks of both kinds in one sum."""
    if v < 2:
        return np.sin(v * x[0])
    return np.sum(np.exp(1j * v * x) * z) * v


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
def test_complex_sum_gradient_with_complex_cotangents(executor):
    """check_grads pulls back random complex cotangents: a sum's gradient
    kept only for the cotangent 1 gave the gradient of np.imag(sum) as 0."""
    x = np.array([0.3, -0.8])
    z = np.array([0.5 - 1.0j, 2.0 + 0.25j])
    items = np.arange(5.0)
    check_grads(lambda x, z: tp.parallel_sum(_phase, items, x, z, executor=executor,
                                             chunk_size=2), (x, z))
    ref = tp.grad(lambda x: np.imag(sum(_phase(v, x, z) for v in items)))(x)
    got = tp.grad(lambda x: np.imag(tp.parallel_sum(_phase, items, x, z, executor=executor,
                                                    chunk_size=2)))(x)
    assert np.allclose(got, ref) and np.all(ref != 0)


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
def test_complex_map_gradient(executor):
    x = np.array([0.3, -0.8])
    z = np.array([0.5 - 1.0j, 2.0 + 0.25j])
    check_grads(lambda x, z: tp.parallel_map(lambda v, x, z: np.exp(1j * v * x) * z,
                                             np.arange(5.0), x, z, executor=executor,
                                             chunk_size=2), (x, z))


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_jacfwd_pushes_its_batch_of_tangents_in_one_parallel_call(executor, monkeypatch):
    """Not one call (and, for processes, one recompute of every chunk) per
    input element."""
    from tapestry.parallel import pmap
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1].__name__)
        return run_chunks(*args, **kwargs)
    run_chunks = pmap.run_chunks
    monkeypatch.setattr(pmap, "run_chunks", counting)
    X, W = RNG.standard_normal((6, 3)), RNG.standard_normal((3, 4))
    J = tp.jacfwd(lambda W: tp.parallel_map(_row_net, X, W, executor=executor,
                                            chunk_size=2))(W)
    assert np.allclose(J, tp.jacfwd(lambda W: np.tanh(X @ W))(W))
    assert len(calls) == 2, calls  # the forward, then one tangent call for 12 columns


def test_default_workers_follow_the_cpu_affinity(monkeypatch):
    """A process allowed on 2 of 16 cores (taskset, a batch allocation) gets
    2 workers, not os.cpu_count()'s 16."""
    import os
    from tapestry.parallel import executors
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5}, raising=False)
    assert executors._default_workers() == 2
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert executors._default_workers() == 16


def test_blas_controller_is_made_again_after_imports(monkeypatch):
    """A library loaded after the first parallel call (an import since) is
    limited too: the cached controller is made again."""
    pytest.importorskip("threadpoolctl")
    import sys
    import types
    from tapestry.parallel import executors
    first = executors._controller()
    assert executors._controller() is first  # (nothing imported: kept)
    monkeypatch.setitem(sys.modules, "tapestry_test_new_library", types.ModuleType("x"))
    again = executors._controller()
    assert again is not first and again
    assert executors._controller() is again
