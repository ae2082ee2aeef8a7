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
from jit_checks import quiet as _quiet, same_object as _same


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


# --- 4. a call whose result nothing reads still raises or warns as in the plain call ------

def _check_positive_definite(a, x):
    np.linalg.cholesky(a)  # called for its error only
    return np.sum(np.sin(x) * 2.0)


def _log_unused(x):
    np.log(x)  # (a leftover of debugging: its value is not used)
    return np.sum(x * 2.0)


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001
        return "raised", type(e)


_TRANSFORMS = {
    "jit": lambda f: tp.jit(f),
    "jit(grad)": lambda f: tp.jit(tp.grad(f, argnums=1 if f is _check_positive_definite else 0)),
    "grad(jit)": lambda f: tp.grad(tp.jit(f), argnums=1 if f is _check_positive_definite else 0),
    "jit(value_and_grad)": lambda f: tp.jit(
        tp.value_and_grad(f, argnums=1 if f is _check_positive_definite else 0)),
    "jit fuse": lambda f: tp.jit(f, fuse=True),
}


@pytest.mark.parametrize("transform", list(_TRANSFORMS))
def test_an_unused_validation_call_raises_on_a_later_call(transform):
    if transform == "jit fuse":
        pytest.importorskip("numba")
    jf = _TRANSFORMS[transform](_check_positive_definite)
    x = np.linspace(0.0, 1.0, 3)
    for _ in range(2):
        jf(np.eye(2), x)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(-np.eye(2))
    assert _outcome(_quiet, jf, -np.eye(2), x) == ("raised", np.linalg.LinAlgError)
    assert _outcome(_quiet, jf, np.eye(2), x)[0] == "ok"


@pytest.mark.parametrize("transform", list(_TRANSFORMS))
def test_an_unused_value_raises_under_the_callers_error_state(transform):
    if transform == "jit fuse":
        pytest.importorskip("numba")
    jf = _TRANSFORMS[transform](_log_unused)
    plain = {"jit": _log_unused, "jit fuse": _log_unused}.get(
        transform, tp.grad(_log_unused) if "value" not in transform
        else tp.value_and_grad(_log_unused))
    for _ in range(2):
        jf(np.ones(3))
    with np.errstate(divide="raise"):
        assert _outcome(plain, np.zeros(3)) == ("raised", FloatingPointError)
        assert _outcome(_quiet, jf, np.zeros(3)) == ("raised", FloatingPointError)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(divide="warn"):
            _quiet(jf, np.zeros(3))
    assert any("divide by zero encountered in log" in str(w.message) for w in caught)


def test_an_unused_loss_value_under_jit_of_grad_warns_as_the_plain_grad():
    """``jit(grad(f))`` does not return ``f``'s value, which the plain grad
    computes: an overflow in it warns (or raises) all the same."""
    def f(x):
        return np.sum(np.log(x))  # its gradient, 1 / x, does not read the log

    jg, g = tp.jit(tp.grad(f)), tp.grad(f)
    jg(np.ones(2))
    with np.errstate(invalid="raise"):
        assert _outcome(g, -np.ones(2)) == ("raised", FloatingPointError)
        assert _outcome(_quiet, jg, -np.ones(2)) == ("raised", FloatingPointError)


# --- 5. a view of an argument made through an object that is not an array --------------

@pytest.mark.parametrize("make", [
    lambda x: np.lib.stride_tricks.as_strided(x, (2,), (8,)),
    lambda x: np.frombuffer(np.asarray(x).data, dtype=np.float64) if np.asarray(x).flags.c_contiguous
    else np.asarray(x)[:2],
], ids=["as_strided", "frombuffer"])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_a_view_through_an_interface_object_is_the_argument_s_memory(make, layout):
    """``as_strided`` views its argument through an interface object, where
    the chain of bases stops: the plain call's result is the caller's
    memory (writable), not a read-only copy."""
    jf = tp.jit(make)
    for k in range(3):
        x = np.arange(6.0) + k
        if layout == "strided":
            x = (np.arange(12.0) + k)[::2]
        want, got = make(x), _quiet(jf, x)
        assert np.shares_memory(got, x) == np.shares_memory(want, x)
        assert got.flags.writeable == want.flags.writeable
        _same(got, want)


@pytest.mark.parametrize("executor", ["serial", "threads"])
def test_an_unused_value_of_a_jitted_item_raises_in_parallel_sum(executor):
    """The per-item programs of ``parallel_sum(jit(f), items)`` (compiled
    whole where numba is there) replay the unused call too."""
    def item(it, w):
        np.log(it["x"])  # unused
        return np.sum((w * it["x"] - it["y"]) ** 2)

    jitem = tp.jit(item)
    rng = np.random.default_rng(0)
    items = [{"x": rng.uniform(1, 2, 4), "y": rng.normal(size=4)} for _ in range(16)]
    w = np.ones(4)

    def total(fn, its):
        return tp.value_and_grad(
            lambda w: tp.parallel_sum(fn, its, w, executor=executor, chunk_size=4))(w)

    for _ in range(3):
        _quiet(total, jitem, items)
    items[5] = {"x": np.array([0.0, 1.0, 1.0, 1.0]), "y": np.zeros(4)}
    with np.errstate(divide="raise"):
        want = _outcome(total, item, items)
        assert want[0] == "raised"
        assert _outcome(_quiet, total, jitem, items) == want


