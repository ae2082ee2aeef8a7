"""Rules at points where the rule's formula is 0/0 or special-cased but the
derivative exists: each is checked against mpmath (or a known series) at
the point itself and beside it, to the orders that a rule written as
``np.where(x == 0, limit, formula)`` would get wrong (its derivative is the
derivative of a constant there)."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

mp = pytest.importorskip("mpmath")
sp = pytest.importorskip("scipy.special")

mp.mp.dps = 30

import tapestry.scipy.special as _tss  # noqa: E402  (needs SciPy)


def nth_grad(f, n):
    for _ in range(n):
        f = tp.grad(f)
    return f


def assert_orders(ours, exact, points, orders, rel=1e-9, abs_=1e-12):
    for x in points:
        for n in orders:
            want = float(mp.re(mp.diff(exact, mp.mpf(x), n)))
            got = nth_grad(ours, n)(float(x))
            assert got == pytest.approx(want, rel=rel, abs=abs_), (x, n, got, want)


# name -> (tapestry-side function of x, mpmath function, special point, orders)
CASES = {
    "sinc": (np.sinc, lambda t: mp.sinc(mp.pi * t), 0.0, (1, 2, 3)),
    # i0' = i1, whose rule had the special case: the 4th derivative of i0 is the 3rd of i1
    "i0": (np.i0, lambda t: mp.besseli(0, t), 0.0, (1, 2, 3, 4)),
    # Si' = sin x / x, Shi' = sinh x / x
    "sici": (lambda x: sp.sici(x)[0], mp.si, 0.0, (1, 2, 3)),
    "shichi": (lambda x: sp.shichi(x)[0], mp.shi, 0.0, (1, 2, 3)),
    # spence' = log z / (1 - z), 0/0 at z = 1
    "spence": (sp.spence, lambda t: mp.polylog(2, 1 - t), 1.0, (1, 2, 3)),
    # berp' and beip' read berp / x and beip / x
    "ber": (sp.ber, lambda t: mp.ber(0, t), 0.0, (1, 2, 3, 4)),
    "bei": (sp.bei, lambda t: mp.bei(0, t), 0.0, (1, 2, 3, 4)),
    "kelvin": (lambda x: np.real(sp.kelvin(x)[0]) + np.imag(sp.kelvin(x)[0]),
               lambda t: mp.ber(0, t) + mp.bei(0, t), 0.0, (1, 2, 3)),
    # integrands (i0 - 1)/x, (1 - j0)/x, -H0/x
    "it2i0k0": (lambda x: sp.it2i0k0(x)[0],
                lambda t: mp.quad(lambda u: (mp.besseli(0, u) - 1) / u, [0, t]), 0.0, (1, 2, 3)),
    "it2j0y0": (lambda x: sp.it2j0y0(x)[0],
                lambda t: mp.quad(lambda u: (1 - mp.besselj(0, u)) / u, [0, t]), 0.0, (1, 2, 3)),
    "it2struve0": (sp.it2struve0, lambda t: -mp.quad(lambda u: mp.struveh(0, u) / u, [0, t]),
                   0.0, (1, 2, 3)),
    # d/dm of the incomplete elliptic integrals is 0/0 at m = 0
    "ellipkinc_m": (lambda m: sp.ellipkinc(1.1, m), lambda t: mp.ellipf(1.1, t), 0.0, (1, 2, 3)),
    "ellipeinc_m": (lambda m: sp.ellipeinc(4.0, m), lambda t: mp.ellipe(4.0, t), 0.0, (1, 2, 3)),
}


def _spherical(n, sign):
    """j_n (sign -1) or i_n (sign 1) as x^n / (2n+1)!! 0F1(; n + 3/2; sign x^2/4)."""
    return lambda t: t ** n / mp.fac2(2 * n + 1) * mp.hyp0f1(n + 1.5, sign * t * t / 4)


for _n in (0, 1, 2):
    # their second-derivative rule had -2 f'/x and n(n+1)/x^2 terms
    CASES[f"spherical_jn{_n}"] = (lambda x, n=_n: _tss.spherical_jn(n, x), _spherical(_n, -1),
                                  0.0, (1, 2, 3))
    CASES[f"spherical_in{_n}"] = (lambda x, n=_n: _tss.spherical_in(n, x), _spherical(_n, 1),
                                  0.0, (1, 2, 3))


# functions defined on one side of the point: name -> (f, exact, point, orders, points)
ONE_SIDED = {
    # (1 - x^2) P' = ... is 0/0 at x = +-1; P_3 is a polynomial (P_2's third derivative 0 needs
    # hyp2f1's z-derivative to be 0 where a b = 0, also at z = 1)
    "lpmv_m0_at_1": (lambda x: sp.lpmv(0, 3.0, x), lambda t: mp.legendre(3, t), 1.0, (1, 2, 3),
                     [1.0, 0.999, 0.7]),
    "lpmv_m0_at_-1": (lambda x: sp.lpmv(0, 2.0, x), lambda t: mp.legendre(2, t), -1.0, (1, 2, 3),
                      [-1.0, -0.999, -0.7]),
    # ellipkm1(p) = K(1 - p): the general branch divided by 1 - p at p = 1
    "ellipkm1_at_1": (sp.ellipkm1, lambda t: mp.ellipk(1 - t), 1.0, (1, 2, 3),
                      [1.0, 1.0005, 0.9995, 0.99, 1.2]),
}


@pytest.mark.parametrize("name", list(CASES) + list(ONE_SIDED))
def test_higher_derivatives_at_and_beside_the_point(name):
    if name in ONE_SIDED:
        f, exact, at, orders, points = ONE_SIDED[name]
        for x in points:  # mpmath's differences from the side where f is defined
            for n in orders:
                side = 1 if x <= at and at < 0 else (-1 if x >= at > 0 else 0)
                want = float(mp.re(mp.diff(exact, mp.mpf(x), n, direction=side)))
                got = nth_grad(f, n)(float(x))
                assert got == pytest.approx(want, rel=1e-8, abs=1e-10), (x, n, got, want)
        return
    f, exact, at, orders = CASES[name]
    assert_orders(f, exact, [at, at + 1e-3, at - 0.2, at + 0.3, at + 0.7], orders)


def test_sinc_second_derivative_at_zero_is_minus_pi_squared_over_three():
    assert nth_grad(np.sinc, 2)(0.0) == pytest.approx(-np.pi ** 2 / 3, rel=1e-14)
    assert nth_grad(np.sinc, 4)(0.0) == pytest.approx(np.pi ** 4 / 5, rel=1e-14)
    # forward over forward: the rule's derivative is the same expression
    assert tp.jacfwd(tp.jacfwd(np.sinc))(0.0) == pytest.approx(-np.pi ** 2 / 3, rel=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sinc_and_i0_check_grads_through_the_series_branch(dtype):
    x = np.array([0.0, 1e-4, -0.1, 0.2499, 0.25, 0.6, -2.3], dtype)
    for f in (np.sinc, np.i0):
        check_grads(lambda x: np.sum(f(x) ** 2), (x,), order=2)
        assert tp.grad(lambda x: np.sum(f(x)))(x).dtype == dtype
    check_grads(lambda x: np.sinc(x), (np.array(0.0, dtype),), order=2)  # 0-d


# --- hypot: the norm convention, gradient 0 at (0, 0) -------------------------
def test_hypot_gradient_at_the_origin_is_zero_like_norm():
    gx, gy = tp.grad(np.hypot, argnums=(0, 1))(0.0, 0.0)
    assert (gx, gy) == (0.0, 0.0)
    nx = tp.grad(lambda v: np.linalg.norm(v))(np.zeros(2))
    assert np.array_equal(nx, [gx, gy])  # the same convention as np.linalg.norm


def test_hypot_squared_at_the_origin_has_the_exact_derivative():
    g = tp.grad(lambda x, y: np.hypot(x, y) ** 2, argnums=(0, 1))(0.0, 0.0)
    assert g == (0.0, 0.0)
    x = np.array([0.0, 0.5, -1.5]), np.array([0.0, -2.0, 0.25])
    g = tp.grad(lambda x, y: np.sum(np.hypot(x, y) ** 2), argnums=(0, 1))(*x)
    assert np.allclose(g[0], 2 * x[0]) and np.allclose(g[1], 2 * x[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hypot_check_grads_with_broadcasting(dtype):
    check_grads(np.hypot, (np.array([[0.5, -1.0, 2.0]], dtype), np.array([[1.5], [-0.3]], dtype)),
                order=2)


# --- Struve functions at x = 0 ----------------------------------------------------
@pytest.mark.parametrize("v", [0.0, 0.5, 1.0, 2.0, 2.5])
def test_struve_derivatives_at_zero_and_beside(v):
    """H_v, L_v ~ x^(v+1) near 0: derivatives up to order v + 1 are finite there
    (every order for integer v); the recurrence's H_{v-1}, H_{v+1} terms reach
    orders that are singular at 0, so the rule uses the series there."""
    orders = (1, 2, 3) if v == int(v) else tuple(range(1, int(v) + 2))
    for f, exact in ((lambda x: sp.struve(v, x), lambda t: mp.struveh(v, t)),
                     (lambda x: sp.modstruve(v, x), lambda t: mp.struvel(v, t))):
        assert_orders(f, exact, [0.0, 1e-3, 0.3, 0.5, 2.0, 7.0], orders, abs_=1e-10)
    assert tp.grad(lambda x: sp.struve(0.0, x))(0.0) == pytest.approx(2 / np.pi, rel=1e-14)


def test_struve_check_grads_with_broadcast_orders():
    v = np.array([[0.0], [1.0], [2.5]])
    check_grads(lambda x: sp.struve(v, x) + sp.modstruve(v, x), (np.array([0.2, 1.0, 3.0]),),
                order=2)


# --- x log y and the entropies: constant in y where x = 0 -----------------------------
@pytest.mark.parametrize("f, y0", [(sp.xlogy, 0.0), (sp.xlog1py, -1.0),
                                   (sp.rel_entr, 0.0), (lambda x, y: sp.kl_div(x, y) - y, 0.0)])
def test_y_derivative_where_x_is_zero(f, y0):
    """f(0, y) is constant in y (kl_div(0, y) = y, less y here), so d/dy is 0
    at x = 0 -- also at y = y0, where x / y was 0/0."""
    assert tp.grad(f, argnums=1)(0.0, y0) == 0.0
    x = np.array([0.0, 0.0, 0.7])
    y = np.array([y0, y0 + 2.0, y0 + 1.5])
    g = tp.grad(lambda y: np.sum(f(x, y)))(y)
    assert np.isfinite(g).all() and g[0] == 0.0 and g[1] == 0.0
    # beside the point, the mixed derivative d/dx (x / y) = 1 / y stays
    assert tp.grad(tp.grad(sp.xlogy, argnums=1), argnums=0)(0.0, 2.0) == pytest.approx(0.5)
    check_grads(f, (np.array([0.3, 1.2]), np.array([y0 + 0.4, y0 + 2.0])), order=2)


def test_powm1_at_zero_base_follows_power():
    """powm1(0, y) = -1 for y > 0 (d/dy = 0), powm1(x, 0) = 0 (d/dx = 0)."""
    assert tp.grad(sp.powm1, argnums=1)(0.0, 2.0) == 0.0
    assert tp.grad(sp.powm1, argnums=0)(0.0, 0.0) == 0.0
    assert tp.grad(sp.powm1, argnums=0)(0.0, 2.0) == 0.0
    check_grads(sp.powm1, (np.array([0.4, 1.3, 2.0]), np.array([0.5, -1.2, 2.0])), order=2)


@pytest.mark.parametrize("ord", [3, 0.5, 1.5, 2, -2, "nuc"])
def test_norms_have_gradient_zero_at_zero(ord):
    """docs/ops.md: every norm has gradient 0 at 0 (the p-norms gave 0 * inf =
    NaN, the 2- and nuclear matrix norms one of the subgradients)."""
    matrix = ord in (2, -2, "nuc")
    x = np.zeros((2, 3, 2)) if matrix else np.zeros((2, 3))
    x[1] = np.random.default_rng(0).normal(size=x.shape[1:])
    axis = (1, 2) if matrix else 1
    g = tp.grad(lambda x: np.sum(np.linalg.norm(x, ord, axis=axis)))(x)
    assert np.array_equal(g[0], np.zeros_like(x[0])) and np.all(np.isfinite(g))
    check_grads(lambda x: np.linalg.norm(x, ord, axis=axis), (x[1:],))
    check_grads(lambda x: np.linalg.norm(x, ord, axis=axis, keepdims=True),
                (x[1:].astype(np.float32),))


def test_series_branches_keep_higher_derivatives_accurate_past_their_radius():
    """exprel's and inv_boxcox's rules switch from a series to a formula that
    cancels near 0: their second and third derivatives just past the switch
    were off by ~1e-10 (radius 0.01, six terms)."""
    points = [0.0, 0.009, 0.011, 0.03, 0.19, 0.21, -0.5]
    assert_orders(sp.exprel, lambda t: mp.hyp1f1(1, 2, t), points, (1, 2, 3), rel=1e-12)
    assert_orders(lambda lam: sp.inv_boxcox(1.4, lam),
                  lambda lam: mp.exp(mp.log1p(lam * 1.4) / lam), points[1:], (1, 2, 3), rel=1e-11)


# --- a pole of a Gamma function in the denominator: value 0, derivative finite -------------
def _rbinom(n, k):
    return mp.gamma(n + 1) * mp.rgamma(k + 1) * mp.rgamma(n - k + 1)


@pytest.mark.parametrize("f, exact, points", [
    (lambda k: sp.binom(3.3, k), lambda k: _rbinom(3.3, k), [-1.0, -2.0, 5.3, 0.7]),
    (lambda n: sp.binom(n, 4.3), lambda n: _rbinom(n, 4.3), [3.3, 2.3, 6.0]),
    (lambda z: sp.poch(z, 1.7), lambda z: mp.gamma(z + 1.7) * mp.rgamma(z), [0.0, -1.0, 0.6]),
    (lambda a: sp.beta(a, 1.5), lambda a: mp.gamma(a) * mp.gamma(1.5) * mp.rgamma(a + 1.5),
     [-1.5, -2.5, 0.7]),
], ids=["binom_k", "binom_n", "poch_z", "beta_a"])
def test_gamma_ratios_at_a_pole_of_the_denominator(f, exact, points):
    """binom, poch and beta are 0 where a Gamma in their denominator has a pole;
    value * (psi - psi) was 0 * inf there."""
    assert_orders(f, exact, points, (1, 2), rel=1e-8)


def test_tklmbda_is_flat_outside_its_support():
    """For lambda > 0 the support is [-1/lambda, 1/lambda]: outside, the CDF is 0
    or 1 in a neighbourhood, so both derivatives are 0 (d/dx was 1/Q'(1) = 1)."""
    for x in (0.8, -0.8):
        assert tp.grad(sp.tklmbda, argnums=(0, 1))(x, 2.0) == (0.0, 0.0)
    check_grads(sp.tklmbda, (np.array([0.2, -0.3]), np.array([2.0, 0.4])))


def test_chndtrinc_has_no_derivative_where_it_has_no_solution():
    """p above chndtr(x, k, 0): no nc >= 0 solves chndtr(x, k, nc) = p and SciPy
    returns a bound; the implicit-function derivative there was a made-up number."""
    assert sp.chndtr(0.5, 2.0, 0.0) < 0.9
    assert np.isnan(tp.grad(lambda p: sp.chndtrinc(0.5, 2.0, p))(0.9))
    assert np.isnan(tp.grad(lambda x: sp.chndtrinc(x, 2.0, 0.9))(0.5))
    assert np.isfinite(tp.grad(lambda p: sp.chndtrinc(5.0, 2.0, p))(0.4))


@pytest.mark.parametrize("f, x", [
    (lambda v: np.hypot(v[0], v[1]) ** 2, np.zeros(2)),
    (lambda v: np.linalg.norm(v) ** 2, np.zeros(3)),
    (lambda v: np.abs(v[0] + 1j * v[1]) ** 2, np.zeros(2)),
    (lambda v: np.std(v) ** 2 * len(v), np.ones(3)),  # all entries equal: std = 0
    (lambda v: np.linalg.norm(v, 3) ** 2, np.zeros(2)),
], ids=["hypot", "norm", "complex_abs", "std", "norm3"])
def test_second_derivative_through_a_norm_at_zero_is_nan_not_a_silent_zero(f, x):
    """The gradient 0 at 0 is a subgradient choice with no derivative: the
    chain rule cannot recover d^2 (x^2 + y^2) = 2 through it.  It gave 0
    (the derivative of np.where's constant branch); now NaN, in reverse and
    forward mode.  Away from 0 second derivatives are right."""
    assert np.all(np.isnan(tp.hessian(f)(x)))
    assert np.all(np.isnan(tp.jacobian(tp.grad(f))(x)))
    assert np.array_equal(tp.grad(f)(x), np.zeros_like(x))  # the first derivative stays 0
    check_grads(f, (np.array([0.3, -0.5, 1.1][:len(x)]),), order=2)


def test_elliprc_principal_value_for_negative_y():
    """SciPy's R_C(x, y) for y < 0 is Cauchy's principal value, finite and
    differentiable; the rules' R_D of negative arguments gave NaN there."""
    for x, y in [(1.0, -1.0), (0.5, -2.0), (2.0, -0.3), (1.0, 2.0)]:
        gx, gy = tp.grad(sp.elliprc, argnums=(0, 1))(x, y)
        assert gx == pytest.approx(float(mp.diff(lambda t: mp.elliprc(t, y), x)), rel=1e-9)
        assert gy == pytest.approx(float(mp.re(mp.diff(lambda t: mp.elliprc(x, t), y))), rel=1e-9)
    check_grads(sp.elliprc, (np.array([[1.0], [0.5]]), np.array([-1.0, 2.0, -0.3])))


@pytest.mark.parametrize("f, at0, elsewhere", [
    (lambda m: np.linalg.norm(m, 2) ** 2, np.zeros((2, 3)), [[0.3, -0.5, 1.1], [0.7, 0.2, -0.4]]),
    (lambda m: np.linalg.norm(m, -2) ** 2, np.zeros((2, 2)), [[0.3, -0.5], [0.7, 0.2]]),
    (lambda m: np.linalg.norm(m, "nuc") ** 2, np.zeros((3, 2)), [[0.3, -0.5], [0.7, 0.2],
                                                                 [1.0, -1.2]]),
    (lambda m: np.sum(np.linalg.norm(m, 2, axis=(1, 2)) ** 2), np.zeros((2, 2, 2)),
     [[[0.3, -0.5], [0.7, 0.2]], [[1.0, 0.1], [-0.6, 0.8]]]),
    (lambda v: np.linalg.norm(v, 0.5) ** 2, np.zeros(3), [0.3, -0.5, 1.1]),
    (lambda v: np.linalg.norm(v * (1 + 2j), 3) ** 2, np.zeros(2), [0.3, -0.5]),
], ids=["matrix2", "matrix-2", "nuc", "stacked2", "p0.5", "complex_p3"])
def test_matrix_and_other_p_norms_at_zero_have_no_silent_second_derivative(f, at0, elsewhere,
                                                                           request):
    """The spectral and nuclear norms (through the SVD) and the p < 1 and
    complex p-norms set their value to 0 at 0 with np.where, whose constant
    branch made the Hessian of norm(A, 2) ** 2 at A = 0 a silent 0 (its
    partial d^2/dA_11^2 is 2, and there is no Hessian); NaN like the 2-norm's."""
    assert np.all(np.isnan(tp.hessian(f)(at0)))
    assert np.all(np.isnan(tp.jacobian(tp.grad(f))(at0)))
    if "complex" not in request.node.callspec.id:  # forward mode is real only
        assert np.all(np.isnan(tp.jacfwd(tp.grad(f))(at0)))
    assert np.array_equal(tp.grad(f)(at0), np.zeros_like(at0))
    check_grads(f, (np.array(elsewhere),), order=2)


def test_a_zero_matrix_in_a_stack_leaves_the_others_second_derivatives_alone():
    m = np.array([[[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.1], [-0.6, 0.8]]])
    f = lambda m: np.sum(np.linalg.norm(m, "nuc", axis=(1, 2)) ** 2)
    H = tp.hessian(f)(m)
    assert np.all(np.isnan(H[0, :, :, 0]))
    np.testing.assert_allclose(H[1, :, :, 1], tp.hessian(f)(m[1:])[0, :, :, 0], rtol=1e-12)
    assert np.all(np.isfinite(H[1, :, :, 1]))
