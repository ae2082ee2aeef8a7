"""The differential operators, pytrees, custom rules, nesting and errors."""
import dataclasses
import gc
import re
import threading
import tracemalloc
import weakref
from collections import namedtuple

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

rng = np.random.default_rng(0)


def f_mlp(W, b, x):
    return np.sum(np.tanh(x @ W + b) ** 2)


# --- grad / value_and_grad ---------------------------------------------------
def test_grad_matches_finite_differences_every_argnum():
    W, b, x = rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((5, 4))
    check_grads(f_mlp, (W, b, x))
    gW, gx = tp.grad(f_mlp, argnums=(0, 2))(W, b, x)
    assert gW.shape == W.shape and gx.shape == x.shape


def test_value_and_grad_and_has_aux():
    x = rng.standard_normal(5)
    (v, aux), g = tp.value_and_grad(lambda x: (np.sum(x ** 2), x * 2), has_aux=True)(x)
    assert v == pytest.approx(np.sum(x ** 2))
    np.testing.assert_allclose(aux, 2 * x)
    assert type(aux) is np.ndarray  # aux comes back untraced
    np.testing.assert_allclose(g, 2 * x)
    g2, aux2 = tp.grad(lambda x: (np.sum(x ** 3), "tag"), has_aux=True)(x)
    np.testing.assert_allclose(g2, 3 * x ** 2)
    assert aux2 == "tag"


def test_negative_argnums_and_unused_input_gets_zero():
    x, y = rng.standard_normal(3), rng.standard_normal(4)
    gx, gy = tp.grad(lambda x, y: np.sum(x * 2.0), argnums=(0, -1))(x, y)
    np.testing.assert_allclose(gx, 2.0)
    np.testing.assert_array_equal(gy, np.zeros(4))


def test_constant_output_gives_zero_gradient():
    assert tp.grad(lambda x: np.float64(3.0))(np.float64(1.0)) == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_keeps_primal_dtype(dtype):
    x = rng.standard_normal((3, 2)).astype(dtype)
    g = tp.grad(lambda x: np.sum(np.exp(x) * 2.0 + x))(x)
    assert g.dtype == dtype and g.shape == x.shape
    assert tp.grad(lambda s: s * s)(dtype(3.0)).dtype == dtype


def test_python_float_input():
    assert tp.grad(lambda x: x * x * 3.0)(2.0) == pytest.approx(12.0)


# --- pytrees -------------------------------------------------------------------
Params = namedtuple("Params", "W b")


@dataclasses.dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray
    note: None = None


def _tree_loss(p):
    return f_mlp(p["layer"].W, p["layer"].b, p["x"][0]) + np.sum(p["nt"].W ** 2)


def test_pytrees_in_and_out():
    p = {"layer": Layer(rng.standard_normal((4, 3)), rng.standard_normal(3)),
         "x": [rng.standard_normal((2, 4)), None],
         "nt": Params(rng.standard_normal(2), rng.standard_normal(2))}
    g = tp.grad(_tree_loss)(p)
    assert isinstance(g["layer"], Layer) and isinstance(g["nt"], Params)
    assert g["x"][1] is None and g["layer"].note is None
    np.testing.assert_allclose(g["nt"].W, 2 * p["nt"].W)
    np.testing.assert_array_equal(g["nt"].b, 0.0)
    check_grads(lambda W, b, x: _tree_loss({"layer": Layer(W, b), "x": [x, None],
                                             "nt": p["nt"]}),
                (p["layer"].W, p["layer"].b, p["x"][0]))


# --- vjp / jacobian / hessians ---------------------------------------------------
def test_vjp_pullback_is_reusable_and_structured():
    W, x = rng.standard_normal((3, 4)), rng.standard_normal(4)
    y, pullback = tp.vjp(lambda W, x: {"y": np.tanh(W @ x)}, W, x)
    ct = {"y": rng.standard_normal(3)}
    gW1, gx1 = pullback(ct)
    gW2, gx2 = pullback(ct)
    np.testing.assert_array_equal(gW1, gW2)
    d = ct["y"] * (1 - y["y"] ** 2)
    np.testing.assert_allclose(gW1, np.outer(d, x))
    np.testing.assert_allclose(gx1, W.T @ d)


