"""AxisSparse: construction, coalescing, accumulation, the rules that keep it
sparse, and the points that densify (counted by tapestry.debug)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapestry as tp
from tapestry.sparse import AxisSparse
from tapestry.testing import check_grads

RNG = np.random.default_rng(1)


def _sp(shape=(6, 3), axis=0, idx=(4, 1, 4), dtype=np.float64):
    vshape = list(shape)
    vshape[axis] = len(idx)
    return AxisSparse(axis, np.array(idx), RNG.standard_normal(vshape).astype(dtype), shape)


@pytest.fixture(autouse=True)
def _reset_counts():
    tp.debug.reset_densify_counts()
    yield


def test_todense_sums_repeated_indices():
    s = _sp()
    ref = np.zeros(s.shape)
    np.add.at(ref, s.indices, s.values)
    assert np.allclose(s.todense(), ref) and np.allclose(np.asarray(s), ref)
    assert s.shape == (6, 3) and s.dtype == np.float64 and s.ndim == 2 and len(s) == 6


def test_coalesce_is_sorted_unique_and_deterministic():
    s = _sp(idx=(5, 0, 5, 2, 0, 5))
    c = s.coalesce()
    assert list(c.indices) == [0, 2, 5] and c.coalesced
    assert np.allclose(c.todense(), s.todense())
    rows5 = s.values[[0, 2, 5]]
    assert np.allclose(c.values[2], rows5.sum(0))
    again = AxisSparse(0, s.indices.copy(), s.values.copy(), s.shape).coalesce()
    assert np.array_equal(again.values, c.values)  # deterministic, bit for bit
    assert c.coalesce() is c


def test_constructor_errors():
    with pytest.raises(ValueError, match="values have shape"):
        AxisSparse(0, np.array([1]), np.zeros((2, 3)), (5, 3))
    with pytest.raises(ValueError, match="1-D integer array"):
        AxisSparse(0, np.array([0.5]), np.zeros((1, 3)), (5, 3))
    with pytest.raises(ValueError, match="axis 2 out of range"):
        AxisSparse(2, np.array([1]), np.zeros((1, 3)), (5, 3))


def test_sparse_plus_sparse_stays_sparse_and_dense_plus_sparse_scatters():
    a, b = _sp(idx=(1, 2)), _sp(idx=(2, 5))
    s = a + b
    assert isinstance(s, AxisSparse) and list(s.indices) == [1, 2, 2, 5]
    assert np.allclose(s.todense(), a.todense() + b.todense())
    d = RNG.standard_normal(a.shape)
    d0 = d.copy()
    for r in (a + d, d + a, a.__accumulate_into__(d)):
        assert type(r) is np.ndarray and np.allclose(r, d0 + a.todense())
    assert np.array_equal(d, d0)  # never written to
    assert np.allclose(d - a, d0 - a.todense()) and np.allclose(a - d, a.todense() - d0)
    c = _sp(axis=1, idx=(0,))
    assert np.allclose(a + c, a.todense() + c.todense())
    assert tp.debug.densify_counts() == {"add (different sparse axes)": 1}


def test_inplace_update_touches_only_the_rows():
    W = RNG.standard_normal((6, 3))
    W0 = W.copy()
    g = _sp(idx=(3, 3, 0))
    W -= 0.1 * g
    assert np.allclose(W, W0 - 0.1 * g.todense())
    W += g
    assert np.allclose(W, W0 + 0.9 * g.todense())
    assert tp.debug.densify_counts() == {}


@pytest.mark.parametrize("axis", [0, 1])
def test_preserving_rules(axis):
    s = _sp(axis=axis, idx=(2, 0, 2))
    d = s.todense()
    y = RNG.standard_normal(s.shape)
    row = RNG.standard_normal((1, s.shape[1]))
    col = RNG.standard_normal((s.shape[0], 1))
    cases = {
        "neg": (-s, -d), "scale": (2.5 * s, 2.5 * d), "rscale": (s * np.float32(2), d * 2),
        "mul": (s * y, d * y), "rmul": (y * s, y * d), "row": (s * row, d * row),
        "col": (col * s, col * d), "div": (s / (y + 5), d / (y + 5)),
        "tanh": (np.tanh(s), np.tanh(d)), "square": (np.square(s), d ** 2),
        "T": (s.T, d.T), "transpose": (np.transpose(s), d.T),
        "swap": (np.swapaxes(s, 0, 1), d.T), "moveaxis": (np.moveaxis(s, 0, -1), d.T),
        "sum_keep": (np.sum(s, axis=1 - axis, keepdims=True), d.sum(1 - axis, keepdims=True)),
    }
    for name, (got, want) in cases.items():
        assert isinstance(got, AxisSparse), name
        assert np.allclose(got.todense(), want), name
    assert np.allclose(np.sum(s, axis=axis), d.sum(axis))   # over the sparse axis: dense
    assert np.allclose(np.sum(s), d.sum())
    assert np.allclose(s.sum(axis=1 - axis).todense(), d.sum(1 - axis))
    assert tp.debug.densify_counts() == {}


def test_matmul_reshape_keep_sparsity():
    s = _sp(shape=(6, 4), idx=(5, 1))
    m = RNG.standard_normal((4, 2))
    r = s @ m
    assert isinstance(r, AxisSparse) and np.allclose(r.todense(), s.todense() @ m)
    t = s.T
    l = RNG.standard_normal((3, 4))
    assert isinstance(l @ t, AxisSparse) and np.allclose((l @ t).todense(), l @ t.todense())
    r2 = np.reshape(s, (6, 2, 2))
    assert isinstance(r2, AxisSparse) and np.allclose(r2.todense(), s.todense().reshape(6, 2, 2))
    assert tp.debug.densify_counts() == {}


def test_densification_points_are_counted():
    s = _sp()
    d = s.todense()
    assert np.allclose(np.exp(s), np.exp(d))          # exp(0) != 0: dense
    assert np.allclose(s + 1.0, d + 1.0)
    assert np.allclose(np.where(d > 0, s, 0.0), np.where(d > 0, d, 0.0))
    assert np.allclose(np.reshape(s, (3, 6)), d.reshape(3, 6))
    assert np.allclose(s[1], d[1])
    assert tp.debug.densify_counts() == {
        "np.exp": 1, "add (broadcast dense operand)": 1, "np.where": 1,
        "np.reshape": 1, "getitem on AxisSparse": 1}
    tp.debug.set_densify_warnings(True)
    try:
        with pytest.warns(tp.debug.DensifyWarning, match="np.cos"):
            np.cos(s)
    finally:
        tp.debug.set_densify_warnings(False)


def _W(n=9, m=4):
    return RNG.standard_normal((n, m))


def test_grad_is_sparse_through_preserving_rules_without_densifying():
    W, x = _W(), RNG.standard_normal(4)
    S = np.array([2, 7, 7, 0])
    losses = [
        lambda W: np.sum(W[S] @ x),
        lambda W: np.sum(np.tanh(W * 2.0)[S] ** 2),        # elementwise, same shape
        lambda W: np.sum((-W / 3.0)[S] * x),               # negation, scaling, broadcast
        lambda W: np.sum(W.T[:, S] @ np.ones(4)),          # transpose
        lambda W: np.sum(W[S]) + np.sum(W[np.array([1])]),  # sum of sparse terms
        lambda W: np.sum(np.take(W * x, S, axis=0)),       # broadcast operand
    ]
    for f in losses:
        g = tp.grad(f, sparse=True)(W)
        assert isinstance(g, AxisSparse) and g.axis == 0
        assert np.allclose(g.todense(), tp.grad(f, sparse=False)(W))
        check_grads(f, (W,))
    assert tp.debug.densify_counts() == {}


def test_mixed_dense_and_sparse_use_gives_the_dense_sum():
    W = _W()
    S = np.array([1, 1, 3])
    f = lambda W: np.sum(W ** 2) + np.sum(W[S] * 3.0)
    g = tp.grad(f, sparse=True)(W)
    assert type(g) is np.ndarray
    ref = 2 * W
    np.add.at(ref, S, 3.0)
    assert np.allclose(g, ref)


def test_grad_result_behaves_like_an_array():
    W = _W()
    g = tp.grad(lambda W: np.sum(W[np.array([0, 0, 5])] ** 2), sparse=True)(W)
    d = np.asarray(g)
    assert g.shape == W.shape and g.dtype == W.dtype
    assert np.allclose(g + W, d + W) and np.allclose(2 * g, 2 * d)
    assert np.allclose(g.todense(), d) and np.allclose(np.array(g), d)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float32_gradients_keep_dtype(dtype):
    W = _W().astype(dtype)
    S = np.array([4, 4, 1])
    f = lambda W: np.sum(np.sin(W[S]) * 2.0)
    g = tp.grad(f, sparse=True)(W)
    assert isinstance(g, AxisSparse) and g.dtype == dtype
    check_grads(f, (W,))


def test_sparse_gradient_is_flat_in_memory():
    """The backward pass allocates O(|S|), not O(N): no buffer of W's size."""
    import tracemalloc
    x = RNG.standard_normal(64)
    S = RNG.integers(0, 4096, 32)
    W = RNG.standard_normal((4096, 64))    # 2 MiB
    f = tp.grad(lambda W: np.sum(W[S] @ x), sparse=True)
    f(W)
    tracemalloc.start()
    g = f(W)
    W -= 0.1 * g
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < W.nbytes / 8


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), k=st.integers(0, 6),
       seed=st.integers(0, 2**16), data=st.data())
