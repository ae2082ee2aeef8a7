"""The chi-squared distribution with ``df`` degrees of freedom (and SciPy's
``loc``, ``scale``)."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st



def logpdf(x, df, loc=0.0, scale=1.0):
    k = 0.5 * df
    z = (x - loc) / scale
    return (k - 1) * np.log(z) - 0.5 * z - _sp.gammaln(k) - k * np.log(2.0) - np.log(scale)


def pdf(x, df, loc=0.0, scale=1.0):
    return np.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0.0, scale=1.0):
    """``chdtr(df, (x - loc) / scale)``: scipy.special's rule (differentiable in ``x``)."""
    return _sp.chdtr(df, (x - loc) / scale)


rvs = _st.chi2.rvs
