"""Red team, round 7: ``parallel_sum(jit(f, fuse=True), items, *shared)``
under ``grad`` as one compiled loop over every chunk
(:func:`tapestry.jit.items.sum_items`), then jit's trace-once hazards the
earlier rounds leave out.  Every case compares with eager tapestry (the
same code without ``jit``) or with finite differences: a wrong value or
gradient returned without an error is the failure looked for."""
import importlib
import importlib.util
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

items_mod = importlib.import_module("tapestry.jit.items")

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                 reason="numba not installed")


@pytest.fixture
def whole(monkeypatch):
    """Whole-program kernels kept whatever their timing (small items), and
    the two-halves thread path taken whatever the loop's time."""
    monkeypatch.setattr(importlib.import_module("tapestry.jit.api"), "_faster",
                        lambda new, old, inputs, repeats=5: True)
    monkeypatch.setattr(items_mod, "MIN_LOOP_SECONDS", 0.0)
    monkeypatch.setattr(importlib.import_module("tapestry.parallel.executors"),
                        "_default_workers", lambda: 2)  # (two workers on any machine)


class Spy:
    """Counts the calls of ``items_mod.<name>`` that took its path."""

    def __init__(self, monkeypatch, name):
        self.hits = 0
        orig = getattr(items_mod, name)

        def spy(*a, **k):
            r = orig(*a, **k)
            self.hits += r is not None
            return r
        monkeypatch.setattr(items_mod, name, spy)


def _leaves(t):
    return [np.asarray(x) for x in tp.tree_util.tree_leaves(t)]


def _close(got, want, rtol=1e-12):
    lg, lw = _leaves(got), _leaves(want)
    assert len(lg) == len(lw)
    for x, y in zip(lg, lw):
        assert x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-12)


def _vg(f, items, *shared, ex="serial", chunk_size=4, argnums=None):
    argnums = tuple(range(len(shared))) if argnums is None else argnums
    return tp.value_and_grad(lambda *s: tp.parallel_sum(
        f, items, *s, executor=ex, chunk_size=chunk_size), argnums=argnums)(*shared)


def group_logp(g, u, a):
    uj = u[g["j"]]
    eta = a * g["x"] + uj
    return np.sum(g["y"] * eta - np.exp(eta)) - 0.5 * uj * uj


def make_groups(n, seed=0):
    r = np.random.default_rng(seed)
    return ([{"x": r.normal(size=5), "y": r.poisson(2.0, size=5).astype(float), "j": i % 7}
             for i in range(n)], r.normal(size=7) * 0.1, 0.3)


# --- 1. the two halves of a threaded call must be items of one form ----------------------

def by_form(item, w):
    """Reads the item's values in its own order, and its form: a dict in
    another key order, with keys of another type, or a tuple or list where
    a dict was, is another function of the same data."""
    if isinstance(item, dict):
        p, q = item.values()
        scale = 5.0 if next(iter(item)).__class__ is float else 1.0
    else:
        p, q = item
        scale = 3.0 if isinstance(item, list) else 2.0
    return scale * np.sum(np.sin(p * w)) + 2.0 * np.sum(q * w)


def _halves(kind, base):
    tail = [{"p": p, "q": q} for p, q in base[20:]]
    if kind == "key order":
        head = [{"q": q, "p": p} for p, q in base[:20]]
    elif kind == "tuples":
        head = [(p, q) for p, q in base[:20]]
    elif kind == "lists":
        head = [[p, q] for p, q in base[:20]]
    else:  # int keys of another type: {0: p} and {0.0: p} stack alike
        tail = [{0: p, 1: q} for p, q in base[20:]]
        head = [{0.0: p, 1: q} for p, q in base[:20]]
    return head + tail


