"""Linear algebra: matmul, dot and friends, and numpy.linalg.

Complex values follow docs/complex.md (a cotangent pairs with a tangent by
``Re(c * t)``): holomorphic maps (products, solve, inv, det) use plain
transposes, never conjugate transposes; the Hermitian ones (cholesky, eigh,
the norms, ``log|det|``) have rules derived from that pairing.  Functions
of a Hermitian matrix read one triangle of it, as LAPACK does, and their
cotangents are folded onto that triangle (:func:`_fold_triangle`).  The
factorizations (svd, eig, qr, pinv, lstsq) live in :mod:`.linalg_decomp`.
"""
from __future__ import annotations

import numpy as np

from ..core import batching
from ..core.primitive import KEEP_OTHER, Primitive, implements, unbroadcast
from ..core.var import reject_out, unwrap_all
from .complex import imag_part, match_input, modulus, real_cotangent, real_part
from .elementwise import _over_nonzero
from .linalg_common import _H, _T, _fold_triangle, _gaps, batch_stacked
from .shape import diagonal
from .common import axis_index, axis_tuple, is_one_axis


def _blas_ready(g):
    """``g`` laid out so that matmul can hand it to BLAS: a broadcast
    cotangent (a ``sum``'s ones, zero strides) made contiguous -- NumPy's
    own loop on it took 0.87 ms where BLAS took 0.17 ms (W4)."""
    if type(g) is np.ndarray and g.ndim >= 2 and 0 in g.strides and g.size > 1:
        return np.ascontiguousarray(g)
    return g


def _times(x, g):
    """``x * g`` for an outer product's cotangent; when ``g`` is a broadcast
    1 (a ``sum``'s cotangent) the product is ``x`` broadcast to the result's
    shape, a view: ``x * 1`` is ``x`` bit for bit, and W4's (64, 64, 256)
    pass over memory is saved.  Under ``vmap`` the ones are per item (each
    model's ``sum`` gets its own 1): broadcast along the item's axes only."""
    if _broadcast_ones(g) and np.result_type(x, g) == np.result_type(x):
        return np.broadcast_to(x, np.broadcast_shapes(np.shape(x), g.shape))
    return x * g


def _broadcast_ones(g):
    """Whether ``g`` is a plain array of ones laid out as a broadcast (zero
    strides): its distinct elements, one per position along the axes with
    a stride, are few (at most a quarter of ``g``), so checking them all
    costs little next to the multiply it saves."""
    if type(g) is not np.ndarray or not g.size or 0 not in g.strides:
        return False
    if not any(g.strides):
        return g.flat[0] == 1
    distinct = g[tuple(slice(None) if s else slice(0, 1) for s in g.strides)]
    return 4 * distinct.size <= g.size and bool(np.all(distinct == 1))


def _matmul_vjp_a(g, ans, a, b):
    """a_bar = g @ b^T.  Outer products (1-D b) are broadcast multiplies,
    which beat a GEMM with an inner dimension of 1 (W[S] @ x: 22 vs 48 us)."""
    if type(b) in (list, tuple):  # x @ [1.0, 2.0]: NumPy took the list as an array
        b = np.asarray(b)
    if b.ndim == 1:
        if a.ndim == 1:
            return g * b
        return unbroadcast(np.expand_dims(g, -1) * b, a.shape)
    bt = b.swapaxes(-1, -2)  # the method: no NumPy-level Python wrapper
    if a.ndim == 1:
        return unbroadcast(np.squeeze(np.expand_dims(g, -2) @ bt, -2), a.shape)
    if b.shape[-1] == 1:  # inner dimension 1: an outer product
        return unbroadcast(_times(g, bt), a.shape)
    return unbroadcast(_blas_ready(g) @ bt, a.shape)


def _matmul_vjp_b(g, ans, a, b):
    """b_bar = a^T @ g (an outer product, by broadcasting, when a is 1-D or
    has one row: 21 vs 51 us for W4's (64, 1) @ (1, 256))."""
    if type(a) in (list, tuple):
        a = np.asarray(a)
    if a.ndim == 1:
        if b.ndim == 1:
            return g * a
        return unbroadcast(np.expand_dims(a, -1) * np.expand_dims(g, -2), b.shape)
    at = a.swapaxes(-1, -2)
    if b.ndim == 1:
        return unbroadcast(np.squeeze(at @ np.expand_dims(g, -1), -1), b.shape)
    if a.shape[-2] == 1:  # inner dimension 1 (W2 @ h with one output row in W4)
        return unbroadcast(_times(at, g), b.shape)
    return unbroadcast(at @ _blas_ready(g), b.shape)


