"""Forward mode against reverse mode, rule by rule.

Every op of the rule sweeps (tests/test_ops_*.py tables) is checked for
  * the transposition identity <u, J v> = <J^T u, v> (jvp against vjp),
  * jvp against central finite differences,
  * the fast paths against transposition alone (``USE_FAST_RULES=False``),
  * batched tangents (``jacfwd``) against ``jacrev``,
in float64, with broadcasting and 0-d inputs.
"""
import numpy as np
import pytest

import tapestry as tp
from tapestry.core import forward
from sweep import rand
from test_ops_elementwise import BINARY, UNARY, _avoid_kinks
from test_ops_linalg import LINALG, PRODUCTS
from test_ops_reductions import REDUCTIONS
from test_ops_shape import CASES
from test_einsum import CASES as EINSUM
from test_indexing import KEYS


def _leaves(t):
    return [np.asarray(x, np.float64) for x in tp.tree_flatten(t)[0]]


def _inner(a, b):
    return sum(float(np.sum(x * y)) for x, y in zip(_leaves(a), _leaves(b)))


def _fd(f, args, vs, eps=1e-6):
    plus = f(*[a + eps * v for a, v in zip(args, vs)])
    minus = f(*[a - eps * v for a, v in zip(args, vs)])
    return tp.tree_map(lambda p, m: (np.asarray(p) - np.asarray(m)) / (2 * eps), plus, minus)


def check_jvp(f, args, seed=0, rtol=1e-6, atol=1e-8, jac=True):
    """The four checks of the module docstring for ``f`` at ``args``."""
    rng = np.random.default_rng(seed)
    args = tuple(np.asarray(a, np.float64) for a in args)
    vs = tuple(rng.standard_normal(np.shape(a)) for a in args)
    y, ty = tp.jvp(f, args, vs)
    u = tp.tree_map(lambda l: rng.standard_normal(np.shape(l)), y)
    _, pullback = tp.vjp(f, *args)
    lhs, rhs = _inner(u, ty), _inner(pullback(u), vs)
    assert np.isclose(lhs, rhs, rtol=rtol, atol=atol), (lhs, rhs)
    for a, b in zip(_leaves(ty), _leaves(_fd(f, args, vs))):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    forward.USE_FAST_RULES = False
    try:
        _, ty_slow = tp.jvp(f, args, vs)
    finally:
        forward.USE_FAST_RULES = True
    for a, b in zip(_leaves(ty), _leaves(ty_slow)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    if jac:
        nums = tuple(range(len(args)))
        jf, jr = tp.jacfwd(f, argnums=nums)(*args), tp.jacrev(f, argnums=nums)(*args)
        for a, b in zip(_leaves(jf), _leaves(jr)):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


UNARY_SHAPES = [(), (3,), (2, 3)]
BINARY_SHAPES = [((2, 3), (2, 3)), ((3, 1), (1, 4)), ((), (2, 3)), ((4,), (3, 4)), ((), ())]


@pytest.mark.parametrize("ufunc", list(UNARY), ids=lambda u: u.__name__)
@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
def test_unary(ufunc, shape):
    check_jvp(ufunc, (rand(shape, UNARY[ufunc], 1),))


@pytest.mark.parametrize("ufunc", list(BINARY), ids=lambda u: u.__name__)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_binary_with_broadcasting(ufunc, shapes):
    dx, dy = BINARY[ufunc]
    x, y = _avoid_kinks(ufunc, rand(shapes[0], dx, 1), rand(shapes[1], dy, 2))
    check_jvp(ufunc, (x, y))


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, True), (-1, False), ((0, 1), False)])
def test_reduction(name, axis, keepdims):
    f = REDUCTIONS[name]
    check_jvp(lambda x: f(x, axis=axis, keepdims=keepdims), (rand((3, 4), "normal", 3),))


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "logsumexp"])
def test_reduction_of_0d(name):
    check_jvp(lambda x: REDUCTIONS[name](x), (rand((), "normal", 4),))


@pytest.mark.parametrize("name", list(CASES))
def test_shape_op(name):
    f, x = CASES[name]
    check_jvp(f, (x,))


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_product(name):
    f, sa, sb = PRODUCTS[name]
    check_jvp(f, (rand(sa, "normal", 7), rand(sb, "normal", 8)))


