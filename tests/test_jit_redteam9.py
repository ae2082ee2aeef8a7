"""Red team, round 9: call sequences whose jitted result differed from the
plain call's.  Each case runs the same calls with and without ``jit``
(inputs changing between calls) and compares values, dtypes, shapes,
layouts and which results are the caller's own arrays."""
import functools
import warnings

import numpy as np
import pytest

import tapestry as tp
from jit_checks import quiet as _quiet, same_object as _same


# --- 1. state a function reads through a dict held by a function object ---------------

def test_keyword_defaults_changed_in_place_are_seen():
    def f(x, *, s=2.0):
        return x * s
    jf = tp.jit(f)
    x = np.ones(2)
    _same(jf(x), f(x))
    f.__kwdefaults__["s"] = 4.0  # the same dict, a new value
    _same(jf(x), f(x))
    f.__kwdefaults__["s"] = np.array([1.0, 3.0])
    _same(jf(x), f(x))
    f.__kwdefaults__["s"][0] = 7.0
    _same(jf(x), f(x))


def test_partial_keywords_changed_in_place_are_seen():
    def f(x, s=1.0):
        return x * s
    p = functools.partial(f, s=2.0)
    jp = tp.jit(p)
    x = np.ones(2)
    _same(jp(x), p(x))
    p.keywords["s"] = 5.0
    _same(jp(x), p(x))
    p.keywords["t"] = 1.0  # a keyword added: the plain call raises, so must the replay
    with pytest.raises(TypeError):
        p(x)
    with pytest.raises(TypeError):
        jp(x)
    del p.keywords["t"]
    p.__setstate__((lambda x, s=1.0: x - s, (), {"s": 2.0}, None))  # all three rebound
    _same(jp(x), p(x))


# --- 2. a conversion that raises is a read of the value -------------------------------

def _int_or_same(x):
    try:
        k = int(np.sum(x))
        return x * k
    except (OverflowError, ValueError):
        return x


def _index_or_zero(x):
    try:
        return np.arange(4.0)[: x[0]]  # __index__ of a float value raises
    except TypeError:
        return np.zeros(0)


@pytest.mark.parametrize("fn, inputs", [
    (_int_or_same, [[1.0, 2.0], [np.inf, 1.0], [np.nan, 1.0], [3.0, 2.0], [np.inf, 1.0]]),
    (lambda x: _int_or_same(x) + 0 * np.float32(0), [[np.inf, 0.0], [2.0, 0.0]]),
])
def test_a_caught_error_of_int_takes_its_branch_for_its_value_only(fn, inputs):
    jf = tp.jit(fn)
    for v in inputs:
        x = np.array(v)
        _same(jf(x), fn(x))


# --- 3. NumPy's conversions decide by the layout ---------------------------------------

_CONVERSIONS = {
    "ascontiguousarray": np.ascontiguousarray,
    "asfortranarray": np.asfortranarray,
    "asarray_order_C": lambda x: np.asarray(x, order="C"),
    "asarray": np.asarray,
    "array_copy_K": lambda x: np.array(x),
    "require_C": lambda x: np.require(x, requirements="C"),
    "asarray_same_dtype": lambda x: np.asarray(x, dtype=np.float64),
    "transpose_of_asarray": lambda x: np.asarray(x).T,
    "array_ndmin": lambda x: np.array(x, ndmin=3, copy=None),
}


def _layouts():
    a = np.arange(24.0).reshape(4, 6)
    return [a[:, :3], a[:, :3].copy(), np.asfortranarray(a[:, :3]), a[:, ::2], a[::-1, :3],
            a[:, :3].copy(), a.T[:3, :3], a[:3, :3].copy()]


@pytest.mark.parametrize("name", sorted(_CONVERSIONS))
def test_a_conversion_returns_the_argument_or_a_copy_as_the_plain_call(name):
    conv = _CONVERSIONS[name]
    jf = tp.jit(lambda x: conv(x))
    for x in _layouts():
        want, got = conv(x), _quiet(jf, x)
        _same(got, want)
        assert (got is x) == (want is x)
        assert np.shares_memory(got, x) == np.shares_memory(want, x)
        assert got.flags.writeable == want.flags.writeable


