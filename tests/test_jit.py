"""tapestry.jit: replays equal the uncompiled calls, and everything that
could make a replay stale traces again (or runs uncompiled, warned).

Each test calls the jitted function on a sequence of inputs built to break
a trace-once compiler and compares every result with the plain call
(``check``).  The op sweep (tests/sweep.py ``check_jit``) covers every
rule under jit; this file covers the compiler's own semantics.
"""
from __future__ import annotations

import random
import threading
import warnings

import numpy as np
import pytest

import tapestry as tp
from jit_checks import same
from tapestry.jit import JitError, JitWarning


def check(f, *calls, **jit_kw):
    """Every call of ``jit(f)`` equals the plain call; returns the jit."""
    jf = tp.jit(f, **jit_kw)
    for args in calls:
        same(jf(*args), f(*args))
    return jf


def rng(seed=0):
    return np.random.default_rng(seed)


# --- replay --------------------------------------------------------------------------
def test_replay_is_the_plain_call_and_traces_once():
    f = lambda x, w: np.tanh(x @ w).sum() * 2.0  # noqa: E731
    r = rng()
    calls = [(r.normal(size=(4, 3)), r.normal(size=(3, 2))) for _ in range(4)]
    jf = check(f, *calls)
    assert jf.cache_info()["traces"] == 1


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "hessian", "hvp",
                                       "jacobian", "jacfwd", "elementwise_grad"])
def test_jit_of_transformations(transform):
    def loss(x):
        return np.sum(np.sin(x) * x ** 2) + np.prod(np.cos(x[:2]))
    r = rng(1)
    xs = [(r.normal(size=3),) for _ in range(3)]
    if transform == "hvp":
        v = r.normal(size=3)
        f = lambda x: tp.hessian_vector_product(loss)(x, v)  # noqa: E731
    elif transform == "elementwise_grad":
        f = tp.elementwise_grad(lambda x: np.sin(x) * x)
    else:
        f = getattr(tp, transform)(loss)
    jf = check(f, *xs)
    assert jf.cache_info()["traces"] == 1


def test_jit_of_jvp_vjp_and_vmap():
    f = lambda x: np.sin(x) * np.exp(x[::-1])  # noqa: E731
    r = rng(2)
    xs = [r.normal(size=4) for _ in range(3)]
    check(lambda x, t: tp.jvp(f, (x,), (t,)), *[(x, x + 1) for x in xs])
    check(lambda x, c: tp.vjp(f, x)[1](c), *[(x, x * 2) for x in xs])
    check(tp.vmap(lambda x: np.sum(np.tanh(x) ** 2)), *[(r.normal(size=(5, 3)),)
                                                        for _ in range(3)])
    check(tp.vmap(tp.grad(lambda w, x: np.sum(np.tanh(x @ w))), in_axes=(None, 0)),
          *[(r.normal(size=(3, 2)), r.normal(size=(6, 4, 3))) for _ in range(2)])


def test_grad_of_jit_and_vmap_of_jit_run_inline():
    jf = tp.jit(lambda x: np.sum(np.sin(x) ** 2))
    x = rng(3).normal(size=5)
    same(tp.grad(jf)(x), tp.grad(lambda x: np.sum(np.sin(x) ** 2))(x))
    same(tp.vmap(jf)(np.stack([x, x * 2])),
         np.array([np.sum(np.sin(x) ** 2), np.sum(np.sin(2 * x) ** 2)]))
    inner = tp.jit(lambda x: x * 3.0)
    outer = check(lambda x: inner(x) + inner(x * 2), (x,), (x + 1,))
    assert outer.cache_info()["traces"] == 1


def test_pytrees_in_and_out():
    def f(p, x):
        h = np.tanh(x @ p["w"] + p["b"])
        return {"loss": np.sum(h ** 2), "h": h, "n": 3}
    r = rng(4)
    p = {"w": r.normal(size=(3, 2)), "b": r.normal(size=2)}
    check(f, (p, r.normal(size=(4, 3))), (p, r.normal(size=(4, 3))))
    check(tp.grad(lambda p, x: f(p, x)["loss"]), (p, r.normal(size=(4, 3))),
          ({"w": p["w"] * 2, "b": p["b"]}, r.normal(size=(4, 3))))


# --- signatures ----------------------------------------------------------------------
def test_shapes_dtypes_and_structures_trace_again():
    f = lambda x: np.sum(x * x) / x.shape[0]  # noqa: E731
    jf = check(f, (np.ones(3),), (np.ones(4),), (np.ones(3, np.float32),),
               (np.ones((2, 2)),), (np.arange(3),), (np.ones(3),))
    assert jf.cache_info()["signatures"] == 5
    misses = jf.explain_cache_misses()
    assert any("(4,)" in m for m in misses), misses


