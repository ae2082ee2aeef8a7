"""Rules that run after their forward pass read what they close over then.

A custom_vjp's ``bwd`` (and a custom_jvp's rule, transposed by the backward
pass or called by a linearized function) runs when the pullback is called.
What it reads besides its arguments -- a closed-over array, a global, an
attribute, a default -- may have been changed in place since the forward
(``W -= lr * g`` between ``tp.vjp`` and the pullback, a later call of the
function writing a cache): the rule is then refused, naming the function,
the state and the fix, instead of giving the derivative at other values.
Arrays handed to the rules as arguments, nondiff arguments and residuals
are the trace's own copies where the trace is kept, so they need no check.

Also: ``tp.checkpoint`` of a function that writes into its argument
(``x *= 2``) under ``jit`` and nested in another checkpoint.
"""
import sys
import types
import warnings

import cloudpickle
import numpy as np
import pytest

import tapestry as tp
from tapestry.core import staged
from tapestry.testing import check_grads

# Worker processes cannot import this test module: ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

X = np.array([0.5, -1.0, 2.0])


def _closure_vjp(W):
    """``f(x) = sum(W * x)`` whose ``bwd`` reads ``W`` from its closure."""
    @tp.custom_vjp
    def f(x):
        return np.sum(W * x)

    def f_fwd(x):
        return f(x), None

    def f_bwd(res, g):
        return (g * W,)
    f.defvjp(f_fwd, f_bwd)
    return f


# --- custom_vjp: state changed between the forward and the pullback ----------

@pytest.mark.parametrize("change", ["imul", "setitem", "ufunc_out"])
def test_closure_array_changed_in_place_is_refused(change):
    W = np.array([1.0, 2.0, 3.0])
    f = _closure_vjp(W)
    y, pullback = tp.vjp(f, X)
    if change == "imul":
        W *= 2
    elif change == "setitem":
        W[0] = 5.0
    else:
        np.add(W, 1.0, out=W)
    with pytest.raises(RuntimeError, match=r"custom_vjp\(f\).*'W'.*modified in place.*"
                                           r"as an argument"):
        pullback(1.0)


def test_closure_unchanged_gives_the_rule_and_pulls_back_twice():
    W = np.array([1.0, 2.0, 3.0])
    f = _closure_vjp(W)
    y, pullback = tp.vjp(f, X)
    np.testing.assert_allclose(pullback(1.0)[0], W)
    np.testing.assert_allclose(pullback(2.0)[0], 2 * W)
    check_grads(f, (X,))


def test_changed_after_the_pullback_is_an_update():
    """An optimizer's step after the backward pass: the next call reads it."""
    W = np.array([1.0, 2.0, 3.0])
    f = _closure_vjp(W)
    for _ in range(3):
        y, pullback = tp.vjp(f, X)
        np.testing.assert_allclose(pullback(1.0)[0], W)
        W -= 0.1 * W


GLOBAL_W = np.array([1.0, 2.0, 3.0])


@tp.custom_vjp
def _global_f(x):
    return np.sum(GLOBAL_W * x)


_global_f.defvjp(lambda x: (_global_f(x), None), lambda res, g: (g * GLOBAL_W,))


def test_global_array_changed_in_place_is_refused():
    global GLOBAL_W
    saved = GLOBAL_W.copy()
    try:
        y, pullback = tp.vjp(_global_f, X)
        GLOBAL_W *= 3
        with pytest.raises(RuntimeError, match="custom_vjp.*GLOBAL_W.*modified in place"):
            pullback(1.0)
        y, pullback = tp.vjp(_global_f, X)
        GLOBAL_W = GLOBAL_W + 1.0  # rebound to another array
        with pytest.raises(RuntimeError, match="custom_vjp.*GLOBAL_W.*rebound"):
            pullback(1.0)
    finally:
        GLOBAL_W = saved