def test_jacobian_matches_finite_differences():
    x = rng.standard_normal(4)
    A = rng.standard_normal((3, 4))
    J = tp.jacobian(lambda x: np.sin(A @ x))(x)
    np.testing.assert_allclose(J, np.cos(A @ x)[:, None] * A, rtol=1e-12)
    J2 = tp.jacobian(lambda x: x[:, None] * x[None, :])(x)
    assert J2.shape == (4, 4, 4)
    eps = 1e-6
    fd = np.stack([((x + eps * e)[:, None] * (x + eps * e)[None, :] -
                    (x - eps * e)[:, None] * (x - eps * e)[None, :]) / (2 * eps)
                   for e in np.eye(4)], axis=-1)
    np.testing.assert_allclose(J2, fd, atol=1e-8)


def test_hessian_and_hvp():
    A = rng.standard_normal((4, 4)); A = A + A.T
    f = lambda x: 0.5 * x @ A @ x + np.sum(np.sin(x))  # noqa: E731
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    H = A - np.diag(np.sin(x))
    np.testing.assert_allclose(tp.hessian(f)(x), H, atol=1e-12)
    np.testing.assert_allclose(tp.hessian_vector_product(f)(x, v), H @ v, atol=1e-12)


# --- nesting ------------------------------------------------------------------------
def test_grad_of_function_calling_grad_with_closure():
    # d/dy [ d/dx (x*y)^2 at x=2 ] = d/dy [2 * 2 * y^2] = 8 y
    def outer(y):
        return tp.grad(lambda x: (x * y) ** 2)(2.0)
    assert tp.grad(outer)(3.0) == pytest.approx(24.0)
    # perturbation confusion: d/dx [x * d/dy (x + y)] = 1
    assert tp.grad(lambda x: x * tp.grad(lambda y: x + y)(1.0))(2.0) == pytest.approx(1.0)


def test_second_order_check():
    check_grads(lambda x: np.sum(np.tanh(x) * np.exp(x)), (rng.standard_normal(5),), order=2)


# --- custom rules, checkpoint, stop_gradient --------------------------------------------
@tp.custom_vjp
def clipped_identity(x):
    return x


clipped_identity.defvjp(lambda x: (x, None), lambda res, g: (np.clip(g, -1.0, 1.0),))


def test_custom_vjp_rule_is_used():
    x = np.array([1.0, 2.0])
    g = tp.grad(lambda x: np.sum(clipped_identity(x) * 5.0))(x)
    np.testing.assert_array_equal(g, [1.0, 1.0])


@tp.custom_vjp
def softplus(x):
    return np.logaddexp(0.0, x)


def _softplus_fwd(x):
    y = np.logaddexp(0.0, x)
    return y, (x,)


def _softplus_bwd(res, g):
    (x,) = res
    return (g / (1.0 + np.exp(-x)),)


softplus.defvjp(_softplus_fwd, _softplus_bwd)


def test_custom_vjp_correct_and_nestable():
    x = rng.standard_normal(6)
    check_grads(lambda x: softplus(x) * x, (x,), order=2)


def test_custom_vjp_pytree_output():
    @tp.custom_vjp
    def two(x):
        return {"a": x * 2.0, "b": x * 3.0}
    two.defvjp(lambda x: (two(x), None), lambda res, g: (2.0 * g["a"] + 3.0 * g["b"],))
    g = tp.grad(lambda x: np.sum(two(x)["b"]))(np.ones(3))
    np.testing.assert_allclose(g, 3.0)


def test_custom_vjp_without_rule_errors():
    @tp.custom_vjp
    def f(x):
        return x
    with pytest.raises(TypeError, match="defvjp"):
        tp.grad(lambda x: np.sum(f(x)))(np.ones(2))


def test_checkpoint_same_gradient():
    W, b, x = rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((5, 4))
    block = lambda W, b, x: np.tanh(x @ W + b)  # noqa: E731
    ref = tp.grad(lambda W: np.sum(block(W, b, x) ** 2))(W)
    ck = tp.checkpoint(block)
    got = tp.grad(lambda W: np.sum(ck(W, b, x) ** 2))(W)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    check_grads(lambda W, b, x: np.sum(ck(W, b, x) ** 2), (W, b, x))


