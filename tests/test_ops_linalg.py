"""Linear algebra rules against finite differences: products (with 1-D,
batched and broadcast operands) and numpy.linalg."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapestry as tp
from tapestry.testing import check_grads
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


def test_spectral_norm_second_order_raises():
    with pytest.raises(NotImplementedError, match="svd"):
        tp.hessian(lambda x: np.linalg.norm(x, 2))(rand((2, 2), "normal", 23))


def test_missing_linalg_rule_points_to_custom_vjp():
    with pytest.raises(NotImplementedError, match=r"linalg\.qr.*custom_vjp"):
        tp.grad(lambda x: np.sum(np.linalg.qr(x)[0]))(rand((3, 3), "normal", 24))


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {
    np.matmul, np.dot, np.inner, np.vdot, np.outer, np.kron, np.tensordot, np.vecdot,
    np.linalg.vecdot, np.matvec, np.vecmat, np.linalg.outer, np.linalg.multi_dot,
    np.linalg.solve, np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
    np.linalg.eigh, np.linalg.eigvalsh, np.linalg.norm, np.linalg.matmul, np.linalg.tensordot,
}
