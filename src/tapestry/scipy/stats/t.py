"""Student's t distribution (``df``, ``loc``, ``scale``).  Densities are
differentiable in every argument; ``cdf`` in ``x``, ``loc`` and ``scale``."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st



def logpdf(x, df, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return (_sp.gammaln(0.5 * (df + 1)) - _sp.gammaln(0.5 * df)
            - 0.5 * np.log(np.pi * df) - np.log(scale)
            - 0.5 * (df + 1) * np.log1p(z * z / df))


def pdf(x, df, loc=0.0, scale=1.0):
    return np.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0.0, scale=1.0):
    """``stdtr(df, (x - loc) / scale)``: scipy.special's rule (differentiable in
    ``x``, ``loc`` and ``scale``; ``df`` refused by name)."""
    return _sp.stdtr(df, (x - loc) / scale)


def logcdf(x, df, loc=0.0, scale=1.0):
    return np.log(cdf(x, df, loc, scale))


rvs = _st.t.rvs
