"""``autograd.scipy.linalg``: SciPy's linear algebra, routed to tapestry's
rules where they exist (``scipy.linalg`` does not take part in NumPy's
dispatch); a function without one is refused by name on traced input."""
from __future__ import annotations

import scipy.linalg as _sla
from scipy.linalg import *  # noqa: F401,F403

from tapestry.scipy import linalg as _rules
from ._route import route_module

route_module(globals(), _sla, [n for n in dir(_sla) if not n.startswith("_")],
             "scipy.linalg")
# the functions tapestry.scipy.linalg differentiates: its own (SciPy's on plain arrays)
globals().update({_n: getattr(_rules, _n) for _n in _rules.__all__})
