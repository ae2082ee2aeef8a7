"""Distribution functions whose values come from SciPy and whose derivative
in ``x`` is the density: ``d/dx F(x, ...) = f(x, ...)``.  The density is
written with differentiable NumPy, so higher orders work.  Derivatives in
the shape parameters (``df``, ``a``, ``b``) are not provided:
differentiating in them is refused by name (tapestry's default for an
argument without a rule)."""
from __future__ import annotations

import numpy as np

from ...core_bridge import leveled_primitive, unbroadcast


def cdf_primitive(name, forward, density, loc_scale=None):
    """A Primitive ``F(x, *params)`` (all arguments positional) with
    ``dF/dx = density(x, *params)``.  ``loc_scale=(i, j)``: the positions
    of ``loc`` and ``scale``, which get ``-f`` and ``-f (x - loc) / scale``."""
    def dx(g, ans, x, *params):
        return unbroadcast(g * density(x, *params), np.shape(x))
    vjps = {0: dx}
    if loc_scale is not None:
        i, j = loc_scale

        def dloc(g, ans, x, *params):
            return unbroadcast(-g * density(x, *params), np.shape(params[i - 1]))

        def dscale(g, ans, x, *params):
            z = (x - params[i - 1]) / params[j - 1]
            return unbroadcast(-g * density(x, *params) * z, np.shape(params[j - 1]))
        vjps.update({i: dloc, j: dscale})
    return leveled_primitive(forward, name, vjps=vjps)
