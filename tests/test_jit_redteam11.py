"""Red-team round 11 of tapestry.jit: state held by a ``functools.lru_cache``
that the function changes in place (a cached array it writes into, a cached
dict or object whose counter it steps) -- the cache's results are part of
what the function reads, guarded as a memo dict's values."""
import functools
import types
import warnings

import numpy as np
import pytest

import tapestry as tp

from jit_checks import same


def _calls(fn, n, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tp.JitWarning)
        return [fn(x) for _ in range(n)]


def _write_array(cache):
    def f(x):
        b = cache()
        b[0] += 1.0  # before any NumPy call reads it
        return x * b
    return f


def _write_out(cache):
    def f(x):
        b = cache()
        np.add(b, 1.0, out=b)
        return x * b
    return f


def _step_counter(cache):
    def f(x):
        d = cache()
        d["n"] += 1
        return x * d["n"]
    return f


def _step_list(cache):
    def f(x):
        s = cache()
        s[0] += 1.0
        return x * s[0]
    return f


class _Counter:
    def __init__(self):
        self.n = 0


def _step_attribute(cache):
    def f(x):
        o = cache()
        o.n += 1
        return x * o.n
    return f


_MAKERS = {_write_array: lambda: np.zeros(3), _write_out: lambda: np.zeros(3),
           _step_counter: lambda: {"n": 0}, _step_list: lambda: [0.0],
           _step_attribute: _Counter}


@pytest.mark.parametrize("maxsize", [None, 4])
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("body", list(_MAKERS), ids=lambda b: b.__name__)
@pytest.mark.parametrize("transform", ["plain", "grad"])
def test_state_held_by_an_lru_cache_changed_in_place(body, warm, maxsize, transform):
    make = _MAKERS[body]
    cache = functools.lru_cache(maxsize=maxsize)(lambda: make())
    f = body(cache)
    if transform == "grad":
        f = tp.grad(lambda x, f=f: np.sum(f(x)))
    x = np.ones(3)
    if warm:
        cache()
    got = _calls(tp.jit(f), 4, x)
    cache.cache_clear()
    if warm:
        cache()
    want = [f(x) for _ in range(4)]
    for g, w in zip(got, want):
        same(g, w)


def test_a_cached_table_read_only_still_compiles():
    table = functools.lru_cache(maxsize=2)(lambda n: np.arange(float(n)))
    jf = tp.jit(lambda x: x * table(3))
    x = np.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tp.JitWarning)
        outs = [jf(x) for _ in range(4)]
    for o in outs:
        same(o, x * np.arange(3.0))
    info = jf.cache_info()
    assert info["programs"] == 1 and info["traces"] <= 2  # (the first call may fill the cache)


def test_a_cache_cleared_between_calls_is_seen():
    k = {"v": 1.0}
    tab = functools.cache(lambda n: np.full(n, k["v"]))
    f = lambda x: x * tab(3)  # noqa: E731
    jf = tp.jit(f)
    x = np.ones(3)
    same(jf(x), f(x))
    same(jf(x), f(x))
    k["v"] = 5.0
    tab.cache_clear()
    same(jf(x), np.full(3, 5.0))


def _on_a_function():
    def helper():
        if not hasattr(helper, "c"):
            helper.c = np.zeros(3)
        return helper.c

    def f(x):
        c = helper()
        c[2] += 1.0
        return x * c
    return f


def _on_a_class():
    class K:
        pass

    def f(x):
        if not hasattr(K, "c"):
            K.c = np.zeros(3)
        K.c[2] += 1.0
        return x * K.c
    return f


def _on_a_module():
    m = types.ModuleType("scratch")

    def f(x):
        c = m.__dict__.setdefault("c", np.zeros(3))
        c[2] += 1.0
        return x * c
    return f


@pytest.mark.parametrize("make", [_on_a_function, _on_a_class, _on_a_module],
                         ids=["function", "class", "module"])
def test_a_buffer_kept_on_a_namespace_the_first_time_is_guarded(make):
    # the first call adds the attribute during the trace (nothing to guard
    # yet): the next call must not replay the write away
    x = np.arange(3.0)
    got = _calls(tp.jit(make()), 4, x)
    plain = make()
    want = [plain(x) for _ in range(4)]
    for g, w in zip(got, want):
        same(g, w)


def test_an_attribute_kept_on_a_helper_read_only_still_compiles():
    def helper():
        if not hasattr(helper, "t"):
            helper.t = np.arange(3.0)
        return helper.t
    jf = tp.jit(lambda x: x * helper())
    x = np.ones(3)
    for _ in range(4):
        same(jf(x), x * np.arange(3.0))
    assert jf.cache_info()["programs"] == 1


def _outcomes(fn, inputs):
    """Each call's result and the warnings it issued (tapestry's own aside)."""
    got = []
    for x in inputs:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = fn(x)
        got.append((r, [(x.category, str(x.message)) for x in w
                        if not issubclass(x.category, tp.JitWarning)]))
    return got


def _warns_always(x):
    warnings.warn("careful", UserWarning)
    return x * 2


def _warns_on_data(x):
    if np.sum(x) > 2:
        warnings.warn("large input", UserWarning)
    return np.sum(np.sin(x))


def _silenced_log(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = np.log(x - 1.0)
    return np.sum(np.where(np.isfinite(y), y, 0.0) * x)


def _silenced_by_message(x):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="divide by zero")
        return np.log(x - 1.0) * np.sqrt(x - 2.0)  # (the sqrt's 'invalid' still shows)


@pytest.mark.parametrize("fn", [_warns_always, _warns_on_data, _silenced_log, _silenced_by_message])
@pytest.mark.parametrize("transform", ["plain", "grad"])
def test_warnings_are_the_plain_calls_on_every_call(fn, transform):
    if transform == "grad":
        if fn is _warns_always or fn is _silenced_by_message:
            pytest.skip("not a scalar function")
        fn = tp.grad(fn)
    inputs = [np.arange(1.0, 4.0), np.array([0.0, 0.5, 1.0]), np.arange(1.0, 4.0),
              np.arange(1.0, 4.0)]
    got = _outcomes(tp.jit(fn), inputs)
    want = _outcomes(fn, inputs)
    for (g, gw), (w, ww) in zip(got, want):
        same(g, w)
        assert gw == ww


def test_a_silenced_call_still_compiles_and_follows_the_callers_filters():
    jf = tp.jit(_silenced_by_message)
    x = np.arange(1.0, 4.0)
    for _ in range(3):
        _outcomes(jf, [x])
    assert jf.cache_info()["traces"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the caller's, behind the function's
        with pytest.raises(RuntimeWarning, match="invalid"):
            jf(x)


@pytest.mark.parametrize("maxsize", [None, 8])
def test_a_number_passed_to_a_cached_helper_does_not_poison_its_cache(maxsize):
    double = functools.lru_cache(maxsize=maxsize)(lambda s: s * 2.0)
    f = lambda x, s: x * double(s)  # noqa: E731
    jf = tp.jit(f)
    x = np.ones(2)
    for s in (2.0, 3.0, 2.0, 3.0):
        same(jf(x, s), x * (s * 2.0))
    for s in (2.0, 3.0):  # plain calls after, of the values the traces saw
        assert double(s) == s * 2.0 and type(double(s)) is float
