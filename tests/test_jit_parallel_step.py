"""``parallel_sum`` inside a jitted function (tapestry.parallel.staged): the
chunks are one step of the program and run on the executor at every
replay, with the eager call's bits; where that cannot hold they are traced
inline as before, still exact."""
import importlib
import warnings

import numpy as np
import pytest

import tapestry as tp

runner = importlib.import_module("tapestry.parallel.runner")
staged_mod = importlib.import_module("tapestry.parallel.staged")


def mlp(m, x):
    h = np.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
    return np.sum((m["W2"] @ h) ** 2)


def make_models(n=6, seed=0, dtype=np.float64):
    r = np.random.default_rng(seed)
    ms = [{"W1": r.normal(size=(5, 3)).astype(dtype), "b1": r.normal(size=5).astype(dtype),
           "W2": r.normal(size=(1, 5)).astype(dtype)} for _ in range(n)]
    return ms, r.normal(size=(3, 4)).astype(dtype)


def _same(a, b):
    la, lb = tp.tree_util.tree_leaves(a), tp.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x, y, equal_nan=True), (x, y)


class ExecutorSpy:
    """The executors the chunks ran on, call by call."""

    def __init__(self, monkeypatch):
        self.seen = []
        orig = runner.run_chunks

        def spy(ex, *a, **k):
            self.seen.append(type(ex).__name__)
            return orig(ex, *a, **k)
        for mod in ("tapestry.parallel.staged", "tapestry.parallel.reduce"):
            monkeypatch.setattr(importlib.import_module(mod), "run_chunks", spy)