@pytest.mark.parametrize("sa,sb", [((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)), ((3,), (3,)),
                                   ((2, 2, 3), (3, 4)), ((3,), (2, 3, 4)), ((2, 3), (5, 3, 2)),
                                   ((1, 2, 3), (4, 3, 2)), ((2, 3, 4), (4,))])
def test_matmul_shapes(sa, sb):
    check_jvp(lambda a, b: a @ b, (rand(sa, "normal", 1), rand(sb, "normal", 2)))


@pytest.mark.parametrize("name", list(LINALG))
def test_linalg(name):
    f, make = LINALG[name]
    # eigh's vectors are defined up to sign: finite differences agree
    # because the sweep squares them.
    check_jvp(f, make(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("key", [
    (slice(1, None),), (np.array([0, 2, 2]),), (slice(None), np.array([1, 0])),
    (0, slice(None), np.array([1, 2])), (np.array([0, 1]), slice(None), np.array([1, 2])),
    (Ellipsis, 1), (None, slice(None, 2)), (np.array([[True, False, True, False]] * 3),),
])
def test_indexing_keys(key):
    x = rand((3, 4, 3), "normal", 5)[:, :, 0] if key[-1] is not Ellipsis else rand((3, 4), "normal", 5)
    if len(key) == 3:
        x = rand((2, 3, 4), "normal", 6)
    check_jvp(lambda x: x[key] * 2.0, (x,))


@pytest.mark.parametrize("spec,shapes", EINSUM, ids=[c[0] for c in EINSUM])
def test_einsum(spec, shapes):
    check_jvp(lambda *ops: np.einsum(spec, *ops),
              tuple(rand(s, "normal", k) for k, s in enumerate(shapes)))


@pytest.mark.parametrize("shape,key", KEYS, ids=[str(k) for k in range(len(KEYS))])
def test_indexing_table(shape, key):
    check_jvp(lambda x: x[key] * 1.5, (rand(shape, "normal", 1),))


MISC = {
    "cumsum": (lambda x: np.cumsum(x, axis=1), (3, 4)), "cumprod": (lambda x: np.cumprod(x), (5,)),
    "sort": (lambda x: np.sort(x, axis=0) * np.arange(1.0, 5.0), (3, 4)),
    "median": (lambda x: np.median(x, axis=0), (3, 4)),
    "quantile": (lambda x: np.quantile(x, [0.2, 0.7], axis=1), (3, 5)),
    "clip": (lambda x: np.clip(x, -0.5, 0.6), (3, 4)),
    "where": (lambda x: np.where(x > 0, x ** 2, np.sin(x)), (3, 4)),
    "nan_to_num": (lambda x: np.nan_to_num(x) * 2.0, (3,)),
    "split": (lambda x: np.split(x, 2, axis=1)[1] * np.split(x, 2, axis=1)[0], (3, 4)),
    "norm": (lambda x: np.linalg.norm(x, axis=0), (3, 4)),
}


@pytest.mark.parametrize("name", list(MISC))
def test_misc_ops(name):
    f, shape = MISC[name]
    check_jvp(f, (rand(shape, "normal", 2),), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["expit", "log_expit", "gammaln", "erf", "ndtr", "xlogy"])
def test_scipy_special(name):
    sp = pytest.importorskip("scipy.special")
    f = getattr(sp, name)
    if name == "xlogy":
        check_jvp(f, (rand((3, 1), "pos", 1), rand((4,), "pos", 2)))
    else:
        check_jvp(lambda x: f(x) * 1.5, (rand((2, 3), "pos", 3),))


def test_composite_functions():
    check_jvp(lambda w, b, x: np.sum(np.exp(w @ x + b[:, None])),
              (rand((4, 3), "normal", 1) * 0.1, rand((4,), "normal", 2), rand((3, 5), "normal", 3)))
    check_jvp(lambda x: np.concatenate([np.sin(x), x[::-1] ** 2]) @ np.ones(2 * x.size),
              (rand((3,), "normal", 4),))
    check_jvp(lambda x: np.where(x > 0, x * x, -x), (rand((2, 3), "normal", 5),))


# --- nesting: forward over reverse, reverse over forward, forward over forward ---------
def _f(x):
    return np.sum(np.sin(x) * x ** 3) + np.prod(x[:2])


def test_hessian_against_reverse_over_reverse():
    x = rand((4,), "normal", 1)
    H = tp.hessian(_f)(x)
    H_rr = tp.jacrev(tp.grad(_f))(x)
    np.testing.assert_allclose(H, H_rr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H, H.T, atol=1e-12)


def test_reverse_over_forward_and_forward_over_forward():
    x, v = rand((4,), "normal", 2), rand((4,), "normal", 3)
    H = tp.hessian(_f)(x)
    # d/dx <grad f(x), v> by reverse mode over a jvp
    g = tp.grad(lambda x: tp.jvp(_f, (x,), (v,))[1])(x)
    np.testing.assert_allclose(g, H @ v, rtol=1e-10)
    # v^T H w by jvp of jvp
    w = rand((4,), "normal", 4)
    vhw = tp.jvp(lambda x: tp.jvp(_f, (x,), (v,))[1], (x,), (w,))[1]
    np.testing.assert_allclose(vhw, v @ H @ w, rtol=1e-10)
    # third order: jacfwd of the Hessian against finite differences of it
    # (no indexing in f: scatter_add's forward takes no doubly traced value)
    f3 = lambda x: np.sum(np.sin(x) * x ** 3) * np.sum(x)  # noqa: E731
    T = tp.jacfwd(tp.hessian(f3))(x)
    eps = 1e-5
    fd = np.stack([(tp.hessian(f3)(x + eps * e) - tp.hessian(f3)(x - eps * e)) / (2 * eps)
                   for e in np.eye(4)], axis=-1)
    np.testing.assert_allclose(T, fd, rtol=1e-5, atol=1e-6)


def test_hvp_is_forward_over_reverse_and_keeps_its_signature():
    x, v = rand((5,), "normal", 5), rand((5,), "normal", 6)
    np.testing.assert_allclose(tp.hessian_vector_product(_f)(x, v), tp.hessian(_f)(x) @ v,
                               rtol=1e-12)
    f2 = lambda a, b: np.sum(np.tanh(a) * b ** 2)  # noqa: E731
    a, b = rand((3,), "normal", 7), rand((3,), "normal", 8)
    va, vb = rand((3,), "normal", 9), rand((3,), "normal", 10)
    ha, hb = tp.hessian_vector_product(f2, argnums=(0, 1))(a, b, (va, vb))
    H = tp.hessian(f2, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ha, H[0][0] @ va + H[0][1] @ vb, rtol=1e-12)
    np.testing.assert_allclose(hb, H[1][0] @ va + H[1][1] @ vb, rtol=1e-12)


# --- custom rules -------------------------------------------------------------------------
def test_custom_vjp_with_differentiable_backward_works_in_forward_mode():
    @tp.custom_vjp
    def cube(x):
        return x ** 3

    cube.defvjp(lambda x: (x ** 3, x), lambda x, g: (3 * x ** 2 * g,))
    x, v = rand((3,), "normal", 1), rand((3,), "normal", 2)
    np.testing.assert_allclose(tp.jvp(cube, (x,), (v,))[1], 3 * x ** 2 * v, rtol=1e-12)
    np.testing.assert_allclose(tp.hessian(lambda x: np.sum(cube(x)))(x), np.diag(6 * x),
                               atol=1e-12)


def test_custom_vjp_with_opaque_backward_is_refused_by_name():
    @tp.custom_vjp
    def opaque(x):
        return np.sin(x)

    opaque.defvjp(lambda x: (np.sin(x), x), lambda x, g: (np.asarray(g) * np.cos(x),))
    with pytest.raises(TypeError, match=r"custom_vjp function 'opaque'.*custom_jvp"):
        tp.jvp(opaque, (np.ones(2),), (np.ones(2),))
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(opaque(x)))(np.ones(2)), np.cos(1.0))


