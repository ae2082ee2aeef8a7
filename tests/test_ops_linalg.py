"""Linear algebra rules against finite differences: products (with 1-D,
batched and broadcast operands) and numpy.linalg, real (check_all: float64,
float32, non-contiguous) and complex (cgrad.check_cgrads: directions along
the real and the imaginary axes, pairing Re(c*t)), at orders 1 and 2."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapestry as tp
from tapestry.testing import check_grads
from cgrad import check_cgrads
from sweep import SWEEP, check_all, rand


def _spd(n, seed, batch=()):
    a = rand(batch + (n, n), "normal", seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@st.composite
def matmul_shapes(draw):
    """Operand shapes for ``@``: 1-D on either side, batches that broadcast."""
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    batch_a = tuple(draw(st.lists(st.sampled_from([1, 2]), max_size=2)))
    batch_b = tuple(draw(st.lists(st.sampled_from([1, 2]), max_size=2)))
    a = (k,) if draw(st.booleans()) and not batch_a else batch_a + (m, k)
    b = (k,) if draw(st.booleans()) and not batch_b else batch_b + (k, n)
    return a, b


@SWEEP
@given(shapes=matmul_shapes())
def test_matmul_rule(shapes):
    a, b = rand(shapes[0], "normal", 1), rand(shapes[1], "normal", 2)
    check_all(lambda a, b: a @ b, a, b)
    check_all(lambda a, b: np.matmul(a, b), a, b)


@pytest.mark.parametrize("sa,sb", [((1, 4), (4, 5)), ((3, 1), (1, 5)), ((2, 1, 3, 1), (4, 1, 5)),
                                   ((1, 3), (2, 3, 1)), ((2, 1, 1), (1, 1, 4))])
def test_matmul_one_row_or_inner_dimension_one(sa, sb):
    """The outer-product shortcuts (inner dimension 1, one row), with batches."""
    check_all(lambda a, b: a @ b, rand(sa, "normal", 7), rand(sb, "normal", 8))


@pytest.mark.parametrize("weights", ["ones", "one_differs", "float32_ones"])
def test_outer_product_under_vmap_with_per_item_cotangents(weights):
    """W4's second layer, ``W2 @ h`` with one output row, per model under
    ``vmap``: each model's ``sum`` hands it a cotangent of ones broadcast
    along the item's axes (zero strides but one), and ``h``'s cotangent is
    then ``W2.T`` broadcast, a view.  Any other cotangent -- a single item's
    weight not 1 -- is multiplied."""
    r = np.random.default_rng(3)
    w2, h = r.normal(size=(6, 1, 5)), r.normal(size=(6, 5, 7))
    c = np.ones(6, np.float32 if weights == "float32_ones" else float)
    if weights == "one_differs":
        c[4] = 1.0 + 2.0 ** -40

    def loss(w2, h):
        return np.sum(tp.vmap(lambda w, y: np.sum(w @ y))(w2, h) * c)
    g_w2, g_h = tp.grad(loss, argnums=(0, 1))(w2, h)
    for m in range(6):
        want_w2, want_h = tp.grad(lambda w, y: np.sum(w @ y) * c[m], argnums=(0, 1))(w2[m], h[m])
        np.testing.assert_array_equal(g_h[m], want_h)
        np.testing.assert_allclose(g_w2[m], want_w2, rtol=1e-14)
    check_grads(loss, (w2, h))


def test_a_broadcast_one_cotangent_gives_the_operand_as_a_view():
    from tapestry.ops.linalg import _broadcast_ones, _times
    x = np.arange(12.0).reshape(3, 4, 1)
    per_item = np.broadcast_to(np.ones((3, 1, 1)), (3, 1, 5))   # strides (8, 0, 0)
    got = _times(x, per_item)
    assert got.shape == (3, 4, 5) and np.shares_memory(got, x)
    np.testing.assert_array_equal(got, x * per_item)
    assert _broadcast_ones(np.broadcast_to(1.0, (4, 4)))
    two = np.ones((3, 1, 1))
    two[2] = 2.0
    assert not _broadcast_ones(np.broadcast_to(two, (3, 1, 5)))      # one item differs
    assert not _broadcast_ones(np.ones((3, 5)))                      # no broadcast: multiply
    assert not _broadcast_ones(np.broadcast_to(np.ones((3, 4, 1)), (3, 4, 2)))  # half distinct
    assert not np.shares_memory(_times(x, np.broadcast_to(two, (3, 1, 5))), x)


def test_matmul_empty_and_second_order():
    check_all(lambda a, b: a @ b, rand((0, 3), "normal", 3), rand((3, 2), "normal", 4))
    check_all(lambda a, b: np.tanh(a @ b), rand((2, 3), "normal", 5), rand((3, 2), "normal", 6),
              order=2)


PRODUCTS = {
    "dot_mm": (np.dot, (2, 3), (3, 4)), "dot_nd": (np.dot, (2, 3, 4), (5, 4, 2)),
    "dot_mv": (np.dot, (2, 3), (3,)), "dot_vv": (np.dot, (3,), (3,)),
    "dot_scalar": (np.dot, (), (2, 3)),
    "inner": (np.inner, (2, 3, 4), (5, 4)), "inner_vv": (np.inner, (4,), (4,)),
    "vdot": (np.vdot, (2, 3), (3, 2)), "outer": (np.outer, (2, 3), (4,)),
    "kron": (np.kron, (2, 3), (2, 2)), "kron_mixed": (np.kron, (3,), (2, 2)),
    "tensordot_int": (lambda a, b: np.tensordot(a, b, 1), (2, 3), (3, 4, 2)),
    "tensordot_0": (lambda a, b: np.tensordot(a, b, 0), (2,), (3,)),
    "tensordot_pairs": (lambda a, b: np.tensordot(a, b, ([1, 2], [1, 0])), (2, 3, 4), (4, 3, 5)),
    "tensordot_neg": (lambda a, b: np.tensordot(a, b, ([-1], [0])), (2, 3), (3, 2)),
    "vecdot": (np.vecdot, (2, 3), (3,)), "linalg_vecdot": (np.linalg.vecdot, (4, 3), (4, 3)),
    "matvec": (np.matvec, (2, 3), (3,)), "vecmat": (np.vecmat, (3,), (3, 2)),
    "linalg_outer": (np.linalg.outer, (3,), (2,)),
    "multi_dot": (lambda a, b: np.linalg.multi_dot([a, b, b.T]), (2, 3), (3, 3)),
    "linalg_matmul": (np.linalg.matmul, (2, 3, 4), (4, 2)),
    "linalg_tensordot": (lambda a, b: np.linalg.tensordot(a, b, axes=2), (2, 3, 4), (3, 4, 2)),
}


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_products(name):
    f, sa, sb = PRODUCTS[name]
    a, b = rand(sa, "normal", 7), rand(sb, "normal", 8)
    check_all(f, a, b)
    np.testing.assert_allclose(tp.vjp(f, a, b)[0], f(a, b), rtol=1e-12)


def test_tensordot_second_order():
    check_all(lambda a, b: np.tensordot(a, b, ([1, 2], [1, 0])) ** 2,
              rand((2, 3, 4), "normal", 9), rand((4, 3, 2), "normal", 10), order=2)


# --- numpy.linalg -----------------------------------------------------------------
LINALG = {
    "solve_matrix": (lambda a, b: np.linalg.solve(a, b), lambda: (_spd(3, 1), rand((3, 2), "normal", 2))),
    "solve_vector": (lambda a, b: np.linalg.solve(a, b), lambda: (_spd(3, 3), rand((3,), "normal", 4))),
    "solve_batched": (lambda a, b: np.linalg.solve(a, b), lambda: (_spd(3, 5, (2,)), rand((1, 3, 2), "normal", 6))),
    "inv": (lambda a: np.linalg.inv(a), lambda: (_spd(3, 7, (2,)),)),
    "det": (lambda a: np.linalg.det(a), lambda: (rand((2, 3, 3), "normal", 8),)),
    "slogdet": (lambda a: np.linalg.slogdet(a).logabsdet, lambda: (rand((3, 3), "normal", 9),)),
    "slogdet_unpacked": (lambda a: np.linalg.slogdet(a)[1] * 2, lambda: (_spd(2, 10, (3,)),)),
    "cholesky": (lambda a: np.linalg.cholesky(a), lambda: (_spd(3, 11, (2,)),)),
    "cholesky_upper": (lambda a: np.linalg.cholesky(a, upper=True), lambda: (_spd(3, 12),)),
    "eigh_values": (lambda a: np.linalg.eigh(a).eigenvalues, lambda: (_spd(4, 13),)),
    "eigh_vectors": (lambda a: np.linalg.eigh(a)[1] ** 2, lambda: (_spd(3, 14, (2,)),)),
    "eigh_upper": (lambda a: np.linalg.eigh(a, "U")[1] ** 2 + np.linalg.eigh(a, "U")[0][..., :1],
                   lambda: (_spd(3, 15),)),
    "eigvalsh": (lambda a: np.linalg.eigvalsh(a), lambda: (_spd(3, 16),)),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_linalg(name):
    f, make = LINALG[name]
    args = make()
    check_all(f, *args)  # general (non-symmetric) directions: triangle reads are exact
    np.testing.assert_allclose(tp.vjp(f, *args)[0], f(*args), rtol=1e-10)


@pytest.mark.parametrize("f", [
    lambda a: np.linalg.inv(a), lambda a: np.linalg.det(a), lambda a: np.linalg.slogdet(a)[1],
    lambda a: np.linalg.solve(a, np.ones(3)), lambda a: np.linalg.cholesky(a),
])
def test_linalg_second_order(f):
    check_grads(f, (_spd(3, 17),), order=2)


def test_symmetric_pipeline_through_eigh():
    b = rand((3, 3), "normal", 18)
    check_all(lambda b: np.sum(np.linalg.eigh(b + b.T + 6 * np.eye(3))[0] ** 3), b)


# --- norms ---------------------------------------------------------------------------
NORMS = [
    (None, None), (2, None), (1, 0), (np.inf, 1), (-np.inf, -1), (3, 0), (0.5, 1),
    ("fro", None), ("fro", (0, 1)), (1, (0, 1)), (-1, (0, 1)), (np.inf, (0, 1)),
    (-np.inf, (1, 0)), (2, (0, 1)), (-2, (0, 1)), ("nuc", (0, 1)),
]


@pytest.mark.parametrize("ord,axis", NORMS)
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm(ord, axis, keepdims):
    x = rand((3, 4), "away", 19)
    f = lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)  # noqa: E731
    check_all(f, x)
    np.testing.assert_allclose(tp.vjp(f, x)[0], f(x), rtol=1e-12)


def test_norm_batched_matrix_and_vector_default():
    check_all(lambda x: np.linalg.norm(x, 2, axis=(2, 0)), rand((3, 2, 4), "normal", 20))
    check_all(lambda x: np.linalg.norm(x, axis=-1), rand((3, 2, 4), "normal", 21))


def test_norm_gradient_at_zero_is_zero():
    assert tp.grad(lambda x: np.linalg.norm(x))(np.zeros(3)).tolist() == [0.0, 0.0, 0.0]
    g = tp.grad(lambda x: np.sum(np.linalg.norm(x, axis=1)))(np.array([[0.0, 0.0], [3.0, 4.0]]))
    assert g.tolist() == [[0.0, 0.0], [0.6, 0.8]]


def test_norm_second_order():
    check_grads(lambda x: np.linalg.norm(x, axis=0), (rand((3, 2), "normal", 22),), order=2)


def test_spectral_norms_second_order():
    """2-, -2- and nuclear norms go through svdvals, which has second derivatives."""
    for ord in (2, -2, "nuc"):
        check_grads(lambda x: np.linalg.norm(x, ord), (rand((3, 2), "normal", 23),), order=2)


def test_qr_raw_mode_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"qr\(mode='raw'\)"):
        tp.grad(lambda x: np.sum(np.linalg.qr(x, mode="raw")[0]))(rand((3, 3), "normal", 24))


# --- factorizations (real: float64, float32, non-contiguous) ---------------------------
def _gauge_free_svd(a):
    """Functions of svd's outputs invariant to the joint sign of (u_k, v_k)."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u * u, s, (u * s[..., None, :]) @ vh, vh[..., :1, :] * u[..., :, :1][..., :1, :1]


