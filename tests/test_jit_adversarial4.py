"""Round 4 of adversarial call sequences for ``tapestry.jit``: each program
is called several times, and every call's result is compared with the
plain (uncompiled) call's."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapestry as tp
from jit_checks import same
from tapestry.jit import api


@pytest.fixture
def always_whole(monkeypatch):
    """Whole-program kernels and fused loops kept whenever they compile (the
    tests check what they compute, not that they are faster here)."""
    monkeypatch.setattr(api, "_faster", lambda new, old, inputs, repeats=5: True)


def _replays_as_plain(f, calls, **jit_kwargs):
    """Every call of ``jit(f, **jit_kwargs)`` on ``calls`` (a list of
    argument tuples), then on them in reverse and again in order (traces,
    then replays of every signature) gives the plain call's bits."""
    jf = tp.jit(f, **jit_kwargs)
    for args in calls + calls[::-1] + calls:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = f(*args)
            got = jf(*args)
        same(got, want)
    return jf


# --- whole-program kernels: 0.0 against -0.0 in maximum / minimum ----------------------
# NumPy's pick between equal zeros of either sign is its SIMD code's (on x86
# the second operand), not the first; the kernel computes such a call with
# the program instead of guessing.
_A = np.array([-0.0, 0.0, -1.0, 0.0, -2.0])   # its max: zeros of both signs
_B = np.array([0.0, -0.0, 1.0, -0.0, 2.0])    # its min: zeros of both signs


@pytest.mark.parametrize("f", [
    lambda x, y: np.maximum(x, y) * 1.0,
    lambda x, y: np.minimum(x, y) * 1.0,
    lambda x, y: np.maximum(x, 0.0) * 1.0,
    lambda x, y: np.minimum(-0.0, y) * 1.0,
    lambda x, y: np.max(x * 1.0),
    lambda x, y: np.min(y * 1.0),
    lambda x, y: (np.max(x * -1.0), np.min(y * -1.0)),
    tp.grad(lambda x, y: np.sum(np.maximum(x, 0.0) ** 2)),
    tp.value_and_grad(lambda x, y: np.sum(np.minimum(x, y) * 3.0) + np.max(x)),
], ids=["maximum", "minimum", "relu", "minimum_const", "max", "min", "max_min_negated",
        "grad_relu", "value_and_grad"])
def test_signed_zeros_in_maximum_and_minimum_are_numpys_in_a_whole_kernel(f, always_whole):
    pytest.importorskip("numba")
    calls = [(_A, _B), (_B, _A), (_A * 2.0, _B + 1.0), (np.full(5, -0.0), np.zeros(5))]
    jf = _replays_as_plain(f, calls, fuse=True)
    assert jf.cache_info()["whole_programs"] >= 1


# --- whole-program kernels: results laid out as NumPy lays them out --------------------
# NumPy lays out what a ufunc, a copy or astype computes from a transposed
# operand as that operand (order "K": F order here); the kernel made every
# fresh array in C order, so the caller's later np.sum / ravel / tobytes of
# the jitted result differed from the plain result's.
_X = np.random.default_rng(5).normal(size=(3, 4))
_I = np.arange(12).reshape(3, 4)


@pytest.mark.parametrize("f, arg", [
    (lambda x: x.T * 2.0, _X),
    (lambda x: (x.T + 1.0, np.sum(x)), _X),
    (lambda x: x.T > 0.0, _X),
    (lambda x: np.where(x.T > 0.0, x.T, 0.0), _X),
    (lambda x: np.copy(x.T), _X),
    (lambda x: (x.T * 2.0).T, _X),
    (lambda i: i.T * 2, _I),
    (lambda i: i.T.astype(np.float64) * 1.0, _I),
], ids=["ufunc", "ufunc_and_sum", "compare", "where", "copy", "transposed_back", "int",
        "astype"])
def test_whole_kernel_results_are_laid_out_as_numpys(f, arg, always_whole):
    pytest.importorskip("numba")
    jf = tp.jit(f, fuse=True)
    for k in range(3):
        got, want = jf(arg), f(arg)
        for g, w in zip(tp.tree_flatten(got)[0], tp.tree_flatten(want)[0]):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.strides == w.strides, (k, g.strides, w.strides)
            np.testing.assert_array_equal(g, w)
            # what the caller computes from the result: NumPy's sum follows memory order
            assert np.sum(g * 1.0).tobytes() == np.sum(w * 1.0).tobytes()


@pytest.mark.parametrize("f, arg", [
    (lambda v: np.broadcast_to(v, (3, 4)) * 1.0, _X[0]),
    (lambda v: (np.broadcast_to(v[:, None], (4, 3)) * 2.0).T, _X[0]),
    (lambda v: np.broadcast_to(v[:, None], (4, 3)) > 0.0, _X[0]),
    (tp.grad(lambda x: np.sum(x * x)), _X),
], ids=["broadcast_row", "broadcast_column_transposed", "broadcast_compare", "grad"])
def test_whole_kernels_still_return_c_ordered_results(f, arg, always_whole):
    """What NumPy lays out in C order (from C-ordered operands and their
    broadcasts) is still computed whole."""
    pytest.importorskip("numba")
    jf = tp.jit(f, fuse=True)
    jf(arg)
    got, want = jf(arg), f(arg)
    same(got, want)
    assert np.asarray(got).strides == np.asarray(want).strides
    assert jf.cache_info()["whole_programs"] == 1


# --- fused loops: results laid out as NumPy lays them out ------------------------------
# A fused loop wrote every result in C order; NumPy lays out an elementwise
# result from an F-ordered argument or a transposed view in F order.  The
# signature does not hold the layout, so C- and F-ordered arguments share
# the program: each call's results must follow its own arguments.
_Y = np.random.default_rng(6).normal(size=(40, 30))


@pytest.mark.parametrize("f", [
    lambda x: x * 2.0 + 1.0,
    lambda x: x.T * 2.0 + 1.0,
    lambda x: (np.exp(x * 0.1) - x, np.sum(x)),
    lambda x: x.T * 2.0 + np.ones((30, 1)),
    lambda x: (x * 2.0 + 1.0).T,
], ids=["argument", "transposed", "exp_and_sum", "transposed_with_bias", "result_transposed"])
def test_fused_loop_results_are_laid_out_as_numpys(f, always_whole, monkeypatch):
    pytest.importorskip("numba")
    from tapestry.jit import whole
    monkeypatch.setattr(whole, "ENABLED", False)  # the fused loops, not one whole kernel
    jf = tp.jit(f, fuse=True)
    calls = [_Y, np.asfortranarray(_Y), _Y[::-1], np.repeat(_Y, 2, axis=1)[:, ::2], _Y]
    for x in calls + calls[::-1]:
        got, want = jf(x), f(x)
        for g, w in zip(tp.tree_flatten(got)[0], tp.tree_flatten(want)[0]):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.flags.c_contiguous == w.flags.c_contiguous and \
                g.flags.f_contiguous == w.flags.f_contiguous, (g.strides, w.strides)
            np.testing.assert_allclose(g, w, rtol=1e-13)
    assert jf.cache_info()["fused_loops"] >= 1
