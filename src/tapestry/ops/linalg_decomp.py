"""numpy.linalg factorizations: svd, svdvals, eig, eigvals, qr, pinv, lstsq.

Rules follow docs/complex.md (cotangents pair with tangents by
``Re(c * t)``), so each is written for complex matrices and holds for real
ones.  Conventions: ``_T`` transposes the last two axes, ``_H`` conjugates
and transposes.  Where a derivative does not exist the rule raises by name
instead of returning inf/NaN:

- singular vectors (svd) and eigenvectors (eigh) where two singular values
  / eigenvalues coincide: the vectors are not unique there;
- the extra columns of ``full_matrices=True`` / ``mode="complete"`` when
  the matrix is not square: they are any basis of a complement;
- eig's and eigh's eigenvectors: defined up to a phase (a sign when real),
  so only functions invariant to it have a gradient (the rules use the
  gauge where ``Im(v_iᴴ dv_i) = 0``);
- pinv and lstsq: exact while the rank is constant (Golub & Pereyra 1973,
  or, where rcond drops singular values that are not 0, the truncated
  SVD's own rule, first order only); at a rank change pinv is discontinuous.
"""
from __future__ import annotations

import numpy as np

from ..core.forward import transposing
from ..core.primitive import Primitive, implements
from ..core.var import unwrap_all
from .complex import imag_part, match_input, real_cotangent, real_part
from ..core.batched import all_items
from .linalg_common import _H, _T, _fold_triangle, _gaps, batch_stacked

_SVDResult = type(np.linalg.svd(np.eye(1)))
_EigResult = type(np.linalg.eig(np.eye(1)))
_QRResult = type(np.linalg.qr(np.eye(1)))



def _nonzero(g):
    return g is not None and bool(np.any(unwrap_all(g) != 0))


def _refuse(name, why, what_to_do):
    raise ValueError(f"tapestry: the derivative of {name} {why}. {what_to_do}")


# --- svd --------------------------------------------------------------------------------
def _svd_fwd(a, full_matrices, hermitian):
    return tuple(np.linalg.svd(a, full_matrices=full_matrices, hermitian=hermitian))


def _crop_full(gU, gVh, k, m, n):
    """full_matrices=True: only the first k columns of U / rows of Vh are
    determined by ``a``; a cotangent on the others has no derivative.

    Returns the cropped cotangents and, in forward mode, a poison: forward
    mode transposes this rule with placeholder zero cotangents, which said
    "unused" of the extra columns and gave them a zero tangent (jvp of a
    function of them was silently 0).  There the caller adds ``nan * poison``
    to the result, so their tangent is NaN: a function that uses them gets
    NaN, one that does not (``U[:, :k]``) is unaffected."""
    if m == n:
        return gU, gVh, None
    extra = [x for x in ((None if gU is None else gU[..., :, k:]),
                         (None if gVh is None else gVh[..., k:, :])) if x is not None]
    if any(transposing(x) for x in extra):
        poison = sum(np.sum(x) for x in extra)
    else:
        poison = None
        if any(_nonzero(x) for x in extra):
            _refuse("np.linalg.svd(full_matrices=True)", "in the columns of U (rows of Vh) "
                    "beyond min(m, n) does not exist: they are any orthonormal basis of a "
                    "complement", "Use full_matrices=False.")
    return (None if gU is None else gU[..., :, :k]), \
        (None if gVh is None else gVh[..., :k, :]), poison


def _svd_vjp(g, ans, a, full_matrices, hermitian):
    """a = U diag(s) Vᴴ (reduced, k = min(m, n)); the transpose of JAX's
    svd JVP: with dS = Uᴴ da V and F_ij = 1/(s_j² - s_i²),
    dU = U(F∘(dS s + (dS s)ᴴ) + i Im diag(dS)/s) + (I - UUᴴ) da V / s,
    dV = V(F∘(s dS + (s dS)ᴴ)) + (I - VVᴴ) daᴴ U / s, ds = Re diag(dS)."""
    gU, gs, gVh = g
    U, s, Vh = ans
    m, n = np.shape(a)[-2:]
    k = min(m, n)
    poison = None
    if full_matrices:
        gU, gVh, poison = _crop_full(gU, gVh, k, m, n)
        U, Vh = U[..., :, :k], Vh[..., :k, :]
    Sb = 0.0 if gs is None else np.expand_dims(real_cotangent(gs), -2) * np.eye(k, dtype=bool)
    ga = 0.0
    if gU is not None or gVh is not None:
        Sb, ga = _svd_vectors(gU, gVh, U, s, Vh, m, n, Sb)
    ga = ga + np.conjugate(U) @ Sb @ np.conjugate(Vh) if np.iscomplexobj(U) else ga + U @ Sb @ Vh
    if hermitian:
        ga = _fold_triangle(ga)
    if poison is not None:
        ga = ga + np.nan * poison
    return match_input(ga, a)


