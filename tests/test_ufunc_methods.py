"""ufunc methods on traced arrays (ops/ufunc_methods.py): reduce,
accumulate, outer and reduceat of every differentiable binary ufunc, and
the in-place ``at`` refused with its functional alternative."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapestry as tp
from sweep import SWEEP, rand, shapes
from test_ops_numerics import check

SWEEP2 = settings(SWEEP, max_examples=6)

#: Differentiable binary ufuncs and an input domain where they are smooth.
BINARY = {np.add: "normal", np.subtract: "normal", np.multiply: "normal",
          np.divide: "pos", np.power: "pos", np.maximum: "normal", np.minimum: "normal",
          np.fmax: "normal", np.fmin: "normal", np.logaddexp: "normal",
          np.logaddexp2: "normal", np.hypot: "away", np.arctan2: "away"}


def _id(u):
    return u.__name__


@pytest.mark.parametrize("ufunc", list(BINARY), ids=_id)
@SWEEP2
@given(shape=shapes(1, 3, 1, 4), axis=st.integers(-1, 0), keepdims=st.booleans())
def test_reduce(ufunc, shape, axis, keepdims):
    x = rand(shape, BINARY[ufunc], 1)
    f = lambda x: ufunc.reduce(x, axis=axis, keepdims=keepdims)  # noqa: E731
    fold = np.moveaxis(x, axis, 0)
    acc = fold[0]
    for row in fold[1:]:
        acc = ufunc(acc, row)
    if not np.allclose(np.ravel(f(x)), np.ravel(acc)):  # NumPy's 1-D power/arctan2 reduce
        with pytest.raises(NotImplementedError, match="left fold"):
            tp.vjp(f, x)
        return
    check(f, x)


@pytest.mark.parametrize("ufunc", [np.subtract, np.divide, np.logaddexp], ids=_id)
def test_reduce_initial_axis_none_and_empty(ufunc):
    x = rand((3, 2), BINARY[ufunc], 2)
    check(lambda x, i: ufunc.reduce(x, axis=0, initial=i), x, np.array(1.5))
    if ufunc is np.logaddexp:  # reorderable: axis=None and tuples allowed
        check(lambda x: ufunc.reduce(x, axis=None), x)
        check(lambda x: ufunc.reduce(x, axis=(0, 1)), x)
    else:
        with pytest.raises(ValueError):
            tp.grad(lambda x: ufunc.reduce(x, axis=None))(x)
    if ufunc is np.logaddexp:  # identity -inf on an empty axis: a constant
        assert tp.vjp(lambda x: ufunc.reduce(x, axis=0), np.zeros((0, 2)))[0].tolist() \
            == [-np.inf, -np.inf]


@pytest.mark.parametrize("ufunc", list(BINARY), ids=_id)
@pytest.mark.parametrize("axis", [0, 1])
def test_accumulate(ufunc, axis):
    check(lambda x: ufunc.accumulate(x, axis=axis), rand((3, 4), BINARY[ufunc], 3))


@pytest.mark.parametrize("ufunc", list(BINARY), ids=_id)
def test_outer(ufunc):
    a, b = rand((2, 3), BINARY[ufunc], 4), rand((4,), BINARY[ufunc], 5)
    check(lambda a, b: ufunc.outer(a, b), a, b)
    check(lambda a: ufunc.outer(a, b), a)  # one side traced


@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.subtract, np.maximum], ids=_id)
@pytest.mark.parametrize("indices", [[0, 2, 2, 5], [3, 1, 4], [0]])
def test_reduceat(ufunc, indices):
    check(lambda x: ufunc.reduceat(x, indices), rand((6,), seed=6))
    check(lambda x: ufunc.reduceat(x, indices, axis=1), rand((2, 6), seed=7))


@pytest.mark.parametrize("method", ["reduce", "accumulate", "outer"])
def test_methods_of_unary_ufuncs_raise_numpys_error(method):
    x = rand((3,), seed=13)
    args = (x, x) if method == "outer" else (x,)
    with pytest.raises(ValueError, match="binary"):
        tp.grad(lambda x: np.sum(getattr(np.sin, method)(*((x,) * len(args)))))(x)


def test_nondiff_ufunc_methods_stay_plain():
    x = rand((3,), seed=8)
    f = lambda x: np.sum(x) * np.logical_or.reduce(x > 0)  # noqa: E731
    check(f, x)


# --- at ------------------------------------------------------------------------------------
def test_at_refused_by_name_with_the_functional_form():
    idx = np.array([0, 1, 1])
    with pytest.raises(TypeError, match=r"np\.add\.at.*plain array.*add_at"):
        tp.grad(lambda v: np.sum(np.add.at(np.zeros(3), idx, v) or 0.0))(np.ones(3))
    with pytest.raises(TypeError, match=r"np\.multiply\.at.*traced array"):
        tp.grad(lambda x: np.sum(np.multiply.at(x, idx, 2.0) or x))(np.ones(3))
    with pytest.raises(TypeError, match=r"np\.subtract\.at.*add_at\(a, idx, -v\)"):
        tp.grad(lambda v: np.sum(np.subtract.at(np.zeros(3), idx, v) or 0.0))(np.ones(3))


@pytest.mark.parametrize("key", [np.array([0, 2, 2, 1]), (np.array([0, 1, 1]), slice(None))])
def test_add_at_functional(key):
    from tapestry.ops.ufunc_methods import add_at
    a = rand((3, 2), seed=9)
    vals = rand(np.zeros((3, 2))[key].shape, seed=10)
    ref = a.copy()
    np.add.at(ref, key, vals)
    np.testing.assert_allclose(np.asarray(tp.vjp(lambda a, v: add_at(a, key, v), a, vals)[0]),
                               ref)
    check(lambda a, v: add_at(a, key, v), a, vals)
    check(lambda a, v: add_at(a, key, v), a, np.array(0.5))  # a broadcast scalar


def test_bincount_as_scatter_add():
    idx = np.array([2, 0, 2])
    check(lambda a, v: a + np.bincount(idx, weights=v, minlength=4), rand((4,), seed=11),
          rand((3,), seed=12))


#: Registry keys checked against finite differences here (tests/test_op_coverage.py).
SWEPT = {"ufunc.accumulate", "ufunc.outer", "ufunc.reduce", "ufunc.reduceat"}
