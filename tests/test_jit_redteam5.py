"""tapestry.jit, fifth round: paths that landed with the jitted item
function of ``parallel_sum`` (``tapestry.jit.items``: one jitted
``value_and_grad`` per item, no tape), ``parallel_sum`` staged inside a
jitted function on threads / processes (``tapestry.parallel.staged``), the
cache-hit fast path of the call key and output rebuild, and buffer reuse
in replays.  Each scenario runs once plain and once jitted from a fresh
world (as in ``test_jit_users``) and must return the same types, dtypes,
shapes and bits on every call, or raise the same error.
"""
from __future__ import annotations

import importlib.util
from collections import namedtuple

import numpy as np
import pytest

import tapestry as tp

from test_jit_users import _run, _same, check_scenario, jitted, plain

SCENARIOS = {}


def _has_numba():
    return importlib.util.find_spec("numba") is not None


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _vg(f, items, *shared, argnums=0, **kw):
    return tp.value_and_grad(lambda *s: tp.parallel_sum(f, items, *s, **kw),
                             argnums=argnums)(*shared)


# --- 1. parallel_sum(jit(f), items, *shared) under grad ------------------------------
@scenario
def items_of_mixed_numbers_and_numpy_scalars(wrap, log):
    f = wrap(lambda x, w: np.sum(x * w) + 0.5 * np.sum(w * w))
    w = np.array([0.5, -1.0, 2.0])
    for items in ([1, 2.5, np.float64(3.0), np.int64(2), np.float32(1.5), True],
                  [np.ones(3), 2, np.arange(3), np.float32(0.5), False],
                  [np.array(2.0), np.float64(-1.0), 3]):
        for ex in ("serial", "threads"):
            log(_vg(f, items, w, executor=ex, chunk_size=2))


@scenario
def items_dicts_with_key_orders_changing(wrap, log):
    f = wrap(lambda it, w: np.sum(np.tanh(it["a"] * w)) * float(list(it)[0] == "a") +
             np.sum(it["b"] - w))
    w = np.array([0.3, 0.7])
    a, b = np.array([1.0, 2.0]), np.array([-1.0, 0.5])
    items = [{"a": a, "b": b}, {"b": b, "a": a}, {"a": b, "b": a}, {"b": a, "a": b}]
    for cs in (1, 2, 4):
        log(_vg(f, items, w, chunk_size=cs))
        log(_vg(f, items[::-1], w, chunk_size=cs))


@scenario
def items_with_bool_int_float_leaves(wrap, log):
    def g(it, w):
        x, flag, k = it
        return np.sum(w * x) * (2.0 if flag else 1.0) + k * np.sum(w)
    f = wrap(g)
    w = np.array([1.0, 2.0])
    x = np.array([0.5, 0.25])
    for items in ([(x, True, 1), (x, False, 2), (x, True, 3.0)],
                  [(x, np.bool_(True), np.int64(1)), (x, False, np.float32(2.0))],
                  [(x, 1, True), (x, 0, False), (x, 1.0, 1)]):
        log(_vg(f, items, w, chunk_size=2))
        log(_vg(f, items, w))


@scenario
def items_of_odd_layouts(wrap, log):
    f = wrap(lambda x, W: np.sum(np.sin(x @ W)))
    r = np.random.default_rng(0)
    W = r.normal(size=(3, 2))
    base = r.normal(size=(6, 3))
    for items in ([base[0], base[1], base[2]],
                  [base[::2][0], base[:, ::-1][1], np.asfortranarray(base[:3].T).T[2]],
                  [base.T[:, 0], base.T[:, 1]],
                  [np.asfortranarray(base[:3]).reshape(3, 3)[k] for k in range(3)],
                  [np.zeros((0, 3)), np.zeros((0, 3))]):
        log(_vg(f, items, W, chunk_size=2))
        log(_vg(f, items, W))


@scenario
def items_mutated_between_calls(wrap, log):
    f = wrap(lambda x, w: np.sum(np.exp(x * w)))
    items = [np.arange(3.0) + k for k in range(5)]
    w = np.array([0.1, -0.2, 0.3])
    for k in range(4):
        log(_vg(f, items, w, chunk_size=2))
        items[k][1] = -k
        if k == 2:
            items.append(np.ones(3))
        w = w * 1.5