def _near_diag(a):
    return 0.2 * a + np.diag(np.arange(1.0, np.shape(a)[-1] + 1))


DECOMP = {
    "svd": (_gauge_free_svd, [(3, 3), (4, 3), (3, 5), (2, 4, 3), (2, 2, 3)]),
    "svd_values": (lambda a: np.linalg.svd(a, compute_uv=False), [(3, 4), (2, 3, 3)]),
    "svdvals": (lambda a: np.linalg.svdvals(a) ** 2, [(4, 2)]),
    "svd_full_square": (lambda a: np.linalg.svd(a)[0] ** 2, [(3, 3)]),
    "svd_full_used_columns": (lambda a: np.linalg.svd(a)[0][:, :2] ** 2, [(4, 2)]),
    # real, distinct eigenvalues (NumPy returns real arrays then): a near diag(1..n)
    "eig": (lambda a: (np.linalg.eig(_near_diag(a))[0], np.linalg.eig(_near_diag(a))[1] ** 2),
            [(3, 3)]),
    "eigvals": (lambda a: np.linalg.eigvals(_near_diag(a)), [(3, 3), (2, 4, 4)]),
    "qr": (lambda a: tuple(np.linalg.qr(a)), [(3, 3), (4, 3), (2, 5, 2), (2, 4)]),
    "qr_r": (lambda a: np.linalg.qr(a, mode="r"), [(4, 3)]),
    "pinv": (lambda a: np.linalg.pinv(a), [(4, 3), (3, 5), (2, 3, 3)]),
    "lstsq": (lambda a: np.linalg.lstsq(a, np.arange(10.0).reshape(5, 2))[:2], [(5, 3)]),
    "matrix_power": (lambda a: np.linalg.matrix_power(a, 5), [(3, 3), (2, 2, 2)]),
    "matrix_power_neg": (lambda a: np.linalg.matrix_power(a + 3 * np.eye(3), -2), [(3, 3)]),
    "matrix_power_0": (lambda a: np.linalg.matrix_power(a, 0) + a, [(2, 3, 3)]),
    "cond": (lambda a: np.linalg.cond(a), [(3, 3), (2, 3, 4)]),
    "cond_1": (lambda a: np.linalg.cond(a, 1), [(3, 3)]),
    "tensorinv": (lambda a: np.linalg.tensorinv(a + np.eye(6).reshape(6, 2, 3) * 3, 1), [(6, 2, 3)]),
    "vector_norm": (lambda a: np.linalg.vector_norm(a, axis=(0, 2), ord=3), [(2, 3, 2)]),
    "matrix_norm": (lambda a: np.linalg.matrix_norm(a, ord="nuc"), [(2, 3, 2)]),
    "matrix_transpose_trace_diagonal": (
        lambda a: np.linalg.matrix_transpose(a) * np.linalg.trace(a)[:, None, None]
        + np.sum(np.linalg.diagonal(a, offset=1), -1)[:, None, None], [(2, 3, 3)]),
}


