"""The normal distribution (``loc``, ``scale``), differentiable in all arguments."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st

_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


def logpdf(x, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    return -0.5 * z * z - np.log(scale) - _LOG_SQRT_2PI


def pdf(x, loc=0.0, scale=1.0):
    return np.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    return _sp.ndtr((x - loc) / scale)


def logcdf(x, loc=0.0, scale=1.0):
    return _sp.log_ndtr((x - loc) / scale)


def sf(x, loc=0.0, scale=1.0):
    return _sp.ndtr((loc - x) / scale)


def logsf(x, loc=0.0, scale=1.0):
    return _sp.log_ndtr((loc - x) / scale)


def ppf(q, loc=0.0, scale=1.0):
    return loc + scale * _sp.ndtri(q)


rvs = _st.norm.rvs
