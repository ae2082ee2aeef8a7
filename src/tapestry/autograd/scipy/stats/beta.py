"""The beta distribution (``a``, ``b``)."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st



def logpdf(x, a, b):
    return ((a - 1) * np.log(x) + (b - 1) * np.log1p(-x)
            - _sp.gammaln(a) - _sp.gammaln(b) + _sp.gammaln(a + b))


def pdf(x, a, b):
    return np.exp(logpdf(x, a, b))


def cdf(x, a, b):
    """``betainc(a, b, x)``: scipy.special's rule (differentiable in ``x``)."""
    return _sp.betainc(a, b, x)


rvs = _st.beta.rvs