def test_python_scalars_are_inputs_not_constants():
    f = lambda x, s, n: x * s + n  # noqa: E731
    x = np.arange(3.0, dtype=np.float32)
    jf = check(f, (x, 2.0, 1), (x, 3.5, 7), (x, -1.0, 0))
    assert jf.cache_info()["traces"] == 1
    # the weak type of a Python float survives: float32 stays float32
    assert jf(x, 2.0, 1).dtype == np.float32


def test_python_int_read_by_range_is_a_guard():
    def f(x, n):
        for _ in range(n):
            x = np.sin(x)
        return x
    x = rng(5).normal(size=3)
    jf = check(f, (x, 1), (x, 2), (x, 1), (x, 3))
    assert any("index" in m for m in jf.explain_cache_misses())


def test_static_argnums_and_argnames():
    def f(x, mode, scale=1.0):
        return np.sum(x) * scale if mode == "sum" else np.max(x) * scale
    x = rng(6).normal(size=4)
    jf = tp.jit(f, static_argnums=1, static_argnames="scale")
    for mode in ("sum", "max", "sum"):
        for scale in (1.0, 2.0):
            same(jf(x, mode, scale=scale), f(x, mode, scale=scale))
    assert jf.cache_info()["signatures"] == 4
    with pytest.raises(TypeError, match="hashable"):
        tp.jit(f, static_argnums=1)(x, ["sum"])


def test_bool_arguments_are_static():
    f = lambda x, flag: np.sum(x) if flag else -np.sum(x)  # noqa: E731
    x = np.ones(3)
    jf = check(f, (x, True), (x, False), (x, True))
    assert jf.cache_info()["traces"] == 2


# --- guards --------------------------------------------------------------------------
def test_branch_on_data_is_guarded():
    def f(x):
        if np.sum(x) > 0:
            return x * 2
        return x - 1
    jf = check(f, (np.ones(3),), (-np.ones(3),), (np.ones(3) * 2,), (-np.ones(3) * 3,))
    assert jf.cache_info()["traces"] == 2  # one program per branch, both kept


def test_while_loop_on_data():
    def f(x):
        n = 0
        while np.max(np.abs(x)) > 1.0:
            x = x / 2
            n += 1
        return x, n
    check(f, (np.array([3.0]),), (np.array([30.0]),), (np.array([0.5]),), (np.array([3.1]),))


def test_float_item_and_asarray_reads_are_guarded():
    f1 = lambda x: x * float(np.sum(x))  # noqa: E731
    f2 = lambda x: x * np.sum(x).item()  # noqa: E731
    f3 = lambda x: np.asarray(x) * 2  # noqa: E731
    f4 = lambda x: x[int(np.argmax(x))]  # noqa: E731
    r = rng(7)
    xs = [(r.normal(size=4),) for _ in range(3)]
    for f in (f1, f2, f3, f4):
        check(f, *xs)


def test_index_from_argmax_needs_no_guard_when_staged():
    f = lambda x, w: w[np.argmax(x)] * x  # noqa: E731
    r = rng(8)
    w = r.normal(size=4)
    jf = check(f, *[(r.normal(size=4), w) for _ in range(5)])
    assert jf.cache_info()["traces"] == 1


def test_data_dependent_shapes_are_guarded():
    f = lambda x: np.sum(x[x > 0] ** 2) + len(np.nonzero(x > 1)[0])  # noqa: E731
    check(f, (np.array([1.0, -1, 2]),), (np.array([1.0, 1, 2]),), (np.array([-1.0, -1, 3]),))
    g = lambda x: np.unique(np.round(x)).sum()  # noqa: E731
    check(g, (np.array([1.0, 1, 2]),), (np.array([1.0, 2, 3]),))