def _matmul_vjp_a_real(g, ans, a, b):
    """A real operand of a complex product gets the real part (docs/complex.md)."""
    ct = _matmul_vjp_a(g, ans, a, b)
    return real_part(ct) if ct.dtype.kind == "c" and a.dtype.kind != "c" else ct


def _matmul_vjp_b_real(g, ans, a, b):
    ct = _matmul_vjp_b(g, ans, a, b)
    return real_part(ct) if ct.dtype.kind == "c" and b.dtype.kind != "c" else ct


def _batch_matmul(prim, args, batched, kwargs):
    """``a @ b`` with a leading batch axis on either or both: a 1-D item is
    made a row (of ``a``) or a column (of ``b``) first, the items' stack axes
    are padded to the same number after the batch axis, one matmul, and the
    axis the vector became is dropped."""
    if kwargs:
        return NotImplemented
    a, b = args
    na, nb = batching.item_ndim(a, batched[0]), batching.item_ndim(b, batched[1])
    if na == 0 or nb == 0:
        return NotImplemented  # NumPy's error, from the loop
    if batched[0] and not batched[1] and na == 2 and nb == 2:
        # (B, m, k) @ (k, n): the items' rows stacked into one GEMM, not B
        # small ones (W4's 64 models: one (4096, 32) @ (32, 256) product)
        n_b, m, k = np.shape(a)
        return np.reshape(prim(np.reshape(a, (n_b * m, k)), b), (n_b, m, np.shape(b)[-1]))
    if na == 1:
        a = np.expand_dims(a, -2)
    if nb == 1:
        b = np.expand_dims(b, -1)
    stack = max(max(na, 2), max(nb, 2)) - 2  # stack axes of the items' product
    if batched[0]:
        a = batching.expand_item(a, stack + 2)
    if batched[1]:
        b = batching.expand_item(b, stack + 2)
    out = prim(a, b)
    if nb == 1:
        out = np.squeeze(out, -1)
    if na == 1:
        out = np.squeeze(out, -1 if nb == 1 else -2)
    return out


implements(np.matmul)(Primitive(np.matmul, keep=KEEP_OTHER, linear_in=(0, 1),
                                batch=_batch_matmul,
                                vjps=(_matmul_vjp_a_real, _matmul_vjp_b_real)))


# --- tensordot and the products built on it (no einsum) -----------------------------
def _normalize_axes(axes, nda, ndb):
    if np.ndim(axes) == 0:
        n = int(axes)
        return tuple(range(nda - n, nda)), tuple(range(n))
    xa, xb = axes
    xa = (xa,) if np.ndim(xa) == 0 else tuple(xa)
    xb = (xb,) if np.ndim(xb) == 0 else tuple(xb)
    return tuple(axis_index(i, nda) for i in xa), tuple(axis_index(i, ndb) for i in xb)


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


def _batch_tensordot(prim, args, batched, kwargs):
    """One operand batched: its axes shift right, and the batch axis is moved
    back to the front when it sits among ``b``'s free axes."""
    a, b, (sa, sb) = args
    if batched[0] and batched[1]:
        return _batched_contraction(a, b, sa, sb)
    if batched[0]:
        return prim(a, b, (tuple(i + 1 for i in sa), sb))
    out = prim(a, b, (sa, tuple(i + 1 for i in sb)))
    return np.moveaxis(out, batching.item_ndim(a, False) - len(sa), 0)


def _batched_contraction(a, b, sa, sb):
    """Both operands batched: one einsum whose batch letter is shared by
    both and kept in front of the output (free axes of a, then of b)."""
    nda, ndb = np.ndim(a) - 1, np.ndim(b) - 1
    letters = "abcdefghijklmnopqrstuvwxy"
    if nda + ndb > len(letters):
        return NotImplemented
    la, lb = letters[:nda], list(letters[nda:nda + ndb])
    for i, j in zip(sa, sb):
        lb[j] = la[i]
    out = "".join(la[i] for i in range(nda) if i not in sa) + \
        "".join(lb[j] for j in range(ndb) if j not in sb)
    return np.einsum(f"z{la},z{''.join(lb)}->z{out}", a, b)