@needs_numba
@pytest.mark.parametrize("kind", ["key order", "tuples", "lists", "key types"])
def test_the_halves_of_a_threaded_call_have_one_form(monkeypatch, whole, kind):
    """With threads the caller stacks the items in two halves, each checked
    against its own first item, while the program is the last item's.  A
    first half of dicts in another key order (or tuples, lists, keys of
    another type) stacked into the same columns and ran the last item's
    program: a wrong value and gradient, silently."""
    r = np.random.default_rng(1)
    base = [(r.normal(size=4), r.normal(size=4)) for _ in range(40)]
    w = r.normal(size=4)
    f = by_form
    warm = _halves(kind, base)[20:] * 2  # (the tail's form throughout)
    jf = tp.jit(f, fuse=True)
    spy = Spy(monkeypatch, "sum_items")
    for _ in range(3):
        _vg(jf, warm, w, ex="threads")
    assert spy.hits == 2  # (the whole call in one loop, from the second call on)
    items = _halves(kind, base)
    _close(_vg(jf, items, w, ex="threads"), _vg(f, items, w))


# --- 2. a reusable pullback hands out its gradients once ---------------------------------

def dense_logp(g, w, a):
    """Every item adds to all of ``w``: a dense stored gradient."""
    return a * np.sum(np.sin(g["x"] * w)) + g["j"] * np.sum(w * w)


@pytest.mark.parametrize("jitted", [False, pytest.param(True, marks=needs_numba)])
@pytest.mark.parametrize("complex_sum", [False, True])
def test_vjp_of_parallel_sum_called_again_after_an_in_place_update(monkeypatch, whole, jitted,
                                                                   complex_sum):
    """``tp.vjp``'s pullback may be called many times.  parallel_sum's
    pullback handed out its stored gradients themselves for a cotangent of
    1, so a caller scaling the first result in place (an optimizer step)
    changed what every later call returned."""
    groups, _, a = make_groups(12)
    w = np.linspace(-1.0, 1.0, 5)
    f = (lambda item, w, a: dense_logp(item, w, a) * (1.0 + 0.0j)) if complex_sum \
        else dense_logp
    f = tp.jit(f, fuse=True) if jitted else f
    spy = Spy(monkeypatch, "sum_items")

    def s(w):
        return np.real(tp.parallel_sum(f, groups, w, a, chunk_size=4))
    for _ in range(2):  # (warm: the next call takes the whole-call loop)
        tp.grad(s)(w)
    _, pullback = tp.vjp(s, w)
    assert spy.hits == (2 if jitted and not complex_sum else 0)
    want = tp.grad(lambda w: tp.parallel_sum(dense_logp, groups, w, a, chunk_size=4))(w)
    first = pullback(1.0)[0]
    np.testing.assert_allclose(first, want, rtol=1e-12)
    first *= 0.0  # (the caller's array now)
    np.testing.assert_allclose(pullback(1.0)[0], want, rtol=1e-12)
    np.testing.assert_allclose(pullback(2.0)[0], 2 * want, rtol=1e-12)


# --- 3. a real output's cotangent that arrives complex -----------------------------------

def _two_sines(x):
    return np.sin(x) * 2.0


@pytest.mark.parametrize("wrap", ["jit", "jit fuse", "checkpoint", "jit twice"])
def test_a_real_output_times_a_complex_number(wrap):
    """``np.real(jit(f)(x) * c)`` with ``c`` complex: the sweep hands the
    node of ``jit(f)`` (or ``checkpoint(f)``) a complex cotangent for its
    real output.  Its pullback passed it to ``vjp``, which refuses a complex
    cotangent of a real output (an error blaming a cotangent the user never
    gave); the plain sweep carries it and keeps the real part at the real
    inputs.  Now the real part is taken at the node: eager's gradients."""
    g = {"jit": lambda: tp.jit(_two_sines), "jit fuse": lambda: tp.jit(_two_sines, fuse=True),
         "checkpoint": lambda: tp.checkpoint(_two_sines),
         "jit twice": lambda: tp.jit(tp.jit(_two_sines))}[wrap]()
    c = np.array([1j, 2.0 - 1.0j])
    x = np.array([0.7, 0.2])
    for part in (np.real, np.imag):
        want = tp.grad(lambda x: part(np.sum(_two_sines(x) * c)))(x)
        for _ in range(3):  # (traced, then replayed / split)
            np.testing.assert_allclose(tp.grad(lambda x: part(np.sum(g(x) * c)))(x), want,
                                       rtol=1e-13)
    check_grads(lambda x: np.imag(np.sum(g(x) * c)), (x,), order=1)
    # a caller's complex cotangent for a real output is still refused
    _, pb = tp.vjp(g, x)
    with pytest.raises(TypeError, match="complex but the output is real"):
        pb(c)


