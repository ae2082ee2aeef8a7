"""Numerical routines (ops/differences.py, signal.py, creation.py, indexing.py): finite differences, cross products,
interpolation, convolution, grids, selection, averages, polynomials.

Each rule is checked twice: its forward value on traced inputs equals
NumPy's own result, and its derivatives (orders 1 and 2) match finite
differences over the sweeper's dtypes and layouts."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapestry as tp
from sweep import SWEEP, check_all, rand, shapes, variants

#: Order-2 sweeps are the expensive part: fewer examples.
SWEEP2 = settings(SWEEP, max_examples=8)


def same_forward(f, *args):
    """The traced forward pass gives NumPy's value (and structure)."""
    got = tp.vjp(f, *args)[0]
    want = f(*args)
    for g, w in zip(_leaves(got), _leaves(want)):
        g = np.asarray(g)
        low = any(np.result_type(a) == np.float32 for a in args if np.ndim(a) >= 0)
        tol = 2e-5 if low else 1e-9  # the order of roundings differs from NumPy's
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
        assert np.shape(g) == np.shape(w)
        assert g.dtype == np.result_type(w), (g.dtype, np.result_type(w))


def _leaves(x):
    return [l for t in x for l in _leaves(t)] if isinstance(x, (tuple, list)) else [x]


def check(f, *args, order=2):
    for vs in variants(args):  # float64, float32, non-contiguous
        same_forward(f, *vs)
    check_all(f, *args, order=order)


# --- diff, ediff1d, gradient, trapezoid -------------------------------------------------
@SWEEP2
@given(shape=shapes(1, 3, 0, 5), n=st.integers(0, 3), axis=st.integers(-1, 0),
       ends=st.sampled_from(["none", "scalar", "array"]))
def test_diff(shape, n, axis, ends):
    x = rand(shape, seed=1)
    kw = {}
    if ends == "scalar":
        kw = {"prepend": 0.5, "append": -1.0}
    elif ends == "array":
        edge = list(shape)
        edge[axis] = 2
        kw = {"prepend": rand(tuple(edge), seed=2)}
    check(lambda x, *e: np.diff(x, n=n, axis=axis, **({"prepend": e[0]} if e else kw)),
          x, *([kw["prepend"]] if ends == "array" else []))


def test_ediff1d_and_diff_errors():
    x = rand((2, 3), seed=3)
    check(lambda x, b: np.ediff1d(x, to_begin=b, to_end=[7.0]), x, rand((2,), seed=4))
    with pytest.raises(ValueError, match="at least one dimensional"):
        tp.grad(lambda x: np.sum(np.diff(x)))(np.array(1.0))


@SWEEP2
@given(shape=shapes(1, 3, 3, 5), edge_order=st.sampled_from([1, 2]),
       spacing=st.sampled_from(["none", "scalar", "coords"]))
def test_gradient(shape, edge_order, spacing):
    f = rand(shape, seed=5)
    if spacing == "none":
        check(lambda f: np.gradient(f, edge_order=edge_order), f)
    elif spacing == "scalar":
        check(lambda f, h: np.gradient(f, h, axis=-1, edge_order=edge_order), f,
              np.array(0.7))
    else:
        x = np.cumsum(rand(shape[-1:], "pos", 6))  # uneven coordinates
        check(lambda f, x: np.gradient(f, x, axis=-1, edge_order=edge_order), f, x)


@SWEEP2
@given(shape=shapes(1, 3, 0, 4), xkind=st.sampled_from(["dx", "1d", "full"]))
def test_trapezoid(shape, xkind):
    y = rand(shape, seed=7)
    if xkind == "dx":
        check(lambda y, d: np.trapezoid(y, dx=d), y, np.array(0.3))
    elif xkind == "1d":
        check(lambda y, x: np.trapezoid(y, x), y, np.cumsum(rand(shape[-1:], "pos", 8)))
    else:
        check(lambda y, x: np.trapezoid(y, x, axis=0), y, rand(shape, seed=9))


