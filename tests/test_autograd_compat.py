"""tapestry.autograd: HIPS autograd's API, every derivative from tapestry.

Results are compared with finite differences (tapestry.testing.check_grads)
or with tapestry's own operators, never with hard-coded numbers."""
import numpy as onp
import pytest

import tapestry as tp
import tapestry.autograd as ag
import tapestry.autograd.numpy as np
import tapestry.autograd.numpy.random as npr
import tapestry.numpy
from tapestry.autograd.extend import defvjp, defvjp_argnum, primitive
from tapestry.autograd.misc import flatten
from tapestry.autograd.misc.optimizers import adam, rmsprop, sgd
from tapestry.autograd.test_util import check_grads as ag_check_grads
from tapestry.testing import check_grads

RNG = onp.random.default_rng(0)


def f3(x, y):
    return np.sum(np.sin(x) * y ** 2) + np.prod(np.tanh(y))


def test_numpy_alias_is_the_same_module():
    assert np is tapestry.numpy and npr is tapestry.numpy.random
    assert np.linalg is tapestry.numpy.linalg


def test_grad_argnum_and_tuple_match_tapestry():
    x, y = RNG.standard_normal(3), RNG.standard_normal(3)
    assert onp.allclose(ag.grad(f3)(x, y), tp.grad(f3)(x, y))
    assert onp.allclose(ag.grad(f3, 1)(x, y), tp.grad(f3, 1)(x, y))
    gx, gy = ag.grad(f3, (0, 1))(x, y)
    tx, ty = tp.grad(f3, (0, 1))(x, y)
    assert onp.allclose(gx, tx) and onp.allclose(gy, ty)


def test_grad_is_dense_and_accepts_size_one_outputs():
    g = ag.grad(lambda w: np.sum(w[0] * w[1]))(onp.ones(4))
    assert type(g) is onp.ndarray
    w = RNG.standard_normal((3, 1))
    x = RNG.standard_normal((1, 3))
    assert onp.allclose(ag.grad(lambda w: x @ w)(w), x.T)


def test_grad_refuses_non_scalar_and_non_float_outputs():
    with pytest.raises(TypeError, match="scalar"):
        ag.grad(np.sin)(onp.ones(3))
    with pytest.raises(TypeError):
        ag.grad(lambda x: np.allclose(x, x))(onp.ones(3))
    with pytest.raises(TypeError):
        ag.grad(lambda x: x * (1.0 + 0.2j))(1.0)


def test_value_and_grad_and_grad_and_aux():
    x = RNG.standard_normal(4)
    v, g = ag.value_and_grad(lambda x: np.sum(x ** 3))(x)
    assert v == onp.sum(x ** 3) and onp.allclose(g, 3 * x ** 2)
    g, aux = ag.grad_and_aux(lambda x: (np.sum(x ** 2), x * 2))(x)
    assert onp.allclose(g, 2 * x) and onp.allclose(aux, 2 * x)
    assert not isinstance(aux, tp.Var)


def test_elementwise_grad_jacobian_hessian():
    x = RNG.standard_normal(4)
    assert onp.allclose(ag.elementwise_grad(np.tanh)(x), 1 - onp.tanh(x) ** 2)
    f = lambda x: np.sin(x) * np.sum(x ** 2)  # noqa: E731
    assert onp.allclose(ag.jacobian(f)(x), tp.jacobian(f)(x))
    h = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    assert onp.allclose(ag.hessian(h)(x), tp.hessian(h)(x))
    assert ag.jacobian(f)(x).shape == (4, 4)


def test_make_vjp_order_and_array_like_cotangents():
    x = RNG.standard_normal(3)
    vjp, ans = ag.make_vjp(lambda x: np.sum(x ** 2))(x)
    assert onp.allclose(ans, onp.sum(x ** 2))
    assert onp.allclose(vjp(1.0), 2 * x)  # a Python float cotangent
    vjp, _ = ag.make_vjp(np.sin)(x)
    assert onp.allclose(vjp([1.0, 0.0, 2.0]), onp.cos(x) * [1, 0, 2])  # a list


def test_hessian_products_and_ggnvp_match_the_full_matrices():
    x, v = RNG.standard_normal(4), RNG.standard_normal(4)
    h = lambda x: np.sum(np.sin(x) * x) + np.sum(x) ** 3  # noqa: E731
    H = tp.hessian(h)(x)
    assert onp.allclose(ag.hessian_tensor_product(h)(x, v), H @ v)
    hvp, g = ag.make_hvp(h)(x)
    assert onp.allclose(hvp(v), H @ v) and onp.allclose(g, tp.grad(h)(x))
    f = lambda x: np.roll(np.sin(x), 1)  # noqa: E731
    J = tp.jacobian(f)(x)
    assert onp.allclose(ag.tensor_jacobian_product(f)(x, v), v @ J)
    A = RNG.standard_normal((3, 4))
    lin = lambda x: A @ np.tanh(x)  # noqa: E731
    Jl = tp.jacobian(lin)(x)
    assert onp.allclose(ag.make_ggnvp(lin)(x)(v), Jl.T @ (Jl @ v))