# --- 6. the calling thread's decimal context ---------------------------------------------

def test_numbers_rounded_by_the_decimal_context_follow_it():
    import decimal

    def f(x):
        return x * float(decimal.Decimal(1) / decimal.Decimal(3))

    jf = tp.jit(f)
    x = np.ones(2)
    _same(jf(x), f(x))
    with decimal.localcontext() as ctx:
        ctx.prec = 5
        _same(jf(x), f(x))
        ctx.rounding = decimal.ROUND_UP
        _same(jf(x), f(x))

    def other():
        decimal.getcontext().prec = 3
        return jf(x), f(x)
    got, want = _in_thread(other)
    _same(got, want)
    _same(jf(x), f(x))


# --- 7. what NumPy's conversion hands out: flags as the value's, writes seen -----------

def _layouts_with_flags():
    base = np.arange(24.0).reshape(4, 6)
    ro = np.arange(6.0)
    ro.flags.writeable = False
    return {"owner": np.arange(6.0), "view": base[1], "strided": base[:, 1],
            "fortran": np.asfortranarray(base), "read_only": ro}


@pytest.mark.parametrize("req", ["", "C", "F", "A", "W", "O", "E", "CW", "FO", "WO", "AWOE"])
def test_require_decides_on_every_flag_as_the_plain_call(req):
    def f(x):
        return np.require(x, requirements=list(req) or None)

    jf = tp.jit(f)
    for name, x in _layouts_with_flags().items():
        for _ in range(2):
            want, got = f(x), _quiet(jf, x)
            assert (got is x) == (want is x), name
            assert got.flags.writeable == want.flags.writeable, name
            assert got.flags.owndata == want.flags.owndata or got is not x, name
            _same(got, want)


def test_the_writeable_flag_of_a_conversion_is_the_values():
    """Code may ask before it writes (``if not a.flags.writeable: a = a.copy()``)."""
    def f(x):
        a = np.asarray(x)
        if not a.flags.writeable:
            a = a.copy()
        a[0] = 9.0
        return x * 2.0, a.flags.writeable

    jf = tp.jit(f)
    for _ in range(2):
        x1, x2 = np.ones(3), np.ones(3)
        want, got = f(x1), _quiet(jf, x2)
        _same(got[0], want[0])
        assert got[1] == want[1]
        _same(x2, x1)  # the write reached the caller's array


@pytest.mark.parametrize("restore", [False, True])
def test_a_write_into_a_conversion_read_back_through_the_value(restore):
    def f(x):
        y = x * 1.0
        a = np.asarray(y)
        a[0] = 5.0
        z = y * 2.0  # the plain call reads 5 here
        if restore:
            a[0] = 1.0
        return z

    jf = tp.jit(f)
    for _ in range(3):
        _same(_quiet(jf, np.ones(3)), f(np.ones(3)))


def test_a_write_into_a_conversion_after_an_effect_is_refused():
    log = []

    def f(x):
        log.append(1)
        np.asarray(x)[0] = 9.0
        return x * 2.0

    x = np.ones(3)
    with pytest.raises(tp.JitError, match="writes into np.asarray"):
        _quiet(tp.jit(f), x)
    assert len(log) == 1


# --- 8. a nan's bits where two contributions to one gradient meet ------------------------

@pytest.mark.parametrize("form", ["neg_then_scaled", "scaled_then_neg", "both_negated",
                                  "twice"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_contributions_add_in_the_plain_sweeps_operand_order(form, dtype):
    """``x`` reaches the loss along two paths whose cotangents are both a
    nan (``arctan2``'s at the origin): the sum keeps the first operand's
    sign and payload, so jit's sweep adds in the order the plain one does."""
    f = {
        "neg_then_scaled": lambda x, s: np.sum(np.arctan2(-x, x * s)),
        "scaled_then_neg": lambda x, s: np.sum(np.arctan2(x * s, -x)),
        "both_negated": lambda x, s: np.sum(np.arctan2(-x, -(x * s))),
        "twice": lambda x, s: np.sum(np.arctan2(x, x * s)),
    }[form]
    g = tp.grad(f)
    jg = tp.jit(g)
    x = np.array([-0.5, 0.0, 0.5], dtype)
    with np.errstate(all="ignore"):
        _quiet(jg, x + 1, -1.0)
        for _ in range(2):
            want, got = g(x, -1.0), _quiet(jg, x, -1.0)
            _same(got, want)
            assert got.tobytes() == want.tobytes()  # the nan's sign and payload