@scenario
def shared_args_of_many_kinds(wrap, log):
    def g(x, p, names, obj, s):
        out = 0.0
        for n in names:
            out = out + np.sum(p[n] * x) * obj.k
        return out + len(s) * np.sum(p["a"])
    f = wrap(g)

    class O:
        k = 2.0
    o = O()
    x = [np.arange(2.0), np.ones(2), -np.arange(2.0)]
    p = {"a": np.array([1.0, 2.0]), "b": np.array([0.5, 0.5])}
    for k in range(4):
        log(_vg(lambda x, p: f(x, p, ["a", "b"][: k % 2 + 1], o, "ab" * k), x, p,
                chunk_size=2))
        log(_vg(f, x, p, ["b", "a"], o, "x" * k, chunk_size=2))
        o.k = float(k) + 0.5


@scenario
def closure_changed_between_calls(wrap, log):
    state = {"s": 1.0, "arr": np.array([1.0, 2.0])}

    def g(x, w):
        return np.sum(x * w * state["arr"]) * state["s"]
    f = wrap(g)
    items = [np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([0.5, 0.5])]
    w = np.array([0.2, 0.4])
    for k in range(4):
        log(_vg(f, items, w, chunk_size=2))
        state["s"] = state["s"] * -2
        state["arr"][0] += 1
        if k == 2:
            state["arr"] = np.array([5.0, 5.0])


@scenario
def branches_on_item_data(wrap, log):
    def g(x, w):
        if x[0] > 0:
            return np.sum(np.exp(x * w))
        if x[1] > 0:
            return np.sum(w ** 2) * x[1]
        return np.sum(np.abs(w - x))
    f = wrap(g)
    w = np.array([0.5, -0.5])
    items = [np.array([1.0, 2.0]), np.array([-1.0, 2.0]), np.array([-1.0, -2.0]),
             np.array([2.0, 0.0]), np.array([-3.0, 1.0])]
    for cs in (1, 2, 5):
        log(_vg(f, items, w, chunk_size=cs))
        log(_vg(f, items[::-1], w, chunk_size=cs))


@scenario
def f_raising_on_some_item(wrap, log):
    def g(x, w):
        if x[0] < 0:
            raise ValueError("negative item")
        return np.sum(np.log(x) * w)
    f = wrap(g)
    w = np.array([1.0, 2.0])
    items = [np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([-1.0, 1.0])]
    for cs in (1, 2, 3):
        log.call(_vg, f, items, w, chunk_size=cs)
        log.call(_vg, f, items[:2], w, chunk_size=cs)


@scenario
def inf_and_nan_in_items(wrap, log):
    f = wrap(lambda x, w: np.sum(np.exp(x * w)) + np.sum(np.sqrt(np.abs(x)) * w))
    w = np.array([0.5, 1.0])
    with np.errstate(all="ignore"):
        for items in ([np.array([1.0, np.inf]), np.array([2.0, 3.0])],
                      [np.array([np.nan, 1.0]), np.array([-np.inf, 0.0])],
                      [np.array([800.0, 1.0]), np.array([1.0, 1.0])],
                      [np.array([1.0, 2.0]), np.array([2.0, 3.0])]):
            log(_vg(f, items, w, chunk_size=1))
            log(_vg(f, items, w))


@scenario
def chunk_sizes_and_executors(wrap, log):
    f = wrap(lambda x, W, b: np.sum(np.tanh(W @ x + b)))
    r = np.random.default_rng(4)
    W, b = r.normal(size=(2, 3)), r.normal(size=2)
    items = [r.normal(size=3) for _ in range(7)]
    for ex in ("serial", "threads", "processes"):
        for cs in (None, 1, 3, 7, 100):
            log(_vg(f, items, W, b, argnums=(0, 1), executor=ex, chunk_size=cs))


@scenario
def hessian_jvp_and_vmap_around_it(wrap, log):
    f = wrap(lambda x, w: np.sum(np.sin(x * w) * x))
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]
    w = np.array([0.3, -0.4])
    s = lambda w: tp.parallel_sum(f, items, w, chunk_size=2)  # noqa: E731
    log(tp.hessian(s)(w))
    log(tp.jvp(s, (w,), (np.array([1.0, 0.5]),)))
    log(tp.jvp(tp.grad(s), (w,), (np.array([1.0, 0.5]),)))
    log(tp.vmap(tp.grad(s))(np.stack([w, 2 * w, -w])))
    log(tp.grad(lambda w: tp.grad(s)(w)[0])(w))


