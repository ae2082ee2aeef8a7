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
