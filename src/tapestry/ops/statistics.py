"""Weighted averages and spreads: average, ptp (cov and corrcoef: composite.py).  Composites
of sums and products, differentiable in the data and in the weights."""
from __future__ import annotations

import numpy as np

from ..core.primitive import implements
from ..core.var import reject_out, unwrap_all


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """``sum(a w) / sum(w)``; differentiable in ``a`` and ``weights``."""
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        scl = np.asarray(np.size(unwrap_all(a)) / max(np.size(unwrap_all(avg)), 1),
                         dtype=np.result_type(unwrap_all(avg)))
    else:
        w = weights
        if np.shape(a) != np.shape(w):
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights "
                                "differ.")
            if np.ndim(w) != 1 and np.ndim(axis) == 0:
                raise TypeError("1D weights expected when shapes of a and weights differ.")
            axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
            axes = tuple(ax % np.ndim(a) for ax in axes)
            w = np.broadcast_to(np.reshape(w, [np.shape(a)[i] if i in axes else 1
                                               for i in range(np.ndim(a))]), np.shape(a))
        scl = np.sum(w, axis=axis, keepdims=keepdims)
        if np.any(unwrap_all(scl) == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(a * w, axis=axis, keepdims=keepdims) / scl
    if not returned:
        return avg
    if np.shape(scl) != np.shape(avg):
        scl = np.broadcast_to(scl, np.shape(avg))
    return avg, scl


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    reject_out("ptp", out)
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)