def test_stop_gradient():
    g = tp.grad(lambda x: np.sum(x * tp.stop_gradient(x)))(np.array([3.0]))
    np.testing.assert_allclose(g, [3.0])


# --- errors ----------------------------------------------------------------------
def test_error_non_scalar_output_names_vjp_and_jacobian():
    with pytest.raises(TypeError, match="vjp.*jacobian"):
        tp.grad(lambda x: x * 2.0)(np.ones(3))


def test_error_integer_and_bool_inputs():
    with pytest.raises(TypeError, match="dtype int"):
        tp.grad(lambda x: np.sum(x * 1.0))(np.arange(3))
    with pytest.raises(TypeError, match="bool"):
        tp.grad(lambda x: np.sum(x * 1.0))(np.ones(3, dtype=bool))


def test_error_inplace_assignment():
    def f(x):
        x[0] = 1.0
        return np.sum(x)
    with pytest.raises(TypeError, match=r"item assignment.*argument.*x = x.copy\(\)"):
        tp.grad(f)(np.ones(3))


@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/=", "**="])
def test_augmented_assignment_rebinds(op):
    """``x op= y`` on a traced value means ``x = x op y`` (autograd, JAX)."""
    def f(x):
        y = x
        exec(f"y {op} 1.5", {}, loc := {"y": y})
        return np.sum(loc["y"] * x)
    x = np.array([0.5, 1.0, 2.0])
    plain = {"+=": lambda x: (x + 1.5) * x, "-=": lambda x: (x - 1.5) * x,
             "*=": lambda x: x * 1.5 * x, "/=": lambda x: x / 1.5 * x,
             "**=": lambda x: x ** 1.5 * x}[op]
    np.testing.assert_allclose(tp.grad(f)(x), tp.grad(lambda x: np.sum(plain(x)))(x))


def test_augmented_assignment_leaves_other_names_alone():
    def f(x):
        total = 0.0
        alias = x
        for k in range(3):
            total += np.sum(x * k)
        alias += 1.0  # rebinds alias only
        return total + np.sum(x)
    np.testing.assert_allclose(tp.grad(f)(np.ones(2)), [4.0, 4.0])


def test_escaped_tracer_is_refused():
    leaked = []

    def f(x):
        leaked.append(x)
        return np.sum(x ** 2)
    tp.grad(f)(np.ones(3))
    with pytest.raises(tp.EscapedTracerError, match="stop_gradient"):
        np.sin(leaked[0])
    with pytest.raises(tp.EscapedTracerError):
        tp.grad(lambda y: np.sum(y * leaked[0]))(np.ones(3))


def test_enclosing_trace_stays_valid_in_nested_grad():
    def outer(x):
        inner = tp.grad(lambda y: np.sum(np.sin(x * y)))(x)
        return np.sum(inner * x)
    x = np.array([0.3, 0.7])
    # inner = x cos(x^2), so outer = sum(x^2 cos(x^2)): d/dx = 2x cos(x^2) - 2x^3 sin(x^2)
    np.testing.assert_allclose(tp.grad(outer)(x),
                               2 * x * np.cos(x**2) - 2 * x**3 * np.sin(x**2))


@pytest.mark.parametrize("convert", [np.asarray, float, lambda v: np.array(v)])
def test_error_conversion_to_plain(convert):
    with pytest.raises(TypeError, match="stop_gradient"):
        tp.grad(lambda x: convert(np.sum(x)))(np.ones(3))


@pytest.mark.parametrize("convert", [np.float64, lambda v: np.asarray(v, dtype=float),
                                     lambda v: np.array(v, dtype=np.complex128)])
def test_error_conversion_to_plain_floats(convert):
    with pytest.raises(TypeError, match="stop_gradient"):
        tp.grad(lambda x: np.sum(x * convert(x)))(np.ones(3))


