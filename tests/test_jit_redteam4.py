"""tapestry.jit, fourth round: call sequences built to make a replay differ
from the plain call.

What the cache key and the guards compare: Python's ``==`` says ``1 == 1.0
== True`` and ``0.0 == -0.0``, and a user's class may say any two objects
are equal; a key or a guard that compares with it replays a program traced
for another value.  What the environment walk reaches (environment
variables, globals named in strings, objects whose ``__getattr__`` raises
``KeyError``), which arguments are one object, array subclasses, returned
``np.asarray(x)``, dict keys made of numbers, Python numbers through
``divmod`` / ``round``, values written to files, forward mode through a
jitted function.  Each scenario (as in ``test_jit_users``) runs once plain
and once jitted from a fresh world and must return the same types, dtypes,
shapes and bits on every call; the scenarios log the types of dict keys,
which ``==`` does not compare.
"""
from __future__ import annotations

import dataclasses
import io
import math
import os
import shutil
import sys
import tempfile
from typing import NamedTuple

import numpy as np
import pytest

import tapestry as tp

from jit_checks import same
from test_jit_users import check_scenario, jitted

SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _keys(d):
    """The keys of a dict with their types (``==`` does not tell them apart)."""
    return [(type(k).__name__, repr(k)) for k in d]


# --- equal values of different types in aux data and static arguments ---------------
@scenario
def dict_keys_equal_but_of_other_types(wrap, log):
    @wrap
    def f(d):
        out = {}
        for k, v in d.items():
            out[k] = v * 2 + np.full(v.shape, k)
        return out
    x = np.arange(3.0)
    for k in (1, True, 1.0, np.int64(1), 0.0, -0.0, False, 0, 1):
        out = log(f({k: x}))
        log(_keys(out))


@scenario
def dict_key_read_as_an_array(wrap, log):
    @wrap
    def f(d, x):
        return [np.asarray(k) * x for k in d], [1 / k if k else x for k in d]
    x = np.ones(2, np.float32)
    for k in (1, True, 1.0, -0.0, 0.0, 2):
        log(f({k: None}, x))


@dataclasses.dataclass
class _Scaled:
    w: np.ndarray
    scale: object = dataclasses.field(metadata={"static": True})


class _Aux:
    """A registered node whose aux data is a number."""

    def __init__(self, w, k):
        self.w, self.k = w, k


tp.tree_util.register_pytree_node(_Aux, lambda o: ((o.w,), o.k), lambda k, ch: _Aux(ch[0], k))


@scenario
def static_fields_and_aux_data_equal_but_of_other_types(wrap, log):
    @wrap
    def f(s, a):
        return (np.arange(3) * s.scale, np.arange(3) * a.k + s.w,
                np.copysign(1.0, a.k), _Aux(a.w * 2, a.k))
    w = np.ones(3)
    for k in (1, True, 1.0, np.float32(1), 0.0, -0.0, 2):
        s, a = _Scaled(w, k), _Aux(w, k)
        out = f(s, a)
        log(out[:3])
        log((type(out[3].k).__name__, repr(out[3].k)))


class _Cfg:
    """A config whose ``==`` compares a name only (equal objects that the
    function reads differently)."""

    def __init__(self, name, scale):
        self.name, self.scale = name, scale

    def __eq__(self, other):
        return isinstance(other, _Cfg) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class _Point(NamedTuple):
    x: object
    y: object


@scenario
def static_arguments_equal_but_not_the_same(wrap, log):
    def f(x, cfg, t):
        return x * cfg.scale + np.asarray(t)
    g = wrap(f, static_argnums=(1, 2)) if wrap is jitted else f
    x = np.ones(2)
    for cfg, t in ((_Cfg("a", 2.0), _Point(1, 2)), (_Cfg("a", 3.0), _Point(1, 2)),
                   (_Cfg("a", 3.0), _Point(True, 2)), (_Cfg("a", 3.0), (1.0, 2)),
                   (_Cfg("a", 3.0), _Point(1.0, 2.0)), (_Cfg("a", 2.0), _Point(1, 2))):
        log(g(x, cfg, t))


