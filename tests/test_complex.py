"""Complex numbers end to end, under the convention of docs/complex.md: a
cotangent c pairs with a tangent t by Re(c * t) (JAX's and HIPS autograd's).

The per-op sweeps live beside the real ones (tests/test_ops_elementwise.py,
tests/test_ops_reductions.py); this file holds the silent wrong gradients
that were reproduced, real functions with complex intermediates, the
complex-only functions, einsum, check_grads itself, and JAX as a referee.
"""
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads
from sweep import check_all, crand, rand


@pytest.fixture(autouse=True)
def _complex_warning_is_an_error():
    # A ComplexWarning means an imaginary part was dropped somewhere unplanned.
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        yield


# --- the reproduced silent wrong gradients -------------------------------------------
def test_abs_of_imaginary_multiple():
    # was [-2, -4, -6]: abs's rule used sign(z), not conj(z) / |z|
    g = tp.grad(lambda x: np.sum(np.abs(1j * x) ** 2))(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(g, [2.0, 4.0, 6.0])
    assert g.dtype == np.float64


def test_abs_of_complex_multiple():
    # was [0, 0, 0]
    g = tp.grad(lambda x: np.sum(np.abs(x * (1 + 1j))))(np.array([1.0, -2.0, 3.0]))
    np.testing.assert_allclose(g, np.sqrt(2) * np.array([1.0, -1.0, 1.0]))


def test_sort_complex_is_a_permutation():
    # was a constant (zero gradient)
    w = np.array([1.0, 10.0, 100.0])
    x = np.array([3.0, 1.0, 2.0])
    g = tp.grad(lambda x: np.sum(np.real(np.sort_complex(x)) * w), sparse=False)(x)
    np.testing.assert_allclose(g, [100.0, 1.0, 10.0])
    z = crand((2, 5), "normal", 1)
    check_all(lambda z: np.sort_complex(z) * (1 + np.arange(5)), z)
    check_all(lambda x: np.sort_complex(x) * (1j + np.arange(5)), rand((2, 5), "normal", 2))
    assert tp.vjp(np.sort_complex, x.astype(np.float32))[0].dtype == np.complex128  # as NumPy


# --- real inputs, complex intermediates: exact real gradients ------------------------
@pytest.mark.parametrize("f,df", [
    (lambda x: np.real(np.exp(1j * x)), lambda x: -np.sin(x)),
    (lambda x: np.imag(np.exp(1j * x)), np.cos),
    (lambda x: np.abs(np.exp(1j * x) * x), np.sign),
    (lambda x: np.angle(x + 2j), lambda x: -2 / (x * x + 4)),
    (lambda x: np.abs(x + 1j) ** 2, lambda x: 2 * x),
    (lambda x: (np.conj(x * (1 + 2j)) * x * 1j).imag, lambda x: 2 * x),
    (lambda x: np.var(np.stack([x, 1j * x, x + 2j]), axis=0), lambda x: _var_d(x)),
], ids=["real(exp(ix))", "imag(exp(ix))", "abs(exp(ix) x)", "angle(x+2i)", "|x+i|^2",
        "imag(conj(..)..)", "var"])
def test_real_function_with_complex_intermediates(f, df):
    x = np.array([0.3, -1.2, 2.0])
    g = tp.grad(lambda x: np.sum(f(x)))(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, df(x), rtol=1e-8, atol=1e-8)
    check_all(f, x, order=2)


def _var_d(x):
    # d/dx var([x, ix, x + 2i]) per entry, by finite differences of the scalar
    eps = 1e-6
    return np.array([(np.var([x0 + eps, 1j * (x0 + eps), x0 + eps + 2j]) -
                      np.var([x0 - eps, 1j * (x0 - eps), x0 - eps + 2j])) / (2 * eps)
                     for x0 in x])


def test_real_function_of_complex_einsum_and_matmul():
    a, b = rand((3, 4), "normal", 3), crand((4, 2), "normal", 4)
    check_all(lambda a: np.abs(np.einsum("ij,jk->ik", a, b)), a, order=2)
    check_all(lambda a: np.angle(a @ b), a)


def test_gathered_rows_complex():
    # a complex parameter read through a gather keeps a sparse gradient; a real
    # one meeting complex values gets its (dense) real part
    W, S = np.arange(12.0).reshape(4, 3) / 10 + 0.1, np.array([0, 2, 2])
    Wc = W * (1 + 0.5j)
    assert tp.grad(lambda W: np.sum(np.abs(W[S])))(Wc).dtype == np.complex128
    check_grads(lambda W: np.abs(W[S]), (Wc,), order=2)
    check_grads(lambda W: W[S] * (1 + 1j), (W,), order=2)
    g = tp.grad(lambda W: np.sum(np.abs(W[S] * (1 + 1j))))(W)
    np.testing.assert_allclose(g, np.sqrt(2) * np.bincount(S, minlength=4)[:, None] * np.ones(3))


# --- the convention --------------------------------------------------------------------
def test_grad_of_real_valued_function_is_dfdx_minus_i_dfdy():
    assert tp.grad(lambda z: np.abs(z) ** 2)(3 + 4j) == pytest.approx(6 - 8j)
    f = lambda z: np.sin(np.real(z)) * np.imag(z) ** 3 + np.abs(z)  # noqa: E731
    z, eps = 0.7 - 0.4j, 1e-6
    dfdx = (f(z + eps) - f(z - eps)) / (2 * eps)
    dfdy = (f(z + 1j * eps) - f(z - 1j * eps)) / (2 * eps)
    assert tp.grad(f)(z) == pytest.approx(dfdx - 1j * dfdy, rel=1e-8)


def test_pullback_of_one_through_holomorphic_function_is_its_derivative():
    z = np.array(0.3 + 0.8j)
    for f, df in [(lambda z: z ** 3, 3 * z ** 2),
                  (lambda z: np.exp(np.sin(z)), np.cos(z) * np.exp(np.sin(z)))]:
        assert tp.vjp(f, z)[1](np.array(1 + 0j))[0] == pytest.approx(df)


# --- complex-only functions and methods ---------------------------------------------------
@pytest.mark.parametrize("f", [
    np.real, np.imag, np.conj, np.conjugate, np.angle, lambda z: np.angle(z, deg=True),
    lambda z: z.real, lambda z: z.imag, lambda z: z.conj(), lambda z: np.abs(z),
    lambda z: z.real * z.imag, lambda z: np.real_if_close(z * 0 + z.real),
    lambda z: np.nan_to_num(z + np.array([0.0, np.inf, np.nan]), posinf=2.0, nan=3.0),
], ids=lambda f: getattr(f, "__name__", "f"))
def test_complex_functions(f):
    check_all(f, crand((3,), "away", 5), order=2)


def test_real_and_imag_of_real_arrays():
    x = rand((3,), "normal", 6)
    assert tp.grad(lambda x: np.sum(np.real(x) * 2 + np.imag(x)))(x).tolist() == [2.0] * 3
    assert tp.grad(lambda x: np.sum(np.angle(x) + x))(x).tolist() == [1.0] * 3


def test_real_if_close_keeps_complex_when_not_close():
    z = crand((3,), "normal", 7)
    y, pullback = tp.vjp(np.real_if_close, z)
    assert y.dtype == np.complex128
    assert tp.vjp(np.real_if_close, z.real + 0j)[0].dtype == np.float64


def test_astype_between_real_and_complex():
    z = crand((3,), "away", 5)
    for f in (lambda z: z.astype(np.complex64) * z, lambda z: np.real(z).astype(np.float32) * z):
        check_grads(f, (z,), eps=1e-3, rtol=1e-3, atol=1e-3)  # float32 rounding
    x = rand((3,), "normal", 8)
    check_all(lambda x: x.astype(np.complex128) * (1 + 2j), x, order=2)
    z = crand((3,), "normal", 9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # NumPy's own, forward
        check_all(lambda z: z.astype(np.float64) ** 2, z, order=2)


def test_abs_angle_sign_at_zero_are_zero():
    z = np.array([0j, 1 + 1j])
    for f in (np.abs, np.angle, np.sign):
        g = tp.grad(lambda z: np.sum(np.real(f(z))))(z)
        assert g[0] == 0 and np.all(np.isfinite(g))


# --- einsum ---------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 2)]), ("i,i->", [(5,), (5,)]), ("ii->i", [(3, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 1)]), ("...i,i", [(2, 3), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
])
def test_einsum_complex(spec, shapes):
    ops = [crand(s, "normal", k) for k, s in enumerate(shapes)]
    check_all(lambda *ops: np.einsum(spec, *ops), *ops, order=2)
    if len(ops) > 1:  # a real operand among complex ones
        ops[0] = rand(shapes[0], "normal", 11)
        check_all(lambda *ops: np.einsum(spec, *ops), *ops)


