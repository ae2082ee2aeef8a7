"""The gamma distribution with shape ``a`` (unit scale), as autograd's."""
from __future__ import annotations

import numpy as np
import scipy.special as _sp
import scipy.stats as _st



def logpdf(x, a):
    return (a - 1) * np.log(x) - x - _sp.gammaln(a)


def pdf(x, a):
    return np.exp(logpdf(x, a))


def cdf(x, a):
    """``gammainc(a, x)``: scipy.special's rule (differentiable in ``x``)."""
    return _sp.gammainc(a, x)


rvs = _st.gamma.rvs