@pytest.mark.parametrize("ex", ["threads", "processes"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_chunks_run_on_the_executor_at_every_replay(monkeypatch, ex, argnums):
    ms, x = make_models()
    spy = ExecutorSpy(monkeypatch)
    f = lambda ms, x: tp.parallel_sum(mlp, ms, x, executor=ex, chunk_size=2)  # noqa: E731
    jf = tp.jit(tp.value_and_grad(f, argnums=argnums))
    want = tp.value_and_grad(f, argnums=argnums)(ms, x)
    for _ in range(3):
        _same(jf(ms, x), want)
    assert jf.cache_info()["traces"] == 1
    assert spy.seen.count("SerialExecutor") == 0 and len(spy.seen) >= 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_only_and_dtypes(dtype):
    ms, x = make_models(dtype=dtype)
    f = lambda ms, x: tp.parallel_sum(mlp, ms, x, executor="threads", chunk_size=4)  # noqa: E731
    jf = tp.jit(f)
    for _ in range(2):
        _same(jf(ms, x), f(ms, x))


def test_new_values_every_call():
    ms, x = make_models()
    f = tp.value_and_grad(lambda ms, x: tp.parallel_sum(mlp, ms, x, executor="threads"),
                          argnums=1)
    jf = tp.jit(f)
    for k in range(3):
        ms[k]["W1"] = ms[k]["W1"] * 1.5  # a new array in an argument
        x = x + 0.25
        _same(jf(ms, x), f(ms, x))


def test_array_items_batched_and_item_gradients():
    r = np.random.default_rng(4)
    X, w = r.normal(size=(9, 3)), r.normal(size=3)
    for batched in (False, True):
        f = lambda X, w, b=batched: tp.parallel_sum(  # noqa: E731
            lambda x, w: np.sum(np.sin(x @ w) if b else np.sin(x * w)), X, w,
            executor="threads", chunk_size=4, batched=b)
        g = tp.value_and_grad(f, argnums=(0, 1))
        jg = tp.jit(g)
        for _ in range(2):
            _same(jg(X, w), g(X, w))


def test_a_closure_read_afresh(monkeypatch):
    ms, x = make_models()
    scale = np.array([1.0])

    def item(m, x):
        return mlp(m, x) * scale[0]
    f = tp.value_and_grad(lambda x: tp.parallel_sum(item, ms, x, executor="threads"))
    jf = tp.jit(f)
    for s in (1.0, 2.0, -0.5):
        scale[0] = s
        _same(jf(x), f(x))


def test_f_closing_over_a_jit_argument_is_traced_inline(monkeypatch):
    ms, x = make_models()
    calls = []
    orig = staged_mod._ChunksStep.run
    monkeypatch.setattr(staged_mod._ChunksStep, "run",
                        lambda self, *a: calls.append(1) or orig(self, *a))

    def loss(x, ms):
        return tp.parallel_sum(lambda m: mlp(m, x), ms, executor="threads")
    jf = tp.jit(loss)
    for _ in range(2):
        _same(jf(x, ms), loss(x, ms))
    assert not calls  # (inline: the closure's value is the trace's)
    with pytest.raises(TypeError, match="not among its items or shared arguments"):
        tp.grad(loss)(x, ms)  # eager refuses it under grad, as before


def test_higher_derivatives_and_vmap_trace_inline():
    r = np.random.default_rng(5)
    items = [r.normal(size=3) for _ in range(5)]
    f = lambda w: tp.parallel_sum(lambda x, w: np.sum(np.tanh(x * w) ** 2), items, w,  # noqa
                                  executor="threads", chunk_size=2)
    w = r.normal(size=3)
    np.testing.assert_allclose(tp.jit(tp.hessian(f))(w), tp.hessian(f)(w), rtol=1e-12)
    W = r.normal(size=(4, 3))
    _same(tp.jit(tp.vmap(tp.grad(f)))(W), tp.vmap(tp.grad(f))(W))


def test_complex_sums_trace_inline():
    items = [np.arange(3.0) + i for i in range(4)]
    f = lambda w: np.real(tp.parallel_sum(  # noqa: E731
        lambda x, w: np.sum(np.exp(1j * w * x)), items, w, executor="threads"))
    _same(tp.jit(tp.grad(f))(0.3), tp.grad(f)(0.3))


def test_an_item_that_raises_at_a_replay_is_named():
    ms, x = make_models()
    jf = tp.jit(tp.grad(lambda x, ms: tp.parallel_sum(mlp, ms, x, executor="threads")))
    jf(x, ms)
    bad = [dict(m) for m in ms]
    bad[4]["W1"] = np.full_like(bad[4]["W1"], np.nan)
    bad[4]["b1"] = "not an array"
    with pytest.raises(Exception, match="item 4"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jf(x, bad)


def test_random_draws_are_fresh_or_refused():
    ms, x = make_models()
    rng = np.random.default_rng(0)

    def noisy(m, x):
        return mlp(m, x) + rng.normal()
    f = tp.jit(lambda x: tp.parallel_sum(noisy, ms, x, executor="threads"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = {float(f(x)) for _ in range(4)}
    assert len(values) == 4


def test_items_passed_as_arguments_of_the_jitted_function(monkeypatch):
    """Items that are arguments of the jitted function (staged in the
    trace) reach the chunks as the replay's values: the step is kept, no
    fallback to the uncompiled function."""
    ms, x = make_models()
    spy = ExecutorSpy(monkeypatch)
    f = tp.value_and_grad(lambda x, ms: tp.parallel_sum(mlp, ms, x, executor="threads",
                                                          chunk_size=2))
    jf = tp.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a fallback warns)
        for k in range(3):
            ms = [dict(m, W1=m["W1"] * (1 + 0.1 * k)) for m in ms]
            _same(jf(x, ms), f(x, ms))
    assert jf.cache_info()["traces"] == 1
    assert spy.seen.count("SerialExecutor") == 0


def test_the_usual_seed_adds_no_multiplication_per_gradient():
    """``value_and_grad`` seeds the sum with a plain 1: its gradients leave
    the step as they are (as in the eager call), with no multiplication by
    1 per gradient in the program (one per item leaf: 24 here); a sum
    scaled by a traced value still scales each, with the eager bits."""
    ms, x = make_models()
    f = lambda ms, x: tp.parallel_sum(mlp, ms, x, executor="threads", chunk_size=2)  # noqa: E731
    jf = tp.jit(tp.value_and_grad(f))
    for _ in range(2):
        _same(jf(ms, x), tp.value_and_grad(f)(ms, x))
    src = next(iter(jf._cache.values())).programs[0].program.source
    assert "multiply" not in src and " * " not in src, src
    g = lambda ms, x, c: c * f(ms, x)  # noqa: E731
    jg = tp.jit(tp.value_and_grad(g))
    for c in (2.5, -1.0):
        _same(jg(ms, x, c), tp.value_and_grad(g)(ms, x, c))
    src = next(iter(jg._cache.values())).programs[0].program.source
    assert "multiply" in src or " * " in src  # (c's cotangent scales every gradient)