@scenario
def custom_vjp_and_checkpoint_inside(wrap, log):
    @tp.custom_vjp
    def clip(x):
        return np.clip(x, -1, 1)

    def clip_fwd(x):
        return clip(x), x

    def clip_bwd(x, g):
        return (g * (np.abs(x) < 1) + 0.5,)
    clip.defvjp(clip_fwd, clip_bwd)

    def g(x, w):
        h = tp.checkpoint(lambda z: np.tanh(z) * z)(x * w)
        return np.sum(clip(h * 3))
    f = wrap(g)
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]
    for k in range(3):
        log(_vg(f, items, np.array([0.3, -0.4]) * (k + 1), chunk_size=2))


@scenario
def value_that_is_an_int_or_not_differentiable(wrap, log):
    def g(x, w):
        return int(np.sum(x > 0)) + 0 * w
    f = wrap(g)
    items = [np.array([1.0, -2.0]), np.array([3.0, 4.0])]
    for w in (1.0, np.float32(2.0), np.array(1.0), 3):
        log.call(_vg, f, items, w)


@scenario
def item_function_drawing_random_numbers_and_logging(wrap, log):
    """An f that runs uncompiled (it draws from NumPy's global generator and
    logs what it sees) must meet the items in their order, once each."""
    seen = []

    def g(x, w):
        seen.append(float(x[0]))
        return np.sum(x * w * np.random.normal(size=2))
    fs = [wrap(g), g if wrap is plain else tp.jit(g, fuse=_has_numba())]
    items = [np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([6.0, 1.0]),
             np.array([-1.0, 0.5])]
    for f in fs:
        for ex, cs in (("serial", 4), ("serial", 1), ("threads", 4)):
            np.random.seed(3)
            log(_vg(f, items, np.array([0.5, 0.1]), executor=ex, chunk_size=cs))
            log(seen[:])
            del seen[:]


# --- 2. parallel_sum inside a jitted function -----------------------------------------
def _item(x, w):
    return np.sum(np.tanh(x * w))


@scenario
def staged_parallel_sum_with_changing_closure(wrap, log):
    scale = [1.0]

    def item(x, w):
        return np.sum(np.tanh(x * w)) * scale[0]

    @wrap
    def step(w, items):
        return tp.value_and_grad(lambda w: tp.parallel_sum(item, items, w,
                                                           executor="threads",
                                                           chunk_size=2))(w)
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]
    w = np.array([0.3, -0.4])
    for k in range(4):
        log(step(w, items))
        scale[0] = k + 2.0
        items[0][0] += 1


@scenario
def staged_parallel_sum_items_closed_over(wrap, log):
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]

    @wrap
    def step(w):
        v, g = tp.value_and_grad(lambda w: tp.parallel_sum(_item, items, w,
                                                           executor="threads"))(w)
        return v, g, tp.parallel_sum(_item, items, w, executor="threads")
    w = np.array([0.3, -0.4])
    for k in range(4):
        log(step(w))
        items[1][1] = k
        if k == 1:
            items.append(np.ones(2))


@scenario
def staged_two_sums_used_twice_and_unused(wrap, log):
    @wrap
    def step(w, items, other):
        a = tp.parallel_sum(_item, items, w, executor="threads", chunk_size=1)
        tp.parallel_sum(_item, other, w, executor="threads")
        b = tp.parallel_sum(lambda x, w: np.sum(x) * np.sum(w), other, w,
                            executor="threads")
        return a, a * 2, b + a
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0])]
    other = [np.array([3.0, 0.1]), np.array([2.0, 2.0]), np.array([1.0, 0.0])]
    for k in range(4):
        log(step(np.array([0.3, -0.4]) * k, items, other))
        other = other[::-1]


