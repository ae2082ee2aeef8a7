"""Round-11 user programs: defects found by differentiating plain NumPy
programs, each test failing before its fix.

* ``x.T.ravel('K')`` / ``flatten('A')`` read the array's memory layout;
  tapestry read them as 'C' and gave the transposed array's elements in the
  wrong order (a wrong value and gradient).  Traced values do not follow
  NumPy's layouts (np.asfortranarray, copies and rule results keep their
  own), so these orders are refused by name where they could differ.
"""
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads


# --- ravel / flatten in memory order -------------------------------------------
W6 = np.arange(6.0)
X23 = np.arange(1.0, 7.0).reshape(2, 3)

LAYOUT_ORDER = {
    "ravel_K_of_T": lambda x: np.sum(np.ravel((x * 1.0).T, order="K") * W6),
    "method_ravel_K_of_T": lambda x: np.sum((x * 1.0).T.ravel("K") * W6),
    "flatten_A_of_T": lambda x: np.sum((x * 1.0).T.flatten("A") * W6),
    "ravel_K_of_F_copy": lambda x: np.sum(np.copy(x * 1.0, order="F").ravel("K") * W6),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_ORDER))
@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_memory_order_ravel_is_refused_not_wrong(name, transform):
    # vmap without grad too: its per-item NumPy fallback read the items'
    # layouts, and np.copy(order="F") gave 70 where NumPy gives 65
    f = LAYOUT_ORDER[name]
    with pytest.raises(TypeError, match="tapestry.*order="):
        if transform == "grad":
            tp.grad(f)(X23)
        elif transform == "jvp":
            tp.jvp(f, (X23,), (np.ones_like(X23),))
        else:
            tp.vmap(f)(np.stack([X23, X23 + 1]))


def test_memory_order_ravel_under_jit_is_numpys():
    # jit runs NumPy's own ravel on the real arrays: no refusal needed there
    f = LAYOUT_ORDER["ravel_K_of_T"]
    assert np.isclose(tp.jit(f)(X23), f(X23))


@pytest.mark.parametrize("order", ["K", "A"])
def test_memory_order_of_a_column_is_row_order(order):
    # at most one axis longer than 1: every order gives the same elements
    def f(x):
        return np.sum(np.ravel(x[:, :1] * x[:, 1:2], order=order) * np.array([1.0, 2.0]))
    check_grads(f, (X23.copy(),))
    assert np.isclose(tp.value_and_grad(f)(X23)[0], f(X23))
