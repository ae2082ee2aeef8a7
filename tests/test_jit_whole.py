"""tapestry.jit's whole-program kernels (numba): a small program whose
every step the kernel computes runs as one compiled function; its results
are the Python program's (within the fused loops' few ulp; sums in
NumPy's order), with the same types, and everything it cannot reproduce
(an inf or a nan, an index out of bounds, a failed guard, an argument of
another layout) runs the Python program instead."""
from __future__ import annotations

import importlib
import threading
import warnings

import numpy as np
import pytest

import tapestry as tp

pytest.importorskip("numba")
api = importlib.import_module("tapestry.jit.api")
whole = importlib.import_module("tapestry.jit.whole")


@pytest.fixture
def always_whole(monkeypatch):
    """Keep a whole-program kernel whatever the timing says (the tests
    check what it computes, not that it is faster on a busy machine)."""
    monkeypatch.setattr(api, "_faster", lambda new, old, inputs, repeats=5: True)


def same_types(a, b):
    la, ta = tp.tree_flatten(a)
    lb, tb = tp.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        assert type(x) is type(y), (type(x), type(y))
        if isinstance(y, (np.ndarray, np.generic)):
            assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)


def close(a, b, rtol=1e-12):
    """Equal within ``rtol`` of each leaf's scale (its largest element)."""
    same_types(a, b)
    for x, y in zip(tp.tree_flatten(a)[0], tp.tree_flatten(b)[0]):
        x, y = np.asarray(x), np.asarray(y)
        if y.dtype.kind in "biu":
            np.testing.assert_array_equal(x, y)
        else:
            atol = rtol * np.max(np.abs(y), initial=0.0)
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def compiled_whole(jf):
    return jf.cache_info()["whole_programs"]


class PythonProgram:
    """``fn`` jitted with fused loops, never compiled whole: the reference
    for traces (the same guards fail at the same calls)."""

    def __init__(self, fn):
        self.jf = tp.jit(fn, fuse=True)

    def __call__(self, *args):
        whole.ENABLED = False
        try:
            return self.jf(*args)
        finally:
            whole.ENABLED = True

    def traces(self):
        return self.jf.cache_info()["traces"]


# --- realistic small programs -----------------------------------------------------------------
def group_logp(g, u, alpha, beta):
    """W7's item: one group's Poisson log density plus its prior term."""
    uj = u[g["j"]]
    eta = alpha + beta * g["x"] + uj
    return np.sum(g["y"] * eta - np.exp(eta) - g["c"]) - 0.5 * uj * uj


def make_group(rng, j, n=20):
    x = rng.normal(size=n)
    y = rng.poisson(2.0, size=n).astype(np.float64)
    return {"x": x, "y": y, "c": np.cumsum(np.log(np.maximum(y, 1.0))), "j": j}


def mlp(p, x, y):
    h = np.tanh(p["W1"] @ x + p["b1"])
    o = p["W2"] @ h + p["b2"]
    return np.sum((o - y) ** 2)


def gather_scatter(w, idx, x):
    return np.sum(w[idx] * x) + np.max(w) - 0.25 * np.sum(w[1:7] ** 2)


def test_w7_group_compiles_whole_and_matches():
    rng = np.random.default_rng(0)
    u, a, b = rng.normal(size=50), 0.3, -0.2
    vg = tp.value_and_grad(group_logp, argnums=(1, 2, 3))
    jf = tp.jit(vg, fuse=True)
    jf(make_group(rng, 0), u, a, b)
    assert compiled_whole(jf) == 1, jf.explain(make_group(rng, 0), u, a, b)
    for j in (0, 7, 49):
        g = make_group(rng, j)
        close(jf(g, u, a, b), vg(g, u, a, b))
    assert jf.cache_info()["traces"] == 1
    for j in (-1, -50):  # the scatter's guard on the sign of the index: one trace more
        g = make_group(rng, j)
        close(jf(g, u, a, b), vg(g, u, a, b))
    assert jf.cache_info()["traces"] == 2


