"""Composite functions (ops/statistics.py, polynomial.py, setops.py, and the
position-picking helpers of shape.py and indexing.py) against finite differences:
float64, float32 and non-contiguous inputs (check_all), orders 1 and 2,
random shapes where the function takes any; each value is NumPy's own."""
import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapestry as tp
from tapestry.testing import check_grads
from sweep import SWEEP, check_all, crand, rand, shapes

HAVE_SCIPY = importlib.util.find_spec("scipy") is not None
#: np.astype, np.cumulative_sum/prod and np.unstack came with NumPy 2.1.
NUMPY_21 = all(hasattr(np, n) for n in ("astype", "cumulative_sum", "cumulative_prod", "unstack"))

X = rand((3, 5), "normal", 1)
Y = rand((2, 5), "normal", 2)
V = rand((6,), "normal", 3)
P = rand((5,), "pos", 4)
IDX = np.random.default_rng(5).integers(0, 3, (3, 5))
XS = np.sort(rand((8,), "normal", 6))
YS = rand((8,), "normal", 7)
WRAPPED = np.remainder(np.linspace(0.0, 25.0, 12) + rand((12,), "unit", 8), 2 * np.pi)

#: name -> (function, arguments, order)
CASES = {
    "cov": (lambda x: np.cov(x), (X,), 2),
    "cov_rowvar_bias": (lambda x: np.cov(x, rowvar=False, bias=True), (X,), 1),
    "cov_y_ddof": (lambda x, y: np.cov(x, y, ddof=2), (X, Y), 1),
    "cov_1d": (lambda v: np.cov(v), (V,), 2),
    "cov_fweights": (lambda x: np.cov(x, fweights=[1, 2, 1, 3, 1]), (X,), 1),
    "cov_aweights_traced": (lambda x, w: np.cov(x, aweights=w), (X, P), 2),
    "cov_both_weights": (lambda x: np.cov(x, fweights=[1, 2, 1, 3, 1], aweights=P, ddof=0),
                         (X,), 1),
    "cov_both_weights_ddof": (lambda x, w: np.cov(x, fweights=[2, 1, 1, 1, 3], aweights=w),
                              (X, P), 1),
    "cov_complex": (lambda z: np.cov(z), (crand((2, 4), "normal", 9),), 1),
    "corrcoef": (lambda x: np.corrcoef(x), (X,), 2),
    "corrcoef_xy": (lambda x, y: np.corrcoef(x, y, rowvar=False), (X.T, V[:5]), 1),
    "astype_f64": (lambda x: np.astype(x, np.float64) * 2, (X,), 2),
    "astype_complex": (lambda x: np.astype(x, np.complex128) * (1 + 2j), (X,), 1),
    "block_2d": (lambda a, b: np.block([[a, b], [a[:1], b[:1]]]), (X[:, :2], X[:, 2:]), 2),
    "block_1d": (lambda v: np.block([v, 1.0, v[:2]]), (V,), 1),
    "block_promote": (lambda v, x: np.block([[v[:5]], [x]]), (V, X), 1),
    "choose_list": (lambda x, y: np.choose(IDX, [x, y[0], 2.0]), (X, Y), 2),
    "choose_array_wrap": (lambda c: np.choose(IDX + 2, c, mode="wrap"), (X[:, None] * V[:3, None, None],), 1),
    "choose_clip": (lambda c: np.choose(IDX - 1, c, mode="clip"), (rand((3, 3, 5), "normal", 10),), 1),
    "compress_axis0": (lambda x: np.compress([True, False, True], x, axis=0), (X,), 2),
    "compress_short": (lambda x: np.compress([0, 1, 1], x, axis=1), (X,), 1),
    "compress_flat": (lambda x: np.compress(X.ravel() > 0, x), (X,), 1),
    "delete_list": (lambda x: np.delete(x, [0, 2], axis=1), (X,), 2),
    "delete_flat": (lambda x: np.delete(x, 4), (X,), 1),
    "delete_slice": (lambda x: np.delete(x, np.s_[::2], axis=0), (X,), 1),
    "delete_mask": (lambda x: np.delete(x, [True, False, True, True, False], axis=-1), (X,), 1),
    "extract": (lambda x: np.extract(X > 0, x), (X,), 2),
    "insert_axis": (lambda x, v: np.insert(x, 1, v[:3], axis=1), (X, V), 2),
    "insert_flat_seq": (lambda x, v: np.insert(x, [0, 2, 2], v[:3]), (X, V), 1),
    "insert_broadcast": (lambda x, v: np.insert(x, [1, 4], v[:1], axis=1), (X, V), 1),
    "insert_const_values": (lambda x: np.insert(x, 2, 5.0, axis=0), (X,), 1),
    "insert_traced_values": (lambda v: np.insert(X, 3, v[:5], axis=0), (V,), 1),
    "cumulative_sum": (lambda v: np.cumulative_sum(v, include_initial=True), (V,), 2),
    "cumulative_sum_axis": (lambda x: np.cumulative_sum(x, axis=1), (X,), 1),
    "cumulative_prod": (lambda x: np.cumulative_prod(x, axis=0, include_initial=True), (X,), 2),
    "divmod": (lambda x, y: np.divmod(3 * x, y)[1], (X, P), 2),
    "modf": (lambda x: np.modf(3 * x)[0], (X,), 2),
    "frexp": (lambda x: np.frexp(x)[0], (X,), 2),
    "ldexp": (lambda x: np.ldexp(x, np.array([-2, 0, 3, 1, 5])), (X,), 2),
    "polyadd": (lambda a, b: np.polyadd(a, b), (V[:3], P), 1),
    "polysub": (lambda a, b: np.polysub(a, b), (P, V[:2]), 1),
    "polyder": (lambda p: np.polyder(p, 2), (V,), 1),
    "polyint": (lambda p, k: np.polyint(p, 2, k), (V, P[:2]), 1),
    "polymul": (lambda a, b: np.polymul(a, b), (V[:3], P[:4]), 2),
    "polydiv": (lambda u, v: np.polydiv(u, v)[0], (V, P[:3]), 2),
    # the remainder's last len(v) - 1 entries (in float32 NumPy keeps a few
    # rounding-sized leading entries that float64 drops: the length varies);
    # order 2 in float64 below (float32 finite differences of it are too noisy)
    "polydiv_remainder": (lambda u, v: np.polydiv(u, v)[1][-2:], (V, P[:3]), 1),
    "polydiv_short": (lambda u, v: np.polydiv(u, v)[1], (V[:2], P[:4]), 1),
    "polymul_scalar": (lambda a, b: np.polymul(a, b), (V[:1], P), 1),
    "polyfit": (lambda x, y: np.polyfit(x, y, 2), (XS, YS), 2),
    "polyfit_weights_2d": (lambda x, y, w: np.polyfit(x, y, 3, w=w),
                           (XS, np.stack([YS, YS ** 2], 1), rand((8,), "pos", 11)), 1),
    "polyfit_full": (lambda x, y: np.polyfit(x, y, 2, full=True)[1] + np.sum(
        np.polyfit(x, y, 2, full=True)[3]), (XS, YS), 1),
    "vander": (lambda x: np.vander(x, 4), (V,), 2),
    "vander_complex": (lambda z: np.vander(z, 3), (crand((4,), "normal", 22),), 2),
    "roots_complex": (lambda p: np.roots(p), (crand((4,), "normal", 23),), 1),
    "polymul_complex": (lambda a, b: np.polymul(a, b), (crand((3,), "normal", 24), V[:2]), 1),
    "vander_increasing": (lambda x: np.vander(x, increasing=True), (V[:4],), 1),
    "resize": (lambda x: np.resize(x, (4, 7)), (X,), 2),
    "unstack": (lambda x: np.unstack(x, axis=1)[2] * np.unstack(x)[1][:3], (X,), 2),
    "unwrap": (lambda p: np.unwrap(p), (WRAPPED,), 2),
    "unwrap_period": (lambda p, per: np.unwrap(p, period=per), (WRAPPED, np.array(6.0)), 1),
    "unwrap_axis": (lambda p: np.unwrap(p, discont=4.0, axis=0),
                    (np.stack([WRAPPED, WRAPPED[::-1]], 1),), 1),
    "trim_zeros": (lambda x: np.trim_zeros(np.concatenate([np.zeros(2), x, np.zeros(1)])),
                   (V,), 2),
    "trim_zeros_front_2d": (lambda x: np.trim_zeros(np.pad(x, ((1, 2), (0, 3))), "f"),
                            (X,), 1),
    "roots": (lambda p: np.roots(p), (V[:5],), 2),
    "roots_zeros": (lambda p: np.roots(np.concatenate([np.zeros(1), p, np.zeros(2)])),
                    (V[:4],), 1),
    "poly": (lambda z: np.poly(z), (V[:4],), 2),
    "poly_matrix": (lambda a: np.poly(a), (X[:, :3],), 1),
    "poly_complex": (lambda z: np.poly(z), (crand((3,), "normal", 12),), 1),
    "union1d": (lambda a, b: np.union1d(a, b), (V, X), 2),
    "setdiff1d": (lambda a, b: np.setdiff1d(a, b), (X, V), 1),
    "setxor1d": (lambda a, b: np.setxor1d(a, b), (V, X[0]), 1),
}