def _scipy_calls():
    """(function of a traced m calling a converting SciPy function, the
    patterns its refusal must name)."""
    import scipy.linalg
    import scipy.special
    import scipy.stats
    return [
        (lambda m: np.sum(scipy.stats.norm.logpdf(np.ones(3), m, 1.5)),
         [r"scipy\.stats\.norm\.logpdf", r"tapestry\.scipy\.stats"]),
        (lambda m: np.sum(scipy.stats.poisson.logpmf(np.arange(3), m)),
         [r"scipy\.stats\.poisson\.logpmf"]),
        (lambda m: scipy.special.logsumexp(np.ones(3) * m),
         [r"scipy\.special's logsumexp", r"tapestry\.scipy\.special"]),
        (lambda m: np.sum(scipy.linalg.expm(np.eye(2) * m)),
         [r"scipy\.linalg's expm", r"tapestry\.scipy\.linalg"]),
        # behind SciPy's batching decorator: the function it wraps is named
        (lambda m: np.sum(scipy.linalg.solve_triangular(np.eye(2) * m, np.ones(2))),
         [r"scipy\.linalg's solve_triangular", r"tapestry\.scipy\.linalg"]),
    ]


@pytest.mark.parametrize("k", range(5))
def test_a_library_that_converts_its_inputs_is_named_with_the_alternative(k):
    pytest.importorskip("scipy")
    call, patterns = _scipy_calls()[k]
    with pytest.raises(TypeError) as info:
        tp.grad(call)(0.7)
    for pattern in patterns:
        assert re.search(pattern, str(info.value)), str(info.value)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, bool])
@pytest.mark.parametrize("convert", ["scalar type", "asarray", "array"])
def test_casts_to_integers_are_constants_as_astype(dtype, convert):
    """``np.int64(x)``, ``np.asarray(x, dtype=int)``: a cast to integers (or
    booleans) has derivative zero wherever it has one, so it gives the plain
    cast, as ``x.astype(int)`` does (autograd's test_cast_to_int indexes with
    ``np.int64(W[:, -1])``), under grad, jvp, vmap and jit alike."""
    cast = {"scalar type": lambda v: np.dtype(dtype).type(v),
            "asarray": lambda v: np.asarray(v, dtype=dtype),
            "array": lambda v: np.array(v, dtype=dtype)}[convert]

    def f(x):
        c = cast(x * 3.0)
        assert c.dtype == np.dtype(dtype)
        return np.sum(x ** 2 * c)
    want = lambda x: 2 * x * (x * 3.0).astype(dtype)  # noqa: E731
    for x in (np.array([1.5, 2.25, 0.4]), np.array([0.1, 0.9, 3.1]), np.array(2.5)):
        np.testing.assert_allclose(tp.grad(f)(x), want(x))
        np.testing.assert_allclose(tp.jit(tp.grad(f))(x), want(x))
        np.testing.assert_allclose(tp.jvp(f, (x,), (np.ones_like(x),))[1], np.sum(want(x)))
    xs = np.array([[1.5, 2.25, 0.4], [0.1, 0.9, 3.1]])
    np.testing.assert_allclose(tp.vmap(tp.grad(f))(xs), want(xs))


def test_error_missing_rule_names_function_and_custom_vjp():
    with pytest.raises(NotImplementedError, match=r"np\.nextafter.*custom_vjp"):
        tp.grad(lambda x: np.sum(np.nextafter(x, 2.0)))(np.ones((4, 2)))


def test_error_shape_mismatch_names_the_op():
    with pytest.raises(ValueError, match="tapestry: (add|matmul)"):
        tp.grad(lambda x: np.sum(x + np.ones(4)))(np.ones(3))
    with pytest.raises(ValueError, match="matmul"):
        tp.grad(lambda x: np.sum(x @ np.ones((4, 2))))(np.ones((2, 3)))


def test_nondifferentiable_ops_pass_as_constants():
    def f(x):
        mask = x > 0
        k = np.argmax(x)
        assert type(mask) is np.ndarray and isinstance(k, (int, np.integer))
        return np.sum(np.where(mask, x, 0.0)) + x[k] * np.floor(x[0]) * 0
    g = tp.grad(f)(np.array([1.0, -2.0, 3.0]))
    np.testing.assert_allclose(g, [1.0, 0.0, 1.0])


# --- threads and memory -----------------------------------------------------------
def test_threads_get_exactly_the_serial_results():
    fns = [lambda x, k=k: np.sum(np.sin(x * (k + 1)) ** 2 + np.tanh(x) * k) for k in range(8)]
    xs = [rng.standard_normal(50) for _ in range(8)]
    serial = [tp.value_and_grad(f)(x) for f, x in zip(fns, xs)]
    results = [None] * 8
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        out = None
        for _ in range(20):
            out = tp.value_and_grad(fns[i])(xs[i])
        results[i] = out

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (v1, g1), (v2, g2) in zip(serial, results):
        assert v1 == v2
        np.testing.assert_array_equal(g1, g2)


