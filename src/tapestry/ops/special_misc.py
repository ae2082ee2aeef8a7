"""scipy.special rules: error functions and their inverses, elementary
functions (exp2, cbrt, boxcox, entropies, Huber losses, degrees), exponential,
sine/cosine and Fresnel integrals, elliptic integrals, orthogonal
polynomials and hypergeometric functions.

Each rule's derivative is in the comment above it.  Parameters with no
closed-form derivative (polynomial degrees and weights, hypergeometric
parameters, the parameter ``m`` of ``ellipj``) are refused by name.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.batched import all_items
from ..core.var import unwrap_all
from .common import near_point
from .elementwise import _pow_x as pow_x, _pow_y as pow_y
from .special_common import (SQRT_2PI, SQRT_PI, define, exprel_d1, log1p_over_d1, outputs,
                             safe, series, sp, x_over_y)

_DEG = math.pi / 180
# sinh(x) / x = sum_k x^(2k) / (2k+1)!  (|x| < 1/2: the 10th term is under 1e-25)
_SINH_OVER_X = tuple(1 / math.factorial(2 * k + 1) for k in range(10))
# log(1 - u) / u = -sum_k u^k / (k+1)  (|u| < 0.05: the 14th term is under 1e-19)
_LOG1M_OVER = tuple(-1 / (k + 1) for k in range(14))


def _error_functions():
    # erfinv' = sqrt(pi)/2 e^{y^2} at y = erfinv; erfcinv' = -that
    define(sp.erfinv, lambda g, ans, x: g * (SQRT_PI / 2) * np.exp(ans * ans))
    define(sp.erfcinv, lambda g, ans, x: -g * (SQRT_PI / 2) * np.exp(ans * ans))
    # erfcx = e^{x^2} erfc x: erfcx' = 2x erfcx - 2/sqrt(pi); erfi' = 2/sqrt(pi) e^{x^2}
    define(sp.erfcx, lambda g, ans, x: g * (2 * x * ans - 2 / SQRT_PI))
    define(sp.erfi, lambda g, ans, x: g * (2 / SQRT_PI) * np.exp(x * x))
    # Dawson F' = 1 - 2x F; Faddeeva w' = -2z w + 2i/sqrt(pi)
    define(sp.dawsn, lambda g, ans, x: g * (1 - 2 * x * ans))
    define(sp.wofz, lambda g, ans, z: g * (-2 * z * ans + 2j / SQRT_PI))
    # Voigt V = Re w(z) / (s sqrt(2 pi)), z = (x + i gamma) / (s sqrt 2)
    define(sp.voigt_profile, *_voigt_rules())


def _voigt_rules():
    def w_prime(x, s, gam):
        z = (x + 1j * gam) / (s * math.sqrt(2))
        return z, -2 * z * sp.wofz(z) + 2j / SQRT_PI

    def d_x(g, ans, x, s, gam):
        return g * np.real(w_prime(x, s, gam)[1]) / (2 * SQRT_PI * s * s)

    def d_s(g, ans, x, s, gam):
        z, wp = w_prime(x, s, gam)
        return g * (-ans / s - np.real(z * wp) / (s * s * SQRT_2PI))

    def d_gamma(g, ans, x, s, gam):
        return -g * np.imag(w_prime(x, s, gam)[1]) / (2 * SQRT_PI * s * s)
    return d_x, d_s, d_gamma


def _elementary():
    define(sp.log1p, lambda g, ans, x: g / (1 + x))
    define(sp.expm1, lambda g, ans, x: g * (ans + 1))
    define(sp.exp2, lambda g, ans, x: g * ans * math.log(2))
    define(sp.exp10, lambda g, ans, x: g * ans * math.log(10))
    define(sp.cbrt, lambda g, ans, x: g / (3 * ans * ans))
    define(sp.cosm1, lambda g, ans, x: -g * np.sin(x))
    # powm1 = x^y - 1: d/dx = y x^(y-1), d/dy = x^y log x, as np.power's rules
    # (0 for y = 0 and for d/dy at x = 0, not 0 * inf)
    define(sp.powm1, lambda g, ans, x, y: pow_x(g, ans, x, y),
           lambda g, ans, x, y: pow_y(g, ans + 1, x, y))
    define(sp.exprel, lambda g, ans, x: g * exprel_d1(x))
    # entr = -x log x; kl_div = x log(x/y) - x + y; rel_entr = x log(x/y)
    define(sp.entr, lambda g, ans, x: -g * (np.log(x) + 1))
    # kl_div(0, y) = y and rel_entr(0, y) = 0 for y >= 0: x / y is 0 at x = 0, y = 0 too
    define(sp.kl_div, lambda g, ans, x, y: g * (np.log(x) - np.log(y)),
           lambda g, ans, x, y: g * (1 - x_over_y(x, y)))
    define(sp.rel_entr, lambda g, ans, x, y: g * (np.log(x) - np.log(y) + 1),
           lambda g, ans, x, y: -g * x_over_y(x, y))
    # huber(d, r) = r^2/2 for |r| <= d, else d (|r| - d/2)
    define(sp.huber, lambda g, ans, d, r: g * np.where(np.abs(r) <= d, 0.0, np.abs(r) - d),
           lambda g, ans, d, r: g * np.where(np.abs(r) <= d, r, d * np.sign(r)))
    # pseudo_huber(d, r) = d^2 (s - 1), s = sqrt(1 + (r/d)^2):
    # d/dr = r/s, d/dd = r^4 / (d^3 s (s+1)^2)  (= 2d(s-1) - r^2/(d s), without cancellation)
    def s(d, r):
        return np.sqrt(1 + (r / d) ** 2)
    define(sp.pseudo_huber,
           lambda g, ans, d, r: g * r ** 4 / (d ** 3 * s(d, r) * (s(d, r) + 1) ** 2),
           lambda g, ans, d, r: g * r / s(d, r))
    # sindg etc. take degrees
    define(sp.sindg, lambda g, ans, x: g * _DEG * sp.cosdg(x))
    define(sp.cosdg, lambda g, ans, x: -g * _DEG * sp.sindg(x))
    define(sp.tandg, lambda g, ans, x: g * _DEG * (1 + ans * ans))
    define(sp.cotdg, lambda g, ans, x: -g * _DEG * (1 + ans * ans))
    # radian(d, m, s) = (d + m/60 + s/3600) pi/180
    define(sp.radian, lambda g, ans, d, m, s: g * _DEG, lambda g, ans, d, m, s: g * (_DEG / 60),
           lambda g, ans, d, m, s: g * (_DEG / 3600))


def _boxcox():
    # boxcox(x, l) = (x^l - 1)/l = L exprel(l L), L = log x:
    # d/dx = x^(l-1), d/dl = L^2 exprel'(l L)  (stable at l = 0)
    define(sp.boxcox, lambda g, ans, x, lam: g * x ** (lam - 1),
           lambda g, ans, x, lam: g * np.log(x) ** 2 * exprel_d1(lam * np.log(x)))
    define(sp.boxcox1p, lambda g, ans, x, lam: g * (1 + x) ** (lam - 1),
           lambda g, ans, x, lam: g * np.log1p(x) ** 2 * exprel_d1(lam * np.log1p(x)))
    # inv_boxcox(y, l) = exp(y h(l y)), h(v) = log1p(v)/v:
    # d/dy = ans / (1 + l y), d/dl = ans y^2 h'(l y)
    define(sp.inv_boxcox, lambda g, ans, y, lam: g * ans / (1 + lam * y),
           lambda g, ans, y, lam: g * ans * y * y * log1p_over_d1(lam * y))
    define(sp.inv_boxcox1p, lambda g, ans, y, lam: g * (ans + 1) / (1 + lam * y),
           lambda g, ans, y, lam: g * (ans + 1) * y * y * log1p_over_d1(lam * y))


def _exponential_integrals():
    define(sp.exp1, lambda g, ans, x: -g * np.exp(-x) / x)
    define(sp.expi, lambda g, ans, x: g * np.exp(x) / x)
    # E_n' = -E_{n-1};  E_0 = e^-x / x, E_0' = -e^-x (x + 1) / x^2
    define(sp.expn, None, lambda g, ans, n, x: -g * np.where(
        n >= 1, sp.expn(np.maximum(n - 1, 0), x), np.exp(-x) * (x + 1) / (x * x)))
    # Si' = sin x / x = sinc(x / pi), Ci' = cos x / x; Shi' = sinh x / x (a series
    # near 0, so their third derivatives are right there too), Chi' = cosh x / x
    define(sp.sici, outputs(lambda a, x: np.sinc(x / math.pi), lambda a, x: np.cos(x) / x))
    define(sp.shichi, outputs(lambda a, x: near_point(
        x, 0.0, 0.5, lambda t: series(t * t, _SINH_OVER_X), lambda t: np.sinh(t) / t),
        lambda a, x: np.cosh(x) / x))
    # fresnel(z) = (S, C): S' = sin(pi z^2/2), C' = cos(pi z^2/2)
    define(sp.fresnel, outputs(lambda a, z: np.sin(math.pi / 2 * z * z),
                               lambda a, z: np.cos(math.pi / 2 * z * z)))
    # F+ = int_x^inf e^{it^2} dt, K+ = e^{-i(x^2 + pi/4)} F+ / sqrt(pi) (and the conjugate pair)
    define(sp.modfresnelp, outputs(lambda a, x: -np.exp(1j * x * x),
                                   lambda a, x: -2j * x * a[1]
                                   - np.exp(-0.25j * math.pi) / SQRT_PI))
    define(sp.modfresnelm, outputs(lambda a, x: -np.exp(-1j * x * x),
                                   lambda a, x: 2j * x * a[1] - np.exp(0.25j * math.pi) / SQRT_PI))
    # spence(z) = int_1^z log t / (1 - t) dt: derivative log z / (1 - z), with
    # u = 1 - z a series near z = 1: log(1 - u) / u = -sum_k u^k / (k + 1)
    define(sp.spence, lambda g, ans, z: g * near_point(
        z, 1.0, 0.05, lambda t: series(1 - t, _LOG1M_OVER), lambda t: np.log(t) / (1 - t),
        fill=2.0))
    # Wright omega: w + log w = z, w' = w / (1 + w)
    define(sp.wrightomega, lambda g, ans, z: g * ans / (1 + ans))


# K(m) = pi/2 sum a_n m^n, a_n = ((2n)! / (4^n n!^2))^2; E(m) = pi/2 sum a_n m^n / (1 - 2n)
# K' = pi/2 sum n a_n m^(n-1), E' = pi/2 sum n a_n m^(n-1) / (1 - 2n): ten terms, so
# that third derivatives are exact too within the series' radius
_A = tuple((math.comb(2 * n, n) / 4 ** n) ** 2 for n in range(1, 11))
_DK = tuple(math.pi / 2 * n * a for n, a in enumerate(_A, 1))
_DE = tuple(math.pi / 2 * n * a / (1 - 2 * n) for n, a in enumerate(_A, 1))


def d_ellipk(m):
    """K'(m) = (E - (1-m) K) / (2 m (1-m)); a series for |m| < 1e-3."""
    small = np.abs(m) < 1e-3
    ms = safe(m, small, 0.5)
    return np.where(small, series(m, _DK),
                    (sp.ellipe(ms) - (1 - ms) * sp.ellipk(ms)) / (2 * ms * (1 - ms)))