def test_attribute_of_captured_object_changed_is_refused():
    model = types.SimpleNamespace(W=np.array([1.0, 2.0, 3.0]))

    @tp.custom_vjp
    def f(x):
        return np.sum(model.W * x)
    f.defvjp(lambda x: (f(x), None), lambda res, g: (g * model.W,))
    y, pullback = tp.vjp(f, X)
    model.W[1] = -4.0
    with pytest.raises(RuntimeError, match=r"custom_vjp\(f\).*W.*modified in place"):
        pullback(1.0)
    y, pullback = tp.vjp(f, X)
    model.W = np.zeros(3)  # the attribute rebound
    with pytest.raises(RuntimeError, match=r"custom_vjp\(f\).*W.*rebound"):
        pullback(1.0)


def test_closed_over_number_rebound_is_refused():
    scale = 2.0

    @tp.custom_vjp
    def f(x):
        return scale * np.sum(x)
    f.defvjp(lambda x: (f(x), None), lambda res, g: (np.full(3, g * scale),))
    y, pullback = tp.vjp(f, X)
    scale = 3.0
    with pytest.raises(RuntimeError, match="custom_vjp.*'scale'.*rebound"):
        pullback(1.0)
    y, pullback = tp.vjp(f, X)
    np.testing.assert_allclose(pullback(1.0)[0], 3.0)


def test_default_argument_of_bwd_changed_is_refused():
    W = np.array([1.0, 2.0, 3.0])

    @tp.custom_vjp
    def f(x):
        return np.sum(W * x)

    def f_bwd(res, g, W=W):
        return (g * W,)
    f.defvjp(lambda x: (f(x), None), f_bwd)
    y, pullback = tp.vjp(f, X)
    W /= 2
    with pytest.raises(RuntimeError, match="custom_vjp.*default argument.*modified in place"):
        pullback(1.0)


def test_bwd_reads_through_a_helper_function():
    W = np.array([1.0, 2.0, 3.0])

    def scale(g):
        return g * W

    @tp.custom_vjp
    def f(x):
        return np.sum(W * x)
    f.defvjp(lambda x: (f(x), None), lambda res, g: (scale(g),))
    y, pullback = tp.vjp(f, X)
    W += 1.0
    with pytest.raises(RuntimeError, match="custom_vjp.*'W'.*modified in place"):
        pullback(1.0)


def test_cache_written_by_a_later_forward_is_refused_under_grad():
    """``fwd`` keeps its input in a dict that ``bwd`` reads: a second call
    overwrites it before the first call's backward rule runs."""
    cache = {}

    @tp.custom_vjp
    def f(x):
        return np.sin(x)

    def f_fwd(x):
        cache["x"] = x
        return np.sin(x), None

    def f_bwd(res, g):
        return (g * np.cos(cache["x"]),)
    f.defvjp(f_fwd, f_bwd)
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(f(x)))(X), np.cos(X))
    with pytest.raises(RuntimeError, match=r"custom_vjp\(f\).*'cache'.*\['x'\] was rebound"):
        tp.grad(lambda x: np.sum(f(f(x))))(X)


def test_buffer_written_in_place_by_a_later_forward_is_refused():
    buf = np.zeros(3)

    @tp.custom_vjp
    def f(x):
        return np.sin(x)

    def f_fwd(x):
        buf[:] = x
        return np.sin(x), None

    def f_bwd(res, g):
        return (g * np.cos(buf),)
    f.defvjp(f_fwd, f_bwd)
    with pytest.raises(RuntimeError, match=r"custom_vjp\(f\).*'buf'.*modified in place"):
        tp.grad(lambda x: np.sum(f(f(x))))(X)


def test_bookkeeping_in_the_rule_is_not_a_change():
    """A counter, a log the rule appends to, a workspace it writes into:
    the function called twice and the pullback called twice still work."""
    log, work = [], np.zeros(3)
    calls = types.SimpleNamespace(n=0)
    count = 0

    @tp.custom_vjp
    def f(x):
        return np.sin(x)

    def f_bwd(x, g):
        nonlocal count
        count += 1
        calls.n += 1
        log.append(g.copy())
        np.multiply(g, np.cos(x), out=work)
        return (work.copy(),)
    f.defvjp(lambda x: (np.sin(x), x), f_bwd)
    y, pullback = tp.vjp(lambda x: f(f(x)), X)
    want = np.cos(np.sin(X)) * np.cos(X)
    np.testing.assert_allclose(pullback(np.ones(3))[0], want)
    np.testing.assert_allclose(pullback(np.ones(3))[0], want)
    assert count == calls.n == len(log) == 4