@pytest.mark.parametrize("name", list(DECOMP))
def test_decompositions(name):
    f, shapes = DECOMP[name]
    for i, shape in enumerate(shapes):
        a = rand(shape, "normal", 30 + i)
        check_all(f, a)


@pytest.mark.parametrize("name", ["svd", "eig", "qr", "pinv", "cond", "matrix_power"])
def test_decompositions_second_order(name):
    f, shapes = DECOMP[name]
    a = rand(shapes[0], "normal", 40)
    check_grads(lambda a: f(a)[0] if isinstance(f(a), tuple) else f(a), (a,), order=2)


def test_lstsq_second_argument_and_values():
    a, b = rand((5, 3), "normal", 41), rand((5,), "normal", 42)
    check_all(lambda a, b: np.linalg.lstsq(a, b)[0], a, b)
    x, res, rank, sv = tp.vjp(lambda a, b: np.linalg.lstsq(a, b), a, b)[0]
    ex, eres, erank, esv = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x, ex, rtol=1e-10)
    np.testing.assert_allclose(res, eres, rtol=1e-10)
    np.testing.assert_allclose(sv, esv, rtol=1e-12)
    assert rank == erank


def test_tensorsolve():
    a = rand((6, 2, 3), "normal", 43) + 3 * np.eye(6).reshape(6, 2, 3)
    check_all(lambda a, b: np.linalg.tensorsolve(a, b), a, rand((6,), "normal", 44))


