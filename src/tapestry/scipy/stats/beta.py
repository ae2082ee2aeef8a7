"""The beta distribution (``a``, ``b``, and SciPy's ``loc``, ``scale``)."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st



def logpdf(x, a, b, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return ((a - 1) * np.log(z) + (b - 1) * np.log1p(-z)
            - _sp.gammaln(a) - _sp.gammaln(b) + _sp.gammaln(a + b) - np.log(scale))


def pdf(x, a, b, loc=0.0, scale=1.0):
    return np.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0.0, scale=1.0):
    """``betainc(a, b, (x - loc) / scale)``: scipy.special's rule (differentiable in ``x``)."""
    return _sp.betainc(a, b, (x - loc) / scale)


rvs = _st.beta.rvs
