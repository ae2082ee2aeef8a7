"""Every elementwise rule against finite differences, over random shapes
(0-d, size-0, broadcasting), float64/float32 and non-contiguous inputs."""
import numpy as np
import pytest
from hypothesis import given, settings

import tapestry as tp
from tapestry.testing import check_grads
from sweep import SWEEP, broadcast_pair, check_all, crand, rand, shapes

UNARY = {
    np.negative: "normal", np.positive: "normal", np.reciprocal: "away",
    np.square: "normal", np.conjugate: "normal", np.exp: "normal", np.exp2: "normal",
    np.expm1: "normal", np.log: "pos", np.log2: "pos", np.log10: "pos", np.log1p: "pos",
    np.sqrt: "pos", np.cbrt: "away", np.sin: "normal", np.cos: "normal", np.tan: "unit",
    np.arcsin: "unit", np.arccos: "unit", np.arctan: "normal", np.sinh: "normal",
    np.cosh: "normal", np.tanh: "normal", np.arcsinh: "normal", np.arccosh: "gt1",
    np.arctanh: "unit", np.deg2rad: "normal", np.rad2deg: "normal", np.radians: "normal",
    np.degrees: "normal", np.absolute: "away", np.fabs: "away", np.sinc: "away",
    np.nan_to_num: "normal",
}

BINARY = {
    np.add: ("normal", "normal"), np.subtract: ("normal", "normal"),
    np.multiply: ("normal", "normal"), np.true_divide: ("normal", "away"),
    np.power: ("pos", "normal"), np.float_power: ("pos", "normal"),
    np.logaddexp: ("normal", "normal"), np.logaddexp2: ("normal", "normal"),
    np.arctan2: ("away", "away"), np.hypot: ("away", "away"),
    np.maximum: ("normal", "normal"), np.minimum: ("normal", "normal"),
    np.fmax: ("normal", "normal"), np.fmin: ("normal", "normal"),
    np.copysign: ("away", "away"), np.fmod: ("pos", "pos"), np.remainder: ("pos", "pos"),
    np.heaviside: ("away", "normal"),
}


@pytest.mark.parametrize("ufunc", list(UNARY), ids=lambda u: u.__name__)
@SWEEP
@given(shape=shapes())
def test_unary_rule(ufunc, shape):
    check_all(ufunc, rand(shape, UNARY[ufunc]))


def _avoid_kinks(ufunc, x, y):
    # fmod/remainder jump where x/y is an integer; copysign's y only matters by sign.
    if ufunc in (np.fmod, np.remainder):
        y = y + 3.0
    return x, y


@pytest.mark.parametrize("ufunc", list(BINARY), ids=lambda u: u.__name__)
@SWEEP
@given(pair=broadcast_pair())
def test_binary_rule_with_broadcasting(ufunc, pair):
    dx, dy = BINARY[ufunc]
    x, y = _avoid_kinks(ufunc, rand(pair[0], dx, 1), rand(pair[1], dy, 2))
    check_all(ufunc, x, y)


@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.power, np.maximum],
                         ids=lambda u: u.__name__)
def test_binary_rule_with_python_scalars(ufunc):
    x = rand((3, 2), "pos")
    check_all(lambda x: ufunc(x, 2.5), x)
    check_all(lambda x: ufunc(1.5, x), x)


def test_power_derivative_at_zero_base():
    assert tp.grad(lambda x: x ** 2.0)(0.0) == 0.0
    assert tp.grad(lambda x: np.sum(x ** 0))(np.zeros(2)).tolist() == [0.0, 0.0]
    # d/dy 0**y is 0 (limit from the right), not nan.
    assert tp.grad(lambda y: np.power(0.0, y), argnums=0)(2.0) == 0.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_heaviside_is_its_second_argument_at_zeros(dtype):
    """heaviside(x, h) is h where x == 0: its derivative in h is 1 there
    (was: declared constant, a silent zero), 0 elsewhere and in x."""
    x = np.array([[-1.0, 0.0, 2.0], [0.0, 0.5, 0.0]], dtype)
    h = np.array([0.3, 0.6, 0.9], dtype)
    check_all(lambda h: np.heaviside(x, h), h)      # broadcasting h against x
    check_grads(lambda h: np.heaviside(x[0], h), (dtype(0.5),))    # 0-d h
    assert tp.grad(lambda h: np.sum(np.heaviside(x, h)))(h).tolist() == [1.0, 1.0, 1.0]
    assert tp.grad(lambda x: np.sum(np.heaviside(x, h)))(x).tolist() == [[0.0] * 3] * 2
    np.testing.assert_array_equal(tp.jacfwd(lambda h: np.heaviside(x[1], h))(h),
                                  np.diag([1.0, 0.0, 1.0]))