def d_ellipe(m):
    """E'(m) = (E - K) / (2m); a series for |m| < 1e-3."""
    small = np.abs(m) < 1e-3
    ms = safe(m, small, 0.5)
    return np.where(small, series(m, _DE), (sp.ellipe(ms) - sp.ellipk(ms)) / (2 * ms))


def _elliptic():
    define(sp.ellipk, lambda g, ans, m: g * d_ellipk(m))
    define(sp.ellipe, lambda g, ans, m: g * d_ellipe(m))
    # ellipkm1(p) = K(1 - p): -K'(1-p), K's series near p = 1 (m = 0); the general
    # branch sees p = 0.5 there (1 - p in its denominator: NaN second derivatives)
    define(sp.ellipkm1, lambda g, ans, p: -g * near_point(
        p, 1.0, 1e-3, lambda t: d_ellipk(1 - t),
        lambda t: (sp.ellipe(1 - t) - t * sp.ellipkm1(t)) / (2 * t * (1 - t)), fill=0.5))
    define(sp.ellipkinc, *_incomplete_elliptic(kind=1))
    define(sp.ellipeinc, *_incomplete_elliptic(kind=2))
    # ellipj(u, m) = (sn, cn, dn, am): sn' = cn dn, cn' = -sn dn, dn' = -m sn cn, am' = dn
    def in_u(g, ans, u, m):
        sn, cn, dn, _ = ans
        return outputs(lambda a, x: cn * dn, lambda a, x: -sn * dn, lambda a, x: -m * sn * cn,
                       lambda a, x: dn)(g, ans, u)
    define(sp.ellipj, in_u)
    # Carlson: dR_F/dz = -R_D(x, y, z) / 6 (R_D symmetric in its first two arguments);
    # R_C(x, y) = R_F(x, y, y)
    define(sp.elliprf, lambda g, ans, x, y, z: -g * sp.elliprd(y, z, x) / 6,
           lambda g, ans, x, y, z: -g * sp.elliprd(z, x, y) / 6,
           lambda g, ans, x, y, z: -g * sp.elliprd(x, y, z) / 6)
    define(sp.elliprc, lambda g, ans, x, y: g * _elliprc_d(x, y)[0],
           lambda g, ans, x, y: g * _elliprc_d(x, y)[1])
    # dR_G/dz = (R_F(x, y, z) - z R_D(x, y, z) / 3) / 4 (and symmetrically)
    define(sp.elliprg,
           lambda g, ans, x, y, z: g * (sp.elliprf(x, y, z) - x * sp.elliprd(y, z, x) / 3) / 4,
           lambda g, ans, x, y, z: g * (sp.elliprf(x, y, z) - y * sp.elliprd(z, x, y) / 3) / 4,
           lambda g, ans, x, y, z: g * (sp.elliprf(x, y, z) - z * sp.elliprd(x, y, z) / 3) / 4)
    # agm(a, b) = pi (a+b) / (4 K(m)), m = k^2, k = (a-b)/(a+b) (Landen)
    def agm_rule(sign):
        def agm_pullback(g, ans, a, b):
            s = a + b
            k = (a - b) / s
            m = k * k
            other = b if sign > 0 else a
            return g * ans * (1 / s - sign * 4 * k * other * d_ellipk(m) / (sp.ellipk(m) * s * s))
        return agm_pullback
    define(sp.agm, agm_rule(1), agm_rule(-1))


