"""tapestry.jit against call sequences built to break a trace-once compiler.

Each test is one class of defect: the jitted call must return what the
plain call returns (bit for bit), and leave the caller's arguments and the
function's environment as the plain call leaves them.  Running uncompiled
(with a ``JitWarning``) or tracing again is allowed; a different result is
not.  ``check`` runs ``jit(f)`` and ``f`` on separate deep copies of each
call's arguments and compares results and arguments after the call.
"""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.jit import JitWarning


def same(a, b):
    la, ta = tp.tree_flatten(a)
    lb, tb = tp.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        assert type(x) is type(y), (x, y)
        if isinstance(x, str):
            assert x == y
            continue
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (x, y)
        assert x.tobytes() == y.tobytes(), (x, y)


def check(f, *calls):
    """Every call of ``jit(f)`` equals the plain call, results and the
    arguments after the call (``JitWarning`` allowed); returns the jit."""
    jf = tp.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for args in calls:
            ja, pa = copy.deepcopy(args), copy.deepcopy(args)
            same(jf(*ja), f(*pa))
            same(list(ja), list(pa))
    return jf


X = np.array([1.0, -2.0, 3.0])


def test_text_and_hash_of_staged_values_are_reads():
    # str / f-strings / format show the value; a number hashes by value
    check(lambda x: f"{x}", (X,), (X * 2,))
    check(lambda x: str(x.sum()) + repr(x[0]), (X,), (X * 2,))
    check(lambda x, n: f"{n}/{n:d}", (X, 1), (X, 2))
    check(lambda x, n: x * {1: 2.0, 2: 3.0}.get(n, 5.0), (X, 1), (X, 2), (X, 7))
    check(lambda x, n: x * (2.0 if n in {1, 2} else 3.0), (X, 1), (X, 5))
    with pytest.raises(TypeError, match="unhashable"):
        tp.jit(lambda x: {x: 1})(X)


def test_result_shapes_that_depend_on_staged_numbers_are_guarded():
    # np.where(c) is nonzero; a staged count, axis or shape decides the shape
    check(lambda x: len(np.where(x > 0)[0]) * x, (X,), (-X,), (X * 0 + 1,))
    check(lambda x: len(np.where(x)[0]) * x, (X,), (X * 0,))
    check(lambda x, n: np.tile(x, n).shape[0] * x, (X, 1), (X, 2))
    check(lambda x, n: np.sum(x, axis=n).shape[0] * np.ones(2),
          (np.ones((2, 3)), 0), (np.ones((2, 3)), 1))
    check(lambda x, n: np.reshape(x, (n, -1)).shape[1] * x,
          (np.ones(6), 2), (np.ones(6), 3))


def test_inplace_operators_write_where_numpy_writes():
    def into_view_of_argument(x):
        v = x[:2]
        v += 1
        return x.sum()

    def into_argument(x):
        x *= 2
        return x + 1

    def zero_d(x):
        y = (x * 1).reshape(())  # a 0-d array the function owns
        z = y
        y += 1
        return y, z
    check(into_view_of_argument, (np.ones(3),), (np.arange(3.0),))
    check(into_argument, (np.ones(3),), (np.arange(3.0),))
    check(zero_d, (np.ones(1),), (np.ones(1) * 2,))


def test_refused_writes_and_effects_happen_once():
    # the trace is refused at a write it cannot replay: what the function did
    # before (and the write itself) must not happen twice
    log = []
    buf = np.zeros(3)

    def out_into_closure(x):
        log.append(1)
        np.multiply(x, 2, out=buf)
        return buf.sum()

    def increment_argument(x):
        x[0] = x[0] + 1
        return x * 2
    jf = tp.jit(out_into_closure)
    with pytest.warns(JitWarning, match="in place"):
        same(jf(np.ones(3)), np.float64(6.0))
    assert log == [1]
    check(increment_argument, (np.ones(3),), (np.ones(3),))


def test_effects_before_an_error_happen_once():
    log = []

    def f(x):
        log.append(1)
        if np.sum(x) > 100:
            raise ValueError("too big")
        return x
    jf = tp.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(ValueError, match="too big"):
            jf(np.full(3, 100.0))
    assert log == [1]


def test_error_state_set_inside_is_replayed():
    def f(x):
        with np.errstate(divide="raise"):
            try:
                return 1.0 / x
            except FloatingPointError:
                return np.zeros_like(x)
    check(f, (np.ones(2),), (np.zeros(2),), (np.ones(2) * 2,), (np.zeros(2),))
    check(f, (np.zeros(2),), (np.ones(2),), (np.zeros(2),))


