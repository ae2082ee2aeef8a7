"""``parallel_sum`` of a jitted item function (tapestry.jit.items): each
chunk runs one jitted ``value_and_grad`` per item (default NumPy replay)
or one numba loop over its items (whole programs, ``fuse=True``), with no
tape.  Its results must be the tape path's: the same bits with
``fuse=False``, the per-item calls' bits with the loop, and every error,
refusal and fallback of the tape path."""
import importlib
import importlib.util

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

items_mod = importlib.import_module("tapestry.jit.items")


def _has_numba():
    return importlib.util.find_spec("numba") is not None


needs_numba = pytest.mark.skipif(not _has_numba(), reason="numba not installed")


def group_logp(g, u, alpha, beta):
    uj = u[g["j"]]
    eta = alpha + beta * g["x"] + uj
    return np.sum(g["y"] * eta - np.exp(eta) - g["c"]) - 0.5 * uj * uj


def make_groups(n, m=5, seed=0, dtype=np.float64):
    r = np.random.default_rng(seed)
    groups = [{"x": r.normal(size=m).astype(dtype), "y": r.poisson(2.0, size=m).astype(dtype),
               "c": r.normal(size=m).astype(dtype), "j": i % 7} for i in range(n)]
    return groups, r.normal(size=7) * 0.1, 0.3, -0.2


def _leaves(t):
    return tp.tree_util.tree_leaves(t)


def _same_bits(a, b):
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x, y, equal_nan=True), (x, y)


def _vg(f, groups, ex="serial", chunk_size=None, argnums=(0, 1, 2)):
    return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
        f, groups, u, a, b, executor=ex, chunk_size=chunk_size), argnums=argnums)


class Spy:
    """Counts the chunks that took the path under test (and those that
    went back to the tape)."""

    def __init__(self, monkeypatch, name):
        self.hits = self.misses = 0
        orig = getattr(items_mod, name)

        def spy(*a, **k):
            r = orig(*a, **k)
            if r is None:
                self.misses += 1
            else:
                self.hits += 1
            return r
        monkeypatch.setattr(items_mod, name, spy)


@pytest.mark.parametrize("ex", ["serial", "threads", "processes"])
@pytest.mark.parametrize("chunk_size", [None, 1, 3, 40])
def test_same_bits_as_the_tape_path(monkeypatch, ex, chunk_size):
    groups, u, a, b = make_groups(23)
    spy = Spy(monkeypatch, "sum_chunk")
    got = _vg(tp.jit(group_logp), groups, ex, chunk_size)(u, a, b)
    want = _vg(group_logp, groups, ex, chunk_size)(u, a, b)
    _same_bits(got, want)
    if ex != "processes":  # (processes run it in the workers)
        assert spy.hits > 0 and spy.misses == 0


@pytest.mark.parametrize("argnums", [0, (1,), (0, 2), (2, 1)])
def test_a_subset_of_shared_arguments(argnums):
    groups, u, a, b = make_groups(9)
    _same_bits(_vg(tp.jit(group_logp), groups, argnums=argnums)(u, a, b),
               _vg(group_logp, groups, argnums=argnums)(u, a, b))


