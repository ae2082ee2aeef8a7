"""scipy.special rules: orthogonal polynomials, associated Legendre
functions, hypergeometric functions, and the functions SciPy returns with
their derivative (parabolic-cylinder, Mathieu, spheroidal wave functions,
whose second derivative comes from their ODE) -- derivatives in the
argument ``x`` only.

Derivatives lower the degree (DLMF 18.9): ``d/dx C_n^(a) = 2a C_{n-1}^(a+1)``
(Gegenbauer; Legendre is ``a = 1/2``, Chebyshev U is ``a = 1``),
``T_n' = n U_{n-1}``, ``d/dx P_n^(a,b) = (n+a+b+1)/2 P_{n-1}^(a+1,b+1)``,
``L_n^(a)' = -L_{n-1}^(a+1)``, ``H_n' = 2n H_{n-1}``; degree 0 has
derivative 0 (SciPy's values at negative degrees are not always 0).
Hypergeometric functions differentiate to shifted parameters (DLMF 15.5.1,
13.3.15).  Degrees and parameters have no closed-form derivative: refused
by name.
"""
from __future__ import annotations

import numpy as np

from ..core.var import unwrap_all
from .special_common import define, outputs, sp


def _lower(n, f):
    """``f(n - 1)``, and 0 at degree 0 (the derivative of a constant): SciPy's
    value at a negative degree is not always 0 (complex loops, degree -2)."""
    return np.where(n == 0, 0.0, f(np.where(n == 0, 1, n) - 1))


def _polynomials():
    geg = sp.eval_gegenbauer
    define(sp.eval_chebyt, None,
           lambda g, ans, n, x: g * n * _lower(n, lambda m: sp.eval_chebyu(m, x)))
    define(sp.eval_chebyu, None, lambda g, ans, n, x: g * 2 * _lower(n, lambda m: geg(m, 2.0, x)))
    # C_n(x) = 2 T_n(x/2), S_n(x) = U_n(x/2)
    define(sp.eval_chebyc, None,
           lambda g, ans, n, x: g * n * _lower(n, lambda m: sp.eval_chebys(m, x)))
    define(sp.eval_chebys, None, lambda g, ans, n, x: g * _lower(n, lambda m: geg(m, 2.0, x / 2)))
    # shifted: T*_n(x) = T_n(2x - 1), U*_n(x) = U_n(2x - 1), P*_n(x) = P_n(2x - 1)
    define(sp.eval_sh_chebyt, None,
           lambda g, ans, n, x: g * 2 * n * _lower(n, lambda m: sp.eval_sh_chebyu(m, x)))
    define(sp.eval_sh_chebyu, None,
           lambda g, ans, n, x: g * 4 * _lower(n, lambda m: geg(m, 2.0, 2 * x - 1)))
    define(sp.eval_legendre, None, lambda g, ans, n, x: g * _lower(n, lambda m: geg(m, 1.5, x)))
    define(sp.eval_sh_legendre, None,
           lambda g, ans, n, x: g * 2 * _lower(n, lambda m: geg(m, 1.5, 2 * x - 1)))
    define(sp.eval_gegenbauer, None, None,
           lambda g, ans, n, a, x: g * 2 * a * _lower(n, lambda m: geg(m, a + 1, x)))
    define(sp.eval_jacobi, None, None, None, lambda g, ans, n, a, b, x:
           g * 0.5 * (n + a + b + 1) * _lower(n, lambda m: sp.eval_jacobi(m, a + 1, b + 1, x)))
    # G_n^(p,q)(x) = P_n^(p-q, q-1)(2x - 1) / binom(2n+p-1, n)
    define(sp.eval_sh_jacobi, None, None, None, lambda g, ans, n, p, q, x:
           g * (n + p) * _lower(n, lambda m: sp.eval_jacobi(m, p - q + 1, q, 2 * x - 1))
           / sp.binom(2 * n + p - 1, n))
    define(sp.eval_laguerre, None,
           lambda g, ans, n, x: -g * _lower(n, lambda m: sp.eval_genlaguerre(m, 1.0, x)))
    define(sp.eval_genlaguerre, None, None,
           lambda g, ans, n, a, x: -g * _lower(n, lambda m: sp.eval_genlaguerre(m, a + 1, x)))
    # integer degree only: H_{-1} is NaN in SciPy, and n H_{n-1} is 0 at n = 0
    define(sp.eval_hermite, None,
           lambda g, ans, n, x: g * 2 * n * sp.eval_hermite(np.maximum(n - 1, 0), x))
    define(sp.eval_hermitenorm, None,
           lambda g, ans, n, x: g * n * sp.eval_hermitenorm(np.maximum(n - 1, 0), x))
    define(sp.lpmv, None, None, lambda g, ans, m, v, x: g * _lpmv_dx(m, v, x))


def _lpmv_dx(m, v, x):
    """dP_v^m/dx.  (1 - x^2) dP_v^m/dx = (v+1) x P_v^m - (v-m+1) P_{v+1}^m is 0/0
    at x = +-1; for m = 0, P_v(x) = 2F1(-v, v+1; 1; (1-x)/2) gives
    P_v' = v (v+1)/2 2F1(1-v, v+2; 2; (1-x)/2), finite there (P_v'(1) = v(v+1)/2)
    and differentiable again.  Each branch sees inputs where it is finite."""
    m, v = unwrap_all(m), unwrap_all(v)
    legendre = m == 0
    xl, xa = np.where(legendre, x, 0.5), np.where(legendre, 0.5, x)
    at_0 = v * (v + 1) / 2 * sp.hyp2f1(1 - v, v + 2, 2.0, (1 - xl) / 2)
    general = ((v + 1) * xa * sp.lpmv(m, v, xa) - (v - m + 1) * sp.lpmv(m, v + 1, xa)) \
        / (1 - xa * xa)
    return np.where(legendre, at_0, general)