@scenario
def staged_grad_argnums_and_random(wrap, log):
    def item(x, W, b):
        return np.sum(np.tanh(W @ x + b))

    @wrap
    def step(W, b, items, which):
        return tp.grad(lambda W, b: tp.parallel_sum(item, items, W, b, executor="threads",
                                                    chunk_size=2), argnums=which)(W, b)
    r = np.random.default_rng(3)
    W, b = r.normal(size=(2, 3)), r.normal(size=2)
    items = [r.normal(size=3) for _ in range(5)]
    for which in (0, 1, (0, 1), (1, 0), 0):
        log(step(W, b, items, which) if wrap is plain else
            tp.jit(step.fun if hasattr(step, "fun") else step,
                   static_argnums=3)(W, b, items, which))


@scenario
def staged_errors_at_replay(wrap, log):
    def item(x, w):
        if x.shape[0] > 2:
            raise ValueError("long item")
        return np.sum(np.log(x) * w)

    @wrap
    def step(w, items):
        return tp.grad(lambda w: tp.parallel_sum(item, items, w, executor="threads"))(w)
    w = np.array([1.0, 2.0])
    with np.errstate(all="ignore"):
        for items in ([np.array([1.0, 2.0]), np.array([3.0, 4.0])],
                      [np.array([-1.0, 2.0]), np.array([3.0, 4.0])],
                      [np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])],
                      [np.array([1.0, 2.0]), np.array([3.0, 4.0])]):
            log.call(step, w, items)


@scenario
def staged_batched(wrap, log):
    def items_f(X, w):
        return np.sum(np.tanh(X @ w), axis=-1)

    @wrap
    def step(w, X):
        return tp.value_and_grad(lambda w: tp.parallel_sum(items_f, X, w, batched=True,
                                                           executor="threads",
                                                           chunk_size=3))(w)
    r = np.random.default_rng(5)
    for n in (7, 7, 4, 9):
        log(step(r.normal(size=3), r.normal(size=(n, 3))))


@scenario
def staged_processes(wrap, log):
    @wrap
    def step(w, items):
        return tp.value_and_grad(lambda w: tp.parallel_sum(_item, items, w,
                                                           executor="processes",
                                                           chunk_size=2))(w)
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]
    for k in range(3):
        log(step(np.array([0.3, -0.4]) * (k + 1), items))
        items[k][0] = 7.0


_G_SCALE = [1.0]


def _global_item(x, w):
    return np.sum(np.tanh(x * w)) * _G_SCALE[0]


@scenario
def staged_value_only_reading_a_global(wrap, log):
    @wrap
    def step(w, items):
        return tp.parallel_sum(_global_item, items, w, executor="threads", chunk_size=2)
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]
    try:
        for k in range(4):
            log(step(np.array([0.3, -0.4]), items))
            _G_SCALE[0] = k + 2.0
            if k == 2:
                globals()["_G_SCALE"] = [-1.0]
    finally:
        globals()["_G_SCALE"] = [1.0]


@scenario
def staged_random_draws_in_f(wrap, log):
    def item(x, w):
        return np.sum(x * w * np.random.normal(size=x.shape))

    @wrap
    def step(w, items):
        return tp.value_and_grad(lambda w: tp.parallel_sum(item, items, w,
                                                           executor="threads"))(w)
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0])]
    for k in range(3):
        log.call(step, np.array([0.3, -0.4]), items)


@scenario
def staged_progress_and_timeout(wrap, log):
    @wrap
    def step(w, items, timeout):
        return tp.value_and_grad(lambda w: tp.parallel_sum(
            _item, items, w, executor="threads", progress=False, timeout=timeout,
            chunk_size=1))(w)
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]
    for t in (None, 60.0, 30, None):
        log(step(np.array([0.3, -0.4]), items, t))


@scenario
def staged_jitted_item_function(wrap, log):
    item = tp.jit(_item)

    @wrap
    def step(w, items):
        return tp.value_and_grad(lambda w: tp.parallel_sum(item, items, w,
                                                           executor="threads",
                                                           chunk_size=2))(w)
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]
    for k in range(4):
        log(step(np.array([0.3, -0.4]) * (k + 1), items))
        items = items + [np.array([float(k), 1.0])]


def _rows_item(it, W, b):
    i, x = it
    return np.sum(np.tanh(W[i] * x)) + np.sum(b[i] ** 2)