def test_checkpoint_in_forward_mode():
    f = tp.checkpoint(lambda x: np.tanh(x) * x)
    x, v = rand((4,), "normal", 3), rand((4,), "normal", 4)
    np.testing.assert_allclose(tp.jvp(f, (x,), (v,))[1],
                               (np.tanh(x) + x * (1 - np.tanh(x) ** 2)) * v, rtol=1e-12)


def test_custom_jvp_in_both_modes():
    calls = []

    @tp.custom_jvp
    def softplus(x):
        return np.log1p(np.exp(x))

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        calls.append(1)
        return softplus(x), t / (1 + np.exp(-x))

    x, v = np.array([-1.0, 0.5, 2.0]), np.array([1.0, 2.0, 3.0])
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(tp.jvp(softplus, (x,), (v,))[1], s * v, rtol=1e-12)
    assert calls  # the rule, not the traced body, gave the tangent
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(softplus(x)))(x), s, rtol=1e-12)
    np.testing.assert_allclose(tp.hessian(lambda x: np.sum(softplus(x)))(x), np.diag(s * (1 - s)),
                               atol=1e-12)
    np.testing.assert_allclose(tp.jacfwd(softplus)(x), np.diag(s), atol=1e-12)
    check_jvp(lambda x: softplus(x) * x, (x,))


