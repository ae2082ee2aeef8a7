"""Red team, round 10: call sequences whose jitted result differed from the
plain call's.  Each case runs the same calls with and without ``jit``
(what the function reads changing between calls, or calls from other
threads) and compares values, dtypes, shapes, layouts and which results
are the caller's own arrays."""
import math
import threading
import warnings

import numpy as np
import pytest

import tapestry as tp
import tapestry.numpy as tnp


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tp.JitWarning)
        return fn(*a, **k)


def _same(got, want):
    assert type(got) is type(want)
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.strides == want.strides  # the plain call's layout
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want


def _in_thread(fn, *args):
    out = []
    t = threading.Thread(target=lambda: out.append(fn(*args)))
    t.start()
    t.join()
    return out[0]


# --- 1. an attribute of a library module rebound between calls ------------------------

@pytest.mark.parametrize("where", ["np.exp", "np.linalg.norm", "np.pi", "math.pi",
                                   "tnp.tanh"])
def test_a_library_attribute_rebound_between_calls_is_seen(where, monkeypatch):
    """``np.exp = custom`` (a monkeypatch, a test double) changes what the
    plain call runs; the trace ran the old one."""
    mods = {"np": np, "np.linalg": np.linalg, "math": math, "tnp": tnp}
    mod, _, name = where.rpartition(".")
    fns = {
        "np.exp": lambda x: np.exp(x) * 2.0,
        "np.linalg.norm": lambda x: np.linalg.norm(x) * x,
        "np.pi": lambda x: x * np.pi,
        "math.pi": lambda x: x * math.pi,
        "tnp.tanh": lambda x: tnp.tanh(x) + 1.0,
    }
    f = fns[where]
    jf = tp.jit(f)
    x = np.linspace(0.5, 1.5, 3)
    _same(jf(x), f(x))
    old = getattr(mods[mod], name)
    new = 3.0 if name == "pi" else (lambda *a, _old=old: _old(*a) + 1.0)
    monkeypatch.setattr(mods[mod], name, new)
    _same(jf(x), f(x))
    _same(jf(x), f(x))
    monkeypatch.undo()
    _same(jf(x), f(x))


def test_a_user_function_patched_into_a_library_is_walked(monkeypatch):
    """The replacement's own closure is state the function reads."""
    k = [2.0]
    orig = np.sin

    def patched(x):
        return orig(x) * k[0]

    f = lambda x: np.sin(x) + 1.0  # noqa: E731
    jf = tp.jit(f)
    x = np.linspace(0.0, 1.0, 4)
    monkeypatch.setattr(np, "sin", patched)
    _same(jf(x), f(x))
    k[0] = 5.0
    _same(jf(x), f(x))


# --- 2. a threading.local the function reads -------------------------------------------

def test_a_thread_local_is_read_in_the_calling_thread():
    """Each thread sees its own attributes: a replay on another thread must
    not be checked against the tracing thread's namespace."""
    loc = threading.local()
    loc.s = 2.0

    def f(x):
        return x * getattr(loc, "s", 7.0)

    jf = tp.jit(f)
    x = np.ones(3)
    _same(jf(x), f(x))
    _same(_in_thread(jf, x), _in_thread(f, x))

    def other():
        loc.s = 5.0
        return jf(x), f(x)
    got, want = _in_thread(other)
    _same(got, want)
    _same(jf(x), f(x))  # this thread's 2.0 again


def test_a_thread_local_subclass_attribute_named_by_the_code():
    class Cfg(threading.local):
        def __init__(self):
            self.scale = 3.0

    cfg = Cfg()

    def f(x):
        return x * cfg.scale

    jf = tp.jit(f)
    x = np.ones(2)
    _same(jf(x), f(x))

    def other():
        cfg.scale = 4.0
        return jf(x), f(x)
    got, want = _in_thread(other)
    _same(got, want)
    _same(_in_thread(jf, x), _in_thread(f, x))  # a fresh thread: 3.0 again
    _same(jf(x), f(x))


# --- 3. np.require(x, "W") hands back a writeable argument itself ----------------------

@pytest.mark.parametrize("req", ["W", "CW", "WA", ["W", "O"], ["WRITEABLE"]])
@pytest.mark.parametrize("layout", ["c", "strided", "f"])
def test_require_writeable_hands_back_the_argument_as_the_plain_call(req, layout):
    base = np.arange(12.0).reshape(3, 4)
    x = {"c": base[0], "strided": base[:, 0], "f": np.asfortranarray(base)}[layout]

    def f(x):
        return np.require(x, requirements=req)

    jf = tp.jit(f)
    for _ in range(3):
        want, got = f(x), _quiet(jf, x)
        assert (got is x) == (want is x)
        assert got.flags.writeable == want.flags.writeable
        _same(got, want)


def test_require_writeable_of_a_read_only_argument_still_copies():
    x = np.arange(4.0)
    x.flags.writeable = False

    def f(x):
        return np.require(x, requirements="W") * 2.0

    jf = tp.jit(f)
    for _ in range(2):
        _same(jf(x), f(x))
    assert jf.cache_info()["traces"] == 1