def test_static_objects_with_their_own_eq_replay_for_the_same_attributes():
    """A fresh config object per call whose ``==`` compares a name only is
    keyed by its attributes: the same attributes replay, others trace."""
    f = tp.jit(lambda x, cfg, t: x * cfg.scale + np.asarray(t), static_argnums=(1, 2))
    x = np.ones(2)
    for scale in (2.0, 2.0, 3.0, 2.0, 3.0, 1):
        same(f(x, _Cfg("a", scale), _Point(1, 2)), x * scale + np.asarray((1, 2)))
    assert f.cache_info()["traces"] == 3, f.cache_info()


@scenario
def static_nan_and_signed_zero(wrap, log):
    def f(x, s):
        return x * np.copysign(1.0, s) + (0.0 if s == s else 1.0)
    g = wrap(f, static_argnums=1) if wrap is jitted else f
    x = np.ones(2)
    for s in (float("nan"), 0.0, -0.0, float("nan"), np.float32(-0.0), -0.0):
        log(g(x, s))
    if wrap is jitted:  # a nan finds its program again (bits, not ==)
        assert g.cache_info()["traces"] == 4, g.cache_info()


# --- grad(jit(f)): the pullback's programs are keyed like jit's --------------------
@scenario
def grad_of_jit_over_a_dict_in_either_order(wrap, log):
    def loss(d):
        out = 0.0
        for i, v in enumerate(d.values()):  # the order of the dict counts
            out = out + (i + 1) * np.sum(v ** 2)
        return out
    g = tp.grad(wrap(loss))
    x = np.arange(1.0, 4.0)
    for d in ({"a": x, "b": 2 * x}, {"b": 2 * x, "a": x}, {"a": x, "b": 2 * x},
              {"b": 2 * x, "a": x}):
        out = log(g(d))
        log(_keys(out))


@scenario
def grad_of_jit_over_dict_keys_of_other_types(wrap, log):
    def loss(d):
        out = 0.0
        for k, v in d.items():
            # an int key overflows where a float one does not
            out = out + np.sum(v * (np.full(v.shape, k) * 2 ** 62).astype(np.float64))
        return out
    g = tp.grad(wrap(loss))
    x = np.arange(1.0, 4.0)
    for k in (2, 2.0, 1, True, 1.0, 2):
        out = log(g({k: x}))
        log(_keys(out))


# --- what the function reads outside its arguments ----------------------------------
class _AttrDict(dict):
    """A config read as attributes whose ``__getattr__`` raises ``KeyError``
    (as ``dict.__getitem__`` does) for any other name."""

    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


class _Box:
    """Attributes served from a dict by ``__getattr__`` (``KeyError`` for others)."""

    __slots__ = ("d",)

    def __init__(self, **kw):
        self.d = dict(kw)

    def __getattr__(self, name):
        return self.d[name]


@scenario
def config_objects_whose_getattr_raises_key_error(wrap, log):
    cfg = _AttrDict(lr=2.0)
    box = _Box(s=1.0)

    @wrap
    def f(x, opts):
        return x * cfg.lr + box.s * opts.mu
    x = np.arange(3.0)
    for lr, s, mu in ((2.0, 1.0, 1.0), (3.0, 1.0, 1.0), (3.0, 4.0, 1.0), (3.0, 4.0, 0.5)):
        cfg.lr = lr
        box.d["s"] = s
        log(f(x, _Box(mu=mu)))


@scenario
def environment_variables_read_inside(wrap, log):
    @wrap
    def f(x):
        return x * float(os.environ.get(_VAR, "1")) + float(os.getenv(_VAR, "0"))
    _set_variable_between_calls(f, log)


_VAR = "TAPESTRY_TEST_REDTEAM4_SCALE"


