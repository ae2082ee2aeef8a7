"""``autograd.scipy.special``: SciPy's special functions.

They are ufuncs, so traced arrays reach tapestry's rules through NumPy's
dispatch (``tapestry/ops/special.py``); those without a rule are refused by
name when differentiated.  ``logsumexp`` (not a ufunc) is tapestry's."""
from __future__ import annotations

import scipy.special as _sp
from scipy.special import *  # noqa: F401,F403

from ...ops.reductions import logsumexp  # noqa: F401
# SciPy's Python-level functions that convert their inputs, with tapestry's rules
from ...scipy.special import log_softmax, polygamma, softmax  # noqa: F401


def multigammaln(a, d):
    """``log Gamma_d(a)``, the multivariate log-gamma function, as a sum of
    ``gammaln`` terms (SciPy computes it the same way), so it traces."""
    import numpy as np
    d = int(d)
    js = np.arange(d, dtype=float)
    terms = _sp.gammaln(np.expand_dims(a, -1) - 0.5 * js)
    return 0.25 * d * (d - 1) * np.log(np.pi) + np.sum(terms, axis=-1)