def test_random_sparse_arithmetic_matches_dense(shape, k, seed, data):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    idx = rng.integers(0, shape[axis], k)
    vshape = list(shape)
    vshape[axis] = k
    s = AxisSparse(axis, idx, rng.standard_normal(vshape), shape)
    d = s.todense()
    y = rng.standard_normal(shape)
    assert np.allclose((s * y + s).todense(), d * y + d)
    assert np.allclose(np.asarray(s.coalesce()), d)
    assert np.allclose(np.asarray(np.transpose(s)), d.T)
    assert np.allclose(y + s, y + d)


# --- when a gradient is returned sparse (sparse="auto") -----------------------------
def test_small_or_dense_access_gives_dense_gradients():
    """Rosenbrock written with t[0], t[1] and a loop over rows touch most of a
    small array: the gradient comes back as a plain ndarray."""
    rosen = lambda t: (1 - t[0]) ** 2 + 100 * (t[1] - t[0] ** 2) ** 2
    g = tp.grad(rosen)(np.array([0.5, 1.5]))
    assert type(g) is np.ndarray
    np.testing.assert_allclose(g, [-1 - 400 * 0.5 * (1.5 - 0.25), 200 * (1.5 - 0.25)])
    x = np.arange(12.0).reshape(4, 3)
    g = tp.grad(lambda x: sum(np.sum(row ** 2) for row in x))(x)
    assert type(g) is np.ndarray and np.allclose(g, 2 * x)
    assert g.ravel().tolist() == (2 * x).ravel().tolist()


