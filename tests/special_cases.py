"""The finite-difference sweep table of scipy.special's rules (read by
tests/test_ops_special.py): one line per rule, with points drawn in a
domain where the function is smooth.

A case is ``(key, f, args, order)``: ``key`` the ufunc whose rule is
checked (what SWEPT lists), ``f`` a function of the float arguments that
are differentiated (parameters with no rule are closed over or passed as
integer arrays), ``order`` 2 where the rule's own rule exists (second
derivatives are checked), else 1.  Multi-argument cases broadcast a
``(3, 1)`` against a ``(4,)`` operand.
"""
import numpy as np
import scipy.special as sp
from scipy.special import _ufuncs as spu

_rng = np.random.default_rng(1)


def U(lo, hi, shape=(3, 4)):
    return _rng.uniform(lo, hi, shape)


def N(shape=(3, 4), scale=1.0):
    return scale * _rng.standard_normal(shape)


def AWAY(lo, hi, shape=(3, 4)):
    return U(lo, hi, shape) * _rng.choice([-1.0, 1.0], shape)


C1, R4 = (3, 1), (4,)
ORDERS = np.array([0.5, 1.3, 2.0, -0.7])
INT_ORDERS = np.array([0, 1, 2, 3])
DEG = np.array([0, 1, 2, 5])


def _gamma_cases():
    a, b = U(0.5, 3, R4), U(0.5, 3, R4)
    return [
        (sp.gamma, sp.gamma, (U(0.5, 3),), 2),
        (sp.loggamma, sp.loggamma, (U(0.5, 4),), 2),
        (sp.rgamma, sp.rgamma, (U(0.5, 3),), 2),
        (sp.rgamma, sp.rgamma, (np.array([-3.0, -2.0, -1.0, 0.0, -1.5, 0.5]),), 2),  # poles
        (sp.beta, sp.beta, (U(0.5, 3, C1), U(0.5, 3, R4)), 2),
        (sp.betaln, sp.betaln, (U(0.5, 3, C1), U(0.5, 3, R4)), 2),
        (sp.binom, sp.binom, (U(3, 6, C1), U(0.5, 2.5, R4)), 2),
        (sp.poch, sp.poch, (U(0.5, 3, C1), U(0.2, 2, R4)), 2),
        (spu._zeta, lambda q: sp.zeta(np.array([1.5, 2.5, 3.0, 4.2]), q), (U(0.5, 3),), 2),
        (sp.gammainc, lambda x: sp.gammainc(a, x), (U(0.3, 3),), 2),
        (sp.gammaincc, lambda x: sp.gammaincc(a, x), (U(0.3, 3),), 2),
        (sp.gammaincinv, lambda y: sp.gammaincinv(a, y), (U(0.1, 0.9),), 2),
        (sp.gammainccinv, lambda y: sp.gammainccinv(a, y), (U(0.1, 0.9),), 2),
        (sp.betainc, lambda x: sp.betainc(a, b, x), (U(0.1, 0.9),), 2),
        (sp.betaincc, lambda x: sp.betaincc(a, b, x), (U(0.1, 0.9),), 2),
        (sp.betaincinv, lambda y: sp.betaincinv(a, b, y), (U(0.1, 0.9),), 2),
        (sp.betainccinv, lambda y: sp.betainccinv(a, b, y), (U(0.1, 0.9),), 2),
    ]