def test_shared_pytree_and_tuple_items():
    r = np.random.default_rng(3)
    items = [(r.normal(size=3), r.normal(size=(3, 2)), float(r.normal())) for _ in range(11)]
    params = {"w": r.normal(size=2), "b": np.float64(0.1), "s": [r.normal(size=3), 2.0]}

    def f(item, p):
        x, z, t = item
        return np.sum(np.tanh(z @ p["w"] + p["b"]) * x) * p["s"][1] + t * np.sum(p["s"][0] * x)
    jf = tp.jit(f)
    for ex in ("serial", "threads"):
        got = tp.value_and_grad(lambda p: tp.parallel_sum(jf, items, p, executor=ex,
                                                           chunk_size=4))(params)
        want = tp.value_and_grad(lambda p: tp.parallel_sum(f, items, p, executor=ex,
                                                            chunk_size=4))(params)
        _same_bits(got, want)
    check_grads(lambda p: tp.parallel_sum(jf, items, p, chunk_size=4), (params,), order=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtypes_and_finite_differences(monkeypatch, dtype):
    """Against the uncompiled function: the same bits (each item's sparse
    cotangent of ``u[j]`` added as the engine adds it).  Against the tape
    path of the same jitted function within rounding only: there each
    item's call is one node whose pullback hands on a dense cotangent, and
    in float32 the two orders round differently."""
    groups, u, a, b = make_groups(8, dtype=dtype)
    u = u.astype(dtype)
    jf = tp.jit(group_logp)
    got = _vg(jf, groups, chunk_size=3)(u, a, b)
    _same_bits(got, _vg(group_logp, groups, chunk_size=3)(u, a, b))
    with monkeypatch.context() as m:
        m.setattr(items_mod, "sum_chunk", lambda *a: None)
        taped = _vg(tp.jit(group_logp), groups, chunk_size=3)(u, a, b)
    for x, y in zip(_leaves(got), _leaves(taped)):
        np.testing.assert_allclose(x, y, rtol=1e-5 if dtype == np.float32 else 1e-13)
    if dtype == np.float64:
        check_grads(lambda u, a, b: tp.parallel_sum(jf, groups, u, a, b, chunk_size=3),
                    (u, a, b), order=1)


def test_items_that_are_differentiated_take_the_tape(monkeypatch):
    r = np.random.default_rng(1)
    xs = [r.normal(size=3) for _ in range(5)]
    f = lambda x, w: np.sum(np.sin(x * w))  # noqa: E731
    jf = tp.jit(f)
    got = tp.grad(lambda xs, w: tp.parallel_sum(jf, xs, w), argnums=(0, 1))(xs, 0.5)
    want = tp.grad(lambda xs, w: tp.parallel_sum(f, xs, w), argnums=(0, 1))(xs, 0.5)
    _same_bits(got, want)


def test_items_of_several_signatures():
    r = np.random.default_rng(2)
    items = [r.normal(size=3 + (i % 3)) for i in range(10)] + [2.5, 3]
    f = lambda x, w: np.sum(np.exp(w * x)) + 0.5 * w * w  # noqa: E731
    for fuse in (False, True) if _has_numba() else (False,):
        jf = tp.jit(f, fuse=fuse)
        got = tp.value_and_grad(lambda w: tp.parallel_sum(jf, items, w, chunk_size=4))(0.3)
        want = tp.value_and_grad(lambda w: tp.parallel_sum(f, items, w, chunk_size=4))(0.3)
        # (rounding only: for some items the tape path adds their
        # contributions to w in another grouping than one total per item)
        np.testing.assert_allclose(np.asarray(_leaves(got)), np.asarray(_leaves(want)),
                                   rtol=1e-13)


@pytest.mark.parametrize("fuse", [False, pytest.param(True, marks=needs_numba)])
def test_an_item_that_raises_is_named(fuse):
    groups, u, a, b = make_groups(12)
    groups[7] = dict(groups[7], j=99)  # out of bounds for u
    jf = tp.jit(group_logp, fuse=fuse)
    with pytest.raises(tp.parallel.ParallelItemError, match="IndexError on item 7"):
        _vg(jf, groups, chunk_size=5)(u, a, b)


def test_a_value_that_is_not_one_number_is_refused_as_before():
    items = [np.ones(3), np.ones(3)]
    jf = tp.jit(lambda x, w: x * w)
    with pytest.raises(tp.parallel.ParallelItemError, match="f must return one number"):
        tp.grad(lambda w: tp.parallel_sum(jf, items, w))(1.0)


def test_complex_values_take_the_tape():
    items = [np.arange(3.0) + i for i in range(4)]
    f = lambda x, w: np.sum(np.exp(1j * w * x))  # noqa: E731
    jf = tp.jit(f)
    got = tp.grad(lambda w: np.real(tp.parallel_sum(jf, items, w)))(0.3)
    want = tp.grad(lambda w: np.real(tp.parallel_sum(f, items, w)))(0.3)
    _same_bits(got, want)


def test_static_arguments_take_the_tape():
    items = [np.arange(3.0) + i for i in range(4)]

    def f(x, w, k):
        return np.sum(x ** k * w)
    jf = tp.jit(f, static_argnums=2)
    _same_bits(tp.grad(lambda w: tp.parallel_sum(jf, items, w, 2))(0.3),
               tp.grad(lambda w: tp.parallel_sum(f, items, w, 2))(0.3))


def test_a_closure_changed_between_calls_is_seen():
    groups, u, a, b = make_groups(9)
    scale = np.array([1.0])

    def f(g, u, a, b):
        return group_logp(g, u, a, b) * scale[0]
    for fuse in (False, True) if _has_numba() else (False,):
        jf = tp.jit(f, fuse=fuse)
        first = _vg(jf, groups, chunk_size=4)(u, a, b)
        scale[0] = 2.0
        second = _vg(jf, groups, chunk_size=4)(u, a, b)
        np.testing.assert_allclose(second[0], 2 * first[0], rtol=1e-12)
        scale[0] = 1.0


def test_cache_info_counts_the_derived_programs():
    groups, u, a, b = make_groups(9)
    jf = tp.jit(group_logp)
    for _ in range(3):
        _vg(jf, groups, chunk_size=4)(u, a, b)
    info = jf.cache_info()
    assert info["traces"] == 1 and info["signatures"] == 1
    jf.clear_cache()
    assert jf.cache_info()["signatures"] == 0


@needs_numba
@pytest.mark.parametrize("ex", ["serial", "threads"])
def test_whole_programs_loop_over_the_items(monkeypatch, ex):
    """The numba loop gives the bits of one jitted call per item."""
    groups, u, a, b = make_groups(40)
    spy = Spy(monkeypatch, "_driven")
    jf = tp.jit(group_logp, fuse=True)
    looped = _vg(jf, groups, ex, 7)(u, a, b)
    assert spy.hits > 0
    monkeypatch.setattr(items_mod, "_driven", lambda *a: None)
    per_call = _vg(tp.jit(group_logp, fuse=True), groups, ex, 7)(u, a, b)
    _same_bits(looped, per_call)
    want = _vg(group_logp, groups, ex, 7)(u, a, b)
    for x, y in zip(_leaves(looped), _leaves(want)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


@needs_numba
def test_the_loop_falls_back_on_a_flag(monkeypatch):
    """An inf in one item, a guard that fails on another: the chunk runs
    one call per item, whose fallbacks give NumPy's results."""
    groups, u, a, b = make_groups(12)
    groups[3] = dict(groups[3], x=groups[3]["x"] * 1e3)  # exp overflows: inf, nan grads

    def f(g, u, a, b):
        v = group_logp(g, u, a, b)
        if g["j"] == 2:  # a guard on an item's int
            v = v * 2.0
        return v
    spy = Spy(monkeypatch, "_driven")
    with np.errstate(over="ignore", invalid="ignore"):
        got = _vg(tp.jit(f, fuse=True), groups, chunk_size=4)(u, a, b)
        want = _vg(f, groups, chunk_size=4)(u, a, b)
    assert spy.misses > 0
    for x, y in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_plain_items_with_forward_mode():
    groups, u, a, b = make_groups(6)
    jf = tp.jit(group_logp)
    t = (np.ones_like(u), 1.0, 0.5)
    got = tp.jvp(lambda u, a, b: tp.parallel_sum(jf, groups, u, a, b, chunk_size=4),
                 (u, a, b), t)
    want = tp.jvp(lambda u, a, b: tp.parallel_sum(group_logp, groups, u, a, b, chunk_size=4),
                  (u, a, b), t)
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y, rtol=1e-13)


def test_shared_dicts_in_another_key_order_or_key_type():
    """The per-item program rebuilds the shared arguments as the call gave
    them: a dict in another key order (f sums its values in that order) or
    with keys of another type is not the first call's."""
    items = [np.array([0.25, 0.25, 0.5]) for _ in range(5)]  # each sums to 1.0
    vals = [np.float64(1.0), np.float64(1e16), np.float64(-1e16)]  # (1 + 1e16) - 1e16 == 0

    def f(x, p):
        total = 0.0
        for v in p.values():  # order-dependent rounding
            total = total + v * np.sum(x)
        return total
    jf = tp.jit(f)
    for keys in (("a", "b", "c"), ("c", "b", "a"), ("b", "c", "a")):
        p = {k: v for k, v in zip(keys, vals)}
        got = tp.value_and_grad(lambda p: tp.parallel_sum(jf, items, p))(p)
        want = tp.value_and_grad(lambda p: tp.parallel_sum(f, items, p))(p)
        _same_bits(got, want)
        assert list(got[1]) == list(keys)


# --- batched=True: a chunk is one slice of the stacked items ---------------------------------
def groups_logp(g, u, alpha, beta):
    """group_logp of a slice of groups stacked along axis 0."""
    uj = u[g["j"]]
    eta = alpha + beta * g["x"] + uj[:, None]
    return np.sum(g["y"] * eta - np.exp(eta) - g["c"]) - 0.5 * np.sum(uj * uj)


def stacked_groups(n, m=5, seed=0, dtype=np.float64):
    groups, u, a, b = make_groups(n, m, seed, dtype)
    stacked = {k: np.array([g[k] for g in groups]) for k in groups[0]}
    return stacked, u, a, b


def _vg_batched(f, stacked, ex="serial", chunk_size=None, argnums=(0, 1, 2)):
    return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
        f, stacked, u, a, b, executor=ex, chunk_size=chunk_size, batched=True),
        argnums=argnums)


