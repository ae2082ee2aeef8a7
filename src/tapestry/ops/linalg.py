"""Linear algebra: matmul, dot and friends, and numpy.linalg."""
from __future__ import annotations

import numpy as np

from ..core.primitive import KEEP_OTHER, Primitive, implements, unbroadcast
from ..core.registry import FUNCTIONS
from ..core.var import Var, unwrap_all


def _no_out(name, out):
    if out is not None:
        raise TypeError(f"tapestry: np.{name}(..., out=...) writes in place and "
                        "cannot be differentiated; drop out=.")


def _matmul_vjp_a(g, ans, a, b):
    """a_bar = g @ b^T.  Outer products (1-D b) are broadcast multiplies,
    which beat a GEMM with an inner dimension of 1 (W[S] @ x: 22 vs 48 us)."""
    if b.ndim == 1:
        if a.ndim == 1:
            return g * b
        return unbroadcast(np.expand_dims(g, -1) * b, a.shape)
    bt = b.swapaxes(-1, -2)  # the method: no NumPy-level Python wrapper
    if a.ndim == 1:
        return unbroadcast(np.squeeze(np.expand_dims(g, -2) @ bt, -2), a.shape)
    if b.shape[-1] == 1:  # inner dimension 1: an outer product
        return unbroadcast(g * bt, a.shape)
    return unbroadcast(g @ bt, a.shape)


def _matmul_vjp_b(g, ans, a, b):
    """b_bar = a^T @ g (an outer product, by broadcasting, when a is 1-D or
    has one row: 21 vs 51 us for W4's (64, 1) @ (1, 256))."""
    if a.ndim == 1:
        if b.ndim == 1:
            return g * a
        return unbroadcast(np.expand_dims(a, -1) * np.expand_dims(g, -2), b.shape)
    at = a.swapaxes(-1, -2)
    if b.ndim == 1:
        return unbroadcast(np.squeeze(at @ np.expand_dims(g, -1), -1), b.shape)
    if a.shape[-2] == 1:  # inner dimension 1 (W2 @ h with one output row in W4)
        return unbroadcast(at * g, b.shape)
    return unbroadcast(at @ g, b.shape)


implements(np.matmul)(Primitive(np.matmul, keep=KEEP_OTHER,
                                vjps=(_matmul_vjp_a, _matmul_vjp_b)))


# --- tensordot and the products built on it (no einsum) -----------------------------
def _normalize_axes(axes, nda, ndb):
    if np.ndim(axes) == 0:
        n = int(axes)
        return tuple(range(nda - n, nda)), tuple(range(n))
    xa, xb = axes
    xa = (xa,) if np.ndim(xa) == 0 else tuple(xa)
    xb = (xb,) if np.ndim(xb) == 0 else tuple(xb)
    return tuple(int(i) % nda for i in xa), tuple(int(i) % ndb for i in xb)


def _tensordot_vjp_a(g, ans, a, b, axes):
    """ā = contract g with b over b's free axes, then put a's axes back in order."""
    sa, sb = axes
    free_a = [i for i in range(np.ndim(a)) if i not in sa]
    free_b = [i for i in range(np.ndim(b)) if i not in sb]
    ga = np.tensordot(g, b, (tuple(range(len(free_a), np.ndim(g))), tuple(free_b)))
    # ga's trailing axes are b's contracted axes in ascending order.
    order = free_a + [sa[sb.index(j)] for j in sorted(sb)]
    return np.transpose(ga, tuple(np.argsort(order)))


def _tensordot_vjp_b(g, ans, a, b, axes):
    """b̄ = contract a with g over a's free axes, then put b's axes back in order."""
    sa, sb = axes
    free_a = [i for i in range(np.ndim(a)) if i not in sa]
    free_b = [i for i in range(np.ndim(b)) if i not in sb]
    gb = np.tensordot(a, g, (tuple(free_a), tuple(range(len(free_a)))))
    # gb's leading axes are a's contracted axes in ascending order.
    order = [sb[sa.index(i)] for i in sorted(sa)] + free_b
    return np.transpose(gb, tuple(np.argsort(order)))