# --- cross -------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")
@SWEEP2
@given(pair=st.sampled_from([((3,), (3,)), ((4, 3), (3,)), ((2, 1, 3), (5, 3)),
                             ((3, 2), (2,)), ((2,), (3,)), ((4, 2), (4, 2))]))
def test_cross(pair):
    a, b = rand(pair[0], seed=10), rand(pair[1], seed=11)
    axisa = 0 if pair[0] == (3, 2) else -1
    try:
        np.cross(a, b, axisa=axisa)
    except ValueError:  # NumPy >= 2.5: 2-vectors refused, traced or not
        with pytest.raises(ValueError, match="3-dimensional vectors"):
            tp.grad(lambda a, b: np.sum(np.cross(a, b, axisa=axisa)))(a, b)
        return
    check(lambda a, b: np.cross(a, b, axisa=axisa), a, b)


def test_linalg_cross():
    check(lambda a, b: np.linalg.cross(a, b, axis=0), rand((3, 4), seed=12), rand((3, 1), seed=13))


# --- interp ------------------------------------------------------------------------------
XP = np.array([-1.5, -0.2, 0.4, 0.9, 2.0])


@SWEEP2
@given(shape=shapes(0, 2, 0, 5), ends=st.booleans())
def test_interp(shape, ends):
    x = rand(shape, seed=12) * 1.5
    x = x + 1e-3 * (np.isclose(x[..., None], XP, atol=1e-4).any(-1))  # off the knots
    fp = rand((5,), seed=13)
    if ends:
        check(lambda x, fp, l, r: np.interp(x, XP, fp, left=l, right=r), x, fp,
              np.array(-3.0), np.array(4.0))
    else:
        check(lambda x, fp: np.interp(x, XP, fp), x, fp)


def test_interp_periodic_and_knots():
    """The knots are differentiable too (before: refused by name, though the
    blend between two knots is smooth in them, as JAX differentiates it)."""
    x = rand((6,), seed=14) * 4
    check(lambda x, fp: np.interp(x, [0.5, 1.0, 2.0, 3.5], fp, period=np.pi), x,
          rand((4,), seed=15))
    x = np.array([-2.0, -0.7, 0.1, 0.55, 1.3, 2.6])  # off the knots, outside them too
    check(lambda xp, x, fp: np.interp(x, xp, fp), XP, x, rand((5,), seed=16))
    check(lambda xp, fp: np.interp(x, xp, fp, left=-1.0, right=3.0), XP, rand((5,), seed=17))
    check(lambda xp: np.interp(x, xp, np.sin(xp), period=4.5), XP)


# --- convolve / correlate ----------------------------------------------------------------
@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@SWEEP2
@given(n=st.integers(1, 6), m=st.integers(1, 6))
def test_convolve_correlate(fn, mode, n, m):
    check(lambda a, v: fn(a, v, mode), rand((n,), seed=16), rand((m,), seed=17))


# --- evenly spaced values, grids, windows -------------------------------------------------
@pytest.mark.parametrize("fn", ["linspace", "logspace", "geomspace"])
@SWEEP2
@given(num=st.integers(0, 6), endpoint=st.booleans(), shape=st.sampled_from([(), (2,), (3, 1)]),
       axis=st.sampled_from([0, -1]))
def test_spaced(fn, num, endpoint, shape, axis):
    start = rand(shape, "pos", 18)
    stop = rand((2,) if shape == (3, 1) else shape, "pos", 19) + 1.0
    f = getattr(np, fn)
    if num < 2 and fn == "linspace":  # step = nan or one value: a plain check
        same_forward(lambda a, b: f(a, b, num, endpoint, axis=axis), start, stop)
        return
    check(lambda a, b: f(a, b, num, endpoint, axis=axis), start, stop)