def test_custom_jvp_several_outputs_and_missing_rule():
    @tp.custom_jvp
    def both(x, y):
        return x * y, x + y

    @both.defjvp
    def both_jvp(p, t):
        (x, y), (tx, ty) = p, t
        return both(x, y), (tx * y + x * ty, tx + ty)

    x = rand((3,), "normal", 1)
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(both(x, x)[0] * both(x, 1.0)[1]))(x),
                               3 * x ** 2 + 2 * x, rtol=1e-12)
    check_jvp(lambda x, y: both(x, y)[0] - both(y, x)[1] ** 2, (x, rand((3,), "normal", 2)))

    @tp.custom_jvp
    def norule(x):
        return x * 2

    assert norule(3.0) == 6.0
    with pytest.raises(TypeError, match="norule has no rule"):
        tp.grad(norule)(1.0)


_CM = np.array([[1.0 + 0.5j, -0.3, 0.2j], [0.1, 2.0 - 1j, 0.4], [0.3j, -0.2, 1.5 + 0.2j]])
COMPLEX_JVP_CASES = {  # name -> f of a complex vector (3,); non-holomorphic ones included
    "sin": lambda z: np.sin(z), "exp times z": lambda z: np.exp(z) * z,
    "abs": lambda z: np.abs(z), "abs squared": lambda z: np.abs(z) ** 2,
    "real times imag": lambda z: np.real(z) * np.imag(z), "conj": lambda z: np.conj(z) * z,
    "angle": lambda z: np.angle(z), "log sqrt": lambda z: np.log(z) + np.sqrt(z),
    "power": lambda z: z ** 2.5, "reciprocal": lambda z: 1 / (z + 2),
    "matmul": lambda z: _CM @ z, "sum": lambda z: np.sum(z * z),
    "mean abs": lambda z: np.mean(np.abs(z)), "sign": lambda z: np.sign(z),
    "tanh cumsum": lambda z: np.cumsum(np.tanh(z)), "solve": lambda z: np.linalg.solve(_CM, z),
    "norm": lambda z: np.linalg.norm(z), "vdot": lambda z: np.vdot(z, z),
    "inv": lambda z: np.linalg.inv(np.outer(z, z) + _CM), "where": lambda z: np.where(
        np.real(z) > 0, z, z * z), "fft": lambda z: np.fft.fft(z),
    "abs ifft": lambda z: np.abs(np.fft.ifft(z * z)), "det": lambda z: np.linalg.det(_CM + np.diag(z)),
}
REAL_THROUGH_COMPLEX = {  # real vector (4,) -> real, through complex intermediates
    "power spectrum": lambda x: np.abs(np.fft.fft(x)) ** 2,
    "rfft parts": lambda x: np.real(np.fft.rfft(x)) + np.imag(np.fft.rfft(x)),
    "phasor": lambda x: np.real(np.exp(1j * x) * (1 + 2j)),
    "abs of shifted": lambda x: np.abs(x * (1 + 1j) + 0.3j),
}


def _central(f, x, t, h=1e-6):
    return (np.asarray(f(x + h * t)) - np.asarray(f(x - h * t))) / (2 * h)