def test_abs_at_zero_is_zero():
    assert tp.grad(lambda x: np.sum(np.abs(x)))(np.array([0.0, -2.0, 3.0])).tolist() == \
        [0.0, -1.0, 1.0]


def test_maximum_ties_split_evenly():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 5.0, 0.0])
    gx, gy = tp.grad(lambda x, y: np.sum(np.maximum(x, y)), argnums=(0, 1))(x, y)
    assert gx.tolist() == [0.5, 0.0, 1.0] and gy.tolist() == [0.5, 1.0, 0.0]
    assert tp.grad(lambda x: np.maximum(x, x))(2.0) == 1.0


def test_fmax_ignores_nan_operand():
    gx, gy = tp.grad(lambda x, y: np.sum(np.fmax(x, y)), argnums=(0, 1))(
        np.array([np.nan, 1.0]), np.array([2.0, np.nan]))
    assert gx.tolist() == [0.0, 1.0] and gy.tolist() == [1.0, 0.0]


# --- clip -----------------------------------------------------------------------
@SWEEP
@given(pair=broadcast_pair())
def test_clip_rule_all_arguments(pair):
    x = rand(pair[0], "normal", 3)
    lo = rand(pair[1], "normal", 4) - 0.5
    check_all(lambda x, lo: np.clip(x, lo, lo + 1.0), x, lo)


@pytest.mark.parametrize("lo,hi", [(None, 0.3), (-0.3, None), (-0.2, 0.4)])
def test_clip_with_none_bounds(lo, hi):
    x = rand((4, 3), "normal", 5)
    check_all(lambda x: np.clip(x, lo, hi), x)
    check_all(lambda x: x.clip(lo, hi), x)


def test_clip_boundary_convention():
    # The gradient passes to x on the closed interval [lo, hi].
    g = tp.grad(lambda x: np.sum(np.clip(x, 0.0, 1.0)))(np.array([-1.0, 0.0, 0.5, 1.0, 2.0]))
    assert g.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    glo = tp.grad(lambda lo: np.sum(np.clip(np.array([-1.0, 0.0, 3.0]), lo, 1.0)))(0.0)
    assert glo == 1.0  # only the strictly-below entry


def test_clip_out_raises():
    with pytest.raises(TypeError, match="np.clip.*out="):
        tp.grad(lambda x: np.sum(np.clip(x, 0, 1, out=np.empty(2))))(np.ones(2))


# --- where, astype, nan_to_num -------------------------------------------------------
@SWEEP
@given(pair=broadcast_pair())
def test_where_rule(pair):
    x, y = rand(pair[0], "normal", 6), rand(pair[1], "normal", 7)
    cond = rand(np.broadcast_shapes(*pair), "normal", 8) > 0
    check_all(lambda x, y: np.where(cond, x, y), x, y)


def test_where_with_traced_condition_uses_its_value():
    x = np.array([-1.0, 2.0])
    g = tp.grad(lambda x: np.sum(np.where(x, x * 3, 0.0)))(x)
    assert g.tolist() == [3.0, 3.0]
    assert tp.grad(lambda x: np.sum(x * len(np.where(x > 0)[0])))(x).tolist() == [1.0, 1.0]


def test_astype_float_keeps_gradient_dtype():
    x = rand((3,), "normal", 9)
    check_grads(lambda x: x.astype(np.float32) * 2, (x,), eps=1e-3, rtol=1e-3, atol=1e-3)
    g = tp.grad(lambda x: np.sum(x.astype(np.float64) ** 2))(x.astype(np.float32))
    assert g.dtype == np.float32


def test_nan_to_num_zero_gradient_at_nonfinite():
    x = np.array([1.0, np.nan, np.inf, -2.0])
    assert tp.grad(lambda x: np.sum(np.nan_to_num(x) * 0.5))(x).tolist() == [0.5, 0, 0, 0.5]


