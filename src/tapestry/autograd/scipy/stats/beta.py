"""The beta distribution (``a``, ``b``)."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st

from ._cdf import cdf_primitive


def logpdf(x, a, b):
    return ((a - 1) * np.log(x) + (b - 1) * np.log1p(-x)
            - _sp.gammaln(a) - _sp.gammaln(b) + _sp.gammaln(a + b))


def pdf(x, a, b):
    return np.exp(logpdf(x, a, b))


_cdf = cdf_primitive("scipy.stats.beta.cdf", _st.beta.cdf, pdf)


def cdf(x, a, b):
    return _cdf(x, a, b)


rvs = _st.beta.rvs
