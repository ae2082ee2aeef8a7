"""Counting and set routines that used to be listed as constants although
their float results move with a float argument (ops/statistics.py, setops.py, creation.py): bincount and
histogram weights, histogram edges, unique values, full_like's fill value,
sort_complex.  Each is compared with NumPy's forward value and with finite
differences."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapestry as tp
from sweep import SWEEP, rand, shapes
from test_ops_numerics import check, same_forward

SWEEP2 = settings(SWEEP, max_examples=8)


# --- the reproduced silent zeros --------------------------------------------------------
def test_bincount_weights_gradient_is_not_zero():
    idx = np.array([0, 2, 2, 1, 0, 4])
    g = tp.grad(lambda w: np.sum(np.bincount(idx, weights=w) ** 2))(np.arange(6.0))
    counts = np.bincount(idx, weights=np.arange(6.0))
    np.testing.assert_allclose(g, 2 * counts[idx])


def test_histogram_weights_and_unique_and_full_like_are_not_constant():
    x = rand((5,), seed=1)
    assert np.any(tp.grad(lambda w: np.sum(np.histogram(x, bins=3, weights=w)[0] ** 2))(x))
    assert np.any(tp.grad(lambda v: np.sum(np.unique(v) ** 2))(x))
    assert tp.grad(lambda s: np.sum(np.full_like(x * s, s)))(2.0) == pytest.approx(5.0)


# --- bincount ------------------------------------------------------------------------------
@SWEEP2
@given(n=st.integers(0, 8), minlength=st.integers(0, 6))
def test_bincount(n, minlength):
    idx = np.random.default_rng(n).integers(0, 5, size=n)
    check(lambda w: np.bincount(idx, weights=w, minlength=minlength), rand((n,), seed=2))


# --- histogram -------------------------------------------------------------------------------
@SWEEP2
@given(n=st.integers(1, 12), bins=st.sampled_from([1, 3, 5, "auto", "edges"]),
       rng=st.booleans(), density=st.booleans())
def test_histogram(n, bins, rng, density):
    a = rand((n,), seed=3)
    if bins == "edges":
        bins = np.array([-2.0, -0.5, 0.1, 0.7, 2.5])
    kw = {"bins": bins, "density": density, "range": (-1.0, 1.0) if rng else None}
    # counts as a function of the weights; edges (and density) of the data
    with np.errstate(invalid="ignore", divide="ignore"):
        if not np.isfinite(np.histogram(a, **kw)[0]).all():
            return  # nothing inside the range: density is 0 / 0
    if not isinstance(bins, str):  # NumPy estimates bins only for unweighted data
        check(lambda w: np.histogram(a, weights=w, **kw), rand((n,), "pos", 4))
    if n > 1 and not isinstance(bins, np.ndarray):
        check(lambda a: np.histogram(a, **kw)[1], a)
        check(lambda a: np.histogram_bin_edges(a, bins=kw["bins"], range=kw["range"]), a)


def test_histogram_traced_range_and_edges():
    a = rand((9,), seed=5)
    # NumPy dispatches on a, bins and weights only: a traced range needs a traced a
    check(lambda a, lo, hi: np.histogram(a, bins=4, range=(lo, hi), density=True),
          a, np.array(-2.5), np.array(2.5))
    check(lambda e: np.histogram(a, bins=e, density=True)[0], np.array([-3.0, -0.2, 0.4, 3.0]))


@pytest.mark.parametrize("bins", [3, (2, 4), [np.array([-3.0, 0.0, 3.0]), 2]])
@pytest.mark.parametrize("density", [False, True])
def test_histogram2d_and_dd(bins, density):
    x, y, w = rand((10,), seed=6), rand((10,), seed=7), rand((10,), "pos", 8)
    check(lambda w: np.histogram2d(x, y, bins=bins, density=density, weights=w), w)
    if not isinstance(bins, list):
        check(lambda s: np.histogramdd(s, bins=bins, density=density)[1], np.stack([x, y], 1))
    check(lambda s, w: np.histogramdd(s, bins=bins, density=density, weights=w),
          np.stack([x, y], 1), w)


# --- unique ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"return_index": True}, {"return_inverse": True},
                                {"return_counts": True},
                                {"return_index": True, "return_inverse": True,
                                 "return_counts": True}])
def test_unique(kw):
    check(lambda v: np.unique(v, **kw), rand((7,), seed=9))
    check(lambda v: np.unique(v, axis=0, **kw), rand((4, 2), seed=10))


def test_unique_values_of_duplicates_share_the_cotangent():
    """Moving every copy of a repeated value moves that unique value one for
    one: each copy gets an equal share (ties split as in np.maximum)."""
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0, 2.0, 2.0])
    u = rand((3,), seed=11)
    g = tp.grad(lambda v: np.sum(np.unique(v) * u))(x)
    inverse, counts = np.unique(x, return_inverse=True, return_counts=True)[1:]
    np.testing.assert_allclose(g, u[inverse] / counts[inverse], rtol=1e-15)
    values = tp.vjp(lambda v: np.unique(v), x)[0]
    np.testing.assert_array_equal(values, np.unique(x))  # NumPy's exact values


@pytest.mark.parametrize("name", ["unique_values", "unique_counts", "unique_inverse",
                                  "unique_all"])
def test_array_api_unique(name):
    f = getattr(np, name)
    check(lambda v: tuple(f(v)) if name != "unique_values" else f(v), rand((6,), seed=12))


# --- full_like, copyto, sort_complex ------------------------------------------------------
@SWEEP2
@given(shape=shapes(0, 3, 0, 3), fill_shape=st.sampled_from(["scalar", "row"]))
def test_full_like_traced_fill(shape, fill_shape):
    a = rand(shape, seed=13)
    fill = rand(shape[-1:] if fill_shape == "row" and shape else (), seed=14)
    check(lambda a, s: np.full_like(a, s) * a, a, fill)
    check(lambda a, s: np.full_like(a, s, shape=(2,) + np.shape(a)), a, fill)


def test_full_like_into_plain_array_refused_by_name():
    with pytest.raises(TypeError, match="copyto.*broadcast_to"):
        tp.grad(lambda s: np.sum(np.full_like(np.ones(3), s)))(2.0)
    check(lambda s: np.full_like(np.ones(3), 2.0) * s, np.array(1.5))  # plain fill: fine


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # the cast back to real
def test_sort_complex_of_real_input_is_a_permutation():
    x = rand((5,), seed=15)
    same_forward(lambda v: np.sort_complex(v), x)
    u = rand((5,), seed=16)
    g = tp.vjp(lambda v: np.sort_complex(v), x)[1](u.astype(complex))[0]
    np.testing.assert_array_equal(g[np.argsort(x)], u)


def test_histogram_values_on_edges_and_outside_land_where_numpy_puts_them():
    edges = np.array([-1.0, 0.0, 0.5, 2.0])
    a = np.array([-1.0, 0.0, 0.5, 2.0, 2.0, -3.0, 5.0, 0.25, np.nextafter(2.0, 0)])
    w = rand(a.shape, "pos", 17)
    for bins, rng in ((edges, None), (3, (-1.0, 2.0)), (4, None)):
        same_forward(lambda w: np.histogram(a, bins=bins, range=rng, weights=w), w)
        dd_bins = [bins, bins] if isinstance(bins, np.ndarray) else bins
        same_forward(lambda w: np.histogramdd(np.stack([a, a[::-1]], 1), bins=dd_bins,
                                              range=rng and [rng, rng], weights=w), w)


def test_empty_inputs():
    e = np.zeros(0)
    check(lambda w: np.histogram(e, bins=3, weights=w), e)
    check(lambda v: np.unique(v, return_counts=True), e)
    check(lambda w: np.bincount(np.zeros(0, int), weights=w, minlength=2), e)


#: Registry keys checked against finite differences here (tests/test_op_coverage.py).
SWEPT = {np.bincount, np.full_like, np.histogram, np.histogram2d, np.histogram_bin_edges,
         np.histogramdd, np.unique, np.unique_all, np.unique_counts, np.unique_inverse,
         np.unique_values}