# --- non-differentiable ops are constants ----------------------------------------------
@pytest.mark.parametrize("op", [
    lambda x: x > 0, lambda x: np.equal(x, 1.0), lambda x: np.argmax(x),
    lambda x: np.floor(x), lambda x: np.round(x), lambda x: np.sign(x),
    lambda x: x.astype(int), lambda x: np.isfinite(x), lambda x: np.argsort(x),
    lambda x: np.ceil(x), lambda x: x // 2.0,
])
def test_nondifferentiable_ops_return_plain_arrays(op):
    seen = []

    def f(x):
        c = op(x)
        seen.append(c)
        return np.sum(x * 2.0)
    g = tp.grad(f)(np.array([0.5, -1.5, 2.0]))
    assert type(seen[0]) in (np.ndarray, np.bool_, np.intp, np.int64, np.float64)
    assert g.tolist() == [2.0, 2.0, 2.0]


def test_missing_rule_names_the_ufunc_and_custom_vjp():
    with pytest.raises(NotImplementedError, match=r"np\.nextafter.*custom_vjp"):
        tp.grad(lambda x: np.sum(np.nextafter(x, 2 * x)))(np.ones(2))


# --- second derivatives: the rules are themselves differentiable ----------------------
@pytest.mark.parametrize("f,domain", [
    (np.tanh, "normal"), (np.exp, "normal"), (np.sin, "normal"), (np.log, "pos"),
    (np.sqrt, "pos"), (lambda x: x * x * x, "normal"), (lambda x: x / (1.0 + x * x), "normal"),
    (lambda x: np.power(x, 2.5), "pos"), (lambda x: np.logaddexp(x, 2 * x), "normal"),
    (np.arctan, "normal"), (lambda x: np.maximum(x, 0.1) ** 2, "away"),
], ids=lambda f: getattr(f, "__name__", "f"))
def test_second_derivatives(f, domain):
    x = rand((3,), domain, 11)
    check_grads(f, (x,), order=2)
    check_grads(f, (x.astype(np.float32),), order=2)


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {*UNARY, *BINARY, np.clip, np.where, "astype"}

# --- complex inputs: every rule above on complex values, or NumPy's refusal ------------
# Domains of sweep.crand; REFUSED where NumPy has no complex loop (tapestry then
# raises NumPy's TypeError, naming the ufunc).  docs/complex.md gives the convention.
REFUSED = "refused"
COMPLEX_UNARY = {
    np.negative: "normal", np.positive: "normal", np.reciprocal: "away",
    np.square: "normal", np.conjugate: "normal", np.exp: "normal", np.exp2: "normal",
    np.expm1: "normal", np.log: "pos", np.log2: "pos", np.log10: "pos", np.log1p: "pos",
    np.sqrt: "pos", np.cbrt: REFUSED, np.sin: "normal", np.cos: "normal", np.tan: "unit",
    np.arcsin: "unit", np.arccos: "unit", np.arctan: "unit", np.sinh: "normal",
    np.cosh: "normal", np.tanh: "unit", np.arcsinh: "unit", np.arccosh: "gt1",
    np.arctanh: "unit", np.deg2rad: REFUSED, np.rad2deg: REFUSED, np.radians: REFUSED,
    np.degrees: REFUSED, np.absolute: "away", np.fabs: REFUSED, np.sinc: "away",
    np.nan_to_num: "normal", np.sign: "away", np.angle: "away", np.real: "normal",
    np.imag: "normal", np.real_if_close: "normal",
    np.modf: REFUSED, np.frexp: REFUSED,  # composites (tapestry/ops/elementwise.py)
}
COMPLEX_BINARY = {
    np.add: ("normal", "normal"), np.subtract: ("normal", "normal"),
    np.multiply: ("normal", "normal"), np.true_divide: ("normal", "away"),
    np.power: ("pos", "normal"), np.float_power: ("pos", "normal"),
    np.logaddexp: REFUSED, np.logaddexp2: REFUSED, np.arctan2: REFUSED, np.hypot: REFUSED,
    # complex maximum & co. select by NumPy's lexicographic order: a selection
    np.maximum: ("normal", "normal"), np.minimum: ("normal", "normal"),
    np.fmax: ("normal", "normal"), np.fmin: ("normal", "normal"),
    np.copysign: REFUSED, np.fmod: REFUSED, np.remainder: REFUSED, np.heaviside: REFUSED,
    np.divmod: REFUSED, np.ldexp: REFUSED,  # composites (tapestry/ops/elementwise.py)
}
COMPLEX_SWEEP = SWEEP


def test_every_numpy_ufunc_rule_has_a_complex_entry():
    from tapestry.core.registry import UFUNCS
    from tapestry.coverage.refused import Refused
    ufuncs = {u for u, impl in UFUNCS.items() if getattr(np, u.__name__, None) is u
              and u.signature is None and not isinstance(impl, Refused)}
    missing = ufuncs - set(COMPLEX_UNARY) - set(COMPLEX_BINARY)
    assert not missing, f"add a complex domain or REFUSED for {sorted(u.__name__ for u in missing)}"