@scenario
def staged_sparse_gradients_of_rows_read_by_several_items(wrap, log):
    """Items reading the same rows of a shared table: the chunks' gradients
    are sparse, and summed sparse (then scaled, then made dense) their bits
    are not those of dense chunk gradients summed."""
    r = np.random.default_rng(7)
    items = [(k % 2, r.normal(size=3)) for k in range(9)]

    @wrap
    def step(W, b, unused, scale):
        return tp.value_and_grad(lambda W, b, u: scale * tp.parallel_sum(
            lambda it, W, b, u: _rows_item(it, W, b), items, W, b, u, executor="threads",
            chunk_size=3), argnums=(0, 1, 2))(W, b, unused)
    for dt in (np.float64, np.float32, np.float64):
        W, b = r.normal(size=(4, 3)).astype(dt), r.normal(size=4).astype(dt)
        for scale in (1.0, -3.7):
            log(step(W, b, np.ones(2, dt), scale))
        items[0] = (3, r.normal(size=3))


@scenario
def staged_large_table_gradient_stays_sparse(wrap, log):
    r = np.random.default_rng(8)
    items = [(k % 3, r.normal(size=8)) for k in range(9)]

    @wrap
    def step(W, b):
        return tp.grad(lambda W, b: tp.parallel_sum(_rows_item, items, W, b,
                                                    executor="threads", chunk_size=3),
                       argnums=(0, 1))(W, b)
    for k in range(3):
        gW, gb = step(r.normal(size=(5000, 8)), r.normal(size=5000))
        log((type(gW).__name__, type(gb).__name__))
        log((gW.todense() if hasattr(gW, "todense") else gW, np.asarray(gb)))


# --- 3. the cache-hit fast path: argument trees and outputs ---------------------------
Pair = namedtuple("Pair", "a b")


@scenario
def argument_trees_of_many_kinds(wrap, log):
    @wrap
    def f(t, *, scale=1.0, mode=None):
        out = [np.sum(v) * scale for v in tp.tree_util.tree_leaves(t)]
        return {"n": len(out), "mode": mode, "v": tuple(out),
                "first": out[0] if out else None}
    x = np.arange(3.0)
    for t in ((x, x), Pair(x, x), [x, x], {"a": x, "b": x}, {"b": x, "a": x},
              {1: x, "1": x}, {"1": x, 1: x}, (x, None), (None, x), Pair(x, (x,)),
              (x, b"ab"), (x, True), (x, 1), (x, 1.0), (x, np.float32(1.0))):
        log.call(f, t)
        log.call(f, t, mode="m", scale=2.0)
        log.call(f, t, scale=2.0, mode="m")
        log.call(f, t, scale=np.float32(2.0))


@scenario
def keyword_orders(wrap, log):
    @wrap
    def f(x, **kw):
        return [k for k in kw], sum(v * x for v in kw.values())
    x = np.arange(3.0)
    log(f(x, a=1.0, b=2.0))
    log(f(x, b=2.0, a=1.0))
    log(f(x, a=1.0, b=2.0))
    log(f(x, b=np.float32(2.0), a=1.0))


@scenario
def outputs_of_many_shapes(wrap, log):
    @wrap
    def f(x, k):
        a = x * k
        return (a, [a, {"z": a + 1, "a": (a,)}], {2: a, "2": None}, ())
    for k in (1.0, 2.0, 3, np.float32(1.0), True):
        out = log(f(np.arange(3.0), k))
        out[0][0] = 99.0


# --- 4. buffer reuse in replays -------------------------------------------------------
@scenario
def returned_views_kept_across_calls(wrap, log):
    @wrap
    def f(x):
        y = np.exp(x)
        z = y.reshape(2, 300)
        return z.T, z[0], y[::2], np.sin(y) + 1
    kept = []
    for k in range(4):
        out = f(np.arange(600.0) * (k + 1) / 1000)
        kept.append(out)
        log(out)
    for out in kept:
        log(out)


@scenario
def dead_buffer_reached_through_views(wrap, log):
    @wrap
    def f(x):
        y = np.exp(x)
        v = y[1:]
        w = v.reshape(-1)
        t = np.tanh(x)      # may take a dead buffer
        s = np.sin(t) * 2   # likewise
        return w, s, y.T
    kept = []
    for k in range(4):
        out = f(np.arange(500.0) * (k + 1) / 500)
        kept.append(out)
        log(out)
        out[0][0] = -1.0
    for out in kept:
        log(out)