def test_residual_that_is_the_closed_over_array_keeps_its_forward_value():
    """``fwd`` returning the closed-over ``W`` as a residual: the pullback
    reads the value ``W`` had at the forward (the trace's copy)."""
    W = np.array([1.0, 2.0, 3.0])

    @tp.custom_vjp
    def f(x):
        return np.sum(W * x)
    f.defvjp(lambda x: (f(x), W), lambda w, g: (g * w,))
    y, pullback = tp.vjp(f, X)
    W *= 2
    np.testing.assert_allclose(pullback(1.0)[0], [1.0, 2.0, 3.0])
    y, pullback = tp.vjp(f, X)  # a view of it too
    f.defvjp(lambda x: (f(x), W[:]), lambda w, g: (g * w,))
    y, pullback = tp.vjp(f, X)
    W[:] = 7.0
    np.testing.assert_allclose(pullback(1.0)[0], [2.0, 4.0, 6.0])


def test_nondiff_array_argument_keeps_its_forward_value():
    @tp.custom_vjp(nondiff_argnums=(1,))
    def f(x, c):
        return np.sum(c * x)
    f.defvjp(lambda x, c: (f(x, c), None), lambda c, res, g: (g * c,))
    c = np.array([1.0, 2.0, 3.0])
    y, pullback = tp.vjp(lambda x: f(x, c), X)
    c *= 10
    np.testing.assert_allclose(pullback(1.0)[0], [1.0, 2.0, 3.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fwd_writing_into_its_argument_gets_a_copy(dtype):
    """The guide's promise for fwd too: the caller's array, and the value the
    rest of the function reads, stay as they were."""
    @tp.custom_vjp
    def f(x):
        return np.sum(np.sin(2 * x))

    def f_fwd(x):
        x *= 2
        return np.sum(np.sin(x)), x
    f.defvjp(f_fwd, lambda x2, g: (2 * g * np.cos(x2),))
    x = X.astype(dtype)
    kept = x.copy()
    got = tp.grad(lambda x: f(x) * np.sum(x))(x)
    want = 2 * np.cos(2 * kept) * np.sum(kept) + np.sum(np.sin(2 * kept))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_array_equal(x, kept)
    check_grads(lambda x: f(x) * np.sum(x), (x,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_watched_rule_is_exact_under_transforms(dtype):
    """Unchanged state: check_grads, jit(grad), grad of vmap, 0-d input."""
    W = np.array([1.0, 2.0, 3.0], dtype)

    @tp.custom_vjp
    def f(x):
        return np.sin(x) * W

    def f_bwd(x, g):
        return (g * np.cos(x) * W,)
    f.defvjp(lambda x: (f(x), x), f_bwd)
    x = X.astype(dtype)
    check_grads(lambda x: np.sum(f(x)), (x,))
    want = np.cos(x) * W
    np.testing.assert_allclose(tp.jit(tp.grad(lambda x: np.sum(f(x))))(x), want, rtol=1e-6)
    xs = np.stack([x, 2 * x])
    got = tp.grad(lambda xs: np.sum(tp.vmap(f)(xs)))(xs)
    np.testing.assert_allclose(got, np.cos(xs) * W, rtol=1e-6)


def test_under_vmap_a_change_is_refused_too():
    W = np.array([1.0, 2.0, 3.0])

    @tp.custom_vjp
    def f(x):
        return np.sin(x) * W
    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * np.cos(x) * W,))
    xs = np.stack([X, 2 * X])
    y, pullback = tp.vjp(lambda xs: np.sum(tp.vmap(f)(xs)), xs)
    W *= 2
    with pytest.raises(RuntimeError, match=r"custom_vjp\(f\).*'W'.*modified in place"):
        pullback(1.0)


def test_jit_grad_follows_the_closed_over_array():
    """jit's replay reads ``W`` anew (its guard retraces): no stale rule."""
    W = np.array([1.0, 2.0, 3.0])
    f = _closure_vjp(W)
    jg = tp.jit(tp.grad(f))
    for _ in range(3):
        np.testing.assert_allclose(jg(X), W)
        W *= 2


def test_vjp_of_jit_with_state_changed_before_the_pullback_is_not_wrong():
    W = np.array([1.0, 2.0, 3.0])
    f = tp.jit(_closure_vjp(W))
    for _ in range(3):  # (compiled from the second call on)
        y, pullback = tp.vjp(f, X)
        np.testing.assert_allclose(pullback(1.0)[0], W)
    y, pullback = tp.vjp(f, X)
    before = W.copy()
    W *= 2
    try:
        got = pullback(1.0)[0]
    except RuntimeError:
        return
    np.testing.assert_allclose(got, before)


def test_the_walk_is_reused_across_calls(monkeypatch):
    """A call costs identity tests and a copy of the arrays the rule reads,
    not a walk of its environment."""
    W = np.array([1.0, 2.0, 3.0])
    f = _closure_vjp(W)
    walks = []
    real = staged.rule_watch
    monkeypatch.setattr(staged, "rule_watch", lambda *a: walks.append(1) or real(*a))
    g = tp.grad(f)
    for _ in range(20):
        g(X)
    assert len(walks) == 1
    W *= 2  # contents are no binding: still the same walk
    np.testing.assert_allclose(g(X), W)
    assert len(walks) == 1


def test_zero_dimensional_closure_and_argument():
    s = np.array(2.0)

    @tp.custom_vjp
    def f(x):
        return np.sin(x) * s
    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * np.cos(x) * s,))
    check_grads(f, (np.float64(0.3),))
    y, pullback = tp.vjp(f, np.float64(0.3))
    s[()] = 3.0
    with pytest.raises(RuntimeError, match="custom_vjp.*'s'.*modified in place"):
        pullback(1.0)