# --- 4. items the compiled loop cannot take run as tasks ---------------------------------

@needs_numba
@pytest.mark.parametrize("ex", ["serial", "threads"])
@pytest.mark.parametrize("kind", ["0-d arrays", "0-d leaves", "0-d int leaves"])
def test_items_with_0d_array_leaves(whole, ex, kind):
    """Items that are (or hold) 0-d arrays: their stacked column hands the
    loop numbers where the kernel takes 0-d arrays, and numba's typing
    error (raised at the loop's first call, outside the compile's guard)
    reached the caller from the second call on.  Now such items run as
    tasks: eager's values and gradients, and finite differences agree."""
    r = np.random.default_rng(5)
    w = r.normal(size=3)
    if kind == "0-d arrays":
        items = [np.array(r.normal()) for _ in range(14)]
        f = lambda x, w: np.sum(np.sin(x * w))  # noqa: E731
    elif kind == "0-d leaves":
        items = [{"s": np.array(r.normal()), "x": r.normal(size=3)} for _ in range(14)]
        f = lambda it, w: np.sum(np.sin(it["s"] * w * it["x"])) + it["s"]  # noqa: E731
    else:
        items = [{"k": np.array(i % 3), "x": r.normal(size=3)} for i in range(14)]
        f = lambda it, w: np.sum(it["x"] * w[it["k"]])  # noqa: E731
    jf = tp.jit(f, fuse=True)
    for _ in range(3):
        _close(_vg(jf, items, w, ex=ex, chunk_size=3), _vg(f, items, w, chunk_size=3))
    check_grads(lambda w: tp.parallel_sum(jf, items, w, executor=ex, chunk_size=3), (w,),
                order=1)


# --- 5. what holds already: changes between calls, compositions (regression guards) -----

@needs_numba
@pytest.mark.parametrize("ex", ["serial", "threads"])
def test_items_and_shared_arguments_changed_between_whole_calls(monkeypatch, whole, ex):
    """One jitted f over calls whose items are updated in place, reassigned,
    appended to, shortened and reordered, and whose shared arguments change
    value, dtype, contiguity and kind: every call equals eager tapestry,
    and the later calls do take the one-loop path."""
    groups, u, a = make_groups(30)
    jf = tp.jit(group_logp, fuse=True)
    spy = Spy(monkeypatch, "sum_items")
    items = [dict(g) for g in groups]

    def same(items, u, a, rtol=1e-12):
        _close(_vg(jf, items, u, a, ex=ex), _vg(group_logp, items, u, a), rtol)
    for _ in range(2):
        same(items, u, a)
    items[3]["x"][:] += 1.0
    same(items, u, a)
    items[20]["x"] = items[20]["x"] * 2.0
    same(items, u, a)
    items.append(dict(groups[0], j=6))
    same(items, u, a)
    items = items[:26][::-1]
    same(items, u, a)
    items = [dict(g, j=-(i % 7) - 1) for i, g in enumerate(items)]  # (negative indices)
    same(items, u, a)
    same(items, u, a)
    same(items, u + 1.0, -a)
    same(items, np.repeat(u, 2)[::2], a)  # (a strided view)
    same(items, u, np.array(a))
    same(items, u.astype(np.float32), a, rtol=1e-5)
    assert spy.hits >= 5
    with np.errstate(all="ignore"):
        items[4]["x"][2] = np.nan
        same(items, u, a)
        items[4]["x"][2] = np.inf
        same(items, u, a)


@needs_numba
@pytest.mark.parametrize("ex", ["serial", "threads"])
def test_shared_numbers_read_by_python_between_whole_calls(whole, ex):
    """A shared int used as an index and a shared float tested by an ``if``
    (guards the kernel checks per item): each value, -0.0 and nan included,
    gives eager's result."""
    r = np.random.default_rng(7)
    items = [{"x": r.normal(size=4), "t": float(i)} for i in range(14)]
    w = r.normal(size=4)

    def f(it, w, n, s):
        base = np.sum(it["x"] * w) * w[n] + it["t"] * w[n - 1]
        if s > 0:
            return base + np.sum(np.sin(it["x"] * w)) * s
        return base * s
    jf = tp.jit(f, fuse=True)
    for n, s in [(1, 0.5), (1, 0.5), (1, 0.5), (2, 0.5), (-1, -0.5), (3, -0.0), (3, 0.0),
                 (0, np.nan), (0, 0.7)]:
        _close(_vg(jf, items, w, n, s, ex=ex, chunk_size=3, argnums=(0,)),
               _vg(f, items, w, n, s, chunk_size=3, argnums=(0,)))


