"""scipy.special rules: Bessel, Hankel, Struve, Kelvin and Airy functions,
their integrals, spherical Bessel functions and Wright's function.

Derivatives in the argument come from the recurrences in the order
(DLMF 10.6, 10.29, 11.4): ``J_v' = (J_{v-1} - J_{v+1}) / 2``,
``I_v' = (I_{v-1} + I_{v+1}) / 2``, ``K_v' = -(K_{v-1} + K_{v+1}) / 2``, so a
derivative is the same function at shifted orders and differentiates again.
Derivatives in the order have no closed form: the order is refused by name.
Exponentially scaled variants (``ive``, ``jve``, ``yve``) scale by
``exp(-|Re x|)`` or ``exp(-|Im x|)``, not holomorphic: real arguments only.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.var import unwrap_all
from .common import near_point, series
from .special_common import define, outputs, real_only, sp, spu


def _half_sum(f, sign):
    """d/dx f(v, x) = (f(v-1, x) + sign f(v+1, x)) / 2."""
    return lambda g, ans, v, x: g * 0.5 * (f(v - 1, x) + sign * f(v + 1, x))


def _scaled(f, sign, name):
    """Like :func:`_half_sum` for f(v, x) = F(v, x) exp(-|x|), real x."""
    def scaled_rule(g, ans, v, x):
        real_only(x, name)
        return g * (0.5 * (f(v - 1, x) + sign * f(v + 1, x)) - np.sign(x) * ans)
    return scaled_rule


def _orders():
    define(sp.iv, None, _half_sum(sp.iv, 1))
    define(sp.ive, None, _scaled(sp.ive, 1, "ive"))
    define(sp.kv, None, lambda g, ans, v, x: -g * 0.5 * (sp.kv(v - 1, x) + sp.kv(v + 1, x)))
    # kve = K e^x (holomorphic): kve' = kve - (kve(v-1) + kve(v+1)) / 2
    define(sp.kve, None, lambda g, ans, v, x: g * (ans - 0.5 * (sp.kve(v - 1, x)
                                                                + sp.kve(v + 1, x))))
    define(sp.jv, None, _half_sum(sp.jv, -1))
    define(sp.yv, None, _half_sum(sp.yv, -1))
    # jve, yve = J, Y exp(-|Im x|): on real x the same recurrences
    define(sp.jve, None, lambda g, ans, v, x: _half_sum(sp.jve, -1)(g, ans, v, real_only(x, "jve")))
    define(sp.yve, None, lambda g, ans, v, x: _half_sum(sp.yve, -1)(g, ans, v, real_only(x, "yve")))
    define(sp.kn, None, lambda g, ans, n, x: -g * 0.5 * (sp.kn(n - 1, x) + sp.kn(n + 1, x)))
    define(sp.yn, None, lambda g, ans, n, x: g * 0.5 * (sp.yn(n - 1, x) - sp.yn(n + 1, x)))
    # Hankel: H' = (H_{v-1} - H_{v+1}) / 2; hankel1e = H1 e^{-ix}, hankel2e = H2 e^{ix}
    define(sp.hankel1, None, _half_sum(sp.hankel1, -1))
    define(sp.hankel2, None, _half_sum(sp.hankel2, -1))
    define(sp.hankel1e, None, lambda g, ans, v, x: _half_sum(sp.hankel1e, -1)(g, ans, v, x)
           - 1j * g * ans)
    define(sp.hankel2e, None, lambda g, ans, v, x: _half_sum(sp.hankel2e, -1)(g, ans, v, x)
           + 1j * g * ans)


def _integer_orders():
    define(sp.j0, lambda g, ans, x: -g * sp.j1(x))
    define(sp.j1, lambda g, ans, x: g * 0.5 * (sp.j0(x) - sp.jv(2.0, x)))
    define(sp.y0, lambda g, ans, x: -g * sp.y1(x))
    define(sp.y1, lambda g, ans, x: g * 0.5 * (sp.y0(x) - sp.yv(2.0, x)))
    define(sp.i0, lambda g, ans, x: g * sp.i1(x))
    define(sp.i1, lambda g, ans, x: g * 0.5 * (sp.i0(x) + sp.iv(2.0, x)))
    define(sp.i0e, lambda g, ans, x: g * (sp.i1e(x) - np.sign(x) * ans))
    define(sp.i1e, lambda g, ans, x: g * (0.5 * (sp.i0e(x) + sp.ive(2.0, x)) - np.sign(x) * ans))
    define(sp.k0, lambda g, ans, x: -g * sp.k1(x))
    define(sp.k1, lambda g, ans, x: -g * 0.5 * (sp.k0(x) + sp.kv(2.0, x)))
    define(sp.k0e, lambda g, ans, x: g * (ans - sp.k1e(x)))
    define(sp.k1e, lambda g, ans, x: g * (ans - 0.5 * (sp.k0e(x) + sp.kve(2.0, x))))


def _struve_term(v, x):
    """(x/2)^v / (2 sqrt(pi) Gamma(v + 3/2)), the inhomogeneous term of the
    Struve recurrences (the order ``v`` is a constant)."""
    v = unwrap_all(v)
    return (x / 2) ** v / (2 * np.sqrt(np.pi) * sp.gamma(v + 1.5))


def _struve_d_series(v, x, sign, terms=12):
    """d/dx of H_v (sign -1) or L_v (sign 1) = sum_k sign^k (x/2)^(2k+v+1) /
    (Gamma(k + 3/2) Gamma(k + v + 3/2)), term by term; for |x| < 1/2 the 12th
    term is under 1e-25 of the first."""
    v = unwrap_all(v)
    half = x / 2
    total = 0.0
    for k in range(terms):
        c = sign ** k * (2 * k + v + 1) / (2 * sp.gamma(k + 1.5) * sp.gamma(k + v + 1.5))
        total = total + c * half ** (2 * k + v)
    return total


def _struve_kelvin():
    # DLMF 11.4.24, 11.4.26: H_v' = (H_{v-1} - H_{v+1}) / 2 + c_v(x),
    # L_v' = (L_{v-1} + L_{v+1}) / 2 + c_v(x), c_v(x) = (x/2)^v / (2 sqrt(pi) G(v + 3/2));
    # no division by x, so finite at x = 0 (H_0'(0) = 2/pi), unlike H_{v-1} - v H_v / x
    # Near 0 the derivative of the power series, itself differentiable: the orders
    # v - 1 < 0 that the recurrence reaches are singular at 0 (H_0''(0) was NaN).
    define(sp.struve, None, lambda g, ans, v, x: g * near_point(
        x, 0.0, 0.5, lambda t: _struve_d_series(v, t, -1),
        lambda t: 0.5 * (sp.struve(v - 1, t) - sp.struve(v + 1, t)) + _struve_term(v, t),
        near_fill=0.25))
    define(sp.modstruve, None, lambda g, ans, v, x: g * near_point(
        x, 0.0, 0.5, lambda t: _struve_d_series(v, t, 1),
        lambda t: 0.5 * (sp.modstruve(v - 1, t) + sp.modstruve(v + 1, t)) + _struve_term(v, t),
        near_fill=0.25))
    # Kelvin: w = ber + i bei (and ker + i kei) solve w'' = -w'/x + i w; ber'/x and
    # bei'/x are series near 0 (finite there: ber''(0) = 0, bei''(0) = 1/2)
    define(sp.ber, lambda g, ans, x: g * sp.berp(x))
    define(sp.bei, lambda g, ans, x: g * sp.beip(x))
    define(sp.ker, lambda g, ans, x: g * sp.kerp(x))
    define(sp.kei, lambda g, ans, x: g * sp.keip(x))
    define(sp.berp, lambda g, ans, x: g * (-_berp_over_x(x) - sp.bei(x)))
    define(sp.beip, lambda g, ans, x: g * (-_beip_over_x(x) + sp.ber(x)))
    define(sp.kerp, lambda g, ans, x: g * (-ans / x - sp.kei(x)))
    define(sp.keip, lambda g, ans, x: g * (-ans / x + sp.ker(x)))
    # kelvin(x) = (Be, Ke, Be', Ke') with Be = ber + i bei, Ke = ker + i kei
    define(sp.kelvin, outputs(lambda a, x: a[2], lambda a, x: a[3],
                              lambda a, x: -(_berp_over_x(x) + 1j * _beip_over_x(x))
                              + 1j * a[0],
                              lambda a, x: -a[3] / x + 1j * a[1]))


# With w = (x/2)^4: ber'(x)/x = (x^2/4) sum_{k>=1} (-1)^k k w^(k-1) / ((2k)!)^2 and
# bei'(x)/x = sum_k (-1)^k (k + 1/2) w^k / ((2k+1)!)^2; below |x| = 1/2, w < 0.004
_BERP_OVER_X = tuple((-1) ** k * k / math.factorial(2 * k) ** 2 for k in range(1, 9))
_BEIP_OVER_X = tuple((-1) ** k * (k + 0.5) / math.factorial(2 * k + 1) ** 2 for k in range(8))


def _berp_over_x(x):
    return near_point(x, 0.0, 0.5, lambda t: t * t / 4 * series((t / 2) ** 4, _BERP_OVER_X),
                      lambda t: sp.berp(t) / t)


def _beip_over_x(x):
    return near_point(x, 0.0, 0.5, lambda t: series((t / 2) ** 4, _BEIP_OVER_X),
                      lambda t: sp.beip(t) / t)


# Series near 0 (u = x^2/4) of integrands with a removable 0/0 there:
# (i0(x) - 1)/x = (x/4) sum_{k>=1} u^(k-1) / k!^2,  (1 - j0(x))/x = (x/4) sum (-u)^(k-1) / k!^2,
# H0(x)/x = (1/2) sum_k (-u)^k / Gamma(k + 3/2)^2
_I0M1_OVER_X = tuple(1 / math.factorial(k) ** 2 for k in range(1, 13))
_J0M1_OVER_X = tuple((-1) ** (k + 1) / math.factorial(k) ** 2 for k in range(1, 13))
_H0_OVER_X = tuple((-1) ** k / math.gamma(k + 1.5) ** 2 for k in range(13))


def _over_x_near_0(x, coefficients, scale, away):
    """``away(x)``, a quotient by ``x`` that is 0/0 at 0, and near 0 the
    series ``scale(x) * sum_k c_k (x^2/4)^k``."""
    return near_point(x, 0.0, 0.5, lambda t: scale(t) * series(t * t / 4, coefficients), away)

def _airy():
    # Ai'' = x Ai, Bi'' = x Bi; airy(x) = (Ai, Ai', Bi, Bi')
    define(sp.airy, outputs(lambda a, x: a[1], lambda a, x: x * a[0],
                            lambda a, x: a[3], lambda a, x: x * a[2]))
    # airye (real x): eAi = Ai e^z, eBi = Bi e^-|Re z|, z = 2/3 x^(3/2), z' = sqrt(x)
    # (for x < 0, Re z = 0: eBi = Bi; eAi is NaN there)
    def s(x):
        return np.sqrt(np.maximum(real_only(x, "airye"), 0.0))
    define(sp.airye, outputs(lambda a, x: a[1] + s(x) * a[0], lambda a, x: x * a[0] + s(x) * a[1],
                             lambda a, x: a[3] - s(x) * a[2], lambda a, x: x * a[2] - s(x) * a[3]))


def _integrals():
    # the derivative of an integral from 0 to x (or from x to infinity) is its integrand
    define(sp.iti0k0, outputs(lambda a, x: sp.i0(x), lambda a, x: sp.k0(x)))
    define(sp.itj0y0, outputs(lambda a, x: sp.j0(x), lambda a, x: sp.y0(x)))
    define(sp.it2i0k0, outputs(lambda a, x: _over_x_near_0(
        x, _I0M1_OVER_X, lambda t: t / 4, lambda t: (sp.i0(t) - 1) / t),
        lambda a, x: -sp.k0(x) / x))
    define(sp.it2j0y0, outputs(lambda a, x: _over_x_near_0(
        x, _J0M1_OVER_X, lambda t: t / 4, lambda t: (1 - sp.j0(t)) / t),
        lambda a, x: -sp.y0(x) / x))
    define(sp.itstruve0, lambda g, ans, x: g * sp.struve(0.0, x))
    define(sp.it2struve0, lambda g, ans, x: -g * _over_x_near_0(
        x, _H0_OVER_X, lambda t: 0.5, lambda t: sp.struve(0.0, t) / t))
    define(sp.itmodstruve0, lambda g, ans, x: g * sp.modstruve(0.0, x))
    define(sp.itairy, outputs(lambda a, x: sp.airy(x)[0], lambda a, x: sp.airy(x)[2],
                              lambda a, x: sp.airy(-x)[0], lambda a, x: sp.airy(-x)[2]))
    # besselpoly(a, l, v) = int_0^1 t^l J_v(2at) dt: d/da by J's recurrence
    define(sp.besselpoly, lambda g, ans, a, lam, v: g * (sp.besselpoly(a, lam + 1, v - 1)
                                                         - sp.besselpoly(a, lam + 1, v + 1)))


def _spherical():
    # scipy.special.spherical_jn(n, x[, derivative]) calls these private ufuncs;
    # second derivatives of y_n, k_n from the ODEs x^2 w'' + 2x w' +- (x^2 -+ n(n+1)) w = 0
    def first(d):
        return lambda g, ans, n, x: g * d(n, x)

    def oscillating(f):
        return lambda g, ans, n, x: g * (-2 * ans / x - (1 - n * (n + 1) / (x * x)) * f(n, x))

    def modified(f):
        return lambda g, ans, n, x: g * (-2 * ans / x + (1 + n * (n + 1) / (x * x)) * f(n, x))

    def recurrence(d, sign):
        # j_n, i_n are finite at 0: (2n+1) f_n' = n f_{n-1} -+ (n+1) f_{n+1} (DLMF
        # 10.51.2, 10.51.4) differentiated needs no 1/x (j_0''(0) = -1/3 is right)
        return lambda g, ans, n, x: g * (n * d(np.maximum(n - 1, 0), x)
                                         + sign * (n + 1) * d(n + 1, x)) / (2 * n + 1)
    for kind in ("jn", "yn", "in", "kn"):
        f, d = getattr(spu, f"_spherical_{kind}"), getattr(spu, f"_spherical_{kind}_d")
        second = {"jn": recurrence(d, -1), "in": recurrence(d, 1),
                  "yn": oscillating(f), "kn": modified(f)}[kind]
        define(f, None, first(d), name=f"scipy.special.spherical_{kind}")
        define(d, None, second, name=f"scipy.special.spherical_{kind}(derivative=True)")


def _wright():
    # Phi(a, b; x) = sum_k x^k / (k! G(ak + b)): d/dx = Phi(a, a + b; x)
    define(sp.wright_bessel, None, None,
           lambda g, ans, a, b, x: g * sp.wright_bessel(a, a + b, x))
    define(sp.log_wright_bessel, None, None,
           lambda g, ans, a, b, x: g * np.exp(sp.log_wright_bessel(a, a + b, x) - ans))


def register():
    """Declare this family's rules (called by ops.special.register_rules)."""
    _orders()
    _integer_orders()
    _struve_kelvin()
    _airy()
    _integrals()
    _spherical()
    _wright()
