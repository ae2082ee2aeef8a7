"""Student's t distribution (``df``, ``loc``, ``scale``).  Densities are
differentiable in every argument; ``cdf`` in ``x``, ``loc`` and ``scale``."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st

from ._cdf import cdf_primitive


def logpdf(x, df, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return (_sp.gammaln(0.5 * (df + 1)) - _sp.gammaln(0.5 * df)
            - 0.5 * np.log(np.pi * df) - np.log(scale)
            - 0.5 * (df + 1) * np.log1p(z * z / df))


def pdf(x, df, loc=0.0, scale=1.0):
    return np.exp(logpdf(x, df, loc, scale))


_cdf = cdf_primitive("scipy.stats.t.cdf", _st.t.cdf, pdf, loc_scale=(2, 3))


def cdf(x, df, loc=0.0, scale=1.0):
    return _cdf(x, df, loc, scale)


def logcdf(x, df, loc=0.0, scale=1.0):
    return np.log(cdf(x, df, loc, scale))


rvs = _st.t.rvs
