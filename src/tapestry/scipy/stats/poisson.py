"""The Poisson distribution with mean ``mu`` (differentiable in ``mu``;
the count ``k`` is piecewise constant)."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st

from ...core.primitive import Primitive, unbroadcast


def logpmf(k, mu, loc=0):
    k = k - loc
    return _sp.xlogy(k, mu) - _sp.gammaln(k + 1) - mu


def pmf(k, mu, loc=0):
    return np.exp(logpmf(k, mu, loc))


def _dcdf_dmu(g, ans, k, mu):
    # d/dmu P(K <= k) = -pmf(floor(k), mu)
    return unbroadcast(-g * pmf(np.floor(k), mu), np.shape(mu))


_cdf = Primitive(_st.poisson.cdf, "scipy.stats.poisson.cdf",
                        vjps=(lambda g, ans, k, mu: None, _dcdf_dmu))


def cdf(k, mu, loc=0):
    return _cdf(k - loc, mu)


rvs = _st.poisson.rvs