def test_tape_is_released_after_backward():
    big = np.ones(1000)
    refs = []

    def f(x):
        y = x * 2.0
        refs.append(weakref.ref(y))
        return np.sum(y)
    tp.grad(f)(big)
    gc.collect()
    assert refs[0]() is None


def test_ten_thousand_grads_leave_memory_flat():
    g = tp.grad(lambda x: np.sum(np.tanh(x) * x))
    x = rng.standard_normal(20)
    for _ in range(200):
        g(x)
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(1000):
            g(x)
        gc.collect()
        first, _ = tracemalloc.get_traced_memory()
        for _ in range(9000):
            g(x)
        gc.collect()
        second, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert second - first < 64 * 1024, (first, second)


def test_np_matrix_input_is_refused_clearly():
    with pytest.warns(PendingDeprecationWarning):
        m = np.matrix([[1.0, 2.0]])
    with pytest.raises(TypeError, match="np.asarray"):
        tp.grad(lambda m: np.sum(m))(m)


def test_unregistered_class_leaf_points_to_tree_util():
    class Params:
        pass
    with pytest.raises(TypeError, match="register_pytree_node"):
        tp.grad(lambda p: 1.0)(Params())


_MASKED = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])


@pytest.mark.parametrize("transform", [
    lambda f, m: tp.grad(f)(m),
    lambda f, m: tp.value_and_grad(f)(m),
    lambda f, m: tp.vjp(f, m),
    lambda f, m: tp.jvp(f, (m,), (np.ones(3),)),
    lambda f, m: tp.jacfwd(f)(m),
    lambda f, m: tp.jacobian(f)(m),
    lambda f, m: tp.hessian(f)(m),
    lambda f, m: tp.grad(lambda d: f(d["w"]))({"w": m}),  # a pytree leaf
], ids=["grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacobian", "hessian", "tree"])
def test_masked_array_input_is_refused_clearly(transform):
    # np.mean of [1, --, 3] is 2 but its gradient gave the masked entry 1/3.
    with pytest.raises(TypeError, match=r"masked array.*filled"):
        transform(np.mean, _MASKED)


@pytest.mark.parametrize("transform", [
    lambda m: tp.jvp(np.sin, (np.ones(3),), (m,)),
    lambda m: tp.linearize(np.sin, np.ones(3))[1](m),
    lambda m: tp.vjp(np.sin, np.ones(3))[1](m),
    lambda m: tp.vjp(lambda x: {"y": np.sin(x)}, np.ones(3))[1]({"y": m}),
    lambda m: tp.hessian_vector_product(lambda x: np.sum(x ** 3))(np.ones(3), m),
], ids=["jvp", "linearize", "vjp", "vjp_tree", "hvp"])
def test_masked_tangent_or_cotangent_is_refused_clearly(transform):
    # np.asarray dropped the mask: the masked entry's data pushed through silently
    with pytest.raises(TypeError, match=r"masked array.*filled"):
        transform(_MASKED)


@pytest.mark.parametrize("f", [
    lambda x: np.sum(x * _MASKED),
    lambda x: np.sum(_MASKED * x),
    lambda x: np.sum(x @ np.ma.masked_array(np.eye(3), mask=np.eye(3) == 0)),
    lambda x: np.dot(x, _MASKED),  # NumPy's value ignores the mask here
    lambda x: np.sum(np.concatenate([x, _MASKED])),
    lambda x: np.average(x, weights=_MASKED),
    lambda x: np.sum(np.ma.masked_where(x > 1.5, x)),
    lambda x: np.ma.sum(np.ma.masked_array(x, mask=[0, 1, 0])),
    lambda x: np.sum(tp.parallel_map(lambda xi, m: xi * m, list(x), _MASKED)),
], ids=["x*m", "m*x", "matmul", "dot", "concatenate", "average", "masked_where",
        "ma.sum", "parallel_map"])
def test_masked_array_met_inside_the_function_is_refused(f):
    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"masked array|np\.ma"):
        tp.grad(f)(x)
