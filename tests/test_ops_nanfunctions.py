"""The nan* reductions and scans, and ``initial=`` / ``where=`` in the
reductions: forward values equal NumPy's, derivatives match finite
differences (orders 1 and 2), NaN entries get exactly zero gradient."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapestry as tp
from sweep import SWEEP, rand, shape_and_axis
from test_ops_numerics import check

SWEEP2 = settings(SWEEP, max_examples=8)


def with_nans(shape, seed, frac=0.3):
    x = rand(shape, seed=seed)
    x[np.random.default_rng(seed + 100).random(shape) < frac] = np.nan
    return x


NAN_REDUCTIONS = {
    "nansum": np.nansum, "nanmean": np.nanmean, "nanprod": np.nanprod,
    "nanmax": np.nanmax, "nanmin": np.nanmin, "nanvar": np.nanvar, "nanstd": np.nanstd,
    "nanmedian": np.nanmedian,
    "nanquantile": lambda x, **kw: np.nanquantile(x, [0.2, 0.75], **kw),
    "nanpercentile": lambda x, **kw: np.nanpercentile(x, 40.0, **kw),
}


@pytest.mark.parametrize("name", list(NAN_REDUCTIONS))
@SWEEP2
@given(sa=shape_and_axis(min_dims=1, max_dims=3, min_side=1, max_side=4),
       keepdims=st.booleans())
def test_nan_reduction(name, sa, keepdims):
    shape, axis = sa
    x = with_nans(shape, 1)
    f = NAN_REDUCTIONS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices, as NumPy
        if np.isnan(f(x, axis=axis, keepdims=keepdims)).any():
            x = with_nans(shape, 1, frac=0.0)  # finite differences need finite values
        check(lambda x: f(x, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("fn", [np.nancumsum, np.nancumprod])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_nan_scans(fn, axis):
    check(lambda x: fn(x, axis=axis), with_nans((3, 4), 2))


def test_nan_entries_get_zero_gradient():
    x = np.array([1.0, np.nan, 2.0, 4.0])
    for f in (np.nanvar, np.nanstd, np.nanprod, np.nanmedian, np.nansum, np.nancumprod):
        g = tp.grad(lambda x: np.sum(f(x)))(x)
        assert g[1] == 0.0 and np.isfinite(g).all(), f.__name__


def test_nanvar_ddof_and_nanstd_of_constant():
    check(lambda x: np.nanvar(x, axis=0, ddof=1), with_nans((5, 3), 3, 0.2))
    assert tp.grad(lambda x: np.nanstd(x))(np.array([2.0, np.nan, 2.0])).tolist() == [0, 0, 0]


# --- initial= and where= ---------------------------------------------------------------
WHERE_REDUCTIONS = {
    "sum": lambda x, w, **kw: np.sum(x, where=w, initial=0.5, **kw),
    "prod": lambda x, w, **kw: np.prod(x, where=w, **kw),
    "mean": lambda x, w, **kw: np.mean(x, where=w, **kw),
    "max": lambda x, w, **kw: np.max(x, where=w, initial=-0.5, **kw),
    "min": lambda x, w, **kw: np.min(x, where=w, initial=0.25, **kw),
    "nansum": lambda x, w, **kw: np.nansum(x, where=w, **kw),
}


@pytest.mark.parametrize("name", list(WHERE_REDUCTIONS))
@SWEEP2
@given(sa=shape_and_axis(min_dims=1, max_dims=3, min_side=0, max_side=4),
       keepdims=st.booleans())
def test_where_mask(name, sa, keepdims):
    shape, axis = sa
    x = rand(shape, seed=4)
    mask = np.random.default_rng(5).random(shape[-1:]) < 0.6  # broadcast along rows
    f = WHERE_REDUCTIONS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if name == "mean" and not np.isfinite(f(x, mask, axis=axis)).all():
            return  # nothing selected: NumPy's nan
    check(lambda x: f(x, mask, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("fn", [np.max, np.min, np.nanmax, np.sum, np.prod])
@pytest.mark.parametrize("shape,axis", [((0,), None), ((3, 0), 1), ((0, 2), 0), ((4,), None)])
def test_initial_on_empty_and_full(fn, shape, axis):
    x = rand(shape, seed=6)
    check(lambda x, i: fn(x, axis=axis, initial=i), x, np.array(0.3))
    check(lambda x: fn(x, axis=axis, initial=0.0), x)


def test_max_initial_on_empty_returns_numpys_value():
    assert tp.value_and_grad(lambda x: np.max(x, initial=0.0) + np.sum(x))(
        np.zeros(0))[0] == 0.0


#: Registry keys checked against finite differences here (tests/test_op_coverage.py).
SWEPT = {np.nancumprod, np.nancumsum, np.nanmedian, np.nanpercentile, np.nanprod,
         np.nanquantile, np.nanstd, np.nanvar}


@pytest.mark.parametrize("method", ["lower", "nearest", "midpoint", "hazen", "weibull",
                                    "inverted_cdf", "median_unbiased"])
def test_nanquantile_methods_place_q_among_each_slices_valid_values(method):
    """Each slice's position counts its non-NaN values only, for every
    method; the gradient is zero at NaNs and matches finite differences."""
    from tapestry.testing import check_grads
    rng = np.random.default_rng(72)
    x = rng.standard_normal((4, 6))
    x[0, 1] = x[0, 4] = x[2, 0] = np.nan
    for q, axis in ((0.3, None), (np.array([0.1, 0.5, 1.0]), 1), (0.65, 0)):
        f = lambda a: np.nanquantile(a, q, axis=axis, method=method)  # noqa: E731
        y, pull = tp.vjp(f, x)
        np.testing.assert_allclose(y, f(x), rtol=1e-14)
        assert np.all(pull(np.ones_like(y))[0][np.isnan(x)] == 0)
        np.testing.assert_allclose(tp.vjp(lambda a: np.nanpercentile(a, q * 100, axis=axis,
                                                                     method=method), x)[0],
                                   np.nanpercentile(x, q * 100, axis=axis, method=method),
                                   rtol=1e-14)
    nan = np.isnan(x)
    check_grads(lambda a: np.nanquantile(np.where(nan, np.nan, a), 0.37, axis=1, method=method),
                (np.nan_to_num(x),))


@pytest.mark.parametrize("method", ["linear", "nearest", "hazen"])
def test_nanquantile_vmap_of_grad_with_nans_in_some_items(method):
    """vmap(grad(nanquantile)) with NaNs in some items: one NaN-aware branch
    for the batch (was: refused, the branch on NaNs read the batch), a
    loop's values and gradients; in a traced q too."""
    rng = np.random.default_rng(73)
    X = rng.standard_normal((3, 6))
    X[0, 1] = X[1, 2] = X[1, 4] = np.nan
    f = lambda a: np.nanquantile(a.reshape(2, 3), [0.2, 0.7], axis=0, method=method)  # noqa: E731
    g = tp.grad(lambda a: np.sum(np.sin(f(a))))
    np.testing.assert_allclose(tp.vmap(g)(X), np.stack([g(x) for x in X]), rtol=1e-12)
    gq = tp.grad(lambda q, a: np.nanquantile(a, q, method=method))
    q = np.array([0.2, 0.5, 0.9])
    np.testing.assert_allclose(tp.vmap(gq)(q, X), [gq(q[i], X[i]) for i in range(3)], rtol=1e-12)