def _distribution_cases():
    df, k = U(2, 6, R4), np.array([1, 2, 4, 7])
    return [
        (sp.stdtr, lambda t: sp.stdtr(df, t), (N(),), 2),
        (sp.stdtrit, lambda p: sp.stdtrit(df, p), (U(0.1, 0.9),), 2),
        (sp.chdtr, lambda x: sp.chdtr(df, x), (U(0.5, 4),), 2),
        (sp.chdtrc, lambda x: sp.chdtrc(df, x), (U(0.5, 4),), 2),
        (sp.chdtri, lambda p: sp.chdtri(df, p), (U(0.1, 0.9),), 2),
        (sp.fdtr, lambda x: sp.fdtr(df, 5.0, x), (U(0.3, 3),), 2),
        (sp.fdtrc, lambda x: sp.fdtrc(df, 5.0, x), (U(0.3, 3),), 2),
        (sp.fdtri, lambda p: sp.fdtri(df, 5.0, p), (U(0.1, 0.9),), 2),
        (sp.chndtr, lambda x, nc: sp.chndtr(x, df, nc), (U(0.5, 5, C1), U(0.5, 3, R4)), 2),
        (spu._ncx2_pdf, lambda x, nc, k=U(0.3, 6, R4): spu._ncx2_pdf(x, k, nc),
         (U(0.5, 5, C1), U(0.5, 3, R4)), 2),
        (sp.chndtrix, lambda p, nc: sp.chndtrix(p, df, nc), (U(0.1, 0.9, C1), U(0.5, 3, R4)), 2),
        (sp.chndtrinc, lambda x, p: sp.chndtrinc(x, df, p), (U(4, 6, C1), U(0.3, 0.5, R4)), 2),
        (sp.ncfdtr, lambda f: sp.ncfdtr(df, 6.0, 1.5, f), (U(0.5, 3),), 1),
        (sp.ncfdtri, lambda p: sp.ncfdtri(df, 6.0, 1.5, p), (U(0.1, 0.9),), 1),
        (sp.nctdtr, lambda t: sp.nctdtr(df, 0.7, t), (N(),), 1),
        (sp.nctdtrit, lambda p: sp.nctdtrit(df, 0.7, p), (U(0.1, 0.9),), 1),
        (sp.gdtr, lambda a, x: sp.gdtr(a, 2.5, x), (U(0.5, 2, C1), U(0.3, 3, R4)), 2),
        (sp.gdtrc, lambda a, x: sp.gdtrc(a, 2.5, x), (U(0.5, 2, C1), U(0.3, 3, R4)), 2),
        (sp.gdtrix, lambda a, p: sp.gdtrix(a, 2.5, p), (U(0.5, 2, C1), U(0.1, 0.9, R4)), 2),
        (sp.gdtria, lambda p, x: sp.gdtria(p, 2.5, x), (U(0.1, 0.9, C1), U(0.5, 3, R4)), 2),
        (sp.pdtr, sp.pdtr, (U(0.2, 4.8, C1) // 1 + 0.5, U(0.5, 4, R4)), 2),
        (sp.pdtrc, sp.pdtrc, (U(0.2, 4.8, C1) // 1 + 0.5, U(0.5, 4, R4)), 2),
        (sp.pdtri, lambda y: sp.pdtri(k, y), (U(0.1, 0.9),), 2),
        (sp.bdtr, lambda p: sp.bdtr(k, 9, p), (U(0.1, 0.9),), 2),
        (sp.bdtrc, lambda p: sp.bdtrc(k, 9, p), (U(0.1, 0.9),), 2),
        (sp.bdtri, lambda y: sp.bdtri(k, 9, y), (U(0.1, 0.9),), 2),
        (sp.nbdtr, lambda p: sp.nbdtr(k, 3, p), (U(0.1, 0.9),), 2),
        (sp.nbdtrc, lambda p: sp.nbdtrc(k, 3, p), (U(0.1, 0.9),), 2),
        (sp.nbdtri, lambda y: sp.nbdtri(k, 3, y), (U(0.1, 0.9),), 2),
        (sp.ndtri, sp.ndtri, (U(0.05, 0.95),), 2),
        (sp.ndtri_exp, sp.ndtri_exp, (U(-3, -0.1),), 2),
        (sp.nrdtrimn, sp.nrdtrimn, (U(0.1, 0.9, C1), U(0.5, 2, R4), N(R4)), 2),
        (sp.nrdtrisd, sp.nrdtrisd, (N(C1), U(0.6, 0.9, R4), U(2, 3, R4)), 2),
        (sp.owens_t, sp.owens_t, (N(C1), U(0.2, 2, R4)), 2),
        (sp.tklmbda, sp.tklmbda, (N(C1, 0.5), U(-0.5, 0.5, R4)), 2),
        (sp.kolmogorov, sp.kolmogorov, (U(0.5, 2),), 1),
        (sp.kolmogi, sp.kolmogi, (U(0.1, 0.9),), 1),
        (sp.smirnov, lambda d: sp.smirnov(k + 2, d), (U(0.1, 0.5),), 1),
        (sp.smirnovi, lambda p: sp.smirnovi(k + 2, p), (U(0.1, 0.9),), 1),
    ]


def _bessel_cases():
    x, v = U(0.5, 3), ORDERS
    cases = [(f, lambda x, f=f: f(v, x), (x,), 2) for f in (
        sp.iv, sp.ive, sp.kv, sp.kve, sp.jv, sp.yv, sp.jve, sp.yve, sp.hankel1, sp.hankel2,
        sp.hankel1e, sp.hankel2e, sp.struve, sp.modstruve)]
    cases += [(f, lambda x, f=f: f(INT_ORDERS, x), (x,), 2) for f in (sp.kn, sp.yn)]
    cases += [(f, f, (U(0.5, 3),), 2) for f in (
        sp.j0, sp.j1, sp.y0, sp.y1, sp.i0, sp.i1, sp.k0, sp.k1, sp.k0e, sp.k1e, sp.ber, sp.bei,
        sp.ker, sp.kei, sp.berp, sp.beip, sp.kerp, sp.keip, sp.kelvin, sp.airye, sp.iti0k0,
        sp.itj0y0, sp.it2i0k0, sp.it2j0y0, sp.itstruve0, sp.it2struve0, sp.itmodstruve0,
        sp.itairy)]
    cases += [(f, f, (AWAY(0.3, 3),), 2) for f in (sp.i0e, sp.i1e)]
    cases += [
        (sp.airy, sp.airy, (N(),), 2),
        (sp.ive, lambda x: sp.ive(INT_ORDERS, x), (AWAY(0.3, 3),), 2),
        (sp.besselpoly, lambda a: sp.besselpoly(a, 1.5, 1.0), (U(0.2, 2),), 2),
        (sp.wright_bessel, lambda x: sp.wright_bessel(0.5, 1.2, x), (U(0.1, 2),), 2),
        (sp.log_wright_bessel, lambda x: sp.log_wright_bessel(0.5, 1.2, x), (U(0.1, 2),), 2),
    ]
    for kind in ("jn", "yn", "in", "kn"):
        # scipy.special.spherical_jn converts its input: tapestry.scipy.special's calls these
        for f in (getattr(spu, f"_spherical_{kind}"), getattr(spu, f"_spherical_{kind}_d")):
            cases.append((f, lambda x, f=f: f(INT_ORDERS, x), (U(0.5, 4),), 2))
    return cases


def _misc_cases():
    return [
        (sp.erfinv, sp.erfinv, (U(-0.9, 0.9),), 2),
        (sp.erfcinv, sp.erfcinv, (U(0.1, 1.9),), 2),
        (sp.erfcx, sp.erfcx, (N(),), 2),
        (sp.erfi, sp.erfi, (N(),), 2),
        (sp.dawsn, sp.dawsn, (N(),), 2),
        (sp.voigt_profile, sp.voigt_profile, (N(C1), U(0.5, 2, R4), U(0.2, 2, R4)), 2),
        (sp.log1p, sp.log1p, (U(-0.5, 2),), 2),
        (sp.expm1, sp.expm1, (N(),), 2),
        (sp.exp2, sp.exp2, (N(),), 2),
        (sp.exp10, sp.exp10, (U(-1, 1),), 2),
        (sp.cbrt, sp.cbrt, (AWAY(0.3, 2),), 2),
        (sp.cosm1, sp.cosm1, (N(),), 2),
        (sp.powm1, sp.powm1, (U(0.5, 2, C1), U(-1, 2, R4)), 2),
        (sp.exprel, sp.exprel, (N(),), 2),
        (sp.exprel, sp.exprel, (U(-0.02, 0.02),), 2),
        (sp.entr, sp.entr, (U(0.2, 2),), 2),
        (sp.kl_div, sp.kl_div, (U(0.2, 2, C1), U(0.2, 2, R4)), 2),
        (sp.rel_entr, sp.rel_entr, (U(0.2, 2, C1), U(0.2, 2, R4)), 2),
        (sp.huber, sp.huber, (U(0.5, 1.5, C1), N(R4, 2.0)), 2),
        (sp.pseudo_huber, sp.pseudo_huber, (U(0.5, 2, C1), N(R4)), 2),
        (sp.sindg, sp.sindg, (U(-170, 170),), 2),
        (sp.cosdg, sp.cosdg, (U(-170, 170),), 2),
        (sp.tandg, sp.tandg, (U(-80, 80),), 2),
        (sp.cotdg, sp.cotdg, (U(10, 170),), 2),
        (sp.radian, sp.radian, (N(C1), N(R4), N(R4)), 2),
        (sp.boxcox, sp.boxcox, (U(0.5, 3, C1), U(-1, 1, R4)), 2),
        (sp.boxcox, sp.boxcox, (U(0.5, 3, C1), U(-0.005, 0.005, R4)), 2),
        (sp.boxcox1p, sp.boxcox1p, (U(-0.5, 2, C1), U(-1, 1, R4)), 2),
        (sp.inv_boxcox, sp.inv_boxcox, (U(0.1, 2, C1), U(-0.3, 0.5, R4)), 2),
        (sp.inv_boxcox1p, sp.inv_boxcox1p, (U(0.1, 2, C1), U(-0.004, 0.004, R4)), 2),
    ]


def _integral_cases():
    return [
        (sp.exp1, sp.exp1, (U(0.2, 3),), 2),
        (sp.expi, sp.expi, (U(0.2, 3),), 2),
        (sp.expn, lambda x: sp.expn(INT_ORDERS, x), (U(0.3, 3),), 2),
        (sp.sici, sp.sici, (U(0.3, 5),), 2),
        (sp.shichi, sp.shichi, (U(0.3, 3),), 2),
        (sp.fresnel, sp.fresnel, (N(),), 2),
        (sp.modfresnelp, sp.modfresnelp, (U(0.2, 2),), 2),
        (sp.modfresnelm, sp.modfresnelm, (U(0.2, 2),), 2),
        (sp.spence, sp.spence, (U(0.2, 3),), 2),
        (sp.wrightomega, sp.wrightomega, (N(),), 2),
        (sp.ellipk, sp.ellipk, (U(-1, 0.9),), 2),
        (sp.ellipk, sp.ellipk, (U(-5e-4, 5e-4),), 2),
        (sp.ellipe, sp.ellipe, (U(-1, 0.9),), 2),
        (sp.ellipe, sp.ellipe, (U(-5e-4, 5e-4),), 2),
        (sp.ellipkm1, sp.ellipkm1, (U(0.01, 1),), 2),
        (sp.ellipkinc, sp.ellipkinc, (U(0.1, 1.5, C1), U(-0.5, 0.9, R4)), 2),
        (sp.ellipeinc, sp.ellipeinc, (U(0.1, 1.5, C1), U(-0.5, 0.9, R4)), 2),
        (sp.ellipj, lambda u: sp.ellipj(u, np.array([0.1, 0.4, 0.7, 0.95])), (N(),), 2),
        (sp.elliprf, sp.elliprf, (U(0.5, 2, C1), U(0.5, 2, R4), U(0.5, 2, R4)), 1),
        (sp.elliprc, sp.elliprc, (U(0.5, 2, C1), U(0.5, 2, R4)), 1),
        (sp.elliprg, sp.elliprg, (U(0.5, 2, C1), U(0.5, 2, R4), U(0.5, 2, R4)), 1),
        (sp.agm, sp.agm, (U(0.5, 2, C1), U(0.5, 2, R4)), 2),
    ]


def _poly_cases():
    x = U(-0.9, 0.9)
    cases = [(f, lambda x, f=f: f(DEG, x), (x,), 2) for f in (
        sp.eval_chebyt, sp.eval_chebyu, sp.eval_legendre, sp.eval_hermite,
        sp.eval_hermitenorm, sp.eval_laguerre)]
    cases += [(f, lambda x, f=f: f(DEG, x), (U(0.05, 0.95),), 2) for f in (
        sp.eval_sh_chebyt, sp.eval_sh_chebyu, sp.eval_sh_legendre)]
    cases += [(f, lambda x, f=f: f(DEG, x), (U(-1.9, 1.9),), 2) for f in (
        sp.eval_chebyc, sp.eval_chebys)]
    return cases + [
        (sp.eval_legendre, lambda x: sp.eval_legendre(np.array([0.5, 1.7, 2.2, 3.5]), x), (x,), 2),
        (sp.eval_gegenbauer, lambda x: sp.eval_gegenbauer(DEG, 0.7, x), (x,), 2),
        (sp.eval_jacobi, lambda x: sp.eval_jacobi(DEG, 0.5, 1.3, x), (x,), 2),
        (sp.eval_sh_jacobi, lambda x: sp.eval_sh_jacobi(DEG, 2.5, 1.5, x), (U(0.05, 0.95),), 2),
        (sp.eval_genlaguerre, lambda x: sp.eval_genlaguerre(DEG, 0.5, x), (U(0, 3),), 2),
        (sp.lpmv, lambda x: sp.lpmv(np.array([0.0, 1.0, 2.0, 1.0]), 3.0, x), (x,), 2),
        (sp.hyp0f1, lambda z: sp.hyp0f1(1.5, z), (N(),), 2),
        (sp.hyp1f1, lambda z: sp.hyp1f1(0.7, 1.6, z), (N(),), 2),
        (sp.hyp2f1, lambda z: sp.hyp2f1(0.5, 1.2, 2.1, z), (U(-0.9, 0.9),), 2),
        (sp.hyperu, lambda z: sp.hyperu(0.5, 1.3, z), (U(0.5, 3),), 2),
        (sp.pbdv, lambda x: sp.pbdv(1.5, x), (N(),), 2),
        (sp.pbvv, lambda x: sp.pbvv(1.5, x), (N(),), 2),
        (sp.pbwa, lambda x: sp.pbwa(0.5, x), (U(-2, 2),), 2),
    ] + _ode_cases()


def _ode_cases():
    m, q = np.array([0.0, 1.0, 2.0, 3.0]), 1.3
    cases = [(sp.mathieu_cem, lambda x: sp.mathieu_cem(m, q, x), (U(-170, 170),), 2),
             (sp.mathieu_sem, lambda x: sp.mathieu_sem(m + 1, q, x), (U(-170, 170),), 2)]
    cases += [(f, lambda x, f=f: f(m[1:], q, x), (U(0.2, 1.5, (3, 3)),), 2)
              for f in (sp.mathieu_modcem1, sp.mathieu_modcem2, sp.mathieu_modsem1,
                        sp.mathieu_modsem2)]
    n, c = np.array([1.0, 2.0, 3.0]), 1.3
    for kind in ("pro", "obl"):
        lam = getattr(sp, f"{kind}_cv")(1.0, n, c)
        for part, (lo, hi) in (("ang1", (-0.8, 0.8)), ("rad1", (1.2, 2.5))):
            f, f_cv = getattr(sp, f"{kind}_{part}"), getattr(sp, f"{kind}_{part}_cv")
            cases += [(f, lambda x, f=f: f(1.0, n, c, x), (U(lo, hi, (2, 3)),), 2),
                      (f_cv, lambda x, f=f_cv, lam=lam: f(1.0, n, c, lam, x),
                       (U(lo, hi, (2, 3)),), 2)]
    return cases


def _complex_cases():
    def cz(shape=(3, 4)):
        return U(0.5, 2, shape) + 1j * U(-0.5, 0.5, shape)
    return [
        (sp.loggamma, sp.loggamma, (cz(),), 1),
        (sp.wofz, sp.wofz, (cz(),), 2),
        (sp.erfcx, sp.erfcx, (cz(),), 2),
        (sp.iv, lambda z: sp.iv(ORDERS, z), (cz(),), 2),
        (sp.jv, lambda z: sp.jv(ORDERS, z), (cz(),), 2),
        (sp.kve, lambda z: sp.kve(ORDERS, z), (cz(),), 2),
        (sp.hankel1e, lambda z: sp.hankel1e(ORDERS, z), (cz(),), 2),
        (sp.spence, sp.spence, (cz(),), 2),
        (sp.fresnel, sp.fresnel, (cz(),), 2),
        (sp.hyp1f1, lambda z: sp.hyp1f1(0.7, 1.6, z), (cz(),), 2),
        (sp.hyp0f1, lambda z: sp.hyp0f1(1.5, z), (cz(),), 2),
        (sp.gamma, sp.gamma, (cz(),), 1),  # order 2 needs complex trigamma: refused by name
        (sp.rgamma, sp.rgamma, (cz(),), 1),
        (sp.hyp2f1, lambda z: sp.hyp2f1(0.5, 1.2, 2.1, 0.4 * z), (cz(),), 2),
        (sp.elliprf, sp.elliprf, (cz(C1), cz(R4), cz(R4)), 1),
        (sp.elliprc, sp.elliprc, (cz(C1), cz(R4)), 1),
        (sp.elliprg, sp.elliprg, (cz(C1), cz(R4), cz(R4)), 1),
    ] + [(f, f, (cz(),), 2) for f in (
        sp.erfi, sp.dawsn, sp.log1p, sp.expm1, sp.exp1, sp.expi, sp.sici,
        sp.shichi, sp.wrightomega, sp.airy)
    ] + [(f, lambda z, f=f: f(ORDERS, z), (cz(),), 2) for f in (
        sp.kv, sp.yv, sp.hankel1, sp.hankel2, sp.hankel2e)
    ] + [(getattr(spu, f"_spherical_{k}{d}"), lambda z, k=k, d=d:
          getattr(spu, f"_spherical_{k}{d}")(INT_ORDERS, z), (cz(),), 2)
         for k in ("jn", "yn", "in", "kn") for d in ("", "_d")
    ] + [(f, lambda z, f=f: f(DEG, 0.5 * z), (cz(),), 2) for f in (
        sp.eval_chebyt, sp.eval_chebyu, sp.eval_chebyc, sp.eval_chebys, sp.eval_sh_chebyt,
        sp.eval_sh_chebyu, sp.eval_legendre, sp.eval_sh_legendre, sp.eval_laguerre)
    ] + [
        (sp.eval_gegenbauer, lambda z: sp.eval_gegenbauer(DEG, 0.7, 0.5 * z), (cz(),), 2),
        (sp.eval_genlaguerre, lambda z: sp.eval_genlaguerre(DEG, 0.5, z), (cz(),), 2),
        (sp.eval_jacobi, lambda z: sp.eval_jacobi(DEG, 0.5, 1.3, 0.5 * z), (cz(),), 2),
        (sp.eval_sh_jacobi, lambda z: sp.eval_sh_jacobi(DEG, 2.5, 1.5, 0.5 * z), (cz(),), 2),
    ]


CASES = (_gamma_cases() + _distribution_cases() + _bessel_cases() + _misc_cases()
         + _integral_cases() + _poly_cases())
COMPLEX = _complex_cases()
