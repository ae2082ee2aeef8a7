"""``autograd.scipy.special``: SciPy's special functions.

They are ufuncs, so traced arrays reach tapestry's rules through NumPy's
dispatch (``tapestry/ops/special.py``); those without a rule are refused by
name when differentiated.  ``logsumexp`` (not a ufunc) is tapestry's."""
from __future__ import annotations

from scipy.special import *  # noqa: F401,F403

from tapestry.ops.reductions import logsumexp  # noqa: F401
# SciPy's Python-level functions that convert their inputs, with tapestry's rules
from tapestry.scipy.special import log_softmax, multigammaln, polygamma, softmax  # noqa: F401
