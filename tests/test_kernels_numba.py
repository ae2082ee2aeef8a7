"""Plan (c): numba loop nests.  Few, small kernels: each distinct nest costs
a compilation (cached on disk afterwards)."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

pytest.importorskip("numba")
rng = np.random.default_rng(1)


@pytest.fixture(autouse=True)
def _numba_on(monkeypatch, tmp_path_factory):
    monkeypatch.delenv("TAPESTRY_NO_NUMBA", raising=False)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_laplace_numba_matches_reference_and_blocked(dtype):
    w = rng.standard_normal((6, 4)).astype(dtype)
    x = rng.standard_normal((6, 3)).astype(dtype)
    lap = tp.kernel("y[i,j] := exp(-abs(w[k,i] - x[k,j]))")
    assert "(c) numba" in lap.explain()
    ref = np.exp(-np.abs(w[:, :, None].astype(float) - x[:, None, :])).sum(0)
    y = lap(w, x)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ref, rtol=1e-5 if dtype == np.float32 else 1e-12)
    check_grads(lap, (w, x))
    blocked = tp.kernel("y[i,j] := exp(-abs(w[k,i] - x[k,j]))", plan="blocked")
    loss = lambda k: tp.grad(lambda w, x: np.sum(k(w, x) ** 2), argnums=(0, 1))(w, x)
    for a, b in zip(loss(lap), loss(blocked)):
        np.testing.assert_allclose(a, b, rtol=1e-4 if dtype == np.float32 else 1e-10)


def test_max_ties_and_shifted_boundaries_numba():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0]])
    mx = tp.kernel("(max) y[i] := x[i,k]", plan="numba")
    np.testing.assert_allclose(mx(x), [3, 2, 5])
    g = tp.grad(lambda x: np.sum(mx(x)))(x)
    np.testing.assert_allclose(g, [[0, .5, .5], [1 / 3] * 3, [0, 0, 1]])
    conv = tp.kernel("y[i] := x[i+a] * h[a]", plan="numba")
    xs, h = np.arange(1.0, 8.0), np.array([1.0, 10.0, 100.0])
    np.testing.assert_allclose(conv(xs, h), np.correlate(xs, h, "valid"))
    gx, gh = tp.grad(lambda x, h: np.sum(conv(x, h)), argnums=(0, 1))(xs, h)
    np.testing.assert_allclose(gx, [1, 11, 111, 111, 111, 110, 100])
    np.testing.assert_allclose(gh, [xs[0:5].sum(), xs[1:6].sum(), xs[2:7].sum()])
    check_grads(conv, (rng.standard_normal(7), rng.standard_normal(3)))


def test_compiled_nests_are_cached_on_disk(monkeypatch, tmp_path):
    from tapestry.kernels import compile_numba
    monkeypatch.setenv("TAPESTRY_CACHE_DIR", str(tmp_path))
    sq = tp.kernel("y[i] := relu(x[i,k]) * sigmoid(x[i,k])", plan="numba")
    x = rng.standard_normal((3, 4))
    np.testing.assert_allclose(sq(x), (np.maximum(x, 0) / (1 + np.exp(-x))).sum(1))
    assert list(tmp_path.glob("tk_*.py"))
    assert list(tmp_path.glob("__pycache__/*.nbi"))  # numba's on-disk index
    compile_numba._compiled.clear()                  # a fresh process would reload it
    np.testing.assert_allclose(sq(x), (np.maximum(x, 0) / (1 + np.exp(-x))).sum(1))
