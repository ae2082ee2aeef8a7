"""Shape and layout ops against finite differences (float64/float32,
non-contiguous), plus the conversions that must raise."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapestry as tp
from sweep import SWEEP, check_all, rand, shapes

X34 = rand((3, 4), "normal", 1)
X234 = rand((2, 3, 4), "normal", 2)

CASES = {
    "reshape": (lambda x: np.reshape(x, (4, -1)), X34),
    "reshape_F": (lambda x: np.reshape(x, (2, 6), order="F"), X34),
    "method_reshape": (lambda x: x.reshape(6, 2), X34),
    "ravel": (lambda x: np.ravel(x), X234),
    "transpose": (lambda x: np.transpose(x, (2, 0, 1)), X234),
    "T": (lambda x: x.T, X234),
    "swapaxes": (lambda x: np.swapaxes(x, 0, -1), X234),
    "moveaxis": (lambda x: np.moveaxis(x, [0, 1], [-1, 0]), X234),
    "rollaxis": (lambda x: np.rollaxis(x, 2, 1), X234),
    "expand_dims": (lambda x: np.expand_dims(x, (0, 3)), X34),
    "squeeze": (lambda x: np.squeeze(x[None, :, None], axis=2), X34),
    "broadcast_to": (lambda x: np.broadcast_to(x, (2, 3, 4)), X34[:1]),
    "broadcast_arrays": (lambda x: np.broadcast_arrays(x, np.ones((2, 1, 1)))[0], X34),
    "concatenate": (lambda x: np.concatenate([x, 2 * x, np.ones((1, 4))], axis=0), X34),
    "concat_neg_axis": (lambda x: np.concatenate([x, x[:, :1]], axis=-1), X34),
    "concat_none": (lambda x: np.concatenate([x, x[0]], axis=None), X34),
    "stack": (lambda x: np.stack([x, 3 * x], axis=-1), X34),
    "hstack": (lambda x: np.hstack([x, x[:, :2]]), X34),
    "hstack_1d": (lambda x: np.hstack([x[0], x[1]]), X34),
    "vstack": (lambda x: np.vstack([x, x[0]]), X34),
    "dstack": (lambda x: np.dstack([x, x]), X34),
    "column_stack": (lambda x: np.column_stack([x[0], x[1], x[2]]), X34),
    "append": (lambda x: np.append(x, x[0]), X34),
    "split": (lambda x: np.split(x, 2, axis=1)[1] * 2, X34),
    "split_indices": (lambda x: np.split(x, [1, 3], axis=0)[0], X34),
    "split_all_used": (lambda x: np.sum(np.stack(np.split(x, 4, axis=1)) ** 2, axis=0), X34),
    "array_split": (lambda x: np.array_split(x, 3, axis=1)[2], X34),
    "hsplit": (lambda x: np.hsplit(x, 2)[0], X34),
    "vsplit": (lambda x: np.vsplit(x, 3)[1], X34),
    "flip": (lambda x: np.flip(x, axis=(0, 2)), X234),
    "flip_all": (lambda x: np.flip(x), X34),
    "fliplr": (lambda x: np.fliplr(x), X34),
    "flipud": (lambda x: np.flipud(x), X34),
    "rot90": (lambda x: np.rot90(x, 1), X34),
    "rot90_3": (lambda x: np.rot90(x, -1, axes=(1, 2)), X234),
    "roll": (lambda x: np.roll(x, 2), X34),
    "roll_axes": (lambda x: np.roll(x, (1, -2), axis=(0, 2)), X234),
    "tile": (lambda x: np.tile(x, (2, 1, 3)), X34),
    "tile_int": (lambda x: np.tile(x, 2), X34),
    "repeat": (lambda x: np.repeat(x, 3, axis=1), X34),
    "repeat_flat": (lambda x: np.repeat(x, 2), X34),
    "repeat_counts": (lambda x: np.repeat(x, [2, 0, 1, 3], axis=-1), X34),
    "method_repeat": (lambda x: x.repeat(2, axis=0), X34),
    "pad": (lambda x: np.pad(x, ((1, 0), (2, 3))), X34),
    "pad_int": (lambda x: np.pad(x, 1, constant_values=5.0), X34),
    "pad_edge": (lambda x: np.pad(x, ((2, 1), (0, 3)), mode="edge"), X34),
    "pad_reflect": (lambda x: np.pad(x, ((2, 1), (3, 5)), mode="reflect"), X34),
    "pad_symmetric": (lambda x: np.pad(x, 2, mode="symmetric"), X34),
    "pad_wrap": (lambda x: np.pad(x, ((0, 4), (1, 1)), mode="wrap"), X34),
    "pad_maximum": (lambda x: np.pad(x, ((2, 1), (0, 3)), mode="maximum"), X34),
    "pad_minimum_stat_length": (lambda x: np.pad(x, 2, mode="minimum", stat_length=((1, 2), (3, 1))), X34),
    "pad_mean_stat_length": (lambda x: np.pad(x, ((1, 2), (2, 0)), mode="mean", stat_length=2), X34),
    "pad_median": (lambda x: np.pad(x, ((3, 1), (1, 2)), mode="median"), X34),
    "pad_linear_ramp": (lambda x: np.pad(x, ((2, 3), (1, 4)), mode="linear_ramp",
                                         end_values=((1.0, -1.0), (0.5, 2.0))), X34),
    "diagonal": (lambda x: np.diagonal(x), X34),
    "diagonal_offset": (lambda x: np.diagonal(x, 1), X34),
    "diagonal_neg": (lambda x: np.diagonal(x, -2), X34),
    "diagonal_axes": (lambda x: np.diagonal(x, 0, 2, 0), X234),
    "trace": (lambda x: np.trace(x), X34),
    "trace_batched": (lambda x: np.trace(x, 1, axis1=1, axis2=2), X234),
    "diag_embed": (lambda x: np.diag(x[0], -1), X34),
    "diag_extract": (lambda x: np.diag(x, 1), X34),
    "triu": (lambda x: np.triu(x, 1), X234),
    "tril": (lambda x: np.tril(x, -1), X34),
    "atleast_1d": (lambda x: np.atleast_1d(x), rand((), "normal", 3)),
    "atleast_2d": (lambda x: np.atleast_2d(x), X34[0]),
    "atleast_3d": (lambda x: np.atleast_3d(x), X34),
    "copy": (lambda x: np.copy(x) * x.copy(), X34),
    "real": (lambda x: np.real(x) + np.imag(x), X34),
    "conj": (lambda x: np.conj(x) * x.conj(), X34),
    "diagflat": (lambda x: np.diagflat(x[0], 1), X34),
    "dsplit": (lambda x: np.dsplit(x, 2)[1] * 2, X234),
    "matrix_transpose": (lambda x: np.matrix_transpose(x), X234),
    "linalg_matrix_transpose": (lambda x: np.linalg.matrix_transpose(x), X234),
    "linalg_diagonal": (lambda x: np.linalg.diagonal(x, offset=1), X234),
    "linalg_trace": (lambda x: np.linalg.trace(x, offset=-1), X234),
    "ascontiguousarray_like": (lambda x: np.ascontiguousarray(x.T, like=x) * 2, X34),
    "asfortranarray_like": (lambda x: np.asfortranarray(x, like=x) * 2, X34),
}


@pytest.mark.parametrize("name", list(CASES))
def test_shape_op(name):
    f, x = CASES[name]
    check_all(f, x)
    np.testing.assert_allclose(tp.vjp(f, x)[0], f(x))


@SWEEP
@given(shape=shapes(min_dims=1), data=st.data())
def test_transpose_and_flip_any_shape(shape, data):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    x = rand(shape, "normal", 4)
    check_all(lambda x: np.flip(np.transpose(x, perm), 0), x)


@SWEEP
@given(shape=shapes(min_dims=1), data=st.data())
def test_concatenate_and_stack_any_shape(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x, y = rand(shape, "normal", 5), rand(shape, "normal", 6)
    check_all(lambda x, y: np.concatenate([x, y], axis=axis), x, y)
    check_all(lambda x, y: np.stack([x, y], axis=axis), x, y)


@SWEEP
@given(shape=shapes(), reps=st.lists(st.integers(0, 3), min_size=1, max_size=3))
def test_tile_any_shape(shape, reps):
    check_all(lambda x: np.tile(x, tuple(reps)), rand(shape, "normal", 7))


def test_second_derivatives_through_shape_ops():
    f = lambda x: np.sum(np.pad(np.diagonal(np.tile(x, (2, 2)) ** 2), 1) ** 2)  # noqa: E731
    check_all(f, X34, order=2)
    check_all(lambda x: np.sum(np.concatenate([x, x * x]) ** 2), X34, order=2)
    check_all(lambda x: np.split(x * x, 2, axis=1)[0], X34, order=2)


def test_np_array_of_traced_raises_conversion_error():
    with pytest.raises(TypeError, match="cannot convert a traced array"):
        tp.grad(lambda x: np.sum(np.array(x)))(X34)
    with pytest.raises(TypeError, match="cannot convert a traced array"):
        tp.grad(lambda x: np.sum(np.asarray(x)))(X34)
    with pytest.raises(TypeError, match="float"):
        tp.grad(lambda x: float(x))(1.0)


def test_shape_errors_name_the_op():
    with pytest.raises(ValueError, match="reshape"):
        tp.grad(lambda x: np.sum(np.reshape(x, (5, 5))))(X34)
    with pytest.raises(ValueError, match="concatenate"):
        tp.grad(lambda x: np.sum(np.concatenate([x, x.T])))(X34)


def test_pad_other_modes_raise():
    with pytest.raises(NotImplementedError, match=r"np\.pad\(mode='empty'\).*reflect"):
        tp.grad(lambda x: np.sum(np.pad(x, 1, mode="empty")))(X34)


def test_split_of_plain_array_inside_grad_is_plain():
    seen = []

    def f(x):
        seen.extend(np.split(np.ones(4), 2))
        return np.sum(x)
    tp.grad(f)(X34)
    assert all(type(s) is np.ndarray for s in seen)


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {
    np.reshape, np.ravel, np.transpose, np.swapaxes, np.moveaxis, np.rollaxis, np.expand_dims,
    np.squeeze, np.broadcast_to, np.broadcast_arrays, np.concatenate, np.stack, np.hstack,
    np.vstack, np.dstack, np.column_stack, np.append, np.split, np.array_split, np.hsplit,
    np.vsplit, np.flip, np.fliplr, np.flipud, np.rot90, np.roll, np.tile, np.repeat, np.pad,
    np.diagonal, np.trace, np.diag, np.triu, np.tril, np.atleast_1d, np.atleast_2d,
    np.atleast_3d, np.copy, np.real, np.imag, np.conjugate, np.diagflat, np.dsplit,
    np.matrix_transpose, np.linalg.matrix_transpose, np.linalg.diagonal, np.linalg.trace,
    np.ascontiguousarray, np.asfortranarray,
}


@pytest.mark.parametrize("fn,k", [(np.tril, 0), (np.triu, 1), (np.tril, -1)])
def test_triangles_of_a_vector_are_numpys_square_matrix(fn, k):
    """NumPy's tril / triu of a 1-D ``m``: the rows of a square matrix, each
    ``m`` (it was a ValueError under grad)."""
    x = rand((4,), "normal", 31)
    v = tp.vjp(lambda x: fn(x, k), x)[0]
    np.testing.assert_array_equal(v, fn(x, k))
    check_all(lambda x: fn(x, k) * np.arange(16.0).reshape(4, 4), x, order=2)