def test_linspace_retstep_and_logspace_base():
    check(lambda a, b: np.linspace(a, b, 4, retstep=True), np.array(0.5), np.array(2.0))
    check(lambda b, base: np.logspace(0.0, b, 3, base=base), np.array(1.5), np.array(2.5))
    def f(a):
        ints = np.linspace(a, 7.0, 5, dtype=int)  # floored: piecewise constant
        assert type(ints) is np.ndarray and ints.tolist() == [0, 1, 3, 5, 7]
        return a * np.sum(ints)
    assert tp.grad(f)(0.0) == 16.0


@SWEEP2
@given(shapes_=st.lists(shapes(0, 1, 0, 3), min_size=1, max_size=3),
       indexing=st.sampled_from(["xy", "ij"]), sparse=st.booleans())
def test_meshgrid(shapes_, indexing, sparse):
    xs = [rand(s, seed=20 + i) for i, s in enumerate(shapes_)]
    check(lambda *xs: np.meshgrid(*xs, indexing=indexing, sparse=sparse), *xs)


@pytest.mark.parametrize("shape,window,axis", [((7,), 3, None), ((4, 5), (2, 3), None),
                                               ((4, 5), 2, 1), ((3,), 3, None)])
def test_sliding_window_view(shape, window, axis):
    from numpy.lib.stride_tricks import sliding_window_view as swv
    check(lambda x: swv(x, window, axis=axis), rand(shape, seed=24))


# --- selection, averages, polynomials -----------------------------------------------------
@SWEEP2
@given(shape=shapes(0, 2, 0, 4))
def test_select_and_piecewise(shape):
    x = rand(shape, "away", 25)
    check(lambda x, d: np.select([x > 1.0, x < -0.5], [x ** 2, 3 * x], default=d), x,
          np.array(0.25))
    check(lambda x: np.piecewise(x, [x > 0], [np.sqrt, lambda t: t ** 3]), x)
    check(lambda x, c: np.piecewise(x, [x < -1, x > 1], [c, np.exp, np.sin]), x,
          np.array(2.0))


@SWEEP2
@given(sa=st.sampled_from([((4,), None), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), (0, 2)),
                           ((3, 4), None)]),
       returned=st.booleans(), wshape=st.booleans())
def test_average(sa, returned, wshape):
    shape, axis = sa
    a = rand(shape, seed=26)
    if wshape and isinstance(axis, int):
        w = rand((shape[axis],), "pos", 27)
    else:
        w = rand(shape, "pos", 27)
    check(lambda a, w: np.average(a, axis=axis, weights=w, returned=returned), a, w)
    check(lambda a: np.average(a, axis=axis, returned=returned), a)


def test_average_zero_weights():
    with pytest.raises(ZeroDivisionError):
        tp.grad(lambda w: np.average(np.ones(2), weights=w))(np.array([1.0, -1.0]))


@SWEEP2
@given(sa=st.sampled_from([((5,), None), ((3, 4), 1), ((3, 4), (0, 1))]), keep=st.booleans())
def test_ptp(sa, keep):
    check(lambda a: np.ptp(a, axis=sa[1], keepdims=keep), rand(sa[0], seed=28))


@SWEEP2
@given(np_=st.integers(1, 4), xshape=shapes(0, 2, 0, 3))
def test_polyval_poly_polymul(np_, xshape):
    p = rand((np_,), seed=29)
    check(lambda p, x: np.polyval(p, x), p, rand(xshape, seed=30))
    check(lambda r: np.poly(r), p)
    check(lambda a, b: np.polymul(a, b), p, rand((3,), seed=31))


def test_poly_of_matrix_with_repeated_eigenvalues_refused():
    """poly(A) goes through eigvals, which has no derivative at a repeated
    eigenvalue (identity) or a defective matrix (a Jordan block)."""
    for a in (np.eye(2), np.array([[1.0, 1.0], [0.0, 1.0]])):
        with pytest.raises(ValueError, match="eigvals"):
            tp.grad(lambda a: np.sum(np.poly(a)))(a)
    a = np.array([[1.0, 2.0], [0.5, 3.0]])  # distinct: 1 - tr + det, gradient -I + cof(a)
    np.testing.assert_allclose(tp.grad(lambda a: np.sum(np.poly(a)))(a),
                               [[2.0, -0.5], [-2.0, 0.0]], atol=1e-12)