@scenario
def in_place_on_views_of_intermediates(wrap, log):
    @wrap
    def f(x):
        y = x * 2
        v = y[:2]
        v += 1
        z = np.exp(y)
        y2 = z.reshape(-1)[::-1]
        q = np.cos(y2)
        return q, y, y2
    for k in range(4):
        out = f(np.arange(400.0) / 400 + k)
        log(out)
        out[1][0] = 123.0


@scenario
def outputs_aliasing_each_other(wrap, log):
    @wrap
    def f(x):
        y = np.sin(x)
        return y, y, y[:2], y.reshape(2, 200), np.cos(y)
    for k in range(4):
        out = f(np.arange(400.0) / 400 + k)
        log([out[0] is out[1], np.shares_memory(out[0], out[2]),
             np.shares_memory(out[0], out[3]), np.shares_memory(out[0], out[4])])
        out[0][0] = 55.0
        log(out)


@scenario
def ufuncs_writing_into_positional_outs(wrap, log):
    @wrap
    def f(x):
        a = np.exp(x)
        c = np.sin(x)
        r = np.add(a, 1.0, c)     # r is c
        d = np.cos(x)             # a is dead here
        b = np.multiply(d, 2.0, d)
        e = np.tanh(r) + b
        return e, c, np.negative(e, out=np.empty_like(e))
    for k in range(4):
        out = log(f(np.arange(400.0) * (k + 1) / 700))
        out[1][:3] = 0.0


@scenario
def gradient_of_a_view_returning_function(wrap, log):
    @wrap
    def f(x, w):
        y = np.exp(x * w)
        v = y.reshape(2, 2).T
        return np.sum(v[0] * v[1]), v
    for k in range(4):
        g = tp.grad(lambda w: f(np.arange(4.0), w)[0])(np.arange(4.0) * 0.1 * (k + 1))
        log(g)
        log(f(np.arange(4.0), g))


# --- known: a jitted item function's gradient is one node per item ----------------------
GROUPING, FUSED = {}, {}


def grouping(fn):
    GROUPING[fn.__name__] = fn
    return fn


def fused(fn):
    FUSED[fn.__name__] = fn
    return fn


@grouping
def shared_argument_used_twice_per_item(wrap, log):
    f = wrap(lambda x, w: np.sum(np.sin(x * w)) * np.sum(w))
    items = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.1])]
    w = np.array([0.3, -0.4])
    for cs in (1, 2, 3):
        log(tp.grad(lambda w: tp.parallel_sum(f, items, w, chunk_size=cs))(w))
    log(tp.grad(lambda w: f(items[0], w) + f(items[1], w) + f(items[2], w))(w))


@scenario
def sparse_gradient_indexing_inside(wrap, log):
    def g(it, W, b):
        i, x = it
        return np.sum(np.tanh(W[i] * x + np.sum(b[i])))
    f = wrap(g)
    r = np.random.default_rng(7)
    for dt in (np.float64, np.float32):
        W = r.normal(size=(4, 3)).astype(dt)
        b = r.normal(size=4).astype(dt)
        items = [(k % 4, r.normal(size=3).astype(dt)) for k in range(9)]
        items += [(np.int64(1), r.normal(size=3).astype(dt)), (np.array([0, 0]),
                                                                r.normal(size=3).astype(dt))]
        for cs in (1, 4, None):
            log(_vg(f, items, W, b, argnums=(0, 1), chunk_size=cs))


@scenario
def float32_items_and_params(wrap, log):
    f = wrap(lambda x, w, c: np.sum(np.exp(x * w)) * c)
    r = np.random.default_rng(8)
    items = [r.normal(size=4).astype(np.float32) for _ in range(6)]
    for w, c in ((r.normal(size=4).astype(np.float32), np.float32(2.0)),
                 (r.normal(size=4).astype(np.float32), np.array(3.0, np.float32)),
                 (r.normal(size=4).astype(np.float32), np.float32(-1.0))):
        log(_vg(f, items, w, c, argnums=(0, 1), chunk_size=2))


