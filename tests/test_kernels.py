"""tapestry.kernel: parsing, plans (a) einsum, (b) expand, (d) blocked NumPy,
values against naive NumPy references and gradients against finite
differences.  Plan (c) (numba) is in test_kernels_numba.py."""
import re
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapestry as tp
from tapestry.kernels import KernelSyntaxError
from tapestry.testing import check_grads

rng = np.random.default_rng(0)
K, I, J = 5, 4, 3


def _bcast(w, x):
    return w[:, :, None] - x[:, None, :]


def _lse(x):
    m = x.max(1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]


# spec, input shapes, reference, expected auto plan letter
CASES = [
    ("y[i,j] := w[k,i]*x[k,j] + b[i]", [(K, I), (K, J), (I,)],
     lambda w, x, b: w.T @ x + b[:, None], "(a) einsum"),
    ("y[i,j] := (w[k,i] - x[k,j])**2", [(K, I), (K, J)],
     lambda w, x: (_bcast(w, x) ** 2).sum(0), "(b) expand"),
    ("y[i,j] := exp(-abs(w[k,i] - x[k,j]))", [(K, I), (K, J)],
     lambda w, x: np.exp(-np.abs(_bcast(w, x))).sum(0), None),
    ("y[i] := exp(x[i,k]) |> log", [(I, K)], _lse, None),
    ("y[i] := x[i+a] * h[a]", [(9,), (3,)],
     lambda x, h: np.correlate(x, h, "valid"), None),
    ("y[i] := x[i-a] * h[a]", [(9,), (3,)],
     lambda x, h: np.convolve(x, h, "valid"), None),
    ("y[i,j] := x[i+a, j+c] * h[a,c]", [(6, 5), (2, 3)],
     lambda x, h: sum(x[a:a + 5, c:c + 3] * h[a, c] for a in range(2) for c in range(3)), None),
    ("y[i,j] := tanh(w[k,i]) * sigmoid(x[k,j]) + relu(b[i])", [(K, I), (K, J), (I,)],
     lambda w, x, b: np.tanh(w).T @ (1 / (1 + np.exp(-x))) + np.maximum(b, 0)[:, None], None),
    ("y[i,j] := maximum(w[k,i], x[k,j])", [(K, I), (K, J)],
     lambda w, x: np.maximum(w[:, :, None], x[:, None, :]).sum(0), None),
    ("y[i] := sqrt(x[i,k]**2 + 1) / (1 + square(h[k]))", [(I, K), (K,)],
     lambda x, h: (np.sqrt(x ** 2 + 1) / (1 + h ** 2)).sum(1), None),
    ("y[i] := (x[i,k] + h[k])**3 - 2*x[i,k]/4", [(I, K), (K,)],
     lambda x, h: ((x + h) ** 3 - x / 2).sum(1), "(b) expand"),
    ("y[i] := x[i,i] * v[i]", [(I, I), (I,)], lambda x, v: np.diag(x) * v, "(a) einsum"),
    ("(max) y[i] := x[i,k]", [(I, K)], lambda x: x.max(1), None),
    ("(min) y[i,j] := w[k,i] + log1p(exp(x[k,j]))", [(K, I), (K, J)],
     lambda w, x: (w[:, :, None] + np.log1p(np.exp(x))[:, None, :]).min(0), None),
]