@pytest.mark.parametrize("fn", [f for f, d in COMPLEX_UNARY.items() if d != REFUSED],
                         ids=lambda u: u.__name__)
@COMPLEX_SWEEP
@given(shape=shapes())
def test_unary_rule_complex(fn, shape):
    check_all(fn, crand(shape, COMPLEX_UNARY[fn]))


@pytest.mark.parametrize("ufunc", [f for f, d in COMPLEX_BINARY.items() if d != REFUSED],
                         ids=lambda u: u.__name__)
@COMPLEX_SWEEP
@given(pair=broadcast_pair())
def test_binary_rule_complex(ufunc, pair):
    dx, dy = COMPLEX_BINARY[ufunc]
    check_all(ufunc, crand(pair[0], dx, 1), crand(pair[1], dy, 2))


@pytest.mark.parametrize("ufunc", [f for f, d in COMPLEX_BINARY.items() if d != REFUSED],
                         ids=lambda u: u.__name__)
def test_binary_rule_real_and_complex_operands(ufunc):
    # A real operand meeting a complex one: its gradient is exact and real.
    dx, dy = COMPLEX_BINARY[ufunc]
    if ufunc not in (np.maximum, np.minimum, np.fmax, np.fmin):
        check_all(ufunc, rand((3, 1), dx, 3), crand((4,), dy, 4))
    check_all(ufunc, crand((2, 3), dx, 5), rand((3,), "pos", 6))
    check_all(lambda z: ufunc(z, 1.5 - 0.5j), crand((3,), dx, 7))


@pytest.mark.parametrize("fn", [f for f, d in COMPLEX_UNARY.items() if d == REFUSED] +
                         [f for f, d in COMPLEX_BINARY.items() if d == REFUSED],
                         ids=lambda u: u.__name__)
def test_refuses_complex_by_name(fn):
    z = crand((3,), "pos", 8)
    call = (lambda z: fn(z, z)) if fn.nin == 2 else fn
    with pytest.raises(TypeError, match=fn.__name__):
        tp.grad(lambda z: np.sum(np.abs(call(z))))(z)


@pytest.mark.parametrize("fn,domain", [
    *((f, d) for f, d in COMPLEX_UNARY.items() if d != REFUSED),
    *((lambda z, f=f, d=d: f(z, crand((3,), d[1], 99)), d[0])
      for f, d in COMPLEX_BINARY.items() if d != REFUSED),
    *((lambda z, f=f, d=d: f(crand((3,), d[0], 98), z), d[1])
      for f, d in COMPLEX_BINARY.items() if d != REFUSED),
    (lambda z: z ** (1.5 + 0.5j), "pos"), (lambda z: np.power(1.5 + 0.5j, z), "normal"),
    (lambda z: z * np.conj(z) / (1 + z), "pos"), (lambda z: np.abs(z) ** 2, "normal"),
], ids=lambda f: getattr(f, "__name__", "f"))
def test_second_derivatives_complex(fn, domain):
    check_all(fn, crand((3,), domain, 9), order=2)


def test_clip_and_where_complex():
    z, lo = crand((4, 3), "normal", 10), crand((3,), "normal", 11)
    check_all(lambda z, lo: np.clip(z, lo, lo + 1), z, lo)  # lexicographic, as NumPy
    cond = rand((4, 3), "normal", 12) > 0
    check_all(lambda z, x: np.where(cond, z, x), z, rand((3,), "normal", 13))


@pytest.mark.parametrize("ufunc", [np.power, np.float_power])
def test_power_of_negative_real_base_with_complex_exponent(ufunc):
    # the result is complex (principal branch): d/dy uses log(x) of x as complex
    check_all(ufunc, -rand((3, 1), "pos", 14), crand((4,), "normal", 15), order=2)
    check_all(lambda y: ufunc(-2.0, y), crand((3,), "normal", 16))


# complex-only rules swept above (real/imag: test_ops_shape.py's SWEPT)
SWEPT |= {np.angle, np.sign, np.real_if_close}