def test_matmul_and_friends_complex():
    a, b, v = crand((3, 4), "normal", 12), crand((4, 2), "normal", 13), crand((4,), "normal", 14)
    check_all(lambda a, b: a @ b, a, b, order=2)
    check_all(lambda a, b: np.dot(a, b), a, b)
    check_all(lambda v, w: np.vdot(v, w), v, v[::-1].copy())
    check_all(lambda a: np.linalg.det(a + 3 * np.eye(3)), crand((3, 3), "normal", 15))


def test_norm_complex():
    check_grads(lambda a: np.linalg.norm(a), (crand((3, 4), "normal", 16),))


def test_jacobian_of_real_to_complex_is_exact_or_refused():
    x = np.array([0.3, 1.0])
    try:
        jac = tp.jacobian(lambda x: np.exp(1j * x))(x)
    except (TypeError, NotImplementedError):
        return
    np.testing.assert_allclose(jac, np.diag(1j * np.exp(1j * x)))


# --- check_grads itself ---------------------------------------------------------------------
def _with_rule(f, rule):
    @tp.custom_vjp
    def h(z):
        return f(z)
    h.defvjp(lambda z: (f(z), z), lambda z, g: (rule(g, z),))
    return h


@pytest.mark.parametrize("f,wrong_rule", [
    (np.exp, lambda g, z: g * np.conj(np.exp(z))),  # conjugated (PyTorch's pairing)
    (np.conj, lambda g, z: g),                      # right along the real direction only
    (np.real, lambda g, z: g + 0j * z + 1j * g),    # wrong along the imaginary direction
    (np.abs, lambda g, z: g * z / np.abs(z)),       # conj forgotten
])
def test_check_grads_catches_wrong_complex_rules(f, wrong_rule):
    z = crand((3,), "away", 17)
    with pytest.raises(AssertionError, match="check_grads"):
        check_grads(_with_rule(f, wrong_rule), (z,))