@pytest.mark.parametrize("fn", ["polyadd", "polysub"])
@pytest.mark.parametrize("n1,n2", [(1, 3), (3, 3), (4, 2)])
def test_polyadd_polysub(fn, n1, n2):
    check(getattr(np, fn), rand((n1,), seed=32), rand((n2,), seed=33))


@pytest.mark.parametrize("m", [0, 1, 2, 4])
def test_polyder_polyint(m):
    p = rand((4,), seed=34)
    check(lambda p: np.polyder(p, m), p)
    check(lambda p, k: np.polyint(p, m, k=k), p, rand((max(m, 1),), seed=35))
    check(lambda p: np.polyint(p, m), p)


@pytest.mark.parametrize("N,increasing", [(None, False), (4, True), (1, False), (0, True)])
def test_vander(N, increasing):
    x = rand((5,), seed=36)
    x[2] = 0.0  # integer powers: exact at zero at every order
    check(lambda x: np.vander(x, N, increasing), x)


@pytest.mark.parametrize("fn", ["cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("shape,axis,initial", [((5,), None, False), ((5,), None, True),
                                               ((3, 4), 1, True), ((0,), None, True)])
def test_cumulative(fn, shape, axis, initial):
    f = getattr(np, fn)
    check(lambda x: f(x, axis=axis, include_initial=initial), rand(shape, seed=37))


@pytest.mark.parametrize("kw", [{}, {"rowvar": False}, {"bias": True}, {"ddof": 2},
                                {"fweights": np.array([1, 2, 1, 3, 1, 2])}])
def test_cov_corrcoef(kw):
    m, y = rand((3, 6), seed=38), rand((6,), seed=39)
    if kw.get("rowvar") is False:
        m = m.T
    check(lambda m: np.cov(m, **kw), m)
    check(lambda m, y: np.cov(m, y, **kw), m, y)
    check(lambda m, a: np.cov(m, aweights=a, **kw), m, rand((6,), "pos", 40))
    check(lambda m: np.corrcoef(m, rowvar=kw.get("rowvar", True)), m)
    check(lambda x: np.cov(x), y)  # one variable: a 0-d result


@pytest.mark.parametrize("f", [
    lambda a, b: np.convolve(a, b, "same") ** 2,
    lambda a, b: np.interp(a, [-1.0, 0.0, 1.0], b ** 2),
    lambda a, b: np.diff(a) ** 3 + np.sum(b),
])
def test_third_order_through_slices_and_gathers(f):
    """Slicing's transpose (a scatter) is itself traced at the third order."""
    from tapestry.testing import check_grads
    check_grads(f, (rand((5,), seed=41), rand((3,), seed=42)), order=3)


def test_plain_sequences_as_spacings_and_edges():
    f = rand((4,), seed=43)
    check(lambda f: np.gradient(f, [0.0, 1.0, 3.0, 4.0]), f)
    check(lambda f: np.trapezoid(f, [0.0, 1.0, 3.0, 4.0]), f)
    check(lambda f: np.diff(f, prepend=[0.0], append=[1.0, 2.0]), f)


#: Registry keys checked against finite differences here (tests/test_op_coverage.py).
SWEPT = {np.average, np.convolve, np.corrcoef, np.correlate, np.cov, np.cross, np.diff,
         np.ediff1d, np.gradient, np.interp, np.linspace, np.logspace, np.geomspace,
         np.meshgrid, np.piecewise, np.poly, np.polyadd, np.polysub, np.polyder, np.polyint,
         np.polymul, np.polyval, np.ptp, np.select, np.trapezoid, np.cumulative_sum,
         np.cumulative_prod, np.lib.stride_tricks.sliding_window_view, np.vander,
         np.linalg.cross}