def _value(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", list(CASES))
def test_composite(name):
    if name.startswith(("astype", "cumulative", "unstack")) and not NUMPY_21:
        pytest.skip("a NumPy 2.1 function")
    f, args, order = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check_all(f, *args, order=order)
        traced = tp.vjp(f, *args)[0]
    plain = f(*args)
    assert np.result_type(traced) == np.result_type(plain)
    np.testing.assert_allclose(traced, plain, rtol=1e-10, atol=1e-12)


#: Empty, 0-d and degenerate inputs: name -> function of X.
EDGE = {
    "block_scalars": lambda x: np.block([[x[0, 0], 1.0], [2.0, x[1, 1]]]),
    "choose_0d": lambda x: np.choose(1, [x[0, 0], x[1, 1]]),
    "compress_none": lambda x: np.compress([False] * 3, x, axis=0),
    "extract_none": lambda x: np.extract(np.zeros(15, bool), x),
    "delete_all": lambda x: np.delete(x, slice(None), axis=1),
    "insert_into_empty": lambda x: np.insert(x[:0, 0], 0, x[0, :2]),
    "resize_empty": lambda x: np.resize(x[:0], (3,)) + x[0, :3],
    "resize_to_empty": lambda x: np.resize(x, (0,)),
    "union_with_empty": lambda x: np.union1d(x[:0], x[0]),
    "intersect_disjoint": lambda x: np.intersect1d(x[0], x[1]),
    "poly_no_roots": lambda x: np.poly(x[0, :0]) * x[0],
    "roots_all_zero": lambda x: np.roots(x[0] * 0.0),
    "roots_constant": lambda x: np.roots(x[0, :1]),
    "trim_all_zero": lambda x: np.trim_zeros(x[0] * 0.0),
    "vander_one_column": lambda x: np.vander(x[0], 1),
    "polyder_past_degree": lambda x: np.polyder(x[0], 7),
    "polyfit_degree_0": lambda x: np.polyfit(x[0], x[1], 0),
}


@pytest.mark.parametrize("name", list(EDGE))
def test_empty_and_degenerate_inputs(name):
    check_all(EDGE[name], X)
    np.testing.assert_allclose(tp.vjp(EDGE[name], X)[0], EDGE[name](X))


@pytest.mark.skipif(not HAVE_SCIPY, reason="np.i0's rule needs scipy.special.i1")
def test_i0_every_order_and_at_zero():
    check_all(lambda x: np.i0(x), X, order=2)
    check_grads(lambda x: np.i0(x), (np.zeros(3),), order=2)
    second = tp.grad(lambda x: tp.grad(lambda y: np.sum(np.i0(y)))(x)[0])(np.zeros(1))
    assert second.tolist() == [0.5]  # i0'' = i1' = 1/2 at 0


def test_i0_without_scipy_is_refused_by_name():
    """Without SciPy (simulated in a child process) np.i0 stays refused."""
    code = ("import sys; sys.modules['scipy'] = None\n"
            "import numpy as np, tapestry as tp\n"
            "try:\n    tp.grad(lambda x: np.sum(np.i0(x)))(np.ones(2))\n"
            "except NotImplementedError as e:\n    print(e)\n")
    src = str(Path(tp.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": src}, timeout=120)
    assert "np.i0" in out.stdout and "scipy" in out.stdout, out.stdout + out.stderr


def test_polydiv_remainder_second_order():
    check_grads(lambda u, v: np.polydiv(u, v)[1], (V, P[:3]), order=2)


def test_piecewise_constant_parts_are_plain():
    def f(x):
        q, r = np.divmod(x, 0.5)
        frac, whole = np.modf(x)
        m, e = np.frexp(x)
        assert not any(isinstance(a, tp.Var) for a in (q, whole, e))
        assert isinstance(np.astype(x, np.int32), np.ndarray)
        return np.sum(r + frac + m)
    g = tp.grad(f)(np.array([0.3, 1.7, -2.2]))
    np.testing.assert_allclose(g, 2 + 2.0 ** -np.frexp(np.array([0.3, 1.7, -2.2]))[1])


def test_insert_into_integer_array_is_plain():
    out = tp.vjp(lambda v: np.sum(v) + np.insert(np.arange(4), 1, v).sum(), np.ones(2))[0]
    assert out == 2 + 6 + 2


def test_polyfit_cov_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"np\.polyfit.*cov=True"):
        tp.grad(lambda y: np.sum(np.polyfit(XS, y, 1, cov=True)[0]))(YS)


def test_numpy_errors_come_through():
    with pytest.raises(ValueError):
        tp.grad(lambda x: np.sum(np.block([[x], x])))(V)
    with pytest.raises((ValueError, IndexError)):
        tp.grad(lambda x: np.sum(np.delete(x, 7)))(V)
    with pytest.raises(ValueError):
        tp.grad(lambda x: np.sum(np.cumulative_sum(x)))(X)
    with pytest.raises(ValueError):
        tp.grad(lambda x: np.sum(np.vander(x)))(X)


# --- sets: ties split equally ----------------------------------------------------------
def _tied(a, b, da, db, fun):
    """``fun`` along a direction moving the tied elements together."""
    return lambda t: fun(a + t * da, b + t * db)


def test_set_ties_split_equally_and_move_together():
    a = np.array([3.0, 1.0, 2.0, 1.0])
    b = np.array([2.0, 5.0, 4.0])
    c = np.array([1.0, 10.0, 100.0, 1000.0, 1e4])  # cotangent of union1d's [1, 2, 3, 4, 5]
    ga, gb = tp.grad(lambda a, b: np.sum(np.union1d(a, b) * c), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, [100, 0.5, 5, 0.5])
    np.testing.assert_allclose(gb, [5, 1e4, 1000])
    da, db = (a == 2) * 1.5 + (a == 1) * 0.5, (b == 2) * 1.5
    for fun in (np.union1d, np.intersect1d, np.setxor1d, np.setdiff1d):
        check_all(_tied(a, b, da, db, fun), np.array(0.0), order=2)


def test_intersect1d_with_indices():
    a, b = np.array([3.0, 1.0, 2.0]), np.array([2.0, 7.0, 3.0])
    vals, i1, i2 = tp.vjp(lambda a: np.intersect1d(a, b, return_indices=True), a)[0]
    assert np.array_equal(vals, [2, 3]) and i1.tolist() == [2, 0] and i2.tolist() == [0, 2]
    g = tp.grad(lambda a: np.sum(np.intersect1d(a, b) * np.array([1.0, 10.0])))(a)
    np.testing.assert_allclose(g, [5, 0, 0.5])  # b holds the other half


# --- random shapes --------------------------------------------------------------------
@SWEEP
@given(rows=st.integers(1, 3), n=st.integers(2, 5), rowvar=st.booleans(), bias=st.booleans())
def test_cov_corrcoef_any_shape(rows, n, rowvar, bias):
    x = rand((rows, n) if rowvar else (n, rows), "normal", 13)
    check_all(lambda x: np.cov(x, rowvar=rowvar, bias=bias), x)
    check_all(lambda x: np.corrcoef(x, rowvar=rowvar), x)


@SWEEP
@given(shape=shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), data=st.data())
def test_gathers_any_shape(shape, data):
    x = rand(shape, "normal", 14)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    obj = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=n, unique=True))
    check_all(lambda x: np.delete(x, obj, axis=axis), x)
    if NUMPY_21:
        check_all(lambda x: np.cumulative_sum(x, axis=axis, include_initial=True), x)
    check_all(lambda x: np.resize(x, (3, 2)) if x.size else x, x)
    if n:
        first = np.zeros(len(obj), int)
        check_all(lambda x: np.insert(x, obj, 2 * np.take(x, first, axis), axis), x)


