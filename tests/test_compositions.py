"""Compositions of transformations that each work alone: vmap, grad,
parallel_sum / parallel_map on every executor, custom rules, kernels,
sparse gradients and optimizers.  Every result is compared with a
reference computed another way (a Python loop over items, or finite
differences)."""
import numpy as np
import pytest

import tapestry as tp

EXECUTORS = ["serial", "threads", "processes"]


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((12, 3)), rng.standard_normal((4, 3))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("vectorize", [False, True])
def test_vmap_of_parallel_map_matches_loop(executor, vectorize):
    """A parallel call inside vmap gets batched shared arguments; on
    processes they were pickled away from their batch trace and came back
    as an object array of stale batched values."""
    X, U = _data()
    F = lambda u: tp.parallel_map(lambda x, u: np.tanh(x * u), X, u, chunk_size=5,
                                  executor=executor, vectorize=vectorize)
    out = tp.vmap(F)(U)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, np.stack([np.tanh(X * u) for u in U]))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_vmap_of_grad_of_parallel_sum_matches_loop(executor):
    X, U = _data()
    F = lambda u: tp.parallel_sum(lambda x, u: np.sum(np.tanh(x * u) ** 2), X, u,
                                  chunk_size=5, executor=executor)
    out = tp.vmap(tp.value_and_grad(F))(U)
    ref_v = np.array([np.sum(np.tanh(X * u) ** 2) for u in U])
    ref_g = np.stack([tp.grad(lambda u: np.sum(np.tanh(X * u) ** 2))(u) for u in U])
    np.testing.assert_allclose(out[0], ref_v)
    np.testing.assert_allclose(out[1], ref_g)
