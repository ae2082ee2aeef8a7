"""``np.zeros_like`` / ``ones_like`` / ``empty_like`` of a traced array: a
traced constant (no derivative), so the NumPy idiom of filling it --
``dy = np.zeros_like(y); dy[0] = y[1]`` in an ODE's right-hand side --
is item assignment that differentiates (it was refused: the plain array
they returned cannot hold a traced value)."""
import numpy as np
import pytest

import tapestry as tp
from sweep import check_all, rand
from tapestry.testing import check_grads

SWEPT = [np.zeros_like, np.ones_like, np.empty_like]


def oscillator(y, k):
    dy = np.zeros_like(y)
    dy[0] = y[1]
    dy[1] = -k * y[0] - 0.1 * y[1] ** 2
    return dy


def euler(y0, k, steps=20):
    y = y0
    for _ in range(steps):
        y = y + 0.05 * oscillator(y, k)
    return y


def test_an_ode_right_hand_side_filled_in_place():
    y0 = np.array([1.0, 0.5])
    check_all(lambda y0, k: np.sum(euler(y0, k) ** 2), y0, np.float64(2.0), order=2)
    _, t = tp.jvp(lambda y: np.sum(euler(y, 2.0) ** 2), (y0,), (np.ones(2),))
    g = tp.grad(lambda y: np.sum(euler(y, 2.0) ** 2))(y0)
    assert np.isclose(t, np.sum(g))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ones_like_and_empty_like_written_in_part_and_whole(dtype):
    def f(x):
        out = np.ones_like(x)
        out[1:] = x[:-1] * 3.0
        e = np.empty_like(x)
        e[:] = out * x
        return e
    x = rand((5,), "normal", 1).astype(dtype)
    check_all(lambda x: np.sum(np.sin(f(x))), x)
    assert tp.vjp(f, x)[0].dtype == dtype


@pytest.mark.parametrize("which", SWEPT)
def test_the_created_array_has_no_derivative(which):
    x = rand((3, 2), "normal", 2)
    check_all(lambda x: np.sum(np.where(True, which(x), 0.0) * 0.0 + x ** 2), x)
    v, pullback = tp.vjp(lambda x: which(x) + 0.0 * x, x)
    assert type(v) is np.ndarray and v.shape == x.shape
    np.testing.assert_array_equal(pullback(np.ones_like(x))[0], np.zeros_like(x))


def test_integer_and_bool_results_stay_plain_constants():
    def f(x):
        idx = np.zeros_like(x, dtype=np.int64)
        mask = np.ones_like(x, dtype=bool)
        assert type(idx) is np.ndarray and type(mask) is np.ndarray
        return np.sum(x[idx] * mask)
    check_grads(f, (np.arange(1.0, 4.0),))


def test_shape_and_dtype_arguments():
    def f(x):
        out = np.zeros_like(x, shape=(2, 3), dtype=np.float32)
        out[0] = x
        return out
    x = np.arange(1.0, 4.0)
    v, pullback = tp.vjp(f, x)
    assert v.shape == (2, 3) and v.dtype == np.float32
    np.testing.assert_array_equal(pullback(np.ones((2, 3), np.float32))[0], np.ones(3))
    np.testing.assert_allclose(tp.vmap(lambda x: f(x)[0])(np.stack([x, 2 * x])),
                               np.stack([x, 2 * x]))


def test_under_jit_and_vmap_of_grad():
    loss = lambda y0, k: np.sum(euler(y0, k) ** 2)  # noqa: E731
    g = tp.grad(loss)
    jg = tp.jit(g)
    for s in (1.0, 1.1, 0.7):
        y0 = np.array([1.0, 0.5]) * s
        np.testing.assert_allclose(jg(y0, 2.0), g(y0, 2.0), rtol=1e-14)
    ys = np.array([[1.0, 0.5], [0.3, -0.2]])
    np.testing.assert_allclose(tp.vmap(g, in_axes=(0, None))(ys, 2.0),
                               np.stack([g(y, 2.0) for y in ys]), rtol=1e-14)


def test_full_like_of_a_traced_array_is_traced_too():
    def f(x):
        out = np.full_like(x, 0.5)
        out[::2] = np.sin(x[::2])
        return np.sum(out * x)
    x = rand((5,), "normal", 9)
    check_grads(f, (x,), order=2)
    np.testing.assert_allclose(tp.jit(tp.grad(f))(x), tp.grad(f)(x), rtol=1e-14)
    assert type(np.full_like(x, 0.5)) is np.ndarray
