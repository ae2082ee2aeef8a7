"""Reductions and scans: sum, mean, prod, max/min, var/std, cumsum/cumprod,
logsumexp.  Each NumPy entry point normalizes its arguments (positional or
keyword) into a primitive with explicit ``axis`` / ``keepdims``."""
from __future__ import annotations

import numpy as np

from ..core.primitive import KEEP_SHAPES, Primitive, defvjp
from ..core.registry import FUNCTIONS


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % ndim if ndim else 0 for a in axis))


def expand_reduced(g, shape, axis, keepdims):
    """Broadcast a reduction's cotangent back to the input ``shape`` (a view)."""
    if not keepdims:
        g = np.reshape(g, tuple(1 if i in _axes(axis, len(shape)) else n
                                for i, n in enumerate(shape)))
    return np.broadcast_to(g, shape)


# --- sum / mean -----------------------------------------------------------------
_sum = Primitive(lambda a, axis, keepdims: np.sum(a, axis=axis, keepdims=keepdims), "sum",
                 keep=KEEP_SHAPES)
defvjp(_sum, lambda g, ans, a, axis, keepdims: expand_reduced(g, a.shape, axis, keepdims))


def sum_(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("sum", out, where)
    return _sum(a, _tuple(axis), keepdims)


def _count(shape, axis):
    return int(np.prod([shape[i] for i in _axes(axis, len(shape))], dtype=np.int64))


_mean = Primitive(lambda a, axis, keepdims: np.mean(a, axis=axis, keepdims=keepdims), "mean",
                  keep=KEEP_SHAPES)
defvjp(_mean, lambda g, ans, a, axis, keepdims:
       expand_reduced(g / _count(a.shape, axis), a.shape, axis, keepdims))


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    _no_out("mean", out, where)
    return _mean(a, _tuple(axis), keepdims)


def _tuple(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _no_out(name, out, where=None):
    if out is not None:
        raise TypeError(f"tapestry: np.{name}(..., out=...) writes in place and "
                        "cannot be differentiated; drop out=.")
    if where is not None:
        raise NotImplementedError(f"tapestry: np.{name}(..., where=...) has no "
                                  "gradient rule; multiply by the mask instead.")


FUNCTIONS[np.sum] = sum_
FUNCTIONS[np.mean] = mean
