"""tapestry.jit, second round: the lowering's rewrites (dropped steps,
common subexpressions, buffers reused with ``out=``), fused loops and
sparse gradients against call sequences built to make them change a value.

A jitted call returns what the plain call returns: bit for bit for the
NumPy replay, within 1e-13 for fused loops, and the same exception where
the plain call raises one.  Results that the plain call makes distinct
arrays stay distinct (a write into one never shows in another or in an
argument).
"""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.jit import JitWarning

from test_jit_redteam import same


def check(f, *calls, post=None, **jit_kw):
    """Every call of ``jit(f)`` equals the plain call (after ``post`` on
    both results, which may write into them); returns the jit."""
    jf = tp.jit(f, **jit_kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for args in calls:
            ja, pa = copy.deepcopy(args), copy.deepcopy(args)
            jr, pr = jf(*ja), f(*pa)
            if post is not None:
                jr, pr = post(jr, ja), post(pr, pa)
            same(jr, pr)
            same(list(ja), list(pa))
    return jf


X = np.random.default_rng(0).normal(size=300)


def _write_first(result, args):
    """Write into the first result, then return everything the caller can see."""
    result[0][0] = 99.0
    return result, args


# --- simplify: common subexpressions and ``* 1`` never merge what the caller gets
def test_views_of_merged_subexpressions_stay_distinct_results():
    check(lambda x: (np.exp(x)[:5], np.exp(x)[:5]), (X,), (X,), post=_write_first,
          fuse=False)
    check(lambda x: (np.exp(x).reshape(-1), np.exp(x).reshape(-1)), (X,), (X,),
          post=_write_first, fuse=False)


def test_a_view_of_times_one_is_not_a_view_of_the_argument():
    one = np.broadcast_to(1.0, X.shape)

    def f(x):
        return (x * one)[1:], x + 0.0

    check(f, (X,), (X,), post=_write_first, fuse=False)


def test_complex_times_one_is_computed():
    # (1+0j) * (0-0j) is 0+0j and (1+0j) * (1+infj) is nan+infj: not the operand
    z = np.array([0 - 0.0j, 1 + np.inf * 1j, np.inf + 0j] * 100)
    one = np.broadcast_to(np.array(1 + 0j), z.shape)
    with np.errstate(invalid="ignore"):
        check(lambda z: z * one + 0, (z,), (z,), fuse=False)


@pytest.mark.parametrize("zero", [np.float64, np.float32, np.float16, complex])
def test_signed_zero_constants_are_different_subexpressions(zero):
    def f(x):
        a = x * zero(0.0)
        b = x * zero(-0.0)
        return np.copysign(1.0, np.real(a)) + 3 * np.copysign(1.0, np.real(b))

    check(f, (np.ones(3),), (np.ones(3),), fuse=False)


# --- errstate ----------------------------------------------------------------
def test_errstate_the_function_sets_equal_to_the_callers_is_replayed():
    def f(x):
        with np.errstate(divide="raise"):
            return 1.0 / x

    jf = tp.jit(f, fuse=False)
    with np.errstate(divide="raise"):
        jf(X)
        jf(X)
    z = X.copy()
    z[3] = 0.0
    with pytest.raises(FloatingPointError):
        f(z)
    with pytest.raises(FloatingPointError):
        jf(z)


# --- fused loops: an inf or a nan is NumPy's business -------------------------
def _fused(f):
    pytest.importorskip("numba")
    jf = tp.jit(f, fuse=True)
    return jf


def test_a_fused_loop_raises_where_numpy_raises():
    jf = _fused(lambda x: (1.0 / x) * 2.0 + 1.0)
    y = np.array([1.0, 2.0, 3.0])
    jf(y)
    z = np.array([1.0, 0.0, 3.0])
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            jf(z)
    with np.errstate(over="raise"):  # an overflow inside the run, a finite result
        jo = _fused(lambda x: 1.0 / np.exp(x * 2.0))
        jo(y)
        with pytest.raises(FloatingPointError):
            jo(np.array([1.0, 400.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(RuntimeWarning):
            jf(z)


def test_a_fused_python_float_run_raises_as_python_does():
    jf = _fused(lambda x, s, t: x * (s / t + 1.0))
    jf(X, 1.0, 2.0)
    with pytest.raises(ZeroDivisionError):
        jf(X, 1.0, 0.0)
    jp = _fused(lambda x, s: x * (s ** 2 * 2.0))
    jp(X, 1.0)
    with pytest.raises(OverflowError):
        jp(X, 1e200)


def test_fused_nans_and_infs_are_numpys_bits():
    w = np.array([1.0, -1.0, 0.0, -0.0, np.nan, np.inf, -np.inf, 1e308, -1e-320])
    for f in (lambda x: np.log(x) * 2.0 + 1.0, lambda x: (-x) * 0.0 + (x * -0.0),
              lambda x: np.sqrt(x) - x * x):
        jf = _fused(f)
        with np.errstate(all="ignore"):
            for _ in range(2):
                same(jf(w), f(w))


# --- buffers reused with out=: the result is laid out as NumPy lays it out ----
def test_a_reused_buffer_keeps_numpys_layout_of_the_result():
    r = np.random.default_rng(1)
    a, b = r.normal(size=(40, 30)), r.normal(size=(30, 40))

    def f(a, b):
        t = np.exp(a.T)                # Fortran-ordered
        return np.sum(t + b, axis=1)   # summed in layout order

    def g(a, b):
        t = np.exp(a)
        return np.sum(t * 1.5 + b.T, axis=0), np.sum(np.sin(b) * b, axis=1)

    calls = [(a, b), (a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b)),
             (a[:, ::-1], b)]
    check(f, *calls, fuse=False)
    check(g, *calls, fuse=False)


# --- rules give staged values the plain call's memory layout
def test_a_sums_cotangent_has_the_plain_calls_layout_under_jit():
    r = np.random.default_rng(0)
    w = r.normal(size=(10, 4))[[2, 5, 7, 2]]
    x = r.normal(size=4)
    check(tp.grad(lambda w, x: np.sum(w @ x) * np.sum(x), argnums=1), (w, x), fuse=False)


def test_a_function_that_leaves_the_error_state_changed_runs_uncompiled():
    def f(x):
        np.seterr(divide="raise")    # an effect on the caller, every call
        return x * 2.0

    old = np.seterr(all="warn")
    try:
        jf = tp.jit(f, fuse=False)
        with pytest.warns(JitWarning, match="error state"):
            jf(X)
        for _ in range(2):
            np.seterr(all="warn")
            jf(X)
            assert np.geterr()["divide"] == "raise"
    finally:
        np.seterr(**old)


# --- text of a value: the value and the print options decide it -------------
@pytest.mark.parametrize("fmt", [np.array2string, np.array_str, np.array_repr, str, repr,
                                 lambda x: f"{x[0]}|{x}"])
def test_text_of_a_value_follows_the_value_and_the_print_options(fmt):
    x = np.array([1.123456789, 2.0])
    jf = check(fmt, (x,), (x * 2,), (x,), fuse=False)
    with np.printoptions(precision=2):
        assert jf(x) == fmt(x)
    assert jf(x) == fmt(x)


def test_a_function_that_leaves_the_print_options_changed_runs_uncompiled():
    def f(x):
        np.set_printoptions(precision=2)
        return str(x)

    old = np.get_printoptions()
    try:
        jf = tp.jit(f, fuse=False)
        with pytest.warns(JitWarning, match="print options"):
            jf(X[:3])
        np.set_printoptions(**old)
        assert jf(X[:3]) == str(np.round(X[:3], 2)) and np.get_printoptions()["precision"] == 2
    finally:
        np.set_printoptions(**old)
