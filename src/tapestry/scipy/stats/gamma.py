"""The gamma distribution with shape ``a`` (and SciPy's ``loc``, ``scale``)."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st



def logpdf(x, a, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return (a - 1) * np.log(z) - z - _sp.gammaln(a) - np.log(scale)


def pdf(x, a, loc=0.0, scale=1.0):
    return np.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0.0, scale=1.0):
    """``gammainc(a, (x - loc) / scale)``: scipy.special's rule (differentiable in ``x``)."""
    return _sp.gammainc(a, (x - loc) / scale)


rvs = _st.gamma.rvs