@pytest.mark.parametrize("name", list(COMPLEX_JVP_CASES) + list(REAL_THROUGH_COMPLEX))
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_jvp_of_complex_values_against_finite_differences(name, dtype):
    """Complex inputs along complex directions, and real inputs through
    complex intermediates: the tangent is the directional derivative, of
    the output's dtype (a real output's tangent is real: the part of a
    transposed rule's complex cotangent that a real value pairs with)."""
    r = np.random.default_rng(7)
    if name in COMPLEX_JVP_CASES:
        f = COMPLEX_JVP_CASES[name]
        x = (r.normal(size=3) + 1j * r.normal(size=3)).astype(dtype)
        t = (r.normal(size=3) + 1j * r.normal(size=3)).astype(dtype)
    else:
        f = REAL_THROUGH_COMPLEX[name]
        real = np.float64 if dtype == np.complex128 else np.float32
        x, t = r.normal(size=4).astype(real), r.normal(size=4).astype(real)
    y, ty = tp.jvp(f, (x,), (t,))
    assert np.asarray(ty).dtype == np.asarray(f(x)).dtype
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    tol = 1e-6 if dtype == np.complex128 else 2e-3
    np.testing.assert_allclose(ty, _central(f, x.astype(wide), t.astype(wide)), rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(y, f(x), rtol=1e-13 if dtype == np.complex128 else 1e-6)
    assert np.asarray(y).dtype == np.asarray(f(x)).dtype  # (1j * float32 is complex64)


def test_jacfwd_hessian_of_complex_intermediates_and_refusal_of_complex_inputs():
    """jacfwd of real inputs through complex values equals jacrev; a complex
    input is refused by name (real unit tangents see its real axis only),
    as JAX's jacfwd does without holomorphic=True."""
    x = np.array([0.1, 0.5, -0.3, 0.8])
    for f in REAL_THROUGH_COMPLEX.values():
        np.testing.assert_allclose(tp.jacfwd(f)(x), tp.jacrev(f)(x), rtol=1e-12, atol=1e-12)
    with pytest.raises(NotImplementedError, match="jacfwd: complex inputs"):
        tp.jacfwd(lambda z: z * z)(np.array([1 + 1j]))
    g = lambda z: np.sum(np.abs(z) ** 4)  # noqa: E731
    z, v = np.array([1 + 1j, 2 - 1j]), np.array([1.0 + 0.5j, 0.3])
    want = (tp.grad(g)(z + 1e-6 * v) - tp.grad(g)(z - 1e-6 * v)) / 2e-6
    np.testing.assert_allclose(tp.hessian_vector_product(g)(z, v), want, rtol=1e-6)


LINEAR_CASES = {  # name -> (function of x, shape of x); jacfwd runs their batching rules
    "sum axis": (lambda x: np.sum(x, axis=(0, -1)), (2, 3, 4)),
    "mean keepdims": (lambda x: np.mean(x, axis=1, keepdims=True), (3, 4)),
    "reshape": (lambda x: np.reshape(x, (4, -1)), (2, 3, 2)),
    "transpose": (lambda x: np.transpose(x, (2, 0, 1)), (2, 3, 4)),
    "transpose None": (lambda x: x.T, (2, 3, 4)),
    "swapaxes": (lambda x: np.swapaxes(x, 0, -1), (2, 3, 4)),
    "moveaxis": (lambda x: np.moveaxis(x, (0, 1), (-1, 0)), (2, 3, 4)),
    "broadcast_to": (lambda x: np.broadcast_to(x, (2, 3, 4)), (3, 1)),
    "flip": (lambda x: np.flip(x, axis=(0, 2)), (2, 3, 4)),
    "roll": (lambda x: np.roll(x, 2, axis=1), (3, 4)),
    "roll flat": (lambda x: np.roll(x, 5), (3, 4)),
    "tile": (lambda x: np.tile(x, (2, 1, 3)), (3, 2)),
    "repeat": (lambda x: np.repeat(x, 2, axis=-1), (3, 2)),
    "diagonal": (lambda x: np.diagonal(x, 1, 2, 0), (3, 2, 4)),
    "triu": (lambda x: np.triu(x, -1), (2, 3, 4)),
    "getitem slices": (lambda x: x[1:, ::-1, None], (3, 4)),
    "getitem array": (lambda x: x[:, [2, 0, 0]], (3, 4)),
    "getitem arrays apart": (lambda x: x[[0, 1], :, [1, 1]], (2, 3, 4)),
    "getitem mask": (lambda x: x[np.array([True, False, True])], (3, 2)),
    "matmul": (lambda x: x @ np.arange(12.0).reshape(4, 3), (2, 3, 4)),
    "matmul right": (lambda x: np.arange(6.0).reshape(2, 3) @ x, (5, 3, 4)),
    "matmul vectors": (lambda x: np.arange(4.0) @ x @ np.arange(3.0), (4, 3)),
    "matmul self": (lambda x: x @ x, (3, 3)),
    "tensordot": (lambda x: np.tensordot(x, np.ones((4, 3, 2)), ([1, 2], [0, 1])), (2, 4, 3)),
    "tensordot right": (lambda x: np.tensordot(np.ones((2, 5)), x, (1, 2)), (3, 4, 5)),
}


@pytest.mark.parametrize("name", sorted(LINEAR_CASES))
def test_batched_linear_rules_match_reverse_mode(name):
    """jacfwd pushes a batch of tangents through each linear primitive with
    its batching rule (``Primitive.batch``); jacrev sweeps once per output."""
    f, shape = LINEAR_CASES[name]
    x = rand(shape, "normal", 7)
    np.testing.assert_allclose(tp.jacfwd(f)(x), tp.jacrev(f)(x), rtol=1e-12, atol=1e-12)


# --- pytrees and has_aux (also compared with JAX in test_forward_jax.py) -----------------
def test_jvp_linearize_and_jacobians_with_pytrees_and_aux():
    p = {"W": rand((2, 3), "normal", 1), "b": rand((2,), "normal", 2)}
    x = rand((3,), "normal", 3)
    tp_ = {"W": rand((2, 3), "normal", 4), "b": rand((2,), "normal", 5)}

    def f(p):
        h = np.tanh(p["W"] @ x + p["b"])
        return {"h": h, "s": (np.sum(h ** 2),)}, {"mean": np.mean(h)}

    y, ty, aux = tp.jvp(f, (p,), (tp_,), has_aux=True)
    assert set(ty) == {"h", "s"} and type(aux["mean"]) is np.float64
    dh = (1 - y["h"] ** 2) * (tp_["W"] @ x + tp_["b"])
    np.testing.assert_allclose(ty["h"], dh, rtol=1e-12)
    np.testing.assert_allclose(ty["s"][0], np.sum(2 * y["h"] * dh), rtol=1e-12)
    y2, f_jvp, aux2 = tp.linearize(f, p, has_aux=True)
    np.testing.assert_allclose(f_jvp(tp_)["h"], dh, rtol=1e-12)
    np.testing.assert_allclose(aux2["mean"], aux["mean"])
    J, auxj = tp.jacfwd(f, has_aux=True)(p)
    Jr, _ = tp.jacrev(f, has_aux=True)(p)
    assert J["h"]["W"].shape == (2, 2, 3) and J["s"][0]["b"].shape == (2,)
    for a, b in zip(tp.tree_flatten(J)[0], tp.tree_flatten(Jr)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    H, auxh = tp.hessian(lambda p: (f(p)[0]["s"][0], 1.0), has_aux=True)(p)
    assert H["W"]["b"].shape == (2, 3, 2) and auxh == 1.0


def test_linearize_tangent_errors_and_zero_tangent_outputs():
    y, f_jvp = tp.linearize(lambda x, c: (np.sin(x), c * 2.0), np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="takes 2 tangents"):
        f_jvp(np.ones(2))
    t = f_jvp(np.ones(2), np.zeros(3))
    np.testing.assert_allclose(t[0], np.cos(1.0))
    np.testing.assert_array_equal(t[1], np.zeros(3))


def test_threads_get_the_serial_results():
    from concurrent.futures import ThreadPoolExecutor
    xs = [rand((5,), "normal", s) for s in range(8)]
    serial = [(tp.hessian(_f)(x), tp.jvp(_f, (x,), (x,))[1]) for x in xs]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda x: (tp.hessian(_f)(x), tp.jvp(_f, (x,), (x,))[1]), xs))
    for (h1, t1), (h2, t2) in zip(serial, threaded):
        np.testing.assert_array_equal(h1, h2)
        assert t1 == t2


