"""Sparse and dense contributions to one cotangent, in every order."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

rng = np.random.default_rng(3)
S1, S2 = np.array([0, 2, 2]), np.array([4, 0])


@pytest.mark.parametrize("order", ["dense_first", "sparse_first", "interleaved"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mixed_accumulation_matches_dense_path(order, dtype):
    W = rng.standard_normal((5, 3)).astype(dtype)

    def f(W):
        dense = [lambda: np.sum(np.tanh(W) * 2.0), lambda: np.sum(W ** 2)]
        sparse = [lambda: np.sum(W[S1] * 3.0), lambda: np.sum(np.sin(W[S2]))]
        terms = {"dense_first": dense + sparse, "sparse_first": sparse + dense,
                 "interleaved": [sparse[0], dense[0], sparse[1], dense[1]]}[order]
        return sum(t() for t in terms)

    g_sparse = tp.grad(f)(W)
    g_dense = tp.grad(f, sparse=False)(W)
    assert g_dense.dtype == dtype
    np.testing.assert_allclose(np.asarray(g_sparse), g_dense, rtol=1e-6)
    check_grads(f, (W,))
