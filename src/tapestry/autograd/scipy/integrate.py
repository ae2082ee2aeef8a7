"""``autograd.scipy.integrate``: ``odeint`` routed to tapestry's rule when one
exists, refused by name on traced input otherwise."""
from __future__ import annotations

import scipy.integrate as _int

from ._route import routed

odeint = routed(_int.odeint, "scipy.integrate.odeint")