def test_reverse_over_batched_forward():
    """grad through jacfwd / hessian (batched tangents that are themselves
    traced by the outer grad), against finite differences."""
    from tapestry.testing import check_grads
    A, W = rand((5, 3), "normal", 1), rand((3, 3), "normal", 2)
    x = rand((3,), "normal", 3)
    g = lambda x: np.tanh(A @ x) * x[0] + np.sum(x ** 2)  # noqa: E731
    check_grads(lambda x: np.sum(tp.jacfwd(g)(x) ** 2), (x,))
    check_grads(lambda x: np.sum(tp.hessian(lambda x: np.sum(np.sin(A @ x) ** 3))(x)), (x,))
    check_grads(lambda W: np.sum(tp.jacfwd(lambda x: np.tanh(W @ x))(x) ** 2), (W,))


def test_a_cotangent_transposition_cannot_read_is_refused():
    """A joint rule returning a cotangent type other than arrays (parallel_map's
    slot dicts did) was taken as a zero tangent: silently wrong."""
    from tapestry.core.backward import JointRule
    from tapestry.core.primitive import record

    class Box:
        def __init__(self, g):
            self.g = g

    def doubled(x):
        return record(x._tape, x._value * 2.0, [x._index],
                      JointRule(lambda g, ans: [Box(2.0 * g)]), (), {})
    x = np.arange(3.0)
    with pytest.raises(TypeError, match="cotangent of type Box"):
        tp.jvp(doubled, (x,), (np.ones(3),))