def test_values_match_numpy():
    a = rand((4, 3), "normal", 45)
    for f in (lambda a: np.linalg.svd(a)[0], lambda a: np.linalg.qr(a)[1],
              lambda a: np.linalg.pinv(a), lambda a: np.linalg.qr(a.T)[1]):
        np.testing.assert_allclose(tp.vjp(f, a)[0], f(a), atol=1e-12)


def test_matrix_rank_is_piecewise_constant():
    g = tp.grad(lambda a: np.linalg.matrix_rank(a) * np.sum(a))(rand((3, 3), "normal", 46))
    np.testing.assert_allclose(g, 3 * np.ones((3, 3)))


# --- refusals: derivatives that do not exist --------------------------------------------
def test_svd_vectors_refused_where_singular_values_coincide():
    with pytest.raises(ValueError, match="svd.*coincide"):
        tp.grad(lambda a: np.sum(np.linalg.svd(a)[0][:, 0] ** 2 * np.arange(3.0)))(np.eye(3))
    # the singular values alone stay differentiable there
    np.testing.assert_allclose(tp.grad(lambda a: np.sum(np.linalg.svd(a)[1]))(np.eye(3)),
                               np.eye(3))


def test_eigh_vectors_refused_where_eigenvalues_coincide():
    with pytest.raises(ValueError, match="eigh.*coincide"):
        tp.grad(lambda a: np.sum(np.linalg.eigh(a)[1][:, 0] ** 2 * np.arange(3.0)))(
            np.diag([1.0, 1.0, 2.0]))