_tensordot = Primitive(lambda a, b, axes: np.tensordot(a, b, axes), "tensordot",
                       keep=KEEP_OTHER, vjps=(_tensordot_vjp_a, _tensordot_vjp_b))


@implements(np.tensordot, np.linalg.tensordot)
def tensordot(a, b, axes=2):
    return _tensordot(a, b, _normalize_axes(axes, np.ndim(a), np.ndim(b)))


@implements(np.dot)
def dot(a, b, out=None):
    _no_out("dot", out)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    return _tensordot(a, b, ((np.ndim(a) - 1,), (max(np.ndim(b) - 2, 0),)))


@implements(np.inner)
def inner(a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    return _tensordot(a, b, ((np.ndim(a) - 1,), (np.ndim(b) - 1,)))


@implements(np.vdot)
def vdot(a, b):
    if np.iscomplexobj(a):
        a = np.conjugate(a)
    return dot(np.ravel(a), np.ravel(b))


@implements(np.outer, np.linalg.outer)
def outer(a, b, out=None):
    _no_out("outer", out)
    return np.reshape(a, (-1, 1)) * np.reshape(b, (1, -1))


@implements(np.kron)
def kron(a, b):
    """Interleave the axes of a and b and merge each pair (a product, no loop)."""
    nd = max(np.ndim(a), np.ndim(b))
    sa = (1,) * (nd - np.ndim(a)) + tuple(np.shape(a))
    sb = (1,) * (nd - np.ndim(b)) + tuple(np.shape(b))
    ea = np.reshape(a, tuple(x for n in sa for x in (n, 1)))
    eb = np.reshape(b, tuple(x for n in sb for x in (1, n)))
    return np.reshape(ea * eb, tuple(m * n for m, n in zip(sa, sb)))


def _vecdot(x1, x2, axis=-1, **kwargs):
    if np.iscomplexobj(x1):
        x1 = np.conjugate(x1)
    return np.sum(x1 * x2, axis=axis)


implements(np.vecdot)(_vecdot)
implements(np.linalg.vecdot)(lambda x1, x2, /, *, axis=-1: _vecdot(x1, x2, axis))
implements(np.matvec)(lambda x1, x2, **kw: np.squeeze(x1 @ np.expand_dims(x2, -1), -1))
implements(np.vecmat)(lambda x1, x2, **kw: np.squeeze(
    np.expand_dims(np.conjugate(x1), -2) @ x2, -2))
implements(np.linalg.matmul)(lambda x1, x2, /: x1 @ x2)


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    _no_out("linalg.multi_dot", out)
    arrays = list(arrays)
    result = arrays[0]
    for a in arrays[1:]:
        result = dot(result, a)
    return result


# --- numpy.linalg ---------------------------------------------------------------
def _T(x):
    return np.swapaxes(x, -1, -2)


def _solve_vjp_a(g, ans, a, b):
    """x = a⁻¹ b:  ā = -aᵀ⁻¹ ḡ xᵀ."""
    gb = _solve_vjp_b(g, ans, a, b, unbroadcast_to=False)
    if np.ndim(b) == 1:
        ga = -np.expand_dims(gb, -1) * np.expand_dims(ans, -2)
    else:
        ga = -(gb @ _T(ans))
    return unbroadcast(ga, np.shape(a))


def _solve_vjp_b(g, ans, a, b, unbroadcast_to=True):
    """x = a⁻¹ b:  b̄ = aᵀ⁻¹ ḡ."""
    gb = np.linalg.solve(_T(a), g)
    return unbroadcast(gb, np.shape(b)) if unbroadcast_to else gb


_solve = Primitive(np.linalg.solve, "linalg.solve", vjps=(_solve_vjp_a, _solve_vjp_b))
implements(np.linalg.solve)(_solve)

# d(a⁻¹) = -a⁻¹ da a⁻¹  =>  ā = -a⁻ᵀ ḡ a⁻ᵀ
_inv = Primitive(np.linalg.inv, "linalg.inv",
                 vjps=(lambda g, ans, a: -(_T(ans) @ g @ _T(ans)),))
implements(np.linalg.inv)(_inv)

# d det(a) = det(a) tr(a⁻¹ da)  =>  ā = ḡ det(a) a⁻ᵀ
_det = Primitive(np.linalg.det, "linalg.det",
                 vjps=(lambda g, ans, a: np.expand_dims(g * ans, (-1, -2)) * _T(np.linalg.inv(a)),))
implements(np.linalg.det)(_det)


def _slogdet_vjp(g, ans, a):
    """Only log|det a| has a derivative (ā = ḡ a⁻ᵀ); the sign is piecewise constant."""
    g_logdet = g[1]
    if g_logdet is None:
        return None
    return np.expand_dims(g_logdet, (-1, -2)) * _T(np.linalg.inv(a))


_slogdet = Primitive(lambda a: tuple(np.linalg.slogdet(a)), "linalg.slogdet", n_outputs=2,
                     vjps=(_slogdet_vjp,))


@implements(np.linalg.slogdet)
def slogdet(a):
    return _SlogdetResult(*_slogdet(a))


_SlogdetResult = type(np.linalg.slogdet(np.eye(1)))
_EighResult = type(np.linalg.eigh(np.eye(1)))


def _lower_read(s):
    """A symmetric cotangent ``s`` as the gradient of a function that reads only
    the lower triangle of its argument (as LAPACK's cholesky and eigh do)."""
    return np.tril(s + _T(s)) - s * np.eye(np.shape(s)[-1], dtype=bool)


def _cholesky_vjp(g, ans, a):
    """Murray (2016):  ā = Φ-symmetrization of L⁻ᵀ Φ(Lᵀ L̄) L⁻¹ with
    Φ(X) = tril(X) with its diagonal halved; then folded onto the lower
    triangle, which is all of ``a`` that cholesky reads."""
    n = np.shape(a)[-1]
    phi = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    P = (_T(ans) @ g) * phi
    Y = np.linalg.solve(_T(ans), P)           # L⁻ᵀ P
    S = _T(np.linalg.solve(_T(ans), _T(Y)))   # L⁻ᵀ P L⁻¹
    return _lower_read(0.5 * (S + _T(S)))


_cholesky = Primitive(np.linalg.cholesky, "linalg.cholesky", vjps=(_cholesky_vjp,))


@implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    """``upper=True`` reads the upper triangle: it is the transpose problem."""
    if upper:
        return _T(_cholesky(_T(a)))
    return _cholesky(a)


def _eigh_vjp(g, ans, a, UPLO):
    """a = V diag(w) Vᵀ:  ā = V (diag(w̄) + F ∘ Vᵀ V̄) Vᵀ with F_ij = 1/(w_j - w_i)
    off the diagonal, 0 on it; symmetrized and folded onto the triangle that
    eigh reads.  Assumes distinct eigenvalues (F is infinite otherwise)."""
    w, V = ans
    gw, gV = g
    n = np.shape(a)[-1]
    inner = 0.0
    if gw is not None:
        inner = np.expand_dims(gw, -1) * np.eye(n)
    if gV is not None:
        diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)
        off = ~np.eye(n, dtype=bool)
        F = np.where(off, 1.0 / np.where(off, diff, 1.0), 0.0)
        inner = inner + F * (_T(V) @ gV)
    s = V @ inner @ _T(V)
    s = 0.5 * (s + _T(s))
    s = _lower_read(s)
    return _T(s) if UPLO == "U" else s


