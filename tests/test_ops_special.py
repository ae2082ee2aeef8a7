"""scipy.special ufuncs on traced arrays, against finite differences
(the sweep table of the families beyond these first ones is
tests/special_cases.py)."""
import re
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

sp = pytest.importorskip("scipy.special")
import special_cases  # noqa: E402  (needs SciPy)

rng = np.random.default_rng(0)

UNARY = [
    ("expit", lambda: rng.standard_normal((3, 4))),
    ("log_expit", lambda: rng.standard_normal(5)),
    ("logit", lambda: rng.uniform(0.1, 0.9, (2, 3))),
    ("gammaln", lambda: rng.uniform(0.5, 4.0, 6)),
    ("digamma", lambda: rng.uniform(0.5, 4.0, 6)),
    ("erf", lambda: rng.standard_normal(4)),
    ("erfc", lambda: rng.standard_normal(4)),
    ("ndtr", lambda: rng.standard_normal(4)),
    ("log_ndtr", lambda: rng.standard_normal(4)),
]


@pytest.mark.parametrize("name,make", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unary(name, make, dtype):
    f = getattr(sp, name)
    check_grads(lambda x: f(x) * 1.5, (make().astype(dtype),))


@pytest.mark.parametrize("name", ["expit", "gammaln", "erf"])
def test_second_order(name):
    f = getattr(sp, name)
    check_grads(lambda x: np.sum(f(x)), (rng.uniform(0.5, 2.0, 4),), order=2)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_binary_with_broadcasting(name):
    f = getattr(sp, name)
    check_grads(lambda x, y: f(x, y), (rng.uniform(0.5, 2, (3, 1)), rng.uniform(0.5, 2, 4)))


def test_poisson_loglik_through_gammaln():
    y = rng.poisson(3.0, 10).astype(float)
    eta = rng.standard_normal(10)
    g = tp.grad(lambda e: np.sum(y * e - np.exp(e) - sp.gammaln(y + 1)))(eta)
    np.testing.assert_allclose(g, y - np.exp(eta))


def _id(case):
    return getattr(case[0], "__name__", str(case[0]))


def _cast(args, dtype):
    return tuple(a.astype(dtype) if a.dtype.kind == "f" else
                 a.astype(np.complex64 if dtype == np.float32 else np.complex128)
                 if a.dtype.kind == "c" else a for a in args)


def _check(f, args, order):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a NaN or overflow would hide a bug
        check_grads(f, args, order=order)


@pytest.mark.parametrize("case", special_cases.CASES, ids=[_id(c) for c in special_cases.CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_family_rule(case, dtype):
    _, f, args, _ = case
    _check(f, _cast(args, dtype), 1)


@pytest.mark.parametrize("case", [c for c in special_cases.CASES if c[3] == 2],
                         ids=[_id(c) for c in special_cases.CASES if c[3] == 2])
def test_family_rule_second_order(case):
    _, f, args, _ = case
    _check(f, args, 2)


@pytest.mark.parametrize("case", special_cases.COMPLEX, ids=[_id(c) for c in special_cases.COMPLEX])
def test_family_rule_complex(case):
    _, f, args, order = case
    _check(f, args, order)


@pytest.mark.parametrize("case", [c for c in special_cases.CASES if len(c[2]) == 1],
                         ids=[_id(c) for c in special_cases.CASES if len(c[2]) == 1])
def test_family_rule_zero_d_and_empty(case):
    _, f, (x,), _ = case
    _check(f, (x.reshape(-1)[0].copy().reshape(()),), 1)
    empty = x.reshape(-1)[:0].reshape(0, 1)
    assert tp.grad(lambda x: _total(f(x)))(empty).shape == (0, 1)


def _total(out):
    outs = out if isinstance(out, tuple) else (out,)
    return sum(np.sum(np.real(o)) for o in outs)


@pytest.mark.parametrize("call,name,argnum", [
    (lambda a: sp.gammainc(a, 1.5), "gammainc", 0),
    (lambda a: sp.betainc(a, 2.0, 0.3), "betainc", 0),
    (lambda v: sp.iv(v, 1.5), "iv", 0),
    (lambda v: sp.jv(v, 1.5), "jv", 0),
    (lambda n: sp.eval_legendre(n, 0.3), "eval_legendre", 0),
    (lambda a: sp.hyp1f1(a, 1.5, 0.3), "hyp1f1", 0),
    (lambda c: sp.hyp2f1(0.5, 1.0, c, 0.3), "hyp2f1", 2),
    (lambda m: sp.ellipj(0.5, m)[0], "ellipj", 1),
    (lambda df: sp.stdtr(df, 0.3), "stdtr", 0),
    (lambda x: sp.zeta(x, 1.5), "zeta", 0),
    (lambda a: sp.wright_bessel(a, 1.0, 0.5), "wright_bessel", 0),
])
def test_parameters_without_a_rule_are_refused_by_name(call, name, argnum):
    with pytest.raises(NotImplementedError,
                       match=rf"scipy\.special\.{name} is not differentiable in argument {argnum}"):
        tp.grad(call)(1.3)


@pytest.mark.parametrize("call,name", [
    (lambda x: sp.zeta(x), "scipy.special.zeta"),
    (lambda x: sp.zetac(x), "scipy.special.zetac"),
    (lambda x: sp.elliprd(x, 1.0, 2.0), "scipy.special.elliprd"),
    (lambda x: sp.stdtridf(0.3, x), "scipy.special.stdtridf"),
])
def test_functions_without_a_rule_are_refused_by_name(call, name):
    with pytest.raises(NotImplementedError, match=re.escape(name) + ".*custom_vjp"):
        tp.grad(call)(1.7)


@pytest.mark.parametrize("call,name", [
    (lambda z: sp.ive(1.5, z), "ive"), (lambda z: sp.jve(1.5, z), "jve"),
    (lambda z: sp.yve(1.5, z), "yve"), (lambda z: sp.airye(z)[0], "airye"),
    (lambda z: sp.digamma(z), "digamma"),
])
def test_non_holomorphic_scalings_refuse_complex_inputs(call, name):
    with pytest.raises(NotImplementedError, match=rf"scipy\.special\.{name} of a complex"):
        tp.grad(lambda z: np.real(call(z)))(np.complex128(1.2 + 0.3j))


@pytest.mark.parametrize("f,refused", [
    (lambda y: sp.kolmogorov(y), r"scipy\.special\.kolmogorov's density"),
    (lambda x: sp.ncfdtr(3.0, 4.0, 1.5, x), r"scipy\.special\.ncfdtr's density"),
    (lambda x: sp.elliprf(x, 1.0, 2.0), r"scipy\.special\.elliprd"),
    (lambda x: sp.elliprg(x, 1.0, 2.0), r"scipy\.special\.elliprd"),
])
def test_second_derivative_through_a_refused_function_is_refused_by_name(f, refused):
    assert np.isfinite(tp.grad(f)(1.2))
    with pytest.raises(NotImplementedError, match=refused):
        tp.grad(tp.grad(f))(1.2)


def test_rounded_down_counts_have_zero_derivative():
    # pdtr rounds k down: a piecewise constant argument, so its cotangent is 0
    assert tp.grad(lambda k: sp.pdtr(k, 2.0))(2.5) == 0.0


def test_bernoulli_beta_posterior_through_betaln_and_betainc():
    a, b = 2.5, 4.0
    grad = tp.grad(lambda x: sp.betaln(a + x, b) + sp.betainc(a, b, 0.5 * x))
    x = 0.7
    expected = sp.digamma(a + x) - sp.digamma(a + x + b) + 0.5 * (
        (0.5 * x) ** (a - 1) * (1 - 0.5 * x) ** (b - 1) / sp.beta(a, b))
    np.testing.assert_allclose(grad(x), expected, rtol=1e-10)


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = ({getattr(sp, name) for name, _ in UNARY} | {sp.xlogy, sp.xlog1py}
         | {c[0] for c in special_cases.CASES + special_cases.COMPLEX})