@pytest.mark.parametrize("ex", ["serial", "threads", "processes"])
@pytest.mark.parametrize("chunk_size", [None, 1, 4, 40])
def test_batched_chunks_have_the_tape_paths_bits(monkeypatch, ex, chunk_size):
    stacked, u, a, b = stacked_groups(23)
    spy = Spy(monkeypatch, "_batched_chunk")
    got = _vg_batched(tp.jit(groups_logp), stacked, ex, chunk_size)(u, a, b)
    want = _vg_batched(groups_logp, stacked, ex, chunk_size)(u, a, b)
    _same_bits(got, want)
    if ex != "processes":
        assert spy.hits > 0 and spy.misses == 0


@needs_numba
@pytest.mark.parametrize("ex", ["serial", "threads"])
def test_batched_chunks_compiled_whole(monkeypatch, ex):
    """With ``fuse=True`` each chunk's program is one whole kernel (``x[:,
    None]``, its gradient and einsum's row sums included)."""
    monkeypatch.setattr(importlib.import_module("tapestry.jit.api"), "_faster",
                        lambda new, old, inputs, repeats=5: True)
    stacked, u, a, b = stacked_groups(40, m=9)
    jf = tp.jit(groups_logp, fuse=True)
    got = _vg_batched(jf, stacked, ex, 10)(u, a, b)
    want = _vg_batched(groups_logp, stacked, ex, 10)(u, a, b)
    for x, y in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    progs = [p for d in jf._items_value_and_grad.values() for p in [d]]
    assert progs and any(vg.cache_info()["whole_programs"] for vg in progs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_chunks_dtypes_and_finite_differences(dtype):
    stacked, u, a, b = stacked_groups(11, dtype=dtype)
    u = u.astype(dtype)
    got = _vg_batched(tp.jit(groups_logp), stacked, "threads", 3)(u, a, b)
    want = _vg_batched(groups_logp, stacked, "threads", 3)(u, a, b)
    _same_bits(got, want)
    if dtype == np.float64:
        check_grads(lambda u, a, b: tp.parallel_sum(tp.jit(groups_logp), stacked, u, a, b,
                                                     batched=True, chunk_size=4),
                    (u, a, b), order=1)


def test_batched_chunk_errors_are_the_tape_paths():
    stacked, u, a, b = stacked_groups(8)

    def raises(g, u, a, b):
        if g["x"].shape[0] < 4:
            raise ValueError("a short chunk")
        return groups_logp(g, u, a, b)

    def not_a_number(g, u, a, b):
        return g["x"] * u[0]
    for f, err in ((raises, "a short chunk"), (not_a_number, "")):
        with pytest.raises(Exception, match=err) as got:
            _vg_batched(tp.jit(f), stacked, "serial", 5)(u, a, b)
        with pytest.raises(Exception) as want:
            _vg_batched(f, stacked, "serial", 5)(u, a, b)
        assert type(got.value) is type(want.value)  # (the traceback differs below)
        assert str(got.value).splitlines()[0] == str(want.value).splitlines()[0]


def test_batched_chunks_with_a_differentiated_item_take_the_tape(monkeypatch):
    stacked, u, a, b = stacked_groups(9)
    spy = Spy(monkeypatch, "_batched_chunk")

    def f(x, u):
        return tp.parallel_sum(tp.jit(lambda g, u: np.sum(g * u[0])), x, u, batched=True,
                               chunk_size=4)
    x = stacked["x"]
    _same_bits(tp.grad(f, argnums=(0, 1))(x, u),
               tp.grad(lambda x, u: tp.parallel_sum(lambda g, u: np.sum(g * u[0]), x, u,
                                                    batched=True, chunk_size=4),
                       argnums=(0, 1))(x, u))
    assert spy.hits == 0


@needs_numba
@pytest.mark.parametrize("ex", ["serial", "threads"])
def test_the_loop_adds_one_position_per_item_into_its_own_array(monkeypatch, ex):
    """``u[j]``'s gradient is added at ``j`` only (kern_into), with the bits
    of adding each item's whole gradient array: signed zeros, repeats and
    negative indices included; an item adding at several positions keeps
    whole arrays."""
    monkeypatch.setattr(importlib.import_module("tapestry.jit.api"), "_faster",
                        lambda new, old, inputs, repeats=5: True)

    def one(item, u, w):
        return item["s"] * u[item["j"]] + np.sum(w * item["x"])

    def several(item, u, w):
        return np.sum(item["s"] * u[item["k"]]) + np.sum(w * item["x"])
    r = np.random.default_rng(4)
    s = [-0.0, 0.0, 1.5, -0.0, -2.5, 1e-300, -1e-300, 0.0]
    items = [{"s": s[i % 8], "j": [2, 2, -1, 0, 3, 2, -5, 1][i % 8], "x": r.normal(size=3),
              "k": np.array([i % 3, 2, i % 3])} for i in range(29)]
    u, w = r.normal(size=5), r.normal(size=3)
    spy = Spy(monkeypatch, "_driven")
    for f in (one, several):
        jf = tp.jit(f, fuse=True)
        looped = \
            tp.value_and_grad(lambda u, w: tp.parallel_sum(jf, items, u, w, executor=ex,
                                                           chunk_size=10), argnums=(0, 1))(u, w)
        vg = next(iter(jf._items_value_and_grad.values()))
        kernels = [c.program.kernel for e in vg._cache.values() for c in e.programs]
        assert kernels and kernels[0] is not None
        assert any(kernels[0].into or ()) == (f is one)
        assert kernels[0].scratch  # (the elementwise temporaries: allocated once per loop)
        with monkeypatch.context() as m:
            m.setattr(items_mod, "_driven", lambda *a: None)
            per_call = tp.value_and_grad(lambda u, w: tp.parallel_sum(
                tp.jit(f, fuse=True), items, u, w, executor=ex, chunk_size=10),
                argnums=(0, 1))(u, w)
        _same_bits(looped, per_call)
        assert np.signbit(looped[1][0]).tolist() == np.signbit(per_call[1][0]).tolist()
    assert spy.hits > 0


# --- a whole call in one loop (sum_items) ------------------------------------------------
@pytest.fixture
def whole(monkeypatch):
    """Whole-program kernels kept whatever their timing (small items), and
    two thread workers whatever the machine's cores (the halves path)."""
    monkeypatch.setattr(importlib.import_module("tapestry.jit.api"), "_faster",
                        lambda new, old, inputs, repeats=5: True)
    monkeypatch.setattr(importlib.import_module("tapestry.parallel.executors"),
                        "_default_workers", lambda: 2)


def _tasks_only(monkeypatch):
    """The chunks as tasks (each still one loop over its items): what
    ``sum_items`` must reproduce bit for bit."""
    monkeypatch.setattr(items_mod, "sum_items", lambda *a, **k: None)


@needs_numba
@pytest.mark.parametrize("ex", ["serial", "threads"])
@pytest.mark.parametrize("chunk_size", [None, 2, 7, 40])
@pytest.mark.parametrize("shared", ["float64", "float32 u", "0-d and numpy scalars"])
def test_a_whole_call_in_one_loop_has_the_tasks_bits(monkeypatch, whole, ex, chunk_size, shared):
    """From the second call on, every chunk runs in one loop over the items
    (two with threads: the pool thread takes the first half, forced here),
    each chunk in its own row, added in chunk order: the tasks' bits, with
    scalar gradients rebuilt and cast per chunk as the tasks do."""
    monkeypatch.setattr(items_mod, "MIN_LOOP_SECONDS", 0.0)
    groups, u, a, b = make_groups(48)
    if shared == "float32 u":
        u = u.astype(np.float32)
    elif shared == "0-d and numpy scalars":
        a, b = np.array(a), np.float64(b)
    halves = []
    orig = items_mod._Rows._call
    monkeypatch.setattr(items_mod._Rows, "_call",
                        lambda self, c0, c1, cols, lo: (halves.append(lo), orig(self, c0, c1, cols, lo)))
    spy = Spy(monkeypatch, "sum_items")
    jf = tp.jit(group_logp, fuse=True)
    calls = [_vg(jf, groups, ex, chunk_size)(u, a, b) for _ in range(3)]
    # (the first call traces, item by item; whole programs take float64 only, so
    # a float32 u runs as tasks, one call per item)
    whole_programs = shared != "float32 u"
    assert spy.hits == (2 if whole_programs else 0)
    if ex == "threads" and whole_programs:
        assert any(lo > 0 for lo in halves)  # (the third call ran in two halves)
    with monkeypatch.context() as m:
        _tasks_only(m)
        jt = tp.jit(group_logp, fuse=True)
        want = [_vg(jt, groups, ex, chunk_size)(u, a, b) for _ in range(2)][1]
    for got in calls[1:]:  # (the first call's values come from its trace)
        _same_bits(got, want)
    eager = _vg(group_logp, groups, "serial", chunk_size)(u, a, b)
    for x, y in zip(_leaves(calls[-1]), _leaves(eager)):
        np.testing.assert_allclose(x, y, rtol=1e-5 if shared == "float32 u" else 1e-12,
                                   atol=1e-6 if shared == "float32 u" else 1e-12)


@needs_numba
@pytest.mark.parametrize("change", ["dtype", "key", "shape", "key order", "flag", "strided u"])
def test_a_whole_call_falls_back_to_tasks(monkeypatch, whole, change):
    """Items in the second half that do not stack as the first (threads cut
    there), a kernel flag in one chunk, a shared argument the kernel cannot
    take: the chunks run as tasks, with the per-item fallbacks' results."""
    monkeypatch.setattr(items_mod, "MIN_LOOP_SECONDS", 0.0)
    groups, u, a, b = make_groups(40)
    jf = tp.jit(group_logp, fuse=True)
    for _ in range(2):  # (traced; the loop's time taken alone: the next call cuts)
        _vg(jf, groups, "threads", 4)(u, a, b)
    g = dict(groups[35])
    if change == "dtype":
        g["x"] = g["x"].astype(np.float32)
    elif change == "key":
        g["extra"] = 1.0
    elif change == "shape":
        g["x"] = np.append(g["x"], 1.0)
        g["y"] = np.append(g["y"], 1.0)
        g["c"] = np.append(g["c"], 1.0)
    elif change == "key order":
        g = {k: g[k] for k in reversed(list(g))}
    elif change == "flag":
        g["x"] = g["x"] * 1e5  # (exp overflows)
    items = groups[:35] + [g] + groups[36:]
    if change == "strided u":
        items, u = groups, np.repeat(u, 2)[::2]
    spy = Spy(monkeypatch, "sum_items")
    with np.errstate(over="ignore", invalid="ignore"):
        got = _vg(jf, items, "threads", 4)(u, a, b)
        want = _vg(group_logp, items, "serial", 4)(u, a, b)
    assert spy.misses == 1 and spy.hits == 0
    for x, y in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


@needs_numba
def test_a_whole_call_hands_back_its_own_arrays(monkeypatch, whole):
    """Each call's gradients are new arrays: a later call (other values)
    leaves what an earlier one returned as it was."""
    groups, u, a, b = make_groups(30)
    jf = tp.jit(group_logp, fuse=True)
    spy = Spy(monkeypatch, "sum_items")
    vg = _vg(jf, groups, "serial", 5)
    vg(u, a, b)
    first = vg(u, a, b)
    kept = [np.copy(x) for x in _leaves(first)]
    vg(u + 1.0, a * 2, b)
    assert spy.hits == 2
    for x, y in zip(_leaves(first), kept):
        assert np.array_equal(np.asarray(x), y)


def test_the_pool_threads_share_balances_stacking_and_loops():
    """With threads, the caller stacks a first share of the items, hands its
    loop to a pool thread, then stacks and loops over the rest: both end
    together at (S + L) / (S + 2L) (S, L: seconds per item of stacking and of
    the loop); unmeasured, a half; never past [0.3, 0.85]."""
    from tapestry.jit import items
    assert items._first_share(None, 1e-6) == items.FIRST_SHARE
    assert items._first_share(1e-6, None) == items.FIRST_SHARE
    assert items._first_share(1.0, 1.5) == pytest.approx(2.5 / 3.5)
    assert items._first_share(1.0, 1000.0) == 0.85 and items._first_share(1000.0, 1e-9) >= 0.3