def _inputs(shapes, dtype):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("plan", [None, "blocked"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("spec,shapes,ref,_", CASES)
def test_kernel_matches_reference_and_finite_differences(spec, shapes, ref, _, dtype, plan,
                                                         monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    if plan and "x[i,i]" in spec:   # diagonals: contraction plans only (see errors below)
        plan = None
    kern = tp.kernel(spec, plan=plan)
    args = _inputs(shapes, dtype)
    y = kern(*args)
    assert y.dtype == dtype
    tol = 2e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(y, ref(*[a.astype(np.float64) for a in args]), rtol=tol, atol=tol)
    check_grads(kern, args)


@pytest.mark.parametrize("spec,shapes,ref,plan", [c for c in CASES if c[3]])
def test_auto_plan_is_contraction(spec, shapes, ref, plan):
    assert plan in tp.kernel(spec).explain()


def test_non_polynomial_falls_back_to_blocked_without_numba(monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    text = tp.kernel("y[i,j] := exp(-abs(w[k,i] - x[k,j]))").explain()
    assert "(d) blocked" in text and "d/dw: w_bar[k,i] := sum over j" in text


def test_inputs_by_position_or_name():
    w, x, b = _inputs([(K, I), (K, J), (I,)], np.float64)
    lin = tp.kernel("y[i,j] := w[k,i]*x[k,j] + b[i]")
    np.testing.assert_allclose(lin(w, x, b), lin(b=b, x=x, w=w))
    np.testing.assert_allclose(lin(w, b=b, x=x), w.T @ x + b[:, None])


@pytest.mark.parametrize("plan", [None, "blocked"])
def test_max_min_ties_split_the_cotangent_evenly(plan, monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0]])
    g = tp.grad(lambda x: np.sum(tp.kernel("(max) y[i] := x[i,k]", plan=plan)(x)))(x)
    np.testing.assert_allclose(g, [[0, .5, .5], [1 / 3] * 3, [0, 0, 1]])
    g = tp.grad(lambda x: np.sum(tp.kernel("y[i] := x[i,k]", reduce="min", plan=plan)(x)))(x)
    np.testing.assert_allclose(g, [[1, 0, 0], [1 / 3] * 3, [0, 1, 0]])


def test_shifted_index_gradient_at_the_boundaries(monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    x, h = np.arange(1.0, 8.0), np.array([1.0, 10.0, 100.0])
    conv = tp.kernel("y[i] := x[i+a] * h[a]")
    gx, gh = tp.grad(lambda x, h: np.sum(conv(x, h)), argnums=(0, 1))(x, h)
    # x[p] is reached by the (i, a) with i + a = p, 0 <= i < 5: fewer at the edges
    np.testing.assert_allclose(gx, [1, 11, 111, 111, 111, 110, 100])
    np.testing.assert_allclose(gh, [x[0:5].sum(), x[1:6].sum(), x[2:7].sum()])
    assert conv(np.ones(3), np.ones(3)).shape == (1,)
    assert conv(np.ones(2), np.ones(3)).shape == (0,)


def test_blocked_plan_second_derivative(monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    w, x = _inputs([(3, 2), (3, 2)], np.float64)
    lap = tp.kernel("y[i,j] := exp(-square(w[k,i] - x[k,j]))")
    check_grads(lambda w, x: np.sum(lap(w, x) ** 2), (w, x), order=2)


def test_blocked_plan_stays_under_its_memory_budget(monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    monkeypatch.setenv("TAPESTRY_KERNEL_BUDGET", str(2 ** 16))
    w, x = _inputs([(200, 300), (200, 100)], np.float32)
    lap = tp.kernel("y[i,j] := exp(-abs(w[k,i] - x[k,j]))")
    f = tp.grad(lambda w, x: np.mean(lap(w, x) ** 2), argnums=(0, 1))
    f(w, x)
    tracemalloc.start()
    f(w, x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    io_bytes = 4 * (w.size + x.size + 300 * 100)
    assert peak < 4 * io_bytes          # the (k, i, j) array alone is 20x io_bytes
    assert 4 * 200 * 300 * 100 > 20 * io_bytes


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 4), st.integers(1, 4), st.integers(1, 3),
       st.sampled_from(["blocked", None]))
def test_random_shapes_dist_and_laplace(k, i, j, plan):
    w = rng.standard_normal((k, i))
    x = rng.standard_normal((k, j))
    import os
    os.environ["TAPESTRY_NO_NUMBA"] = "1"
    try:
        dist = tp.kernel("y[i,j] := (w[k,i] - x[k,j])**2", plan=plan)
        lap = tp.kernel("y[i,j] := exp(-abs(w[k,i] - x[k,j]))", plan="blocked")
        np.testing.assert_allclose(dist(w, x), (_bcast(w, x) ** 2).sum(0), atol=1e-10)
        np.testing.assert_allclose(lap(w, x), np.exp(-np.abs(_bcast(w, x))).sum(0), atol=1e-12)
        if k:
            check_grads(dist, (w, x))
            check_grads(lap, (w, x))
    finally:
        del os.environ["TAPESTRY_NO_NUMBA"]


# --- errors -----------------------------------------------------------------------------
@pytest.mark.parametrize("spec,msg", [
    ("y[i+1] := x[i]", "index expression on the left side"),
    ("y[i,i] := x[i]", "repeats on the left side"),
    ("y[i] := x[i*j]", "non-affine shift"),
    ("y[i] := x[i/2]", "non-affine shift"),
    ("y[i] := x[0]", "is a constant"),
    ("y[i] := foo(x[i])", "unknown function 'foo'"),
    ("y[i] := maximum(x[i])", "maximum takes 2 argument"),
    ("y[i] := x", "needs indices"),
    ("y[i] := _g[i]", "reserved"),
    ("(mean) y[i] := x[i,k]", "unknown reduction"),
    ("y[i,j] := x[i]", "output index 'j' appears nowhere"),
    ("y[i] := x[i] |> maximum", "finalizer"),
    ("y[i] := x[i] $ 2", "cannot read"),
    ("y[i] := exp(x[i,i])", "cannot derive the gradient of x[i,i]"),
])
def test_definition_errors(spec, msg, monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    with pytest.raises(KernelSyntaxError, match=re.escape(msg)):
        tp.kernel(spec)


def test_call_errors():
    dist = tp.kernel("y[i,j] := (w[k,i] - x[k,j])**2")
    with pytest.raises(ValueError, match="index 'k' has range 3 from w .axis 0. but 4 from x"):
        dist(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="w is used with 2 indices .* has shape \\(3,\\)"):
        dist(np.ones(3), np.ones((3, 2)))
    with pytest.raises(TypeError, match="missing input"):
        dist(np.ones((3, 2)))
    with pytest.raises(TypeError, match="unknown input 'z'"):
        dist(np.ones((3, 2)), z=np.ones((3, 2)))
    with pytest.raises(TypeError, match="takes 2 inputs"):
        dist(np.ones((3, 2)), np.ones((3, 2)), np.ones(2))
    shifted = tp.kernel("y[i] := x[i+1] * v[i]")
    with pytest.raises(ValueError, match="reaches index 5, outside x's axis 0 of length 5"):
        shifted(np.ones(5), np.ones(5))
    with pytest.raises(ValueError, match="plan='einsum' needs a body that is one product"):
        tp.kernel("y[i,j] := (w[k,i] - x[k,j])**2", plan="einsum")
    with pytest.raises(ValueError, match="unknown plan"):
        tp.kernel("y[i] := x[i]", plan="gpu")
    with pytest.raises(ValueError, match="choose sum, max or min"):
        tp.kernel("y[i] := x[i]", reduce="mean")


def test_numba_plan_without_numba_names_the_extra(monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    with pytest.raises(ImportError, match=r"tapestry\[numba\]"):
        tp.kernel("y[i] := exp(x[i])", plan="numba")