def _set_variable_between_calls(f, log):
    x = np.arange(3.0)
    try:
        for v in ("2", "3", "3", None, "2", "2"):
            if v is None:
                os.environ.pop(_VAR, None)
            else:
                os.environ[_VAR] = v
            log(f(x))
    finally:
        os.environ.pop(_VAR, None)


def test_environ_imported_by_name_is_compared_whole():
    """``from os import environ``: the mapping is compared whole (its items
    are new strings on every read: compared by identity, no call replayed)."""
    from os import environ

    def f(x):
        return x * float(environ.get(_VAR, "1"))
    jf = tp.jit(f)
    got, want = [], []
    _set_variable_between_calls(jf, got.append)
    _set_variable_between_calls(f, want.append)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
    assert jf.cache_info()["traces"] == 4, jf.cache_info()  # (the last call replays)


# --- arguments that are one object, or not plain arrays ---------------------------
@scenario
def the_same_array_passed_twice_then_two(wrap, log):
    @wrap
    def f(x, y, *, z):
        if x is y:  # (a shortcut the user's code takes)
            return x * 2.0, y is z
        return x + y, y is z
    a, b = np.arange(3.0), np.ones(3)
    for args, z in (((a, a), a), ((a, b), b), ((b, b), a), ((a, a), b), ((a, b), a),
                    ((a, a), a)):
        log(f(*args, z=z))


@scenario
def array_subclasses_passed_anew(wrap, log):
    @wrap
    def f(m):
        return m * 2.0, np.sum(m), m @ m.T if m.ndim == 2 else m
    for k in range(3):
        log(f(np.ma.masked_array([1.0, 2.0, 3.0], mask=[k == 0, k == 1, k == 2])))
        log(f(np.matrix([[1.0, 2.0], [3.0, 4.0 + k]])))


@scenario
def returns_dicts_keyed_by_number_arguments(wrap, log):
    @wrap
    def f(x, k):
        return {k: x * 2, "n": k, (k, "a"): x}, {float(x.sum()): 1.0, frozenset([k]): 2.0}
    x = np.arange(3.0)
    for k in (0, 1, 0, np.int64(1), np.int32(1), 2.5, True, 1):
        out = log(f(x, k))
        log(_keys(out[0]) + _keys(out[1]))


# --- Python numbers stay Python numbers --------------------------------------------
@scenario
def python_number_arguments_through_divmod_round_and_conjugate(wrap, log):
    @wrap
    def f(x, s):
        q, r = divmod(s, 3)
        q2, r2 = divmod(7, s)
        return x * q, q, r, q2, r2, round(s, 2), s.conjugate(), round(x[0] * s, 1)
    x = np.arange(1.0, 4.0)
    for s in (5, 2, 5, 2.5, 3.0, 7, True):
        log(f(x, s))

    @wrap
    def g(x, c):
        return x * c, c.conjugate(), abs(c)
    for c in (1 + 2j, 3j, 1 + 2j):
        log(g(x, c))


@scenario
def signed_zeros_and_nans_read_by_python(wrap, log):
    @wrap
    def f(x, s):
        return (x * math.copysign(1.0, s), x * math.copysign(1.0, float(x[0] * s)),
                x * math.copysign(1.0, max(s, -1.0)))
    x = np.ones(2)
    nan = float("nan")
    for s in (0.0, -0.0, 0.0, -0.0, nan, -nan, nan, -nan, 0.0):
        log(f(x, s))


# --- returned buffers ------------------------------------------------------------
@scenario
def returns_np_asarray_of_its_argument_and_the_caller_writes_into_it(wrap, log):
    fs = [wrap(lambda x: np.asarray(x)), wrap(lambda x: [np.asarray(x * 2)]),
          wrap(lambda x: np.asarray(x)[1:]), wrap(lambda x: np.asarray(x, dtype=np.float32)),
          wrap(lambda x: (np.asarray(x, dtype=x.dtype), np.asarray(x.sum())))]
    for f in fs:
        x = np.arange(3.0)
        for k in range(3):
            out = log(f(x))
            first = tp.tree_flatten(out)[0][0]
            log((first is x, np.shares_memory(first, x)))
            first[0] = 100.0 + k  # writes into x where the plain call returned x
            log(x)


