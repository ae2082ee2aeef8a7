"""The chi-squared distribution with ``df`` degrees of freedom."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st



def logpdf(x, df):
    k = 0.5 * df
    return (k - 1) * np.log(x) - 0.5 * x - _sp.gammaln(k) - k * np.log(2.0)


def pdf(x, df):
    return np.exp(logpdf(x, df))


def cdf(x, df):
    """``chdtr(df, x)``: scipy.special's rule (differentiable in ``x``)."""
    return _sp.chdtr(df, x)


rvs = _st.chi2.rvs