def test_too_many_traces_fall_back_with_one_warning_naming_the_line():
    f = lambda x: x * float(np.sum(x))  # noqa: E731
    jf = tp.jit(f, max_traces=3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(8):
            x = np.full(2, float(k))
            same(jf(x), f(x))
    msgs = [str(m.message) for m in w if issubclass(m.category, JitWarning)]
    assert len(msgs) == 1 and "test_jit.py" in msgs[0], msgs


def test_strict_raises_instead_of_falling_back():
    f = lambda x: x * float(np.sum(x))  # noqa: E731
    jf = tp.jit(f, max_traces=2, strict=True)
    jf(np.ones(2))
    jf(np.ones(2) * 2)
    with pytest.raises(JitError, match="traced 2 times"):
        jf(np.ones(2) * 3)


def test_exceptions_in_the_function():
    def f(x):
        if np.any(x < 0):
            raise ValueError("negative")
        return np.sqrt(x)
    jf = tp.jit(f)
    same(jf(np.ones(2)), f(np.ones(2)))
    with pytest.raises(ValueError, match="negative"):
        jf(-np.ones(2))
    same(jf(np.ones(2) * 4), f(np.ones(2) * 4))


def test_caught_exceptions_are_guards():
    def f(a):
        try:
            return np.linalg.cholesky(a)
        except np.linalg.LinAlgError:
            return np.zeros_like(a)
    spd = np.array([[2.0, 0.5], [0.5, 1.0]])
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    check(f, (spd,), (bad,), (spd * 2,), (bad * 2,), (spd,))


# --- environment ---------------------------------------------------------------------
W_GLOBAL = np.ones(3)
SCALE = 2.0


def _uses_globals(x):
    return np.sum(x * W_GLOBAL) * SCALE


def test_globals_rebound_and_mutated():
    global W_GLOBAL, SCALE
    x = np.arange(3.0)
    jf = tp.jit(_uses_globals)
    same(jf(x), _uses_globals(x))
    W_GLOBAL[1] = 5.0                      # in place
    same(jf(x), _uses_globals(x))
    W_GLOBAL = np.full(3, 7.0)             # rebound
    same(jf(x), _uses_globals(x))
    SCALE = 3.0                            # a Python float rebound
    same(jf(x), _uses_globals(x))
    W_GLOBAL, SCALE = np.ones(3), 2.0


def test_closures_mutated_rebound_and_derived():
    w = np.ones(3)
    table = {"b": np.zeros(3)}
    items = [1.0]

    def f(x):
        return np.sum(np.exp(w) * x + table["b"]) * items[0]  # exp(w): plain NumPy
    x = np.arange(3.0)
    jf = tp.jit(f)
    same(jf(x), f(x))
    w[0] = -1.0
    same(jf(x), f(x))
    table["b"] = np.ones(3)
    same(jf(x), f(x))
    items.append(2.0)
    items[0] = 4.0
    same(jf(x), f(x))

    def rebind():
        nonlocal w
        w = np.full(3, 0.5)
    rebind()
    same(jf(x), f(x))


@pytest.mark.parametrize("where", [0, 1, -1, "middle", "second half", "sign of zero"])
def test_a_large_closed_over_array_changed_anywhere_is_seen(where):
    """Arrays over ``split.COMPARE_MIN_BYTES`` are compared in slices on
    several threads: a change in any slice (its first or last byte, a
    slice boundary, -0.0 for 0.0) traces again."""
    from tapestry.jit import split
    n = 4 * split.COMPARE_MIN_BYTES // 8 + 3  # several slices, a ragged end
    data = np.zeros(n)
    jf = tp.jit(lambda x: np.sum(np.sqrt(np.abs(data)) * x) + np.sum(1.0 / (data + 2.0)))
    plain = jf.fun
    x = np.linspace(0.0, 1.0, n)
    same(jf(x), plain(x))
    k = {"middle": n // 2, "second half": 3 * n // 4, "sign of zero": n // 4}.get(where, where)
    data[k] = -0.0 if where == "sign of zero" else 7.0
    same(jf(x), plain(x))
    if where == "sign of zero":  # the value is the same; the bits differ: traced again
        assert any("modified in place" in m for m in jf.explain_cache_misses())


class Model:
    def __init__(self, w):
        self.w = w
        self.scale = 1.0

    @tp.jit
    def forward(self, x):
        return np.tanh(x @ self.w) * self.scale


def test_methods_and_attributes():
    r = rng(9)
    a, b = Model(r.normal(size=(3, 2))), Model(r.normal(size=(3, 2)))
    x = r.normal(size=(4, 3))
    plain = Model.forward.fun
    same(a.forward(x), plain(a, x))
    same(b.forward(x), plain(b, x))  # another instance: its own weights
    a.scale = 3.0
    same(a.forward(x), plain(a, x))
    a.w = a.w * 2
    same(a.forward(x), plain(a, x))
    a.w[0, 0] = 10.0
    same(a.forward(x), plain(a, x))


def test_helper_functions_and_their_globals_are_guarded():
    state = {"k": 2.0}

    def helper(x):
        return x * state["k"]

    def f(x):
        return np.sum(helper(x) ** 2)
    x = np.arange(3.0)
    jf = tp.jit(f)
    same(jf(x), f(x))
    state["k"] = 5.0
    same(jf(x), f(x))


def test_mutating_the_environment_while_running_runs_uncompiled():
    history = []

    def f(x):
        history.append(1)
        return x * len(history)
    jf = tp.jit(f)
    with pytest.warns(JitWarning, match="changes what it reads"):
        r1 = jf(np.ones(2))
    r2 = jf(np.ones(2))
    same(r2, np.ones(2) * 2)
    assert r1[0] == 1.0 and len(history) == 2


# --- randomness ----------------------------------------------------------------------
def test_random_draws_are_fresh_or_refused():
    f = lambda x: x + np.random.normal(size=x.shape)  # noqa: E731
    jf = tp.jit(f)
    with pytest.warns(JitWarning, match="random"):
        a = jf(np.zeros(3))
    b = jf(np.zeros(3))
    assert not np.array_equal(a, b)
    g = rng(10)
    h = tp.jit(lambda x: x + g.normal(size=x.shape))
    with pytest.warns(JitWarning, match="random"):
        a = h(np.zeros(3))
    assert not np.array_equal(a, h(np.zeros(3)))
    p = tp.jit(lambda x: x + random.random())
    with pytest.warns(JitWarning, match="random"):
        a = p(np.zeros(1))
    assert a[0] != p(np.zeros(1))[0]
    with pytest.raises(JitError, match="random"):
        tp.jit(f, strict=True)(np.zeros(3))


def test_seeded_generator_made_inside_is_deterministic_and_compiles():
    def f(x):
        noise = np.random.default_rng(0).normal(size=x.shape)
        return x + noise
    jf = check(f, (np.zeros(3),), (np.ones(3),))
    assert jf.cache_info()["traces"] == 1


# --- buffers and in-place updates ----------------------------------------------------
def test_constants_keep_the_memory_layout_of_the_trace():
    """A constant made inside the function as a broadcast (zero strides) or a
    reversed view is replayed in that layout: matmul picks BLAS or its own
    loop by layout, so a contiguous copy rounded differently from the trace
    (seen as 3e-13 in W4's stacked gradients under jit(value_and_grad(vmap)))."""
    h = rng(12).normal(size=(64, 256, 64))
    broadcast = lambda h: np.broadcast_to(np.ones((1, 1, 1)), (64, 1, 256)) @ h  # noqa: E731
    reversed_ = lambda h: np.arange(256.0)[::-1] @ h  # noqa: E731
    for f in (broadcast, reversed_):
        check(f, (h,), (h,), (h + 1.0,))
    ms = {"W": rng(13).normal(size=(16, 64, 32)), "b": rng(14).normal(size=(16, 64))}
    x = rng(15).normal(size=(32, 256))
    mlp = lambda m, x: np.sum(np.tanh(m["W"] @ x + m["b"][:, None]))  # noqa: E731
    total = lambda ms, x: np.sum(tp.vmap(mlp, in_axes=(0, None))(ms, x))  # noqa: E731
    check(tp.value_and_grad(total), (ms, x), (ms, x))


def test_returned_arrays_are_never_overwritten():
    c = np.arange(3.0)
    f = lambda x: (x * 2, c * 1.0, x)  # noqa: E731
    jf = tp.jit(f)
    r1 = jf(np.ones(3))
    r2 = jf(np.ones(3) * 5)
    assert r1[0][0] == 2.0 and r2[0][0] == 10.0
    r2[1][0] = 99.0  # the caller writes into a result
    assert jf(np.ones(3))[1][0] == 0.0


def test_inputs_updated_in_place_between_calls():
    p = {"w": np.ones(3)}
    loss = lambda p, x: np.sum((p["w"] * x - 1.0) ** 2)  # noqa: E731
    step = tp.jit(tp.grad(loss))
    x = np.arange(3.0)
    for _ in range(5):
        g = step(p, x)
        same(g, tp.grad(loss)(p, x))
        p["w"] -= 0.1 * g["w"]  # what the optimizers do


def test_optimizer_loop_with_jit():
    r = rng(11)
    X, y = r.normal(size=(20, 3)), r.normal(size=20)
    params = {"w": np.zeros(3), "b": np.zeros(())}
    loss = lambda p: np.mean((X @ p["w"] + p["b"] - y) ** 2)  # noqa: E731
    vg = tp.jit(tp.value_and_grad(loss))
    params2 = {"w": np.zeros(3), "b": np.zeros(())}
    opt, opt2 = tp.optim.Adam(lr=0.1), tp.optim.Adam(lr=0.1)
    for _ in range(10):
        v, g = vg(params)
        v2, g2 = tp.value_and_grad(loss)(params2)
        same((v, g), (v2, g2))
        opt.update(params, g)
        opt2.update(params2, g2)
    assert vg.cache_info()["traces"] == 1


def test_writes_inside_the_function():
    def f(x):
        y = x * 2
        y[0] = 7.0
        y += 1
        v = y[1:]
        v *= 3
        return y
    check(f, (np.ones(3),), (np.arange(3.0),))

    def g(x):
        x[0] = 0.0  # into the caller's array: runs uncompiled
        return x * 2
    jg = tp.jit(g)
    with pytest.warns(JitWarning, match="in place"):
        a = np.ones(3)
        jg(a)
    assert a[0] == 0.0


def test_out_into_a_plain_array_runs_uncompiled():
    buf = np.zeros(3)

    def f(x):
        np.multiply(x, 2, out=buf)
        return buf.sum()
    jf = tp.jit(f)
    with pytest.warns(JitWarning):
        assert jf(np.ones(3)) == 6.0
    assert jf(np.ones(3) * 2) == 12.0


# --- diagnostics, threads, misuse ----------------------------------------------------
def test_explain_shows_program_guards_and_environment():
    w = np.ones(2)

    def f(x):
        return np.sum(x * w) if np.sum(x) > 0 else 0.0
    text = tp.jit(f).explain(np.ones(2))
    assert "guards" in text and "bool True" in text
    assert "closure variable 'w'" in text and "def f(" in text


def test_threads_share_one_program():
    f = tp.jit(tp.grad(lambda x: np.sum(np.sin(x) ** 2)))
    r = rng(12)
    xs = [r.normal(size=50) for _ in range(40)]
    want = [tp.grad(lambda x: np.sum(np.sin(x) ** 2))(x) for x in xs]
    got = [None] * len(xs)

    def work(k):
        for i in range(k, len(xs), 4):
            got[i] = f(xs[i])
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for a, b in zip(got, want):
        same(a, b)
    assert f.cache_info()["traces"] <= 4


def test_staged_value_escaping_the_trace_raises():
    kept = []

    def f(x):
        kept.append(x)
        return x * 2
    jf = tp.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jf(np.ones(2))
    assert not any(isinstance(k, tp.Var) for k in kept)


def test_not_a_function():
    with pytest.raises(TypeError, match="expected a function"):
        tp.jit(3)


def test_closure_over_a_traced_value_runs_inline():
    def outer(w):
        inner = tp.jit(lambda x: np.sum(x * w))
        return inner(np.arange(3.0))
    w = np.ones(3)
    same(tp.grad(outer)(w), np.arange(3.0))


# --- the lowering's buffer plan ----------------------------------------------------------
def test_reused_buffers_never_change_a_value_still_read():
    def f(x):
        a = np.exp(x)            # a fresh buffer
        v = a[:, 0]              # a view of it: a may not be reused
        b = np.tanh(a) * 2.0     # a dies here, but its view lives on
        c = np.sin(b) + 1.0      # b dies: its buffer may take the result
        return v * 1.0, c, b.shape
    r = rng(13)
    check(f, (r.normal(size=(64, 8)),), (r.normal(size=(64, 8)),))

    def g(x):
        h = np.exp(x) * 2.0
        out = h + 1.0            # h dies here but is returned: never reused
        return h, out
    check(g, (r.normal(size=(40, 10)),), (r.normal(size=(40, 10)),))


def test_a_buffer_reached_through_a_dead_view_takes_the_result():
    # W4's forward: the bias add writes into the matmul's result, reshaped
    def f(a, w, b):
        h = (a @ w).reshape(8, 8, 40) + b
        return np.sum(np.tanh(h))
    r = rng(21)
    calls = [(r.normal(size=(64, 5)), r.normal(size=(5, 40)), r.normal(size=(8, 8, 1)))
             for _ in range(3)]
    jf = check(f, *calls, fuse=False)
    add = [ln for ln in jf.explain(*calls[0]).splitlines() if "add" in ln]
    assert add and "out=" in add[0], add


def test_buffers_reached_through_views_are_reused_only_when_nothing_sees_them():
    r = rng(22)
    x = r.normal(size=(16, 20))
    const = np.linspace(0.0, 1.0, 320).reshape(16, 20)

    def still_read(x):
        a = np.exp(x)
        v = a.reshape(-1)
        return v * 2.0, np.sum(a)            # a is read after v dies

    def returned_view(x):
        a = np.exp(x)
        return a[:, 0], a.reshape(-1) + 1.0   # a view of a is returned

    def of_a_constant(x):
        v = np.broadcast_arrays(const, np.exp(x))[0]  # a view of a constant it holds
        return np.sum(v * 2.0 + x)

    def of_an_argument(x):
        return np.sum(x.reshape(-1) * 3.0)   # never into the caller's array

    def read_only(x):
        a = np.exp(x)
        v = np.broadcast_to(a, a.shape)      # C-contiguous, not writeable
        return np.sum(v + 1.0, axis=0)

    def other_view_read(x):
        a = np.exp(x)
        return np.sum(a * a.T.T + a[::-1], axis=0)

    for f in (still_read, returned_view, of_a_constant, of_an_argument, read_only,
              other_view_read):
        for _ in range(3):
            xs = x.copy()
            same(tp.jit(f, fuse=False)(xs), f(x))
            same(xs, x)
        jf = tp.jit(f, fuse=False)
        for _ in range(3):  # a replay must not have changed a constant for the next
            same(jf(x), f(x))
        assert jf.cache_info()["traces"] == 1, f.__name__  # (a replay that raised traces again)


def test_a_result_in_a_viewed_buffer_is_never_an_output():
    def f(x):
        return np.exp(x).reshape(-1) + 1.0  # the caller gets memory that owns itself
    x = rng(23).normal(size=(30, 20))
    jf = check(f, (x,), (x,), fuse=False)
    assert jf(x).flags.owndata and f(x).flags.owndata


def test_a_broadcast_operand_keeps_the_reused_buffers_layout():
    # W4's backward: W2.T broadcast over 256 columns times a dead buffer
    r = rng(24)
    x = r.normal(size=(30, 40, 50))

    def f(x, w):
        t = np.exp(x)
        g = np.broadcast_to(w[:, None, :], t.shape) * t
        return np.sum(g, axis=2), np.sum(g, axis=0), np.einsum("abc->ab", g)
    w = r.normal(size=(30, 50))
    calls = [(x, w), (x, np.asfortranarray(w)), (x, w[::-1]), (x, w), (x, w.T.copy().T)]
    jf = check(f, *calls, fuse=False)
    mul = [ln for ln in jf.explain(x, w).splitlines() if "multiply" in ln]
    assert mul and "out=" in mul[0] and "c_ordered" in mul[0], mul


@pytest.mark.parametrize("strides_of", ["c", "f", "broadcast_c", "broadcast_f", "reversed",
                                        "sliced"])
def test_c_ordered_operands_give_numpys_c_layout(strides_of):
    from tapestry.jit.program import c_ordered
    r = rng(25)
    t = r.normal(size=(6, 7, 8))
    w = r.normal(size=(6, 8))
    op = {"c": t * 1.0, "f": np.asfortranarray(t),
          "broadcast_c": np.broadcast_to(w[:, None, :], t.shape),
          "broadcast_f": np.broadcast_to(np.asfortranarray(w)[:, None, :], t.shape),
          "reversed": t[::-1], "sliced": r.normal(size=(6, 7, 16))[..., ::2]}[strides_of]
    if c_ordered(op):
        assert np.multiply(op, t).flags.c_contiguous
        assert np.multiply(t, op).flags.c_contiguous
    assert c_ordered(op) == (strides_of in ("c", "broadcast_c", "sliced"))


def test_program_drops_what_it_no_longer_reads():
    src = tp.jit(lambda x: np.sum(np.exp(np.sin(x) * 2.0))).explain(np.ones(300))
    assert "del " in src and "out=" in src


def test_repeated_calls_and_multiplies_by_one_are_simplified_not_shared():
    def f(x):
        a = np.sum(np.exp(x), axis=0)
        b = np.sum(np.exp(x), axis=0)          # the same call again
        return a, b, np.sum(np.exp(x) * np.ones_like(x)) * 2.0
    jf = check(f, (np.ones((3, 4)),), (np.arange(12.0).reshape(3, 4),))
    a, b, _ = jf(np.ones((3, 4)))
    a[0] = 99.0
    assert b[0] != 99.0  # outputs stay distinct arrays
    src = jf.explain(np.ones((3, 4)))
    assert src.count("exp") < 3


# --- sparse gradients through the replay -----------------------------------------------
def test_sparse_gradients_stay_sparse_under_jit():
    r = rng(14)
    W = r.normal(size=(65536, 8))
    x = r.normal(size=8)

    def f(W, S):
        return np.sum(W[S] @ x) + np.sum(W[S[:2]] ** 2)   # two gathers: accumulated
    jg = tp.jit(tp.grad(f))
    for S in (np.array([1, 3, 3]), np.array([4, 5, 6]), np.array([7, 7, 9])):
        a, b = jg(W, S), tp.grad(f)(W, S)
        assert isinstance(a, tp.AxisSparse) and isinstance(b, tp.AxisSparse)
        same((a.indices, a.values), (b.indices, b.values))
    assert jg.cache_info()["traces"] == 1
    # a sparse gradient meeting a dense one is added densely, as without jit
    g2 = tp.jit(tp.grad(lambda W, S: np.sum(W[S]) + 1e-3 * np.sum(W[:3] ** 2)))
    for S in (np.array([1, 2]), np.array([5, 5])):
        same(np.asarray(g2(W, S)), np.asarray(
            tp.grad(lambda W, S: np.sum(W[S]) + 1e-3 * np.sum(W[:3] ** 2))(W, S)))


def test_sparse_training_loop_under_jit():
    r = rng(15)
    W, W2 = r.normal(size=(20000, 4)), None
    W2 = W.copy()
    loss = lambda W, S, y: np.sum((W[S] @ np.ones(4) - y) ** 2)  # noqa: E731
    step = tp.jit(tp.grad(loss))
    opt, opt2 = tp.optim.SGD(lr=0.1), tp.optim.SGD(lr=0.1)
    for _ in range(5):
        S, y = r.integers(0, 20000, size=16), r.normal(size=16)
        g, g2 = step(W, S, y), tp.grad(loss)(W2, S, y)
        opt.update(W, g)
        opt2.update(W2, g2)
        same(W, W2)


# --- parallel reductions inside jit --------------------------------------------------
@pytest.mark.parametrize("executor", ["serial", "threads"])
def test_parallel_sum_and_map_are_traced_into_the_program(executor):
    r = rng(16)
    items = [{"x": r.normal(size=5), "y": r.normal(size=5)} for _ in range(8)]

    def f(item, a, b):
        return np.sum((a * item["x"] + b - item["y"]) ** 2)

    def loss(its, a, b):
        return tp.parallel_sum(f, its, a, b, executor=executor, chunk_size=3)
    jf = check(tp.value_and_grad(loss, argnums=(1, 2)), (items, 1.0, 2.0), (items, 3.0, -1.0),
               ([{"x": r.normal(size=5), "y": r.normal(size=5)} for _ in range(8)], 1.0, 2.0))
    assert jf.cache_info()["traces"] == 1
    check(lambda a: tp.parallel_map(lambda it, a: it["x"] * a, items, a, executor=executor),
          (2.0,), (3.0,))


# --- grad(jit(f)): compiled forward and pullback -------------------------------------------
def test_grad_of_jit_compiles_forward_and_pullback():
    def f(x, w):
        return np.sum(np.tanh(x @ w) ** 2)
    jf = tp.jit(f)
    r = rng(17)
    x, w = r.normal(size=(4, 3)), r.normal(size=(3, 2))
    for k in range(3):
        same(tp.grad(jf, argnums=(0, 1))(x * (k + 1), w), tp.grad(f, argnums=(0, 1))(x * (k + 1), w))
        same(tp.value_and_grad(jf)(x, w + k), tp.value_and_grad(f)(x, w + k))
    assert jf.cache_info()["traces"] == 1 and jf._reverse.cache_info()["traces"] <= 2


def test_grad_of_jit_with_several_outputs_and_higher_derivatives():
    g = tp.jit(lambda x: (np.sin(x), np.sum(x ** 3), 3))
    h = lambda x: np.sum(g(x)[0] * 2.0) + g(x)[1]  # noqa: E731
    h0 = lambda x: np.sum(np.sin(x) * 2.0) + np.sum(x ** 3)  # noqa: E731
    x = np.arange(3.0)
    same(tp.grad(h)(x), tp.grad(h0)(x))
    np.testing.assert_allclose(tp.hessian(h)(x), tp.hessian(h0)(x), rtol=1e-13)
    np.testing.assert_allclose(tp.jacfwd(tp.grad(h))(x), tp.hessian(h0)(x), rtol=1e-13)
    np.testing.assert_allclose(tp.jvp(tp.grad(h), (x,), (np.ones(3),))[1],
                               tp.jvp(tp.grad(h0), (x,), (np.ones(3),))[1], rtol=1e-13)
    np.testing.assert_allclose(tp.vmap(tp.grad(h))(np.stack([x, x + 1])),
                               tp.vmap(tp.grad(h0))(np.stack([x, x + 1])), rtol=1e-13)
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(tp.grad(h)(x) ** 2))(x),
                               tp.grad(lambda x: np.sum(tp.grad(h0)(x) ** 2))(x), rtol=1e-13)