def test_svd_full_matrices_extra_columns_refused():
    with pytest.raises(ValueError, match="full_matrices=False"):
        tp.grad(lambda a: np.sum(np.linalg.svd(a)[0] ** 3))(rand((4, 2), "normal", 47))


def test_qr_complete_tall_extra_columns_refused():
    # refused when Q's extra columns get a cotangent (it was refused at the
    # call, used or not: tests/test_user_programs11.py has the unused case)
    with pytest.raises(ValueError, match="mode='reduced'"):
        tp.grad(lambda a: np.sum(np.linalg.qr(a, mode="complete")[0]))(rand((4, 2), "normal", 48))


# --- complex inputs (pairing Re(c*t), directions along both axes) ----------------------
def _c(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _hpd(n, seed, batch=()):
    a = _c(batch + (n, n), seed)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)


def _phase_free(v):
    return v * np.conj(v)


COMPLEX = {
    "matmul": (lambda a, b: a @ b, lambda: (_c((2, 2, 3), 1), _c((3, 4), 2))),
    "matmul_real_b": (lambda a, b: a @ b, lambda: (_c((2, 3), 3), rand((3,), "normal", 4))),
    "dot_inner_outer": (lambda a, b: (np.dot(a, b.T), np.inner(a, b), np.outer(a, b)),
                        lambda: (_c((2, 3), 5), _c((2, 3), 6))),
    "vdot_vecdot": (lambda a, b: (np.vdot(a, b), np.vecdot(a, b), np.linalg.vecdot(a, b)),
                    lambda: (_c((2, 3), 7), _c((2, 3), 8))),
    "matvec_vecmat": (lambda a, b: (np.matvec(a, b[0]), np.vecmat(b[0], a.T)),
                      lambda: (_c((2, 3), 9), _c((2, 3), 10))),
    "kron_tensordot_multi_dot": (
        lambda a, b: (np.kron(a, b), np.tensordot(a, b.T, 1), np.linalg.multi_dot([a, b.T, a])),
        lambda: (_c((2, 3), 11), _c((2, 3), 12))),
    "solve": (lambda a, b: np.linalg.solve(a, b), lambda: (_c((2, 3, 3), 13), _c((3,), 14))),
    "solve_real_b": (lambda a, b: np.linalg.solve(a, b), lambda: (_c((3, 3), 15), rand((3, 2), "normal", 16))),
    "inv_det": (lambda a: (np.linalg.inv(a), np.linalg.det(a)), lambda: (_c((2, 3, 3), 17),)),
    "slogdet": (lambda a: tuple(np.linalg.slogdet(a)), lambda: (_c((2, 3, 3), 18),)),
    "cholesky": (lambda a: np.linalg.cholesky(a), lambda: (_hpd(3, 19, (2,)),)),
    "cholesky_upper": (lambda a: np.linalg.cholesky(a, upper=True), lambda: (_hpd(3, 20),)),
    "eigh": (lambda a: (np.linalg.eigh(a)[0], _phase_free(np.linalg.eigh(a)[1])),
             lambda: (_hpd(3, 21, (2,)),)),
    "eigh_upper": (lambda a: _phase_free(np.linalg.eigh(a, "U")[1]), lambda: (_hpd(3, 22),)),
    "eigvalsh": (lambda a: np.linalg.eigvalsh(a), lambda: (_hpd(3, 23),)),
    "svd": (lambda a: (_phase_free(np.linalg.svd(a, full_matrices=False)[0]),
                       np.linalg.svd(a)[1], np.linalg.svd(a, full_matrices=False)[2][..., :1, :]
                       * np.linalg.svd(a, full_matrices=False)[0][..., :1, :1]),
            lambda: (_c((2, 4, 3), 24),)),
    "svd_wide": (lambda a: (lambda u, s, vh: (u * s[..., None, :]) @ vh + _phase_free(vh))(
        *np.linalg.svd(a, full_matrices=False)), lambda: (_c((3, 5), 25),)),
    "eig": (lambda a: (np.linalg.eig(a)[0], _phase_free(np.linalg.eig(a)[1])),
            lambda: (_c((3, 3), 26),)),
    "eig_real_matrix": (lambda a: (np.linalg.eigvals(a), _phase_free(np.linalg.eig(a)[1])),
                        lambda: (rand((2, 3, 3), "normal", 27),)),
    "qr": (lambda a: tuple(np.linalg.qr(a)), lambda: (_c((4, 3), 28),)),
    "qr_wide": (lambda a: tuple(np.linalg.qr(a)), lambda: (_c((2, 4), 29),)),
    "pinv": (lambda a: np.linalg.pinv(a), lambda: (_c((4, 3), 30),)),
    "pinv_hermitian": (lambda a: np.linalg.pinv(a, hermitian=True), lambda: (_hpd(3, 31),)),
    "lstsq": (lambda a, b: np.linalg.lstsq(a, b)[:2], lambda: (_c((5, 3), 32), _c((5, 2), 33))),
    "matrix_power": (lambda a: np.linalg.matrix_power(a, -3), lambda: (_hpd(2, 34),)),
    "norms": (lambda a: (np.linalg.norm(a), np.linalg.norm(a, 1), np.linalg.norm(a, "nuc"),
                         np.linalg.norm(a, 2), np.linalg.norm(a, 3, axis=0),
                         np.linalg.norm(a, np.inf, axis=1), np.linalg.cond(a)),
              lambda: (_c((3, 3), 35),)),
}