_eigh = Primitive(lambda a, UPLO: tuple(np.linalg.eigh(a, UPLO)), "linalg.eigh", n_outputs=2,
                  vjps=(_eigh_vjp,))


@implements(np.linalg.eigh)
def eigh(a, UPLO="L"):
    w, V = _eigh(a, UPLO.upper())
    return _EighResult(w, V)


implements(np.linalg.eigvalsh)(lambda a, UPLO="L": eigh(a, UPLO)[0])


# --- norms -------------------------------------------------------------------------
def _l2_vjp(g, ans, x, axis, keepdims):
    """d ||x|| = x / ||x||, and 0 at x = 0 (the subgradient of least norm)."""
    from .reductions import _kept_shape, expand_reduced
    n = np.reshape(ans, _kept_shape(np.shape(x), axis))
    safe = np.where(n == 0, 1.0, n)
    return expand_reduced(g, np.shape(x), axis, keepdims) * np.where(n == 0, 0.0, x / safe)


_l2 = Primitive(lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)),
                "linalg.norm", vjps=(_l2_vjp,))


def _svd_norm_vjp(g, ans, x, which):
    """Spectral norms from the SVD x = U S Vᵀ: d σ_k = u_k v_kᵀ; the nuclear
    norm's gradient is U Vᵀ.  First derivatives only (no svd rule yet)."""
    if isinstance(x, Var):
        raise NotImplementedError("tapestry: second derivatives of the 2-, -2- and "
                                  "nuclear matrix norms need an svd rule, which is "
                                  "not implemented.")
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    if which == "nuc":
        d = u @ vt
    else:
        k = 0 if which == 2 else -1
        d = u[..., :, k:k + 1 if k != -1 else None] @ vt[..., k:k + 1 if k != -1 else None, :]
    return np.expand_dims(g, (-1, -2)) * d