def _hyp2f1_dz(a, b, c, z):
    """d/dz 2F1(a, b; c; z) = a b / c 2F1(a+1, b+1; c+1; z), which is 0 where
    a b = 0 (2F1 is then the constant 1) even where the shifted series
    diverges (z = 1): there the shifted function is evaluated at z = 0."""
    a, b, c = unwrap_all(a), unwrap_all(b), unwrap_all(c)
    constant = a * b == 0
    return np.where(constant, 0.0, a * b / c * sp.hyp2f1(a + 1, b + 1, c + 1,
                                                         np.where(constant, 0.0, z)))


def _hypergeometric():
    define(sp.hyp0f1, None, lambda g, ans, b, z: g * sp.hyp0f1(b + 1, z) / b)
    define(sp.hyp1f1, None, None, lambda g, ans, a, b, z: g * a / b * sp.hyp1f1(a + 1, b + 1, z))
    define(sp.hyp2f1, None, None, None, lambda g, ans, a, b, c, z: g * _hyp2f1_dz(a, b, c, z))
    define(sp.hyperu, None, None, lambda g, ans, a, b, z: -g * a * sp.hyperu(a + 1, b + 1, z))
    # parabolic cylinder: pbdv(v, x) = (D_v, D_v'), D'' = (x^2/4 - v - 1/2) D (pbvv alike);
    # pbwa(a, x) = (W, W'), W'' = (a - x^2/4) W
    for f in (sp.pbdv, sp.pbvv):
        define(f, None, lambda g, ans, v, x: outputs(
            lambda a, x: a[1], lambda a, x: (x * x / 4 - v - 0.5) * a[0])(g, ans, x))
    define(sp.pbwa, None, lambda g, ans, a, x: outputs(
        lambda r, x: r[1], lambda r, x: (a - x * x / 4) * r[0])(g, ans, x))


def _ode_rule(second, scale=1.0):
    """The x-rule of a ufunc returning ``(y, y')`` of a second-order ODE,
    ``y'' = second(y, y', *params, x)`` (x the last argument); ``scale``
    converts SciPy's derivative to the argument's unit (degrees)."""
    def ode_pullback(g, ans, *args):
        x = args[-1]
        return outputs(lambda a, x: scale * a[1],
                       lambda a, x: scale * second(a[0], a[1], *args))(g, ans, x)
    return ode_pullback


def _mathieu():
    # ce, se of x in degrees (SciPy's y' is per radian): y'' = (2q cos 2x - a) y;
    # modified: y'' = (a - 2q cosh 2x) y; a = mathieu_a (ce) or mathieu_b (se)
    deg = np.pi / 180
    for f, char in ((sp.mathieu_cem, sp.mathieu_a), (sp.mathieu_sem, sp.mathieu_b)):
        define(f, None, None, _ode_rule(
            lambda y, yp, m, q, x, char=char: (2 * q * np.cos(2 * deg * x) - char(m, q)) * y,
            scale=deg))
    for f, char in ((sp.mathieu_modcem1, sp.mathieu_a), (sp.mathieu_modcem2, sp.mathieu_a),
                    (sp.mathieu_modsem1, sp.mathieu_b), (sp.mathieu_modsem2, sp.mathieu_b)):
        define(f, None, None, _ode_rule(
            lambda y, yp, m, q, x, char=char: (char(m, q) - 2 * q * np.cosh(2 * x)) * y))


def _angular(sign):
    """(1-x^2) y'' - 2x y' + (cv + sign c^2 x^2 - m^2/(1-x^2)) y = 0 (prolate: sign -1,
    oblate: +1; also the prolate radial equation, for x > 1)."""
    def second(y, yp, m, c, cv, x):
        return (2 * x * yp - (cv + sign * c * c * x * x - m * m / (1 - x * x)) * y) / (1 - x * x)
    return second


def _oblate_radial(y, yp, m, c, cv, x):
    """(x^2+1) y'' + 2x y' - (cv - c^2 x^2 - m^2/(x^2+1)) y = 0."""
    return ((cv - c * c * x * x - m * m / (x * x + 1)) * y - 2 * x * yp) / (x * x + 1)


def _spheroidal():
    for kind, cv, funs in (("pro", sp.pro_cv, (("ang1", _angular(-1)), ("rad1", _angular(-1)))),
                           ("obl", sp.obl_cv, (("ang1", _angular(1)), ("rad1", _oblate_radial)))):
        for part, second in funs:
            # f(m, n, c, x) with cv = {kind}_cv(m, n, c); f_cv(m, n, c, cv, x)
            define(getattr(sp, f"{kind}_{part}"), None, None, None, _ode_rule(
                lambda y, yp, m, n, c, x, second=second, cv=cv:
                second(y, yp, m, c, cv(m, n, c), x)))
            define(getattr(sp, f"{kind}_{part}_cv"), None, None, None, None, _ode_rule(
                lambda y, yp, m, n, c, lam, x, second=second: second(y, yp, m, c, lam, x)))


def register():
    """Declare this family's rules (called by ops.special.register_rules)."""
    _polynomials()
    _hypergeometric()
    _mathieu()
    _spheroidal()
