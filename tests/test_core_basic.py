import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads


def test_grad_of_plain_numpy_code():
    rng = np.random.default_rng(0)
    x, W = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    check_grads(lambda x, W: np.sum(np.tanh(x @ W + 1.0) * 2.0), (x, W))


def test_nested_grad_gives_higher_derivatives():
    d3 = tp.grad(tp.grad(tp.grad(lambda x: x ** 4)))
    assert d3(2.0) == pytest.approx(48.0)
    assert tp.grad(tp.grad(lambda x: np.sin(x) * x))(1.0) == pytest.approx(
        -np.sin(1.0) + 2 * np.cos(1.0))


def test_a_primitive_with_an_opaque_forward_nests():
    """A forward NumPy cannot dispatch (np.asarray would refuse a traced
    value) still differentiates at every order: the primitive re-enters
    itself at each enclosing level, and its forward sees plain values only."""
    from tapestry.core.primitive import Primitive
    seen = []

    def cube_forward(x):
        seen.append(type(x))
        return np.asarray(x) ** 3
    cube = Primitive(cube_forward, "cube", vjps=(lambda g, ans, x: g * 3 * x ** 2,))
    assert tp.grad(tp.grad(lambda x: cube(x)))(2.0) == 12.0
    assert tp.grad(tp.grad(tp.grad(lambda x: cube(x))))(2.0) == 6.0
    assert tp.hessian(lambda x: np.sum(cube(x)))(np.array([1.0, 2.0]))[1, 1] == 12.0
    assert all(t in (float, np.ndarray, np.float64) for t in seen), seen