def _elliprc_d(x, y):
    """(dR_C/dx, dR_C/dy).  For y > 0: -R_D(y, y, x)/6 and -R_D(x, y, y)/3.  For
    y < 0, SciPy's value is Cauchy's principal value, R_C(x, y) = s R_C(u, w)
    with u = x - y, w = -y, s = sqrt(x/u) (DLMF 19.2.20), where R_D of negative
    arguments is NaN: the derivatives of that identity, by the y > 0 rules."""
    neg = np.real(unwrap_all(y)) < 0
    yp = np.where(neg, 1.0, y)
    dx_pos, dy_pos = -sp.elliprd(yp, yp, x) / 6, -sp.elliprd(x, yp, yp) / 3
    if not np.any(all_items(neg)):
        return dx_pos, dy_pos
    xn, yn = np.where(neg, x, 1.0), np.where(neg, y, -1.0)
    u, w = xn - yn, -yn
    s = np.sqrt(xn / u)
    rc, d1 = sp.elliprc(u, w), -sp.elliprd(w, w, u) / 6  # d1: dR_C(u, w)/du
    d2 = -sp.elliprd(u, w, w) / 3                          # dR_C(u, w)/dw
    dx_neg = w / (2 * s * u * u) * rc + s * d1
    dy_neg = xn / (2 * s * u * u) * rc - s * (d1 + d2)
    return np.where(neg, dx_neg, dx_pos), np.where(neg, dy_neg, dy_pos)