def _svd_vectors(gU, gVh, U, s, Vh, m, n, Sb):
    """The singular vectors' part: the cotangent of dS, and of da directly
    (the complement terms of non-square matrices)."""
    F = _gaps(s * s, "np.linalg.svd", "singular values", gU, gVh)
    complex_ = np.iscomplexobj(U)
    s_row, s_col = np.expand_dims(s, -2), np.expand_dims(s, -1)
    if (m != n) and np.any(unwrap_all(s) == 0):
        _refuse("np.linalg.svd's vectors", "does not exist for a rank-deficient "
                "non-square matrix (a singular value is 0)",
                "Differentiate the singular values only, or use tapestry.custom_vjp.")
    ga = 0.0
    if gU is not None:
        Xb = _T(U) @ gU
        Y = F * Xb
        Sb = Sb + (Y + _H(Y)) * s_row
        if complex_:
            D = Xb * np.eye(np.shape(s)[-1], dtype=bool) / np.where(s_row == 0, 1.0, s_row)
            Sb = Sb + 0.5 * (D - _H(D))
        if m > n:
            Up = gU / s_row
            ga = ga + (Up - np.conjugate(U) @ (_T(U) @ Up)) @ np.conjugate(Vh)
    if gVh is not None:
        Vb = _H(gVh)
        Y = F * (np.conjugate(Vh) @ Vb)  # Vᵀ V̄
        Sb = Sb + s_col * (Y + _H(Y))
        if n > m:
            Vp = Vb / s_row
            W = (Vp - _T(Vh) @ (np.conjugate(Vh) @ Vp)) @ _T(U)
            ga = ga + _H(W)
    return Sb, ga


_svd = Primitive(_svd_fwd, "linalg.svd", n_outputs=3, vjps=(_svd_vjp,), batch=batch_stacked)


