"""Polynomial evaluation: ``np.polyval`` by Horner's rule, a composite of
differentiable operations (in the coefficients and the points, at every
order).  The other ``np.poly*`` functions are in :mod:`.composite`."""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive, implements, shape_of
from ..core.var import astype as _var_astype, unwrap_all
from .common import plain_dtype
from .indexing import float_source


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


# --- polynomials -----------------------------------------------------------------------
def _pad_front(a, k):
    if k <= 0:
        return a
    return np.concatenate([np.zeros(k, plain_dtype(a)), a])


def _poly_combine(op):
    def combine(a1, a2):
        a1, a2 = np.atleast_1d(a1), np.atleast_1d(a2)
        n1, n2 = len(unwrap_all(a1)), len(unwrap_all(a2))
        return op(_pad_front(a1, n2 - n1), _pad_front(a2, n1 - n2))
    combine.__name__ = "poly" + op.__name__[:3]
    return combine


implements(np.polyadd)(_poly_combine(np.add))
implements(np.polysub)(_poly_combine(np.subtract))


@implements(np.polyder)
def polyder(p, m=1):
    """Coefficients times their powers, ``m`` times."""
    m = int(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = np.atleast_1d(p)
    for _ in range(m):
        n = len(unwrap_all(p)) - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


@implements(np.polyint)
def polyint(p, m=1, k=None):
    """Coefficients divided by their new powers, with the integration
    constants ``k`` (traced or not) appended, ``m`` times."""
    m = int(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = np.zeros(m, float) if k is None else np.atleast_1d(k)
    if len(unwrap_all(k)) == 1 and m > 1:
        k = k[0] * np.ones(m, float)
    if len(unwrap_all(k)) < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):
        p = np.concatenate([p / np.arange(len(unwrap_all(p)), 0, -1), np.reshape(k[i], (1,))])
    return p


@implements(np.polydiv)
def polydiv(u, v):
    """Long division in NumPy's steps, without writing in place: q and r are
    rational functions of the coefficients (differentiable while v[0] != 0).
    The leading remainder entries NumPy drops as zero (np.allclose) are
    dropped here too; the entries it cancels are identically zero."""
    u, v = np.atleast_1d(u) + 0.0, np.atleast_1d(v) + 0.0
    dtype = np.result_type(plain_dtype(u), plain_dtype(v))
    u, v = float_source(u, dtype), float_source(v, dtype)
    m, n = shape_of(u)[0] - 1, shape_of(v)[0] - 1
    scale = 1.0 / v[0]
    r, quotient = u, []
    for k in range(m - n + 1):
        d = scale * r[k]
        quotient.append(d)
        r = np.concatenate([r[:k], r[k:k + n + 1] - d * v, r[k + n + 1:]])
    q = np.stack(quotient) if quotient else np.zeros((1,), dtype)
    rv, start = unwrap_all(r), 0
    while np.allclose(rv[start], 0, rtol=1e-14) and len(rv) - start > 1:
        start += 1
    return q, r[start:]


def _full_convolution(a, b):
    """sum_{i+j=k} a_i b_j: the outer product, each row i shifted right by i
    (pad with n zero columns, flatten, cut, reshape), summed over rows."""
    n, m = len(unwrap_all(a)), len(unwrap_all(b))
    outer = np.outer(a, b)
    padded = np.concatenate([outer, np.zeros((n, n), plain_dtype(outer))], axis=1)
    skewed = np.reshape(np.ravel(padded)[:n * (n + m - 1)], (n, n + m - 1))
    return np.sum(skewed, axis=0)


@implements(np.polymul)
def polymul(a1, a2):
    """The product's coefficients: the full convolution of a1 and a2."""
    a1, a2 = np.atleast_1d(a1), np.atleast_1d(a2)
    if 0 in (np.size(unwrap_all(a1)), np.size(unwrap_all(a2))):
        return np.polymul(unwrap_all(a1), unwrap_all(a2))  # NumPy's error
    return _full_convolution(a1, a2)


def _vander_increasing(x, n):
    return np.vander(x, n, increasing=True)


def _vander_rule(g, ans, x, n):
    """d/dx_i sum_k g_ik x_i^k = sum_{k>=1} g_ik k x_i^(k-1) (exact at 0)."""
    if n <= 1:
        return np.zeros(shape_of(x), plain_dtype(g))
    k = np.arange(1, n, dtype=plain_dtype(g))
    return np.sum(g[:, 1:] * k * _vander(x, n - 1), axis=1)


_vander = Primitive(_vander_increasing, "vander", vjps=(_vander_rule, None))


@implements(np.vander)
def vander(x, N=None, increasing=False):
    """Powers of x: column k of the increasing form is x**k."""
    if np.ndim(unwrap_all(x)) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = len(unwrap_all(x)) if N is None else int(N)
    v = _vander(x, n)
    return v if increasing else v[:, ::-1]


@implements(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least squares as NumPy solves it (scaled Vandermonde columns,
    np.linalg.lstsq), differentiable in x, y and w while the rank is full."""
    if cov:
        raise NotImplementedError(
            "tapestry: np.polyfit(..., cov=True) is refused on traced arrays (the covariance "
            "estimate has no rule); fit with cov=False and form it from np.linalg.inv.")
    xv, yv, wv = unwrap_all(x), unwrap_all(y), unwrap_all(w)
    np.polyfit(xv, yv, deg, rcond, full, wv)  # NumPy's checks and RankWarning (a small solve)
    order = int(deg) + 1
    x, y = x + 0.0, y + 0.0
    if rcond is None:
        rcond = len(xv) * np.finfo(plain_dtype(x)).eps
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = w + 0.0
        lhs = lhs * w[:, None]
        rhs = rhs * (w if np.ndim(yv) == 1 else w[:, None])
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    c, resids, rank, s = np.linalg.lstsq(lhs / scale, rhs, rcond)
    c = np.transpose(np.transpose(c) / scale)
    return (c, resids, rank, s, rcond) if full else c


@implements(np.roots)
def roots(p):
    """Eigenvalues of the companion matrix (np.linalg.eigvals' rule); leading
    and trailing zero coefficients are trimmed / give zero roots, as in NumPy."""
    p = np.atleast_1d(p)
    pv = unwrap_all(p)
    if pv.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    nz = np.nonzero(pv)[0]
    if len(nz) == 0:
        return np.array([])
    trailing = len(pv) - int(nz[-1]) - 1
    p = p[int(nz[0]):int(nz[-1]) + 1]
    n = int(nz[-1]) - int(nz[0]) + 1
    if n > 1:
        below = np.diag(np.ones((n - 2,), plain_dtype(p)), -1)[1:]
        r = np.linalg.eigvals(np.concatenate([(-p[1:] / p[0])[None, :], below], axis=0))
    else:
        r = np.array([])
    return np.concatenate([r, np.zeros(trailing, plain_dtype(r))]) if trailing else r


@implements(np.poly)
def poly(seq_of_zeros):
    """The monic polynomial with these roots (or a square matrix's
    eigenvalues): a product of linear factors, one factor at a time."""
    z = np.atleast_1d(seq_of_zeros)
    sh = shape_of(z)
    if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
        z = np.linalg.eigvals(z)
    elif len(sh) == 1:
        z = _var_astype(z, np.mintypecode(plain_dtype(z).char))
    else:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if shape_of(z)[0] == 0:
        return 1.0
    a = np.ones((1,), plain_dtype(z))
    zero = np.zeros((1,), plain_dtype(z))
    for i in range(shape_of(z)[0]):
        a = np.concatenate([a, zero]) - z[i] * np.concatenate([zero, a])
    if np.iscomplexobj(unwrap_all(a)):
        r = np.asarray(unwrap_all(z), complex)
        if np.all(np.sort(r) == np.sort(r.conjugate())):
            a = np.real(a)
    return a
