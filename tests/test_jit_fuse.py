"""tapestry.jit's fused loops (numba): runs of elementwise steps compiled
into one loop give what the NumPy replay gives (within a few ulp where libm
and NumPy's SIMD functions differ), and never fuse what they cannot."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tapestry as tp

pytest.importorskip("numba")


def close(a, b, rtol=1e-13, scale=False):
    """Equal within ``rtol`` of each element (``scale``: of the largest
    element of each leaf -- a gradient entry summed from terms that cancel
    keeps the terms' absolute rounding, not its own relative one)."""
    la, ta = tp.tree_flatten(a)
    lb, tb = tp.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (x.dtype, y.dtype)
        atol = rtol * np.max(np.abs(y), initial=0.0) if scale else 1e-300
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def chain(x, s=0.5):
    for i in range(30):
        k = i % 5
        if k == 0:
            x = np.sin(x)
        elif k == 1:
            x = x * 1.0001 - s
        elif k == 2:
            x = np.exp(-x * x)
        elif k == 3:
            x = np.tanh(x) / 2.0
        else:
            x = x + np.sqrt(np.abs(x) + 1.0)
    return np.sum(x)


@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (0,)])
def test_forward_and_backward_chains_fuse(shape):
    f = tp.value_and_grad(chain)
    jf = tp.jit(f, fuse=True)
    r = np.random.default_rng(0)
    for _ in range(3):
        x = r.normal(size=shape)
        close(jf(x), f(x))
    info = jf.cache_info()
    assert info["fused_loops"] >= 1 and info["traces"] == 1
    # forward and backward chains share one loop: the sum between them is passed over
    assert info["numpy_calls"] <= 4, jf.explain(x)


def test_python_scalars_keep_their_weak_type_in_a_fused_scalar_run():
    f = lambda s, x: (s * 2.0 + 1.0) * x  # noqa: E731  (a Python float times float32)
    jf = tp.jit(f, fuse=True)
    x = np.ones(3, np.float32)
    for s in (1.5, 2.5):
        out = jf(s, x)
        assert out.dtype == np.float32 and np.array_equal(out, f(s, x))


def test_float32_and_integers_are_not_fused_and_stay_exact():
    f = lambda x, n: np.sum(np.sin(x) * 2 + 1) + np.sum(n * 3 + 1)  # noqa: E731
    jf = tp.jit(f, fuse=True)
    x, n = np.ones(5, np.float32), np.arange(5)
    assert jf(x, n) == f(x, n) and jf(x * 2, n) == f(x * 2, n)


def test_constants_broadcasts_and_views_around_a_run():
    w = np.linspace(0, 1, 12).reshape(3, 4)

    def f(x):
        y = np.exp(x) * w + 1.0           # a constant array of the run's shape
        v = y[:, 1]                        # a view of a run's result
        z = np.tanh(y) * 3.0 - y
        return np.sum(z) + np.sum(v), z.T
    jf = tp.jit(f, fuse=True)
    r = np.random.default_rng(1)
    for _ in range(3):
        x = r.normal(size=(3, 4))
        close(jf(x), f(x))


def test_data_dependent_shapes_and_branches_with_fused_loops():
    def f(x):
        y = x[x > 0]
        z = np.exp(y) * 2.0 + 1.0
        if np.sum(z) > 10:
            return np.sum(np.sin(z) * z)
        return np.sum(np.cos(z) * z)
    jf = tp.jit(f, fuse=True)
    for x in ([1.0, -1, 2], [1.0, 1, 2], [3.0, -3, -1], [0.1, 0.2, -0.3]):
        x = np.array(x)
        close(jf(x), f(x))


@pytest.mark.parametrize("fused_is_faster", [True, False])
def test_auto_fuses_once_a_program_is_hot_and_keeps_the_faster(monkeypatch, fused_is_faster):
    # the timing contest is replaced by its verdict: no test depends on a clock
    import importlib
    jit_api = importlib.import_module("tapestry.jit.api")
    monkeypatch.setattr(jit_api, "_faster", lambda new, old, inputs: fused_is_faster)
    f = tp.value_and_grad(chain)
    jf = tp.jit(f, fuse="auto", fuse_after=3)
    x = np.ones(4) * 0.3
    for k in range(5):
        close(jf(x + k), f(x + k))
    assert (jf.cache_info()["fused_loops"] >= 1) == fused_is_faster


