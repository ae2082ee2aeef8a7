"""Sums taken into fused loops (tapestry.jit.fuse, ``SUM_MIN``): a large
run whose result is only summed (a loss, a gradient's unbroadcasting) adds
it up inside the loop instead of writing it out and reading it back.

What must hold: the values are NumPy's within the stated bound (each
block of a row added in order, the partial sums in NumPy's pairwise sum:
a few ulp of the sum of the terms' magnitudes); the bits do not depend on
how many threads run the loop; a result anything else reads is still
made; an inf or a nan (in a term or in the sum) gives NumPy's own result
and warnings; sums over other axes, or keeping dimensions, stay NumPy's.
"""
from __future__ import annotations

import io
import warnings
from contextlib import redirect_stdout

import numpy as np
import pytest

import tapestry as tp

pytest.importorskip("numba")
from tapestry.jit import fuse as fuse_mod  # noqa: E402
from tapestry.jit import whole  # noqa: E402

EPS = np.finfo(np.float64).eps


@pytest.fixture(autouse=True)
def _fused_runs_not_whole(monkeypatch):
    monkeypatch.setattr(whole, "ENABLED", False)  # the fused runs, not one whole kernel


def _program(jf, *args):
    buf = io.StringIO()
    with redirect_stdout(buf):
        jf.explain(*args)
    return buf.getvalue().split("program:", 1)[1]


def _bound(terms, n_block):
    """What a sum taken into a loop may differ from NumPy's by: each adds
    ``terms`` in its own order (blocks of ``n_block`` in order, then
    pairwise; NumPy pairwise), both within ``(n_block + log2 n) * eps``
    times the sum of the magnitudes."""
    terms = np.abs(np.asarray(terms, dtype=np.float64))
    n = max(terms.size, 2)
    return 2 * (n_block + np.log2(n) + 2) * EPS * np.sum(terms)


def poisson(u, a, b, x, y, c):
    eta = a + b * x + np.reshape(u, (-1, 1))
    return np.sum(y * eta - np.exp(eta) - c) - 0.5 * np.sum(u ** 2)


def _poisson_data(G, m=20, seed=0):
    r = np.random.default_rng(seed)
    x = r.normal(size=(G, m))
    y = r.poisson(1.5, size=(G, m)).astype(np.float64)
    c = r.random((G, m))
    return r.normal(0, 0.5, G), 0.2, 0.4, x, y, c


@pytest.mark.parametrize("m", [20, 300])
def test_a_poisson_loglik_and_its_gradient_sum_inside_the_loop(m):
    """W6's value and gradient: the elementwise terms and the cotangents
    are summed in the loop (no NumPy sum left in the program), with rows
    shorter and longer than a block."""
    G = fuse_mod.SUM_MIN // m + 7
    args = _poisson_data(G, m)
    f = tp.value_and_grad(poisson, argnums=(0, 1, 2))
    jf = tp.jit(f, fuse=True)
    jf(*args)
    got, want = jf(*args), f(*args)
    prog = _program(jf, *args)
    # left: the prior's sum over u, (G,) -- below SUM_MIN elements
    assert "reduce" not in prog and "einsum" not in prog and prog.count("_sum_fun") == 1, prog
    u, a, b, x, y, c = args
    eta = a + b * x + u[:, None]
    mu = np.exp(eta)
    block = min(m, fuse_mod.SUM_BLOCK)
    assert abs(got[0] - want[0]) <= _bound(y * eta - mu - c, block) + _bound(u * u, 1)
    np.testing.assert_array_less(np.abs(got[1][0] - want[1][0]),
                                 _bound(np.max(np.abs(y - mu)) * np.ones(m), block) + 1e-300)
    assert abs(got[1][1] - want[1][1]) <= _bound(y - mu, block)
    assert abs(got[1][2] - want[1][2]) <= _bound((y - mu) * x, block)
    assert type(got[0]) is type(want[0]) and got[1][0].dtype == np.float64


