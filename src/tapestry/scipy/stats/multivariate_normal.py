"""The multivariate normal distribution (``mean``, ``cov``), written with
``np.linalg`` so it is differentiable in ``x``, ``mean`` and ``cov``."""
from __future__ import annotations

import numpy as np
import scipy.stats as _st

from ...core.api import stop_gradient


def _logdet_and_quad(x, mean, cov):
    diff = x - mean
    sign, logdet = np.linalg.slogdet(cov)
    quad = np.einsum("...i,ij,...j->...", diff, np.linalg.inv(cov), diff)
    return logdet, quad


def _singular(x, mean, cov):
    """Rank, pseudo-log-determinant and quadratic form on the support of a
    (possibly singular) symmetric ``cov``, through its eigendecomposition."""
    w, v = np.linalg.eigh(cov)
    plain = np.linalg.eigvalsh(stop_gradient(cov))
    keep = plain > 1e-10 * np.max(np.abs(plain))
    proj = np.einsum("...i,ij->...j", x - mean, v[:, keep])
    quad = np.sum(proj ** 2 / w[keep], axis=-1)
    return int(np.sum(keep)), np.sum(np.log(w[keep])), quad


def logpdf(x, mean, cov, allow_singular=False):
    if allow_singular:
        rank, logdet, quad = _singular(x, mean, cov)
        return -0.5 * (rank * np.log(2 * np.pi) + logdet + quad)
    d = np.shape(cov)[-1]
    logdet, quad = _logdet_and_quad(x, mean, cov)
    return -0.5 * (d * np.log(2 * np.pi) + logdet + quad)


def pdf(x, mean, cov, allow_singular=False):
    return np.exp(logpdf(x, mean, cov, allow_singular))


def entropy(mean, cov):
    d = np.shape(cov)[-1]
    sign, logdet = np.linalg.slogdet(cov)
    return 0.5 * d * (1.0 + np.log(2 * np.pi)) + 0.5 * logdet


rvs = _st.multivariate_normal.rvs