def test_returning_the_argument_through_a_conversion_still_compiles():
    jf = tp.jit(lambda x: np.asarray(x, dtype=np.float64))
    a = np.arange(24.0).reshape(4, 6)
    for x in (a[:, ::2], a[:, 1::2], a[:, ::2].copy()[:, ::-1]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", tp.JitWarning)
            assert jf(x) is x


@pytest.mark.parametrize("name", ["ascontiguousarray", "asfortranarray", "array_copy_K"])
def test_a_conversion_of_an_intermediate_keeps_the_plain_calls_layout(name):
    conv = _CONVERSIONS[name]

    def f(x):
        return conv(x * 2.0)
    jf = tp.jit(f)
    for x in _layouts():
        _same(_quiet(jf, x), f(x))


def test_writing_into_a_contiguous_copy_leaves_the_argument_alone():
    def f(x):
        return np.ascontiguousarray(x)
    jf = tp.jit(f)
    for make in (lambda: np.arange(12.0).reshape(3, 4)[:, :2],
                 lambda: np.asfortranarray(np.arange(6.0).reshape(3, 2)),
                 lambda: np.arange(6.0).reshape(3, 2)):
        a, b = make(), make()
        ra, rb = f(a), _quiet(jf, b)
        ra[0, 0] = rb[0, 0] = -1.0
        np.testing.assert_array_equal(b, a)  # the argument changed iff the plain one did


def test_a_returned_constant_keeps_its_layout_on_every_call():
    def f(x):
        c = np.ones((3, 2)) * np.arange(2.0)
        return x * 2, np.asfortranarray(c), {"t": c.T.copy(order="K")}, [c.T]
    jf = tp.jit(f)
    for _ in range(3):
        got, want = jf(np.ones(2)), f(np.ones(2))
        _same(got[0], want[0])
        _same(got[1], want[1])
        _same(got[2]["t"], want[2]["t"])
        assert got[3][0].flags.f_contiguous == want[3][0].flags.f_contiguous


# --- 4. a returned container that is the caller's -------------------------------------

_PARAMS = {"w": np.ones(2)}


def test_a_returned_dict_of_the_environment_is_the_same_object():
    def get(x):
        return _PARAMS, x * 2
    jg = tp.jit(get)
    for _ in range(3):
        params, y = _quiet(jg, np.ones(2))
        assert params is _PARAMS  # as get(...)[0]: an edit of it changes _PARAMS
        _same(y, get(np.ones(2))[1])


@pytest.mark.parametrize("wrap", [lambda s: s, lambda s: {"old": s}, lambda s: [s]])
def test_a_returned_argument_container_is_the_callers_object(wrap):
    def step(state, x):
        return wrap(state), np.sum(x * state["w"])
    js = tp.jit(step)
    for k in range(3):
        plain, mine = {"w": np.arange(2.0) + k}, {"w": np.arange(2.0) + k}
        want, got = step(plain, np.ones(2)), _quiet(js, mine, np.ones(2))
        _same(got[1], want[1])
        inner = got[0] if isinstance(got[0], dict) and "w" in got[0] else \
            (got[0]["old"] if isinstance(got[0], dict) else got[0][0])
        assert inner is mine


# --- 5. array methods with NumPy's copy semantics ---------------------------------------

@pytest.mark.parametrize("method", [lambda x: x.flatten(), lambda x: x.flatten("A"),
                                    lambda x: x.flatten("F"), lambda x: x.conj(),
                                    lambda x: x.conjugate()])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_methods_copy_or_hand_back_the_argument_as_ndarrays_do(method, dtype):
    jf = tp.jit(method)
    for k in range(3):
        a = (np.arange(6.0) + k).reshape(2, 3).astype(dtype)
        b = a.copy()
        want, got = method(a), jf(b)
        _same(got, want)
        assert (got is b) == (want is a)
        assert np.shares_memory(got, b) == np.shares_memory(want, a)
        got[...] = want[...] = 7  # the argument changes iff the plain one does
        np.testing.assert_array_equal(b, a)


def test_flatten_and_conj_gradients():
    for dt in (np.float32, np.float64):
        x = np.arange(1.0, 7.0).reshape(2, 3).astype(dt)
        tp.testing.check_grads(lambda x: np.sum(x.flatten() ** 2 * x.conj().flatten("F")),
                               (x,), order=2)
    z = (np.arange(6.0) + 1j).reshape(2, 3)
    tp.testing.check_grads(lambda z: np.real(np.sum(z.conj() * z.flatten().reshape(2, 3))),
                           (z,))


# --- 6. attributes of the user's functions ------------------------------------------------

def _scaled(x):
    return x * _scaled.scale


def _memo_table(x):
    return x * _memo_table.cfg["s"]


def test_attributes_of_the_function_and_its_helpers_are_guarded():
    _scaled.scale = 2.0
    _memo_table.cfg = {"s": 2.0}
    direct = tp.jit(_scaled)
    via_helper = tp.jit(lambda x: _scaled(x) + _memo_table(x))
    partial = tp.jit(functools.partial(lambda x, a: _scaled(x) * a, a=3.0))
    x = np.ones(2)

    def check():
        _same(direct(x), _scaled(x))
        _same(via_helper(x), _scaled(x) + _memo_table(x))
        _same(partial(x), _scaled(x) * 3.0)
    check()
    _scaled.scale = 5.0  # rebound
    check()
    _scaled.scale = np.array([1.0, 4.0])
    check()
    _scaled.scale[0] = 9.0  # changed in place
    check()
    _memo_table.cfg["s"] = 7.0  # a dict on the function, changed in place
    check()


def test_an_attribute_of_a_method_s_function_is_guarded():
    class Net:
        def f(self, x):
            return x * Net.f.k
    Net.f.k = 2.0
    n = Net()
    jf = tp.jit(n.f)
    _same(jf(np.ones(2)), n.f(np.ones(2)))
    Net.f.k = 4.0
    _same(jf(np.ones(2)), n.f(np.ones(2)))


# --- 7. state reached through C methods, class properties and the class itself --------

def test_the_object_of_a_bound_c_method_is_guarded():
    table, vals, w = {"s": 2.0}, [2.0], np.array([[1.0, 2.0], [3.0, 4.0]])
    fns = [lambda x, get=table.get: x * get("s"),
           lambda x, item=vals.__getitem__: x * item(0)]
    lookup, mul, total = table.get, w.dot, w.sum
    fns += [lambda x: x * lookup("s"), lambda x: mul(x), lambda x: x * total()]
    jits = [tp.jit(f) for f in fns]
    x = np.ones(2)

    def check():
        for f, jf in zip(fns, jits):
            _same(jf(x), f(x))
    check()
    table["s"], vals[0] = 5.0, 7.0
    w[0, 0] = 10.0
    check()


def test_a_property_rebound_on_the_class_and_a_swapped_class_are_seen():
    class A:
        @property
        def k(self):
            return 2.0

        def m(self):
            return 3.0

    class B:
        k = 4.0

        def m(self):
            return 5.0
    a = A()
    f = lambda x: x * a.k + a.m()  # noqa: E731
    jf = tp.jit(f)
    x = np.ones(2)
    _same(jf(x), f(x))
    A.k = property(lambda self: 6.0)
    _same(jf(x), f(x))
    a.__class__ = B
    _same(jf(x), f(x))


# --- 8. state read through the class hierarchy, NumPy's settings and a ContextVar -------

def test_a_subclass_defining_a_base_attribute_later_is_seen():
    class Base:
        k = 2.0

        def m(self):
            return 3.0

    class Sub(Base):
        pass
    obj = Sub()
    fns = [lambda x: x * obj.k + obj.m(), lambda x: x * Sub.k]
    jits = [tp.jit(f) for f in fns]
    x = np.ones(2)
    for change in (None, lambda: setattr(Sub, "k", 5.0), lambda: setattr(Sub, "m", lambda s: 7.0)):
        if change is not None:
            change()
        for f, jf in zip(fns, jits):
            _same(jf(x), f(x))


def test_numpy_settings_the_function_reads_are_guarded():
    def f(x):
        return x * (1.0 if np.geterr()["divide"] == "warn" else 2.0) \
            + np.get_printoptions()["precision"]
    jf = tp.jit(f)
    x = np.ones(2)
    _same(jf(x), f(x))
    with np.errstate(divide="ignore"):
        _same(jf(x), f(x))
    with np.printoptions(precision=3):
        _same(jf(x), f(x))
    _same(jf(x), f(x))


_SCALE = __import__("contextvars").ContextVar("redteam9_scale", default=2.0)


def test_a_context_variable_the_function_reads_is_guarded():
    f = lambda x: x * _SCALE.get()  # noqa: E731
    jf = tp.jit(f)
    x = np.ones(2)
    _same(jf(x), f(x))
    token = _SCALE.set(5.0)
    try:
        _same(jf(x), f(x))
        _SCALE.set(np.array([1.0, 3.0]))
        _same(jf(x), f(x))
    finally:
        _SCALE.reset(token)
    _same(jf(x), f(x))


# --- 9. a module the function imports inside -------------------------------------------

_IMPORTING = '''
import numpy as np
def by_statement(x):
    import redteam9_settings as m
    return x * m.SCALE
def by_from(x):
    from redteam9_settings import SCALE
    return x * SCALE
def by_dunder(x):
    return x * __import__("redteam9_settings").SCALE
'''


def test_a_module_imported_inside_the_function_is_guarded(monkeypatch):
    import sys
    import types
    settings = types.ModuleType("redteam9_settings")
    settings.SCALE = 2.0
    monkeypatch.setitem(sys.modules, "redteam9_settings", settings)
    ns = {"__name__": "redteam9_user"}
    exec(compile(_IMPORTING, "<redteam9_user>", "exec"), ns)  # (no global naming it)
    fns = [ns["by_statement"], ns["by_from"], ns["by_dunder"]]
    jits = [tp.jit(f) for f in fns]
    x = np.ones(2)
    for scale in (2.0, 5.0, np.array([1.0, 3.0])):
        settings.SCALE = scale
        for f, jf in zip(fns, jits):
            _same(jf(x), f(x))


def test_a_class_attribute_served_by_a_user_metaclass_is_guarded():
    class Meta(type):
        scale = 2.0

    class Config(metaclass=Meta):
        pass
    f = lambda x: x * Config.scale  # noqa: E731
    jf = tp.jit(f)
    x = np.ones(2)
    _same(jf(x), f(x))
    Meta.scale = 5.0
    _same(jf(x), f(x))
    Config.scale = 7.0  # the class's own now hides the metaclass's
    _same(jf(x), f(x))