def test_the_walk_lives_with_the_function():
    """A custom_vjp made per call (a closure) takes its walk with it."""
    import gc
    import weakref
    W = np.array([1.0, 2.0, 3.0])
    f = _closure_vjp(W)
    tp.grad(f)(X)
    dead = weakref.ref(f.bwd)
    del f
    gc.collect()
    assert dead() is None
    g = _global_f
    tp.grad(g)(X)
    assert g._rule_cache.watch is not None
    g2 = cloudpickle.loads(cloudpickle.dumps(g))  # (to a worker: walked there anew)
    c = cloudpickle.loads(cloudpickle.dumps(_masked_sum(np.ones(3))))
    np.testing.assert_allclose(tp.grad(c)(X), np.ones(3))
    assert "_rule_cache" not in g2.__dict__
    np.testing.assert_allclose(tp.grad(g2)(X), GLOBAL_W)


def test_rule_with_nothing_to_watch_keeps_no_copies():
    @tp.custom_vjp
    def f(x):
        return np.sin(x)
    f.defvjp(lambda x: (np.sin(x), x), lambda x, g: (g * np.cos(x),))
    tp.grad(lambda x: np.sum(f(x)))(X)
    assert f._rule_cache.watch.empty


# --- custom_jvp: its rule runs again in the backward pass ---------------------

def _closure_jvp(V):
    @tp.custom_jvp
    def j(x):
        return np.sum(V * x)

    @j.defjvp
    def j_jvp(primals, tangents):
        return j(primals[0]), np.sum(V * tangents[0])
    return j


def test_custom_jvp_rule_closure_changed_is_refused_in_reverse_mode():
    V = np.array([1.0, 2.0, 3.0])
    j = _closure_jvp(V)
    y, pullback = tp.vjp(j, X)
    np.testing.assert_allclose(pullback(1.0)[0], V)
    V *= 2
    with pytest.raises(RuntimeError, match=r"custom_jvp\(j\).*j_jvp.*'V'.*modified in place"):
        pullback(1.0)


def test_custom_jvp_rule_closure_changed_is_refused_by_linearize():
    V = np.array([1.0, 2.0, 3.0])
    j = _closure_jvp(V)
    y, lin = tp.linearize(j, X)
    np.testing.assert_allclose(lin(np.ones(3)), 6.0)
    V[2] = 0.0
    with pytest.raises(RuntimeError, match=r"custom_jvp\(j\).*modified in place"):
        lin(np.ones(3))