_tensordot = Primitive(lambda a, b, axes: np.tensordot(a, b, axes), "tensordot",
                       keep=KEEP_OTHER, linear_in=(0, 1), batch=_batch_tensordot,
                       vjps=(_tensordot_vjp_a, _tensordot_vjp_b))


@implements(np.tensordot, np.linalg.tensordot)
def tensordot(a, b, axes=2):
    return _tensordot(a, b, _normalize_axes(axes, np.ndim(a), np.ndim(b)))


@implements(np.dot)
def dot(a, b, out=None):
    reject_out("dot", out)
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return a * b
    if na <= 2 and nb <= 2:
        # np.dot is np.matmul on vectors and matrices: its primitive is the
        # fast one (a loop of np.dot(row, x) took 2x as long via tensordot)
        return np.matmul(a, b)
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
    reject_out("outer", out)
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


def _vecdot(x1, x2, axis=-1):
    if np.iscomplexobj(x1):
        x1 = np.conjugate(x1)
    s = np.sum(x1 * x2, axis=axis)
    dt = np.result_type(unwrap_all(x1), unwrap_all(x2))
    # integer or bool operands (a vmapped item, nothing differentiated): NumPy
    # keeps their type (uint8 wraps, bools or their ands); np.sum widened it
    return s.astype(dt) if dt.kind in "biu" else s


implements(np.vecdot)(_vecdot)
implements(np.linalg.vecdot)(lambda x1, x2, /, *, axis=-1: _vecdot(x1, x2, axis))
# (keywords: core.var.ufunc_call_keywords applies dtype= and refuses axes= /
# keepdims=, which these forms would silently drop)
implements(np.matvec)(lambda x1, x2: np.squeeze(x1 @ np.expand_dims(x2, -1), -1))
implements(np.vecmat)(lambda x1, x2: np.squeeze(
    np.expand_dims(np.conjugate(x1), -2) @ x2, -2))
implements(np.linalg.matmul)(lambda x1, x2, /: x1 @ x2)


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    """The chain of dots in NumPy's order: the one with the fewest scalar
    multiplications (so values match np.linalg.multi_dot's to rounding)."""
    reject_out("linalg.multi_dot", out)
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("tapestry: np.linalg.multi_dot needs at least two arrays.")
    first, last = np.ndim(arrays[0]) == 1, np.ndim(arrays[-1]) == 1
    if first:
        arrays[0] = np.reshape(arrays[0], (1, -1))
    if last:
        arrays[-1] = np.reshape(arrays[-1], (-1, 1))
    order = _chain_order([np.shape(a)[0] for a in arrays] + [np.shape(arrays[-1])[1]])
    result = _chain(arrays, order, 0, len(arrays) - 1)
    if first:
        result = result[0]
    if last:
        result = result[..., 0]
    return result