def _incomplete_elliptic(kind):
    """Rules (d/dphi, d/dm) of F(phi|m) (kind 1) or E(phi|m) (kind 2):
    dF/dm = E/(2m(1-m)) - F/(2m) - sin 2phi / (4 (1-m) D), dE/dm = (E - F)/(2m),
    D = sqrt(1 - m sin^2 phi); at m = 0 both are +-(2 phi - sin 2 phi)/8."""
    def delta(phi, m):
        return np.sqrt(1 - m * np.sin(phi) ** 2)

    def d_phi(g, ans, phi, m):
        return g / delta(phi, m) if kind == 1 else g * delta(phi, m)

    def general(phi, m):
        f, e = sp.ellipkinc(phi, m), sp.ellipeinc(phi, m)
        if kind == 1:
            return (e / (2 * m * (1 - m)) - f / (2 * m)
                    - np.sin(2 * phi) / (4 * (1 - m) * delta(phi, m)))
        return (e - f) / (2 * m)

    def d_m(g, ans, phi, m):
        # near m = 0 a series (the formula is 0/0 at 0, and cancels below 0.05)
        return g * near_point(m, 0.0, 0.05, lambda t: _d_m_series(phi, t, kind),
                              lambda t: general(phi, t), fill=0.5)
    return d_phi, d_m


def _d_m_series(phi, m, kind, terms=16):
    """d/dm of F(phi|m) = sum_k a_k m^k J_k (kind 1) or E(phi|m) = sum_k b_k m^k J_k
    (kind 2): a_k = C(2k, k) / 4^k, b_k = a_k / (1 - 2k), J_k = int_0^phi sin^2k,
    J_k = ((2k-1) J_{k-1} - sin^(2k-1) phi cos phi) / 2k.  For |m| < 0.05 the
    16th term is under 1e-20."""
    s, c = np.sin(phi), np.cos(phi)
    j, s_odd, m_k, total = phi, s, 1.0, 0.0
    for k in range(1, terms + 1):
        j = ((2 * k - 1) * j - s_odd * c) / (2 * k)
        s_odd = s_odd * s * s
        a = math.comb(2 * k, k) / 4 ** k
        total = total + k * (a if kind == 1 else a / (1 - 2 * k)) * m_k * j
        m_k = m_k * m
    return total


def register():
    """Declare this family's rules (called by ops.special.register_rules)."""
    _error_functions()
    _elementary()
    _boxcox()
    _exponential_integrals()
    _elliptic()