@needs_numba
@pytest.mark.parametrize("name", ["hessian", "jvp of grad", "grad of grad", "vmap of grad",
                                  "jit of grad", "grad of jit", "two sums"])
def test_transformations_around_a_whole_call(whole, name):
    """Transformations around ``parallel_sum(jit(f))`` (the one-loop path
    applies only to a plain first-order gradient: these must not take a
    wrong turn into it), threads, against eager tapestry."""
    groups, u, a = make_groups(24)
    jf = tp.jit(group_logp, fuse=True)

    def s(f):
        return lambda u, a: tp.parallel_sum(f, groups, u, a, executor="threads", chunk_size=4)
    make = {
        "hessian": lambda f: tp.hessian(s(f))(u, a),
        "jvp of grad": lambda f: tp.jvp(lambda u: tp.grad(s(f))(u, a), (u,), (np.ones(7),)),
        "grad of grad": lambda f: tp.grad(lambda a: tp.grad(s(f), argnums=1)(u, a))(a),
        "vmap of grad": lambda f: tp.vmap(lambda u: tp.grad(s(f))(u, a))(np.stack([u, 2 * u])),
        "jit of grad": lambda f: tp.jit(tp.grad(s(f), argnums=(0, 1)))(u, a),
        "grad of jit": lambda f: tp.grad(tp.jit(s(f)), argnums=(0, 1))(u, a),
        "two sums": lambda f: tp.grad(lambda u: s(f)(u, a) * s(f)(2.0 * u, a)
                                      + np.sum(u ** 2) * s(f)(u, a))(u),
    }[name]
    want = make(group_logp)
    for _ in range(3):
        _close(make(jf), want, rtol=1e-9)


@needs_numba
@pytest.mark.parametrize("ex", ["serial", "threads"])
def test_a_shared_python_int_beyond_int64(monkeypatch, whole, ex):
    """A shared Python int of 2**63 or more (a count, a scale): the loop
    handed it to numba, whose OverflowError reached the caller.  Now that
    call runs as tasks (eager's result), and the calls after it, with
    ordinary ints, take the loop again."""
    r = np.random.default_rng(8)
    items = [{"x": r.normal(size=4), "t": float(i)} for i in range(14)]
    w = r.normal(size=4)

    def f(it, w, n):
        return np.sum(it["x"] * w) * n + it["t"]
    jf = tp.jit(f, fuse=True)
    spy = Spy(monkeypatch, "sum_items")
    for n in (3, 3, 2 ** 70, 2 ** 63, -2 ** 63 - 1, 2 ** 63 - 1, 5):
        _close(_vg(jf, items, w, n, ex=ex, chunk_size=3, argnums=(0,)),
               _vg(f, items, w, n, chunk_size=3, argnums=(0,)))
    assert spy.hits == 3  # (the second call, 2**63 - 1 and 5)


# --- 6. the first differentiated call of a jitted function with effects ------------------

def _dropout_loss(w, g):
    mask = g.random(w.shape) > 0.5
    return np.sum(np.where(mask, w, 0.0) ** 2 * np.sin(w))


_CLOSED_RNG = {}


def _closure_dropout(w):
    mask = _CLOSED_RNG["g"].random(w.shape) > 0.5
    return np.sum(np.where(mask, w, 0.0) ** 2 * np.sin(w))


def _global_dropout(w):
    mask = np.random.random(w.shape) > 0.5
    return np.sum(np.where(mask, w, 0.0) ** 2 * np.sin(w))