def test_checkpoint_gives_the_same_gradient():
    f = lambda x: np.sum(np.exp(np.sin(x)) * x)  # noqa: E731
    x = RNG.standard_normal(5)
    assert onp.allclose(ag.grad(ag.checkpoint(f))(x), ag.grad(f)(x))


@pytest.mark.parametrize("name", ["make_jvp", "deriv"])
def test_forward_mode_is_refused_pointing_to_jvp(name):
    with pytest.raises(NotImplementedError, match="jvp"):
        getattr(ag, name)(np.sin)(1.0)


def test_primitive_defvjp_first_and_second_order():
    @primitive
    def cube(x, k):
        return k * x ** 3

    defvjp(cube, lambda ans, x, k: lambda g: g * 3 * k * x ** 2,
           lambda ans, x, k: lambda g: np.sum(g * x ** 3))
    x = RNG.standard_normal(3)
    check_grads(lambda x, k: cube(x, k), (x, 2.0), order=2)
    assert onp.allclose(ag.grad(lambda x: np.sum(cube(x, 2.0)))(x), 6 * x ** 2)


def test_primitive_without_rule_and_none_rule():
    @primitive
    def mul(x, y):
        return x * y

    with pytest.raises(NotImplementedError, match="mul"):
        ag.grad(mul)(1.0, 2.0)
    defvjp(mul, None, lambda ans, x, y: lambda g: g * x)
    assert ag.grad(mul, 0)(1.0, 2.0) == 0.0  # None declares a zero derivative
    assert ag.grad(mul, 1)(3.0, 2.0) == 3.0


def test_defvjp_argnum():
    @primitive
    def add3(a, b, c):
        return a + 2 * b + 3 * c

    defvjp_argnum(add3, lambda i, ans, args, kwargs: lambda g: g * (i + 1))
    assert ag.grad(add3, (0, 1, 2))(1.0, 1.0, 1.0) == (1.0, 2.0, 3.0)


def test_check_grads_catches_a_wrong_rule():
    @primitive
    def double(x):
        return 2.0 * x

    defvjp(double, lambda ans, x: lambda g: 2.001 * g)
    with pytest.raises(AssertionError, match=r"\(VJP\) check of double failed"):
        ag_check_grads(double, modes=["rev"])(1.0)


def test_flatten_round_trip_and_gradient_through_unflatten():
    tree = {"w": RNG.standard_normal((2, 3)), "b": [RNG.standard_normal(3), 1.5]}
    vec, unflatten = flatten(tree)
    assert vec.shape == (10,)
    back = unflatten(vec)
    assert onp.array_equal(back["w"], tree["w"]) and back["b"][1] == 1.5
    loss = lambda v: np.sum(unflatten(v)["w"] ** 2) + unflatten(v)["b"][1]  # noqa: E731
    check_grads(loss, (vec,), order=2)


@pytest.mark.parametrize("opt, kwargs", [(adam, {"step_size": 0.1}),
                                         (sgd, {"step_size": 0.1}),
                                         (rmsprop, {"step_size": 0.05})])
def test_optimizers_minimize_a_quadratic_with_callbacks(opt, kwargs):
    target = {"a": onp.array([1.0, -2.0]), "b": 0.5}

    def loss(p, i):
        return np.sum((p["a"] - target["a"]) ** 2) + (p["b"] - target["b"]) ** 2

    seen = []

    def callback(params, it, g):
        seen.append((it, set(params), set(g)))
    p0 = {"a": onp.zeros(2), "b": 0.0}
    p = opt(ag.grad(loss), p0, callback=callback, num_iters=300, **kwargs)
    assert loss(p, 0) < 1e-2 * loss(p0, 0)
    assert [s[0] for s in seen] == list(range(300))
    assert seen[0][1] == {"a", "b"} == seen[0][2]


def test_scipy_stats_match_scipy_and_differentiate():
    st = pytest.importorskip("scipy.stats")
    from tapestry.autograd.scipy import stats
    x = RNG.standard_normal(4)
    loc, scale = RNG.standard_normal(4), RNG.uniform(0.5, 2.0, 4)
    assert onp.allclose(stats.norm.logpdf(x, loc, scale), st.norm.logpdf(x, loc, scale))
    assert onp.allclose(stats.t.cdf(x, 3.0, loc, scale), st.t.cdf(x, 3.0, loc, scale))
    check_grads(stats.norm.logpdf, (x, loc, scale), order=2)
    check_grads(stats.norm.logcdf, (x, loc, scale))
    check_grads(lambda x, l, s: stats.t.cdf(x, 3.0, l, s), (x, loc, scale), order=2)
    check_grads(lambda x: stats.gamma.cdf(x, 2.5), (x ** 2 + 0.5,))
    cov = onp.eye(3) + 0.1
    m, y = RNG.standard_normal(3), RNG.standard_normal((2, 3))
    assert onp.allclose(stats.multivariate_normal.logpdf(y, m, cov),
                        st.multivariate_normal.logpdf(y, m, cov))
    check_grads(lambda y, m: stats.multivariate_normal.logpdf(y, m, cov), (y, m))