@grouping
def float32_params_with_a_float64_factor(wrap, log):
    f = wrap(lambda x, w, c: np.sum(np.exp(x * w)) * c)
    r = np.random.default_rng(8)
    items = [r.normal(size=4).astype(np.float32) for _ in range(6)]
    r.normal(size=4)
    for w, c in ((r.normal(size=4).astype(np.float32), 2.0),
                 (r.normal(size=4), np.float32(1.5))):
        log(_vg(f, items, w, c, argnums=(0, 1), chunk_size=2))




@fused
def fuse_loop_over_items(wrap, log):
    def g(it, u, a):
        return np.sum(it["y"] * (a + u[it["j"]] * it["x"]) - np.exp(a * it["x"]))
    f = wrap(g) if wrap is plain else tp.jit(g, fuse=_has_numba())
    r = np.random.default_rng(9)
    u = r.normal(size=3)
    items = [{"x": r.normal(size=4), "y": r.normal(size=4), "j": k % 3} for k in range(8)]
    for cs in (None, 3, 8):
        log(_vg(f, items, u, 0.2, argnums=(0, 1), chunk_size=cs))
    items[3] = {"x": np.full(4, np.inf), "y": r.normal(size=4), "j": 1}
    with np.errstate(all="ignore"):
        log(_vg(f, items, u, 0.2, argnums=(0, 1), chunk_size=8))
    items[3] = {"x": r.normal(size=4), "y": r.normal(size=4), "j": 5}
    log.call(_vg, f, items, u, 0.2, argnums=(0, 1), chunk_size=8)
    items[3] = {"j": 1, "x": r.normal(size=4), "y": r.normal(size=4)}
    log(_vg(f, items, u, 0.2, argnums=(0, 1), chunk_size=8))
    items[3] = {"x": r.normal(size=4).astype(np.float32), "y": r.normal(size=4), "j": 1}
    log(_vg(f, items, u, 0.2, argnums=(0, 1), chunk_size=8))
    items[3] = {"x": r.normal(size=4), "y": r.normal(size=4), "j": 1.0}
    log.call(_vg, f, items, u, 0.2, argnums=(0, 1), chunk_size=8)
    items = [{"x": r.normal(size=4), "y": r.normal(size=4), "j": np.int64(2)} for k in range(4)]
    log(_vg(f, items, u, 0.2, argnums=(0, 1), chunk_size=8))
    log(_vg(f, items, u, np.float32(0.2), argnums=(0, 1), chunk_size=8))
    log(_vg(f, items, u.astype(np.float32), 0.2, argnums=(0, 1), chunk_size=8))
    log(_vg(f, items, np.asfortranarray(u), 2, argnums=(0,), chunk_size=8))




@pytest.mark.xfail(strict=True, reason=(
    "grad of several jitted calls sharing an argument: each call's pullback sums "
    "its own contributions first, the plain tape adds every use in reverse order "
    "(and widens float32 cotangents before casting): the last bit differs"))
@pytest.mark.parametrize("name", sorted(GROUPING))
def test_gradient_grouped_per_jitted_call(name):
    want, _ = _run(GROUPING[name], plain)
    got, _ = _run(GROUPING[name], jitted)
    for k, ((a, _), (b, _)) in enumerate(zip(want, got)):
        _same(b, a, f"{name}: call {k}")


def _close(a, b, where):
    """Within rounding (a fused loop's bits are its own), same types and errors."""
    if isinstance(a, tuple) and len(a) == 5 and a[0] == "array":
        assert a[1:3] == b[1:3], where
        np.testing.assert_allclose(a[4], b[4], rtol=1e-6 if a[1] == np.float32 else 1e-12,
                                   err_msg=where)
    elif isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], list):
        assert a[0] is b[0] and len(a[1]) == len(b[1]), (where, a, b)
        for k, (p, q) in enumerate(zip(a[1], b[1])):
            _close(p, q, f"{where}[{k}]")
    elif isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], np.generic):
        assert a[0] is b[0], (where, a, b)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-12, err_msg=where)
    else:
        assert a == b, (where, a, b)


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_item_loop(name):
    want, _ = _run(FUSED[name], plain)
    got, _ = _run(FUSED[name], jitted)
    assert len(want) == len(got)
    for k, ((a, _), (b, _)) in enumerate(zip(want, got)):
        _close(b, a, f"{name}: call {k}")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name):
    check_scenario(SCENARIOS[name], name)

