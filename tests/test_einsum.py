"""tapestry.einsum / np.einsum on traced arrays: values against np.einsum,
gradients against finite differences (float64 and float32)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapestry as tp
from tapestry.ops.einsum import _expression, _plan
from tapestry.testing import check_grads

rng = np.random.default_rng(0)

CASES = [  # spec, operand shapes
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),                 # implicit output
    ("ki,kj->ij", [(4, 3), (4, 2)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ii->i", [(4, 4)]),                          # diagonal
    ("ii", [(4, 4)]),                             # trace
    ("iij->ij", [(3, 3, 2)]),
    ("ij->i", [(3, 4)]),                          # letter only in one operand
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]),   # ... with size-1 broadcasting
    ("...i,i->...", [(2, 3, 4), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,ij,jk->ik", [(3, 3), (3, 3), (3, 2)]),
    (",ij->ij", [(), (2, 3)]),                    # 0-d operand
    ("ij,jk->ik", [(0, 3), (3, 2)]),              # empty
]


def _ops(shapes, dtype):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("spec,shapes", CASES)
def test_einsum_value_and_grad(spec, shapes, dtype):
    ops = _ops(shapes, dtype)
    np.testing.assert_allclose(tp.einsum(spec, *ops), np.einsum(spec, *ops),
                               rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
    check_grads(lambda *a: np.einsum(spec, *a), ops)


def test_einsum_result_dtype_follows_inputs():
    a, b = _ops([(3, 4), (4, 2)], np.float32)
    g = tp.grad(lambda a: np.sum(np.einsum("ij,jk->ik", a, b) ** 2))(a)
    assert g.dtype == np.float32


def test_einsum_same_operand_twice_and_second_order():
    x = rng.standard_normal((3, 3))
    check_grads(lambda x: np.einsum("ij,jk->ik", x, x), (x,), order=2)


def test_einsum_only_active_operand_gets_a_rule():
    a, b = _ops([(3, 4), (4, 2)], np.float64)
    ga = tp.grad(lambda a: np.sum(np.einsum("ij,jk->ik", a, b)))(a)
    np.testing.assert_allclose(ga, np.broadcast_to(b.sum(1), (3, 4)))


def test_paths_are_cached_per_spec_and_shapes():
    a, b, c = _ops([(6, 7), (7, 8), (8, 3)], np.float64)
    _plan.cache_clear()
    _expression.cache_clear()
    for _ in range(3):
        tp.grad(lambda a: np.sum(np.einsum("ij,jk,kl->il", a, b, c)))(a)
    info = _plan.cache_info()
    assert info.misses == 2 and info.hits >= 4   # forward + one VJP spec
    assert _expression.cache_info().misses == 2  # both need opt_einsum (3 operands)


@pytest.mark.parametrize("spec", ["ij,jk->ik", "ji,jk->ik", "ij,kj->ik", "ji,kj->ik",
                                  "ij,jk->ki", "ki,kj->ij", "ki,kj->ji", "jk,ij->ik"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_matrix_product_forms_match_numpy(spec, dtype):
    """Specs that are one matrix product run as ``np.matmul`` (with
    transposes): same values as NumPy's einsum, same gradients."""
    from tapestry.ops.einsum import _matmul_form
    ins, _ = spec.split("->")
    sizes = {"i": 3, "j": 4, "k": 5}
    shapes = [tuple(sizes[c] for c in t) for t in ins.split(",")]
    assert _matmul_form(spec, tuple(shapes)) is not None
    ops = [o.astype(dtype) for o in _ops(shapes, np.float64)]
    if dtype == np.complex128:
        ops = [o + 1j * o[::-1] for o in ops]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    from tapestry.ops.einsum import einsum
    np.testing.assert_allclose(einsum(spec, *ops), np.einsum(spec, *ops), rtol=tol)
    if dtype != np.complex128:
        check_grads(lambda a, b: np.einsum(spec, a, b), ops)


@pytest.mark.parametrize("spec,shapes", [("ij,jk->ij", [(2, 3), (3, 4)]),
                                          ("ij,ij->ij", [(2, 3), (2, 3)]),
                                          ("ii,ij->ij", [(3, 3), (3, 4)]),
                                          ("ij,jk->ik", [(2, 1), (3, 4)])])
def test_other_specs_are_not_taken_for_matrix_products(spec, shapes):
    from tapestry.ops.einsum import _matmul_form
    assert _matmul_form(spec, tuple(shapes)) is None


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 3),
       st.sampled_from([np.float64, np.float32]))
def test_random_shapes_batched_matmul(n, m, batch, dtype):
    a = rng.standard_normal((batch, n, m)).astype(dtype)
    b = rng.standard_normal((m, 2)).astype(dtype)
    check_grads(lambda a, b: np.einsum("bij,jk->bik", a, b), (a, b))


@pytest.mark.parametrize("spec,shapes,msg", [
    ("ij,jk->ik", [(3, 4), (5, 2)], "has sizes 4 and 5"),
    ("ij,jk->ik", [(3, 4)], "names 2 operands but 1"),
    ("ijk->i", [(3, 4)], "do not match its shape"),
    ("ij->iz", [(3, 4)], "appears in no operand"),
    ("i1->i", [(3, 4)], "invalid subscript"),
])
def test_einsum_errors(spec, shapes, msg):
    ops = _ops(shapes, np.float64)
    with pytest.raises(ValueError, match=msg):
        tp.grad(lambda a: np.sum(np.einsum(spec, a, *ops[1:])))(ops[0])


def test_einsum_out_error():
    a = rng.standard_normal(3)
    with pytest.raises(TypeError, match="out="):
        tp.grad(lambda a: np.sum(np.einsum("i->i", a, out=np.empty(3))))(a)


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {np.einsum}


@pytest.mark.parametrize("args", [
    lambda a, b: (a, [0, 1], b, [1, 2], [0, 2]),      # matrix product, explicit output
    lambda a, b: (a, [0, 1], b, [1, 2]),              # implicit output
    lambda a, b: (a, [Ellipsis, 1], b, [1, 2], [Ellipsis, 2]),
    lambda a, b: (a, [0, 1], [1, 0]),                 # one operand: a transpose
])
def test_einsum_interleaved_form(args):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    ops = [o for o in args(a, b)[0::2] if isinstance(o, np.ndarray)]
    f = lambda *xs: np.einsum(*args(*xs, *([b] * (2 - len(xs)))))  # noqa: E731
    np.testing.assert_allclose(tp.vjp(f, *ops)[0], f(*ops), rtol=1e-12)
    check_grads(f, ops, order=2)
    with pytest.raises(ValueError, match="interleaved"):
        tp.grad(lambda a: np.sum(np.einsum(a, [0, -1])))(a)