def test_warning_filters_set_inside():
    def f(x):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                return np.log(x)
            except RuntimeWarning:
                return np.zeros_like(x)

    def recorded(x):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = np.log(x)
        return np.zeros_like(y) if w else y
    check(f, (np.ones(2),), (np.zeros(2),), (np.ones(2) * 2,))
    check(recorded, (np.ones(2),), (np.zeros(2),), (np.ones(2) * 2,))


def test_caught_error_of_a_call_with_a_constant_first_argument():
    singular = np.zeros((2, 2))

    def f(x):
        try:
            return np.linalg.solve(singular, x)
        except np.linalg.LinAlgError:
            return x * 2
    check(f, (np.ones(2),), (np.ones(2) * 3,))


def test_argument_containers_changed_by_the_function():
    def rebind_item(p, x):
        p["w"] = p["w"] * 2
        return x * p["w"]

    def append(x, out):
        out.append(x * 2)
        return x.sum()
    check(rebind_item, ({"w": np.ones(2)}, np.ones(2)), ({"w": np.ones(2) * 3}, np.ones(2)))
    jf = tp.jit(append)
    got, want = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for _ in range(3):
            same(jf(X, got), append(X, want))
    same(got, want)


class _Layers:
    pass


NAMES = ("a", "b")


def test_attributes_read_by_computed_names_are_guarded():
    m = _Layers()
    m.w0, m.w1, m.a, m.b = np.ones(3), np.ones(3) * 2, np.ones(3), np.ones(3)

    def numbered(x):
        return sum(getattr(m, "w%d" % i) for i in range(2)) * x

    def listed(x):
        return sum(getattr(m, n) for n in NAMES) * x
    for f in (numbered, listed):
        jf = tp.jit(f)
        same(jf(X), f(X))
        m.w0[0] = 7.0
        m.a[1] = 5.0
        same(jf(X), f(X))
        m.w1 = np.zeros(3)
        m.b = np.full(3, 4.0)
        same(jf(X), f(X))


def test_jit_of_vmap_reads_no_input_value():
    # vmap moving the batch axis must not np.asarray a staged input (a pin
    # guard: every new value traced again)
    f = tp.vmap(lambda v: np.sum(np.tanh(v) ** 2))
    r = np.random.default_rng(0)
    jf = check(f, *[(r.normal(size=(5, 3)),) for _ in range(3)])
    assert jf.cache_info()["traces"] == 1, jf.explain_cache_misses()


def test_rules_held_by_library_objects_are_guarded():
    # a custom_jvp object holds the user's functions; what they close over is
    # part of the environment although no code names its attributes
    scale = [1.0]

    @tp.custom_jvp
    def f(x):
        return np.exp(x) * scale[0]

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), np.exp(x) * t * scale[0] * 2
    g = tp.grad(lambda v: np.sum(f(v)))
    jg = tp.jit(g)
    same(jg(X), g(X))
    scale[0] = 3.0
    same(jg(X), g(X))


class _Box:
    def __init__(self, v):
        self.v = v


def test_returned_objects_are_not_shared_between_calls():
    jf = tp.jit(lambda v: _Box(v * 2))
    with pytest.warns(JitWarning, match="_Box"):
        a = jf(X)
    b = jf(X * 2)
    assert a is not b
    same(a.v, X * 2)
    same(b.v, X * 4)


def test_sparse_gradient_keeps_its_type_under_jit():
    g = tp.grad(lambda w, idx: np.sum(np.tanh(w[idx]) ** 2), sparse=True)
    w = np.random.default_rng(0).normal(size=(100, 3))
    jg = tp.jit(g)
    for idx in (np.array([1, 3, 3]), np.array([0, 5, 9])):
        with warnings.catch_warnings():
            warnings.simplefilter("error", JitWarning)
            got = jg(w, idx)
        want = g(w, idx)
        assert type(got) is type(want)
        same((got.indices, got.values), (want.indices, want.values))
    assert jg.cache_info()["traces"] == 1


class _Net:
    def __init__(self):
        self.w = np.ones(3)

    def layer(self, x):
        return np.tanh(x * self.w)

    @tp.jit
    def forward(self, x):
        return self.layer(x).sum()


def test_a_method_calling_a_method_compiles():
    # each getattr makes a new bound method: the guard is on the class's
    # function, not on the bound method (which never compares the same)
    net = _Net()
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for k in range(3):
            same(net.forward(X * k), _Net.forward.fun(net, X * k))
    net.w[0] = 5.0
    same(net.forward(X), _Net.forward.fun(net, X))
    layer = _Net.layer
    _Net.layer = lambda self, x: np.cos(x * self.w)
    try:
        same(net.forward(X), _Net.forward.fun(net, X))
    finally:
        _Net.layer = layer
    assert _Net.forward.cache_info()["traces"] == 3


