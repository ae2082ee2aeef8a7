"""Red team, round 8: jit's trace-once hazards the earlier rounds leave
out.  Every case compares with eager tapestry (the same code without
``jit``), values and gradients, over several calls: a wrong value or
gradient returned without an error is the failure looked for."""
import warnings

import numpy as np
import pytest

import tapestry as tp


def _leaves(t):
    return [np.asarray(x) for x in tp.tree_util.tree_leaves(t)]


def _same(got, want):
    lg, lw = _leaves(got), _leaves(want)
    assert len(lg) == len(lw)
    for x, y in zip(lg, lw):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def _quiet(fn, *a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a)


# --- 1. a first differentiated call whose effect changes the gradient only -------------

def _straight_through(x, m):
    """``x * x`` in value whatever ``m``; its gradient is ``2 x m``."""
    return np.sum(x * x * m + tp.stop_gradient(x * x) * (1.0 - m))


_COUNT_A = _COUNT_B = 0


def _global_counter_a(x):
    global _COUNT_A
    _COUNT_A += 1
    return _straight_through(x, float(_COUNT_A % 2))


def _global_counter_b(x):
    global _COUNT_B
    _COUNT_B += 1
    return _straight_through(x, float(_COUNT_B % 2))


class _Schedule:
    def __init__(self):
        self.t = 0

    def __call__(self, x):
        self.t += 1
        return _straight_through(x, float(self.t % 2))


def _make(kind, k):
    """``(f, state())``: a fresh function of ``kind`` (``k``: 0 or 1, its own
    state) whose effect (a
    counter, a written array) picks the mask of :func:`_straight_through`,
    and what it has changed so far."""
    if kind == "nonlocal counter":
        n = 0

        def f(x):
            nonlocal n
            n += 1
            return _straight_through(x, float(n % 2))
        return f, lambda: n
    if kind == "dict counter":
        st = {"n": 0}

        def f(x):
            st["n"] += 1
            return _straight_through(x, float(st["n"] % 2))
        return f, lambda: st["n"]
    if kind == "global counter":  # (one global for the jitted run, one for eager)
        global _COUNT_A, _COUNT_B
        _COUNT_A = _COUNT_B = 0
        if k == 0:
            return _global_counter_a, lambda: _COUNT_A
        return _global_counter_b, lambda: _COUNT_B
    if kind == "global created":  # (globals() read: every global guarded)
        name = f"_RT8_CREATED_{k}"
        globals().pop(name, None)

        def f(x):
            g = globals()
            g[name] = g.get(name, 0) + 1
            return _straight_through(x, float(g[name] % 2))
        return f, lambda: globals().get(name)
    if kind == "attribute counter":
        s = _Schedule()
        return s, lambda: s.t
    if kind == "closed-over array written":
        acc = np.zeros(1)

        def f(x):
            acc[0] += 1.0
            return _straight_through(x, acc[0] % 2.0)
        return f, lambda: acc[0]
    if kind == "list grown":
        hist = []

        def f(x):
            hist.append(0)
            return _straight_through(x, float(len(hist) % 2))
        return f, lambda: len(hist)
    if kind == "dict key added":
        seen = {}

        def f(x):
            seen[len(seen)] = 1
            return _straight_through(x, float(len(seen) % 2))
        return f, lambda: len(seen)
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["nonlocal counter", "dict counter", "global counter",
                                  "attribute counter", "closed-over array written",
                                  "list grown", "dict key added", "global created"])
@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vjp"])
def test_an_effect_that_changes_only_the_gradient(kind, transform):
    """``grad(jit(f))``'s first call traces ``f`` for real, gives up (``f``
    changes what it reads) and runs ``f`` once more on the tape, checking
    that the value is the same.  A counter that picks a straight-through
    mask changes the gradient and not the value: the check passed and the
    gradient was that of the second run (``0`` where eager gives ``2 x``),
    with the counter stepped twice.  Now the second run starts from the
    state the first one saw: eager's gradient and state on every call."""
    x = np.array([0.5, -1.0, 2.0])
    (f, state), (g, eager_state) = _make(kind, 0), _make(kind, 1)
    jf = tp.jit(f)

    def call(fun):
        if transform == "vjp":
            out, pb = tp.vjp(fun, x)
            return out, pb(1.0)
        return getattr(tp, transform)(fun)(x)
    for _ in range(4):
        got = _quiet(call, jf)
        got_state = state()
        want = call(g)
        _same(got, want)
        assert got_state == eager_state()
    assert __name__ in globals().values() and "__builtins__" in globals()


