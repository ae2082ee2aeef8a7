"""np.apply_along_axis and np.apply_over_axes: NumPy's loops over a user's
function, differentiated as the loop of slices they are (they were refused:
NumPy's own versions write the results into a preallocated array)."""
import numpy as np
import pytest

import tapestry as tp
from sweep import check_all, rand

SWEPT = [np.apply_along_axis, np.apply_over_axes]

ALONG = {
    "sum of squares, axis 0": (lambda v: np.sum(v ** 2), 0, (3, 4)),
    "scaled slice, axis 1": (lambda v: v * np.sum(v), 1, (3, 4)),
    "outer product (result of 2 axes)": (lambda v: np.outer(v, v), 1, (3, 4)),
    "matrix result in the middle": (lambda v: np.outer(v, v[:2]), 0, (3, 4, 2)),
    "cumsum, axis -1": (np.cumsum, -1, (2, 3, 4)),
    "order statistic": (lambda v: np.sort(v)[1], 0, (5,)),
    "empty slices": (lambda v: np.sum(v) + 1.0, 1, (3, 0)),
}


@pytest.mark.parametrize("name", list(ALONG))
def test_apply_along_axis_gradients(name):
    fn, axis, shape = ALONG[name]
    check_all(lambda x: np.sin(np.apply_along_axis(fn, axis, x)), rand(shape, "normal", 3))


@pytest.mark.parametrize("name", list(ALONG))
def test_apply_along_axis_gives_numpys_values(name):
    fn, axis, shape = ALONG[name]
    x = rand(shape, "normal", 4)
    want = np.apply_along_axis(fn, axis, x)
    got = tp.value_and_grad(lambda x: (np.sum(np.apply_along_axis(fn, axis, x)),
                                       np.apply_along_axis(fn, axis, x)), has_aux=True)(x)[0][1]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_apply_along_axis_passes_extra_arguments_and_second_order():
    x = rand((2, 3), "normal", 5)
    check_all(lambda x, a: np.sum(np.apply_along_axis(lambda v, s: np.tanh(v * s), 1, x, a) ** 2),
              x, 2.0, order=2)


def test_apply_along_axis_errors_are_numpys():
    with pytest.raises(ValueError, match="iteration dimensions are 0"):
        tp.grad(lambda x: np.sum(np.apply_along_axis(np.sum, 1, x)))(np.ones((0, 3)))
    with pytest.raises(np.exceptions.AxisError):
        tp.grad(lambda x: np.sum(np.apply_along_axis(np.sum, 2, x)))(np.ones((2, 3)))


@pytest.mark.parametrize("axes", [[0, 2], -1, (1,)])
@pytest.mark.parametrize("fn", [np.sum, np.mean, np.max])
def test_apply_over_axes(fn, axes):
    x = rand((2, 3, 4), "normal", 6)
    want = np.apply_over_axes(fn, x, axes)
    got = tp.value_and_grad(lambda x: (np.sum(np.apply_over_axes(fn, x, axes)),
                                       np.apply_over_axes(fn, x, axes)), has_aux=True)(x)[0][1]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-15)
    check_all(lambda x: np.sin(np.apply_over_axes(fn, x, axes)), x)