def test_threads_run_fused_loops_concurrently():
    f = tp.grad(chain)
    jf = tp.jit(f, fuse=True)
    r = np.random.default_rng(2)
    xs = [r.normal(size=64) for _ in range(32)]
    jf(xs[0])
    got = [None] * len(xs)

    def work(k):
        for i in range(k, len(xs), 4):
            got[i] = jf(xs[i])
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for x, g in zip(xs, got):
        close(g, f(x))


def test_fuse_true_without_numba_names_the_extra(monkeypatch):
    monkeypatch.setenv("TAPESTRY_NO_NUMBA", "1")
    with pytest.raises(ImportError, match=r"tapestry\[numba\]"):
        tp.jit(chain, fuse=True)
    assert tp.jit(chain).cache_info()["fused_loops"] == 0


def test_broadcast_operands_join_a_run():
    def f(x, b, c):
        h = np.tanh(x + b) * 2.0 + c      # b: (3,), c: (4, 1) against x: (4, 3)
        return np.sum(h * h - b)
    g = tp.value_and_grad(f, argnums=(0, 1, 2))
    jg = tp.jit(g, fuse=True)
    r = np.random.default_rng(3)
    for _ in range(3):
        args = (r.normal(size=(4, 3)), r.normal(size=3), r.normal(size=(4, 1)))
        close(jg(*args), g(*args))
    assert jg.cache_info()["fused_loops"] >= 1


def test_a_power_with_an_array_exponent_is_not_mistaken_for_a_square():
    e = np.array([2.0, 3.0, 0.5])
    f = tp.value_and_grad(lambda x: np.sum(np.exp(x) ** e + x * 2.0))
    jf = tp.jit(f, fuse=True)
    x = np.array([0.1, 0.2, 0.3])
    close(jf(x), f(x))
    close(jf(x + 1), f(x + 1))


# --- exp in loops of any size (tapestry.jit.vmath) -------------------------------------
def test_vexp_is_within_one_ulp_of_numpy_over_its_range():
    from tapestry.jit import vmath
    from numba import njit

    @njit(error_model="numpy")
    def k(x, o):
        bad = False
        for i in range(x.shape[0]):
            o[i] = vmath.vexp(x[i])
            bad |= not vmath.exp_in_range(x[i])
        return bad

    r = np.random.default_rng(3)
    x = np.concatenate([r.uniform(vmath.EXP_LO, vmath.EXP_HI, 200_000), r.normal(size=200_000),
                        r.normal(size=1000) * 1e-12,
                        [vmath.EXP_LO, vmath.EXP_HI, 0.0, -0.0, 5e-324, np.log(2) / 2,
                         -np.log(2) / 2, 1.0, -1.0]])
    o = np.empty_like(x)
    assert not k(x, o)
    ref = np.exp(x)
    assert np.max(np.abs(o - ref) / np.spacing(ref)) <= 1.0
    for bad in (np.nan, np.inf, -np.inf, vmath.EXP_HI + 1e-9, 710.0, -708.5, -800.0):
        assert k(np.array([0.5, bad]), np.empty(2))


def test_vtanh_is_within_two_ulp_of_numpy_everywhere():
    from tapestry.jit import vmath
    from numba import njit

    @njit(error_model="numpy")
    def k(x, o):
        for i in range(x.shape[0]):
            o[i] = vmath.vtanh(x[i])

    r = np.random.default_rng(5)
    g = np.geomspace(1e-310, 1e3, 20_000)
    x = np.concatenate([r.uniform(-1, 1, 200_000), r.normal(size=200_000) * 5, g, -g,
                        [0.0, -0.0, np.inf, -np.inf, 0.625, -0.625, np.nextafter(0.625, 0),
                         20.0, -20.0, 19.06, 5e-324, -5e-324]])
    o = np.empty_like(x)
    k(x, o)
    ref = np.tanh(x)
    assert np.array_equal(np.signbit(o), np.signbit(ref))
    assert np.max(np.abs(o - ref) / np.spacing(np.abs(ref))) <= 2.0