@SWEEP
@given(n=st.integers(1, 6), m=st.integers(1, 6), deg=st.integers(0, 3))
def test_polynomials_any_length(n, m, deg):
    a, b = rand((n,), "normal", 15), rand((m,), "normal", 16)
    check_all(lambda a, b: np.polymul(a, b), a, b)
    check_all(lambda a, b: np.polysub(a, b), a, b)
    check_all(lambda a: np.vander(a, m), a)
    x = np.linspace(-1, 1, deg + 3) + rand((deg + 3,), "unit", 17) * 0.1
    check_all(lambda y: np.polyfit(x, y, deg), rand((deg + 3,), "normal", 18))


@SWEEP
@given(n=st.integers(0, 6), m=st.integers(0, 6), shared=st.integers(0, 3))
def test_sets_any_length(n, m, shared):
    """Generic values (no ties) and values shared by both inputs, moved together."""
    a, b = rand((n,), "normal", 19), rand((m,), "normal", 20)
    for fun in (np.union1d, np.setxor1d, np.setdiff1d):
        check_all(fun, a, b)
    k = min(shared, n)
    b = np.concatenate([b, a[:k]])
    da, db = rand((n,), "normal", 21), np.zeros(len(b))
    db[m:] = da[:k]
    for fun in (np.union1d, np.intersect1d, np.setxor1d):
        check_all(_tied(a, b, da, db, fun), np.array(0.0))


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {
    np.cov, np.corrcoef, np.block, np.choose, np.compress, np.delete, np.extract, np.insert,
    np.divmod, np.modf, np.frexp, np.ldexp, np.polyadd, np.polysub, np.polyder, np.polyint,
    np.polymul, np.polydiv, np.polyfit, np.vander, np.resize, np.unwrap, np.trim_zeros,
    np.roots, np.poly, np.intersect1d, np.union1d, np.setdiff1d, np.setxor1d,
}
if NUMPY_21:
    SWEPT |= {np.astype, np.cumulative_sum, np.cumulative_prod, np.unstack}
if HAVE_SCIPY:
    SWEPT |= {np.i0}
