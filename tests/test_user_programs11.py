"""Round-11 user programs: defects found by differentiating plain NumPy
programs, each test failing before its fix.

* ``x.T.ravel('K')`` / ``flatten('A')`` read the array's memory layout;
  tapestry read them as 'C' and gave the transposed array's elements in the
  wrong order (a wrong value and gradient).  They now read the traced
  value's layout (NumPy's, from its forward); under vmap, whose items'
  layouts are not the batch's, they are refused by name.
* ``y.flat`` of a traced or batched array was an AttributeError; GP code
  writes ``K.flat[::n + 1] += noise`` to add to the diagonal.
"""
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads


# --- ravel / flatten in memory order -------------------------------------------
W6 = np.arange(6.0)
X23 = np.arange(1.0, 7.0).reshape(2, 3)

LAYOUT_ORDER = {
    "ravel_K_of_T": lambda x: np.sum(np.ravel((x * 1.0).T, order="K") * W6),
    "method_ravel_K_of_T": lambda x: np.sum((x * 1.0).T.ravel("K") * W6),
    "flatten_A_of_T": lambda x: np.sum((x * 1.0).T.flatten("A") * W6),
    "ravel_K_of_F_copy": lambda x: np.sum(np.copy(x * 1.0, order="F").ravel("K") * W6),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_ORDER))
def test_memory_order_ravel_follows_the_layout(name):
    # grad and jvp read the traced value's layout (NumPy's own, as its
    # forward made it): x.T.ravel('K') gave 70 where NumPy gives 65
    f = LAYOUT_ORDER[name]
    v, g = tp.value_and_grad(f)(X23)
    assert np.isclose(v, f(X23))
    check_grads(f, (X23.copy(),))
    t = tp.jvp(f, (X23,), (np.ones_like(X23),))[1]
    assert np.isclose(t, np.sum(g))


@pytest.mark.parametrize("name", sorted(LAYOUT_ORDER))
def test_memory_order_ravel_is_refused_under_vmap(name):
    # vmap's items' layouts are not the batch's: its per-item NumPy fallback
    # read them, and np.copy(order="F") gave 70 where NumPy gives 65
    with pytest.raises(TypeError, match="tapestry.*order="):
        tp.vmap(LAYOUT_ORDER[name])(np.stack([X23, X23 + 1]))


def test_memory_order_ravel_under_jit_is_numpys():
    # jit runs NumPy's own ravel on the real arrays: no refusal needed there
    f = LAYOUT_ORDER["ravel_K_of_T"]
    assert np.isclose(tp.jit(f)(X23), f(X23))


@pytest.mark.parametrize("order", ["K", "A"])
def test_memory_order_of_a_column_is_row_order(order):
    # at most one axis longer than 1: every order gives the same elements
    def f(x):
        return np.sum(np.ravel(x[:, :1] * x[:, 1:2], order=order) * np.array([1.0, 2.0]))
    check_grads(f, (X23.copy(),))
    assert np.isclose(tp.value_and_grad(f)(X23)[0], f(X23))


# --- y.flat ---------------------------------------------------------------------
XG = np.random.default_rng(0).standard_normal((5, 2))


def gp_with_flat_jitter(theta):
    d2 = np.sum((XG[:, None] - XG[None]) ** 2, -1)
    K = np.exp(theta[0]) * np.exp(-0.5 * d2)
    K.flat[::len(XG) + 1] += np.exp(theta[1])
    L = np.linalg.cholesky(K)
    return np.sum(np.log(np.diag(L))) + np.sum(np.linalg.solve(L, np.ones(5)) ** 2)


def gp_with_fill_diagonal_reference(theta):
    d2 = np.sum((XG[:, None] - XG[None]) ** 2, -1)
    K = np.exp(theta[0]) * np.exp(-0.5 * d2) + np.exp(theta[1]) * np.eye(len(XG))
    L = np.linalg.cholesky(K)
    return np.sum(np.log(np.diag(L))) + np.sum(np.linalg.solve(L, np.ones(5)) ** 2)


def flat_reads_and_writes(x):
    y = np.outer(x, x)
    a = y.flat[3] + np.sum(y.flat[1:4]) + np.sum(y.flat[[0, 5, 5]])
    v = y.flat[0:2]
    v += 100.0                          # NumPy's y.flat[a:b] is a copy: y unchanged
    y.flat[[1, 2, 7]] = x[:2] * 3       # a short value repeats, as np.put
    s = sum(e for e in y.flat)
    return a + np.sum(y ** 2) + s + len(y.flat) + np.sum(v)


