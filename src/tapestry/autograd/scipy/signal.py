"""``autograd.scipy.signal``: ``convolve`` routed to tapestry's rule when one
exists, refused by name on traced input otherwise."""
from __future__ import annotations

import scipy.signal as _sig

from ._route import routed

convolve = routed(_sig.convolve, "scipy.signal.convolve")