@implements(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """Singular values are differentiable where simple (the sum of them
    everywhere); the vectors where the singular values are distinct (and,
    for non-square matrices, nonzero): coinciding values are refused, since
    the vectors are not unique there.  Vectors are defined up to a joint
    sign (phase): only functions invariant to it have a gradient."""
    if not compute_uv:
        return svdvals(a, hermitian)
    return _SVDResult(*_svd(a, bool(full_matrices), bool(hermitian)))


def _svdvals_vjp(g, ans, a, hermitian):
    U, _, Vh = np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
    gs = np.expand_dims(real_cotangent(g), -2)
    ga = np.conjugate(U * gs) @ np.conjugate(Vh) if np.iscomplexobj(U) else (U * gs) @ Vh
    return match_input(_fold_triangle(ga) if hermitian else ga, a)


_svdvals = Primitive(lambda a, hermitian: np.linalg.svd(a, compute_uv=False, hermitian=hermitian),
                     "linalg.svdvals", vjps=(_svdvals_vjp,), batch=batch_stacked)


def svdvals(a, hermitian=False):
    """The singular values: d s_k = Re(u_kᴴ da v_k), so ā = conj(U diag(s̄) Vᴴ)."""
    return _svdvals(a, bool(hermitian))


implements(np.linalg.svdvals)(lambda x, /: svdvals(x))


# --- eig ---------------------------------------------------------------------------------
def _eig_vjp(g, ans, a):
    """A V = V Λ:  with E = V⁻¹ dA V, dλ = diag(E) and dV = V (F∘E + diag(c)),
    F_ij = 1/(λ_j - λ_i), where c keeps every column at unit norm
    (c_i = -Re (VᴴV F∘E)_ii, LAPACK's normalization).  Transposed:
    Ā = V⁻ᵀ (diag(λ̄) + F∘K̄) Vᵀ,  K̄ = VᵀV̄ - VᵀV̄* diag(Re diag(VᵀV̄)).
    The phase of a complex eigenvector is a gauge: only functions invariant
    to it have a gradient (as for eigh)."""
    gw, gV = g
    w, V = ans
    _check_eig_distinct(w, V)
    Vt = _T(V)
    n = np.shape(w)[-1]
    inner = 0.0 if gw is None else np.expand_dims(gw, -1) * np.eye(n, dtype=bool)
    if gV is not None:
        VtgV = Vt @ gV
        Vc = np.conjugate(V) if np.iscomplexobj(V) else V
        diag_re = real_cotangent(VtgV * np.eye(n, dtype=bool))  # diag(Re diag(VᵀV̄))
        Kb = VtgV - (Vt @ Vc) @ diag_re
        inner = inner + _gaps(w, "np.linalg.eig", "eigenvalues") * Kb
    return match_input(np.linalg.solve(Vt, inner @ Vt), a)


def _check_eig_distinct(w, V):
    """Eigenvalues of a general matrix are differentiable only where they
    are distinct: at a repeated eigenvalue they move like sqrt (a defective
    matrix) or along no linear map (I + tE has eigenvalues 1 + t eig(E)).
    A nearly singular eigenvector matrix flags the near-defective case,
    whose computed eigenvalues are split by only ~sqrt(eps)."""
    Vv = unwrap_all(V)
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(Vv) if np.shape(Vv)[-1] else np.zeros(())
    if np.any(~np.isfinite(cond)) or np.any(cond > _EIG_MAX_COND):
        raise ValueError(
            "tapestry: the derivative of np.linalg.eig / eigvals does not exist here: "
            "the matrix has (nearly) repeated eigenvalues with a (nearly) singular "
            "eigenvector matrix, where individual eigenvalues are not differentiable. "
            "Differentiate a symmetric function of them instead (np.trace, "
            "np.linalg.det, np.poly of the characteristic polynomial via det), or use "
            "np.linalg.eigvalsh for a Hermitian matrix.")
    _gaps(w, "np.linalg.eig / eigvals", "eigenvalues")


#: Beyond this eigenvector condition number the eigenvalue derivative (its
#: condition is cond(V)) has no correct digit left in float64's ~1e-16.
_EIG_MAX_COND = 1e8


_eig = Primitive(lambda a: tuple(np.linalg.eig(a)), "linalg.eig", n_outputs=2,
                 batch=batch_stacked,
                 vjps=(_eig_vjp,))


@implements(np.linalg.eig)
def eig(a):
    """Eigenvalues and eigenvectors, differentiable where the eigenvalues
    are distinct; eigenvectors only through functions invariant to their
    phase (LAPACK normalizes them to unit norm, the phase is arbitrary)."""
    return _EigResult(*_eig(a))


implements(np.linalg.eigvals)(lambda a: _eig(a)[0])


# --- qr -----------------------------------------------------------------------------------
def _qr_vjp(g, ans, a):
    """Transpose of JAX's QR JVP (m >= n, reduced): with X = da R⁻¹,
    C = Qᴴ X, Ω = tril(C,-1) - tril(C,-1)ᴴ + i Im diag(C):
    dQ = Q(Ω - C) + X, dR = (C - Ω) R."""
    gQ, gR = g
    Q, R = ans
    G = 0.0
    if gQ is not None:
        G = _T(Q) @ gQ
    if gR is not None:
        G = G - gR @ _T(R)
    Cb = -G + np.tril(G - _H(G), -1)
    if np.iscomplexobj(Q):
        Cb = Cb + imag_part(G * np.eye(np.shape(R)[-1], dtype=bool)) * 1j
    Xb = np.conjugate(Q) @ Cb if np.iscomplexobj(Q) else Q @ Cb
    if gQ is not None:
        Xb = Xb + gQ
    try:
        return match_input(_T(np.linalg.solve(R, _T(Xb))), a)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(
            "tapestry: np.linalg.qr has no derivative at a matrix of deficient column rank "
            "(R has a zero on its diagonal, so the columns of Q past the rank are any "
            "basis and do not move smoothly); differentiate at a matrix of full column "
            "rank.") from None


_qr = Primitive(lambda a: tuple(np.linalg.qr(a)), "linalg.qr", n_outputs=2, vjps=(_qr_vjp,),
                batch=batch_stacked)


def _qr_complete_vjp(g, ans, a):
    """mode='complete' of a tall (m, n) matrix: Q's first n columns and R's
    first n rows are the reduced factors (the rest of R is zeros); Q's
    other columns are any basis of a complement.  A cotangent on them is
    refused as svd(full_matrices=True)'s is (it was refused at the call,
    used or not), and forward mode gets NaN tangents there (see
    :func:`_crop_full`)."""
    gQ, gR = g
    Q, R = ans
    n = np.shape(a)[-1]
    poison = None
    if gQ is not None:
        extra = gQ[..., :, n:]
        if transposing(extra):
            poison = np.sum(extra)
        elif _nonzero(extra):
            _refuse("np.linalg.qr(mode='complete')", "in the columns of Q beyond the "
                    "number of columns of a does not exist: they are any orthonormal basis "
                    "of a complement", "Use mode='reduced'.")
        gQ = gQ[..., :, :n]
    if gR is not None:
        gR = gR[..., :n, :]
    ga = _qr_vjp((gQ, gR), (Q[..., :, :n], R[..., :n, :]), a)
    return ga if poison is None else ga + np.nan * poison


_qr_complete = Primitive(lambda a: tuple(np.linalg.qr(a, mode="complete")), "linalg.qr_complete",
                         n_outputs=2, vjps=(_qr_complete_vjp,), batch=batch_stacked)


@implements(np.linalg.qr)
def qr(a, mode="reduced"):
    """QR with R's diagonal as LAPACK leaves it.  Modes 'reduced' and 'r';
    'complete' for square (and tall only when Q's extra columns are unused:
    refused otherwise); wide matrices (m < n) via the QR of the leading
    square block and R₂ = Qᴴ a₂ (equal to NumPy's to rounding)."""
    m, n = np.shape(a)[-2:]
    if mode == "raw":
        raise NotImplementedError("tapestry: np.linalg.qr(mode='raw') returns Householder "
                                  "reflectors, which have no rule; use mode='reduced'.")
    if mode == "complete" and m > n:
        return _QRResult(*_qr_complete(a))
    if m < n:
        Q, R1 = _qr(a[..., :, :m])
        R = np.concatenate([R1, _H(Q) @ a[..., :, m:]], axis=-1)
    else:
        Q, R = _qr(a)
    return R if mode == "r" else _QRResult(Q, R)


# --- pinv and lstsq --------------------------------------------------------------------------
def _pinv_vjp(g, ans, a, rcond, hermitian):
    """Golub & Pereyra: dA⁺ = -A⁺ dA A⁺ + A⁺A⁺ᴴ dAᴴ (I - AA⁺)
    + (I - A⁺A) dAᴴ A⁺ᴴ A⁺ (constant rank), transposed.  That is the
    derivative of the pseudo-inverse of a matrix whose dropped singular
    values are 0; where ``rcond`` drops values that are not (a truncated
    SVD), :func:`_truncated_pinv_vjp` gives the exact one."""
    if _drops_nonzero(a, rcond, hermitian):
        return _truncated_pinv_vjp(g, a, rcond, hermitian)
    a_in, P = a, ans
    if hermitian:
        # the matrix NumPy inverted: eigh read only the lower triangle of a
        a = _hermitian_from_lower(a)
    m, n = np.shape(a)[-2:]
    Im, In = np.eye(m, dtype=bool), np.eye(n, dtype=bool)  # keep float32
    ga = -(_T(P) @ g @ _T(P))
    W = _T(P @ _H(P)) @ g @ _T(Im - a @ P) + _T(In - P @ a) @ g @ _T(_H(P) @ P)
    ga = ga + _H(W)
    return match_input(_fold_triangle(ga) if hermitian else ga, a_in)


def _hermitian_from_lower(a):
    """The Hermitian matrix np.linalg.pinv(hermitian=True) reads: the lower
    triangle of ``a`` (eigh's UPLO='L') and its conjugate transpose."""
    low = np.tril(a)
    return low + _H(np.tril(a, -1))


def _singular_values(a, hermitian):
    av = all_items(a)
    return np.linalg.svd(_hermitian_from_lower(av) if hermitian else av, compute_uv=False)


def _drops_nonzero(a, rcond, hermitian):
    """Whether NumPy's cutoff ``rcond * max(s)`` drops a singular value of
    ``a`` that is not 0 to working precision (100 max(m, n) eps max(s)): a
    truncated SVD, whose pseudo-inverse moves with the dropped values'
    singular vectors too (Golub & Pereyra's formula holds only at 0)."""
    rc = np.asarray(all_items(rcond))
    eps = np.finfo(np.result_type(all_items(a), np.float32)).eps
    if np.all(rc <= 100 * max(np.shape(a)[-2:]) * eps):
        return False  # NumPy's default cutoffs: nothing above the 0 threshold is dropped
    s = _singular_values(a, hermitian)
    if not s.size:
        return False
    top = np.max(s, axis=-1, keepdims=True)
    cutoff = rc[..., None] * top
    tiny = 100 * max(np.shape(a)[-2:]) * eps * top
    return bool(np.any((s <= cutoff) & (s > tiny)))


#: The singular factors the truncated pseudo-inverse's rule reads.  The rule
#: is exact to first order; its own derivative has no rule, so a second
#: derivative through it is refused by this name rather than taken as if the
#: factors were constants.
_pinv_factors = Primitive(
    lambda a: tuple(np.linalg.svd(a)),
    "the second derivative of np.linalg.pinv / np.linalg.lstsq with an rcond that drops "
    "nonzero singular values (a truncated SVD; first derivatives only)",
    n_outputs=3, batch=batch_stacked)


def _truncated_pinv_vjp(g, a, rcond, hermitian):
    """The VJP of A_k⁺ = V_K S_K⁻¹ U_Kᴴ, K the singular values above the
    cutoff, D the others (σ_d, 0 past min(m, n)).  In the singular bases
    (E = Uᴴ dA V) the kept subspaces turn by X_dk = (s_k E_dk + σ_d conj(E_kd))
    / (s_k² - σ_d²) on the left and Y_dk = (s_k conj(E_kd) + σ_d E_dk) /
    (s_k² - σ_d²) on the right, and dA_k⁺ = [-S_K⁻¹ E_KK S_K⁻¹, S_K⁻¹ Xᴴ;
    Y S_K⁻¹, 0]: Golub & Pereyra's formula is its σ_d = 0 case.  The
    kept and dropped values are apart by the cutoff, so no gap is 0."""
    full = _hermitian_from_lower(a) if hermitian else a
    U, s, Vh = _pinv_factors(full)
    m, n = np.shape(a)[-2:]
    p = min(m, n)
    # (s is per item under vmap: the masks are computed from it, not from
    # all_items, so each item keeps its own values)
    kept = s > np.asarray(rcond)[..., None] * np.max(s, axis=-1, keepdims=True)

    def padded(x, k, axis):  # x past min(m, n): 0 (a dropped value), as a column or a row
        x = np.concatenate([x, np.zeros(np.shape(x)[:-1] + (k - p,), dtype=x.dtype)], axis=-1)
        return np.expand_dims(x, axis)
    km, sm = padded(kept, m, -1), padded(s, m, -1)
    kn, sn = padded(kept, n, -2), padded(s, n, -2)
    V = _H(Vh)
    complex_ = np.iscomplexobj(U) or np.iscomplexobj(g)
    Gt = _T(V) @ g @ (np.conjugate(U) if complex_ else U)          # n x m
    GtT = _T(Gt)                                                   # m x n
    Gsq = np.zeros(np.shape(GtT), dtype=np.result_type(Gt)) if m != n else Gt
    if m != n:
        Gsq = np.concatenate([np.concatenate([Gt[..., :p, :p], Gsq[..., :p, p:]], axis=-1),
                              Gsq[..., p:, :]], axis=-2)
    cGtT = np.conjugate(GtT) if complex_ else GtT
    one = np.ones_like(sm * sn)
    kk, kd, dk = km & kn, km & ~kn, ~km & kn
    e_kk = -Gsq / np.where(kk, sm * sn, one)
    e_kd = (cGtT + Gsq * sn / np.where(kd, sm, one)) / np.where(kd, sm * sm - sn * sn, one)
    e_dk = (cGtT + Gsq * sm / np.where(dk, sn, one)) / np.where(dk, sn * sn - sm * sm, one)
    Eb = np.where(kk, e_kk, 0) + np.where(kd, e_kd, 0) + np.where(dk, e_dk, 0)
    ga = (np.conjugate(U) if complex_ else U) @ Eb @ _T(V)
    return match_input(_fold_triangle(ga) if hermitian else ga, a)


_pinv = Primitive(lambda a, rcond, hermitian: np.linalg.pinv(a, rcond, hermitian),
                  "linalg.pinv", vjps=(_pinv_vjp,), batch=batch_stacked)


@implements(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=None):
    """The pseudo-inverse: differentiable while the rank is constant."""
    if rcond is None:
        rcond = 1e-15 if rtol is None else rtol
    elif rtol is not None:
        raise ValueError("tapestry: np.linalg.pinv takes rcond or rtol, not both.")
    if np.ndim(rcond) == 0:
        rcond = float(rcond)
    return _pinv(a, unwrap_all(rcond), bool(hermitian))


@implements(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """x = pinv(a) b with NumPy's cutoff; residuals and singular values are
    differentiable too, the rank is an integer."""
    av, bv = unwrap_all(a), unwrap_all(b)
    m, n = np.shape(av)
    if rcond is None:
        rcond = np.finfo(np.result_type(av, np.float32)).eps * max(m, n)
    _, res_v, rank, _ = np.linalg.lstsq(av, bv, rcond=rcond)
    x = pinv(a, rcond) @ b
    if np.size(res_v):
        r = b - a @ x
        sq = r * np.conjugate(r) if np.iscomplexobj(r) else r * r
        res = np.sum(real_part(sq) if np.iscomplexobj(sq) else sq, axis=0)
        res = np.reshape(res, np.shape(res_v))
    else:
        res = res_v
    return x, res, rank, svdvals(a)