def test_grad_of_jit_sees_closure_changes_and_traced_closures():
    w = np.ones(3)
    jf = tp.jit(lambda x: np.sum(np.sin(x) * w))
    x = np.arange(3.0)
    same(tp.grad(jf)(x), np.cos(x) * w)
    w[1] = 5.0
    same(tp.grad(jf)(x), np.cos(x) * w)

    def outer(v):  # the jitted function reads a value the outer grad traces
        inner = tp.jit(lambda x: np.sum(x * v))
        return inner(v)
    same(tp.grad(outer)(x), 2 * x)


def test_parallel_sum_of_a_jitted_item_function():
    r = rng(18)
    items = [r.normal(size=4) for _ in range(6)]
    f = lambda item, a: np.sum(np.tanh(a * item) ** 2)  # noqa: E731
    jf = tp.jit(f)
    for ex in ("serial", "threads"):
        same(tp.grad(lambda a: tp.parallel_sum(jf, items, a, executor=ex))(0.7),
             tp.grad(lambda a: tp.parallel_sum(f, items, a, executor=ex))(0.7))
    assert jf.cache_info()["traces"] == 1


def test_decorator_options_and_pickling_for_process_workers():
    import cloudpickle

    @tp.jit(fuse=False, max_traces=3)
    def f(x):
        return np.sum(x ** 2)
    assert f(np.ones(3)) == 3.0 and f.max_traces == 3
    g = cloudpickle.loads(cloudpickle.dumps(f))   # function and options, a fresh cache
    assert g(np.ones(3)) == 3.0 and g.max_traces == 3 and g.cache_info()["traces"] == 1
    items = [np.ones(3) * i for i in range(4)]
    item = tp.jit(lambda it, a: np.sum(it * a) ** 2)
    same(tp.grad(lambda a: tp.parallel_sum(item, items, a, executor="processes"))(1.0),
         tp.grad(lambda a: tp.parallel_sum(lambda it, a: np.sum(it * a) ** 2, items, a))(1.0))


