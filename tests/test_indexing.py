"""Indexing rules: x[key], np.take, np.take_along_axis, against finite
differences (float64 and float32) and the dense scatter they must equal."""
import operator

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapestry as tp
from tapestry.testing import check_grads

RNG = np.random.default_rng(0)
DTYPES = [np.float64, np.float32]


def _x(shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _dense_grad_of_sum(shape, key, weights):
    """Reference: d/dx sum(weights * x[key]) by np.add.at."""
    out = np.zeros(shape)
    np.add.at(out, key, weights)
    return out


KEYS = [  # (shape, key): every kind of key NumPy accepts
    ((5, 4), 2),
    ((5, 4), -1),
    ((5, 4), slice(1, 4)),
    ((5, 4), (slice(None, None, -2), 1)),
    ((5, 4), np.array([0, 3, 3, 1])),            # repeated rows
    ((5, 4), (slice(None), np.array([2, 2, 0]))),  # repeated columns
    ((5, 4), (np.array([1, 1]), np.array([2, 2]))),  # repeated elements
    ((5, 4), np.array([True, False, True, True, False])),
    ((5, 4), RNG.standard_normal((5, 4)) > 0),   # full boolean mask
    ((3, 4, 5), (Ellipsis, np.array([4, 0, 4]))),
    ((3, 4, 5), (None, slice(None), 1)),
    ((3, 4, 5), (np.array([[0, 2], [2, 2]]), slice(1, 3))),
    ((3, 4, 5), (slice(None), np.array([[1, 3], [3, 3]]))),  # 2-D index array
    ((3, 4, 5), (1, Ellipsis, None)),
    ((6,), np.array([], dtype=int)),              # empty gather
    ((), Ellipsis),                               # 0-d
    ((0, 3), slice(None)),                        # empty array
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,key", KEYS)
def test_getitem_matches_finite_differences(shape, key, dtype):
    check_grads(lambda x: x[key] * 1.5, (_x(shape, dtype),))


@pytest.mark.parametrize("shape,key", KEYS)
def test_getitem_gradient_equals_dense_scatter(shape, key):
    x = _x(shape)
    w = RNG.standard_normal(np.shape(x[key]))
    g = tp.grad(lambda x: np.sum(x[key] * w), sparse=True)(x)
    assert np.allclose(np.asarray(g), _dense_grad_of_sum(shape, key, w))


@pytest.mark.parametrize("key,axis", [
    (np.array([3, 0, 3]), 0), ((slice(None), np.array([1, 1])), 1),
    ((np.array([2]), slice(None)), 0), ((Ellipsis, np.array([0, 2])), 1),
    (4, 0), ((slice(None), -1), 1), (np.array([True, False, True, False, False]), 0)])
def test_gather_along_one_axis_gives_axis_sparse(key, axis):
    W = _x((5, 3))
    g = tp.grad(lambda W: np.sum(np.sin(W[key])), sparse=True)(W)
    assert isinstance(g, tp.AxisSparse) and g.axis == axis and g.shape == W.shape
    ref = _dense_grad_of_sum(W.shape, key, np.cos(W[key]))
    assert np.allclose(g.todense(), ref)


def test_general_keys_give_dense_gradients():
    W = _x((5, 3))
    for key in [(np.array([0, 1]), np.array([1, 2])), slice(1, 3), W > 0]:
        assert type(tp.grad(lambda W: np.sum(W[key]))(W)) is np.ndarray


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, None])
@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_take_every_axis_and_mode(axis, mode, dtype):
    x = _x((4, 3, 5), dtype)
    idx = np.array([0, 2, 2, -1]) if mode == "raise" else np.array([0, 7, 7, -6])
    check_grads(lambda x: np.take(x, idx, axis=axis, mode=mode) ** 2, (x,))
    g = tp.grad(lambda x: np.sum(np.take(x, idx, axis=axis, mode=mode)), sparse=True)(x)
    if axis is not None:
        assert isinstance(g, tp.AxisSparse) and g.axis == axis % 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_take_along_axis_gather_and_general(dtype):
    x = _x((4, 6), dtype)
    rows = np.array([[3], [0], [3]])              # one-axis gather: sparse
    check_grads(lambda x: np.take_along_axis(x, rows, axis=0) * 2.0, (x,))
    assert isinstance(tp.grad(lambda x: np.sum(np.take_along_axis(x, rows, 0)), sparse=True)(x),
                      tp.AxisSparse)
    per_row = np.array([[5], [1], [1], [0]])      # a different column per row
    check_grads(lambda x: np.take_along_axis(x, per_row, axis=1) ** 2, (x,))
    check_grads(lambda x: np.take_along_axis(x.ravel(), np.array([3, 3, 0]), None), (x,))


