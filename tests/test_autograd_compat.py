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


# --- forward mode: make_jvp, deriv, defjvp, def_linear ---------------------------------
def _real_autograd():
    """HIPS autograd itself, where it is installed (not this package)."""
    real = pytest.importorskip("autograd")
    if real is ag or "tapestry" in (getattr(real, "__file__", "") or ""):
        pytest.skip("autograd resolves to tapestry.autograd here")
    import autograd.numpy as anp
    return real, anp


def _fwd_cases(npm):
    """(fun, argnum, args, tangent) with functions written against ``npm``."""
    x = onp.array([0.3, -1.2, 2.0])
    y = onp.array([[0.5, 1.5, -0.7], [1.1, 0.2, 0.9]])
    return [
        (lambda x: npm.sin(x) * x ** 2, 0, (x,), onp.array([1.0, -2.0, 0.5])),
        (lambda x, y: npm.tanh(y @ x), 1, (x, y), onp.ones((2, 3))),
        (lambda x, y: npm.sum(npm.exp(y) * x), (0, 1), (x, y), (x[::-1].copy(), y * 2)),
        (lambda x: npm.cumsum(x) * npm.prod(x), 0, (x,), onp.arange(3.0)),
        (lambda s: npm.log1p(s ** 2), 0, (0.7,), 1.0),
        (lambda x: npm.sin(x), 0, (x,), onp.ones(3, int)),  # autograd takes int tangents
    ]


@pytest.mark.parametrize("k", range(6))
def test_make_jvp_matches_hips_autograd(k):
    real, anp = _real_autograd()
    fun, argnum, args, v = _fwd_cases(np)[k]
    rfun = _fwd_cases(anp)[k][0]
    ans, t = ag.make_jvp(fun, argnum)(*args)(v)
    rans, rt = real.make_jvp(rfun, argnum)(*args)(v)
    for a, b in zip(tp.tree_leaves((ans, t)), tp.tree_leaves((rans, rt))):
        onp.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("k", [0, 3, 4])
def test_deriv_matches_hips_autograd(k):
    real, anp = _real_autograd()
    fun, argnum, args, _ = _fwd_cases(np)[k]
    got = ag.deriv(fun, argnum)(*args)
    want = real.deriv(_fwd_cases(anp)[k][0], argnum)(*args)
    for a, b in zip(tp.tree_leaves(got), tp.tree_leaves(want)):
        onp.testing.assert_allclose(a, b, rtol=1e-12)


def test_make_jvp_and_deriv_against_finite_differences():
    x = RNG.standard_normal(4)
    f = lambda x: np.sin(x) * np.sum(x ** 2)  # noqa: E731
    v = RNG.standard_normal(4)
    ans, t = ag.make_jvp(f)(x)(v)
    eps = 1e-6
    onp.testing.assert_allclose(t, (f(x + eps * v) - f(x - eps * v)) / (2 * eps), rtol=1e-6)
    onp.testing.assert_allclose(ans, f(x))
    onp.testing.assert_allclose(ag.deriv(np.tanh)(x), 1 - onp.tanh(x) ** 2)
    with pytest.raises(ValueError, match=r"tangent shape \(3,\)"):
        ag.make_jvp(f)(x)(onp.ones(3))


def test_defjvp_only_primitive_works_in_both_modes():
    from tapestry.autograd.extend import defjvp

    @primitive
    def cube(x, k):
        return k * x ** 3

    defjvp(cube, lambda g, ans, x, k: 3 * k * x ** 2 * g, None)
    x = RNG.standard_normal(3)
    onp.testing.assert_allclose(ag.make_jvp(cube)(x, 2.0)(onp.ones(3))[1], 6 * x ** 2)
    onp.testing.assert_allclose(ag.grad(lambda x: np.sum(cube(x, 2.0)))(x), 6 * x ** 2)
    assert ag.grad(cube, 1)(1.5, 2.0) == 0.0  # None: a zero derivative
    check_grads(lambda x: cube(x, 2.0), (x,), order=2)  # reverse, second order
    onp.testing.assert_allclose(tp.hessian(lambda x: np.sum(cube(x, 2.0)))(x),
                                onp.diag(12 * x))


def test_def_linear_and_same_push_tangents_through_the_primitive():
    from tapestry.autograd.extend import def_linear, defjvp, defvjp

    @primitive
    def scale(x, k):
        return x * k

    def_linear(scale)
    x = RNG.standard_normal(3)
    onp.testing.assert_allclose(ag.make_jvp(scale)(x, 3.0)(onp.ones(3))[1], 3.0)
    onp.testing.assert_allclose(ag.make_jvp(scale, 1)(x, 3.0)(1.0)[1], x)
    onp.testing.assert_allclose(ag.grad(lambda k: np.sum(scale(x, k)))(3.0), onp.sum(x))
    assert 0 in scale.prim.linear_in and 5 in scale.prim.linear_in

    @primitive
    def colsum(x, axis=None):
        return onp.sum(x, axis=axis)  # plain NumPy inside: a primitive's body

    defjvp(colsum, "same")
    defvjp(colsum, lambda ans, x, axis=None: lambda g: onp.broadcast_to(
        onp.expand_dims(g, axis), x.shape) if axis is not None else onp.broadcast_to(g, x.shape))
    a = RNG.standard_normal((2, 3))
    t = RNG.standard_normal((2, 3))
    onp.testing.assert_allclose(ag.make_jvp(lambda a: colsum(a, axis=0))(a)(t)[1], t.sum(0))
    assert colsum.prim.linear_in == (0,)


