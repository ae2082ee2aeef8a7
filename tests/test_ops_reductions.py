"""Reductions, scans, logsumexp and order statistics against finite
differences, with every form of ``axis`` and ``keepdims``."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapestry as tp
import tapestry.numpy as tnp
from tapestry.testing import check_grads
from sweep import SWEEP, check_all, crand, rand, shape_and_axis


def _nonempty_axes(shape, axis):
    axes = range(len(shape)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    return all(shape[a] > 0 for a in axes)


REDUCTIONS = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min,
    "amax": np.amax, "amin": np.amin, "nanmax": np.nanmax, "nanmin": np.nanmin,
    "nansum": np.nansum, "nanmean": np.nanmean, "var": np.var, "std": np.std,
    "logsumexp": tnp.logsumexp,
}
NEEDS_ELEMENTS = {"mean", "nanmean", "max", "min", "amax", "amin", "nanmax", "nanmin", "var",
                  "std", "logsumexp"}  # an empty logsumexp is -inf: no finite differences


@pytest.mark.parametrize("name", list(REDUCTIONS))
@SWEEP
@given(sa=shape_and_axis(min_dims=0), keepdims=st.booleans())
def test_reduction_rule(name, sa, keepdims):
    shape, axis = sa
    if name in NEEDS_ELEMENTS and not _nonempty_axes(shape, axis):
        return  # NumPy itself refuses (or returns nan for) empty reductions
    f = REDUCTIONS[name]
    check_all(lambda x: f(x, axis=axis, keepdims=keepdims), rand(shape, "normal", 1))


@pytest.mark.parametrize("ddof", [0, 1])
def test_var_std_ddof(ddof):
    x = rand((4, 3), "normal", 2)
    check_all(lambda x: np.var(x, axis=0, ddof=ddof), x)
    check_all(lambda x: np.std(x, axis=-1, ddof=ddof, keepdims=True), x)
    check_all(lambda x: x.std(ddof=ddof), x)


def test_std_of_constant_has_zero_gradient():
    assert tp.grad(lambda x: np.std(x))(np.full(3, 2.0)).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("shape, axis", [((), None), ((1,), None), ((1, 3), 0), ((3, 1, 2), 1),
                                         ((2, 1), (1,))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_std_over_one_entry_is_constant_to_every_order(shape, axis, dtype):
    """std over groups of one entry is 0 whatever the entries: its gradient
    and its Hessian are 0 (autograd's test_std checks the derivative of the
    VJP at a scalar), not NaN as at equal entries of a larger group."""
    x = rand(shape, "normal", 4).astype(dtype)
    f = lambda x: np.sum(np.std(x, axis=axis) * 1.5)  # noqa: E731
    assert not np.any(tp.grad(f)(x))
    h = np.asarray(tp.hessian(f)(x))
    assert h.shape == shape + shape and not np.any(h) and not np.any(np.isnan(h))
    check_grads(f, (x.astype(np.float64),), order=2)


def test_prod_exact_with_zeros():
    g = tp.grad(lambda x: np.prod(x))(np.array([2.0, 0.0, 3.0]))
    assert g.tolist() == [0.0, 6.0, 0.0]
    g = tp.grad(lambda x: np.prod(x))(np.array([2.0, 0.0, 0.0]))
    assert g.tolist() == [0.0, 0.0, 0.0]
    x = rand((3, 4), "normal", 3)
    x[1, 2] = x[0, 0] = 0.0
    check_all(lambda x: np.prod(x, axis=1), x)
    check_all(lambda x: np.prod(x, axis=0), x, order=2)


def test_max_ties_split_evenly():
    g = tp.grad(lambda x: np.max(x))(np.array([1.0, 3.0, 3.0, 0.0]))
    assert g.tolist() == [0.0, 0.5, 0.5, 0.0]
    g = tp.grad(lambda x: np.sum(np.min(x, axis=1)))(np.array([[1.0, 1.0, 1.0], [0.0, 2.0, 5.0]]))
    np.testing.assert_allclose(g, [[1 / 3] * 3, [1.0, 0.0, 0.0]])


def test_max_with_initial_and_nan():
    x = np.array([1.0, 2.0])
    assert tp.grad(lambda x: np.max(x, initial=5.0))(x).tolist() == [0.0, 0.0]
    assert tp.grad(lambda x: np.max(x, initial=0.0))(x).tolist() == [0.0, 1.0]
    assert tp.grad(lambda x: np.nanmax(x))(np.array([np.nan, 1.0])).tolist() == [0.0, 1.0]


# --- scans ---------------------------------------------------------------------------
@pytest.mark.parametrize("scan", [np.cumsum, np.cumprod])
@SWEEP
@given(shape=st.sampled_from([(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 2)]),
       axis=st.sampled_from([None, 0, -1]))
def test_scan_rule(scan, shape, axis):
    if axis is not None and len(shape) == 0:
        return
    check_all(lambda x: scan(x, axis=axis), rand(shape, "normal", 4))


def test_cumprod_exact_with_zeros():
    x = np.array([[2.0, 0.0, 3.0, 0.0, 4.0], [1.5, -1.0, 0.0, 2.0, 0.5]])
    check_all(lambda x: np.cumprod(x, axis=1), x)
    # Second derivatives are exact with at most one zero per slice (documented).
    check_all(lambda x: np.cumprod(x, axis=1), x * np.array([1.0, 1.0, 1.0, 0.0, 1.0]) +
              np.array([0.0, 0.0, 0.0, 1.5, 0.0]), order=2)
    assert np.all(np.isfinite(tp.grad(lambda x: np.sum(np.cumprod(x)))(x)))


def test_ufunc_reduce_and_accumulate_use_axis_zero():
    x = rand((3, 4), "normal", 5)
    check_all(lambda x: np.add.reduce(x), x)
    check_all(lambda x: np.maximum.reduce(x, axis=1), x)
    check_all(lambda x: np.multiply.accumulate(x), x)
    assert tp.vjp(lambda x: np.add.reduce(x), x)[0].shape == (4,)


# --- logsumexp ----------------------------------------------------------------------
def test_logsumexp_matches_scipy_and_is_stable():
    from scipy.special import logsumexp as sp_lse
    x = rand((3, 4), "normal", 6) * 500
    for axis in (None, 0, (0, 1), -1):
        np.testing.assert_allclose(tnp.logsumexp(x, axis=axis), sp_lse(x, axis=axis))
        y, _ = tp.vjp(lambda x: tnp.logsumexp(x, axis=axis, keepdims=True), x)
        np.testing.assert_allclose(y, sp_lse(x, axis=axis, keepdims=True))
    assert tnp.logsumexp(np.full(3, -np.inf)) == -np.inf


def test_logsumexp_with_b():
    a, b = rand((3, 4), "normal", 7), rand((4,), "pos", 8)
    check_all(lambda a, b: tnp.logsumexp(a, axis=1, b=b), a, b)
    from scipy.special import logsumexp as sp_lse
    np.testing.assert_allclose(tnp.logsumexp(a, axis=1, b=b), sp_lse(a, axis=1, b=b))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (0, True), ((0, 1), True),
                                           (-1, True)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logsumexp_return_sign_with_negative_b(axis, keepdims, dtype):
    """A ``b`` with negative entries makes the sum negative somewhere: the log
    of its magnitude and its sign, as SciPy's, differentiable in a and b."""
    from scipy.special import logsumexp as sp_lse
    a = rand((3, 4), "normal", 21).astype(dtype)
    b = rand((3, 4), "normal", 22).astype(dtype)
    want, want_sign = sp_lse(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
    got, sign = tp.vjp(lambda a: tnp.logsumexp(a, axis=axis, b=b, keepdims=keepdims,
                                               return_sign=True), a)[0]
    assert np.any(want_sign < 0) and np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_array_equal(sign, want_sign)
    check_all(lambda a, b: tnp.logsumexp(a, axis=axis, b=b, keepdims=keepdims,
                                         return_sign=True)[0], a, b)


def test_logsumexp_return_sign_second_derivative_and_broadcast_b():
    a, b = rand((2, 5), "normal", 23), rand((5,), "normal", 24)
    check_all(lambda a, b: tnp.logsumexp(a, axis=-1, b=b, return_sign=True)[0] ** 2, a, b,
              order=2)
    check_all(lambda a: tnp.logsumexp(a, return_sign=True)[0], rand((), "normal", 25))


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("axis,keepdims,ddof", [(None, False, 0), (1, False, 1), (0, True, 0),
                                                ((0, 1), True, 1), (-1, False, 0)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_var_std_where_are_differentiable(name, axis, keepdims, ddof, dtype):
    """``np.var/np.std(..., where=mask)``: the moments of the selected entries,
    as NumPy's; the entries left out get a zero gradient."""
    f = getattr(np, name)
    a = rand((3, 5), "normal", 26).astype(dtype)
    m = rand((3, 5), "normal", 27) > -0.3
    m[:, :2] = True
    want = f(a, axis=axis, keepdims=keepdims, ddof=ddof, where=m)
    got = tp.vjp(lambda a: f(a, axis=axis, keepdims=keepdims, ddof=ddof, where=m), a)[0]
    assert np.shape(got) == np.shape(want) and np.result_type(got) == np.result_type(want)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    # every dtype and layout, and vmap against a loop (on the float64 values)
    check_all(lambda a: f(a, axis=axis, keepdims=keepdims, ddof=ddof, where=m),
              a.astype(np.float64))
    g = tp.grad(lambda a: np.sum(f(a, axis=axis, ddof=ddof, where=m)))(a)
    assert np.all(g[~m] == 0)


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("axis,keepdims,ddof", [(None, False, 0), (1, False, 1), (0, True, 0),
                                                ((0, 1), True, 1)])
@pytest.mark.parametrize("masked", [False, True])
def test_var_std_with_a_given_mean(name, axis, keepdims, ddof, masked):
    """NumPy 2's ``np.var(a, mean=m)`` (it was refused): the deviations from
    the given ``m``, differentiable in ``a`` and in ``m``."""
    f = getattr(np, name)
    a = rand((3, 5), "normal", 28)
    w = (rand((3, 5), "normal", 29) > -0.3) if masked else True
    if masked:
        w[:, :2] = True  # (two entries in every row and column: count - ddof > 0)
        w[:2] = True
    m = np.mean(a, axis=axis, keepdims=True, where=w) + 0.1
    kw = dict(axis=axis, keepdims=keepdims, ddof=ddof, where=w)
    want = f(a, mean=m, **kw)
    got = tp.vjp(lambda a, m: f(a, mean=m, **kw), a, m)[0]
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    check_all(lambda a, m: f(a, mean=m, **kw), a, m)
    check_all(lambda a: f(a, mean=np.mean(a, axis=axis, keepdims=True, where=w), **kw), a,
              order=2)


def test_std_where_of_equal_entries_has_gradient_zero_and_complex_var_where():
    """One selected entry: std 0 with the gradient np.std's rule gives a
    constant slice (0, not inf * 0); a complex array's var is real."""
    one = np.array([True, False, False])
    assert np.all(tp.grad(lambda a: np.std(a, where=one))(np.arange(3.0)) == 0)
    c = rand((2, 4), "normal", 28) + 1j * rand((2, 4), "normal", 29)
    m = np.array([[True, True, False, True], [False, True, True, True]])
    np.testing.assert_allclose(tp.vjp(lambda c: np.var(c, axis=1, where=m), c)[0],
                               np.var(c, axis=1, where=m))
    check_all(lambda c: np.var(c, axis=1, where=m), c)


def test_softmax_helpers():
    x = rand((2, 5), "normal", 9)
    check_all(lambda x: tnp.softmax(x, axis=-1), x)
    check_all(lambda x: tnp.log_softmax(x, axis=0), x)
    np.testing.assert_allclose(np.sum(tnp.softmax(x), axis=-1), 1.0)


def test_scipy_logsumexp_on_traced_array_points_to_tnp():
    from scipy.special import logsumexp as sp_lse
    with pytest.raises(TypeError, match=r"tnp\.logsumexp"):
        tp.grad(lambda x: sp_lse(x))(np.ones(3))


def test_reduction_errors_are_clear():
    with pytest.raises(TypeError, match=r"np\.sum.*out="):
        tp.grad(lambda x: np.sum(x, out=np.empty(())))(np.ones(2))
    with pytest.raises(ValueError, match="initial"):  # NumPy's own rule
        tp.grad(lambda x: np.max(x, where=x > 0))(np.ones(2))


@pytest.mark.parametrize("f", [
    lambda x: np.sum(x ** 3, axis=0), lambda x: np.prod(x, axis=1), lambda x: np.max(x, axis=1),
    lambda x: np.var(x, axis=0), lambda x: np.std(x), lambda x: tnp.logsumexp(x, axis=1),
    lambda x: np.cumsum(x, axis=1) ** 2, lambda x: np.mean(x * x),
])
def test_second_derivatives(f):
    check_all(f, rand((3, 4), "normal", 10), order=2)


# --- order statistics ----------------------------------------------------------------
@SWEEP
@given(shape=st.sampled_from([(5,), (3, 4), (2, 3, 4), (0, 3)]), axis=st.sampled_from([None, 0, -1]))
def test_sort_rule(shape, axis):
    w = rand((60,), "normal", 11)
    check_all(lambda x: np.sort(x, axis=axis) * w[:np.size(x)].reshape(
        (-1,) if axis is None else np.shape(x)), rand(shape, "normal", 12))


def test_sort_tie_convention_is_a_permutation():
    g = tp.grad(lambda x: np.sum(np.sort(x) * np.array([1.0, 2.0, 3.0])))(np.array([2.0, 1.0, 2.0]))
    assert sorted(g.tolist()) == [1.0, 2.0, 3.0] and g[1] == 1.0


@pytest.mark.parametrize("f", [
    lambda x: np.partition(x, 2, axis=-1)[..., 2],
    lambda x: np.median(x), lambda x: np.median(x, axis=0, keepdims=True),
    lambda x: np.quantile(x, [0.1, 0.75], axis=1), lambda x: np.percentile(x, 40, axis=(0, 1)),
])
def test_order_statistics(f):
    x = rand((4, 5), "normal", 13)
    check_all(f, x)
    np.testing.assert_allclose(tp.vjp(f, x)[0], f(x))


@pytest.mark.parametrize("method", ["lower", "higher", "nearest", "midpoint", "hazen", "weibull",
                                    "median_unbiased", "inverted_cdf", "closest_observation"])
def test_quantile_methods(method):
    """Every NumPy method places q between two neighbouring order statistics."""
    x = rand((4, 5), "normal", 14)
    for f in (lambda x: np.quantile(x, [0.1, 0.45, 0.8], axis=1, method=method),
              lambda x: np.percentile(x, 40, axis=(0, 1), method=method)):
        check_all(f, x)
        np.testing.assert_allclose(tp.vjp(f, x)[0], f(x), rtol=1e-14)


@pytest.mark.parametrize("method", ["linear", "hazen", "weibull", "normal_unbiased", "nearest"])
def test_quantile_is_differentiable_in_q(method):
    """A traced q moves the position (was: silently a constant, gradient 0);
    the methods that pick an order statistic are piecewise constant in q."""
    x = rand((9, 3), "normal", 15)
    for f, q in ((lambda q: np.quantile(x, q, axis=0, method=method), np.array([0.13, 0.62])),
                 (lambda q: np.percentile(x[:, 0], q, method=method), np.float64(37.0)),
                 (lambda q: np.nanquantile(np.where(x > 1.2, np.nan, x), q, axis=0,
                                           method=method), np.array([0.27, 0.71]))):
        for v in (q, q.astype(np.float32)):
            check_grads(f, (v,))
    slope = tp.grad(lambda q: np.quantile(x[:, 0], q, method=method))(0.3)
    assert (slope == 0) == (method == "nearest")


def test_quantile_weights_raise():
    with pytest.raises(NotImplementedError, match="weights"):
        tp.grad(lambda x: np.quantile(x, 0.5, method="inverted_cdf", weights=x))(np.ones(3))


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {f for f in REDUCTIONS.values() if f is not tnp.logsumexp} | {
    np.cumsum, np.cumprod, np.sort, np.partition, np.median, np.quantile, np.percentile}

# --- complex inputs ------------------------------------------------------------------
# var/std of a complex array are real (mean of |x - mean|^2); max/min select by
# NumPy's lexicographic order.  docs/complex.md gives the convention.
COMPLEX_REDUCTIONS = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min,
    "amax": np.amax, "amin": np.amin, "var": np.var, "std": np.std, "logsumexp": tnp.logsumexp,
}


@pytest.mark.parametrize("name", list(COMPLEX_REDUCTIONS))
@SWEEP
@given(sa=shape_and_axis(min_dims=0), keepdims=st.booleans())
def test_reduction_rule_complex(name, sa, keepdims):
    shape, axis = sa
    if name in NEEDS_ELEMENTS and not _nonempty_axes(shape, axis):
        return
    f = COMPLEX_REDUCTIONS[name]
    check_all(lambda x: f(x, axis=axis, keepdims=keepdims), crand(shape, "normal", 1))


@pytest.mark.parametrize("scan", [np.cumsum, np.cumprod])
@pytest.mark.parametrize("shape,axis", [((5,), None), ((3, 4), 1), ((2, 0, 3), 0)])
def test_scan_rule_complex(scan, shape, axis):
    check_all(lambda x: scan(x, axis=axis), crand(shape, "normal", 4))


@pytest.mark.parametrize("ddof", [0, 1])
def test_var_std_complex_is_mean_squared_modulus(ddof):
    z = crand((4, 3), "normal", 2)
    check_all(lambda z: np.var(z, axis=0, ddof=ddof), z)
    check_all(lambda z: np.std(z, ddof=ddof), z)
    # real input reaching var through a complex intermediate: a real gradient
    x = rand((5,), "normal", 3)
    g = tp.grad(lambda x: np.var(x * (1 + 2j)))(x)
    np.testing.assert_allclose(g, 5 * tp.grad(lambda x: np.var(x))(x))


@pytest.mark.parametrize("f", [
    lambda z: np.prod(z, axis=1), lambda z: np.var(z, axis=0), lambda z: np.std(z),
    lambda z: tnp.logsumexp(z, axis=1), lambda z: np.cumprod(z, axis=1),
    lambda z: np.mean(z * z), lambda z: np.max(z, axis=0),
])
def test_second_derivatives_complex(f):
    check_all(f, crand((3, 4), "normal", 10), order=2)


_DTYPE_REDUCTIONS = {
    "sum": lambda x: np.sum(x, axis=0, dtype=np.float64),
    "mean": lambda x: np.mean(x, dtype=np.float64),
    "prod": lambda x: np.prod(x, axis=1, dtype=np.float64),
    "cumsum": lambda x: np.cumsum(x, dtype=np.float64),
    "cumprod": lambda x: np.cumprod(x, axis=0, dtype=np.float64),
    "method_cumsum": lambda x: x.cumsum(axis=1, dtype=np.float64),
    "var": lambda x: np.var(x, axis=0, dtype=np.float64),
    "std": lambda x: np.std(x, dtype=np.float64),
    "nansum": lambda x: np.nansum(x, axis=1, dtype=np.float64),
    "nanmean": lambda x: np.nanmean(x, dtype=np.float64),
    "nanprod": lambda x: np.nanprod(x, dtype=np.float64),
    "nancumsum": lambda x: np.nancumsum(x, dtype=np.float64),
    "trace": lambda x: np.trace(x, dtype=np.float64),
    "down_to_float32": lambda x: np.sum(x.astype(np.float64), axis=0, dtype=np.float32),
}


@pytest.mark.parametrize("name", sorted(_DTYPE_REDUCTIONS))
def test_reduction_dtype_argument_is_kept_when_traced(name):
    """``dtype=`` sets the result's and the accumulation's precision, as in
    NumPy; traced prod/cumsum/cumprod/var/std/nansum/nanmean/trace dropped it
    (float32 values and tangents where NumPy gives float64)."""
    f = _DTYPE_REDUCTIONS[name]
    x = np.array([[1.5, 0.25, 2.0], [0.75, 1.25, 0.5]], np.float32)
    y, t = tp.jvp(f, (x,), (np.ones_like(x),))
    want = f(x)
    assert y.dtype == t.dtype == want.dtype, (y.dtype, t.dtype, want.dtype)
    assert np.allclose(y, want, rtol=1e-6)
    assert tp.grad(lambda x: np.sum(f(x)))(x).dtype == np.float32
    if want.dtype == np.float64:  # finite differences of a float32 result are too coarse
        check_grads(lambda x: f(x), (x.astype(np.float64),))


def test_var_with_ddof_at_least_the_count_is_numpys_inf():
    """``np.var(x, ddof=len(x))``: NumPy divides by max(n - ddof, 0) = 0
    (inf, with a warning); the gradient raised ZeroDivisionError."""
    import warnings
    x = np.arange(1.0, 4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ddof in (3, 5):
            v, g = tp.value_and_grad(lambda x: np.var(x, ddof=ddof))(x)
            assert v == np.var(x, ddof=ddof) == np.inf
            assert g[0] == -np.inf and g[2] == np.inf