def test_check_grads_accepts_right_complex_rule_and_order_2():
    z = crand((3,), "away", 18)
    check_grads(_with_rule(np.abs, lambda g, z: np.real(g) * np.conj(z) / np.abs(z)), (z,))
    check_grads(lambda z: np.abs(z) * z, (z,), order=2)
    check_grads(lambda x: np.exp(1j * x), (rand((3,), "normal", 19),), order=2)  # R -> C


# --- JAX as a referee ------------------------------------------------------------------------
# JAX runs in a subprocess: imported here it would start threads that make the
# forking executors of tests/test_parallel.py unsafe.
JAX_CASES = [
    "np_.exp(z) * np_.sin(z) / (1 + z * z)",
    "np_.abs(z) ** 3 + np_.angle(z)",
    "np_.log(z) * np_.conj(z) + np_.sqrt(z)",
    "np_.real(z) * np_.imag(z) ** 2 + np_.cumprod(z)",
    "np_.var(z) + np_.prod(z) + np_.mean(z * z)",
    "np_.einsum('i,j->ij', z, np_.conj(z))",
    "np_.arctanh(z / 3) + np_.arccosh(z + 2) + np_.tanh(z) ** 2",
    "np_.sum(np_.abs(np_.exp(z) - z) ** 2 + np_.angle(z * z) + np_.std(z))",
]
_JAX_SCRIPT = """
import sys, numpy as np, jax, jax.numpy as np_
jax.config.update("jax_enable_x64", True)
data, out = np.load(sys.argv[1]), {}
for k, src in enumerate(sys.argv[3:]):
    f = eval("lambda z: " + src)
    y, pullback = jax.vjp(f, np_.asarray(data["z"]))
    out[f"y{k}"] = np.asarray(y)
    out[f"g{k}"] = np.asarray(pullback(np_.asarray(data[f"ct{k}"], y.dtype))[0])
np.savez(sys.argv[2], **out)
"""


