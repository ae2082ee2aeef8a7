"""scipy.special rules against mpmath's numerical derivatives at 30 digits
(skipped without mpmath): an independent check, tighter than finite
differences in double precision, of the rules whose derivative formulas
are easy to get subtly wrong -- the stable series near 0 (exprel, boxcox,
inv_boxcox at small lambda, ellipk near m = 0), order recurrences, and
shifted-parameter identities."""
import numpy as np
import pytest

import tapestry as tp

mp = pytest.importorskip("mpmath")
sp = pytest.importorskip("scipy.special")

mp.mp.dps = 30


def _exprel(x):
    return mp.expm1(x) / x if x != 0 else mp.mpf(1)


def _boxcox(lam):
    return lambda x: (mp.power(x, lam) - 1) / lam if lam != 0 else mp.log(x)


# name -> (tapestry-side function of x, mpmath function of x, points)
CASES = {
    "iv": (lambda x: sp.iv(1.3, x), lambda x: mp.besseli(1.3, x), [0.4, 2.0, 7.5]),
    "kv": (lambda x: sp.kv(0.6, x), lambda x: mp.besselk(0.6, x), [0.4, 2.0, 7.5]),
    "jv": (lambda x: sp.jv(2.5, x), lambda x: mp.besselj(2.5, x), [0.4, 2.0, 7.5]),
    "yv": (lambda x: sp.yv(0.3, x), lambda x: mp.bessely(0.3, x), [0.4, 2.0, 7.5]),
    "struve": (lambda x: sp.struve(1.5, x), lambda x: mp.struveh(1.5, x), [0.4, 2.0, 5.0]),
    "hyp1f1": (lambda x: sp.hyp1f1(0.7, 1.6, x), lambda x: mp.hyp1f1(0.7, 1.6, x), [-2.0, 0.3, 3.0]),
    "hyp2f1": (lambda x: sp.hyp2f1(0.5, 1.2, 2.1, x), lambda x: mp.hyp2f1(0.5, 1.2, 2.1, x),
               [-0.7, 0.1, 0.8]),
    "ellipk": (sp.ellipk, lambda m: mp.ellipk(m), [-2.0, 1e-4, -3e-5, 0.3, 0.99]),
    "ellipe": (sp.ellipe, lambda m: mp.ellipe(m), [-2.0, 1e-4, 0.3, 0.99]),
    "ellipkm1": (sp.ellipkm1, lambda p: mp.ellipk(1 - p), [1e-6, 0.2, 0.9995]),
    "ellipkinc": (lambda m: sp.ellipkinc(1.1, m), lambda m: mp.ellipf(1.1, m), [-0.5, 0.0, 0.7]),
    "ellipeinc": (lambda m: sp.ellipeinc(1.1, m), lambda m: mp.ellipe(1.1, m), [-0.5, 0.0, 0.7]),
    "agm": (lambda a: sp.agm(a, 1.3), lambda a: mp.agm(a, 1.3), [0.4, 1.3, 3.0]),
    "gammainc": (lambda x: sp.gammainc(2.3, x), lambda x: mp.gammainc(2.3, 0, x, regularized=True),
                 [0.2, 1.5, 6.0]),
    "betainc": (lambda x: sp.betainc(2.3, 0.7, x),
                lambda x: mp.betainc(2.3, 0.7, 0, x, regularized=True), [0.1, 0.5, 0.95]),
    "betaincinv": (lambda y: sp.betaincinv(2.3, 0.7, y),
                   lambda y: mp.findroot(lambda t: mp.betainc(2.3, 0.7, 0, t, regularized=True)
                                         - y, sp.betaincinv(2.3, 0.7, float(y))),
                   [0.1, 0.5, 0.9]),
    "erfinv": (sp.erfinv, lambda y: mp.erfinv(y), [-0.9, 0.1, 0.99]),
    "expn": (lambda x: sp.expn(3, x), lambda x: mp.expint(3, x), [0.2, 1.5, 6.0]),
    "zeta_q": (lambda q: sp.zeta(3.5, q), lambda q: mp.zeta(3.5, q), [0.3, 1.5, 4.0]),
    "lpmv": (lambda x: sp.lpmv(1.0, 3.0, x), lambda x: mp.legenp(3, 1, x, type=2), [-0.6, 0.2, 0.9]),
    "exprel": (sp.exprel, _exprel, [-3.0, -4e-3, 1e-9, 2e-3, 0.02, 5.0]),
    "boxcox_lambda_small": (lambda lam: sp.boxcox(2.7, lam),
                            lambda lam: (mp.power(2.7, lam) - 1) / lam, [-3e-3, 1e-7, 4e-3, 0.5]),
    "inv_boxcox_lambda_small": (lambda lam: sp.inv_boxcox(1.4, lam),
                                lambda lam: mp.power(1 + lam * 1.4, 1 / lam),
                                [-5e-3, 1e-7, 6e-3, 0.4]),
    "tklmbda_lambda": (lambda lam: sp.tklmbda(0.8, lam),
                       lambda lam: mp.findroot(lambda p: (p ** lam - (1 - p) ** lam) / lam - 0.8,
                                               sp.tklmbda(0.8, float(lam))),
                       [-0.3, 2e-3, 0.3]),
    "owens_t_h": (lambda h: sp.owens_t(h, 0.8),
                  lambda h: mp.quad(lambda t: mp.exp(-h * h * (1 + t * t) / 2) / (1 + t * t),
                                    [0, 0.8]) / (2 * mp.pi), [-1.0, 0.3, 2.0]),
    "voigt_sigma": (lambda s: sp.voigt_profile(0.7, s, 0.4),
                    lambda s: mp.re(mp.exp(-((0.7 + 0.4j) / (s * mp.sqrt(2))) ** 2)
                                    * mp.erfc(-1j * (0.7 + 0.4j) / (s * mp.sqrt(2))))
                    / (s * mp.sqrt(2 * mp.pi)), [0.3, 1.0, 2.5]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rule_matches_mpmath_derivative(name):
    f, g, points = CASES[name]
    for x in points:
        ours = tp.grad(f)(float(x))
        exact = float(mp.re(mp.diff(g, mp.mpf(x))))
        assert ours == pytest.approx(exact, rel=1e-8, abs=1e-12), (name, x)
