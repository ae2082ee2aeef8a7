"""``grad(jit(f))`` with the joint pullback split into a forward program that
returns residuals and a backward program on (residuals, cotangents)
(jit/reverse.py, ``tapestry.jit.program.split``).

Checked: the forward runs once per call once the split exists, bit for bit
the plain call's results; residuals are never changed or shared with what
the caller gets (two forwards then two backwards in reverse order, a
pullback called twice, a gradient written into); a write in place across
the cut is never split; the environment is refused only where the
backward reads it; failed guards and traced cotangents fall back.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapestry as tp
from tapestry.core.staged import Recorder, Slot
from tapestry.jit.program import split

from test_jit_redteam import same


def _count_forward_replays(jf):
    """Wrap each cached program of ``jf`` (its own forward) to count runs."""
    count = [0]
    for entry in jf._cache.values():
        for comp in entry.programs:
            run = comp.program.run

            def counted(*a, _run=run):
                count[0] += 1
                return _run(*a)
            comp.program.run = counted
    return count


def _joint_calls(jf):
    return jf._reverse.cache_info()["calls"]


def _mlp(p, x):
    h = np.tanh(x @ p["W1"] + p["b1"])
    return np.tanh(h @ p["W2"] + p["b2"]) @ p["W3"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_split_runs_the_forward_once_bit_for_bit(dtype):
    r = np.random.default_rng(0)
    p = {"W1": r.normal(size=(3, 5)), "b1": r.normal(size=5), "W2": r.normal(size=(5, 4)),
         "b2": np.zeros(4), "W3": r.normal(size=(4, 2))}
    p = {k: v.astype(dtype) for k, v in p.items()}
    x, y = r.normal(size=(6, 3)).astype(dtype), r.normal(size=(6, 2)).astype(dtype)
    jmlp = tp.jit(_mlp)

    def loss(m):
        return lambda p: np.mean((m(p, x) - y) ** 2)
    same(tp.value_and_grad(loss(jmlp))(p), tp.value_and_grad(loss(_mlp))(p))  # traces, splits
    assert jmlp._splits
    forward, joint = _count_forward_replays(jmlp), _joint_calls(jmlp)
    for k in range(3):
        q = {n: v * dtype(1 + k / 10) for n, v in p.items()}
        same(tp.value_and_grad(loss(jmlp))(q), tp.value_and_grad(loss(_mlp))(q))
    assert forward[0] == 0 and _joint_calls(jmlp) == joint  # one split forward per call


def test_split_with_several_outputs_scalars_and_0d():
    def f(x, s):
        return np.sin(x) * s, np.sum(x ** 3), 3, np.tanh(s * 2.0)
    jf = tp.jit(f)

    def h(fn):
        def g(x, s):
            a, b, _, c = fn(x, s)
            return np.sum(a * 2.0) + b * c
        return g
    x = np.linspace(-1.0, 1.0, 4)
    for s in (0.5, 0.7, np.float64(0.9), 1.1):
        same(tp.grad(h(jf), argnums=(0, 1))(x, s), tp.grad(h(f), argnums=(0, 1))(x, s))
    joint = _joint_calls(jf)
    same(tp.grad(h(jf), argnums=(0, 1))(x, 0.3), tp.grad(h(f), argnums=(0, 1))(x, 0.3))
    assert _joint_calls(jf) == joint
    xs = np.array(0.25)
    same(tp.grad(lambda v: np.sum(jf(v, 2.0)[0]))(xs), tp.grad(lambda v: np.sum(f(v, 2.0)[0]))(xs))


def _chain(x):
    """Elementwise steps on arrays large enough that replays reuse buffers."""
    return np.tanh(np.exp(x * 0.1) * 2.0 + x) * x


def test_two_forwards_then_two_backwards_in_reverse_order():
    x1, x2 = np.linspace(-1.0, 1.0, 600), np.linspace(-2.0, 0.5, 600)
    c1, c2 = np.cos(x1), np.sin(x2) + 2.0
    jf = tp.jit(_chain)
    tp.vjp(jf, x1)[1](c1)  # traces the joint pullback and splits it
    joint = _joint_calls(jf)
    (y1, pb1), (y2, pb2) = tp.vjp(jf, x1), tp.vjp(jf, x2)
    g2, g1 = pb2(c2), pb1(c1)
    (w1, q1), (w2, q2) = tp.vjp(_chain, x1), tp.vjp(_chain, x2)
    same((y1, y2, g1, g2), (w1, w2, q1(c1), q2(c2)))
    assert _joint_calls(jf) == joint


def test_a_pullback_called_twice_and_its_results_written_into():
    x = np.linspace(-1.0, 1.0, 600)
    jf = tp.jit(_chain)
    tp.vjp(jf, x)[1](np.ones(600))
    joint = _joint_calls(jf)
    y, pb = tp.vjp(jf, x)
    _, want = tp.vjp(_chain, x)
    ct = np.cos(x)
    (g1,) = pb(ct)
    expected = want(ct)
    same((g1,), expected)
    g1[:] = 7.0  # the caller owns its gradient: nothing the pullback reads changes
    y[:] = -1.0  # nor its output
    (g2,) = pb(ct)
    same((g2,), expected)
    assert g2 is not g1 and not np.shares_memory(g1, g2)
    same(pb(ct * 2.0), want(ct * 2.0))
    assert _joint_calls(jf) == joint


def _record(fn, *values):
    """Stage ``fn(*values)``: ``(recorder, input slots, results)``."""
    rec = Recorder()
    staged = [rec.input(v) for v in values]
    try:
        out = fn(*staged)
    finally:
        rec.open = False
    return rec, [s._slot for s in staged], out


def test_split_copies_a_backward_output_that_is_a_residual():
    x, g = np.linspace(0.0, 1.0, 5), np.ones(5)
    rec, (sx, sg), (y, c) = _record(lambda x, g: (np.sin(x), np.cos(x)), x, g)
    sp = split(rec, [sx], [sg], [Slot(y._slot)], [Slot(c._slot)])
    assert not isinstance(sp, str) and sp.residuals == [c._slot]
    y, res = sp.forward.run(x)
    (a,) = sp.backward.run(res, g)
    (b,) = sp.backward.run(res, g)
    same(a, np.cos(x))
    assert not np.shares_memory(a, res) and not np.shares_memory(a, b)


def test_no_split_across_a_write_in_place():
    x, g = np.linspace(0.0, 1.0, 5), np.ones(5)

    def backward_writes_forward_memory(x, g):
        z = x * 2.0
        y = np.sin(z)
        z += g  # the reverse sweep writing into the forward's array
        return y, z * 3.0
    rec, (sx, sg), (y, c) = _record(backward_writes_forward_memory, x, g)
    why = split(rec, [sx], [sg], [Slot(y._slot)], [Slot(c._slot)])
    assert isinstance(why, str) and "writes into memory the forward made" in why

    def forward_write_after_backward_read(x, g):
        z = x * 2.0
        w = z * g  # reads z before the write below
        z += 1.0
        return np.sin(z), w + z
    rec, (sx, sg), (y, c) = _record(forward_write_after_backward_read, x, g)
    why = split(rec, [sx], [sg], [Slot(y._slot)], [Slot(c._slot)])
    assert isinstance(why, str) and "reverse sweep read before" in why


def test_environment_refused_only_where_the_backward_reads_it():
    """What the backward reads of the forward is held (residuals, and the
    trace's copies of closed-over arrays, as the plain ``vjp``'s): changing
    the closure after the forward changes nothing.  An array the backward
    reads as it is (read-only memory, which the plain trace does not copy)
    is checked before it runs, and refused if changed; a small one is
    copied too (cheaper than checking), so its change changes nothing."""
    def run(make, change, jitted, n=5):
        x = np.linspace(-1.0, 1.0, n)
        w = np.arange(1.0, n + 1.0)
        f = make(w)
        jf = tp.jit(f) if jitted else f
        if jitted:
            tp.grad(jf)(x)
            tp.grad(jf)(x)
            assert jf._splits
        _, pb = tp.vjp(jf, x)
        change(w)
        return pb(1.0)

    def in_place(w):
        w[:] = 0.5

    def thawed(w):
        w.flags.writeable = True
        w[:] = 0.5

    def frozen(w):
        w.flags.writeable = False
        return w
    for make in (lambda w: lambda v: np.sum(np.sin(v * w)),  # the backward reads w
                 lambda w: lambda v: np.sum(np.sin(v + w))):  # only cos(v + w), a residual
        same(run(make, in_place, True), run(make, in_place, False))
    def read_only(w):
        return lambda v, w=frozen(w): np.sum(np.sin(v * w))
    x5, w5 = np.linspace(-1.0, 1.0, 5), np.arange(1.0, 6.0)
    same(run(read_only, thawed, True), (np.cos(x5 * w5) * w5,))
    with pytest.raises(RuntimeError, match="between the forward and the pullback"):
        run(read_only, thawed, True, n=1000)  # 8,000 bytes: read in place, checked


def test_a_failed_guard_in_either_half_falls_back():
    c = tp.custom_vjp(lambda x: np.sin(x))
    c.defvjp(lambda x: (np.sin(x), x),
             lambda x, g: (np.cos(x) * g if np.all(g != 0) else np.zeros_like(x),))

    def f(x):
        y = c(x) * 2.0
        return y if np.sum(x) > 0 else -y  # a guard in the forward
    jf = tp.jit(f)
    for x in (np.linspace(0.1, 1.0, 4), np.linspace(-1.0, -0.1, 4)):
        for ct in (np.ones(4), np.zeros(4), np.arange(1.0, 5.0)):  # a guard in the backward
            y, pb = tp.vjp(jf, x)
            w, want = tp.vjp(f, x)
            same((y, pb(ct)), (w, want(ct)))


def test_traced_cotangents_after_the_split_stay_exact():
    g = tp.jit(lambda x: (np.sin(x), np.sum(x ** 3)))
    h = lambda x: np.sum(g(x)[0] * 2.0) + g(x)[1]  # noqa: E731
    h0 = lambda x: np.sum(np.sin(x) * 2.0) + np.sum(x ** 3)  # noqa: E731
    x = np.arange(3.0)
    same(tp.grad(h)(x), tp.grad(h0)(x))
    same(tp.grad(h)(x), tp.grad(h0)(x))
    assert g._splits
    np.testing.assert_allclose(tp.hessian(h)(x), tp.hessian(h0)(x), rtol=1e-13)
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(tp.grad(h)(x) ** 2))(x),
                               tp.grad(lambda x: np.sum(tp.grad(h0)(x) ** 2))(x), rtol=1e-13)
    np.testing.assert_allclose(tp.vmap(tp.grad(h))(np.stack([x, x + 1])),
                               tp.vmap(tp.grad(h0))(np.stack([x, x + 1])), rtol=1e-13)


@pytest.mark.parametrize("fuse", [True, "auto"])
def test_split_programs_fuse_loops(fuse):
    pytest.importorskip("numba")
    x = np.linspace(-1.0, 1.0, 50)
    f = lambda v: np.sum(_chain(_chain(v)))  # noqa: E731
    jf = tp.jit(f, fuse=fuse, fuse_after=3)
    for k in range(8):
        np.testing.assert_allclose(tp.grad(jf)(x + k / 10), tp.grad(f)(x + k / 10), rtol=1e-13)
    (sp,), _ = next(iter(jf._splits.values()))
    if fuse is True:  # (auto: kept only where faster, which timing decides)
        assert sp.split.forward.n_runs and sp.split.backward.n_runs
    else:
        assert not sp.fuse_pending


class _Model:
    def __init__(self):
        self.W = np.arange(1.0, 10.0).reshape(3, 3) / 10

    def __call__(self, v):
        return np.tanh(self.W @ v)


_table = {"s": np.array([1.0, 2.0, 3.0])}


def _helper(v):
    return np.exp(v * _table["s"])


@pytest.mark.parametrize("case", ["attribute in place", "attribute rebound",
                                  "global in place", "global rebound"])
def test_a_warm_split_pullback_after_its_environment_changed(case):
    """As tests/test_jit_redteam3.py, with the split in use: the jitted
    pullback equals the plain one made at the same point, without refusing
    (the joint program alone recomputes the forward, and refuses)."""
    x = np.linspace(-1.0, 1.0, 3)

    def make():
        m = _Model()
        _table["s"] = np.array([1.0, 2.0, 3.0])
        return m, (lambda v: m(v) * _helper(v))

    def change(m):
        if case == "attribute in place":
            m.W *= 0.5
        elif case == "attribute rebound":
            m.W = m.W * 0.5
        elif case == "global in place":
            _table["s"][:] = -1.0
        else:
            _table["s"] = np.zeros(3)
    ct = np.array([1.0, -2.0, 0.5])
    m, f = make()
    _, pb = tp.vjp(f, x)
    change(m)
    want = pb(ct)
    m, f = make()
    jf = tp.jit(f)
    for _ in range(2):
        tp.vjp(jf, x)[1](ct)
    assert jf._splits
    _, jpb = tp.vjp(jf, x)
    change(m)
    got = jpb(ct)  # the residuals and the trace's copies are the forward's
    same(got, want)