@pytest.mark.parametrize("shape", [(fuse_mod.SUM_MIN * 3 + 77,), (9, 40, fuse_mod.SUM_MIN // 300),
                                   (fuse_mod.SUM_MIN // 129 + 1, 129)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_bits_do_not_depend_on_the_threads(shape, threads, monkeypatch):
    """Every block's partial sum is one thread's, in order, and the
    partials meet in one pairwise sum: cut over 1, 2 or 3 threads (a 1-d
    run by blocks, others by rows), the sums are the same bits."""
    r = np.random.default_rng(1)
    x = r.normal(size=shape)

    def f(x):
        t = np.exp(x * 0.3) - x * x
        return np.sum(t), np.sum(t, axis=-1)
    monkeypatch.setattr(fuse_mod, "THREADS", 1)
    one = tp.jit(f, fuse=True)
    one(x)
    base = one(x)
    monkeypatch.setattr(fuse_mod, "THREADS", threads)
    jf = tp.jit(f, fuse=True)
    jf(x)
    got = jf(x)
    assert "reduce" not in _program(jf, x)
    assert got[0] == base[0] and np.array_equal(got[1], base[1])
    t = np.exp(x * 0.3) - x * x
    assert abs(got[0] - np.sum(t)) <= _bound(t, fuse_mod.SUM_BLOCK)
    rows = np.abs(got[1] - np.sum(t, axis=-1))
    assert np.all(rows <= 2 * (fuse_mod.SUM_BLOCK + 20) * EPS * np.sum(np.abs(t), axis=-1))


def test_a_result_read_besides_its_sum_is_still_made():
    """``t`` is summed and returned: the loop writes it (an output is never
    left out), and its sum is NumPy's of those values."""
    x = np.random.default_rng(2).normal(size=(fuse_mod.SUM_MIN + 3,))

    def f(x):
        t = np.sin(x) * x + 1.0
        return t, np.sum(t), t[5]
    jf = tp.jit(f, fuse=True)
    jf(x)
    t, s, t5 = jf(x)
    np.testing.assert_allclose(t, np.sin(x) * x + 1.0, rtol=1e-14)
    assert abs(s - np.sum(t)) <= _bound(t, fuse_mod.SUM_BLOCK) and t5 == t[5]


@pytest.mark.parametrize("reduce", [
    lambda t: np.sum(t, axis=0),
    lambda t: np.sum(t, axis=-1, keepdims=True),
    lambda t: np.mean(t),
    lambda t: np.max(t),
    lambda t: np.sum(t[::2]),
])
def test_other_reductions_stay_numpys(reduce):
    """Only whole sums and sums over the last axis are taken into a loop:
    other reductions of a large run's result give NumPy's own bits."""
    x = np.random.default_rng(3).normal(size=(fuse_mod.SUM_MIN // 16 + 1, 16))

    def f(x):
        return reduce(np.exp(x * 0.5) * x - 2.0)
    jf = tp.jit(f, fuse=True)
    jf(x)
    np.testing.assert_allclose(jf(x), f(x), rtol=1e-13)


def _second_call_warnings(f, x):
    """``(jit(f, fuse=True), its second call's result, the warnings of that
    call)``: the first call traces (the eager call's warnings)."""
    jf = tp.jit(f, fuse=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jf(x)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = jf(x)
    return jf, got, w


def test_an_overflowing_sum_is_numpys_with_its_warning():
    """Finite terms whose sum overflows: the loop's sum is inf, so the run
    is NumPy's again -- its value and its overflow warning."""
    x = np.full(fuse_mod.SUM_MIN + 5, 709.0)

    def f(x):
        return np.sum(np.exp(x) * 0.5 + 1.0)
    jf, got, w = _second_call_warnings(f, x)
    assert got == np.inf and any("overflow" in str(m.message) for m in w)
    x2 = np.linspace(-1.0, 1.0, fuse_mod.SUM_MIN + 5)
    assert abs(jf(x2) - f(x2)) <= _bound(np.exp(x2) * 0.5 + 1.0, fuse_mod.SUM_BLOCK)


def test_a_nan_term_gives_numpys_nan():
    x = np.linspace(-1.0, 1.0, fuse_mod.SUM_MIN + 9)

    def f(x):
        return np.sum(np.sqrt(x) * 2.0 + x)
    jf = tp.jit(f, fuse=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jf(x)
        assert np.isnan(jf(x))
        ok = np.abs(x)
        assert abs(jf(ok) - f(ok)) <= _bound(np.sqrt(ok) * 2.0 + ok, fuse_mod.SUM_BLOCK)


def test_small_runs_keep_numpys_sums():
    """Below ``SUM_MIN`` elements the sum is NumPy's call: the same bits as
    the plain function."""
    x = np.random.default_rng(4).normal(size=(50, 20))

    def f(x):
        return np.sum(np.exp(x) - x * 2.0)
    jf = tp.jit(tp.value_and_grad(f), fuse=True)
    jf(x)
    got = jf(x)
    assert got[0] == tp.value_and_grad(f)(x)[0]


def test_a_row_sum_that_overflows_is_numpys_with_its_warning():
    """One row's sum overflows (every term finite): NumPy's inf and its
    warning, as for a whole sum."""
    x = np.zeros((fuse_mod.SUM_MIN // 8 + 1, 8))
    x[3] = 709.0

    def f(x):
        return np.sum(np.exp(x) * 0.5 + 1.0, axis=-1)
    _, got, w = _second_call_warnings(f, x)
    assert got[3] == np.inf and np.all(np.isfinite(np.delete(got, 3)))
    assert any("overflow" in str(m.message) for m in w)


# --- which values a loop tests itself (fuse._unchecked) --------------------------------
# An inf or a nan a loop makes is seen where it flows into a value the loop
# tests, a sum, or exp's range test; these programs make one that an operand
# which does not carry it (a denominator, tanh, sign) turns finite again: the
# loop must still see it and give NumPy's values and warnings.
_KILLED = {
    "denominator": lambda x: 1.0 / (x * 1e300 * 1e300) + x,
    "tanh": lambda x: np.tanh(x * 1e300 * 1e300) + x,
    "sign": lambda x: np.sign(x * 1e300 * 1e300) * x,
    "exp of -inf": lambda x: np.exp(-(x * 1e300 * 1e300)) + x,
}


@pytest.mark.parametrize("kill", sorted(_KILLED))
@pytest.mark.parametrize("reduce", ["sum", "row sums", "none"])
@pytest.mark.parametrize("n", [7, fuse_mod.SUM_MIN + 3])
def test_an_inf_turned_finite_inside_a_loop_is_numpys_with_its_warning(kill, reduce, n):
    g = _KILLED[kill]
    shape = (n,) if reduce != "row sums" else (n // 4 + 1, 4)
    f = {"sum": lambda x: np.sum(g(x)), "row sums": lambda x: np.sum(g(x), axis=-1),
         "none": g}[reduce]
    x = np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape)
    with warnings.catch_warnings(record=True) as want_w:
        warnings.simplefilter("always")
        want = f(x)
    jf, got, got_w = _second_call_warnings(f, x)
    assert np.array_equal(got, want), (kill, reduce)
    assert {str(m.message) for m in got_w} == {str(m.message) for m in want_w}, (kill, reduce)
    assert any("overflow" in str(m.message) for m in got_w)
    ok = x * 1e-300  # no overflow: the loop's values
    np.testing.assert_allclose(jf(ok), f(ok), rtol=1e-12)


def test_only_values_nothing_carries_to_a_test_are_tested_in_the_loop():
    """W6's run: every value flows into a summed result or exp's argument,
    so the loop tests nothing else (the tests cost a third of its time).
    A value read only as a denominator is tested; one read by an operation
    that carries it as well is not."""
    from tapestry.core.staged import Slot, Step
    x, u, c = Slot(0), Slot(1), Slot(2)
    run = [Step("call", np.multiply, (0.5, x), None, 3),
           Step("call", np.add, (Slot(3), u), None, 4),
           Step("call", np.exp, (Slot(4),), None, 5),
           Step("call", np.subtract, (Slot(4), Slot(5)), None, 6),   # summed
           Step("call", np.true_divide, (1.0, Slot(3)), None, 7),    # 3 in a denominator
           Step("call", np.multiply, (Slot(7), c), None, 8),         # written out
           Step("call", np.multiply, (x, 2.0), None, 9),
           Step("call", np.true_divide, (c, Slot(9)), None, 10)]     # 9 only a denominator
    assert fuse_mod._unchecked(run, {6, 10}) == [8, 9]
    assert fuse_mod._unchecked(run[:6], {6}) == [8]
    assert fuse_mod._unchecked(run[:4], {6}) == []
    assert fuse_mod._unchecked(run, set()) == [6, 8, 9, 10]