def test_defjvp_argnum_and_argnums():
    from tapestry.autograd.extend import defjvp_argnum, defjvp_argnums

    @primitive
    def mul(a, b):
        return a * b

    defjvp_argnum(mul, lambda i, g, ans, args, kwargs: g * args[1 - i])
    assert ag.make_jvp(mul, (0, 1))(2.0, 3.0)((1.0, 1.0))[1] == 5.0
    assert ag.grad(mul, 1)(2.0, 3.0) == 2.0

    @primitive
    def mul2(a, b):
        return a * b

    defjvp_argnums(mul2, lambda argnums, gs, ans, args, kwargs: sum(
        g * args[1 - i] for i, g in zip(argnums, gs)))
    assert ag.make_jvp(mul2, (0, 1))(2.0, 3.0)((1.0, 2.0))[1] == 7.0
    assert ag.grad(mul2, 0)(2.0, 3.0) == 3.0


def test_defjvp_matches_hips_autograd():
    real, anp = _real_autograd()
    from autograd.extend import defjvp as rdefjvp
    from autograd.extend import primitive as rprimitive
    from tapestry.autograd.extend import defjvp

    def body(x, y):
        return onp.sin(x) * y

    rf, tf = rprimitive(body), primitive(body)
    rules = (lambda g, ans, x, y: g * anp.cos(x) * y, lambda g, ans, x, y: g * anp.sin(x))
    rdefjvp(rf, *rules)
    defjvp(tf, lambda g, ans, x, y: g * np.cos(x) * y, lambda g, ans, x, y: g * np.sin(x))
    x, y, v = RNG.standard_normal(3), RNG.standard_normal(3), RNG.standard_normal(3)
    for argnum in (0, 1):
        onp.testing.assert_allclose(ag.make_jvp(tf, argnum)(x, y)(v)[1],
                                    real.make_jvp(rf, argnum)(x, y)(v)[1], rtol=1e-12)


def test_check_grads_fwd_mode_runs_and_catches_a_wrong_jvp():
    from tapestry.autograd.extend import defjvp
    from tapestry.autograd.test_util import check_grads as agc

    agc(lambda x: np.sum(np.sin(x) * x), modes=["fwd", "rev"], order=2)(RNG.standard_normal(3))

    @primitive
    def wrong(x):
        return x ** 2

    defjvp(wrong, lambda g, ans, x: 3 * x * g)  # should be 2 x g
    with pytest.raises(AssertionError):
        agc(wrong, modes=["fwd"], order=1)(RNG.standard_normal(3))


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

    # 3 for 2: the check compares <J^T u, v> with finite differences along
    # autograd's unseeded random directions, within an absolute 1e-6, so a
    # slightly wrong rule (2.001) passes whenever u*v happens to be small.
    defvjp(double, lambda ans, x: lambda g: 3.0 * g)
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


@pytest.mark.parametrize("opt, kwargs, match", [
    (adam, {"step_size": float("inf")}, "step_size must be a finite number > 0"),
    (adam, {"b1": 1.0}, r"b1 must be a finite number in \[0, 1\)"),
    (adam, {"eps": float("nan")}, "eps"),
    (sgd, {"step_size": -0.1}, "step_size"),
    (sgd, {"mass": float("nan")}, "mass"),
    (rmsprop, {"gamma": 1.5}, "gamma"),
    (rmsprop, {"num_iters": -1}, "num_iters")])
def test_optimizers_refuse_settings_that_would_run_silently_wrong(opt, kwargs, match):
    with pytest.raises(ValueError, match=match):
        opt(lambda p, i: 2 * p, onp.ones(2), **kwargs)


def test_autograd_linalg_helpers_T_and_dot():
    """``np.linalg.T`` and ``np.linalg._dot``: autograd.numpy.linalg's helpers,
    which ported programs (and autograd's test_pinv) call."""
    r = onp.random.default_rng(3)
    x, y = r.normal(size=(2, 4, 3)), r.normal(size=(2, 3, 5))
    onp.testing.assert_array_equal(np.linalg.T(x), onp.swapaxes(x, -1, -2))
    onp.testing.assert_allclose(np.linalg._dot(x, y), x @ y)
    check_grads(lambda m: np.linalg.pinv(np.linalg._dot(np.linalg.T(m), m)),
                (r.normal(size=(5, 3)),))


def test_submodules_load_under_autograd_s_name():
    """With ``autograd`` aliased to ``tapestry.autograd`` in sys.modules (as a
    port or autograd's own test runner does), a submodule imported first
    under the alias (``autograd.misc.fixed_points``, autograd's
    examples/fixed_points.py) loads: its imports of tapestry are absolute."""
    import subprocess
    import sys
    code = ("import sys, tapestry.autograd, tapestry.autograd.misc\n"
            "sys.modules['autograd'] = tapestry.autograd\n"
            "sys.modules['autograd.misc'] = tapestry.autograd.misc\n"
            "from autograd.misc.fixed_points import fixed_point\n"
            "import autograd.scipy.integrate, autograd.scipy.signal, autograd.misc.flatten\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
