"""Process workers get a call's arrays, and send gradients back, through a
shared-memory arena (tapestry.parallel.arena)."""
import numpy as np
import pytest

import tapestry as tp
from parallel_checks import assert_bits, run_concurrently
from tapestry.core.pytree import tree_leaves
from tapestry.parallel import arena

pytest.importorskip("loky")
pytest.importorskip("cloudpickle")


def mlp(m, x):
    return np.sum(np.tanh(m["W"] @ x + m["b"][:, None]))


def _models(n, seed=0):
    rng = np.random.default_rng(seed)
    return [{"W": rng.standard_normal((16, 8)), "b": rng.standard_normal(16)}
            for _ in range(n)], rng.standard_normal((8, 12))


def _vg(ex, ms, x):
    return tp.value_and_grad(lambda ms, x: tp.parallel_sum(mlp, ms, x, executor=ex),
                             argnums=(0, 1))(ms, x)


def test_gradients_through_the_arena_are_bit_identical_and_owned():
    ms, x = _models(10)
    ref = _vg("serial", ms, x)
    got = _vg("processes", ms, x)
    assert_bits(got, ref)
    held = [np.array(g) for g in tree_leaves(got)]
    assert arena._pool  # the call went through an arena, now back in the pool
    again = _vg("processes", _models(10, seed=1)[0], x)  # reuses the arena
    for g, h in zip(tree_leaves(got), held):
        assert np.array_equal(g, h)  # the first call's gradients were copied out
        assert not any(np.shares_memory(g, np.frombuffer(a.mm, np.uint8)) for a in arena._pool)
    assert not np.array_equal(tree_leaves(again[1])[0], held[1])


def test_arena_goes_back_to_the_pool_and_is_dropped_after_an_error():
    ms, x = _models(6)
    _vg("processes", ms, x)
    pooled = {a.path for a in arena._pool}
    assert pooled

    def bad(m, x):
        if m["b"][0] == ms[3]["b"][0]:
            raise ValueError("boom")
        return mlp(m, x)
    with pytest.raises(Exception, match="boom"):
        tp.grad(lambda ms: tp.parallel_sum(bad, ms, x, executor="processes",
                                           chunk_size=1))(ms)
    # the arena that call used may still be written by running tasks: not reused
    assert len(arena._pool) <= len(pooled)


def test_worker_writes_to_its_items_do_not_reach_the_caller():
    rng = np.random.default_rng(2)
    items = [rng.standard_normal(300) for _ in range(4)]
    before = [a.copy() for a in items]

    def f(a):
        a *= 2.0  # the worker's private copy (in the arena)
        return np.sum(a)
    assert tp.parallel_sum(f, items, executor="processes") == \
        pytest.approx(2 * sum(np.sum(b) for b in before))
    for a, b in zip(items, before):
        assert np.array_equal(a, b)


def test_concurrent_process_calls_from_threads():
    ms, x = _models(8)
    ref = _vg("serial", ms, x)
    for o in run_concurrently(lambda: _vg("processes", ms, x)):
        assert_bits(o, ref)


def test_float32_and_empty_and_small_arrays():
    rng = np.random.default_rng(3)
    items = [{"w": rng.standard_normal(400).astype(np.float32), "s": np.float32(2.0),
              "e": np.zeros(0, np.float32)} for _ in range(5)]

    def f(it):
        return np.sum(it["w"] * it["s"]) + np.sum(it["e"])
    ref = tp.grad(lambda it: tp.parallel_sum(f, it, executor="serial"))(items)
    got = tp.grad(lambda it: tp.parallel_sum(f, it, executor="processes"))(items)
    assert_bits(got, ref)
    assert got[0]["w"].dtype == np.float32