# --- Python's divmod and round, ufunc where= ------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_builtin_divmod_on_traced_values(dtype):
    """divmod(x, y) = (x // y, x % y): the quotient is piecewise constant, the
    remainder has derivative 1 in x and -floor(x / y) in y."""
    x = np.array([1.3, 2.6, -0.45, 4.9], dtype)  # away from the jumps of x % y
    y = np.array([0.7, -0.9, 0.4, 1.7], dtype)
    check_grads(lambda x, y: divmod(x, y)[1], (x, y))
    check_grads(lambda y: divmod(2.5, y)[1], (y,))  # __rdivmod__
    check_grads(lambda x: divmod(x, 0.7)[1], (np.array(1.3, dtype),))  # 0-d
    gx, gy = tp.grad(lambda x, y: np.sum(divmod(x, y)[1]), argnums=(0, 1))(x, y)
    assert np.array_equal(gx, np.ones_like(x)) and np.allclose(gy, -np.floor(x / y))
    q = []
    tp.grad(lambda x: (q.append(divmod(x, y)[0]), np.sum(x))[1])(x)
    assert type(q[0]) is np.ndarray and np.array_equal(q[0], x // y)  # a constant


@pytest.mark.parametrize("rnd", [
    lambda x: round(x[0]) * x[1], lambda x: round(x[0], 1) * x[1],
    lambda x: np.sum(np.round(x) * x), lambda x: np.sum(np.around(x, 1) * x),
    lambda x: np.sum(x.round() * x),
], ids=["round", "round_ndigits", "np.round", "np.around", "method"])
def test_round_is_piecewise_constant(rnd):
    x = np.array([1.26, 2.71, -0.4])
    check_grads(rnd, (x,))


@pytest.mark.parametrize("with_out", [False, True])
def test_ufunc_where_is_refused_with_the_np_where_spelling(with_out):
    x = np.array([1.0, -2.0, 3.0])
    mask = x > 0
    kw = {"out": np.zeros(3)} if with_out else {}
    with pytest.raises(TypeError, match=r"np\.log\(\.\.\., where=\.\.\.\).*np\.where\(mask"):
        tp.grad(lambda x: np.sum(np.log(x, where=mask, **kw)))(x)
    # the suggested spelling differentiates, with derivative 0 where masked
    g = tp.grad(lambda x: np.sum(np.where(mask, np.log(np.where(mask, x, 1.0)), 0.0)))(x)
    assert np.array_equal(g, np.where(mask, 1 / x, 0.0))
    check_grads(lambda x: np.sin(x, where=True), (x,))  # the default mask: every entry


@pytest.mark.parametrize("power", [np.power, np.float_power])
def test_power_mixed_second_derivative_at_zero_exponent(power):
    """d/dy d/dx x**y = x**(y-1) (1 + y log x): 1/x at y = 0.  The rule's guard
    against 0 * inf at x = y = 0 froze the exponent for every x at y = 0,
    which gave x there (and an asymmetric Hessian)."""
    h = tp.hessian(lambda v: power(v[0], v[1]))(np.array([2.0, 0.0]))
    assert np.allclose(h, [[0.0, 0.5], [0.5, np.log(2.0) ** 2]])
    assert tp.grad(lambda v: power(v[0], v[1]))(np.array([0.0, 0.0])).tolist() == [0.0, 0.0]
    check_grads(lambda x, y: power(x, y), (np.array([2.0, 0.5, 1.5]), np.array([0.0, 0.0, 1.3])),
                order=2)


@pytest.mark.parametrize("lae, base", [(np.logaddexp, np.e), (np.logaddexp2, 2.0)])
def test_logaddexp_derivative_where_the_result_is_infinite(lae, base):
    """d/dx logaddexp(x, y) = exp(x - ans) is inf - inf = nan where x = +inf
    is the result; the limit there is 1 for x and 0 for a finite y, in
    reverse mode, forward mode and a Hessian alike."""
    x, y = np.array([np.inf, 1.0, 0.3]), np.array([3.0, np.inf, -0.2])
    gx, gy = tp.grad(lambda x, y: np.sum(lae(x, y)), argnums=(0, 1))(x, y)
    share = base ** 0.3 / (base ** 0.3 + base ** -0.2)
    assert np.allclose(gx, [1.0, 0.0, share]) and np.allclose(gy, [0.0, 1.0, 1 - share])
    _, t = tp.jvp(lae, (x, y), (np.ones(3), 2 * np.ones(3)))
    assert np.allclose(t, [1.0, 2.0, share + 2 * (1 - share)])
    assert np.isfinite(tp.hessian(lambda x: np.sum(lae(x, y)))(x)).all()
    check_grads(lambda x: lae(x, y[2:]), (x[2:],), order=2)
