"""``autograd.scipy.special``: SciPy's special functions.

They are ufuncs, so traced arrays reach tapestry's rules through NumPy's
dispatch (``tapestry/ops/special.py``); those without a rule are refused by
name when differentiated.  ``logsumexp`` (not a ufunc) is tapestry's."""
from __future__ import annotations

import scipy.special as _sp
from scipy.special import *  # noqa: F401,F403

from ...ops.reductions import logsumexp  # noqa: F401
from ._route import route_module

# Non-ufunc functions autograd users call: routed (tapestry's rule or a refusal).
route_module(globals(), _sp, ("multigammaln", "polygamma", "softmax", "log_softmax"), "scipy.special")