def test_tiny_mlp_compiles_whole(always_whole):
    rng = np.random.default_rng(1)
    p = {"W1": rng.normal(size=(8, 10)), "b1": rng.normal(size=8),
         "W2": rng.normal(size=(3, 8)), "b2": rng.normal(size=3)}
    vg = tp.value_and_grad(mlp)
    jf = tp.jit(vg, fuse=True)
    x, y = rng.normal(size=10), rng.normal(size=3)
    jf(p, x, y)
    assert compiled_whole(jf) == 1
    for _ in range(5):
        x, y = rng.normal(size=10), rng.normal(size=3)
        close(jf(p, x, y), vg(p, x, y))


def test_gather_and_scatter_compile_whole(always_whole):
    rng = np.random.default_rng(2)
    vg = tp.value_and_grad(gather_scatter)
    jf, ref = tp.jit(vg, fuse=True), PythonProgram(vg)
    w, x = rng.normal(size=30), rng.normal(size=4)
    jf(w, np.array([3, -1, 5, 3]), x)
    ref(w, np.array([3, -1, 5, 3]), x)
    assert compiled_whole(jf) == 1
    for idx in ([3, -1, 5, 3], [0, 0, 0, 0], [-30, 29, 1, -2], [1, 2, 3, 4]):
        w, x = rng.normal(size=30), rng.normal(size=4)
        idx = np.array(idx)
        close(jf(w, idx, x), vg(w, idx, x))
        ref(w, idx, x)
    assert jf.cache_info()["traces"] == ref.traces() == 2  # (the scatter's sign guard)


def test_sums_have_numpys_bits(always_whole):
    """A sum of computed values is NumPy's own order: the same bits."""
    def f(a, m):
        return np.sum(a * 1.5 + 0.25), np.sum(m * m, axis=0), np.sum(m - 1.0, axis=1)
    jf = tp.jit(f, fuse=True)
    rng = np.random.default_rng(3)
    for n in (1, 7, 8, 9, 127, 128, 129, 1000, 4099):
        a, m = rng.normal(size=n) * 1e3, rng.normal(size=(5, 9))
        got, want = jf(a, m), f(a, m)
        assert compiled_whole(jf) >= 1
        same_types(got, want)
        for x, y in zip(got, want):
            assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