def mlp_loss(w1, w2, x):
    h = np.tanh(w1 @ x + 0.1)
    return np.sum(np.tanh(w2 @ h) ** 2)


def test_tanh_fuses_into_large_runs_with_its_backward():
    r = np.random.default_rng(6)
    w1, w2, x = r.normal(size=(64, 16)), r.normal(size=(8, 64)) * 0.3, r.normal(size=(16, 400))
    f = tp.value_and_grad(mlp_loss, argnums=(0, 1))
    jf = tp.jit(f, fuse=True)
    for s in (1.0, 1.5):
        close(jf(w1 * s, w2, x), f(w1 * s, w2, x), rtol=1e-13, scale=True)
    prog = jf.explain(w1, w2, x).split("program:")[1]
    assert "tanh_" not in prog, prog
    x[3, 7] = np.nan  # a nan reaching tanh: the run is NumPy's
    with np.errstate(invalid="ignore"):
        close(jf(w1, w2, x), f(w1, w2, x))


def w6_loss(u, a, b, x, y, c):
    eta = a + b * x + np.reshape(u, (-1, 1))
    return np.sum(y * eta - np.exp(eta) - c) - 0.5 * np.sum(u ** 2)


def test_exp_fuses_into_large_runs_and_matches_numpy():
    r = np.random.default_rng(4)
    G = 3000  # 60,000 elements: above MAX_TRANSCENDENTAL_SIZE
    x, u = r.normal(size=(G, 20)), r.normal(0.0, 0.5, G)
    y = r.poisson(np.exp(0.3 + 0.5 * x)).astype(float)
    c = np.log1p(y)
    f = tp.value_and_grad(w6_loss, argnums=(0, 1, 2))
    jf = tp.jit(f, fuse=True)
    for a in (0.2, 0.3):
        close(jf(u, a, 0.4, x, y, c), f(u, a, 0.4, x, y, c), rtol=1e-13, scale=True)
    prog = jf.explain(u, 0.2, 0.4, x, y, c)
    assert jf.cache_info()["fused_loops"] >= 1
    # exp is inside a loop: no NumPy exp call is left in the program
    assert "exp_" not in prog.split("program:")[1], prog


@pytest.mark.parametrize("bad", [800.0, -800.0, np.nan, np.inf, -np.inf])
def test_exp_out_of_its_loop_range_is_numpys(bad):
    x = np.full(3000, 0.5)
    x[1234] = bad
    f = lambda x: np.exp(x * 1.0) * 2.0 + 1.0  # noqa: E731
    jf = tp.jit(f, fuse=True)
    with np.errstate(all="ignore"):
        want = f(x)
    for _ in range(2):
        with np.errstate(all="ignore"):
            got = jf(x)
        assert np.array_equal(got, want, equal_nan=True)
    with np.errstate(over="raise"):
        if bad == 800.0:
            with pytest.raises(FloatingPointError):
                jf(x)


# --- large runs cut along axis 0 over threads ------------------------------------------
def _big_run(x, c):
    return np.exp(x * 0.5 - c) * x + np.tanh(c) * 2.0