@pytest.mark.parametrize("name", list(COMPLEX))
def test_complex(name):
    f, make = COMPLEX[name]
    args = make()
    check_cgrads(f, args, order=2)
    check_cgrads(f, [a.astype(np.complex64) if a.dtype.kind == "c" else a.astype(np.float32)
                     for a in args])


def test_slogdet_sign_is_constant_for_real_matrices():
    a = rand((3, 3), "normal", 36)
    assert np.all(tp.grad(lambda a: np.linalg.slogdet(a)[0])(a) == 0)


# --- random batched stacks (..., n, n), including empty stacks --------------------------
STACKED = {
    "det": lambda a: np.linalg.det(a),
    "inv": lambda a: np.linalg.inv(a),
    "solve": lambda a: np.linalg.solve(a, a[..., :1] * 2.0),
    "slogdet": lambda a: np.linalg.slogdet(a)[1],
    "cholesky": lambda a: np.linalg.cholesky(a @ np.swapaxes(a, -1, -2)),
    "eigh": lambda a: np.linalg.eigh(a + np.swapaxes(a, -1, -2))[1] ** 2,
    "svd": lambda a: _gauge_free_svd(a)[:3],
    "qr": lambda a: tuple(np.linalg.qr(a)),
    "pinv": lambda a: np.linalg.pinv(a),
    "eigvals": lambda a: np.linalg.eigvals(_near_diag(a)),
    "matrix_power": lambda a: np.linalg.matrix_power(a, 3),
}


@SWEEP
@given(batch=st.lists(st.integers(0, 3), max_size=2), n=st.integers(1, 4),
       name=st.sampled_from(sorted(STACKED)), seed=st.integers(0, 2**16))
def test_batched_stacks(batch, n, name, seed):
    """Well-conditioned random stacks: a Gaussian matrix plus n on the diagonal."""
    a = rand(tuple(batch) + (n, n), "normal", seed) + n * np.eye(n)
    check_grads(STACKED[name], (a,), order=1)
    check_grads(STACKED[name], (a.astype(np.float32),), order=1)