@pytest.mark.filterwarnings("ignore:tapestry.jit")
@pytest.mark.parametrize("source", ["argument", "closure", "global"])
@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "hessian", "grad in grad"])
def test_first_differentiated_call_that_draws_random_numbers(source, transform):
    """``grad(jit(f))`` with ``f`` drawing random numbers (a dropout mask):
    its first call traced ``f`` on the plain values, the trace gave up (it
    draws) and returned the plain call's value, and the node's pullback
    ran ``f`` again -- another mask.  The gradient belonged to another
    function than the value, silently, and the generator moved twice.  Now
    that call runs ``f`` inline from the states it started at: eager's
    value, gradient and generator state, on every call."""
    w = np.linspace(-1.0, 1.5, 8)
    f = {"argument": _dropout_loss, "closure": _closure_dropout,
         "global": _global_dropout}[source]
    jf = tp.jit(f)

    def call(fun, seed):
        g = np.random.default_rng(seed)
        _CLOSED_RNG["g"] = g
        np.random.seed(seed)
        h = (lambda w: fun(w, g)) if source == "argument" else fun
        out = {"grad": lambda: tp.grad(h)(w),
               "value_and_grad": lambda: tp.value_and_grad(h)(w),
               "hessian": lambda: tp.hessian(h)(w),
               "grad in grad": lambda: tp.grad(lambda w: np.sum(tp.grad(h)(w) ** 2))(w)}[
            transform]()
        return out, g.random(), np.random.random()
    for seed in (0, 1, 2):
        got = call(jf, seed)
        want = call(f, seed)
        _close(got[0], want[0], rtol=0)
        assert got[1:] == want[1:]  # (each generator drew once)


def test_first_differentiated_call_of_a_function_reading_a_counter_it_changes():
    """``f`` increments a counter it reads: the pullback's second run would
    differentiate ``x * 2`` under a value computed with ``x * 1``.  The
    second run starts from the state the first one saw (the counter put
    back, round 8): eager's value, gradient and counter; a function whose
    effect does not reach its result (a log) logs once per call."""
    x = np.arange(3.0)

    def counter():
        calls = [0]

        def counted(x):
            calls[0] += 1
            return np.sum(x * x * calls[0])
        return counted, calls
    (c1, n1), (c2, n2) = counter(), counter()
    jc = tp.jit(c1)
    for k in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = tp.value_and_grad(jc)(x)
        _close(got, tp.value_and_grad(c2)(x), rtol=0)
        assert n1 == n2 == [k + 1]
    log = []

    def logged(x):
        log.append(1)
        return np.sum(x * x * x)
    jl = tp.jit(logged)
    with pytest.warns(Warning):
        got = tp.value_and_grad(jl)(x)
    _close(got, tp.value_and_grad(logged)(x), rtol=0)
    assert len(log) == 2


def _inner_dropout(w, g):
    return np.where(g.random(w.shape) > 0.5, w, 0.0) * np.sin(w)


@pytest.mark.filterwarnings("ignore:tapestry.jit")
def test_nested_jits_that_draw_random_numbers_under_grad():
    """An outer jit calling a jit made inside it that draws a mask: every
    call's first differentiated run of the inner one drew twice (the
    gradient of another mask than the value's)."""
    x = np.linspace(-1.0, 1.0, 4)

    def outer(w, g, jitted):
        inner = tp.jit(_inner_dropout) if jitted else _inner_dropout
        return np.sum(inner(w, g) ** 2) + np.sum(w)
    jo = tp.jit(lambda w, g: outer(w, g, True))
    for seed in range(3):
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        _close(tp.value_and_grad(jo)(x, g1), tp.value_and_grad(outer)(x, g2, False), rtol=0)
        assert g1.random() == g2.random()


_WRITTEN = np.zeros(3)


def _writes_closure(x):
    _WRITTEN[:] += 1.0
    return np.sum(x * _WRITTEN)


class _Stepper:
    def __init__(self):
        self.t = 0

    def __call__(self, x):
        self.t += 1
        return np.sum(x * x) * 0.5 ** self.t