def test_custom_jvp_forward_mode_and_unchanged_state():
    V = np.array([1.0, 2.0, 3.0])
    j = _closure_jvp(V)
    np.testing.assert_allclose(tp.jvp(j, (X,), (np.ones(3),))[1], 6.0)
    check_grads(j, (X,))
    V *= 2  # between calls: the next call reads it
    np.testing.assert_allclose(tp.grad(j)(X), V)


def test_custom_jvp_array_arguments_keep_their_forward_value():
    @tp.custom_jvp
    def j(x, c):
        return np.sum(c * x)

    @j.defjvp
    def j_jvp(primals, tangents):
        (x, c), (tx, tc) = primals, tangents
        return j(x, c), np.sum(c * tx) + np.sum(tc * x)
    c = np.array([1.0, 2.0, 3.0])
    y, pullback = tp.vjp(lambda x: j(x, c), X)
    c *= 10
    np.testing.assert_allclose(pullback(1.0)[0], [1.0, 2.0, 3.0])

    import functools

    @functools.partial(tp.custom_jvp, nondiff_argnums=(1,))
    def k(x, c):
        return np.sum(c * x)

    @k.defjvp
    def k_jvp(c, primals, tangents):
        return k(primals[0], c), np.sum(c * tangents[0])
    c = np.array([1.0, 2.0, 3.0])
    y, pullback = tp.vjp(lambda x: k(x, c), X)
    c *= 10
    np.testing.assert_allclose(pullback(1.0)[0], [1.0, 2.0, 3.0])


# --- checkpoint of a function writing into its argument, under jit -----------

def _doubles(x):
    x *= 2
    return np.sum(np.sin(x) * x)


def _doubles_then_adds(x):
    x *= 2
    y = tp.checkpoint(_doubles)(x)  # writes into x again: not seen by the rest
    x += 1
    return y + np.sum(x ** 2)


def _jit_grad(g):
    return tp.jit(tp.grad(g))


def _jit_value_and_grad(g):
    vg = tp.jit(tp.value_and_grad(g))
    return lambda x: vg(x)[1]


def _grad_jit(g):
    return tp.grad(tp.jit(g))