def test_indices_computed_from_values_in_the_forward_pass():
    W = _x((8, 3))
    x = _x(3)

    def loss(W):
        S = np.argsort(-(W @ x))[:3]          # indices depend on the activations
        return np.sum(np.tanh(W[S] @ x))
    check_grads(loss, (W,))
    assert isinstance(tp.grad(loss, sparse=True)(W), tp.AxisSparse)


def test_nested_gather_same_axis_stays_sparse():
    W = _x((10, 2))
    S, T = np.array([1, 4, 4, 9]), np.array([3, 0, 0])
    g = tp.grad(lambda W: np.sum(W[S][T] ** 2), sparse=True)(W)
    assert isinstance(g, tp.AxisSparse)
    check_grads(lambda W: W[S][T] ** 2, (W,))
    check_grads(lambda W: W[S][:, np.array([1, 1])] * 3.0, (W,))


def test_second_derivatives_through_gathers():
    W = _x((6, 3))
    S = np.array([0, 5, 5])
    check_grads(lambda W: np.sum(W[S] ** 3), (W,), order=2)
    H = tp.hessian(lambda w: np.sum(w[np.array([1, 1, 2])] ** 2))(_x(4))
    assert np.allclose(H, np.diag([0.0, 4.0, 2.0, 0.0]))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 12), m=st.integers(0, 4), k=st.integers(0, 10),
       axis=st.integers(0, 1), seed=st.integers(0, 2**16))
def test_random_gathers_against_dense_path(n, m, k, axis, seed):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, m) if axis == 0 else (m, n))
    S = rng.integers(-n, n, size=k)
    w = rng.standard_normal(np.take(W, S, axis=axis).shape)
    f = lambda W: np.sum(np.take(W, S, axis=axis) * w)
    g_sparse, g_dense = tp.grad(f, sparse=True)(W), tp.grad(f, sparse=False)(W)
    assert type(g_dense) is np.ndarray
    assert np.allclose(np.asarray(g_sparse), g_dense)
    key = (slice(None),) * axis + (S,)
    assert np.allclose(g_dense, _dense_grad_of_sum(W.shape, key, w))


def test_clear_errors():
    x = _x((3, 4))
    with pytest.raises(TypeError, match="np.take needs integer indices"):
        tp.grad(lambda x: np.sum(np.take(x, np.array([0.5]))))(x)
    with pytest.raises(TypeError, match="out="):
        tp.grad(lambda x: np.sum(np.take(x, [0], out=np.empty(1))))(x)
    with pytest.raises(ValueError, match="mode='bogus'"):
        tp.grad(lambda x: np.sum(np.take(x, [0], mode="bogus")))(x)
    with pytest.raises(ValueError, match="take_along_axis needs indices with 2"):
        tp.grad(lambda x: np.sum(np.take_along_axis(x, np.array([0]), 0)))(x)
    with pytest.raises(IndexError):
        tp.grad(lambda x: np.sum(x[np.array([7])]))(x)


def test_jacobian_of_a_gather_stacks_sparse_rows():
    W = np.arange(6.0).reshape(3, 2)
    J = tp.jacobian(lambda W: W[np.array([2, 0])])(W)
    ref = np.zeros((2, 2, 3, 2))
    ref[0, :, 2, :] = ref[1, :, 0, :] = np.eye(2)
    assert np.allclose(J, ref)


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {operator.getitem, np.take, np.take_along_axis}