class _Params:
    """Attributes served by ``__getattr__`` from a dict."""

    def __init__(self):
        self._p = {"w": np.ones(3)}

    def __getattr__(self, name):
        try:
            return self.__dict__["_p"][name]
        except KeyError:
            raise AttributeError(name) from None


def test_attributes_served_by_getattr_and_function_defaults_are_guarded():
    p = _Params()

    def f(x):
        return x * p.w

    def g(x, s=2.0):
        return x * s
    jf, jg = tp.jit(f), tp.jit(g)
    same(jf(X), f(X))
    same(jg(X), g(X))
    p._p["w"][0] = 9.0
    g.__defaults__ = (5.0,)
    same(jf(X), f(X))
    same(jg(X), g(X))


def test_writes_into_fresh_copies_compile():
    def f(x):
        y = np.empty_like(x)
        y[:] = x * 2
        z = np.zeros_like(x)
        z[0] = 1.0
        c = x.copy()
        c[1] = 0.0
        return y + z + c
    jf = tp.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for x in (X, X * 2):
            same(jf(x), f(x))
    assert jf.cache_info()["traces"] == 1


class _Config:
    scale = 2.0


def test_state_outside_lists_dicts_and_attributes_is_guarded():
    # class attributes read through the class, deques, array.array, weakrefs;
    # iterators (whose position no guard sees) run uncompiled
    import array
    import collections
    import itertools
    import weakref
    dq = collections.deque([np.ones(3)])
    buf = array.array("d", [1.0, 2.0, 3.0])
    holder = _Layers()
    holder.w = np.ones(3)
    ref = weakref.ref(holder)
    fs = [lambda x: x * _Config.scale, lambda x: x * dq[-1], lambda x: x * np.asarray(buf),
          lambda x: x * ref().w]
    jfs = [tp.jit(f) for f in fs]
    for f, jf in zip(fs, jfs):
        same(jf(X), f(X))
    _Config.scale = 3.0
    dq.append(np.full(3, 5.0))
    buf[0] = 9.0
    holder.w[0] = 8.0
    try:
        for f, jf in zip(fs, jfs):
            same(jf(X), f(X))
    finally:
        _Config.scale = 2.0
    counter = itertools.count()
    jc = tp.jit(lambda x: x * next(counter))
    with pytest.warns(JitWarning, match="iterator"):
        jc(X)
    same(jc(X), X * 1)


def test_constant_arrays_held_elsewhere_are_guarded():
    # an array the function got from a cache is not a temporary: a write
    # into it by anyone must reach the replay
    import functools

    @functools.lru_cache
    def table(n):
        return np.arange(float(n))

    def f(x):
        return x * table(3)
    jf = tp.jit(f)
    same(jf(X), f(X))
    table(3)[0] = 9.0
    same(jf(X), f(X))


def test_unseeded_generators_made_inside_draw_anew():
    # default_rng() reads the OS's entropy: every plain call draws new numbers
    jf = tp.jit(lambda x: x + np.random.default_rng().normal(size=x.shape))
    with pytest.warns(JitWarning, match="entropy"):
        a = jf(np.zeros(3))
    assert not np.array_equal(a, jf(np.zeros(3)))
    seeded = tp.jit(lambda x: x + np.random.default_rng(0).normal(size=x.shape))
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        same(seeded(np.zeros(3)), seeded(np.zeros(3)))


def test_tapestry_numpy_constructors_keep_staged_values():
    # tnp.asarray / tnp.array on a staged value record a call instead of
    # reading the value (a guard that traced again for every new value)
    import tapestry.numpy as tnp

    def f(x):
        y = tnp.array(x)
        y[0] = 5.0
        return np.sum(tnp.asarray(y) ** 2) + tnp.asarray(x, dtype=np.float32)
    jf = tp.jit(f)
    for k in range(4):
        same(jf(X * k), f(X * k))
    assert jf.cache_info()["traces"] == 1


def test_jit_of_grad_takes_the_plain_rule_path():
    g = tp.grad(lambda a, b: np.sum(np.power(a, b) * np.cos(np.arange(2.0))[:, None]),
                argnums=(0, 1))
    x = np.array([[1.267732437050385], [1.925695544488903]])
    y = np.array(0.18905338179353307)
    same(tp.jit(g)(x, y), g(x, y))
