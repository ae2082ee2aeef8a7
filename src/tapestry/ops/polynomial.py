"""Polynomial evaluation: ``np.polyval`` by Horner's rule, a composite of
differentiable operations (in the coefficients and the points, at every
order).  The other ``np.poly*`` functions are in :mod:`.composite`."""
from __future__ import annotations

import numpy as np

from ..core.primitive import implements
from ..core.var import unwrap_all


@implements(np.polyval)
def polyval(p, x):
    """Horner's rule: ``((p0 x + p1) x + p2) ...``."""
    if isinstance(unwrap_all(p), np.poly1d):
        p = unwrap_all(p).coeffs
    if isinstance(p, (list, tuple)):
        p = np.asarray(p)
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    y = 0.0 * x
    for i in range(len(p)):
        y = y * x + p[i]
    return y