_svd_norm = Primitive(lambda x, which: _svd_norm_fwd(x, which), "linalg.norm",
                      vjps=(_svd_norm_vjp,))


def _svd_norm_fwd(x, which):
    s = np.linalg.svd(x, compute_uv=False)
    return np.sum(s, -1) if which == "nuc" else (s[..., 0] if which == 2 else s[..., -1])


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms (ord None/2, 1, inf, -inf, 0, p) and matrix norms
    ('fro', 1, -1, inf, -inf, 2, -2, 'nuc'), like np.linalg.norm."""
    nd = np.ndim(x)
    if axis is None:
        if ord is None or (ord == "fro" and nd == 2) or (ord == 2 and nd == 1):
            return _l2(x, None, keepdims)
        axis = tuple(range(nd))
    axis = (axis,) if isinstance(axis, int) else tuple(a % nd for a in axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis[0], keepdims)
    if len(axis) == 2:
        return _matrix_norm(x, ord, axis, keepdims)
    raise ValueError("tapestry: np.linalg.norm takes at most two axes.")


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return _l2(x, axis, keepdims)
    ax = np.abs(x)
    if ord == np.inf:
        return np.max(ax, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return np.min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        return np.sum(unwrap_all(x) != 0, axis=axis, keepdims=keepdims).astype(
            np.result_type(x))
    if ord == 1:
        return np.sum(ax, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"tapestry: invalid norm order {ord!r} for vectors.")
    return np.sum(ax ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _matrix_norm(x, ord, axis, keepdims):
    r, c = axis
    if ord is None or ord == "fro":
        out = _l2(x, axis, True)
    elif ord in (1, -1, np.inf, -np.inf):
        sum_ax, ext_ax = (r, c) if abs(ord) == 1 else (c, r)
        col = np.sum(np.abs(x), axis=sum_ax, keepdims=True)
        ext = np.max if ord > 0 else np.min
        out = ext(col, axis=ext_ax, keepdims=True)
    elif ord in (2, -2, "nuc"):
        moved = np.moveaxis(x, (r, c), (-2, -1))
        out = np.expand_dims(_svd_norm(moved, ord), (r, c) if r < c else (c, r))
        out = np.reshape(out, tuple(1 if i in axis else n for i, n in enumerate(np.shape(x))))
    else:
        raise ValueError(f"tapestry: invalid norm order {ord!r} for matrices.")
    return out if keepdims else np.squeeze(out, axis)
