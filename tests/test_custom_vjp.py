"""custom_vjp: keyword arguments, nondiff_argnums (JAX's semantics) and the
errors a wrong backward rule gets."""
import functools

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

rng = np.random.default_rng(11)


@tp.custom_vjp
def scaled_softplus(x, scale=2.0):
    return scale * np.logaddexp(0.0, x)


def _ssp_fwd(x, scale):
    return scaled_softplus(x, scale), (x, scale)


def _ssp_bwd(res, g):
    x, scale = res
    return g * scale / (1.0 + np.exp(-x)), np.sum(g * np.logaddexp(0.0, x))


scaled_softplus.defvjp(_ssp_fwd, _ssp_bwd)


def test_keyword_arguments_bind_to_positions():
    x = rng.standard_normal(5)
    check_grads(lambda x, s: np.sum(scaled_softplus(x, scale=s)), (x, 1.5), order=2)
    check_grads(lambda x, s: np.sum(scaled_softplus(scale=s, x=x)), (x, 1.5))
    # the default is filled in when a keyword is given
    g = tp.grad(lambda x: np.sum(scaled_softplus(x=x)))(x)
    np.testing.assert_allclose(g, 2.0 / (1.0 + np.exp(-x)))


def test_keyword_only_arguments_are_refused():
    @tp.custom_vjp
    def f(x, *, k):
        return x * k
    f.defvjp(lambda x, k: (x * k, k), lambda k, g: (g * k,))
    with pytest.raises(TypeError, match="keyword-only"):
        tp.grad(lambda x: np.sum(f(x, k=2.0)))(np.ones(2))


@functools.partial(tp.custom_vjp, nondiff_argnums=(0,))
def apply_act(act, x):
    return act(x)


def _act_fwd(act, x):
    return act(x), x


def _act_bwd(act, x, g):  # nondiff args first, then residuals and cotangent
    return (g * tp.grad(lambda t: np.sum(act(t)))(x),)


apply_act.defvjp(_act_fwd, _act_bwd)


def test_nondiff_argnums_pass_python_objects_to_bwd():
    x = rng.standard_normal(4)
    g = tp.grad(lambda x: np.sum(apply_act(np.tanh, x) * 3.0))(x)
    np.testing.assert_allclose(g, 3.0 * (1 - np.tanh(x) ** 2), rtol=1e-12)
    assert np.allclose(apply_act(np.sin, x), np.sin(x))  # untraced: plain call


def test_nondiff_argnums_decorator_form_and_keyword():
    @tp.custom_vjp(nondiff_argnums=(1,))
    def power(x, n):
        return x ** n
    power.defvjp(lambda x, n: (x ** n, x), lambda n, x, g: (g * n * x ** (n - 1),))
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(power(x, n=3)))(x), 3 * x ** 2)


def test_differentiated_nondiff_argument_is_an_error():
    @tp.custom_vjp(nondiff_argnums=(1,))
    def mul(x, y):
        return x * y
    mul.defvjp(lambda x, y: (x * y, None), lambda y, r, g: (g * y,))
    with pytest.raises(TypeError, match="nondiff_argnums but is being differentiated"):
        tp.grad(lambda y: np.sum(mul(np.ones(2), y)))(np.ones(2))


def _rule_returning(ct):
    @tp.custom_vjp
    def widen(x, y):
        return x * np.sum(y)
    widen.defvjp(lambda x, y: (widen(x, y), None), lambda r, g: ct)
    return widen


def test_wrong_shape_names_function_argument_and_both_shapes():
    f = _rule_returning((np.ones(3), np.ones(2)))
    with pytest.raises(ValueError, match=r"widen.*shape \(3,\).*argument 0 \('x'\).*\(2,\)"):
        tp.grad(lambda x: np.sum(f(x, np.ones(2))))(np.ones(2))


def test_wrong_structure_and_count_are_errors():
    f = _rule_returning(([np.ones(2), np.ones(2)], None))
    with pytest.raises(ValueError, match=r"widen.*structure.*argument 0"):
        tp.grad(lambda x: np.sum(f(x, np.ones(2))))(np.ones(2))
    f = _rule_returning((np.ones(2),))
    with pytest.raises(ValueError, match="returned 1 cotangents for 2"):
        tp.grad(lambda x: np.sum(f(x, np.ones(2))))(np.ones(2))


def test_pytree_argument_with_keyword():
    @tp.custom_vjp
    def dot(p, v=None):
        return np.sum(p["w"] * v) + p["b"]
    dot.defvjp(lambda p, v: (dot(p, v), (p, v)),
               lambda r, g: ({"w": g * r[1], "b": g}, g * r[0]["w"]))
    p = {"w": rng.standard_normal(3), "b": np.array(0.5)}
    v = rng.standard_normal(3)
    gp, gv = tp.grad(lambda p, v: dot(p, v=v), argnums=(0, 1))(p, v)
    np.testing.assert_allclose(gp["w"], v)
    np.testing.assert_allclose(gp["b"], 1.0)
    np.testing.assert_allclose(gv, p["w"])


def test_forward_rule_must_return_a_pair():
    @tp.custom_vjp
    def f(x):
        return x
    f.defvjp(lambda x: x, lambda r, g: (g,))
    with pytest.raises(TypeError, match=r"forward rule of f must return a pair"):
        tp.grad(lambda x: np.sum(f(x)))(np.ones(2))
    with pytest.raises(TypeError, match="two functions"):
        f.defvjp(None, None)


def test_custom_vjp_survives_pickling_by_value():
    """cloudpickle ships a custom_vjp defined in __main__ (or locally) by
    value to process and Dask workers; unpickling must not go through the
    decorator form of ``__new__``."""
    cloudpickle = pytest.importorskip("cloudpickle")
    import pickle

    @tp.custom_vjp
    def f(x):
        return np.sin(x)
    f.defvjp(lambda x: (np.sin(x), x), lambda x, g: (2.0 * g * np.cos(x),))
    g = pickle.loads(cloudpickle.dumps(f))
    x = np.linspace(-1.0, 1.0, 3)
    assert np.allclose(tp.grad(lambda x: np.sum(g(x)))(x), 2.0 * np.cos(x))
