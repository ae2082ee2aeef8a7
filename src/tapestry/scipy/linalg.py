"""``import tapestry.scipy.linalg as tsl``: scipy.linalg with rules.

Why a namespace (docs/linalg.md): ``scipy.linalg.expm(x)`` converts ``x``
with ``np.asarray`` before anything else, and NumPy offers no protocol
through which that call could reach tapestry (NEP 18 covers NumPy's own
functions only).  A rule registered for ``scipy.linalg.expm`` would never
be looked up.  So these functions are called from here: on plain arrays
they are SciPy's own (same results, same speed); on traced arrays they
record a primitive.  Any other ``scipy.linalg`` name is re-exported, and
refuses traced arguments by name instead of failing inside SciPy.

Rules (pairing ``Re(c * t)``, docs/complex.md; real and complex):

- ``solve_triangular(a, b, trans, lower, unit_diagonal)``: ``x = op(T)⁻¹ b``
  with ``T`` the triangle of ``a`` that is read; ``b̄ = op(T)⁻ᵀ x̄`` and
  ``ā`` = the triangle of ``-b̄ xᵀ`` (mapped back through ``op``).
- ``cho_factor(a, lower)``: ``(c, lower)`` where ``c`` holds the Cholesky
  factor in one triangle and ``a``'s own entries in the other, exactly as
  SciPy leaves them (both differentiable); ``cho_solve((c, lower), b)`` is
  two triangular solves, so gradients reach ``a`` through ``c``.
- ``expm(a)``: ``ā = L_exp(aᵀ, ḡ)``, the Fréchet derivative, computed as the
  upper-right block of ``expm([[aᵀ, ḡ], [0, aᵀ]])`` -- itself an ``expm``,
  so the rule is differentiable to any order.
- ``solve_sylvester(a, b, q)`` (``a X + X b = q``): with ``Y`` solving
  ``aᵀ Y + Y bᵀ = X̄``: ``q̄ = Y``, ``ā = -Y Xᵀ``, ``b̄ = -Xᵀ Y``.
- ``sqrtm(a)``: ``X X = a``, so ``ā = solve_sylvester(Xᵀ, Xᵀ, X̄)``.
- ``solve_banded((l, u), ab, b)``: ``b̄`` is a banded solve with ``Aᵀ``'s
  storage, ``āb`` the band of ``-b̄ xᵀ``.

Each rule is written with these functions, so each is differentiable to
any order (``tapestry.autograd.scipy.linalg`` hands them out under
SciPy's names).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as _sla

from ..core.primitive import Primitive
from ..core.batched import NESTED
from ..core.staged import plain_call
from ..core.var import unwrap_all
from ..ops.complex import match_input
from ..ops.linalg_common import _H, _T

__all__ = ["solve_triangular", "cho_factor", "cho_solve", "expm", "solve_sylvester", "sqrtm",
           "solve_banded"]


def _traced(*xs):
    """Whether an enclosing differentiation or vmap transforms one of ``xs``.
    A staged value (inside ``jit``) is not: SciPy's own function runs on it
    as one recorded step (``plain_call``), the same bits as the plain call."""
    return any(x.__class__ in NESTED for x in xs)


_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


# --- solve_triangular ------------------------------------------------------------------
def _read_triangle(m, lower, unit_diagonal):
    """The part of a cotangent that lands on the entries solve_triangular reads."""
    k = -1 if unit_diagonal else 0
    return np.tril(m, k) if lower else np.triu(m, -k)


def _solve_transposed(g, a, trans, lower, unit):
    """op(T)⁻ᵀ g: op = T -> Tᵀ, Tᵀ -> T, Tᴴ -> conj(T)."""
    if trans != 2:
        return _solve_tri(a, g, 1 - trans, lower, unit)
    if not np.iscomplexobj(a):
        return _solve_tri(a, g, 0, lower, unit)
    return np.conjugate(_solve_tri(a, np.conjugate(g), 0, lower, unit))


def _tri_vjp_b(g, ans, a, b, trans, lower, unit):
    """x = op(T)⁻¹ b:  b̄ = op(T)⁻ᵀ x̄."""
    return match_input(_solve_transposed(g, a, trans, lower, unit), b)


def _tri_vjp_a(g, ans, a, b, trans, lower, unit):
    """d x = -op(T)⁻¹ d op(T) x, so op(T)̄ = -b̄ xᵀ, mapped back to T."""
    gb = _solve_transposed(g, a, trans, lower, unit)
    x = ans
    if np.ndim(x) == 1:
        m = -np.expand_dims(gb, -1) * np.expand_dims(x, -2)
    else:
        m = -(gb @ _T(x))
    m = {0: m, 1: _T(m), 2: _H(m)}[trans]
    return match_input(_read_triangle(m, lower, unit), a)


def _solve_tri_fwd(a, b, trans, lower, unit):
    if _traced(a, b):
        return _solve_tri(a, b, trans, lower, unit)
    return _sla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)


_solve_tri = Primitive(_solve_tri_fwd, "scipy.linalg.solve_triangular",
                       vjps=(_tri_vjp_a, _tri_vjp_b))


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False,
                     overwrite_b=False, check_finite=True):
    """scipy.linalg.solve_triangular, differentiable in ``a`` and ``b``."""
    if not _traced(a, b):
        return plain_call(_sla.solve_triangular, a, b, trans, lower, unit_diagonal,
                          overwrite_b, check_finite=check_finite)
    return _solve_tri(a, b, _TRANS[trans], bool(lower), bool(unit_diagonal))


# --- cho_factor / cho_solve --------------------------------------------------------------
def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): the factor in the ``lower`` (or upper) triangle of ``c``,
    and in the other what the installed SciPy puts there: ``a``'s own
    entries (LAPACK leaves them; SciPy before 1.18, and ``overwrite_a=True``)
    or zeros (SciPy 1.18 on, ``overwrite_a=False``)."""
    if not _traced(a):
        return plain_call(_sla.cho_factor, a, lower, overwrite_a, check_finite)
    keep = overwrite_a or _cho_factor_keeps_a()
    if lower:
        c = np.tril(np.linalg.cholesky(a))
        c = c + np.triu(a, 1) if keep else c
    else:
        c = np.triu(np.linalg.cholesky(a, upper=True))
        c = c + np.tril(a, -1) if keep else c
    return c, bool(lower)