@pytest.fixture(scope="module")
def jax_reference(tmp_path_factory):
    """JAX's values and vjps of JAX_CASES at one point, from a subprocess."""
    import importlib.util
    import subprocess
    import sys
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed (the peers extra)")
    z, cts = crand((4,), "pos", 21), {}
    for k, src in enumerate(JAX_CASES):
        y = tp.vjp(eval("lambda z: " + src, {"np_": np}), z)[0]
        ct = crand(np.shape(y), "normal", 22 + k)
        cts[f"ct{k}"] = ct if np.iscomplexobj(y) else ct.real  # a real output: real cotangent
    d = tmp_path_factory.mktemp("jax")
    np.savez(d / "in.npz", z=z, **cts)
    subprocess.run([sys.executable, "-c", _JAX_SCRIPT, d / "in.npz", d / "out.npz", *JAX_CASES],
                   check=True, timeout=300)
    return z, cts, dict(np.load(d / "out.npz"))


@pytest.mark.parametrize("case", range(len(JAX_CASES)))
def test_against_jax_vjp(case, jax_reference):
    z, cts, ref = jax_reference
    y, pullback = tp.vjp(eval("lambda z: " + JAX_CASES[case], {"np_": np}), z)
    np.testing.assert_allclose(y, ref[f"y{case}"], rtol=1e-12)
    np.testing.assert_allclose(pullback(cts[f"ct{case}"])[0], ref[f"g{case}"],
                               rtol=1e-10, atol=1e-12)
    if np.ndim(y) == 0 and not np.iscomplexobj(y):  # C -> R: grad is jax.grad's
        np.testing.assert_allclose(tp.grad(eval("lambda z: " + JAX_CASES[case], {"np_": np}))(z),
                                   ref[f"g{case}"] / cts[f"ct{case}"], rtol=1e-10)


# --- scipy.special ufuncs ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["erf", "erfc", "ndtr", "log_ndtr", "xlogy", "xlog1py",
                                  "expit", "log_expit", "logit", "gammaln", "digamma"])
def test_scipy_special_complex(name):
    sp = pytest.importorskip("scipy.special")
    u, z = getattr(sp, name), crand((4,), "pos", 24)
    args = (z, z[::-1].copy()) if u.nin == 2 else (z,)
    if name in ("expit", "log_expit", "logit", "gammaln"):  # no complex loop in SciPy
        with pytest.raises(TypeError, match=name):
            tp.grad(lambda *a: np.sum(np.abs(u(*a))))(*args)
    elif name == "digamma":  # forward exists, SciPy has no complex polygamma
        with pytest.raises(NotImplementedError, match="digamma"):
            tp.grad(lambda z: np.sum(np.abs(u(z))))(z)
    else:
        check_all(u, *args, order=2)


#: Registry keys checked against finite differences here (tests/test_op_coverage.py).
SWEPT = {np.sort_complex}


def test_grad_of_complex_output_is_refused():
    with pytest.raises(TypeError, match="complex scalar"):
        tp.grad(lambda z: np.sum(z * z))(np.array([1 + 1j]))