def test_few_rows_of_a_large_array_stay_sparse():
    W = np.ones((4096, 16))
    S = np.array([3, 70, 70, 4000])
    g = tp.grad(lambda W: np.sum(W[S] ** 2))(W)
    assert isinstance(g, tp.AxisSparse)
    # touching more than a quarter of the rows densifies once, at the end
    many = np.arange(2048)
    assert type(tp.grad(lambda W: np.sum(W[many] ** 2))(W)) is np.ndarray
    assert isinstance(tp.grad(lambda W: np.sum(W[many] ** 2), sparse=True)(W), tp.AxisSparse)


def test_returned_axis_sparse_supports_ndarray_methods():
    W = _W()
    g = tp.grad(lambda W: np.sum(W[np.array([0, 0, 5])] ** 2), sparse=True)(W)
    d = g.todense()
    assert g.ravel().tolist() == d.ravel().tolist()
    assert np.array_equal(g > 0, d > 0) and np.array_equal(g == d, np.ones_like(d, bool))
    assert g.max() == d.max() and g.flatten().shape == (d.size,)
    assert [r.tolist() for r in g] == d.tolist()
    assert f"{g.sum():.3f}" == f"{d.sum():.3f}"
    with pytest.raises(AttributeError, match="todense"):
        g.no_such_attribute