def flat_setter_repeats(x):
    y = x * 1.0
    y.flat = x[:2]
    return np.sum(y * np.arange(4).reshape(2, 2))


THETA = np.array([0.2, -1.0])
X3 = np.array([0.3, -0.7, 1.1])
X22 = np.array([[0.3, -0.7], [1.1, 2.0]])
FLAT = [(gp_with_flat_jitter, THETA), (flat_reads_and_writes, X3), (flat_setter_repeats, X22)]


@pytest.mark.parametrize("f,x", FLAT, ids=[f.__name__ for f, _ in FLAT])
def test_flat_matches_numpy_and_differences(f, x):
    v, g = tp.value_and_grad(f)(x.copy())
    assert np.isclose(v, f(x.copy()), rtol=1e-12)
    check_grads(f, (x.copy(),), order=2)
    _, t = tp.jvp(f, (x.copy(),), (np.ones_like(x),))
    assert np.isclose(t, np.sum(g))
    assert np.allclose(tp.jit(tp.grad(f))(x.copy()), g)
    xs = np.stack([x, 1.1 * x])
    assert np.allclose(tp.vmap(tp.grad(f))(xs), np.stack([tp.grad(f)(xi) for xi in xs]))


def test_flat_jitter_gradient_is_the_eye_version():
    assert np.allclose(tp.grad(gp_with_flat_jitter)(THETA),
                       tp.grad(gp_with_fill_diagonal_reference)(THETA))


def test_flat_writes_into_the_argument_are_refused():
    def f(x):
        x.flat[0] = 1.0
        return np.sum(x)
    with pytest.raises(TypeError, match="argument"):
        tp.grad(f)(np.ones(3))


