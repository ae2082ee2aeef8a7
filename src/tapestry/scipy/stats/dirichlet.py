"""The Dirichlet distribution with concentration ``alpha`` (last axis)."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st


def logpdf(x, alpha):
    return (np.sum((alpha - 1) * np.log(x), axis=-1)
            + _sp.gammaln(np.sum(alpha, axis=-1)) - np.sum(_sp.gammaln(alpha), axis=-1))


def pdf(x, alpha):
    return np.exp(logpdf(x, alpha))


rvs = _st.dirichlet.rvs
