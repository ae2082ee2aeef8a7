"""Bayesian and information-theory programs built on scipy.special ufuncs
beyond the common few: beta-binomial (betaln), KL and entropy (rel_entr,
kl_div, entr), von Mises (i0, i1e), gamma-family normalisers (gamma,
loggamma, gammainc), quantile transforms (ndtri, erfinv), Box-Cox."""
import numpy as np
import scipy.special as sp

from . import program, rng


@program(args=lambda: (np.array([0.3, -0.2]), rng(900).integers(0, 11, 12).astype(float)), argnums=(0,))
def beta_binomial_betaln(log_ab, k):
    a, b = np.exp(log_ab)
    n = 10.0
    ll = (sp.gammaln(n + 1) - sp.gammaln(k + 1) - sp.gammaln(n - k + 1)
          + sp.betaln(k + a, n - k + b) - sp.betaln(a, b))
    return -np.sum(ll)


@program(args=lambda: (rng(901).standard_normal(5), np.array([0.1, 0.2, 0.3, 0.25, 0.15])), argnums=(0,))
def kl_divergence_rel_entr(logits, q):
    p = np.exp(logits) / np.sum(np.exp(logits))
    return np.sum(sp.rel_entr(p, q)) + np.sum(sp.kl_div(q, p))


@program(args=lambda: (rng(902).standard_normal(6),))
def entropy_regulariser_entr(logits):
    p = np.exp(logits - np.max(logits))
    p = p / p.sum()
    return -np.sum(sp.entr(p)) + np.sum(p * np.arange(6.0))


@program(args=lambda: (np.array([0.4, 1.2]), rng(903).vonmises(0.4, 2.0, 15)), argnums=(0,))
def von_mises_loglik_i0(params, theta):
    mu, log_kappa = params
    kappa = np.exp(log_kappa)
    ll = kappa * np.cos(theta - mu) - np.log(2 * np.pi * sp.i0(kappa))
    return -np.sum(ll) + 0.01 * np.sum(sp.i1e(kappa) ** 2)


@program(args=lambda: (np.array([1.7, 0.8]), rng(904).gamma(1.7, 1.2, 10)), argnums=(0,))
def gamma_normaliser_loggamma_gamma(params, x):
    a, rate = params
    return -np.sum(a * np.log(rate) - np.real(sp.loggamma(a)) + (a - 1) * np.log(x) - rate * x) \
        + 0.1 * sp.gamma(a) + np.sum(sp.gammainc(2.0, x * rate))


@program(args=lambda: (rng(905).uniform(0.05, 0.95, 8),))
def gaussian_copula_ndtri_erfinv(u):
    z = sp.ndtri(u)
    w = np.sqrt(2.0) * sp.erfinv(2 * u - 1)
    return np.sum(z ** 2) + np.sum(w * z) + np.sum(sp.log1p(u) + sp.expm1(-u))


@program(args=lambda: (np.array([0.3]), rng(906).gamma(2.0, 1.0, 12)), argnums=(0,))
def box_cox_profile_likelihood(lmbda, x):
    y = sp.boxcox(x, lmbda[0])
    n = len(x)
    return 0.5 * n * np.log(np.var(y)) - (lmbda[0] - 1) * np.sum(np.log(x))