def test_multi_dot_with_vector_ends():
    a, b, c = rand((3,), "normal", 50), rand((3, 4), "normal", 51), rand((4,), "normal", 52)
    check_all(lambda a, b, c: np.linalg.multi_dot([a, b, c]), a, b, c, order=2)


@pytest.mark.parametrize("name", sorted(STACKED))
def test_empty_stacks(name):
    a = np.zeros((0, 2, 3, 3))
    check_grads(STACKED[name], (a,), order=1)


def test_svd_hermitian_reads_the_lower_triangle():
    a = rand((3, 3), "normal", 53)
    a = a + a.T + np.diag([3.0, -1.0, 0.5])  # symmetric, eigenvalues of both signs

    def f(a):
        u, s, vh = np.linalg.svd(a, hermitian=True)
        return s, (u * s) @ vh, np.linalg.pinv(a, hermitian=True)
    check_all(f, a, order=2)
    np.testing.assert_allclose(tp.vjp(f, a)[0][0], np.linalg.svd(a, hermitian=True)[1])
    check_cgrads(lambda a: np.linalg.svd(a, compute_uv=False, hermitian=True), (_hpd(3, 54),))


def test_multi_dot_chain_order_and_values():
    """Four factors with very different sizes: NumPy's cheapest order."""
    arrs = [rand(s, "normal", 60 + i) for i, s in enumerate([(6, 2), (2, 7), (7, 1), (1, 5)])]
    check_all(lambda *a: np.linalg.multi_dot(list(a)), *arrs, order=2)
    np.testing.assert_allclose(tp.vjp(lambda *a: np.linalg.multi_dot(a), *arrs)[0],
                               np.linalg.multi_dot(arrs), rtol=1e-14)
    vec_ends = [rand((2,), "normal", 70), rand((2, 3), "normal", 71), rand((3,), "normal", 72)]
    check_all(lambda *a: np.linalg.multi_dot(list(a)), *vec_ends)


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {
    np.matmul, np.dot, np.inner, np.vdot, np.outer, np.kron, np.tensordot, np.vecdot,
    np.linalg.vecdot, np.matvec, np.vecmat, np.linalg.outer, np.linalg.multi_dot,
    np.linalg.solve, np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
    np.linalg.eigh, np.linalg.eigvalsh, np.linalg.norm, np.linalg.matmul, np.linalg.tensordot,
}
SWEPT |= {np.linalg.cond, np.linalg.eig, np.linalg.eigvals, np.linalg.lstsq,
          np.linalg.matrix_norm, np.linalg.matrix_power, np.linalg.pinv, np.linalg.qr,
          np.linalg.svd, np.linalg.svdvals, np.linalg.tensorinv, np.linalg.tensorsolve,
          np.linalg.vector_norm}


# --- det's second derivative at and near singular matrices -------------------------------
def _det_hessian_by_minors(a):
    """d^2 det / da_ij da_kl = (-1)^(i+j+k'+l') det(a without rows i, k and
    columns j, l), with k', l' the positions of k, l once row i and column j
    are gone (0 when i = k or j = l): the analytic value, by brute force."""
    n = a.shape[0]
    h = np.zeros((n,) * 4, a.dtype)
    for i, j, k, l in np.ndindex(n, n, n, n):
        if k == i or l == j:
            continue
        rows = [r for r in range(n) if r not in (i, k)]
        cols = [c for c in range(n) if c not in (j, l)]
        minor = np.linalg.det(a[np.ix_(rows, cols)]) if rows else 1.0
        h[i, j, k, l] = (-1) ** (i + j + k - (k > i) + l - (l > j)) * minor
    return h


def _with_singular_values(s, seed):
    rng = np.random.default_rng(seed)
    n = len(s)
    u = np.linalg.qr(rng.normal(size=(n, n)))[0]
    v = np.linalg.qr(rng.normal(size=(n, n)))[0]
    return (u * np.asarray(s, float)) @ v.T


