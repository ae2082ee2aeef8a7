"""Polynomials as coefficient arrays (highest power first, NumPy's
``np.poly*`` convention): evaluation by Horner's rule, products by
convolution, derivatives and integrals by scaling coefficients.  All are
composites of differentiable operations, so they are differentiable in the
coefficients, the roots and the evaluation points, at every order."""
from __future__ import annotations

import numpy as np

from ..core.primitive import implements
from ..core.var import unwrap_all
from .numerics import convolve


@implements(np.polyval)
def polyval(p, x):
    """Horner's rule: ``((p0 x + p1) x + p2) ...``."""
    if isinstance(unwrap_all(p), np.poly1d):
        p = unwrap_all(p).coeffs
    y = 0.0 * x
    for i in range(len(p)):
        y = y * x + p[i]
    return y


@implements(np.poly)
def poly(seq_of_zeros):
    """Coefficients of the monic polynomial with the given roots: repeated
    convolution with ``[1, -r]``.  A square matrix argument (its
    characteristic polynomial) is refused: use eigvals first."""
    if np.ndim(seq_of_zeros) != 1:
        raise NotImplementedError(
            "tapestry: np.poly of a matrix (characteristic polynomial) has no gradient "
            "rule; pass np.linalg.eigvals(A) (roots) instead.")
    dtype = np.result_type(unwrap_all(seq_of_zeros), np.float16)
    coeffs = np.ones(1, dtype)
    for k in range(np.shape(seq_of_zeros)[0]):
        coeffs = convolve(coeffs, np.stack([np.ones((), dtype), -seq_of_zeros[k]]))
    return coeffs


@implements(np.polymul)
def polymul(a1, a2):
    return convolve(np.atleast_1d(a1), np.atleast_1d(a2))


def _pad_front(a, n):
    return np.concatenate([np.zeros(n, np.result_type(unwrap_all(a))), a]) if n else a


def _poly_sum(a1, a2, sign):
    a1, a2 = np.atleast_1d(a1), np.atleast_1d(a2)
    d = np.shape(a2)[0] - np.shape(a1)[0]
    return _pad_front(a1, max(d, 0)) + sign * _pad_front(a2, max(-d, 0))


@implements(np.polyadd)
def polyadd(a1, a2):
    """Sum of two polynomials: the shorter is padded with leading zeros."""
    return _poly_sum(a1, a2, 1)


@implements(np.polysub)
def polysub(a1, a2):
    return _poly_sum(a1, a2, -1)


@implements(np.polyder)
def polyder(p, m=1):
    """``m``-th derivative: each coefficient times its power, ``m`` times."""
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    for _ in range(m):
        n = np.shape(p)[0] - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


@implements(np.polyint)
def polyint(p, m=1, k=None):
    """``m``-th antiderivative with integration constants ``k`` (which may
    be traced too)."""
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    if m == 0:
        return p
    k = np.zeros(m) if k is None else np.atleast_1d(k)
    if np.shape(k)[0] == 1 and m > 1:
        k = np.broadcast_to(k, (m,))
    if np.shape(k)[0] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):
        p = np.concatenate([p / np.arange(np.shape(p)[0], 0, -1), np.reshape(k[i], (1,))])
    return p


@implements(np.vander)
def vander(x, N=None, increasing=False):
    """Columns ``x**k``; integer powers, so exact at ``x == 0`` at every order."""
    if np.ndim(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = np.shape(x)[0] if N is None else N
    k = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    return np.reshape(x, (-1, 1)) ** k
