"""scipy.special rules: orthogonal polynomials, associated Legendre
functions, hypergeometric and parabolic-cylinder functions -- derivatives
in the argument ``x`` only.

Derivatives lower the degree (DLMF 18.9): ``d/dx C_n^(a) = 2a C_{n-1}^(a+1)``
(Gegenbauer; Legendre is ``a = 1/2``, Chebyshev U is ``a = 1``),
``T_n' = n U_{n-1}``, ``d/dx P_n^(a,b) = (n+a+b+1)/2 P_{n-1}^(a+1,b+1)``,
``L_n^(a)' = -L_{n-1}^(a+1)``, ``H_n' = 2n H_{n-1}``; SciPy returns 0 at
degree -1, so degree 0 needs no case of its own.  Hypergeometric functions
differentiate to shifted parameters (DLMF 15.5.1, 13.3.15).  Degrees and
parameters have no closed-form derivative: refused by name.
"""
from __future__ import annotations

import numpy as np

from .special_common import define, outputs, sp


def _polynomials():
    geg = sp.eval_gegenbauer
    define(sp.eval_chebyt, None, lambda g, ans, n, x: g * n * sp.eval_chebyu(n - 1, x))
    define(sp.eval_chebyu, None, lambda g, ans, n, x: g * 2 * geg(n - 1, 2.0, x))
    # C_n(x) = 2 T_n(x/2), S_n(x) = U_n(x/2)
    define(sp.eval_chebyc, None, lambda g, ans, n, x: g * n * sp.eval_chebys(n - 1, x))
    define(sp.eval_chebys, None, lambda g, ans, n, x: g * geg(n - 1, 2.0, x / 2))
    # shifted: T*_n(x) = T_n(2x - 1), U*_n(x) = U_n(2x - 1), P*_n(x) = P_n(2x - 1)
    define(sp.eval_sh_chebyt, None, lambda g, ans, n, x: g * 2 * n * sp.eval_sh_chebyu(n - 1, x))
    define(sp.eval_sh_chebyu, None, lambda g, ans, n, x: g * 4 * geg(n - 1, 2.0, 2 * x - 1))
    define(sp.eval_legendre, None, lambda g, ans, n, x: g * geg(n - 1, 1.5, x))
    define(sp.eval_sh_legendre, None, lambda g, ans, n, x: g * 2 * geg(n - 1, 1.5, 2 * x - 1))
    define(sp.eval_gegenbauer, None, None,
           lambda g, ans, n, a, x: g * 2 * a * geg(n - 1, a + 1, x))
    define(sp.eval_jacobi, None, None, None, lambda g, ans, n, a, b, x:
           g * 0.5 * (n + a + b + 1) * sp.eval_jacobi(n - 1, a + 1, b + 1, x))
    # G_n^(p,q)(x) = P_n^(p-q, q-1)(2x - 1) / binom(2n+p-1, n)
    define(sp.eval_sh_jacobi, None, None, None, lambda g, ans, n, p, q, x:
           g * (n + p) * sp.eval_jacobi(n - 1, p - q + 1, q, 2 * x - 1) / sp.binom(2 * n + p - 1, n))
    define(sp.eval_laguerre, None, lambda g, ans, n, x: -g * sp.eval_genlaguerre(n - 1, 1.0, x))
    define(sp.eval_genlaguerre, None, None,
           lambda g, ans, n, a, x: -g * sp.eval_genlaguerre(n - 1, a + 1, x))
    # integer degree only: H_{-1} is NaN in SciPy, and n H_{n-1} is 0 at n = 0
    define(sp.eval_hermite, None,
           lambda g, ans, n, x: g * 2 * n * sp.eval_hermite(np.maximum(n - 1, 0), x))
    define(sp.eval_hermitenorm, None,
           lambda g, ans, n, x: g * n * sp.eval_hermitenorm(np.maximum(n - 1, 0), x))
    # (1 - x^2) dP_v^m/dx = (v+1) x P_v^m - (v-m+1) P_{v+1}^m
    define(sp.lpmv, None, None, lambda g, ans, m, v, x:
           g * ((v + 1) * x * ans - (v - m + 1) * sp.lpmv(m, v + 1, x)) / (1 - x * x))


def _hypergeometric():
    define(sp.hyp0f1, None, lambda g, ans, b, z: g * sp.hyp0f1(b + 1, z) / b)
    define(sp.hyp1f1, None, None, lambda g, ans, a, b, z: g * a / b * sp.hyp1f1(a + 1, b + 1, z))
    define(sp.hyp2f1, None, None, None, lambda g, ans, a, b, c, z:
           g * a * b / c * sp.hyp2f1(a + 1, b + 1, c + 1, z))
    define(sp.hyperu, None, None, lambda g, ans, a, b, z: -g * a * sp.hyperu(a + 1, b + 1, z))
    # parabolic cylinder: pbdv(v, x) = (D_v, D_v'), D'' = (x^2/4 - v - 1/2) D (pbvv alike);
    # pbwa(a, x) = (W, W'), W'' = (a - x^2/4) W
    for f in (sp.pbdv, sp.pbvv):
        define(f, None, lambda g, ans, v, x: outputs(
            lambda a, x: a[1], lambda a, x: (x * x / 4 - v - 0.5) * a[0])(g, ans, x))
    define(sp.pbwa, None, lambda g, ans, a, x: outputs(
        lambda r, x: r[1], lambda r, x: (a - x * x / 4) * r[0])(g, ans, x))


def register():
    """Declare this family's rules (called by ops.special.register_rules)."""
    _polynomials()
    _hypergeometric()