# --- what runs the Python program instead -------------------------------------------------------
def test_nan_and_overflow_run_the_python_program(always_whole):
    rng = np.random.default_rng(4)
    u = rng.normal(size=10)
    vg = tp.value_and_grad(group_logp, argnums=(1, 2, 3))
    jf, ref = tp.jit(vg, fuse=True), PythonProgram(vg)
    jf(make_group(rng, 2), u, 0.1, 0.2)
    assert compiled_whole(jf) == 1
    g = make_group(rng, 3)
    g["x"][4] = np.nan
    got, want = jf(g, u, 0.1, 0.2), vg(g, u, 0.1, 0.2)
    same_types(got, want)
    assert np.isnan(got[0]) and np.isnan(want[0])
    g = make_group(rng, 3)
    g["x"][4] = 1e4  # exp overflows: NumPy's warning, as without jit
    with pytest.warns(RuntimeWarning, match="overflow"):
        got = jf(g, u, 0.1, 0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = vg(g, u, 0.1, 0.2)
    same_types(got, want)
    assert got[0] == want[0] == -np.inf
    assert jf.cache_info()["traces"] == 1
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        jf(g, u, 0.1, 0.2)
    ref(make_group(rng, 2), u, 0.1, 0.2)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        ref(g, u, 0.1, 0.2)
    assert jf.cache_info()["traces"] == ref.traces()


def test_an_inf_that_disappears_still_runs_the_python_program(always_whole):
    """An inf made and then compared away leaves no trace in the results:
    the kernel flags it where it is made, so NumPy's warning and a Python
    float's ZeroDivisionError are the plain call's."""
    def f(x, s, t):
        r = 1.0 / x
        return np.sum(np.where(r > 0.0, x, 0.5 * x)) + s / t
    jf, ref = tp.jit(f, fuse=True), PythonProgram(f)
    x = np.array([1.0, -2.0, 3.0])
    jf(x, 1.0, 2.0)
    assert compiled_whole(jf) == 1
    z = np.array([1.0, 0.0, 3.0])
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        got = jf(z, 1.0, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(got, f(z, 1.0, 2.0))
    with pytest.raises(ZeroDivisionError):
        jf(x, 1.0, 0.0)
    ref(x, 1.0, 2.0)
    with pytest.raises(ZeroDivisionError):
        ref(x, 1.0, 0.0)
    assert jf.cache_info()["traces"] == ref.traces()


def test_index_out_of_bounds_raises_numpys_error(always_whole):
    rng = np.random.default_rng(5)
    u = rng.normal(size=10)
    vg = tp.value_and_grad(group_logp, argnums=(1, 2, 3))
    jf = tp.jit(vg, fuse=True)
    jf(make_group(rng, 2), u, 0.1, 0.2)
    assert compiled_whole(jf) == 1
    for j in (10, -11, 2 ** 62, 2 ** 70):
        with pytest.raises(IndexError):
            jf(make_group(rng, j), u, 0.1, 0.2)
    g = make_group(rng, -10)
    close(jf(g, u, 0.1, 0.2), vg(g, u, 0.1, 0.2))

    jg = tp.jit(tp.value_and_grad(gather_scatter), fuse=True)
    w, x = rng.normal(size=30), rng.normal(size=4)
    jg(w, np.array([1, 2, 3, 4]), x)
    assert compiled_whole(jg) == 1
    for bad in ([1, 2, 30, 4], [-31, 0, 0, 0]):
        with pytest.raises(IndexError):
            jg(w, np.array(bad), x)


def test_failed_guards_trace_again(always_whole):
    def f(x, n):
        s = np.sum(x * x)
        k = int(np.sum(x > 0))       # an int guard
        if s - n > 2.0:              # a bool guard
            return s * k, np.asarray(s)  # (a guard on the value: a trace per value)
        return -s * k, float(s)
    jf = tp.jit(f, fuse=True)
    x = np.array([1.0, 2.0, -0.5])
    close(jf(x, 1.0), f(x, 1.0))
    assert compiled_whole(jf) == 1
    for x, n in [(np.array([1.0, 2.0, -0.5]), 1.0), (np.array([1.0, 2.0, 0.5]), 1.0),
                 (np.array([0.1, 0.2, -0.5]), 1.0), (np.array([0.1, 0.2, -0.5]), 2.0),
                 (np.array([1.0, 2.0, -0.5]), 10.0)]:
        close(jf(x, n), f(x, n))
    assert jf.cache_info()["traces"] == 4  # the int guard, then the bool guard, the float
    assert any("guard" in m for m in jf.explain_cache_misses())


def test_other_layouts_run_the_python_program(always_whole):
    def f(x, w):
        return np.sum(np.tanh(x) * w), x * 2.0
    jf = tp.jit(f, fuse=True)
    rng = np.random.default_rng(6)
    x, w = rng.normal(size=6), rng.normal(size=6)
    jf(x, w)
    assert compiled_whole(jf) == 1
    strided = rng.normal(size=12)[::2]
    ro = rng.normal(size=6)
    ro.flags.writeable = False
    for a, b in [(strided, w), (x, ro), (ro, strided)]:
        close(jf(a, b), f(a, b))
    assert jf.cache_info()["traces"] == 1


# --- results ------------------------------------------------------------------------------------
def test_closed_over_arrays_changed_in_place_trace_again(always_whole):
    W = np.arange(12.0).reshape(3, 4) / 10.0
    mask = np.array([True, False, True])

    def f(x):
        y = np.tanh(W @ x)
        return np.sum(np.where(mask, y, 0.0)) + np.sum(np.sum(mask) * y)
    jf = tp.jit(tp.value_and_grad(f), fuse=True)
    x = np.array([0.5, -1.0, 2.0, 0.25])
    close(jf(x), tp.value_and_grad(f)(x))
    assert compiled_whole(jf) == 1
    W[1, 2] = 5.0
    mask[1] = True
    close(jf(x), tp.value_and_grad(f)(x))
    assert jf.cache_info()["traces"] == 2


def test_output_types_and_fresh_results(always_whole):
    def f(x, s, n):
        t = np.sum(x * s)                # np.float64
        return (t, s * 2.0 + 1.0,        # a Python float
                np.sum(x * s, keepdims=True).reshape(()),  # a 0-d array
                x.reshape(2, 3) * 2.0,   # an array
                np.sum(x > 0),           # np.int64
                t > 0,                   # np.bool_
                (x * n)[::2],            # a strided view of a temporary
                np.zeros(3), None, 1.5)
    jf = tp.jit(f, fuse=True)
    x = np.arange(6.0) - 2.0
    want = f(x, 0.5, 3)
    got = jf(x, 0.5, 3)
    assert compiled_whole(jf) == 1
    for _ in range(2):
        got = jf(x, 0.5, 3)
        close(got, want)
        got[3][:] = 7.0  # never the next call's
        got[7][:] = 7.0
        got[2][...] = 7.0
    np.testing.assert_array_equal(x, np.arange(6.0) - 2.0)


def test_reshapes_in_fortran_order_are_declined(always_whole):
    def f(x):
        y = x * 2.0
        return np.ravel(y.reshape(3, 4), "F") + 1.0, np.reshape(y, (4, 3), "F") * 3.0
    jf = tp.jit(f, fuse=True)
    x = np.arange(12.0)
    jf(x)
    close(jf(x), f(x))
    assert compiled_whole(jf) == 0


def test_outputs_that_share_memory_are_not_compiled_whole(always_whole):
    def f(x):
        y = x * 2.0
        return y, y.reshape(2, 2), x.reshape(4)   # two views of y, a view of x
    jf = tp.jit(f, fuse=True)
    x = np.arange(4.0)
    got = jf(x)
    got = jf(x)
    assert compiled_whole(jf) == 0
    assert np.shares_memory(got[0], got[1]) and np.shares_memory(got[2], x)


def test_declines_what_it_cannot_compute(always_whole):
    def f(x):
        return np.sum(np.linalg.inv(x) * 2.0 + 1.0)
    jf = tp.jit(tp.value_and_grad(f), fuse=True)
    x = np.eye(3) + 0.1
    close(jf(x), tp.value_and_grad(f)(x))
    assert compiled_whole(jf) == 0
    x32 = np.ones(4, np.float32)
    js = tp.jit(lambda v: np.sum(v * v + 1.0), fuse=True)
    assert js(x32) == np.sum(x32 * x32 + 1.0) and compiled_whole(js) == 0


def test_threads_give_the_same_bits(always_whole):
    rng = np.random.default_rng(7)
    u = rng.normal(size=40)
    jf = tp.jit(tp.value_and_grad(group_logp, argnums=(1, 2, 3)), fuse=True)
    groups = [make_group(rng, j) for j in range(40)]
    jf(groups[0], u, 0.1, 0.2)
    assert compiled_whole(jf) == 1
    serial = [jf(g, u, 0.1, 0.2) for g in groups]
    got = [None] * len(groups)

    def work(k):
        for i in range(k, len(groups), 4):
            got[i] = jf(groups[i], u, 0.1, 0.2)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(got, serial):
        assert a[0] == b[0] and a[1][0].tobytes() == b[1][0].tobytes()
        assert a[1][1] == b[1][1] and a[1][2] == b[1][2]


def test_turned_off(always_whole, monkeypatch):
    monkeypatch.setattr(whole, "ENABLED", False)
    jf = tp.jit(lambda x: np.sum(x * x), fuse=True)
    jf(np.ones(3))
    assert compiled_whole(jf) == 0


def test_no_arguments_and_a_failed_compile(always_whole, monkeypatch):
    c = np.arange(5.0)
    jf = tp.jit(lambda: np.sum(np.exp(c * 0.5) * 2.0 - c), fuse=True)
    want = np.sum(np.exp(c * 0.5) * 2.0 - c)
    assert abs(jf() - want) <= 1e-13 * abs(want)
    assert type(jf()) is np.float64

    def broken(*args, **kwargs):
        raise RuntimeError("no compiler today")
    monkeypatch.setattr(whole, "load_source", broken)
    jg = tp.jit(lambda x: np.sum(x * x + 1.0), fuse=True)
    with pytest.warns(tp.JitWarning, match="whole program"):
        assert jg(np.ones(3)) == 6.0
    assert jg(np.ones(3)) == 6.0 and compiled_whole(jg) == 0
    assert "compiling it failed" in jg.explain(np.ones(3))


def test_sums_of_transposed_values_are_not_reordered(always_whole):
    """NumPy lays ``W.T * 2.0`` out in Fortran order and sums it in that
    order: the kernel would sum it in C order, so it declines."""
    def f(W):
        return np.sum(W.T * 2.0 + 1.0)
    jf = tp.jit(f, fuse=True)
    W = np.random.default_rng(8).normal(size=(40, 50)) * 1e3
    got = jf(W)
    got = jf(W)
    close(got, f(W))
    assert compiled_whole(jf) == 0
    assert "a whole sum of a strided array" in jf.explain(W)


def test_new_axes_and_einsum_row_sums(always_whole):
    """``x[:, None]`` (a view with a new axis), its gradient, and the
    einsum row sums that unbroadcast many short rows compile whole; the
    row sums have einsum's bits."""
    def f(g, u, alpha):
        uj = u[g["j"]]
        eta = alpha + g["x"] * 0.5 + uj[:, None]
        return np.sum(g["y"] * eta - np.exp(eta)) + np.sum(uj[None] * 2.0)
    vg = tp.value_and_grad(f, argnums=(1, 2))
    jf, ref = tp.jit(vg, fuse=True), PythonProgram(vg)
    rng = np.random.default_rng(5)
    for rows, n in ((9, 1), (9, 2), (10, 7), (12, 8), (8, 17), (30, 20)):
        g = {"x": rng.normal(size=(rows, n)), "y": rng.poisson(2.0, size=(rows, n)) * 1.0,
             "j": rng.integers(0, 11, size=rows)}
        u = rng.normal(size=11)
        got = jf(g, u, 0.3)
        assert compiled_whole(jf) >= 1, jf.explain(g, u, 0.3)
        close(got, vg(g, u, 0.3))
        close(got, ref(g, u, 0.3))


def test_einsum_row_sums_have_einsums_bits(always_whole):
    from tapestry.jit.whole_kernels import einsum_row
    rng = np.random.default_rng(6)
    for n in list(range(1, 40)) + [127, 128, 129, 300]:
        a = rng.normal(size=(8, n)) * 10.0 ** rng.uniform(-8, 8, size=(8, n))
        want = np.einsum("ab->a", a)
        flat = a.reshape(-1)
        got = np.array([einsum_row(flat, r * n, n) for r in range(8)])
        assert got.tobytes() == want.tobytes(), n

    def g(m):
        return np.einsum("abc->a", m * 1.5)
    jf = tp.jit(g, fuse=True)
    m = rng.normal(size=(9, 3, 5))
    got = jf(m)
    assert compiled_whole(jf) == 1
    assert got.tobytes() == g(m).tobytes()


def test_new_axes_other_than_a_view_are_declined(always_whole):
    def f(x):
        return np.sum(x[:, None, 1:] ** 2)  # (a slice with new axes: not a reshape)
    jf = tp.jit(tp.grad(f), fuse=True)
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(jf(x), tp.grad(f)(x))
    assert compiled_whole(jf) == 0
