"""A NumPy replay cuts a large elementwise step over threads
(tapestry.jit.split) and still gives the plain call's bits, errors and
warnings; it never cuts a reduction, an operand laid out against C order,
an ``out=`` that overlaps an operand, nor inside a parallel worker or
another split.  Splitting is forced on small arrays by lowering the
thresholds (the cuts stay at multiples of 64 elements, as in production)."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.jit import split as slices

from jit_checks import same


@pytest.fixture
def forced(monkeypatch):
    """Every ufunc step of 128 elements or more split (3 threads); returns
    the names of the ufuncs whose calls really ran in slices."""
    monkeypatch.setattr(slices, "THREADS", 3)
    monkeypatch.setattr(slices, "SPLIT_MIN", 1)
    monkeypatch.setattr(slices, "SPLIT_MIN_CHEAP", 1)
    monkeypatch.setattr(slices.Schedule, "begin", lambda self, step, now: True)  # (no timing)
    ran = []
    run = slices.Split._run

    def counted(self, args, out, bounds):
        assert len(bounds) > 2
        ran.append(self.ufunc.__name__)
        return run(self, args, out, bounds)
    monkeypatch.setattr(slices.Split, "_run", counted)
    return ran


def _ufuncs():
    return [getattr(np, n) for n in sorted(dir(np)) if isinstance(getattr(np, n), np.ufunc)
            and getattr(np, n).nout == 1 and getattr(np, n).signature is None]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int64])
def test_every_ufunc_in_slices_gives_the_bits_of_one_call(forced, dtype):
    """Each one-output ufunc, cut into slices at multiples of 64 elements, on
    operands that start off any vector boundary and hold zeros, huge values
    and nans: the same dtype and bytes as the whole call."""
    r = np.random.default_rng(0)
    checked = 0
    for u in _ufuncs():
        for off in (0, 1, 3):
            if dtype is np.int64:
                buf = r.integers(-50, 50, (u.nin, 3 * 64 + 5 + off))
            else:
                buf = (r.standard_normal((u.nin, 3 * 64 + 5 + off)) * 3).astype(dtype)
                buf.flat[5::29] = 1e30
                buf.flat[7::31] = np.nan
            buf.flat[::17] = 0
            args = [b[off:off + 3 * 64 + 5] for b in buf]
            with np.errstate(all="ignore"):
                try:
                    want = u(*args)
                except (TypeError, ValueError):  # no loop for this dtype, a refused value
                    continue
                cut = slices.split_for(u, want.shape, want.dtype)
                if cut is None:
                    continue
                got = cut(*args)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (u, off)
            checked += 1
    assert checked > 20 and len(forced) == checked


def _mlp(W, x, b):
    h = np.tanh((W @ x).reshape(2, 64, 64) + b[:, :, None])  # out= into a reshaped GEMM
    return np.sum(np.exp(-h * h) / (1.0 + h ** 2) - 0.5 * h)


def _chain(x, c):
    h = np.tanh(x * 2.0 + c)
    return np.sum(np.exp(-h * h) * np.sin(x) / (1.0 + h * h))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((16, 200), (200,)), ((300,), ()), ((4, 1, 128), (3, 1)),
                                    ((6, 200), (200,)), ((), ()), ((0, 200), (200,))])
def test_jit_value_and_grad_in_slices_is_bit_identical_to_eager(forced, dtype, shapes):
    r = np.random.default_rng(1)
    x = r.normal(size=shapes[0]).astype(dtype)
    c = r.normal(size=shapes[1]).astype(dtype)
    f = tp.value_and_grad(_chain, argnums=(0, 1))
    jf = tp.jit(f)
    jf(x, c)
    for _ in range(2):
        same(jf(x, c), f(x, c))
        x = x * dtype(1.5)
    big = x.size >= 128 and x.shape != (6, 200)  # 6 rows of 200: no cut at 64 elements
    assert bool(forced) == big, forced
    assert ("split_" in jf.explain(x, c)) == big


def test_w4_shaped_program_writes_slices_into_a_view_of_a_gemm(forced):
    r = np.random.default_rng(2)
    W, x, b = r.normal(size=(128, 32)), r.normal(size=(32, 64)), r.normal(size=(2, 64))
    f = tp.value_and_grad(_mlp, argnums=(0, 2))
    jf = tp.jit(f)
    jf(W, x, b)
    same(jf(W, x, b), f(W, x, b))
    assert "tanh" in forced and "out=v" in jf.explain(W, x, b)


def test_outputs_that_are_views_and_writes_in_place(forced):
    def g(x, s):
        y = np.tanh(x) * s
        y += 1.0
        y[0] = 5.0
        return y.T, y.reshape(-1)[3:], np.exp(y)
    r = np.random.default_rng(3)
    jg = tp.jit(g)
    for k in range(3):
        x = r.normal(size=(4, 128))
        got, want = jg(x, 0.5 + k), g(x, 0.5 + k)
        same(got, want)
        assert got[0].flags.f_contiguous and not np.shares_memory(got[2], got[1])
    got[1][:] = 0  # a result the caller writes into changes no later one
    same(jg(x, 2.5), g(x, 2.5))
    assert forced


def test_reductions_and_other_calls_are_never_split():
    for fn in (np.add.reduce, np.add.accumulate, np.matmul, np.divmod, np.sum, np.einsum):
        assert slices.split_for(fn, (1 << 22,), np.float64) is None, fn
    assert slices.split_for(np.tanh, (1 << 22,), np.dtype(object)) is None
    assert slices.split_for(np.tanh, (100,), np.float64) is None          # too small
    assert slices.split_for(np.add, (slices.SPLIT_MIN_CHEAP,), np.float64) is None
    assert slices.split_for(np.tanh, (1 << 20,), np.float64) is not None


def test_a_reduction_in_a_program_stays_one_call(forced):
    jf = tp.jit(lambda x: (np.sum(np.tanh(x), axis=0), np.add.reduce(x * 2.0, axis=1)))
    x = np.random.default_rng(4).normal(size=(300, 5))
    same(jf(x), (np.sum(np.tanh(x), axis=0), np.add.reduce(x * 2.0, axis=1)))
    text = jf.explain(x)
    assert "split_tanh" in text and "split_multiply" in text and "split_sum" not in text
    assert set(forced) == {"tanh", "multiply"}


def test_layouts_against_c_order_and_overlapping_out_stay_whole(forced):
    r = np.random.default_rng(5)
    a = r.normal(size=(200, 300))
    tanh = slices.split_for(np.tanh, (300, 200), np.float64)
    got = tanh(a.T)                               # Fortran order: NumPy's result is too
    assert not forced and got.flags.f_contiguous and got.tobytes() == np.tanh(a.T).tobytes()
    neg = slices.split_for(np.negative, (1000,), np.float64)
    v = r.normal(size=1000)
    assert neg(v[::-1]).tobytes() == np.negative(v[::-1]).tobytes() and not forced
    buf = r.normal(size=1001)
    want = buf.copy()
    np.negative(want[:-1], out=want[1:])          # NumPy buffers the overlap
    neg(buf[:-1], out=buf[1:])
    assert buf.tobytes() == want.tobytes() and not forced
    same(neg(v), np.negative(v))
    assert forced == ["negative"]


def test_no_split_in_a_parallel_worker_nor_while_another_runs(forced):
    jf = tp.jit(lambda x: np.tanh(x) * 2.0)
    xs = [np.random.default_rng(k).normal(size=400) for k in range(4)]
    jf(xs[0])
    got = tp.parallel_map(jf, xs, executor="threads")
    for a, x in zip(got, xs):
        same(a, np.tanh(x) * 2.0)
    assert not forced
    from tapestry.parallel.executors import _WorkerScope
    with _WorkerScope():
        same(jf(xs[1]), np.tanh(xs[1]) * 2.0)
    assert not forced
    assert slices._busy.acquire()                 # another thread's split
    try:
        t = threading.Thread(target=lambda: same(jf(xs[2]), np.tanh(xs[2]) * 2.0))
        t.start()
        t.join()
    finally:
        slices._busy.release()
    assert not forced
    same(jf(xs[3]), np.tanh(xs[3]) * 2.0)
    assert len(forced) == 2


def test_threads_calling_one_jitted_function_at_once(forced):
    f = tp.value_and_grad(_chain, argnums=(0, 1))
    jf = tp.jit(f)
    r = np.random.default_rng(6)
    xs = [(r.normal(size=(3, 320)), r.normal(size=320)) for _ in range(24)]
    want = [f(*a) for a in xs]
    got = [None] * len(xs)
    errors = []

    def work(k):
        try:
            for i in range(k, len(xs), 4):
                got[i] = jf(*xs[i])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for a, b in zip(got, want):
        same(a, b)
    assert forced and not slices._busy.locked()


def _flag_operands():
    """Operands of ``np.divide`` raising 'divide by zero' in the first slice
    and 'overflow' and 'invalid value' in the last."""
    a = np.ones(3 * 64 * 2)
    b = np.ones_like(a)
    b[3] = 0.0
    a[-5], b[-5] = 1e308, 1e-308
    a[-2] = b[-2] = 0.0
    return a, b


@pytest.mark.parametrize("mode", ["ignore", "warn", "raise", "call", "log", "print"])
def test_floating_point_flags_are_handled_as_one_call_handles_them(forced, mode, capfd):
    a, b = _flag_operands()
    cut = slices.split_for(np.divide, a.shape, a.dtype)
    seen = {}
    for name, fn in (("plain", np.divide), ("split", cut)):
        calls = []
        log = io.StringIO()
        func = (lambda *e: calls.append(e)) if mode == "call" else log if mode == "log" else None
        with warnings.catch_warnings(record=True) as caught, \
                np.errstate(all=mode, call=func):
            warnings.simplefilter("always")
            try:
                out = fn(a, b).tobytes()
            except FloatingPointError as e:
                out = repr(e)
        sys.stderr.flush()
        seen[name] = (out, [(w.category, str(w.message)) for w in caught], calls,
                      log.getvalue(), capfd.readouterr().err)
    assert seen["split"] == seen["plain"]
    assert forced == ["divide"] and (mode == "ignore" or any(seen["plain"][1:]) or
                                              "Error" in seen["plain"][0])


def test_errstate_inside_the_jitted_function_is_replayed_around_the_slices(forced):
    def f(a, b):
        with np.errstate(divide="raise"):
            return np.divide(a, b) + 1.0
    jf = tp.jit(f)
    a, b = _flag_operands()
    ok = np.ones_like(b)
    same(jf(a, ok), f(a, ok))
    with pytest.raises(FloatingPointError, match="divide by zero encountered in divide"):
        jf(a, b)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jf(a, np.where(np.arange(b.size) == 3, 1.0, b))  # overflow and invalid: warnings
    assert sorted(str(w.message) for w in caught) == [
        "invalid value encountered in divide", "overflow encountered in divide"]
    assert caught[0].filename == "<tapestry.jit replay>" or "tapestry.jit" in caught[0].filename


def test_environment_switch_turns_splitting_off():
    code = ("import numpy as np, tapestry as tp\n"
            "from tapestry.jit import split\n"
            "jf = tp.jit(lambda x: np.tanh(x) + 1.0)\n"
            "x = np.ones((512, 1024))\n"
            "text = jf.explain(x)\n"
            "print(split.THREADS, 'split_' in text)\n")
    env = dict(os.environ, TAPESTRY_JIT_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.splitlines()[-1].split() == ["1", "False"], out.stderr


def test_a_program_cuts_its_steps_or_not_as_a_whole():
    """The schedule cuts for ROUNDS fair rounds (not the first QUARANTINE
    seconds: OpenBLAS's threads may still spin), runs whole for as many,
    keeps the faster way for KEEP seconds and KEEP_ROUNDS rounds, then
    times both again; a round starts at the program's first cut step."""
    def rounds(sc, first, second, n, cut_time, whole_time, now):
        ways = []
        for _ in range(n):
            cut = sc.begin(first, now)
            assert sc.begin(second, now) == cut  # one choice for every step of a round
            ways.append(cut)
            sc.report(cut_time if cut else whole_time)
            now += 0.05
        return ways, now
    a, b = object(), object()
    sc = slices.Schedule()
    ways, now = rounds(sc, a, b, 40, 0.5, 1.0, 0.0)
    f = ways.index(False)                       # cut first: the quarantine, then ROUNDS fair
    assert f >= sc.ROUNDS + slices.QUARANTINE / 0.05 - 1
    assert ways[f:f + sc.ROUNDS] == [False] * sc.ROUNDS and all(ways[f + sc.ROUNDS:])
    assert sc.phase == "keep" and sc.cutting   # cutting was faster: kept
    slow = slices.Schedule()                    # cutting slower: whole kept
    ways, now = rounds(slow, a, b, 40, 2.0, 1.0, 0.0)
    f = ways.index(False)
    assert not any(ways[f:]) and slow.phase == "keep"
    later, now = rounds(slow, a, b, max(sc.KEEP_ROUNDS, int(sc.KEEP / 0.05)) + 2, 2.0, 1.0, now)
    assert not later[0] and any(later)          # then both timed again


# --- matrix products cut along the result's first axis ------------------------------
@pytest.fixture
def matmuls(monkeypatch):
    """Matmul steps of 256 elements or more cut (3 threads); returns the
    shapes of the products that really ran in slices."""
    if not slices.blas_controls():
        pytest.skip("no OpenBLAS that threadpoolctl can set")
    monkeypatch.setattr(slices, "THREADS", 3)
    monkeypatch.setattr(slices, "SPLIT_MIN", 64)
    ran = []
    run = slices._run_job

    def counted(fn, pieces):
        if fn is np.matmul:
            ran.append(len(pieces))
        return run(fn, pieces)
    monkeypatch.setattr(slices, "_run_job", counted)
    return ran


def _products(x, w, s, t):
    """A matrix product (rows cut), a stacked one (the stacked axis cut in
    both), one broadcasting a matrix over the stack, and a transposed view."""
    return (np.sum(np.tanh(x @ w)), np.sum((s @ t) ** 2), np.sum(s @ w[:7, :5]),
            np.sum(np.swapaxes(s, -1, -2) @ x[:6, :9]))


def test_matmuls_in_slices_give_the_bits_of_one_call(matmuls):
    r = np.random.default_rng(21)
    x, w = r.normal(size=(90, 7)), r.normal(size=(7, 40))
    s, t = r.normal(size=(12, 6, 7)), r.normal(size=(12, 7, 8))
    before = [c.get_num_threads() for c in slices.blas_controls()]
    f = tp.jit(tp.value_and_grad(lambda x, w, s, t: sum(_products(x, w, s, t)),
                                 argnums=(0, 1, 2, 3)))
    want = tp.value_and_grad(lambda x, w, s, t: sum(_products(x, w, s, t)),
                             argnums=(0, 1, 2, 3))(x, w, s, t)
    for _ in range(3):
        same(f(x, w, s, t), want)
    assert matmuls and "split_matmul" in f.explain(x, w, s, t)
    assert [c.get_num_threads() for c in slices.blas_controls()] == before


def test_a_matmul_whose_slices_differ_stays_whole(matmuls, monkeypatch):
    """The first call compares the cut product with the whole one; a BLAS
    whose slices round otherwise keeps the step whole, with its bits."""
    r = np.random.default_rng(22)
    x, w = r.normal(size=(90, 7)), r.normal(size=(7, 40))
    cut = slices.matmul_split_for(np.matmul, (90, 40), np.float64)
    run = slices._run_job

    def off_by_one_ulp(fn, pieces):
        flags = run(fn, pieces)
        out = pieces[0][1]
        out[0, 0] = np.nextafter(out[0, 0], np.inf)
        return flags
    monkeypatch.setattr(slices, "_run_job", off_by_one_ulp)
    for _ in range(3):
        assert np.array_equal(cut(x, w), x @ w)
    assert cut.checked and not cut.ok and len(matmuls) == 1  # (the first call only)


def test_a_matmul_is_whole_in_a_worker_and_blas_comes_back_after_an_error(matmuls,
                                                                           monkeypatch):
    import importlib
    executors = importlib.import_module("tapestry.parallel.executors")
    r = np.random.default_rng(23)
    x, w = r.normal(size=(90, 7)), r.normal(size=(7, 40))
    cut = slices.matmul_split_for(np.matmul, (90, 40), np.float64)
    with executors._WorkerScope():
        assert np.array_equal(cut(x, w), x @ w)
    assert not matmuls
    before = [c.get_num_threads() for c in slices.blas_controls()]

    def broken(fn, pieces):
        raise MemoryError("a slice failed")
    monkeypatch.setattr(slices, "_run_job", broken)
    with pytest.raises(MemoryError, match="a slice failed"):
        cut(x, w)
    assert [c.get_num_threads() for c in slices.blas_controls()] == before
    assert slices._busy.acquire(False)  # released
    slices._busy.release()
    assert cut(x, w[:, :3]).shape == (90, 3)  # another shape: the plain product


def test_vector_and_integer_products_are_never_cut():
    assert slices.matmul_split_for(np.matmul, (10 ** 6,), np.float64) is None
    assert slices.matmul_split_for(np.matmul, (4096, 256), np.int64) is None
    assert slices.matmul_split_for(np.matmul, (1, 10 ** 6), np.float64) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_cut_products_composed_with_the_transformations(matmuls, forced, dtype):
    """jit around and inside grad, jvp, vmap and hessian-vector products of
    a program whose products and elementwise steps are cut: eager's bits."""
    r = np.random.default_rng(24)

    def arr(*shape):
        a = r.normal(size=shape)
        return (a + 1j * r.normal(size=shape) if dtype is np.complex128 else a).astype(dtype)
    x, w, s = arr(90, 7), arr(7, 40), arr(12, 6, 7)

    def f(x, w, s):
        y = np.tanh(x @ w)
        z = s @ w[:, :9]
        return np.sum(np.abs(y) ** 2) + np.sum(np.abs(z) ** 2)
    real = tp.jit(f)
    same(real(x, w, s), f(x, w, s))
    same(real(x, w, s), f(x, w, s))
    if dtype is np.complex128:
        return  # (a real loss of complex inputs: the value is checked above)
    def cases(g):
        return [lambda x, w, s: tp.grad(g, argnums=(0, 1))(x, w, s),
                lambda x, w, s: tp.jvp(lambda w: g(x, w, s), (w,), (np.ones_like(w),)),
                lambda x, w, s: tp.vmap(g, in_axes=(None, None, 0))(x, w, np.stack([s, s * 0.5]))]
    wants = [c(x, w, s) for c in cases(f)]  # eager
    for inner in (f, tp.jit(f)):  # jit inside each transformation, and around it
        for case, want in zip(cases(inner), wants):
            same(case(x, w, s), want)
            outer = tp.jit(case)
            for _ in range(2):
                same(outer(x, w, s), want)