@pytest.mark.parametrize("nest", [1, 2])
@pytest.mark.parametrize("transform", [_jit_grad, _jit_value_and_grad, _grad_jit])
def test_checkpoint_writing_into_its_argument_under_jit(nest, transform):
    g = _doubles
    for _ in range(nest):
        g = tp.checkpoint(g)
    t = transform(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (grad(jit(...)): a write runs uncompiled)
        for x in (X, X + 0.25, X - 0.5):  # the first call traces, the next replay
            want = tp.grad(_doubles)(x.copy())
            xc = x.copy()
            np.testing.assert_allclose(t(xc), want, rtol=1e-12)
            np.testing.assert_array_equal(xc, x)  # the caller's array is not written
            np.testing.assert_allclose(tp.grad(g)(x.copy()), want, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_checkpoint_writing_into_its_argument_matches_finite_differences(dtype):
    g = tp.checkpoint(_doubles)
    x = X.astype(dtype)
    check_grads(g, (x,))
    check_grads(g, (dtype(0.7),))
    check_grads(lambda x: tp.jit(tp.value_and_grad(g))(x)[0], (x,))
    np.testing.assert_allclose(tp.jit(tp.grad(g))(x.copy()), tp.grad(_doubles)(x.copy()),
                               rtol=1e-6)


@pytest.mark.parametrize("transform", [tp.grad, _jit_grad, _jit_value_and_grad])
@pytest.mark.parametrize("nest", [1, 2])
def test_checkpoint_inside_a_checkpoint_writing_into_a_shared_argument(transform, nest):
    """The inner checkpoint writes into ``x``, which the outer function
    reads afterwards: traced, the write rebinds the inner ``x`` only; the
    outer forward, run on plain values, must compute the same (its
    recompute is traced), not the plain NumPy aliasing."""
    g = _doubles_then_adds
    for _ in range(nest):
        g = tp.checkpoint(g)
    for x in (X, X + 0.25):
        want = tp.grad(_doubles_then_adds)(x.copy())
        xc = x.copy()
        np.testing.assert_allclose(transform(g)(xc), want, rtol=1e-12)
        np.testing.assert_array_equal(xc, x)


def test_checkpoint_under_jit_compiles_the_write():
    """The write goes into the forward's own copy: jit keeps a program."""
    g = tp.checkpoint(_doubles)
    t = tp.jit(tp.grad(g))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "runs uncompiled" warning
        t(X.copy())
        t(X + 1.0)


# --- checkpoint: its recompute reads closed-over arrays by content too --------

def _masked_sum(mask):
    """A function whose value does not depend on ``mask``, but whose
    gradient does: the recompute's value check cannot see a change."""
    return tp.checkpoint(lambda x: np.sum(np.where(mask > 0, x, tp.stop_gradient(x))))


def test_checkpoint_closed_over_array_changed_in_place_is_refused():
    mask = np.array([1.0, 0.0, 1.0])
    g = _masked_sum(mask)
    np.testing.assert_allclose(tp.grad(g)(X), mask)
    y, pullback = tp.vjp(g, X)
    mask[:] = [0.0, 1.0, 0.0]
    with pytest.raises(RuntimeError, match=r"checkpoint\(.*'mask'.*modified in place"):
        pullback(1.0)


def test_checkpoint_closed_over_array_changed_later_in_the_forward_is_refused():
    mask = np.array([1.0, 0.0, 1.0])
    g = _masked_sum(mask)

    def loss(x):
        y = g(x)
        mask[:] = 1.0 - mask
        return y
    with pytest.raises(RuntimeError, match=r"checkpoint\(.*'mask'.*modified in place"):
        tp.grad(loss)(X)


def test_checkpoint_closed_over_array_updated_between_calls():
    mask = np.array([1.0, 0.0, 1.0])
    g = _masked_sum(mask)
    for _ in range(3):
        np.testing.assert_allclose(tp.grad(g)(X), mask)
        y, pullback = tp.vjp(g, X)
        np.testing.assert_allclose(pullback(1.0)[0], mask)
        mask[:] = 1.0 - mask


# --- parallel_map: chunk pullbacks kept past the call, recomputed chunks -----

PM_W = np.array([1.0, 2.0, 3.0])


def _pm_item(x):
    return np.sum(np.sin(x) * PM_W)


def _pm_item_shared(x, c):
    return np.sum(np.sin(x) * c)


@pytest.mark.parametrize("executor", ["serial", "threads"])
def test_parallel_map_kept_chunks_keep_their_point(executor):
    """Chunk tapes kept for the pullback read a closed-over array (or a
    shared constant) as the forward did, as ordinary code under vjp does."""
    global PM_W
    saved = PM_W.copy()
    xs = np.stack([X, 2 * X])
    c = np.array([1.0, 2.0, 3.0])
    try:
        y, pullback = tp.vjp(lambda xs: np.sum(tp.parallel_map(_pm_item, xs,
                                                                executor=executor)), xs)
        PM_W *= 2
        np.testing.assert_allclose(pullback(1.0)[0], np.cos(xs) * saved)
        y, pullback = tp.vjp(lambda xs: np.sum(tp.parallel_map(_pm_item_shared, xs, c,
                                                                executor=executor)), xs)
        c *= 2
        np.testing.assert_allclose(pullback(1.0)[0], np.cos(xs) * saved)
    finally:
        PM_W = saved


def test_parallel_map_recomputed_chunks_refuse_a_changed_closure():
    global PM_W
    saved = PM_W.copy()
    xs = np.stack([X, 2 * X])
    c = np.array([1.0, 2.0, 3.0])

    def loss(xs):
        return np.sum(tp.parallel_map(_pm_item, xs, executor="processes", n_workers=2))
    try:
        y, pullback = tp.vjp(loss, xs)
        np.testing.assert_allclose(pullback(1.0)[0], np.cos(xs) * PM_W)
        PM_W *= 2
        with pytest.raises(RuntimeError, match=r"parallel_map\(_pm_item\).*PM_W.*modified"):
            pullback(1.0)
    finally:
        PM_W = saved
    y, pullback = tp.vjp(lambda xs: np.sum(tp.parallel_map(
        _pm_item_shared, xs, c, executor="processes", n_workers=2)), xs)
    c *= 2  # a shared constant: the trace's copy is recomputed from
    np.testing.assert_allclose(pullback(1.0)[0], np.cos(xs) * saved)