def _chain_order(dims):
    """Matrix-chain dynamic programme: split[i][j] = best split of i..j."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(arrays, split, i, j):
    if i == j:
        return arrays[i]
    k = split[i][j]
    return dot(_chain(arrays, split, i, k), _chain(arrays, split, k + 1, j))


# --- numpy.linalg ---------------------------------------------------------------
def _solve_vjp_a(g, ans, a, b):
    """x = a⁻¹ b:  ā = -aᵀ⁻¹ ḡ xᵀ."""
    gb = _solve_vjp_b(g, ans, a, b, unbroadcast_to=False)
    if np.ndim(b) == 1:
        ga = -np.expand_dims(gb, -1) * np.expand_dims(ans, -2)
    else:
        ga = -(gb @ _T(ans))
    return match_input(unbroadcast(ga, np.shape(a)), a)


def _solve_vjp_b(g, ans, a, b, unbroadcast_to=True):
    """x = a⁻¹ b:  b̄ = aᵀ⁻¹ ḡ (b 1-D is one vector for every matrix of a stack)."""
    if np.ndim(b) == 1 and np.ndim(a) > 2:
        gb = np.linalg.solve(_T(a), np.expand_dims(g, -1))[..., 0]
    else:
        gb = np.linalg.solve(_T(a), g)
    return match_input(unbroadcast(gb, np.shape(b)), b) if unbroadcast_to else gb


def _batch_solve(prim, args, batched, kwargs):
    """solve(a, b) on matrices ``a`` and vectors or matrices ``b`` of one
    item: NumPy reads a 1-d ``b`` as a vector, so a batch of vectors gets a
    trailing axis for the call."""
    a, b = args
    n = batching.batch_size(args, batched)
    a_nd, b_nd = batching.item_ndim(a, batched[0]), batching.item_ndim(b, batched[1])
    if a_nd != 2 or b_nd not in (1, 2):
        return NotImplemented
    if not batched[0]:
        a = np.broadcast_to(a, (n,) + tuple(batching.shape_of(a)))
    if not batched[1]:
        b = np.broadcast_to(b, (n,) + tuple(batching.shape_of(b)))
    if b_nd == 1:
        return prim(a, b[..., None])[..., 0]
    return prim(a, b)


_solve = Primitive(np.linalg.solve, "linalg.solve", vjps=(_solve_vjp_a, _solve_vjp_b),
                   batch=_batch_solve)
implements(np.linalg.solve)(_solve)

# d(a⁻¹) = -a⁻¹ da a⁻¹  =>  ā = -a⁻ᵀ ḡ a⁻ᵀ
_inv = Primitive(np.linalg.inv, "linalg.inv", batch=batch_stacked,
                 vjps=(lambda g, ans, a: match_input(-(_T(ans) @ g @ _T(ans)), a),))
implements(np.linalg.inv)(_inv)

def _svd_cofactor_parts(a):
    """``(phase, conj(U), s, conj(Vᴴ))`` of ``a = U diag(s) Vᴴ``, where
    ``phase = det(U) det(Vᴴ)``: in this basis det(a) = phase ∏ s and
    a⁻ᵀ = conj(U) diag(1/s) conj(Vᴴ), so cofactors become products of
    singular values, which need no inverse."""
    u, s, vh = np.linalg.svd(a)
    return np.linalg.det(u) * np.linalg.det(vh), np.conjugate(u), s, np.conjugate(vh)


def _leave_two_out(s):
    """``p[..., a, b] = ∏_{k ∉ {a, b}} s_k`` for ``a != b`` (0 on the
    diagonal), from prefix, suffix and running products: no division, so
    exact with any number of zero singular values."""
    n = s.shape[-1]
    ones = np.ones(s.shape[:-1] + (1,), s.dtype)
    prefix = np.concatenate([ones, np.cumprod(s[..., :-1], axis=-1)], axis=-1)  # ∏_{k<a}
    suffix = np.flip(np.concatenate(
        [ones, np.cumprod(np.flip(s[..., 1:], -1), axis=-1)], axis=-1), -1)  # ∏_{k>b}
    later = np.arange(n) > np.arange(n)[:, None]  # k > a
    run = np.cumprod(np.where(later, np.expand_dims(s, -2), 1), axis=-1)  # ∏_{a<k<=b}
    inner = np.concatenate([np.ones(s.shape[:-1] + (n, 1), s.dtype), run[..., :-1]], axis=-1)
    upper = np.expand_dims(prefix, -1) * inner * np.expand_dims(suffix, -2)  # valid for a < b
    upper = np.where(later, upper, 0)
    return upper + np.swapaxes(upper, -1, -2)


def _cofactor_fwd(a):
    """cof(a) = det(a) a⁻ᵀ, the derivative of det, which exists at singular
    matrices too: phase conj(U) diag(∏_{j≠i} s_j) conj(Vᴴ), no inverse."""
    if a.shape[-1] == 0:
        return np.zeros_like(a)
    phase, u, s, vh = _svd_cofactor_parts(a)
    n = s.shape[-1]
    others = np.prod(np.where(np.eye(n, dtype=bool), 1, np.expand_dims(s, -2)), axis=-1)
    return np.expand_dims(phase, (-1, -2)) * (u * np.expand_dims(others, -2) @ vh)


def _cofactor_vjp(g, ans, a):
    """The second derivative of det, exact at singular matrices.

    d cof = det [tr(a⁻¹ da) a⁻ᵀ - a⁻ᵀ daᵀ a⁻ᵀ], so ā = det [<ḡ, a⁻ᵀ> a⁻ᵀ -
    a⁻ᵀ ḡᵀ a⁻ᵀ].  With a⁻ᵀ = Ũ S⁻¹ Ṽ (Ũ = conj U, Ṽ = conj Vᴴ) and
    K = Ṽ ḡᵀ Ũ this is phase Ũ M Ṽ with M_ab = -K_ab ∏_{k∉{a,b}} s_k
    (a != b) and M_aa = Σ_{i≠a} K_ii ∏_{k∉{i,a}} s_k: second-order cofactors,
    no inverse.  A traced ``a`` (third derivatives) takes the formula through
    inv, which holds where ``a`` is invertible."""
    if type(a) is not np.ndarray:
        return _cofactor_vjp_traced(g, a)
    if a.shape[-1] == 0:
        return np.zeros_like(a)
    phase, u, s, vh = _svd_cofactor_parts(a)
    p = _leave_two_out(s)
    k = vh @ _T(g) @ u
    kd = np.diagonal(k, axis1=-2, axis2=-1)
    m = -k * p + np.eye(s.shape[-1], dtype=s.dtype) * np.expand_dims(np.sum(p * np.expand_dims(kd, -2), -1), -1)
    return match_input(unbroadcast(np.expand_dims(phase, (-1, -2)) * (u @ m @ vh), np.shape(a)), a)


def _cofactor_vjp_traced(g, a):
    try:
        inv_t = _T(np.linalg.inv(a))
    except np.linalg.LinAlgError as e:
        raise np.linalg.LinAlgError(
            "tapestry: third and higher derivatives of np.linalg.det are computed "
            "through inv, which fails at this singular matrix (first and second "
            "derivatives are exact there). Perturb the matrix, or write det as a "
            "polynomial in the entries for small matrices.") from e
    pair = np.sum(g * inv_t, axis=(-2, -1), keepdims=True)
    det = np.expand_dims(np.linalg.det(a), (-1, -2))
    return det * (pair * inv_t - inv_t @ _T(g) @ inv_t)


_cofactor = Primitive(_cofactor_fwd, "linalg.det's cofactor matrix", vjps=(_cofactor_vjp,),
                      batch=batch_stacked)

# d det(a) = tr(adj(a) da)  =>  ā = ḡ cof(a)  (= ḡ det(a) a⁻ᵀ where a is invertible);
# cof is a primitive with its own exact rule: det's Hessian at singular a too
_det = Primitive(np.linalg.det, "linalg.det", batch=batch_stacked,
                 vjps=(lambda g, ans, a: match_input(
                     np.expand_dims(g, (-1, -2)) * _cofactor(a), a),))
implements(np.linalg.det)(_det)


def _slogdet_vjp(g, ans, a):
    """d log|det a| = Re tr(a⁻¹ da), so ā = Re(ḡ) a⁻ᵀ.  The sign s = det/|det|
    is piecewise constant for real a; for complex a, ds = i s Im tr(a⁻¹ da),
    so ā += i Im(ḡ_s s) a⁻ᵀ."""
    g_sign, g_logdet = g
    coef = 0.0 if g_logdet is None else real_cotangent(g_logdet)
    if g_sign is not None and np.iscomplexobj(a):
        coef = coef + imag_part(g_sign * ans[0]) * 1j
    if g_logdet is None and (g_sign is None or not np.iscomplexobj(a)):
        return None
    try:
        inv = np.linalg.inv(a)
    except np.linalg.LinAlgError as e:
        raise np.linalg.LinAlgError(
            "tapestry: np.linalg.slogdet has no derivative at a singular matrix "
            "(log|det| = -inf there). Differentiate np.linalg.det instead, whose "
            "derivatives exist at singular matrices.") from e
    return np.expand_dims(coef, (-1, -2)) * _T(inv)


_slogdet = Primitive(lambda a: tuple(np.linalg.slogdet(a)), "linalg.slogdet", n_outputs=2,
                     batch=batch_stacked,
                     vjps=(_slogdet_vjp,))


@implements(np.linalg.slogdet)
def slogdet(a):
    return _SlogdetResult(*_slogdet(a))


_SlogdetResult = type(np.linalg.slogdet(np.eye(1)))
_EighResult = type(np.linalg.eigh(np.eye(1)))


def _cholesky_vjp(g, ans, a):
    """Murray (2016), complex form: with Φ(X) = tril(X), diagonal halved,
    dL = L Φ(L⁻¹ dΣ L⁻ᴴ), so Σ̄ = L⁻ᵀ Φ(Lᵀ L̄) conj(L)⁻¹; then folded onto
    the lower triangle, which is all of ``a`` that cholesky reads."""
    n = np.shape(a)[-1]
    rdt = np.finfo(np.result_type(ans)).dtype  # float32 stays float32
    phi = np.tril(np.ones((n, n), rdt)) - rdt.type(0.5) * np.eye(n, dtype=rdt)
    P = (_T(ans) @ g) * phi
    S = _left_solve_lt(ans, _T(_left_solve_lt(ans, P, "T")), "C")  # L⁻ᵀ P conj(L)⁻¹, transposed
    return match_input(_fold_triangle(_T(S)), a)


def _left_solve_lt(L, b, trans):
    """``op(L)⁻¹ b`` for lower-triangular ``L``, ``op`` the transpose ("T")
    or the conjugate transpose ("C"): two LAPACK triangular solves (trsm,
    n³ flops) with SciPy, where a general solve costs an LU on top (about
    2.7x the flops); without SciPy, or for stacks of matrices, the general
    solve."""
    if np.ndim(L) == 2 and type(L) is np.ndarray and type(b) is np.ndarray:
        try:
            from scipy.linalg import solve_triangular
        except ImportError:
            pass
        else:
            return solve_triangular(L, b, lower=True, trans=trans, check_finite=False)
    return np.linalg.solve(_H(L) if trans == "C" else _T(L), b)


_cholesky = Primitive(np.linalg.cholesky, "linalg.cholesky", vjps=(_cholesky_vjp,),
                      batch=batch_stacked)


@implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    """``upper=True`` reads the upper triangle: it is the transpose problem."""
    if upper:
        return _T(_cholesky(_T(a)))
    return _cholesky(a)


def _eigh_vjp(g, ans, a, UPLO):
    """a = V diag(w) Vᴴ:  Σ̄ = conj(V) (diag(Re w̄) + F ∘ Vᵀ V̄) Vᵀ with
    F_ij = 1/(w_j - w_i) off the diagonal, 0 on it, folded onto the triangle
    that eigh reads.  Eigenvectors are defined up to sign (a phase, when
    complex): only functions invariant to it have a gradient, which this is.
    Coinciding eigenvalues make the eigenvectors' derivative undefined:
    refused (see :func:`_gaps`)."""
    w, V = ans
    gw, gV = g
    n = np.shape(a)[-1]
    inner = 0.0
    if gw is not None:
        inner = np.expand_dims(real_cotangent(gw), -1) * np.eye(n, dtype=bool)
    if gV is not None:
        inner = inner + _gaps(w, "np.linalg.eigh", "eigenvalues", gV) * (_T(V) @ gV)
    S = np.conjugate(V) @ inner @ _T(V) if np.iscomplexobj(V) else V @ inner @ _T(V)
    return match_input(_fold_triangle(S, lower=UPLO != "U"), a)


_eigh = Primitive(lambda a, UPLO: tuple(np.linalg.eigh(a, UPLO)), "linalg.eigh", n_outputs=2,
                  batch=batch_stacked,
                  vjps=(_eigh_vjp,))


@implements(np.linalg.eigh)
def eigh(a, UPLO="L"):
    w, V = _eigh(a, UPLO.upper())
    return _EighResult(w, V)


def _eigvalsh_vjp(g, ans, a, UPLO):
    """Σ̄ = conj(V) diag(Re w̄) Vᵀ folded onto the triangle eigvalsh reads,
    with V from a differentiable eigh of ``a`` (second derivatives go
    through eigh's rule).  No eigenvalue gaps: eigvalsh as ``eigh(a)[0]``
    gave forward mode (jvp, jacfwd), which transposes the whole eigh rule,
    a refusal where eigenvalues coincide (an identity-like matrix) although
    only the values are read, as reverse mode already knew."""
    V = eigh(a, UPLO)[1]
    inner = np.expand_dims(real_cotangent(g), -1) * np.eye(np.shape(a)[-1], dtype=bool)
    S = np.conjugate(V) @ inner @ _T(V) if np.iscomplexobj(V) else V @ inner @ _T(V)
    return match_input(_fold_triangle(S, lower=UPLO != "U"), a)


_eigvalsh = Primitive(lambda a, UPLO: np.linalg.eigvalsh(a, UPLO), "linalg.eigvalsh",
                      batch=batch_stacked, vjps=(_eigvalsh_vjp,))


@implements(np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    return _eigvalsh(a, UPLO.upper())


# --- norms -------------------------------------------------------------------------
def _l2_fwd(x, axis, keepdims):
    sq = x * x if not np.iscomplexobj(x) else real_part(x * np.conjugate(x))
    return np.sqrt(np.sum(sq, axis=axis, keepdims=keepdims))


def _l2_vjp(g, ans, x, axis, keepdims):
    """d ||x|| = Re(conj(x) dx) / ||x||, and 0 at x = 0 (the subgradient of
    least norm)."""
    from .reductions import _kept_shape, expand_reduced
    n = np.reshape(ans, _kept_shape(np.shape(x), axis))
    xc = np.conjugate(x) if np.iscomplexobj(x) else x
    return expand_reduced(real_cotangent(g), np.shape(x), axis, keepdims) * _over_nonzero(xc, n)


def _batch_norm(prim, args, batched, kwargs):
    """2-norm ``(x, axis, keepdims)`` or p-norm ``(x, p, axis, keepdims)``
    over axes of a batched ``x``: the axes shift one right."""
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    x, *rest = args
    k = len(rest) - 2  # the position of axis among the rest
    nd = batching.item_ndim(x, True)
    rest[k] = batching.shift_axes(rest[k], nd)
    return prim(x, *rest)


_l2 = Primitive(_l2_fwd, "linalg.norm", vjps=(_l2_vjp,), batch=_batch_norm)


def _abs(x):
    """|x|, with the complex modulus rule for complex x (docs/complex.md)."""
    return modulus(x) if np.iscomplexobj(x) else np.abs(x)


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms (ord None/2, 1, inf, -inf, 0, p) and matrix norms
    ('fro', 1, -1, inf, -inf, 2, -2, 'nuc'), like np.linalg.norm.  The
    2-, -2- and nuclear norms go through the singular values (svdvals)."""
    nd = np.ndim(x)
    if axis is None:
        if ord is None or (ord == "fro" and nd == 2) or (ord == 2 and nd == 1):
            return _l2(x, None, keepdims)
        axis = tuple(range(nd))
    axis = (axis_index(axis, nd),) if is_one_axis(axis) else axis_tuple(tuple(axis), nd)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis[0], keepdims)
    if len(axis) == 2:
        return _matrix_norm(x, ord, axis, keepdims)
    raise ValueError("tapestry: np.linalg.norm takes at most two axes.")


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return _l2(x, axis, keepdims)
    ax = _abs(x)
    if ord == np.inf:
        return np.max(ax, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return np.min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        return np.sum(unwrap_all(x) != 0, axis=axis, keepdims=keepdims).astype(
            np.result_type(ax))
    if ord == 1:
        return np.sum(ax, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"tapestry: invalid norm order {ord!r} for vectors.")
    if ord < 0:
        return np.sum(ax ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    if ord >= 1 and not np.iscomplexobj(x):
        return _pnorm(x, float(ord), axis, keepdims)
    # gradient 0 at x = 0, as the other norms (sum(|x|^p)^(1/p) alone gives 0 * inf)
    zero = np.all(unwrap_all(x) == 0, axis=axis, keepdims=True)
    ax = np.where(zero, 1.0, ax)
    out = np.where(zero, _l2(x, axis, True),  # 0 there, without a second derivative
                   np.sum(ax ** ord, axis=axis, keepdims=True) ** (1.0 / ord))
    return out if keepdims else np.squeeze(out, axis)


def _pnorm_vjp(g, ans, x, p, axis, keepdims):
    """d ||x||_p = sign(x) (|x| / ||x||_p)^(p-1) dx: 0 at x = 0, as the other
    norms, with |x| / ||x||_p the ratio whose own derivative is NaN there (the
    p-norm has no second derivative at 0)."""
    from .reductions import _kept_shape, expand_reduced
    n = np.reshape(ans, _kept_shape(np.shape(x), axis))
    return expand_reduced(g, np.shape(x), axis, keepdims) * np.sign(x) * \
        _over_nonzero(np.abs(x), n) ** (p - 1)


_pnorm = Primitive(lambda x, p, axis, keepdims: np.sum(np.abs(x) ** p, axis=axis,
                                                       keepdims=keepdims) ** (1.0 / p),
                   "linalg.norm (p-norm)", vjps=(_pnorm_vjp,), batch=_batch_norm)


def _matrix_norm(x, ord, axis, keepdims):
    r, c = axis
    if ord is None or ord == "fro":
        out = _l2(x, axis, True)
    elif ord in (1, -1, np.inf, -np.inf):
        sum_ax, ext_ax = (r, c) if abs(ord) == 1 else (c, r)
        col = np.sum(_abs(x), axis=sum_ax, keepdims=True)
        ext = np.max if ord > 0 else np.min
        out = ext(col, axis=ext_ax, keepdims=True)
    elif ord in (2, -2, "nuc"):
        from .linalg_decomp import svdvals
        m = np.moveaxis(x, (r, c), (-2, -1))
        # gradient 0 at the zero matrix, as the other norms (not one of its
        # subgradients u vᴴ that the SVD happens to pick)
        zero = np.all(unwrap_all(m) == 0, axis=(-2, -1))
        rows, cols = np.shape(m)[-2:]
        # distinct singular values, in m's precision (a float64 spread made a
        # float32 matrix's 2- and nuclear norms float64, unlike NumPy's)
        spread = (np.eye(rows, cols) * np.arange(1.0, cols + 1)).astype(
            np.result_type(unwrap_all(m).dtype, np.float32))
        sv = svdvals(np.where(np.expand_dims(zero, (-2, -1)), spread, m))
        val = np.sum(sv, -1) if ord == "nuc" else sv[..., 0 if ord == 2 else -1]
        # at the zero matrix, the Frobenius norm: value 0 and gradient 0 like the
        # constant 0, but no second derivative (NaN, as the 2-norm's), where the
        # constant's 0 would be a silent wrong Hessian of norm(A, 2) ** 2
        val = np.where(zero, _l2(m, (-2, -1), False), val)
        out = np.expand_dims(val, (r, c) if r < c else (c, r))
        out = np.reshape(out, tuple(1 if i in axis else n for i, n in enumerate(np.shape(x))))
    else:
        raise ValueError(f"tapestry: invalid norm order {ord!r} for matrices.")
    return out if keepdims else np.squeeze(out, axis)


@implements(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """np.linalg.vector_norm: the norm of ``x`` flattened over ``axis``."""
    nd = np.ndim(x)
    axes = tuple(range(nd)) if axis is None else (
        (axis,) if np.ndim(axis) == 0 else tuple(axis))
    return _vector_norm(x, ord, axis_tuple(axes, nd), keepdims)


implements(np.linalg.matrix_norm)(lambda x, /, *, keepdims=False, ord="fro": norm(
    x, ord, (-2, -1), keepdims))
implements(np.linalg.matrix_transpose)(lambda x, /: _T(x))
implements(np.linalg.diagonal)(lambda x, /, *, offset=0: np.diagonal(x, offset, -2, -1))
implements(np.linalg.trace)(lambda x, /, *, offset=0, dtype=None: np.trace(
    x, offset, -2, -1, dtype))


@implements(np.linalg.matrix_power)
def matrix_power(a, n):
    """a**n by repeated squaring (inv first for n < 0); a**0 is the identity,
    a constant."""
    if n == 0:
        shape, dt = np.shape(a), np.result_type(a)
        return np.broadcast_to(np.eye(shape[-1], dtype=dt), shape).copy()
    if n < 0:
        a, n = np.linalg.inv(a), -n
    result, power = None, a
    while n:
        if n & 1:
            result = power if result is None else result @ power
        n >>= 1
        if n:
            power = power @ power
    return result


@implements(np.linalg.cond)
def cond(x, p=None):
    """||x|| ||x⁻¹||: for p in (None, 2, -2) the ratio of extreme singular
    values; otherwise through norm and inv.  Differentiable where the
    extreme singular values are simple."""
    if p in (None, 2, -2):
        from .linalg_decomp import svdvals
        s = svdvals(x)
        return s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    return norm(x, p, (-2, -1)) * norm(np.linalg.inv(x), p, (-2, -1))


@implements(np.linalg.tensorinv)
def tensorinv(a, ind=2):
    """inv of ``a`` reshaped to a square matrix (as NumPy does)."""
    shape = np.shape(a)
    inv_shape = shape[ind:] + shape[:ind]
    return np.reshape(np.linalg.inv(np.reshape(a, (int(np.prod(shape[ind:])), -1))), inv_shape)


@implements(np.linalg.tensorsolve)
def tensorsolve(a, b, axes=None):
    """solve of ``a`` reshaped to a square matrix and ``b`` raveled."""
    an = np.ndim(a)
    if axes is not None:
        order = [k for k in range(an) if k not in [x % an for x in axes]]
        a = np.transpose(a, order + [x % an for x in axes])
    shape = np.shape(a)[-(an - np.ndim(b)):]
    k = int(np.prod(shape))
    return np.reshape(np.linalg.solve(np.reshape(a, (k, k)), np.ravel(b)), shape)


from . import linalg_decomp  # noqa: E402,F401  (svd, eig, qr, pinv, lstsq)


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    reject_out("trace", out)
    return np.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