def test_a_run_cut_over_threads_gives_the_bits_of_one_call(monkeypatch):
    from tapestry.jit import fuse as fuse_mod
    r = np.random.default_rng(7)
    x = r.normal(size=(3 * fuse_mod.SPLIT_MIN // 16 + 5, 16))   # 3 pieces of uneven size
    c = r.normal(size=(1, 16))                                    # broadcast along axis 0
    # exp and tanh in the loops however many threads (else they may stay NumPy's on one)
    monkeypatch.setattr(fuse_mod, "loop_over_numpy", lambda fn: 0.5)
    monkeypatch.setattr(fuse_mod, "THREADS", 3)
    cut = tp.jit(_big_run, fuse=True)
    cut(x, c)                       # the trace
    got = cut(x, c)                 # the fused program
    assert fuse_mod._parts(x.shape) == 3 and cut.cache_info()["fused_loops"] >= 1
    monkeypatch.setattr(fuse_mod, "THREADS", 1)
    whole = tp.jit(_big_run, fuse=True)
    whole(x, c)
    assert np.array_equal(got, whole(x, c))
    close(got, _big_run(x, c), scale=True)
    # a nan in the last piece only: that run is NumPy's (nan where NumPy has it)
    monkeypatch.setattr(fuse_mod, "THREADS", 3)
    x[-1, 3] = np.nan
    with np.errstate(invalid="ignore"):
        got, want = cut(x, c), _big_run(x, c)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).sum() == 1
    close(np.nan_to_num(got), np.nan_to_num(want), scale=True)


def test_runs_are_cut_only_when_large(monkeypatch):
    from tapestry.jit import fuse as fuse_mod
    monkeypatch.setattr(fuse_mod, "THREADS", 2)
    assert fuse_mod._parts((1000, 20)) == 1
    assert fuse_mod._parts(()) == 1
    assert fuse_mod._parts((1, 10 ** 6)) == 1        # one row: nothing to cut along axis 0
    assert fuse_mod._parts((10 ** 5, 20)) == 2
    monkeypatch.setattr(fuse_mod, "THREADS", 1)
    assert fuse_mod._parts((10 ** 5, 20)) == 1


def test_a_fused_loops_dead_result_takes_a_later_products_result():
    # W4's backward under fuse=True: tanh and 1 - tanh**2 come from one loop;
    # W2.T broadcast times the second, once the first is read for the last time
    def f(x, w):
        t = np.tanh(x + 1.0)
        d = 1.0 - t * t
        s = np.sum(t, axis=1)
        g = np.broadcast_to(w[:, None], d.shape) * d
        return np.sum(g, axis=0), s, np.sum(g, axis=1)
    r = np.random.default_rng(4)
    x, w = r.normal(size=(60, 50)), r.normal(size=60)
    jf = tp.jit(f, fuse=True)
    for args in ((x, w), (x * 2.0, w), (np.asfortranarray(x), w[::-1])):
        close(jf(*args), f(*args), scale=True)
    assert jf.cache_info()["fused_loops"] >= 1
    mul = [ln for ln in jf.explain(x, w).splitlines() if "multiply" in ln and "fused" not in ln]
    assert mul and "out=" in mul[0], jf.explain(x, w)


def test_large_runs_stay_whole_inside_a_parallel_worker(monkeypatch):
    """A fused run inside a parallel_sum / parallel_map worker is not cut
    over threads: the worker's siblings already hold the other cores."""
    import importlib
    fuse = importlib.import_module("tapestry.jit.fuse")
    executors = importlib.import_module("tapestry.parallel.executors")
    monkeypatch.setattr(fuse, "THREADS", 2)
    shape = (4, 1 << 16)
    assert fuse._parts(shape) == 2
    with executors._WorkerScope():
        assert fuse._parts(shape) == 1
    assert fuse._parts(shape) == 2


# --- large programs: BLAS, row-wise steps, broadcast views, NumPy's transcendentals ---
def _threads_used(monkeypatch, fuse_mod):
    """A list that grows by one each time a fused run is cut over threads."""
    cuts = []
    real = fuse_mod._in_threads

    def spy(*a, **k):
        cuts.append(a[3])  # (kern, args, units, parts)
        return real(*a, **k)
    monkeypatch.setattr(fuse_mod, "_in_threads", spy)
    monkeypatch.setattr(fuse_mod, "THREADS", 2)
    return cuts


def test_a_program_calling_blas_keeps_its_loops_on_the_calling_thread(monkeypatch):
    """OpenBLAS's threads spin after a GEMM: a loop cut over threads would
    share their cores (W4 ran 2.7x slower), so a program with ``@`` runs
    its loops whole; the same arithmetic without ``@`` is cut."""
    from tapestry.jit import fuse as fuse_mod
    from tapestry.jit import whole
    monkeypatch.setattr(whole, "ENABLED", False)  # the fused runs, not one whole kernel
    cuts = _threads_used(monkeypatch, fuse_mod)
    r = np.random.default_rng(11)
    x, w, v = r.normal(size=(1 << 13, 32)), r.normal(size=(32, 32)), r.normal(size=(1 << 13, 32))

    def with_blas(x, w):
        y = x @ w
        return (y * 0.5 - 1.0) * y

    def without(x, v):
        return (x * 0.5 - 1.0) * v
    assert fuse_mod._parts((1 << 13, 32)) == 2
    for f, args in ((with_blas, (x, w)), (without, (x, v))):
        jf = tp.jit(f, fuse=True)
        jf(*args)
        got = jf(*args)
        assert jf.cache_info()["fused_loops"] >= 1
        assert np.array_equal(got, f(*args))  # arithmetic: NumPy's bits
        assert (len(cuts) > 0) == (f is without), (f.__name__, cuts)


def test_a_row_wise_step_is_a_loop_with_numpys_bits():
    """``h + b[:, None]``: NumPy makes one inner loop per row; alone it is
    a fused loop, whose arithmetic gives NumPy's bits."""
    r = np.random.default_rng(12)
    h, b = r.normal(size=(64, 64, 256)), r.normal(size=(64, 64, 1))
    f = lambda h, b: h + b  # noqa: E731
    jf = tp.jit(f, fuse=True)
    jf(h, b)
    assert np.array_equal(jf(h, b), f(h, b))
    assert jf.cache_info()["fused_loops"] == 1
    small = tp.jit(f, fuse=True)  # below ROWWISE_MIN: NumPy's call
    small(h[:1, :2], b[:1, :2])
    assert small.cache_info()["fused_loops"] == 0
    flat = tp.jit(f, fuse=True)   # no row-wise operand: NumPy's call
    flat(h, h[:1])
    assert flat.cache_info()["fused_loops"] == 0


def test_a_broadcast_view_is_read_through_its_source():
    """W4's backward ``broadcast_to(W2.T, d.shape) * (1 - t * t)``: the loop
    reads ``W2.T`` (one element per row), and gives NumPy's bits."""
    r = np.random.default_rng(13)
    t, w = r.normal(size=(16, 64, 256)), r.normal(size=(16, 1, 64))

    def f(t, w):
        d = 1.0 - t * t
        return np.broadcast_to(np.swapaxes(w, -1, -2), d.shape) * d
    jf = tp.jit(f, fuse=True)
    jf(t, w)
    for args in ((t, w), (t * 0.5, w[::-1])):
        assert np.array_equal(jf(*args), f(*args))
    run = [ln for ln in jf.explain(t, w).splitlines() if "fused3" in ln]
    assert run and "broadcast_to" not in run[0], jf.explain(t, w)


@pytest.mark.parametrize("ratio, fused", [(10.0, False), (2.0, False), (1.4, True), (0.5, True)])
def test_large_runs_leave_tanh_to_numpy_where_numpy_is_much_faster(monkeypatch, ratio, fused):
    from tapestry.jit import fuse as fuse_mod
    monkeypatch.setattr(fuse_mod, "loop_over_numpy", lambda fn: ratio)
    monkeypatch.setattr(fuse_mod, "THREADS", 1)
    x = np.random.default_rng(14).normal(size=(256, 512))
    f = lambda x: np.tanh(x * 0.5 + 1.0) * 3.0 - 1.0  # noqa: E731
    jf = tp.jit(f, fuse=True)
    jf(x)
    close(jf(x), f(x), scale=True)
    prog = jf.explain(x).split("program:")[1]
    assert ("tanh_" not in prog) == fused, prog


def test_loop_over_numpy_is_measured_once_or_given(monkeypatch):
    from tapestry.jit import fuse as fuse_mod
    fuse_mod.loop_over_numpy.cache_clear()
    monkeypatch.delenv("TAPESTRY_JIT_LOOP_OVER_NUMPY", raising=False)
    got = fuse_mod.loop_over_numpy(np.exp)
    assert isinstance(got, float) and got > 0.0 and fuse_mod.loop_over_numpy(np.exp) == got
    fuse_mod.loop_over_numpy.cache_clear()
    monkeypatch.setenv("TAPESTRY_JIT_LOOP_OVER_NUMPY", "3.5")
    assert fuse_mod.loop_over_numpy(np.tanh) == 3.5
    fuse_mod.loop_over_numpy.cache_clear()


def _views_programs():
    """Programs where view steps sit between a run's steps: they move ahead
    of the run only when what they read exists before it."""
    def of_run_result(x, w):  # a view of a value the run makes: not moved
        t = x * 2.0 + 1.0
        v = np.swapaxes(t, 0, 1)
        return np.sum(t * 3.0) + np.sum(v * w.T)

    def of_input(x, w):       # a view of an input: moved, the product joins the run
        t = 1.0 - x * x
        b = np.broadcast_to(np.swapaxes(w[:, :1], 0, 1), t.shape)
        return t * b - t

    def reshaped(x, w):       # a reshape view read by the run
        t = x * 0.5
        r = np.reshape(w, x.shape)
        return (t + r) * t

    def between_matmul(x, w):  # a matmul passed over, its result transposed
        t = x * 2.0
        m = x @ w
        s = np.swapaxes(m, 0, 1)
        return t * 3.0 - 1.0, s * 2.0 + 1.0
    return [of_run_result, of_input, reshaped, between_matmul]


@pytest.mark.parametrize("f", _views_programs(), ids=lambda f: f.__name__)
def test_view_steps_around_runs_keep_every_value(f):
    r = np.random.default_rng(15)
    x = r.normal(size=(96, 96))
    w = r.normal(size=(96, 96)) if f.__name__ != "reshaped" else r.normal(size=(96 * 96,))
    jf = tp.jit(f, fuse=True)
    g = tp.jit(tp.grad(lambda x, w: np.sum(tp.tree_flatten(f(x, w))[0][0])), fuse=True)
    eager_g = tp.grad(lambda x, w: np.sum(tp.tree_flatten(f(x, w))[0][0]))
    for s in (1.0, 0.5, -2.0):
        close(jf(x * s, w), f(x * s, w), scale=True)
        close(g(x * s, w), eager_g(x * s, w), scale=True)


def test_a_row_sum_einsum_is_no_blas_call():
    """tapestry's unbroadcasting sums (``einsum('ab->a', g)``, W6's gradient)
    run NumPy's own loop: such a program's runs are still cut over threads;
    an einsum of two operands may call BLAS."""
    from tapestry.core.staged import Slot, Step
    from tapestry.jit.fuse import calls_blas
    row_sum = Step("call", np.einsum, ("ab->a", Slot(0)), None, 1)
    contraction = Step("call", np.einsum, ("ab,bc->ac", Slot(0), Slot(1)), None, 2)
    solve = Step("call", np.linalg.solve, (Slot(0), Slot(1)), None, 3)
    assert not calls_blas([row_sum])
    assert calls_blas([row_sum, contraction]) and calls_blas([solve])


def test_a_run_nothing_reads_is_left_as_it_is():
    """A Hessian-vector product keeps a few additions whose results nothing
    reads: their run made a loop returning nothing, which did not compile
    (a warning, and the NumPy replay for good).  Such a run stays steps."""
    import warnings

    def g(x):
        return np.sum(np.exp(x * 0.01)) + np.sum(np.sum(x * x, axis=-1))

    def hvp(x):
        return tp.hessian_vector_product(g)(x, np.ones_like(x))
    x = np.random.default_rng(5).normal(size=(100,))
    jf = tp.jit(hvp, fuse=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jf(x)
        close(jf(x), hvp(x))


@pytest.mark.parametrize("blas", [False, True])
def test_a_blas_programs_serial_loop_leaves_tanh_to_numpys_cores(monkeypatch, blas):
    """A program calling BLAS runs its loops on one thread while NumPy's
    steps may be cut over the cores: with the loop's tanh as fast as
    NumPy's per core and two cores, tanh stays NumPy's there, and joins
    the loop (cut over the same two cores) where no BLAS call is made."""
    from tapestry.jit import fuse as fuse_mod
    monkeypatch.setattr(fuse_mod, "loop_over_numpy", lambda fn: 1.0)
    monkeypatch.setattr(fuse_mod, "THREADS", 2)
    r = np.random.default_rng(15)
    x, w = r.normal(size=(256, 512)), r.normal(size=(512, 512)) * 0.05

    def f(x, w):
        y = x @ w if blas else x * 0.5
        return np.tanh(y * 0.5 + 1.0) * 3.0 - 1.0
    jf = tp.jit(f, fuse=True)
    jf(x, w)
    close(jf(x, w), f(x, w), scale=True)
    prog = jf.explain(x, w).split("program:")[1]
    assert ("tanh_" in prog) == blas, prog
