"""Helpers shared by the numpy.linalg rules (linalg.py, linalg_decomp.py):
transposes, the fold of a Hermitian cotangent onto the triangle LAPACK
reads, and the eigen-/singular-value gap matrix with its refusal where
values coincide."""
from __future__ import annotations

import numpy as np

from ..core.batched import all_items
from ..core.forward import mark_undefined, transposing
from ..core.var import unwrap_all


def _T(x):
    return np.swapaxes(x, -1, -2)


def _H(x):
    """The conjugate transpose of the last two axes (a transpose when real)."""
    return np.conjugate(_T(x)) if np.iscomplexobj(x) else _T(x)


def _fold_triangle(s, lower=True):
    """The cotangent ``s`` of a Hermitian matrix Σ as the cotangent of the
    array LAPACK reads: one triangle, Σ_ji = conj(Σ_ij) for the other, and
    the real part of the diagonal.  Under the pairing Re(c t) that is
    tril(T) - T∘I/2 with T = s + sᴴ (T's diagonal is 2 Re s_ii)."""
    t = s + _H(s)
    tri = np.tril(t) if lower else np.triu(t)
    return tri - 0.5 * t * np.eye(np.shape(s)[-1], dtype=bool)


def _gaps(w, name, what, *cotangents):
    """F_ij = 1/(w_j - w_i) off the diagonal, 0 on it.  Where two values
    coincide to working precision the vectors are not unique and their
    derivative is undefined: raise rather than return inf or NaN.

    Forward mode transposes the rule with placeholder cotangents for every
    output (``cotangents``, the vectors' ones), so it cannot tell whether the
    vectors are used: a refusal there refused ``jvp`` of a function of the
    values alone (``np.linalg.eigh(np.eye(3))[0]``), which reverse mode
    differentiates.  There F is NaN at the coinciding pairs instead: the
    vectors' tangent is NaN, the values' tangent is exact, and a forward
    result the NaN reaches raises this refusal (``forward.mark_undefined``)."""
    wv = unwrap_all(w)
    n = np.shape(wv)[-1]
    diff_v = np.expand_dims(wv, -2) - np.expand_dims(wv, -1)
    off = ~np.eye(n, dtype=bool)
    scale = np.max(np.abs(wv), axis=-1, keepdims=True)[..., None] if n else 0
    tol = 8 * n * np.finfo(np.result_type(wv, np.float32)).eps * np.maximum(scale, 1e-300)
    coincide = off & (np.abs(diff_v) <= tol)
    poisoned = False
    if np.any(all_items(coincide)):  # any item's
        message = (f"tapestry: {name}: two {what} coincide (to working precision), so "
                   "the vectors are not unique and their derivative is undefined. "
                   f"Differentiate a function of the {what} only, or one that is invariant "
                   "within the repeated subspace via tapestry.custom_vjp, or perturb the "
                   "matrix.")
        if not any(transposing(c) for c in cotangents if c is not None):
            raise ValueError(message)
        mark_undefined(message)  # raised if the NaN reaches jvp's result
        poisoned = True
    diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)
    if not poisoned:
        return np.where(off, 1.0 / np.where(off, diff, 1.0), 0.0)
    keep = off & ~coincide  # (no division by the zero gaps: they are NaN)
    return np.where(coincide, np.nan, np.where(keep, 1.0 / np.where(keep, diff, 1.0), 0.0))


def batch_stacked(prim, args, batched, kwargs):
    """The batching rule of an operation on the last two axes that NumPy
    already maps over leading ones (inv, det, cholesky, eigh, svd, ...):
    the batch is one more leading axis, when only the matrix is batched."""
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    return prim(*args, **kwargs) if kwargs else prim(*args)