@pytest.mark.filterwarnings("ignore:tapestry.jit")
@pytest.mark.parametrize("kind", ["argument written", "closure written", "attribute counter"])
def test_functions_with_effects_under_grad(kind):
    """``grad(jit(f))`` where ``f`` writes into an argument or a closed-over
    array, or steps a counter attribute (a schedule), and reads it: jit
    runs such an ``f`` uncompiled, but under ``grad`` the node's pullback
    ran ``f`` a second time -- for a written argument on every call -- and
    returned the gradient of the second run (and the state moved twice),
    silently.  Now: the first call, whose trace ran ``f`` for real, is
    refused where a second run gives another value; every later call runs
    ``f`` once, inline: eager's gradients and state."""
    x = np.array([0.5, 1.0, 2.0])
    if kind == "argument written":
        def f(x, acc):
            acc += 1.0
            return np.sum(x * acc)
        state = [np.zeros(3), np.zeros(3)]
        call = lambda fun, k: tp.grad(fun)(x, state[k])  # noqa: E731
        reset = lambda: [s.fill(0.0) for s in state]  # noqa: E731
        now = lambda k: state[k].copy()  # noqa: E731
        jf = tp.jit(f)
    elif kind == "closure written":
        f = _writes_closure
        call = lambda fun, k: tp.grad(fun)(x)  # noqa: E731
        reset = lambda: _WRITTEN.fill(0.0)  # noqa: E731
        now = lambda k: _WRITTEN.copy()  # noqa: E731
        jf = tp.jit(f)
    else:
        steppers = [_Stepper(), _Stepper()]
        f = steppers[1]
        call = lambda fun, k: tp.grad(fun)(x)  # noqa: E731
        reset = lambda: [setattr(s, "t", 0) for s in steppers]  # noqa: E731
        now = lambda k: steppers[k].t  # noqa: E731
        jf = tp.jit(steppers[0])
    for _ in range(3):  # (the first call too: its second run starts where the first did)
        reset()
        got, got_state = call(jf, 0), now(0)
        reset()
        want, want_state = call(f, 1), now(1)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_state, want_state)


def _closure_rng_block(w):
    return np.sum(np.where(_CLOSED_RNG["g"].random(w.shape) > 0.5, w, 0.0) ** 2 * np.cos(w))


def test_checkpoint_of_a_function_drawing_from_a_closed_over_generator():
    """``checkpoint`` recomputes ``f`` in the backward pass, replaying the
    global state and generators passed as arguments only: one closed over
    drew another mask, and the gradient was that of another function than
    the value (documented, but silent).  Now the recompute's value is
    checked against the forward's and the call refused, naming the fix;
    a generator passed as an argument still gives eager's gradient."""
    w = np.linspace(0.1, 1.0, 6)
    _CLOSED_RNG["g"] = np.random.default_rng(0)
    with pytest.raises(RuntimeError, match="Pass the generator"):
        tp.grad(tp.checkpoint(_closure_rng_block))(w)

    def as_argument(w, g):
        return np.sum(np.where(g.random(w.shape) > 0.5, w, 0.0) ** 2 * np.cos(w))
    got = tp.grad(lambda w: tp.checkpoint(as_argument)(w, np.random.default_rng(1)))(w)
    want = tp.grad(lambda w: as_argument(w, np.random.default_rng(1)))(w)
    np.testing.assert_array_equal(got, want)
    check_grads(lambda w: tp.checkpoint(lambda w: np.sum(np.sin(w) * w))(w), (w,), order=2)


@pytest.mark.filterwarnings("ignore:tapestry.jit")
def test_a_give_up_outside_a_trace_leaves_random_states_alone():
    """A differentiated call that gives up without tracing (too many traces
    for one signature) runs ``f`` inline; the random states put back are
    only those taken by a trace of that same call, never an earlier
    trace's (which would rewind the caller's generators)."""
    def f(x):
        return np.sum(x ** 2) if x[0] > 0 else np.sum(x ** 3)  # (a guard)
    jf = tp.jit(f, max_traces=1)
    x = np.array([1.0, 2.0])
    jf(x)  # (traced: its random states were taken then)
    np.random.seed(3)
    np.random.random(5)
    before = np.random.get_state()[1].copy(), np.random.get_state()[2]
    got = tp.grad(jf)(-x)  # (the guard fails; a second trace is one too many)
    after = np.random.get_state()[1], np.random.get_state()[2]
    np.testing.assert_array_equal(got, tp.grad(f)(-x))
    assert np.array_equal(before[0], after[0]) and before[1] == after[1]
