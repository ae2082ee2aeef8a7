"""Weighted averages and spreads: average, ptp, cov, corrcoef.  Composites
of sums and products, differentiable in the data and in the weights."""
from __future__ import annotations

import numpy as np

from ..core.primitive import implements
from ..core.var import Var, unwrap_all


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
    if out is not None:
        raise TypeError("tapestry: np.ptp(..., out=...) writes in place; drop out=.")
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


def _cov_rows(a, rowvar, dtype, is_y=False):
    """Variables as rows, in the output dtype (NumPy's ``cov`` layout)."""
    X = np.atleast_2d(a)
    if np.result_type(unwrap_all(X)) != dtype:
        X = X.astype(dtype)
    flip = np.shape(X)[0] != 1 if is_y else np.ndim(a) != 1
    return X.T if not rowvar and flip else X


def _cov_weights(fweights, aweights):
    """The product of frequency (plain integers) and analytic weights."""
    if fweights is not None and fweights.__class__ is Var:
        raise TypeError("tapestry: np.cov fweights are integer counts: pass them as "
                        "plain arrays (aweights may be traced).")
    w = None if fweights is None else np.asarray(fweights, dtype=float)
    if aweights is not None:
        w = aweights if w is None else w * aweights
    return w


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """Covariance, following NumPy's formula: differentiable in ``m``, ``y``
    and ``aweights``."""
    plain = np.cov(unwrap_all(m), unwrap_all(y), rowvar, bias, ddof, unwrap_all(fweights),
                   unwrap_all(aweights), dtype=dtype)  # NumPy's checks, dtype and shape
    X = _cov_rows(m, rowvar, plain.dtype)
    if np.shape(X)[0] == 0:
        return plain
    if y is not None:
        X = np.concatenate([X, _cov_rows(y, rowvar, plain.dtype, is_y=True)], axis=0)
    ddof = (0 if bias else 1) if ddof is None else ddof
    w = _cov_weights(fweights, aweights)
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        fact = np.shape(X)[1] - ddof
    elif ddof == 0:
        fact = w_sum
    elif aweights is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * np.sum(w * aweights) / w_sum
    Xc = X - avg[:, None]
    Xw = Xc if w is None else Xc * w
    Xw = np.conjugate(Xw) if np.iscomplexobj(plain) else Xw
    c = (Xc @ Xw.T) / fact
    return np.reshape(c, np.shape(plain))


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """Correlation: the covariance scaled by the standard deviations, clipped
    to [-1, 1] as NumPy does (the clip only acts on rounding errors)."""
    c = cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:
        return c / c
    s = np.sqrt(np.real(np.diagonal(c)))
    c = c / s[:, None] / s[None, :]
    return np.clip(c, -1, 1) if not np.iscomplexobj(unwrap_all(c)) else c
