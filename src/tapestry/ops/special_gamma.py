"""scipy.special rules: the gamma, beta and zeta families, incomplete gamma
and beta integrals with their inverses, and the distribution functions
(CDFs, survival functions, quantiles) built on them.

Derivatives in the shape parameters of incomplete integrals (``a`` of
``gammainc(a, x)``, ``a, b`` of ``betainc``, degrees of freedom) have no
closed form: those arguments are refused by name (rule ``None``).  The
integer arguments SciPy rounds down (``k`` of ``pdtr``, ``k, n`` of
``bdtr``) are piecewise constant: a zero cotangent.  An inverse ``x(p)``
of a CDF ``F`` has ``dx/dp = 1 / F'(x)``, read off the result.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.batched import all_items
from ..core.var import unwrap_all

from .special_common import (SQRT_2PI, ZERO, beta_density, define, exprel_d1,
                             gamma_density, refuse, sp, spu)

psi = sp.digamma  # (this module is imported by the loader only when SciPy is installed)


def _rgamma_rule(g, ans, x):
    """(1/Gamma)' = -psi / Gamma for x >= 1/2; below, from the reflection
    1/Gamma(x) = Gamma(1-x) sin(pi x) / pi, the derivative
    Gamma(1-x) (cos(pi x) - sin(pi x) psi(1-x) / pi), finite at the poles
    x = -n of Gamma (where it is (-1)^n n!) and differentiable again."""
    low = np.real(x) < 0.5  # both forms hold for complex x too
    xl, xh = np.where(low, x, 0.0), np.where(low, 1.0, x)
    reflected = sp.gamma(1 - xl) * (np.cos(math.pi * xl) - np.sin(math.pi * xl) * psi(1 - xl)
                                    / math.pi)
    return g * np.where(low, reflected, -sp.rgamma(xh) * psi(xh))


# --- at a pole of a Gamma in the denominator --------------------------------------
# B, binom and poch divide by Gamma functions: where one has a pole the value is 0
# and the psi form of the derivative, value * (psi - psi), is 0 * inf.  There the
# derivative is written with 1/Gamma = rgamma, whose rule is exact at its zeros.
def _pole(z):
    """Where ``z`` is 0, -1, -2, ... (a pole of Gamma, a zero of rgamma)."""
    z = np.real(unwrap_all(z))
    return (z <= 0) & (z == np.floor(z))


def _drgamma(x):
    return _rgamma_rule(1.0, None, x)


def _at_poles(pole, general, at_pole, *args):
    """``at_pole(*args)`` where ``pole``, ``general(*args)`` elsewhere, each on
    arguments replaced by 0.5 where the other applies (finite either way)."""
    if not np.any(all_items(pole)):
        return general(*args)
    return np.where(pole, at_pole(*[np.where(pole, a, 0.5) for a in args]),
                    general(*[np.where(pole, 0.5, a) for a in args]))


def _beta_da(a, b):
    """d/da G(a) G(b) rgamma(a+b) = B (psi(a) - psi(a+b)); at a pole of a + b,
    G(a) G(b) (psi(a) rgamma(a+b) + rgamma'(a+b))."""
    return _at_poles(
        _pole(a + b) & ~_pole(a) & ~_pole(b),
        lambda a, b: sp.beta(a, b) * (psi(a) - psi(a + b)),
        lambda a, b: sp.gamma(a) * sp.gamma(b) * (psi(a) * sp.rgamma(a + b) + _drgamma(a + b)),
        a, b)


def _binom_dk(n, k):
    """d/dk G(n+1) rgamma(k+1) rgamma(n-k+1); binom (psi(n-k+1) - psi(k+1))
    away from the poles of G(k+1) and G(n-k+1)."""
    return _at_poles(
        (_pole(k + 1) | _pole(n - k + 1)) & ~_pole(n + 1),
        lambda n, k: sp.binom(n, k) * (psi(n - k + 1) - psi(k + 1)),
        lambda n, k: sp.gamma(n + 1) * (_drgamma(k + 1) * sp.rgamma(n - k + 1)
                                        - sp.rgamma(k + 1) * _drgamma(n - k + 1)),
        n, k)


def _binom_dn(n, k):
    """d/dn G(n+1) rgamma(k+1) rgamma(n-k+1) = binom (psi(n+1) - psi(n-k+1))."""
    return _at_poles(
        _pole(n - k + 1) & ~_pole(n + 1) & ~_pole(k + 1),
        lambda n, k: sp.binom(n, k) * (psi(n + 1) - psi(n - k + 1)),
        lambda n, k: sp.gamma(n + 1) * sp.rgamma(k + 1) * (
            psi(n + 1) * sp.rgamma(n - k + 1) + _drgamma(n - k + 1)),
        n, k)


def _poch_dz(z, m):
    """d/dz G(z+m) rgamma(z) = poch (psi(z+m) - psi(z)); at a pole of G(z),
    G(z+m) (psi(z+m) rgamma(z) + rgamma'(z))."""
    return _at_poles(
        _pole(z) & ~_pole(z + m),
        lambda z, m: sp.poch(z, m) * (psi(z + m) - psi(z)),
        lambda z, m: sp.gamma(z + m) * (psi(z + m) * sp.rgamma(z) + _drgamma(z)),
        z, m)


def _gamma_family():
    # Gamma' = Gamma psi; loggamma' = psi
    define(sp.gamma, lambda g, ans, x: g * ans * psi(x))
    define(sp.loggamma, lambda g, ans, x: g * psi(x))
    define(sp.rgamma, _rgamma_rule)
    # B(a, b) = G(a)G(b)/G(a+b): dB/da = B (psi(a) - psi(a+b))
    define(sp.beta, lambda g, ans, a, b: g * _beta_da(a, b),
           lambda g, ans, a, b: g * _beta_da(b, a))
    define(sp.betaln, lambda g, ans, a, b: g * (psi(a) - psi(a + b)),
           lambda g, ans, a, b: g * (psi(b) - psi(a + b)))
    # binom(n, k) = G(n+1) / (G(k+1) G(n-k+1))
    define(sp.binom, lambda g, ans, n, k: g * _binom_dn(n, k),
           lambda g, ans, n, k: g * _binom_dk(n, k))
    # poch(z, m) = G(z+m) / G(z)
    define(sp.poch, lambda g, ans, z, m: g * _poch_dz(z, m),
           lambda g, ans, z, m: g * ans * psi(z + m))
    # Hurwitz zeta(x, q) = sum_k (k+q)^-x: d/dq = -x zeta(x+1, q); d/dx has no
    # SciPy function (scipy.special.zeta(x, q) calls the ufunc _zeta).
    define(spu._zeta, None, lambda g, ans, x, q: -g * x * spu._zeta(x + 1, q),
           name="scipy.special.zeta")
    refuse(spu._riemann_zeta, "scipy.special.zeta",
           "the derivative of Riemann's zeta(x) in x has no SciPy function")


def _incomplete():
    # P(a, x) = gammainc: dP/dx = x^(a-1) e^-x / G(a); Q = 1 - P
    define(sp.gammainc, None, lambda g, ans, a, x: g * gamma_density(a, x))
    define(sp.gammaincc, None, lambda g, ans, a, x: -g * gamma_density(a, x))
    define(sp.gammaincinv, None, lambda g, ans, a, y: g / gamma_density(a, ans))
    define(sp.gammainccinv, None, lambda g, ans, a, y: -g / gamma_density(a, ans))
    # I_x(a, b) = betainc: dI/dx = x^(a-1) (1-x)^(b-1) / B(a, b)
    define(sp.betainc, None, None, lambda g, ans, a, b, x: g * beta_density(a, b, x))
    define(sp.betaincc, None, None, lambda g, ans, a, b, x: -g * beta_density(a, b, x))
    define(sp.betaincinv, None, None, lambda g, ans, a, b, y: g / beta_density(a, b, ans))
    define(sp.betainccinv, None, None, lambda g, ans, a, b, y: -g / beta_density(a, b, ans))


def _t_pdf(df, t):
    return np.exp(sp.gammaln((df + 1) / 2) - sp.gammaln(df / 2) - 0.5 * np.log(df * math.pi)
                  - (df + 1) / 2 * np.log1p(t * t / df))


def _f_pdf(d1, d2, x):
    return np.exp(0.5 * (sp.xlogy(d1, d1 * x) + sp.xlogy(d2, d2) - (d1 + d2) * np.log(d1 * x + d2))
                  - np.log(x) - sp.betaln(d1 / 2, d2 / 2))


def _ncx2_pdf_x(g, ans, x, k, nc):
    """f = e^{-(x+nc)/2} (x/nc)^{k/4-1/2} I_v(s) / 2, v = k/2 - 1, s = sqrt(nc x):
    d log f/dx = -1/2 + (k/4 - 1/2)/x + sqrt(nc/x)/4 (I_{v-1} + I_{v+1})(s) / I_v(s)
    (the ratio from scaled Bessel functions; valid for every k > 0)."""
    v, s = k / 2 - 1, np.sqrt(nc * x)
    ratio = (sp.ive(v - 1, s) + sp.ive(v + 1, s)) / sp.ive(v, s)
    return g * ans * (-0.5 + (k / 4 - 0.5) / x + 0.25 * np.sqrt(nc / x) * ratio)


def _student_chi2_f():
    define(sp.stdtr, None, lambda g, ans, df, t: g * _t_pdf(df, t))
    define(sp.stdtrit, None, lambda g, ans, df, p: g / _t_pdf(df, ans))
    # chdtr(v, x) = P(v/2, x/2): density P'(v/2, x/2) / 2; chdtri inverts chdtrc
    define(sp.chdtr, None, lambda g, ans, v, x: g * 0.5 * gamma_density(v / 2, x / 2))
    define(sp.chdtrc, None, lambda g, ans, v, x: -g * 0.5 * gamma_density(v / 2, x / 2))
    define(sp.chdtri, None, lambda g, ans, v, p: -g / (0.5 * gamma_density(v / 2, ans / 2)))
    define(sp.fdtr, None, None, lambda g, ans, d1, d2, x: g * _f_pdf(d1, d2, x))
    define(sp.fdtrc, None, None, lambda g, ans, d1, d2, x: -g * _f_pdf(d1, d2, x))
    define(sp.fdtri, None, None, lambda g, ans, d1, d2, p: g / _f_pdf(d1, d2, ans))
    # noncentral chi-square: F(x; k, nc) = sum_j Pois(j; nc/2) F_{k+2j}(x), so
    # dF/dnc = (F(x; k+2, nc) - F(x; k, nc)) / 2; dF/dx is its density.
    define(sp.chndtr, lambda g, ans, x, k, nc: g * spu._ncx2_pdf(x, k, nc), None,
           lambda g, ans, x, k, nc: g * 0.5 * (sp.chndtr(x, k + 2, nc) - ans))
    define(sp.chndtrix, lambda g, ans, p, k, nc: g / spu._ncx2_pdf(ans, k, nc), None,
           lambda g, ans, p, k, nc: -g * 0.5 * (sp.chndtr(ans, k + 2, nc) - p)
           / spu._ncx2_pdf(ans, k, nc))
    # chndtrinc solves chndtr(x, k, nc) = p for nc: dnc/dp = 1/(dF/dnc), dnc/dx = -F'(x)/(dF/dnc).
    # Where no nc >= 0 solves it (p above chndtr(x, k, 0)) SciPy returns a bound, not
    # a solution: the implicit derivative would be a made-up number, so it is NaN there.
    def dfdnc(x, k, nc, p):
        return 0.5 * (sp.chndtr(x, k + 2, nc) - p)

    def solved(x, k, nc, p):
        x, k, nc, p = unwrap_all((x, k, nc, p))
        return np.isclose(sp.chndtr(x, k, nc), p, rtol=1e-6, atol=1e-12)
    define(sp.chndtrinc,
           lambda g, ans, x, k, p: -g * np.where(solved(x, k, ans, p), spu._ncx2_pdf(x, k, ans)
                                                 / dfdnc(x, k, ans, p), np.nan),
           None, lambda g, ans, x, k, p: g * np.where(solved(x, k, ans, p),
                                                      1 / dfdnc(x, k, ans, p), np.nan))
    define(sp.ncfdtri, None, None, None,
           lambda g, ans, d1, d2, nc, p: g / spu._ncf_pdf(ans, d1, d2, nc))
    define(sp.nctdtrit, None, None, lambda g, ans, df, nc, p: g / spu._nct_pdf(ans, df, nc))
    define(sp.ncfdtr, None, None, None,
           lambda g, ans, d1, d2, nc, f: g * spu._ncf_pdf(f, d1, d2, nc))
    define(sp.nctdtr, None, None, lambda g, ans, df, nc, t: g * spu._nct_pdf(t, df, nc))
    define(spu._ncx2_pdf, _ncx2_pdf_x, None,
           lambda g, ans, x, k, nc: g * 0.5 * (spu._ncx2_pdf(x, k + 2, nc) - ans),
           name="scipy.special.chndtr's density")
    for f, name in ((spu._ncf_pdf, "ncfdtr"), (spu._nct_pdf, "nctdtr")):
        refuse(f, f"scipy.special.{name}'s density",
               f"the second derivative of {name} (its density's derivative) has no rule")


def _gamma_poisson():
    # gdtr(a, b, x) = P(b, a x) (a: rate, b: shape)
    define(sp.gdtr, lambda g, ans, a, b, x: g * x * gamma_density(b, a * x), None,
           lambda g, ans, a, b, x: g * a * gamma_density(b, a * x))
    define(sp.gdtrc, lambda g, ans, a, b, x: -g * x * gamma_density(b, a * x), None,
           lambda g, ans, a, b, x: -g * a * gamma_density(b, a * x))
    # gdtrix solves P(b, a x) = p for x: a x is fixed by p, so dx/da = -x/a
    define(sp.gdtrix, lambda g, ans, a, b, p: -g * ans / a, None,
           lambda g, ans, a, b, p: g / (a * gamma_density(b, a * ans)))
    define(sp.gdtria, lambda g, ans, p, b, x: g / (x * gamma_density(b, ans * x)), None,
           lambda g, ans, p, b, x: -g * ans / x)
    # pdtr(k, m) = Q(floor(k)+1, m); k is rounded down: piecewise constant
    define(sp.pdtr, ZERO, lambda g, ans, k, m: -g * gamma_density(np.floor(k) + 1, m))
    define(sp.pdtrc, ZERO, lambda g, ans, k, m: g * gamma_density(np.floor(k) + 1, m))
    define(sp.pdtri, ZERO, lambda g, ans, k, y: -g / gamma_density(np.floor(k) + 1, ans))


def _binomial():
    # bdtr(k, n, p) = 1 - I_p(k+1, n-k) with k, n rounded down
    def kn(k, n):
        return np.floor(k) + 1, np.floor(n) - np.floor(k)
    define(sp.bdtr, ZERO, ZERO, lambda g, ans, k, n, p: -g * beta_density(*kn(k, n), p))
    define(sp.bdtrc, ZERO, ZERO, lambda g, ans, k, n, p: g * beta_density(*kn(k, n), p))
    define(sp.bdtri, ZERO, ZERO, lambda g, ans, k, n, y: -g / beta_density(*kn(k, n), ans))
    # nbdtr(k, n, p) = I_p(n, k+1)
    def nk(k, n):
        return np.floor(n), np.floor(k) + 1
    define(sp.nbdtr, ZERO, ZERO, lambda g, ans, k, n, p: g * beta_density(*nk(k, n), p))
    define(sp.nbdtrc, ZERO, ZERO, lambda g, ans, k, n, p: -g * beta_density(*nk(k, n), p))
    define(sp.nbdtri, ZERO, ZERO, lambda g, ans, k, n, y: g / beta_density(*nk(k, n), ans))


def _normal_family():
    # ndtri'(p) = 1 / phi(ndtri(p)); ndtri_exp(y) = ndtri(e^y)
    define(sp.ndtri, lambda g, ans, p: g * SQRT_2PI * np.exp(0.5 * ans * ans))
    define(sp.ndtri_exp, lambda g, ans, y: g * SQRT_2PI * np.exp(y + 0.5 * ans * ans))
    # nrdtrimn(p, std, x) = x - std ndtri(p); nrdtrisd(mn, p, x) = (x - mn) / ndtri(p)
    define(sp.nrdtrimn,
           lambda g, ans, p, s, x: -g * s * SQRT_2PI * np.exp(0.5 * sp.ndtri(p) ** 2),
           lambda g, ans, p, s, x: -g * sp.ndtri(p), lambda g, ans, p, s, x: g)
    define(sp.nrdtrisd, lambda g, ans, mn, p, x: -g / sp.ndtri(p),
           lambda g, ans, mn, p, x: -g * ans * SQRT_2PI * np.exp(0.5 * sp.ndtri(p) ** 2)
           / sp.ndtri(p),
           lambda g, ans, mn, p, x: g / sp.ndtri(p))
    # Owen's T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1+t^2)/2) / (1+t^2) dt
    define(sp.owens_t,
           lambda g, ans, h, a: -g * np.exp(-0.5 * h * h) * sp.erf(a * h / math.sqrt(2))
           / (2 * SQRT_2PI),
           lambda g, ans, h, a: g * np.exp(-0.5 * h * h * (1 + a * a))
           / (2 * math.pi * (1 + a * a)))


def _tukey_kolmogorov():
    # Tukey lambda: the CDF p inverts Q(p) = (p^l - (1-p)^l) / l, so dp/dx = 1/Q'(p)
    # and dp/dl = -(dQ/dl) / Q'(p), with dQ/dl = L_p^2 exprel'(l L_p) - L_q^2 exprel'(l L_q)
    # (L_p = log p, L_q = log(1-p); stable at l = 0, the logistic case).
    def q_prime(p, lam):
        return p ** (lam - 1) + (1 - p) ** (lam - 1)

    def dq_dlam(p, lam):
        lp, lq = np.log(p), np.log1p(-p)
        return lp * lp * exprel_d1(lam * lp) - lq * lq * exprel_d1(lam * lq)
    # For l > 0 the support is [-1/l, 1/l]: outside it p is 0 or 1, flat in x and l.
    def outside(p):
        return (unwrap_all(p) == 0) | (unwrap_all(p) == 1)

    def tukey_dx(g, ans, x, lam):
        out = outside(ans)
        return g * np.where(out, 0.0, 1 / q_prime(np.where(out, 0.5, ans), lam))

    def tukey_dlam(g, ans, x, lam):
        out = outside(ans)
        p = np.where(out, 0.5, ans)
        return -g * np.where(out, 0.0, dq_dlam(p, lam) / q_prime(p, lam))
    define(sp.tklmbda, tukey_dx, tukey_dlam)
    # Kolmogorov's survival function and Smirnov's: SciPy's own densities
    # (_kolmogp and _smirnovp are the derivatives of the survival functions)
    define(sp.kolmogorov, lambda g, ans, y: g * spu._kolmogp(y))
    define(sp.kolmogi, lambda g, ans, p: g / spu._kolmogp(ans))
    define(sp.smirnov, None, lambda g, ans, n, d: g * spu._smirnovp(n, d))
    define(sp.smirnovi, None, lambda g, ans, n, p: g / spu._smirnovp(n, ans))
    for f, name in ((spu._kolmogp, "kolmogorov"), (spu._smirnovp, "smirnov")):
        refuse(f, f"scipy.special.{name}'s density",
               f"the second derivative of {name} has no rule")


def register():
    """Declare this family's rules (called by ops.special.register_rules)."""
    _gamma_family()
    _incomplete()
    _student_chi2_f()
    _gamma_poisson()
    _binomial()
    _normal_family()
    _tukey_kolmogorov()