def test_an_argument_written_that_changes_only_the_gradient():
    """The same through an argument array ``f`` writes into (a step count
    kept by the caller): its bits are put back before the second run."""
    x = np.array([0.5, -1.0, 2.0])

    def f(x, step):
        step += 1.0
        return _straight_through(x, step[0] % 2.0)
    jf = tp.jit(f)
    s1, s2 = np.zeros(1), np.zeros(1)
    for _ in range(3):
        got = _quiet(tp.value_and_grad(jf), x, s1)
        _same(got, tp.value_and_grad(f)(x, s2))
        _same(s1, s2)


def test_a_changed_state_that_cannot_be_put_back_is_refused():
    """What cannot be put back (here a class attribute rebound) refuses
    the first differentiated call, naming the fix, instead of differentiating
    a second run from another state."""
    class Config:
        m = 1.0

    def f(x):
        m = Config.m
        Config.m = 1.0 - m  # (a class attribute: its namespace cannot be set)
        return _straight_through(x, m)
    x = np.array([0.5, -1.0, 2.0])
    with pytest.raises(RuntimeError, match="Pass that state as an argument"):
        _quiet(tp.grad(tp.jit(f)), x)


# --- 2. string constants are keys, not globals read -------------------------------------

x_key = scale = None  # (globals named like the keys below: a script's loop variables)
_RT8_W = np.array([1.0, 2.0, 3.0])


def _by_key(p):
    return np.sum(p["x_key"] * p["scale"])


def _by_module_getattr(x):
    import sys
    return x * getattr(sys.modules[__name__], "_RT8_W")


def test_a_global_named_like_a_dict_key_is_not_guarded():
    """``p["x_key"]`` in the function and a global ``x_key`` that the
    calling script rebinds on every step: the string constant counted as a
    global read, so every call traced again, and after ``max_traces`` the
    function ran uncompiled with a warning.  A string constant is a name
    only where the code can read globals by a computed name (below)."""
    global x_key, scale
    jf = tp.jit(_by_key)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tp.JitWarning)
        for step in range(10):
            x_key, scale = np.full(3, float(step)), step * 0.5
            _same(jf({"x_key": x_key, "scale": scale}), _by_key({"x_key": x_key, "scale": scale}))
    assert jf.cache_info()["traces"] == 1


def test_a_global_read_by_a_string_through_the_module_is_guarded():
    global _RT8_W
    jf = tp.jit(_by_module_getattr)
    x = np.ones(3)
    _same(jf(x), _by_module_getattr(x))
    _RT8_W = _RT8_W * 2.0
    _same(jf(x), _by_module_getattr(x))
    _RT8_W[0] = 7.0
    _same(jf(x), _by_module_getattr(x))


# --- 3. a differentiated call that gives up before f runs ------------------------------

def test_a_function_closing_over_an_iterator_under_grad():
    """``f`` draws its mask from a closed-over iterator: jit cannot guard an
    iterator, so it gives up before tracing -- and ran ``f`` for real, after
    which the tape ran it once more: the next mask's gradient under the
    first mask's value, the iterator advanced twice.  Now a differentiated
    call that gives up before ``f`` runs runs it once, on the tape."""
    import itertools

    def make():
        masks = itertools.cycle([1.0, 0.0])
        return lambda x: _straight_through(x, next(masks))
    f, g = make(), make()
    jf = tp.jit(f)
    x = np.array([0.5, -1.0, 2.0])
    for _ in range(4):
        _same(_quiet(tp.value_and_grad(jf), x), tp.value_and_grad(g)(x))


