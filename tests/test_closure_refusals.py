"""The classes of the custom-rule defects found elsewhere: user code that
reads a value being differentiated from a closure (optimize objectives;
parallel_map/parallel_sum's f, see tests/test_no_var_leak.py) is refused
by name, and user VJP code outside custom_vjp (tapestry.autograd.extend)
gets dense cotangents."""
import numpy as onp
import pytest

import tapestry as tp
import tapestry.autograd as ag
from tapestry.autograd.extend import defvjp, primitive

pytest.importorskip("scipy")
from tapestry.optimize import least_squares, minimize  # noqa: E402


@pytest.mark.parametrize("how", ["closure", "args", "least_squares", "nelder-mead"])
def test_objective_over_a_differentiated_value_is_refused_by_name(how):
    def outer(a):
        if how == "closure":
            sol, _ = minimize(lambda x: onp.sum((x - a) ** 2), onp.zeros(2))
        elif how == "args":
            sol, _ = minimize(lambda x, a: onp.sum((x - a) ** 2), onp.zeros(2), args=(a,))
        elif how == "nelder-mead":
            sol, _ = minimize(lambda x: onp.sum((x - a) ** 2), onp.zeros(2),
                              method="Nelder-Mead")
        else:
            sol, _ = least_squares(lambda x: x - a, onp.zeros(2))
        return onp.sum(sol)
    with pytest.raises(TypeError, match=r"tapestry.optimize.\w+: the objective depends "
                                        r"on a value that is being differentiated"):
        tp.grad(outer)(onp.ones(2))
    onp.testing.assert_allclose(outer(onp.ones(2)), 2.0, atol=1e-4)  # untraced: fine


def test_extend_vjp_makers_get_dense_cotangents():
    # an indexed output reaches the rule as a sparse cotangent inside the
    # engine; autograd's makers may hand g to code that needs an ndarray
    seen = []

    @primitive
    def twice(x):
        return x * 2.0
    defvjp(twice, lambda ans, x: lambda g: seen.append(type(g)) or g * 2.0)
    g = ag.grad(lambda x: twice(x)[0])(onp.ones(4))
    assert seen == [onp.ndarray]
    onp.testing.assert_array_equal(g, [2.0, 0.0, 0.0, 0.0])