_KEEPS_A = []


def _cho_factor_keeps_a():
    """Whether SciPy's ``cho_factor`` (``overwrite_a=False``) returns ``a``'s
    entries in the unused triangle (before 1.18) rather than zeros: asked
    of SciPy once, on a 2x2 matrix, so traced calls give the same values
    as plain ones whichever SciPy is installed."""
    if not _KEEPS_A:
        c, _ = _sla.cho_factor(np.array([[4.0, 2.0], [2.0, 3.0]]), lower=True)
        _KEEPS_A.append(bool(c[0, 1] == 2.0))
    return _KEEPS_A[0]


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve a x = b given cho_factor(a): L y = b, Lᴴ x = y (or Uᴴ y = b, U x = y)."""
    c, lower = c_and_lower
    if not _traced(c, b):
        return plain_call(_sla.cho_solve, (c, lower), b, overwrite_b, check_finite)
    if lower:
        return solve_triangular(c, solve_triangular(c, b, 0, True), 2, True)
    return solve_triangular(c, solve_triangular(c, b, 2, False), 0, False)


# --- expm -----------------------------------------------------------------------------------
def _expm_vjp(g, ans, a):
    """ā = L_exp(aᵀ, ḡ): the upper-right block of expm([[aᵀ, ḡ], [0, aᵀ]])."""
    n = np.shape(a)[-1]
    at = _T(a)
    zero = np.zeros(np.shape(at), np.result_type(at, g))
    top = np.concatenate([at, g], axis=-1)
    bottom = np.concatenate([zero, at], axis=-1)
    big = expm(np.concatenate([top, bottom], axis=-2))
    return match_input(big[..., :n, n:], a)


def _expm_fwd(a):
    return _expm(a) if _traced(a) else _sla.expm(a)


_expm = Primitive(_expm_fwd, "scipy.linalg.expm", vjps=(_expm_vjp,))


def expm(A):
    """scipy.linalg.expm, differentiable to any order (stacks (..., n, n) too)."""
    return _expm(A) if _traced(A) else plain_call(_sla.expm, A)


# --- solve_sylvester, sqrtm ------------------------------------------------------------------
def _sylvester_adjoint(g, a, b):
    """``Y`` with ``aᵀ Y + Y bᵀ = g``: for ``X = sylv(a, b, q)``,
    ``sum(g * X) = sum(Y * q)`` (the pairing is ``Re(c * t)``: plain
    transposes, no conjugation)."""
    return solve_sylvester(_T(a), _T(b), g)


def _sylvester_vjp(i, g, ans, args, kwargs):
    """``a X + X b = q``: ``q̄ = Y``, ``ā = -Y Xᵀ``, ``b̄ = -Xᵀ Y``."""
    a, b, q = args
    y = _sylvester_adjoint(g, a, b)
    ct = (-(y @ _T(ans)), -(_T(ans) @ y), y)[i]
    return match_input(ct, args[i])


def _sylvester_fwd(a, b, q):
    return _sylvester(a, b, q) if _traced(a, b, q) else _sla.solve_sylvester(a, b, q)


_sylvester = Primitive(_sylvester_fwd, "scipy.linalg.solve_sylvester",
                       vjp_argnum=_sylvester_vjp)


def solve_sylvester(a, b, q):
    """scipy.linalg.solve_sylvester (``a X + X b = q``), differentiable in
    ``a``, ``b`` and ``q`` to any order (the rule solves the transposed
    equation with this function).  Real operands beside a complex one are
    made complex first: SciPy 1.17 returns a wrong ``X`` for such a mix
    (residuals of order 1), which the rule's transposed equation meets
    whenever a real equation has a complex cotangent."""
    a, b, q = _common_complex(a, b, q)
    if not _traced(a, b, q):
        return plain_call(_sla.solve_sylvester, a, b, q)
    return _sylvester(a, b, q)


def _common_complex(*xs):
    """``xs``, each real one cast to the complex dtype of the others when
    one of them is complex."""
    kinds = [np.result_type(unwrap_all(x)) for x in xs]
    if not any(k.kind == "c" for k in kinds) or all(k.kind == "c" for k in kinds):
        return xs
    dt = np.result_type(*kinds)
    return tuple(x if k.kind == "c" and k == dt else
                 (x.astype(dt) if hasattr(x, "astype") else np.asarray(x, dt))
                 for x, k in zip(xs, kinds))


def _sqrtm_vjp(g, ans, a):
    """``X X = a``: ``X dX + dX X = da``, so ``ā = sylv(Xᵀ, Xᵀ, ḡ)``."""
    return match_input(solve_sylvester(_T(ans), _T(ans), g), a)


def _sqrtm_fwd(a):
    return _sqrtm(a) if _traced(a) else _sla.sqrtm(a)


_sqrtm = Primitive(_sqrtm_fwd, "scipy.linalg.sqrtm", vjps=(_sqrtm_vjp,))


def sqrtm(A, *args, **kwargs):
    """scipy.linalg.sqrtm, differentiable to any order: the principal square
    root (complex where ``A`` has negative real eigenvalues; a real ``A``
    then gets the real part of its cotangent).  Not differentiable where
    ``A`` is singular (the Sylvester equation of the rule has no unique
    solution there)."""
    if not _traced(A):
        return plain_call(_sla.sqrtm, A, *args, **kwargs)
    if args or kwargs:
        raise NotImplementedError(
            "tapestry: scipy.linalg.sqrtm's disp= and blocksize= are not supported on "
            "traced arrays; call sqrtm(A).")
    return _sqrtm(A)


# --- solve_banded ----------------------------------------------------------------------------
def _shift_columns(row, k):
    """``row`` moved ``k`` places right (left for ``k < 0``), zeros let in."""
    n = np.shape(row)[0]
    k = max(-n, min(n, k))
    z = np.zeros(abs(k), np.result_type(row))
    if k >= 0:
        return np.concatenate([z, row[:n - k]])
    return np.concatenate([row[-k:], z])


def _banded_transpose(l, u, ab):
    """The storage of ``Aᵀ`` (``u`` sub- and ``l`` super-diagonals) from the
    storage ``ab`` of ``A``: ``abT[k, j] = ab[l + u - k, j + k - l]``."""
    rows = [_shift_columns(ab[l + u - k], l - k) for k in range(l + u + 1)]
    return np.stack(rows)


def _band_of(m, l, u):
    """The band of a square ``m`` in the (l + u + 1, n) storage of
    scipy.linalg.solve_banded: ``out[u + i - j, j] = m[i, j]``."""
    n = np.shape(m)[-1]
    rows = []
    for r in range(l + u + 1):
        d = r - u  # i - j
        diag = np.diagonal(m, offset=-d)
        z = np.zeros(n - np.shape(diag)[0], np.result_type(m))
        rows.append(np.concatenate([diag, z] if d >= 0 else [z, diag]))
    return np.stack(rows)


def _banded_vjp(i, g, ans, args, kwargs):
    """``x = A⁻¹ b``: ``b̄ = A⁻ᵀ x̄`` (a banded solve with ``Aᵀ``'s storage),
    ``Ā = -b̄ xᵀ`` kept on the band (entries of the storage outside the
    matrix get 0)."""
    l, u, ab, b = args
    gb = solve_banded((u, l), _banded_transpose(l, u, ab), g)
    if i == 3:
        return match_input(gb, b)
    x = ans
    if np.ndim(x) == 1:
        m = -np.expand_dims(gb, -1) * np.expand_dims(x, -2)
    else:
        m = -(gb @ _T(x))
    return match_input(_band_of(m, l, u), ab)


def _banded_fwd(l, u, ab, b):
    if _traced(ab, b):
        return _banded(l, u, ab, b)
    return _sla.solve_banded((l, u), ab, b)


_banded = Primitive(_banded_fwd, "scipy.linalg.solve_banded", vjp_argnum=_banded_vjp)


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """scipy.linalg.solve_banded, differentiable in ``ab`` and ``b`` to any
    order (the rule is a banded solve with the transposed matrix)."""
    if not _traced(ab, b):
        return plain_call(_sla.solve_banded, l_and_u, ab, b, overwrite_ab, overwrite_b,
                          check_finite)
    l, u = (int(v) for v in l_and_u)
    if np.ndim(ab) != 2 or np.shape(ab)[0] != l + u + 1 or np.ndim(b) not in (1, 2):
        raise ValueError(f"tapestry: scipy.linalg.solve_banded: ab must have l + u + 1 = "
                         f"{l + u + 1} rows and b one or two axes; got ab {np.shape(ab)}, "
                         f"b {np.shape(b)}.")
    return _banded(l, u, ab, b)


# --- everything else --------------------------------------------------------------------------
def __getattr__(name):
    """Other scipy.linalg names: SciPy's function, refusing traced arguments by name."""
    fun = getattr(_sla, name)
    if not callable(fun) or isinstance(fun, type):
        return fun

    def refuse_traced(*args, **kwargs):
        if _traced(*unwrap_leaves(args), *unwrap_leaves(kwargs.values())):
            raise NotImplementedError(
                f"tapestry: scipy.linalg.{name} has no gradient rule (tapestry.scipy.linalg "
                "differentiates solve_triangular, cho_factor, cho_solve, expm, "
                "solve_sylvester, sqrtm and solve_banded). Use the "
                "numpy.linalg function, or supply the rule with tapestry.custom_vjp.")
        return plain_call(fun, *args, **kwargs)
    refuse_traced.__name__ = name
    refuse_traced.__doc__ = fun.__doc__
    return refuse_traced


def unwrap_leaves(xs):
    """Top-level arguments and the items of tuple/list arguments."""
    out = []
    for x in xs:
        out.extend(x if isinstance(x, (tuple, list)) else (x,))
    return out