def test_flat_per_item_position_under_vmap():
    def f(x, i):
        y = x * 1.0
        y.flat[i] = 0.0
        return y
    xs, idx = np.arange(6.0).reshape(3, 2), np.array([0, 1, 0])
    want = np.stack([f(x, i) for x, i in zip(xs, idx)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.allclose(tp.vmap(f)(xs, idx), want)


# --- eigvalsh where eigenvalues coincide, in forward mode ------------------------
B3 = np.diag([1.0, 2.0, 3.0])


def logdet_by_eigvalsh(x):
    """log det(I + x0 B + x1 11ᵀ) through the eigenvalues: at x = 0 all three
    coincide (the identity), where only the values are read."""
    return np.sum(np.log(np.linalg.eigvalsh(np.eye(3) + x[0] * B3 + x[1] * np.ones((3, 3)))))


def test_eigvalsh_forward_mode_at_repeated_eigenvalues():
    # eigvalsh was eigh(a)[0]: forward mode transposed all of eigh's rule,
    # whose eigenvector part refuses coinciding eigenvalues
    x, v = np.zeros(2), np.array([1.0, 0.5])
    want = np.array([6.0, 3.0])  # d log det = tr(dA): tr(B3), tr(11ᵀ)
    assert np.allclose(tp.grad(logdet_by_eigvalsh)(x), want)
    assert np.isclose(tp.jvp(logdet_by_eigvalsh, (x,), (v,))[1], want @ v)
    assert np.allclose(tp.jacfwd(logdet_by_eigvalsh)(x), want)


def test_eigvalsh_rule_away_from_repeated_eigenvalues():
    r = np.random.default_rng(3)
    a = r.standard_normal((4, 4))
    s = a @ a.T
    w = np.arange(4.0)
    for uplo, m in (("L", s), ("U", s + np.triu(np.ones((4, 4)), 1))):
        def f(m):
            return np.sum(np.linalg.eigvalsh(m, UPLO=uplo) ** 3 * w)
        check_grads(f, (m,), order=2)
        assert np.allclose(tp.jacfwd(tp.grad(f))(m), tp.hessian(f)(m))
        assert np.allclose(tp.vmap(tp.grad(f))(np.stack([m, m + np.eye(4)])),
                           np.stack([tp.grad(f)(m), tp.grad(f)(m + np.eye(4))]))
    c = a + 1j * r.standard_normal((4, 4))
    h = c @ c.conj().T

    def g(t):
        return np.sum(np.linalg.eigvalsh(h + t[0] * np.eye(4) + t[1] * (c + c.conj().T)) ** 2)
    check_grads(g, (np.zeros(2),))
    assert np.isclose(tp.jvp(g, (np.zeros(2),), (np.ones(2),))[1], np.sum(tp.grad(g)(np.zeros(2))))
    s32 = s.astype(np.float32)
    assert tp.grad(lambda m: np.sum(np.linalg.eigvalsh(m)))(s32).dtype == np.float32


# --- y += v into a plain array: the refusal names the operator ------------------
def _acc_iadd(w):
    acc = np.zeros(3)
    acc += w * 2
    return np.sum(acc)


def _acc_slice_imul(w):
    acc = np.ones(3)
    acc[1:] *= w[:2]
    return np.sum(acc)


@pytest.mark.parametrize("f,op", [(_acc_iadd, r"\+="), (_acc_slice_imul, r"\*=")])
def test_in_place_operator_into_plain_array_names_the_operator(f, op):
    # NumPy runs y += v as np.add(y, v, out=y): the refusal named an out= the
    # program never wrote ("drop out= and use the result")
    with pytest.raises(TypeError, match=rf"tapestry: y {op} v .*plain.*y = y "):
        tp.grad(f)(np.ones(3))
    with pytest.raises(TypeError, match=rf"y {op} v"):
        tp.jit(tp.grad(f))(np.ones(3))


def test_explicit_out_keeps_its_message():
    with pytest.raises(TypeError, match=r"np.add\(..., out=...\)"):
        tp.grad(lambda w: np.sum(np.add(w, 1.0, out=np.zeros(3))))(np.ones(3))


def test_in_place_operator_from_a_traced_start_works():
    def f(w):
        acc = w * 0.0
        acc += w * 2
        acc[1:] *= w[:2]
        return np.sum(acc)
    check_grads(f, (np.array([0.3, -0.7, 1.1]),), order=2)


# --- scipy.special ufuncs of several outputs under vmap --------------------------
sp = pytest.importorskip("scipy.special")
MULTI_OUT = {
    "fresnel_S": lambda x: np.sum(sp.fresnel(x)[0]),
    "fresnel_C_times_x": lambda x: np.sum(sp.fresnel(x)[1] * x),
    "sici": lambda x: np.sum(sp.sici(x)[0] + sp.sici(x)[1]),
    "shichi": lambda x: np.sum(sp.shichi(x)[1]),
    "ellipj_sn_dn": lambda x: np.sum(sp.ellipj(x, 0.3)[0] * sp.ellipj(x, 0.3)[2]),
    "airy_Ai": lambda x: np.sum(sp.airy(x)[0]),
}
XM = np.array([[0.7, 1.3], [2.1, 0.4], [0.2, 1.8]])


@pytest.mark.parametrize("name", sorted(MULTI_OUT))
def test_multi_output_special_ufunc_under_vmap(name):
    # the elementwise fast path wrapped the ufunc's tuple of outputs in one
    # batched value: vmap(f) raised "tuple indices must be integers",
    # vmap(grad(f)) an AttributeError naming ndarray.ndim
    f = MULTI_OUT[name]
    want_v = np.array([f(x) for x in XM])
    want_g = np.stack([tp.grad(f)(x) for x in XM])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.allclose(tp.vmap(f)(XM), want_v)
        assert np.allclose(tp.vmap(f, in_axes=1)(XM.T), want_v)
        assert np.allclose(tp.vmap(tp.grad(f))(XM), want_g)
        assert np.allclose(tp.jit(tp.vmap(tp.grad(f)))(XM), want_g)
        assert np.allclose(tp.vmap(lambda x: tp.jvp(f, (x,), (np.ones(2),))[1])(XM),
                           want_g.sum(1))
        assert np.allclose(tp.grad(lambda X: np.sum(tp.vmap(f)(X)))(XM), want_g)
    check_grads(f, (XM[0],))


# --- extra columns of svd(full_matrices=True) / qr(mode="complete") in forward mode
RT = np.random.default_rng(4)
TALL, DIR = RT.standard_normal((5, 3)), RT.standard_normal((5, 3))
W53, W55 = np.arange(15.0).reshape(5, 3), np.arange(25.0).reshape(5, 5)
EXTRA_USED = {
    # forward mode transposed the rule with zero placeholder cotangents, which
    # said "unused" of the extra columns: their tangent was silently 0
    "svd_U_extra_column": lambda a: np.sum(np.linalg.svd(a)[0][:, 4] ** 3),
    "svd_complement_projector": lambda a: np.sum(
        np.linalg.svd(a)[0][:, 3:] @ np.linalg.svd(a)[0][:, 3:].T * W55),
    "svd_Vh_extra_row_of_wide": lambda a: np.sum(np.linalg.svd(a.T)[2][4] ** 3),
    "qr_complete_Q_extra_column": lambda a: np.sum(np.linalg.qr(a, mode="complete")[0][:, 4] ** 3),
}
EXTRA_UNUSED = {
    "svd_U_leading_columns": lambda a: np.sum(np.linalg.svd(a)[0][:, :3] ** 2 * W53)
    + np.sum(np.linalg.svd(a)[1]),
    "svd_Vh_leading_rows_of_wide": lambda a: np.sum(np.linalg.svd(a.T)[2][:3] ** 2 * W53.T),
    "qr_complete_R_and_leading_Q": lambda a: np.sum(np.abs(np.linalg.qr(a, mode="complete")[1]))
    + np.sum(np.linalg.qr(a, mode="complete")[0][:, :3] ** 2 * W53),
}


@pytest.mark.parametrize("name", sorted(EXTRA_USED))
def test_forward_mode_through_extra_columns_is_nan_not_zero(name):
    f = EXTRA_USED[name]
    t = tp.jvp(f, (TALL,), (DIR,))[1]
    assert np.isnan(t)
    assert np.all(np.isnan(tp.jacfwd(f)(TALL)))
    with pytest.raises(ValueError, match="complement"):
        tp.grad(f)(TALL)


@pytest.mark.parametrize("name", sorted(EXTRA_UNUSED))
def test_extra_columns_unused_differentiate_in_both_modes(name):
    # qr(mode="complete") of a tall matrix was refused at the call
    f = EXTRA_UNUSED[name]
    g = tp.grad(f)(TALL)
    assert np.isclose(tp.jvp(f, (TALL,), (DIR,))[1], np.sum(g * DIR))
    check_grads(f, (TALL,), order=2)
    assert np.allclose(tp.hessian(f)(TALL), tp.jacrev(tp.grad(f))(TALL))
    assert np.allclose(tp.vmap(tp.grad(f))(np.stack([TALL, 2 * TALL])),
                       np.stack([g, tp.grad(f)(2 * TALL)]))
    assert np.allclose(tp.jit(tp.grad(f))(TALL), g)


# --- a custom_vjp backward rule that skips work for an unused output ------------
@tp.custom_vjp
def _sin_cos(x):
    return np.sin(x), np.cos(x)


def _sin_cos_fwd(x):
    return _sin_cos(x), x


def _sin_cos_bwd(x, g):
    gs, gc = g
    out = gs * np.cos(x)
    if np.any(gc != 0):          # autograd's grad_eigh does this (if anp.any(vg))
        out = out - gc * np.sin(x)
    return (out,)


_sin_cos.defvjp(_sin_cos_fwd, _sin_cos_bwd)


def _uses_cos(x):
    return np.sum(_sin_cos(x)[1] ** 2)


def test_forward_mode_refuses_a_rule_that_reads_its_cotangent():
    # forward mode transposes the rule at a zero placeholder cotangent: the
    # branch was skipped and jvp gave 0 (reverse mode: -0.0719)
    x, v = np.array([0.3, 0.7]), np.array([1.0, -0.5])
    check_grads(_uses_cos, (x,))
    with pytest.raises(TypeError, match="read the values of its cotangent"):
        tp.jvp(_uses_cos, (x,), (v,))
    with pytest.raises(TypeError, match="read the values of its cotangent"):
        tp.hessian(_uses_cos)(x)


def test_forward_mode_rule_that_branches_on_primal_values_still_works():
    @tp.custom_vjp
    def relu(x):
        return np.maximum(x, 0)
    relu.defvjp(lambda x: (relu(x), x), lambda x, g: (g * (x > 0),))
    x = np.array([0.3, -0.7, 1.2])
    assert np.allclose(tp.jvp(lambda x: np.sum(relu(x) ** 2), (x,), (np.ones(3),))[1],
                       np.sum(2 * np.maximum(x, 0)))