def test_scipy_cdf_shape_parameter_is_refused_not_zero():
    pytest.importorskip("scipy")
    from tapestry.autograd.scipy import stats
    # gamma.cdf(x, a) is scipy.special.gammainc(a, x): the refusal names it
    with pytest.raises(NotImplementedError, match=r"gammainc is not differentiable in argument 0"):
        ag.grad(lambda a: np.sum(stats.gamma.cdf(1.5, a)))(2.0)
    for dist, args in ((stats.t, (3.0,)), (stats.beta, (2.0, 3.0)), (stats.chi2, (3.0,)),
                       (stats.gamma, (2.0,))):  # in x: the density, at orders 1 and 2
        check_grads(lambda x: dist.cdf(x, *args), (np.array([0.2, 0.7]),), order=2)


def test_scipy_special_logsumexp_and_builtins():
    pytest.importorskip("scipy")
    from tapestry.autograd.scipy.special import logsumexp
    x = RNG.standard_normal(5)
    check_grads(logsumexp, (x,), order=2)

    def f(x):
        assert ag.isinstance(x, onp.ndarray) and ag.type(x) is onp.ndarray
        return np.sum(x)
    ag.grad(f)(x)


def test_wrapped_names():
    def foo(x):
        return x
    assert ag.grad(foo, 1).__name__ == "grad_of_foo_wrt_argnum_1"


def test_scipy_special_multigammaln_matches_scipy():
    sp = pytest.importorskip("scipy.special")
    from tapestry.autograd.scipy.special import multigammaln
    a = onp.array([3.5, 4.25])
    assert onp.allclose(multigammaln(a, 3), [sp.multigammaln(v, 3) for v in a])
    check_grads(lambda a: multigammaln(a, 3), (a,), order=2)


def test_autograd_numpy_submodules_are_tapestrys_in_a_fresh_process():
    import subprocess
    import sys
    code = ("import sys, tapestry.autograd.numpy.linalg as la, tapestry.numpy as tnp\n"
            "import tapestry.autograd.numpy.random as npr, tapestry.autograd.numpy.fft as ft\n"
            "assert la is tnp.linalg and npr is tnp.random and ft is tnp.fft\n"
            "assert not [m for m in sys.modules if m.startswith('tapestry.autograd.numpy._')]\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_fixed_point_gradients_are_implicit():
    from tapestry.autograd.misc.fixed_points import fixed_point

    def sqrt(a):
        return fixed_point(lambda a: lambda x: 0.5 * (x + a / x), a, 1.0,
                           lambda x, y: np.abs(x - y), 1e-12)
    a = 2.0
    assert abs(sqrt(a) - onp.sqrt(a)) < 1e-10
    assert abs(ag.grad(sqrt)(a) - 0.5 / onp.sqrt(a)) < 1e-8
    assert abs(ag.grad(ag.grad(sqrt))(a) + 0.25 * a ** -1.5) < 1e-6


def test_odeint_adjoint_gradients():
    pytest.importorskip("scipy")
    from tapestry.autograd.scipy.integrate import odeint

    def dynamics(y, t, a, b):
        return -np.sqrt(t) - y + a - np.mean((y + b) ** 2)

    y0, a, b = RNG.standard_normal(3), RNG.standard_normal(3), RNG.standard_normal(3)
    t = onp.linspace(0.1, 0.2, 4)
    f = lambda y0, t, a, b: odeint(dynamics, y0, t, (a, b), rtol=1e-10, atol=1e-10)  # noqa: E731
    check_grads(f, (y0, t, a, b), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("mode", ["full", "valid", "same"])
def test_scipy_signal_convolve_matches_scipy_and_differentiates(mode):
    sig = pytest.importorskip("scipy.signal")
    from tapestry.autograd.scipy.signal import convolve
    for sa, sb in [((5,), (3,)), ((3,), (5,)), ((4, 3), (2, 2)), ((6, 7), (4, 1))]:
        a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
        traced = {}

        def f(a, b):
            traced["out"] = convolve(a, b, mode)
            return traced["out"]
        check_grads(f, (a, b), order=2)
        y, _ = tp.vjp(f, a, b)
        assert onp.allclose(y, sig.convolve(a, b, mode=mode))
    with pytest.raises(NotImplementedError, match="axes"):
        convolve(onp.ones((2, 2)), onp.ones((2, 2)), axes=([0], [0]))