def test_hessian_of_complex_intermediates_and_refusal_of_complex_inputs():
    """Real inputs through complex intermediates: reverse over reverse stands
    in for forward mode; complex inputs stay refused by name."""
    f = lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2 * np.arange(4.0))  # noqa: E731
    x = np.array([0.1, 0.5, -0.3, 0.8])
    h = tp.hessian(f)(x)
    v = np.array([0.3, -1.0, 0.2, 0.5])
    eps = 1e-6
    fd = (tp.grad(f)(x + eps * v) - tp.grad(f)(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(h @ v, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tp.hessian_vector_product(f)(x, v), h @ v, rtol=1e-12)
    with pytest.raises(NotImplementedError, match="complex inputs"):
        tp.hessian(lambda z: np.sum(np.abs(z) ** 2))(np.array([1 + 1j]))


@pytest.mark.parametrize("op", ["mul", "sub", "add", "div"])
def test_a_python_complex_on_the_left_stays_weak_as_in_numpy(op):
    """``1j * x`` of a float32 x is complex64 in NumPy (NEP 50: a Python
    complex is weak); traced it was complex128 (the reflected operator made
    the Python complex an np.complex128)."""
    f = {"mul": lambda x: 1j * x, "sub": lambda x: 1j - x, "add": lambda x: (1 + 2j) + x,
         "div": lambda x: (1 + 2j) / x}[op]
    for x in (np.array([0.5, 2.0], np.float32), np.float32(0.5), np.array([0.5, 2.0])):
        want = f(x)
        got = tp.vjp(f, x)[0]
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
        assert tp.jvp(f, (x,), (np.ones_like(x),))[1].dtype == np.asarray(want).dtype


def test_holomorphic_flag_as_jax():
    """``holomorphic=True`` on grad, value_and_grad, jacfwd and jacrev:
    complex inputs and outputs required (refused by name otherwise), and the
    derivative is f'(z): checked against the derivative along the real axis
    of the input, which is f'(z) for a holomorphic f."""
    z = np.array([1 + 1j, 2 - 0.5j, 0.3 + 0.2j])
    f = lambda z: np.sum(np.sin(z) * z)  # noqa: E731
    g = lambda z: np.exp(z) * z[::-1]  # noqa: E731
    h = 1e-7
    e = np.eye(3)
    fd_f = np.array([(f(z + h * e[k]) - f(z - h * e[k])) / (2 * h) for k in range(3)])
    np.testing.assert_allclose(tp.grad(f, holomorphic=True)(z), fd_f, rtol=1e-7)
    v, gz = tp.value_and_grad(f, holomorphic=True)(z)
    assert v == f(z) and np.array_equal(gz, tp.grad(f, holomorphic=True)(z))
    fd_g = np.stack([(g(z + h * e[k]) - g(z - h * e[k])) / (2 * h) for k in range(3)], axis=1)
    np.testing.assert_allclose(tp.jacfwd(g, holomorphic=True)(z), fd_g, rtol=1e-7)
    np.testing.assert_allclose(tp.jacrev(g, holomorphic=True)(z), fd_g, rtol=1e-7)
    np.testing.assert_array_equal(tp.jit(tp.grad(f, holomorphic=True))(z),
                                  tp.grad(f, holomorphic=True)(z))
    with pytest.raises(TypeError, match=r"grad\(holomorphic=True\) requires complex inputs"):
        tp.grad(f, holomorphic=True)(np.ones(3))
    with pytest.raises(TypeError, match=r"jacfwd\(holomorphic=True\) requires complex outputs"):
        tp.jacfwd(lambda z: np.abs(z), holomorphic=True)(z)
    with pytest.raises(TypeError, match=r"jacrev\(holomorphic=True\) requires complex outputs"):
        tp.jacrev(lambda z: np.abs(z), holomorphic=True)(z)
    with pytest.raises(TypeError, match="holomorphic=True"):
        tp.grad(f)(z)