def _float32_unary_ops():
    import tapestry.scipy.special as sp
    special = [sp.erf, sp.erfc, sp.ndtr, sp.log_ndtr, sp.gammaln, sp.digamma, sp.expit,
               sp.erfcx, sp.i0e, sp.i1e, sp.ndtri]
    return [pytest.param(op, id=getattr(op, "__name__", str(op))) for op in list(UNARY) + special]


@pytest.mark.parametrize("op", _float32_unary_ops())
def test_float32_tangents_stay_float32(op):
    """A float32 output's tangent is float32 (docs/forward.md), also where the
    rule multiplies by a float64 constant (erf's 2/sqrt(pi) made jvp, jacfwd
    and linearize of erf, erfc, ndtr, log_ndtr float64)."""
    x = np.array([0.2, 0.35, 0.45], np.float32) + (1.0 if op is np.arccosh else 0.0)
    y, t = tp.jvp(op, (x,), (np.ones_like(x),))
    assert y.dtype == np.float32 and t.dtype == np.float32, (y.dtype, t.dtype)
    assert tp.jacfwd(op)(x).dtype == np.float32
    assert tp.linearize(op, x)[1](x).dtype == np.float32


def test_complex_jvp_and_holomorphic_grad_composed_both_ways():
    """jvp of complex values and holomorphic grad inside and around jit and
    vmap, complex64 under a nested transform, a float32 Hessian through an FFT."""
    f = lambda z: np.log(z) * np.conj(z) + np.abs(z)  # noqa: E731
    z, v = np.array([1 + 1j, 2 - 0.5j]), np.array([1j, 0.5 + 0j])
    want = tp.jvp(f, (z,), (v,))[1]
    zs, vs = np.stack([z, 2 * z]), np.stack([v, v])
    np.testing.assert_allclose(tp.jvp(tp.jit(f), (z,), (v,))[1], want, rtol=1e-13)
    np.testing.assert_allclose(tp.jit(lambda z, v: tp.jvp(f, (z,), (v,))[1])(z, v), want,
                               rtol=1e-13)
    np.testing.assert_allclose(tp.jvp(tp.vmap(f), (zs,), (vs,))[1][0], want, rtol=1e-13)
    np.testing.assert_allclose(tp.vmap(lambda z, v: tp.jvp(f, (z,), (v,))[1])(zs, vs)[1],
                               tp.jvp(f, (2 * z,), (v,))[1], rtol=1e-13)
    got = tp.jvp(tp.jit(f), (z.astype(np.complex64),), (v.astype(np.complex64),))[1]
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, want, rtol=1e-5)
    g = lambda z: np.sum(np.sin(z) * z)  # noqa: E731
    gh = tp.grad(g, holomorphic=True)
    np.testing.assert_allclose(tp.vmap(gh)(zs)[1], gh(2 * z), rtol=1e-13)
    np.testing.assert_allclose(tp.jit(gh)(z), gh(z), rtol=1e-13)
    np.testing.assert_allclose(tp.grad(tp.jit(g), holomorphic=True)(z), gh(z), rtol=1e-13)
    np.testing.assert_allclose(tp.grad(lambda z: np.sum(tp.vmap(lambda w: np.sin(w) * w)(z)),
                                       holomorphic=True)(z), gh(z), rtol=1e-13)
    x = np.array([0.1, 0.5, -0.3, 0.8])
    p = lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2 * np.arange(4.0, dtype=x.dtype))  # noqa: E731
    h32 = tp.hessian(p)(x.astype(np.float32))
    assert h32.dtype == np.float32
    np.testing.assert_allclose(h32, tp.hessian(p)(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tp.hessian_vector_product(tp.jit(p))(x, np.ones(4)),
                               tp.hessian(p)(x) @ np.ones(4), rtol=1e-12)