# --- forward mode through a jitted function -----------------------------------------
@scenario
def jvp_and_jacfwd_of_a_jitted_function_with_scalar_outputs(wrap, log):
    jf = wrap(lambda w, x: (np.sum(np.tanh(x @ w) ** 2), np.mean(np.sin(x @ w)).astype(np.float32)))
    r = np.random.default_rng(4)
    for n in (3, 3, 5):
        w, x, t = r.normal(size=(4, 2)), r.normal(size=(n, 4)), r.normal(size=(4, 2))
        log(tp.jvp(lambda w: jf(w, x), (w,), (t,)))
        log(tp.jacfwd(lambda w: jf(w, x)[0])(w))


@scenario
def jacrev_and_grad_through_some_outputs_of_a_jitted_function(wrap, log):
    # an output given no cotangent adds nothing in the plain sweep; a zero
    # cotangent through cos(v) < 0 would add -0.0 (the cross blocks' signs)
    jf = wrap(lambda d: {k: np.sin(v) * (i + 1) for i, (k, v) in enumerate(d.items())})
    for x in (np.arange(1.0, 4.0), np.arange(2.0, 5.0)):
        d = {"a": x, "b": 2 * x}
        log(tp.jacrev(jf)(d))
        log(tp.grad(lambda d: np.sum(jf(d)["a"]))(d))


@scenario
def values_written_to_files_and_read_back(wrap, log):
    folder = tempfile.mkdtemp()

    def through_bytes(x):
        b = io.BytesIO()
        np.save(b, x)
        return x * (len(set(b.getvalue())) % 9)

    def through_npz(x):
        b = io.BytesIO()
        np.savez(b, a=x)
        b.seek(0)
        return np.load(b)["a"] * 3

    def through_a_file(x):
        path = os.path.join(folder, "x.npy")
        np.save(path, x * 2)
        return np.load(path) + 1

    def through_tofile(x):
        path = os.path.join(folder, "x.bin")
        x.tofile(path)
        return np.fromfile(path) * 2
    try:
        for f in map(wrap, (through_bytes, through_npz, through_a_file, through_tofile)):
            for x in (np.arange(3.0), np.arange(3.0) * 2 + 1, np.array([5.0, 0.0, 2.0])):
                log(f(x))
    finally:
        shutil.rmtree(folder)


# --- globals read by a name in a string ------------------------------------------
_G_W = np.ones(3)
_G_S = 2.0
_G_SUFFIX = "W"
_GLOBAL_READERS = {
    "globals_item": lambda x: x * globals()["_G_W"] + globals()["_G_S"],
    "eval": lambda x: x * eval("_G_W") + eval("_G_S"),
    "computed_name": lambda x: x * globals()["_G_" + _G_SUFFIX] + globals().get("_G_S"),
    "vars_of_module": lambda x: x * vars(sys.modules[__name__])["_G_W"] + getattr(
        sys.modules[__name__], "_G_S"),
}


@pytest.mark.parametrize("name", sorted(_GLOBAL_READERS))
def test_globals_read_by_a_name_in_a_string_are_guarded(name):
    global _G_W, _G_S
    f = _GLOBAL_READERS[name]
    jf = tp.jit(f)
    x = np.arange(3.0)
    changes = [lambda: None, lambda: _G_W.__setitem__(0, 5.0),
               lambda: globals().__setitem__("_G_W", np.full(3, 3.0)),
               lambda: globals().__setitem__("_G_S", 7.0), lambda: None]
    try:
        for change in changes:
            change()
            same(jf(x), f(x))
    finally:
        _G_W, _G_S = np.ones(3), 2.0


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name):
    check_scenario(SCENARIOS[name], name)