@pytest.mark.parametrize("s", [
    [2.0, 1.0, 0.5, 0.0],          # rank n-1
    [2.0, 1.0, 0.0, 0.0],          # rank n-2
    [1.5, 0.0, 0.0, 0.0],          # rank n-3: the Hessian is 0
    [2.0, 1.3, 0.7, 2.0 / 5e13],   # condition number 5e13
    [1.0, 0.0], [0.0], [3.0],
], ids=["rank-1", "rank-2", "rank-3", "cond5e13", "2x2-rank1", "1x1-zero", "1x1"])
def test_det_hessian_exact_at_singular_matrices(s):
    a = _with_singular_values(s, seed=len(s))
    exact = _det_hessian_by_minors(a)
    assert np.allclose(tp.hessian(np.linalg.det)(a), exact, rtol=0, atol=1e-13)
    # forward over reverse reads the same rule
    assert np.allclose(tp.jacfwd(tp.grad(np.linalg.det))(a), exact, rtol=0, atol=1e-13)


def test_det_hessian_matches_jax_at_singular_matrices():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    for s in ([2.0, 1.0, 0.0], [2.0, 1.0, 0.5, 0.0], [2.0, 1.3, 0.7, 2.0 / 5e13]):
        a = _with_singular_values(s, seed=7)
        ours = tp.hessian(np.linalg.det)(a)
        assert np.allclose(ours, np.asarray(jax.hessian(jax.numpy.linalg.det)(a)), atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_det_second_order_check_grads_batched_and_singular(dtype):
    a = np.stack([_with_singular_values([2.0, 1.0, 0.0], 3),
                  _with_singular_values([1.0, 0.0, 0.0], 4)])
    if dtype == np.complex128:
        a = a + 1j * _with_singular_values([1.0, 0.5, 0.2], 5)
        check_cgrads(lambda a: np.linalg.det(a), [a], order=2)
    else:
        check_grads(lambda a: np.linalg.det(a), (a.astype(dtype),), order=2)
        assert tp.hessian(lambda a: np.linalg.det(a))(a[0].astype(dtype)).dtype == dtype


def test_det_third_derivative_at_an_invertible_matrix():
    a = _with_singular_values([2.0, 1.0, 0.5], 9)
    third = tp.jacobian(tp.hessian(np.linalg.det))(a)
    eps, e = 1e-6, np.zeros((3, 3))
    e[0, 1] = 1.0
    fd = (tp.hessian(np.linalg.det)(a + eps * e) - tp.hessian(np.linalg.det)(a - eps * e)) / (2 * eps)
    assert np.allclose(third[..., 0, 1], fd, atol=1e-7)


def test_slogdet_at_a_singular_matrix_is_refused_by_name():
    with pytest.raises(np.linalg.LinAlgError, match="slogdet has no derivative at a singular"):
        tp.grad(lambda a: np.linalg.slogdet(a)[1])(np.diag([1.0, 0.0]))


def test_det_third_derivative_at_a_singular_matrix_is_refused_by_name():
    with pytest.raises(np.linalg.LinAlgError, match="third and higher derivatives of np.linalg.det"):
        tp.jacobian(tp.hessian(np.linalg.det))(np.diag([1.0, 0.0]))


@pytest.mark.parametrize("how", ["grad", "jacfwd"])
def test_qr_at_deficient_column_rank_names_qr(how):
    # the rule's solve with R raised NumPy's bare "Singular matrix"
    A = np.diag([2.0, 1.0, 0.0])
    f = lambda A: np.sum(np.linalg.qr(A)[0])
    with pytest.raises(np.linalg.LinAlgError, match=r"np\.linalg\.qr has no derivative at a "
                                                     r"matrix of deficient column rank"):
        (tp.grad(f) if how == "grad" else tp.jacfwd(f))(A)
    check_grads(f, (A + np.array([[0.3, 1.0, -0.5], [0.7, 0.2, 0.4], [-0.6, 0.8, 1.1]]),))


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
def test_spectral_norms_of_float32_stay_float32(ord):
    """NumPy's 2-, -2- and nuclear norms of a float32 matrix are float32; the
    traced ones were float64 (a float64 stand-in matrix for the zero-matrix
    guard promoted the input), so jvp's output and tangent were too."""
    a = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    f = lambda a: np.linalg.norm(a, ord)  # noqa: E731
    y, t = tp.jvp(f, (a,), (a,))
    assert y.dtype == t.dtype == np.linalg.norm(a, ord).dtype == np.float32
    assert np.allclose(y, np.linalg.norm(a, ord), rtol=1e-6)
    assert tp.jacfwd(f)(a).dtype == tp.grad(f)(a).dtype == np.float32