@pytest.mark.parametrize("transform", ["value_and_grad", "jacobian"])
def test_a_jit_closing_over_the_callers_traced_value(transform):
    """``jit(f)`` made inside the differentiated function, ``f`` closing over
    its traced argument and stepping a counter it returns: the call ran
    ``f`` on the plain values, found the traced closure, and ran it again
    inline -- the counter stepped twice (value ``+1``) and the gradient of
    the second run.  Now ``f`` runs once, inline."""
    def make(jitted):
        def loss(x):
            n = [0]

            def f(y):
                n[0] += 1
                return _straight_through(y, float(n[0] % 2)) + np.sum(x * y)
            out = (tp.jit(f) if jitted else f)(x * 2.0)
            return out + n[0]
        return loss
    x = np.array([1.0, 2.0, 3.0])
    for _ in range(2):
        _same(_quiet(getattr(tp, transform)(make(True)), x), getattr(tp, transform)(make(False))(x))


class _Model:
    def __init__(self):
        self.steps = 0

    def __call__(self, x):
        self.steps += 1
        self.last = x  # (added on the first call)
        return _straight_through(x, float(self.steps % 2))


def test_a_method_stepping_a_counter_and_adding_an_attribute():
    """The state put back before the second run includes the attributes
    the first run added (deleted again), so the object ends as after one
    eager call."""
    x = np.array([0.5, -1.0, 2.0])
    m1, m2 = _Model(), _Model()
    jf = tp.jit(m1)
    for _ in range(3):
        _same(_quiet(tp.value_and_grad(jf), x), tp.value_and_grad(m2)(x))
        assert m1.steps == m2.steps and sorted(vars(m1)) == sorted(vars(m2))


class _Trainer:
    def __init__(self):
        self.W = np.array([1.0, 2.0, 3.0])
        self.x_key = None

    def loss(self, batch):
        return np.sum(batch["x_key"] * self.W)

    def scaled(self, x):
        return x * (self.scale if hasattr(self, "scale") else 1.0)


def test_an_attribute_named_like_a_dict_key_is_not_guarded():
    """The same for attributes: ``batch["x_key"]`` in a method, and the
    caller keeping the current batch in ``self.x_key``: every step traced
    again.  An attribute read by a string constant (``hasattr(self,
    "scale")``) is still guarded."""
    t = _Trainer()
    jl = tp.jit(t.loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tp.JitWarning)
        for step in range(10):
            t.x_key = np.full(3, float(step))
            _same(jl({"x_key": t.x_key}), t.loss({"x_key": t.x_key}))
            if step == 5:
                t.W[0] = 9.0  # (read: seen, traced again)
    assert jl.cache_info()["traces"] == 2
    js = tp.jit(t.scaled)
    x = np.ones(3)
    _same(js(x), t.scaled(x))
    t.scale = 4.0
    _same(js(x), t.scaled(x))
    t.scale = 5.0
    _same(js(x), t.scaled(x))


# --- 4. a generator passed to parallel_sum / parallel_map on threads --------------------

def _slow_dropout(x, w, g):
    import time
    time.sleep(0.002)  # (worth waking the pool for)
    m = g.random(x.shape) > 0.5
    return np.sum(np.where(m, x * w, 0.0) ** 2)


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("op", ["parallel_sum", "parallel_map"])
def test_a_generator_argument_is_drawn_from_in_item_order_on_threads(op, jitted):
    """docs/parallel.md: thread and serial executors draw from a generator
    passed as an argument in item order.  On threads, chunks slow enough to
    wake the pool drew from it in the order the threads reached it: masks
    and gradients that changed from run to run (and ``parallel_sum(jit(f))``
    differed from ``parallel_sum(f)`` from its second call, once the trace
    had made the call site look worth the pool).  A call with a generator
    among its arguments runs its chunks in order."""
    r = np.random.default_rng(0)
    xs = [r.normal(size=3) for _ in range(12)]
    w = r.normal(size=3)
    f = tp.jit(_slow_dropout) if jitted else _slow_dropout

    def run(fun, ex):
        g = np.random.default_rng(1)

        def loss(w):
            if op == "parallel_sum":
                return tp.parallel_sum(fun, xs, w, g, executor=ex, chunk_size=2, n_workers=2)
            return np.sum(np.stack(tp.parallel_map(fun, xs, w, g, executor=ex, chunk_size=2,
                                                   n_workers=2)))
        return _quiet(tp.value_and_grad(loss), w), g.random()
    want = run(_slow_dropout, "serial")
    for _ in range(6):
        got = run(f, "threads")
        _same(got[0], want[0])
        assert got[1] == want[1]