# --- rules under jit take the plain call's path ---------------------------------------------
def _compiled_once(f, *calls):
    """``check`` that also insists on one trace, compiled (no JitWarning):
    a staged value must be neither pinned (a trace per value) nor refused."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        jf = check(f, *calls)
    assert jf.cache_info()["traces"] == 1, jf.explain_cache_misses()


def test_scipy_calls_on_staged_values_are_the_plain_calls():
    """tapestry.scipy functions on staged values run SciPy's function as one
    recorded step: the same bits as the plain call (not tapestry's traced
    formula), no pinned values, no refusal of functions without a rule."""
    import tapestry.scipy.linalg as tsl
    import tapestry.scipy.special as tss
    r = rng(5)
    a = r.normal(size=(4, 4))
    s = a @ a.T + 4 * np.eye(4)
    b = r.normal(size=4)
    _compiled_once(lambda v: tss.softmax(v), (b,), (2 * b,))
    _compiled_once(lambda v: tss.log_softmax(v), (b,), (2 * b,))
    _compiled_once(lambda v: tss.logsumexp(v, b=v * v), (b,), (2 * b,))
    _compiled_once(lambda v: tss.multigammaln(v, 3), (np.float64(3.3),), (np.float64(4.1),))
    _compiled_once(lambda m, v: tsl.cho_solve(tsl.cho_factor(m), v), (s, b), (2 * s, b))
    _compiled_once(lambda m: tsl.lu(m), (a,), (a * 0.5,))


def test_jit_of_grad_staged_constants_stay_constants():
    """Arguments that are constants of the gradient (interp's knots, pad's
    constant) are staged, not traced: no refusal, no pinned values."""
    r = rng(6)
    x, fp = np.linspace(0.1, 2.9, 7), r.normal(size=4)
    xp = np.array([0.0, 1.0, 2.0, 3.0])
    _compiled_once(tp.grad(lambda x, xp, fp: np.sum(np.interp(x, xp, fp) ** 2),
                           argnums=(0, 2)), (x, xp, fp), (0.9 * x, 1.1 * xp, fp))
    _compiled_once(tp.grad(lambda v, c: np.sum(np.pad(v, 1, constant_values=c) ** 2)),
                   (fp, np.float64(2.0)), (2 * fp, np.float64(3.0)))


def test_jit_of_grad_masks_from_staged_values_are_not_pinned():
    """Masks that rules compute from the values (nan-reductions, where=,
    piecewise conditions) are recorded, not read: one trace for all values."""
    x = np.array([[1.5, np.nan, -0.3], [0.2, 2.0, np.nan]])
    for h in (np.nanprod, np.nancumsum, np.nanvar, np.nanmedian,
              lambda v: np.interp(v, [0.0, 1.0, 2.0], [1.0, 3.0, 2.0])):
        _compiled_once(tp.grad(lambda v: np.sum(h(v) ** 2)), (x,), (2 * x,))
    y = np.array([-2.0, -0.7, 0.3, 1.5, 2.5])
    _compiled_once(tp.grad(lambda v: np.sum(np.piecewise(v, [v > 0], [np.sqrt, np.cos]))),
                   (y,), (y + 0.05,))


def test_jit_of_grad_sparse_cotangent_meets_a_constant_one():
    """A staged sparse cotangent (a gather's) added to a plain one (a rule's
    constant) is a step of the program, not a write into the plain array."""
    u, v = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([0.5, 1.5, 2.0])
    _compiled_once(tp.grad(lambda u, v: np.sum(np.polydiv(u, v)[1][-2:] * np.array([0.3, 0.7])),
                           argnums=(0, 1)), (u, v), (1.1 * u, v))


def test_jit_of_grad_sparse_plus_dense_keeps_negative_zeros():
    """A staged sparse cotangent added to a dense one copies the dense one
    (as the plain call does), not ``zeros + dense``, which loses -0.0."""
    x = np.array([-0.0, 1.0, 2.0, -0.0])
    _compiled_once(tp.grad(lambda v: np.sum(v[np.array([1, 2, 1])] ** 2) + np.sum(v * v[0])),
                   (x,), (x * 2,))
    if not hasattr(np, "unstack"):  # NumPy < 2.1
        return
    X = rng(7).normal(size=(3, 5))  # two gathers along different axes
    _compiled_once(tp.grad(lambda x: np.sum(np.unstack(x, axis=1)[2] * np.unstack(x)[1][:3])),
                   (X,), (2 * X,))
