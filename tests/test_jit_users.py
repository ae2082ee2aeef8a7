"""``tapestry.jit`` as users write it: multi-call programs whose inputs,
environment and state change between calls.

Each scenario is a small user script ``scenario(wrap)`` that builds its own
world (parameters, optimizer, globals, objects), wraps the function under
test with ``wrap`` (the identity, or ``tapestry.jit``) and calls it several
times, changing things in between, returning what every call returned.
The script runs once with the plain function and once jitted, each in a
fresh world from the same seeds: every call of the jitted run must return
exactly what the plain run's call returned (the same types, dtypes, shapes
and bits; the same exceptions; the same warnings besides ``JitWarning``).
A jitted run may run uncompiled (with a ``JitWarning``) -- then it is the
plain call by construction -- but it may never be silently different.
"""
from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import math
import random
import warnings
from typing import NamedTuple

import numpy as np
import pytest

import tapestry as tp
from tapestry.jit import JitWarning

SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _snap(x):
    """A deep copy of a call's result taken when it returns (a later write by
    the script into the result must not change what is compared)."""
    if isinstance(x, np.ndarray):
        return ("array", x.dtype, x.shape, x.flags.c_contiguous, x.copy(order="K"))
    if isinstance(x, (list, tuple)):
        return (type(x), [_snap(v) for v in x])
    if isinstance(x, dict):
        return (dict, {k: _snap(v) for k, v in x.items()})
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x), {f.name: _snap(getattr(x, f.name)) for f in dataclasses.fields(x)})
    return (type(x), copy.deepcopy(x))


def _same(a, b, where):
    assert type(a) is type(b), (where, a, b)
    if isinstance(a, tuple) and len(a) == 5 and a[0] == "array":
        assert a[1:3] == b[1:3], (where, a[1:3], b[1:3])
        x, y = a[4], b[4]
        if x.dtype.kind in "fc":
            nan = np.isnan(x) & np.isnan(y)  # the sign of a nan is not a value
            x, y = np.where(nan, 0, x), np.where(nan, 0, y)
        assert x.tobytes() == y.tobytes(), (where, a[4], b[4])
        return
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], type):
        # (a class the scenario defines is a new class object in each run)
        assert a[0] is b[0] or a[0].__qualname__ == b[0].__qualname__, (where, a[0], b[0])
        va, vb = a[1], b[1]
        if isinstance(va, list):
            assert len(va) == len(vb), where
            for k, (p, q) in enumerate(zip(va, vb)):
                _same(p, q, f"{where}[{k}]")
        elif isinstance(va, dict):
            assert list(va) == list(vb), where
            for k in va:
                _same(va[k], vb[k], f"{where}[{k!r}]")
        elif isinstance(va, float):
            assert math.isnan(va) and math.isnan(vb) or \
                np.float64(va).tobytes() == np.float64(vb).tobytes(), (where, va, vb)
        elif isinstance(va, np.generic):
            assert va.dtype == vb.dtype, where
            if va.dtype.kind in "fc" and np.isnan(va) and np.isnan(vb):
                return
            assert va.tobytes() == vb.tobytes(), (where, va, vb)
        else:
            assert va == vb, (where, va, vb)
        return
    assert a == b, (where, a, b)


class Log:
    """What a scenario's calls returned, snapshot at return time, each with
    the warnings (other than ``JitWarning``) raised since the last one."""

    def __init__(self, caught):
        self.items = []
        self.caught = caught
        self.seen = 0

    def _warnings(self):
        new = self.caught[self.seen:]
        self.seen = len(self.caught)
        # distinct (category, message): a replay that fails a guard and the
        # trace after it may both warn, where the plain call warns once
        return ("warnings", sorted({(w.category.__name__, str(w.message)) for w in new
                                    if not issubclass(w.category, JitWarning)}))

    def __call__(self, x):
        self.items.append((_snap(x), self._warnings()))
        return x

    def call(self, f, *args, **kwargs):
        """Call ``f``; log its result or the type of its exception."""
        try:
            out = f(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 -- compared with the plain run's
            self.items.append((("raised", type(e).__name__), self._warnings()))
            return None
        self.items.append((_snap(out), self._warnings()))
        return out


def _run(fn, wrap):
    np.random.seed(1234)
    random.seed(1234)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = Log(caught)
        fn(wrap, log)
    jw = [str(w.message) for w in caught if issubclass(w.category, JitWarning)]
    return log.items, jw


def plain(f=None, **kw):
    if f is None:
        return lambda g: g
    return f


def jitted(f=None, **kw):
    kw.setdefault("fuse", False)
    if f is None:
        return lambda g: tp.jit(g, **kw)
    return tp.jit(f, **kw)


def _rng(seed=0):
    return np.random.default_rng(seed)


# --- training loops ----------------------------------------------------------------
def _mlp_loss(p, x, y):
    h = np.tanh(x @ p["W"] + p["b"])
    return np.mean((h @ p["v"] - y) ** 2)


def _mlp_params(r):
    return {"W": r.normal(size=(3, 5)), "b": np.zeros(5), "v": r.normal(size=5)}


@scenario
def adam_training_loop(wrap, log):
    r = _rng()
    p = _mlp_params(r)
    x, y = r.normal(size=(16, 3)), r.normal(size=16)
    step = wrap(tp.value_and_grad(_mlp_loss))
    opt = tp.optim.Adam(lr=0.05)
    for _ in range(6):
        v, g = log(step(p, x, y))
        opt.update(p, g)
    log(p)


@scenario
def sgd_momentum_minibatches(wrap, log):
    r = _rng(1)
    p = _mlp_params(r)
    X, Y = r.normal(size=(40, 3)), r.normal(size=40)
    step = wrap(tp.grad(_mlp_loss))
    opt = tp.optim.SGD(lr=0.1, momentum=0.9)
    for i in range(5):
        sl = slice(8 * i, 8 * i + 8)
        g = log(step(p, X[sl], Y[sl]))
        opt.update(p, g)
    log(p)


@scenario
def jitted_step_returns_new_params_with_lr_schedule(wrap, log):
    r = _rng(2)
    p = _mlp_params(r)
    x, y = r.normal(size=(10, 3)), r.normal(size=10)

    def step(p, x, y, lr):
        v, g = tp.value_and_grad(_mlp_loss)(p, x, y)
        return v, {k: p[k] - lr * g[k] for k in p}
    step = wrap(step)
    for t in range(6):
        v, p = log(step(p, x, y, 0.1 / (1 + t)))


@scenario
def step_with_integer_epoch_decay(wrap, log):
    r = _rng(3)
    w = r.normal(size=4)
    x = r.normal(size=(6, 4))

    def step(w, epoch):
        lr = 0.5 * 0.9 ** epoch
        g = tp.grad(lambda w: np.sum(np.sin(x @ w) ** 2))(w)
        return w - lr * g
    step = wrap(step)
    for e in range(5):
        w = log(step(w, e))


@scenario
def adam_state_read_inside_jitted_update(wrap, log):
    r = _rng(4)
    w = r.normal(size=5)

    class Opt:
        def __init__(self):
            self.m = np.zeros(5)
            self.t = 0
            self.lr = 0.1

        def step(self, w, g):
            self.t += 1
            return self._apply(w, g)

        @wrap
        def _apply(self, w, g):
            self.m = 0.9 * self.m + 0.1 * g   # an attribute write inside
            return w - self.lr * self.m / (1 - 0.9 ** self.t)

    opt = Opt()
    for i in range(5):
        g = np.cos(w) * (i + 1)
        w = log(opt.step(w, g))
        if i == 2:
            opt.lr = 0.01


@scenario
def pure_adam_update_function(wrap, log):
    r = _rng(5)
    w = r.normal(size=4)
    m, v = np.zeros(4), np.zeros(4)

    @wrap
    def adam(w, g, m, v, t, lr):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mh = m / (1 - 0.9 ** t)
        vh = v / (1 - 0.999 ** t)
        return w - lr * mh / (np.sqrt(vh) + 1e-8), m, v
    for t in range(1, 7):
        g = 2 * w - 1
        w, m, v = log(adam(w, g, m, v, t, 0.01 * t))


@scenario
def minimize_with_jitted_objective(wrap, log):
    pytest.importorskip("scipy")
    target = np.array([1.0, -2.0, 0.5])

    def obj(p):
        return np.sum((p["a"] - target) ** 2) + np.sum(np.cos(p["a"]))
    f = wrap(obj)
    for start in (0.0, 1.0, -1.0):
        res = tp.optimize.minimize(f, {"a": np.full(3, start)}, method="BFGS")
        log(res.x)
        log(float(res.fun))


@scenario
def minimize_with_jitted_value_and_grad_manual_gd(wrap, log):
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, 1.0])
    vg = wrap(tp.value_and_grad(lambda x: 0.5 * x @ A @ x - b @ x))
    x = np.zeros(2)
    for _ in range(8):
        v, g = log(vg(x))
        x = x - 0.2 * g


# --- methods, objects, closures, globals --------------------------------------------
@scenario
def method_with_changing_attributes(wrap, log):
    class Model:
        def __init__(self, W, scale):
            self.W, self.scale = W, scale

        @wrap
        def __call__(self, x):
            return np.tanh(x @ self.W) * self.scale

    r = _rng(6)
    m = Model(r.normal(size=(3, 2)), 1.0)
    x = r.normal(size=(4, 3))
    log(m(x))
    m.scale = 2.0
    log(m(x))
    m.W = m.W * 0.5
    log(m(x))
    m.W[0, 0] = 9.0
    log(m(x))
    m.W -= 0.1
    log(m(x))


@scenario
def method_on_two_instances(wrap, log):
    class Layer:
        def __init__(self, W, b):
            self.W, self.b = W, b

        @wrap
        def forward(self, x):
            return x @ self.W + self.b

    r = _rng(7)
    a = Layer(r.normal(size=(3, 3)), np.zeros(3))
    b = Layer(r.normal(size=(3, 3)), np.ones(3))
    x = r.normal(size=3)
    for _ in range(3):
        log(a.forward(x))
        log(b.forward(x))
        a.b += 1.0
        x = b.forward(x)


@scenario
def method_reading_a_property(wrap, log):
    class Scaler:
        def __init__(self):
            self.log_scale = 0.0

        @property
        def scale(self):
            return math.exp(self.log_scale)

        @wrap
        def apply(self, x):
            return x * self.scale

    s = Scaler()
    x = np.arange(3.0)
    for k in range(4):
        log(s.apply(x))
        s.log_scale = 0.5 * (k + 1)


@scenario
def class_level_config_constant_changed(wrap, log):
    class Config:
        eps = 1e-3
        order = 2

    @wrap
    def f(x):
        return np.sum(np.abs(x) ** Config.order) + Config.eps

    x = np.array([1.0, -2.0, 3.0])
    log(f(x))
    Config.eps = 0.5
    log(f(x))
    Config.order = 3
    log(f(x))


@scenario
def class_attribute_read_through_self(wrap, log):
    class Net:
        act = staticmethod(np.tanh)
        gain = 1.0

        @wrap
        def f(self, x):
            return self.act(x) * self.gain

    n = Net()
    x = np.linspace(-1, 1, 4)
    log(n.f(x))
    Net.gain = 3.0
    log(n.f(x))
    Net.act = staticmethod(np.sin)
    log(n.f(x))
    n.gain = -1.0  # an instance attribute hides the class's
    log(n.f(x))


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: float


class Batch(NamedTuple):
    x: np.ndarray
    y: np.ndarray


@scenario
def namedtuple_argument_changing_shapes(wrap, log):
    r = _rng(8)
    w = r.normal(size=3)

    @wrap
    def loss(w, batch):
        return np.mean((batch.x @ w - batch.y) ** 2)
    for n in (4, 4, 7, 4, 2):
        b = Batch(r.normal(size=(n, 3)), r.normal(size=n))
        log(loss(w, b))


@scenario
def dict_of_arrays_argument(wrap, log):
    r = _rng(9)

    @wrap
    def f(p):
        return {"out": p["a"] * 2 + p["b"], "n": np.linalg.norm(p["a"])}
    p = {"a": r.normal(size=3), "b": r.normal(size=3)}
    for _ in range(3):
        out = log(f(p))
        p["a"] = out["out"]
    p["c"] = np.ones(1)  # a new key: a new structure
    log(f(p))


@scenario
def dataclass_argument(wrap, log):
    @wrap
    def f(p, x):
        return p.w * x + p.b
    p = Params(np.ones(3), 0.5)
    x = np.arange(3.0)
    log(f(p, x))
    p.b = 2.5
    log(f(p, x))
    p.w = np.full(3, 2.0)
    log(f(p, x))


@scenario
def partial_and_lambdas_over_loop_variables(wrap, log):
    def scaled(x, k, shift):
        return np.sin(x * k) + shift
    x = np.linspace(0, 1, 5)
    fs = [wrap(functools.partial(scaled, k=k, shift=0.1 * k)) for k in range(3)]
    lams = [wrap(lambda x, k=k: x ** k) for k in range(3)]
    late = [wrap(lambda x: x * k) for k in range(3)]  # late binding: all see k == 2
    for f in fs + lams + late:
        log(f(x))
        log(f(x + 1))


@scenario
def closure_over_a_list_appended_between_calls(wrap, log):
    weights = [np.ones(3)]

    @wrap
    def f(x):
        return sum(w * x for w in weights)
    x = np.arange(3.0)
    for k in range(4):
        log(f(x))
        weights.append(np.full(3, float(k)))


@scenario
def module_level_dict_of_hyperparameters(wrap, log):
    HP.clear()
    HP.update(lr=0.1, l2=0.0, act="tanh")

    @wrap
    def f(w):
        a = np.tanh(w) if HP["act"] == "tanh" else np.maximum(w, 0)
        return w - HP["lr"] * (a + HP["l2"] * w)
    w = np.linspace(-1, 1, 4)
    for k in range(5):
        w = log(f(w))
        if k == 1:
            HP["lr"] = 0.01
        if k == 2:
            HP["act"] = "relu"
        if k == 3:
            HP["l2"] = 1.0


HP: dict = {}
GLOBAL_W = np.ones(3)


@scenario
def global_array_reassigned_and_mutated(wrap, log):
    global GLOBAL_W
    GLOBAL_W = np.ones(3)

    @wrap
    def f(x):
        return x @ GLOBAL_W
    x = np.arange(3.0)
    log(f(x))
    GLOBAL_W[1] = 5.0
    log(f(x))
    GLOBAL_W = GLOBAL_W * 2
    log(f(x))
    GLOBAL_W += 1
    log(f(x))


@scenario
def nested_helper_reading_a_global(wrap, log):
    global GLOBAL_W
    GLOBAL_W = np.ones(3)

    def helper(x):
        return x * GLOBAL_W

    @wrap
    def f(x):
        return np.sum(helper(x) ** 2)
    x = np.arange(3.0)
    log(f(x))
    GLOBAL_W[:] = 2.0
    log(f(x))
    GLOBAL_W = np.zeros(3)
    log(f(x))


# --- argument kinds ----------------------------------------------------------------
@scenario
def integer_argument_drives_a_python_loop(wrap, log):
    @wrap
    def f(x, n):
        for _ in range(n):
            x = np.cos(x)
        return x
    x = np.array([0.1, 0.5])
    for n in (1, 3, 3, 0, 5, 3):
        log(f(x, n))


@scenario
def strings_enums_none_and_bools(wrap, log):
    class Mode(enum.Enum):
        SUM = "sum"
        MEAN = "mean"

    @wrap
    def f(x, mode, reduce=None, square=False):
        if square:
            x = x * x
        if reduce is None:
            return x
        return np.sum(x) if mode is Mode.SUM else np.mean(x)
    x = np.arange(4.0)
    for mode in (Mode.SUM, Mode.MEAN, Mode.SUM):
        for reduce in (None, "yes"):
            for sq in (False, True):
                log(f(x, mode, reduce, sq))


@scenario
def static_string_argument(wrap, log):
    def f(x, kind):
        return {"sin": np.sin, "cos": np.cos}[kind](x)
    g = wrap(f, static_argnums=1) if wrap is jitted else f
    x = np.arange(3.0)
    for k in ("sin", "cos", "sin"):
        log(g(x, k))


@scenario
def tuples_of_varying_length(wrap, log):
    @wrap
    def f(xs):
        return functools.reduce(np.add, xs) / len(xs)
    r = _rng(10)
    for n in (2, 3, 2, 1):
        log(f(tuple(r.normal(size=3) for _ in range(n))))


@scenario
def shapes_and_dtypes_change(wrap, log):
    @wrap
    def f(x):
        return np.sum(x * 2.5, axis=0) / x.shape[0]
    for x in (np.ones((2, 3)), np.ones((4, 3)), np.ones((2, 3), np.float32),
              np.ones(5), np.arange(6).reshape(2, 3), np.ones((2, 3)) * 3):
        log(f(x))


@scenario
def zero_d_array_vs_python_float_vs_numpy_scalar(wrap, log):
    @wrap
    def f(x, s):
        return x * s + s
    x = np.ones(2, np.float32)
    for s in (2.0, np.array(2.0), np.float64(2.0), np.float32(2.0), 3, 2.5, np.array(3.5)):
        log(f(x, s))


@scenario
def int_arrays_vs_float_arrays(wrap, log):
    @wrap
    def f(x):
        return x // 2 + x % 3, x / 2
    for x in (np.arange(5), np.arange(5.0), np.arange(5, dtype=np.int32), np.arange(5) - 2):
        log(f(x))


@scenario
def views_noncontiguous_fortran_readonly(wrap, log):
    @wrap
    def f(a):
        return np.cumsum(a, axis=1) + a.T @ a[:, :1]
    base = np.arange(32.0).reshape(4, 8)
    ro = base[:, :4].copy()
    ro.flags.writeable = False
    for a in (base[:, :4], base[:, ::2][:, :4], np.asfortranarray(base[:, :4]), ro,
              base[:, :4].copy(), base[::-1, :4]):
        log(f(a))


@scenario
def caller_mutates_results_and_outputs_do_not_alias(wrap, log):
    @wrap
    def f(x):
        y = x * 1.0
        return y, y, x, np.zeros(2)
    x = np.arange(2.0)
    for _ in range(3):
        a, b, c, z = f(x)
        a += 10
        z[0] = 7
        log((a, b, c, z))
        log(a is b or c is x)


@scenario
def caller_mutates_input_after_the_call(wrap, log):
    @wrap
    def f(x):
        return x, x[::-1], x.reshape(2, 2)
    x = np.arange(4.0)
    for k in range(3):
        out = f(x)
        x[0] = 100.0 + k
        log(out)


@scenario
def constant_output_written_by_caller(wrap, log):
    TABLE = np.array([1.0, 2.0])

    @wrap
    def f(x):
        return TABLE, x + TABLE
    x = np.zeros(2)
    for _ in range(3):
        t, y = f(x)
        t[0] += 5
        log((t, y))


# --- data-dependent control flow ----------------------------------------------------
@scenario
def early_stop_branch(wrap, log):
    @wrap
    def f(x, tol):
        g = np.sin(x)
        if np.linalg.norm(g) < tol:
            return x, True
        return x - 0.5 * g, False
    x = np.array([1.0, 2.0])
    for _ in range(6):
        x, stop = log(f(x, 0.8))


@scenario
def newton_while_on_a_norm(wrap, log):
    @wrap
    def sqrt_newton(a):
        x = np.ones_like(a)
        while np.max(np.abs(x * x - a)) > 1e-12:
            x = 0.5 * (x + a / x)
        return x
    for a in (np.array([2.0, 3.0]), np.array([2.0, 3.0]), np.array([100.0, 1e-3]),
              np.array([2.0, 3.0]) + 1e-9):
        log(sqrt_newton(a))


@scenario
def bisection(wrap, log):
    @wrap
    def root(c):
        lo, hi = 0.0, 10.0
        while hi - lo > 1e-9:
            mid = 0.5 * (lo + hi)
            if mid ** 3 - c > 0:
                hi = mid
            else:
                lo = mid
        return lo
    for c in (8.0, 8.0, 27.0, 2.0):
        log(root(np.float64(c)))
        log(root(c))


@scenario
def argmax_chosen_index(wrap, log):
    @wrap
    def f(x):
        i = np.argmax(x)
        return x[i] * 2, x[int(i)] - 1, np.delete(x, i)
    r = _rng(11)
    for _ in range(4):
        log(f(r.normal(size=5)))


@scenario
def boolean_masks_and_nonzero(wrap, log):
    @wrap
    def f(x):
        pos = x[x > 0]
        idx = np.nonzero(x < 0)[0]
        return np.sum(pos), idx, np.mean(x[idx]) if idx.size else 0.0
    r = _rng(12)
    for _ in range(5):
        log(f(r.normal(size=6)))
    log(f(np.ones(6)))


@scenario
def try_except_singular_solve(wrap, log):
    @wrap
    def f(A, b):
        try:
            return np.linalg.solve(A, b)
        except np.linalg.LinAlgError:
            return np.linalg.lstsq(A, b, rcond=None)[0]
    b = np.array([1.0, 2.0])
    for A in (np.eye(2), np.array([[1.0, 2.0], [2.0, 4.0]]), 2 * np.eye(2),
              np.zeros((2, 2)), np.array([[1.0, 2.0], [3.0, 4.0]])):
        log(f(A, b))


@scenario
def divide_by_zero_warnings(wrap, log):
    @wrap
    def f(x):
        return 1.0 / x, np.log(x)
    for x in (np.array([1.0, 2.0]), np.array([0.0, 1.0]), np.array([1.0, 2.0]),
              np.array([-1.0, 0.0])):
        log(f(x))


@scenario
def nan_appears_on_a_later_call(wrap, log):
    @wrap
    def f(x):
        y = np.sqrt(x)
        if np.any(np.isnan(y)):
            return np.zeros_like(x), "nan"
        return y, "ok"
    for x in (np.array([1.0, 4.0]), np.array([-1.0, 4.0]), np.array([9.0, 4.0]),
              np.array([np.nan, 1.0])):
        log(f(x))


@scenario
def nan_check_with_isfinite_and_python_math(wrap, log):
    @wrap
    def f(x):
        s = float(np.sum(x))
        if not math.isfinite(s):
            return x * 0
        return x / math.sqrt(abs(s) + 1.0) + math.log1p(abs(s))
    for x in (np.ones(3), np.array([np.inf, 1, 1]), np.ones(3) * 2, np.ones(3)):
        log(f(x))


@scenario
def errors_raised_by_the_function(wrap, log):
    @wrap
    def f(x):
        if np.any(x < 0):
            raise ValueError("negative")
        return np.sqrt(x)
    for x in (np.ones(2), -np.ones(2), np.ones(2) * 4, np.array([1.0, -1.0])):
        log.call(f, x)


# --- randomness ----------------------------------------------------------------------
@scenario
def generator_argument(wrap, log):
    @wrap
    def f(x, rng):
        return x + rng.normal(size=x.shape)
    rng = np.random.default_rng(0)
    x = np.zeros(3)
    for _ in range(4):
        log(f(x, rng))


@scenario
def seed_argument(wrap, log):
    @wrap
    def f(x, seed):
        r = np.random.default_rng(seed)
        return x + r.normal(size=x.shape)
    x = np.zeros(3)
    for s in (0, 1, 0, 2):
        log(f(x, s))


@scenario
def global_numpy_random(wrap, log):
    @wrap
    def f(x):
        return x + np.random.normal(size=x.shape)
    x = np.zeros(3)
    for _ in range(4):
        log(f(x))


@scenario
def dropout_with_closed_over_generator(wrap, log):
    rng = np.random.default_rng(5)

    @wrap
    def f(x, p):
        mask = rng.random(x.shape) > p
        return x * mask / (1 - p)
    x = np.ones(6)
    for p in (0.5, 0.5, 0.2):
        log(f(x, p))


@scenario
def python_random_module(wrap, log):
    @wrap
    def f(x):
        return x * random.random()
    for _ in range(3):
        log(f(np.ones(2)))


# --- Python constructs ----------------------------------------------------------------
@scenario
def recursion(wrap, log):
    def power(x, n):
        if n == 0:
            return np.ones_like(x)
        half = power(x, n // 2)
        return half * half * (x if n % 2 else 1.0)
    f = wrap(power)
    x = np.array([1.5, -0.5])
    for n in (3, 3, 4, 7, 0):
        log(f(x, n))


@scenario
def generators_and_comprehensions(wrap, log):
    def chunks(x, k):
        for i in range(0, len(x), k):
            yield x[i:i + k]

    @wrap
    def f(x, k):
        parts = [np.sum(c ** 2) for c in chunks(x, k)]
        return np.stack(parts), max(parts)
    r = _rng(13)
    for n, k in ((6, 2), (6, 2), (6, 3), (7, 2)):
        log(f(r.normal(size=n), k))


@scenario
def np_vectorize_inside(wrap, log):
    clip = np.vectorize(lambda v: v if v > 0 else 0.1 * v)

    @wrap
    def f(x):
        return clip(x) * 2
    r = _rng(14)
    for _ in range(3):
        log(f(r.normal(size=4)))


@scenario
def functools_reduce_over_layers(wrap, log):
    r = _rng(15)
    Ws = [r.normal(size=(3, 3)) for _ in range(3)]

    @wrap
    def f(x):
        return functools.reduce(lambda h, W: np.tanh(h @ W), Ws, x)
    x = r.normal(size=3)
    for k in range(3):
        log(f(x))
        Ws[k] = Ws[k] * 0.5


@scenario
def math_functions_on_floats_from_arrays(wrap, log):
    @wrap
    def f(x):
        n = float(np.linalg.norm(x))
        return x * math.exp(-n) + math.floor(n), math.atan2(float(x[0]), float(x[1]))
    r = _rng(16)
    for _ in range(3):
        log(f(r.normal(size=2)))


@scenario
def string_formatting_of_values(wrap, log):
    lines = []

    @wrap
    def f(x):
        loss = np.sum(x ** 2)
        msg = f"loss={loss:.4f} max={np.max(x)}"
        return loss, msg
    for k in range(4):
        log(f(np.arange(3.0) * k))
        log(f(np.arange(3.0) * k))
    log(lines)


@scenario
def logging_into_a_list(wrap, log):
    history = []

    @wrap
    def f(x):
        v = np.sum(x ** 2)
        history.append(f"{v:.3f}")
        return v
    for k in range(3):
        log(f(np.ones(2) * k))
    log(list(history))


@scenario
def print_inside(wrap, log, capsys=None):
    import io
    import contextlib
    buf = io.StringIO()

    @wrap
    def f(x):
        print("norm", float(np.linalg.norm(x)))
        return x * 2
    with contextlib.redirect_stdout(buf):
        for k in range(3):
            log(f(np.ones(2) * k))
    log(len(buf.getvalue()) > 0)


@scenario
def counter_attribute_incremented_inside(wrap, log):
    class Model:
        calls = 0

        def __init__(self):
            self.w = np.ones(2)

        @wrap
        def f(self, x):
            self.calls += 1
            return x * self.w * self.calls
    m = Model()
    for _ in range(3):
        log(m.f(np.ones(2)))
    log(m.calls)


@scenario
def argument_is_a_list_of_arrays(wrap, log):
    @wrap
    def f(xs):
        return np.concatenate(xs), len(xs)
    r = _rng(17)
    for n in (1, 2, 2, 3):
        log(f([r.normal(size=2) for _ in range(n)]))


@scenario
def kwargs_and_defaults(wrap, log):
    @wrap
    def f(x, scale=1.0, *, offset=0.0, clip=None):
        y = x * scale + offset
        return y if clip is None else np.clip(y, -clip, clip)
    x = np.linspace(-2, 2, 5)
    log(f(x))
    log(f(x, 2.0))
    log(f(x, scale=3.0, offset=1))
    log(f(x, clip=1.0))
    log(f(x, clip=1.5))
    log(f(x, 2.0, clip=1.5, offset=-1.0))


@scenario
def gradient_of_jitted_function_in_a_loop(wrap, log):
    r = _rng(18)
    W = r.normal(size=(3, 3))
    f = wrap(lambda x: np.sum(np.tanh(x @ W) ** 2))
    g = tp.grad(f)
    x = r.normal(size=3)
    for _ in range(4):
        x = log(x - 0.1 * g(x))
    W[0] = 0.0
    log(g(x))


@scenario
def shared_cache_between_instances_with_different_attr_shapes(wrap, log):
    class Lin:
        def __init__(self, n):
            self.W = np.ones((n, 2)) / n

        @wrap
        def f(self, x):
            return x @ self.W
    a, b = Lin(3), Lin(4)
    log(a.f(np.ones(3)))
    log(b.f(np.ones(4)))
    log(a.f(np.ones(3) * 2))
    a.W = np.ones((3, 2))
    log(a.f(np.ones(3)))


@scenario
def memoized_intermediate_in_a_dict_cache(wrap, log):
    cache = {}

    @wrap
    def f(x, key):
        if key not in cache:
            cache[key] = np.sum(x)
        return x / cache[key]
    x = np.arange(1.0, 4.0)
    for key in ("a", "a", "b", "a"):
        log.call(f, x * (1 + len(cache)), key)


@scenario
def in_place_on_local_copy_then_return(wrap, log):
    @wrap
    def f(x):
        y = x.copy()
        y[y < 0] = 0.0
        y *= 2
        return y
    r = _rng(19)
    for _ in range(4):
        x = r.normal(size=5)
        log(f(x))
        log(x)


@scenario
def writes_into_argument(wrap, log):
    @wrap
    def f(x):
        x *= 2
        return np.sum(x)
    x = np.ones(3)
    for _ in range(3):
        log(f(x))
        log(x)


@scenario
def list_argument_mutated_inside(wrap, log):
    @wrap
    def f(acc, x):
        acc.append(x * 2)
        return np.sum(acc[-1])
    acc = []
    for k in range(3):
        log(f(acc, np.ones(2) * k))
    log(acc)


@scenario
def int_accumulator_argument(wrap, log):
    @wrap
    def f(x, n):
        total = 0
        for i in range(n):
            total += i * x[i % len(x)]
        return total, n * 2, n / 3
    x = np.arange(1.0, 4.0)
    for n in (2, 2, 5, 0, 1):
        log(f(x, n))


@scenario
def python_ints_large_and_overflow(wrap, log):
    @wrap
    def f(x, n):
        return x * n, n * n
    x = np.ones(2, dtype=np.int64)
    for n in (3, 2 ** 40, 2 ** 62, -5, 2 ** 70):
        log.call(f, x, n)


@scenario
def bool_argument_as_number(wrap, log):
    @wrap
    def f(x, flag):
        return x * flag + (1 - flag)
    for flag in (True, False, True, 1, 0):
        log(f(np.arange(3.0), flag))


@scenario
def complex_inputs_and_outputs(wrap, log):
    @wrap
    def f(z):
        return np.abs(z) ** 2, np.conj(z) * 1j
    for z in (np.array([1 + 2j, 3j]), np.array([1 + 2j, 3j]) * 2, np.array([1.0, 2.0]),
              np.array([1 + 0j, -1j], np.complex64)):
        log(f(z))


@scenario
def empty_arrays(wrap, log):
    @wrap
    def f(x):
        return np.sum(x), np.max(x, initial=-np.inf), x.mean() if x.size else 0.0
    for x in (np.ones(3), np.zeros(0), np.ones(3) * 2, np.zeros(0)):
        log(f(x))


@scenario
def function_object_with_call(wrap, log):
    class Poly:
        def __init__(self, coef):
            self.coef = coef

        def __call__(self, x):
            return np.polyval(self.coef, x)
    p = Poly(np.array([1.0, 0.0, -1.0]))
    f = wrap(p)
    x = np.linspace(-1, 1, 3)
    log(f(x))
    p.coef = np.array([2.0, 1.0])
    log(f(x))
    p.coef[0] = -3.0
    log(f(x))


@scenario
def checkpoint_of_state_through_deepcopy(wrap, log):
    class Model:
        def __init__(self):
            self.w = np.ones(3)

        @wrap
        def f(self, x):
            return x @ self.w
    m = Model()
    log(m.f(np.ones(3)))
    m2 = copy.deepcopy(m)
    m2.w[0] = 10.0
    log(m2.f(np.ones(3)))
    log(m.f(np.ones(3)))


# --- second batch ------------------------------------------------------------------
@scenario
def losses_appended_to_a_history_list(wrap, log):
    losses = []

    @wrap
    def f(w, x):
        loss = np.sum((x @ w) ** 2)
        losses.append(loss)
        return loss
    w = np.ones(2)
    for k in range(3):
        log(f(w, np.ones((3, 2)) * k))
    log(losses)
    log(np.mean(losses))


@scenario
def method_keeps_last_intermediate_on_self(wrap, log):
    class Layer:
        def __init__(self):
            self.W = np.eye(2)
            self.last = None

        @wrap
        def forward(self, x):
            h = x @ self.W
            self.last = {"h": h, "n": np.linalg.norm(h)}
            return np.tanh(h)
    m = Layer()
    for k in range(3):
        log(m.forward(np.ones(2) * k))
        log(m.last)
        log(m.last["h"] * 2)


@scenario
def dataset_object_with_getitem(wrap, log):
    class Dataset:
        def __init__(self, X):
            self.data = X

        def __getitem__(self, i):
            return self.data[i]

        def __len__(self):
            return len(self.data)

    @wrap
    def f(ds, w):
        return sum(ds[i] @ w for i in range(len(ds)))
    ds = Dataset(np.ones((3, 2)))
    w = np.arange(2.0)
    log(f(ds, w))
    ds.data = np.full((3, 2), 2.0)
    log(f(ds, w))
    ds.data[0, 0] = -7.0
    log(f(ds, w))
    ds.data = np.ones((4, 2))
    log(f(ds, w))


@scenario
def object_with_array_protocol(wrap, log):
    class Wrapper:
        def __init__(self, a):
            self.payload = a

        def __array__(self, dtype=None, copy=None):
            return np.asarray(self.payload, dtype=dtype)

    @wrap
    def f(w, x):
        return np.asarray(w) * x
    w = Wrapper(np.ones(3))
    x = np.arange(3.0)
    log(f(w, x))
    w.payload = np.full(3, 2.0)
    log(f(w, x))
    w.payload[1] = -1.0
    log(f(w, x))


@scenario
def object_with_operator_overloads(wrap, log):
    class Scale:
        def __init__(self, s):
            self.factor = s

        def __mul__(self, x):
            return x * self.factor
        __rmul__ = __mul__

    s = Scale(2.0)

    @wrap
    def f(x):
        return s * x + 1
    x = np.arange(3.0)
    log(f(x))
    s.factor = 5.0
    log(f(x))
    s.factor = np.array([1.0, 2.0, 3.0])
    log(f(x))


@scenario
def closure_over_object_with_len_and_iter(wrap, log):
    class Layers:
        def __init__(self, Ws):
            self.items = Ws

        def __iter__(self):
            return iter(self.items)

    net = Layers([np.eye(2), 2 * np.eye(2)])

    @wrap
    def f(x):
        for W in net:
            x = np.tanh(x @ W)
        return x
    x = np.ones(2)
    log(f(x))
    net.items = [np.eye(2)]
    log(f(x))
    net.items.append(3 * np.eye(2))
    log(f(x))


@scenario
def dict_argument_iterated_in_insertion_order(wrap, log):
    @wrap
    def f(p):
        return np.concatenate([v.ravel() for v in p.values()]), list(p)
    log(f({"w": np.ones(2), "b": np.zeros(1)}))
    log(f({"w": np.ones(2), "b": np.zeros(1)}))
    log(f({"b": np.zeros(1), "w": np.ones(2)}))
    log(f({"z": np.ones(1), "a": np.zeros(2)}))


@scenario
def kwargs_order_seen_by_star_kwargs(wrap, log):
    @wrap
    def f(**terms):
        return np.stack([t for t in terms.values()]), tuple(terms)
    log(f(b=np.ones(2), a=np.zeros(2)))
    log(f(a=np.zeros(2), b=np.ones(2)))
    log(f(b=np.ones(2) * 3, a=np.zeros(2)))


@scenario
def returns_dict_built_in_a_loop(wrap, log):
    names = ["w", "b", "a"]

    @wrap
    def f(x):
        return {n: x * i for i, n in enumerate(names)}
    for k in range(3):
        out = log(f(np.ones(2) * k))
        log(list(out))


@scenario
def ordered_and_default_dict_arguments(wrap, log):
    import collections

    @wrap
    def f(p):
        return sum(v * i for i, v in enumerate(p.values()))
    for order in (("b", "a"), ("a", "b"), ("b", "a")):
        log(f(collections.OrderedDict((k, np.ones(2) * ord(k)) for k in order)))
        d = collections.defaultdict(float)
        for k in order:
            d[k] = np.ones(2) * ord(k)
        log(f(d))


@scenario
def numpy_scalar_arguments_types(wrap, log):
    @wrap
    def f(x, s):
        return np.float32(s) * x, s + 1
    x = np.ones(2, np.float32)
    for s in (np.float32(1.5), np.float64(1.5), 1.5, np.int64(2), 2, True, np.float16(0.5)):
        log(f(x, s))


@scenario
def environment_variable_like_config_object(wrap, log):
    import types
    cfg = types.SimpleNamespace(temperature=1.0, mode="soft")

    @wrap
    def f(z):
        z = z / cfg.temperature
        if cfg.mode == "soft":
            e = np.exp(z - np.max(z))
            return e / np.sum(e)
        return (z == np.max(z)).astype(float)
    z = np.array([1.0, 2.0, 0.5])
    for t, m in ((1.0, "soft"), (0.5, "soft"), (0.5, "hard"), (2.0, "soft")):
        cfg.temperature, cfg.mode = t, m
        log(f(z))


@scenario
def helper_function_redefined_between_calls(wrap, log):
    global ACT

    def ACT(x):  # noqa: F811
        return np.tanh(x)

    @wrap
    def f(x):
        return ACT(x) * 2
    x = np.linspace(-1, 1, 3)
    log(f(x))

    def ACT(x):  # noqa: F811
        return np.maximum(x, 0)
    log(f(x))
    log(f(x * 2))


ACT = None


@scenario
def nested_config_object_attribute(wrap, log):
    class Opt:
        def __init__(self):
            self.lr = 0.1

    class Trainer:
        def __init__(self):
            self.opt = Opt()
            self.w = np.ones(2)

        @wrap
        def step(self, g):
            return self.w - self.opt.lr * g
    t = Trainer()
    g = np.array([1.0, -1.0])
    log(t.step(g))
    t.opt.lr = 0.5
    log(t.step(g))
    t.opt = Opt()
    log(t.step(g))


@scenario
def sorted_and_max_of_staged_values(wrap, log):
    @wrap
    def f(xs):
        norms = [np.linalg.norm(x) for x in xs]
        best = max(range(len(xs)), key=lambda i: norms[i])
        return xs[best], sorted(norms)
    r = _rng(20)
    for _ in range(4):
        log(f([r.normal(size=2) for _ in range(3)]))


@scenario
def lru_cached_helper(wrap, log):
    @functools.lru_cache(maxsize=None)
    def basis(n):
        return np.vander(np.linspace(0, 1, n), 3)

    @wrap
    def f(c, n):
        return basis(n) @ c
    c = np.array([1.0, 2.0, 3.0])
    for n in (4, 4, 5, 4):
        log(f(c, n))


@scenario
def jit_of_generator_function(wrap, log):
    @wrap
    def gen(x):
        for i in range(3):
            yield x * i
    for k in range(3):
        log([g for g in gen(np.ones(2) * k)])


@scenario
def staged_value_iterated_and_unpacked(wrap, log):
    @wrap
    def f(p):
        a, b = p
        return a * b, [v * 2 for v in p]
    for p in (np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([-1.0, 0.5])):
        log(f(p))


@scenario
def while_loop_on_python_counter_and_value(wrap, log):
    @wrap
    def f(x, maxit):
        it = 0
        while it < maxit and np.abs(x).max() > 1.0:
            x = x / 2
            it += 1
        return x, it
    for x, m in ((np.array([8.0]), 10), (np.array([8.0]), 2), (np.array([100.0]), 10),
                 (np.array([0.5]), 10)):
        log(f(x, m))


# --- third batch ---------------------------------------------------------------------
@scenario
def static_object_argument_whose_attributes_change(wrap, log):
    class Cfg:
        def __init__(self):
            self.scale = 1.0
            self.bias = np.zeros(2)

    def f(x, cfg):
        return x * cfg.scale + cfg.bias
    g = wrap(f, static_argnums=1) if wrap is jitted else f
    cfg = Cfg()
    x = np.ones(2)
    log(g(x, cfg))
    cfg.scale = 3.0
    log(g(x, cfg))
    cfg.bias[0] = 5.0
    log(g(x, cfg))


@scenario
def static_function_argument_with_changing_closure(wrap, log):
    state = {"k": 1.0}

    def act(v):
        return np.tanh(v * state["k"])

    def f(x, fn):
        return fn(x) + 1
    g = wrap(f, static_argnames="fn") if wrap is jitted else f
    x = np.linspace(-1, 1, 3)
    log(g(x, fn=act))
    state["k"] = 4.0
    log(g(x, fn=act))
    log(g(x, fn=np.sin))


@scenario
def returns_a_closed_over_array_the_caller_then_changes(wrap, log):
    W = np.ones(3)

    @wrap
    def f(x):
        return x @ W, W
    x = np.arange(3.0)
    for k in range(4):
        y, w = log(f(x))
        if k:
            w[k - 1] = 10.0  # the plain call handed out W itself


@scenario
def partial_over_arrays_mutated_in_place(wrap, log):
    def f(W, b, x):
        return x @ W + b
    W, b = np.eye(2), np.zeros(2)
    g = wrap(functools.partial(f, W, b))
    x = np.array([1.0, 2.0])
    log(g(x))
    W[0, 1] = 3.0
    log(g(x))
    b += 1
    log(g(x))


@scenario
def classmethod_reading_class_attributes(wrap, log):
    class Model:
        scale = 2.0

        @classmethod
        def run(cls, x):
            return cls._run(cls, x)

        @staticmethod
        @wrap
        def _run(cls, x):
            return x * cls.scale

    x = np.arange(3.0)
    log(Model.run(x))
    Model.scale = 5.0
    log(Model.run(x))

    class Sub(Model):
        scale = -1.0
    log(Sub.run(x))


@scenario
def same_array_passed_twice(wrap, log):
    @wrap
    def f(a, b):
        c = a * 2
        c += b
        return c, a - b
    x, y = np.arange(3.0), np.ones(3)
    log(f(x, y))
    log(f(x, x))
    log(f(y, x))
    log(f(x[::-1], x))


@scenario
def fortran_and_strided_reductions(wrap, log):
    @wrap
    def f(a):
        return np.sum(a), np.sum(a, axis=0), a.mean(axis=1), np.cumsum(a.ravel())
    r = _rng(21)
    base = r.normal(size=(64, 48))
    for a in (base, np.asfortranarray(base), base[::2][:32], base.T.copy().T,
              np.ascontiguousarray(base), base[:, ::-1]):
        log(f(a))


@scenario
def subclass_layers_with_super(wrap, log):
    class Base:
        def __init__(self):
            self.w = np.ones(2)

        @wrap
        def f(self, x):
            return self.g(x) * self.w

        def g(self, x):
            return x + 1

    class Child(Base):
        def g(self, x):
            return super().g(x) * 3

    b, c = Base(), Child()
    x = np.arange(2.0)
    for _ in range(2):
        log(b.f(x))
        log(c.f(x))
    Child.g = lambda self, x: x * 0
    log(c.f(x))


@scenario
def slots_object_with_special_methods(wrap, log):
    class Vec:
        __slots__ = ("data",)

        def __init__(self, d):
            self.data = d

        def __len__(self):
            return len(self.data)

        def __array__(self, dtype=None, copy=None):
            return np.array(self.data, dtype=dtype)

    @wrap
    def f(v, x):
        return x * len(v) + np.sum(np.asarray(v))
    v = Vec([1.0, 2.0])
    x = np.ones(2)
    log(f(v, x))
    v.data.append(3.0)
    log(f(v, x))
    v.data = [5.0]
    log(f(v, x))


@scenario
def context_manager_object(wrap, log):
    class Scope:
        def __init__(self):
            self.depth = 0
            self.factor = 1.0

        def __enter__(self):
            return self.factor

        def __exit__(self, *exc):
            return False

    scope = Scope()

    @wrap
    def f(x):
        with scope as k:
            return x * k
    x = np.arange(3.0)
    log(f(x))
    scope.factor = 2.0
    log(f(x))
    log(f(x + 1))


@scenario
def mutable_default_argument_cache(wrap, log):
    def f(x, _seen=[]):
        _seen.append(1)
        return x * len(_seen)
    g = wrap(f)
    for _ in range(3):
        log(g(np.ones(2)))


@scenario
def list_of_params_updated_in_place_by_sgd(wrap, log):
    r = _rng(22)
    params = [r.normal(size=(3, 3)), r.normal(size=3)]
    x = r.normal(size=(5, 3))

    def loss(params, x):
        W, b = params
        return np.sum(np.tanh(x @ W + b) ** 2)
    vg = wrap(tp.value_and_grad(loss))
    for _ in range(4):
        v, g = log(vg(params, x))
        for p, gp in zip(params, g):
            p -= 0.1 * gp


@scenario
def optimizer_with_schedule_and_clipping(wrap, log):
    r = _rng(23)
    p = _mlp_params(r)
    x, y = r.normal(size=(12, 3)), r.normal(size=12)
    opt = tp.optim.Adam(lr=lambda t: 0.1 / (1 + t), clip_norm=1.0)
    vg = wrap(tp.value_and_grad(_mlp_loss))
    for _ in range(5):
        v, g = log(vg(p, x, y))
        opt.update(p, g)
    log(p)


@scenario
def jit_inside_a_jitted_function(wrap, log):
    inner = wrap(lambda x, s: np.sin(x) * s)

    @wrap
    def outer(x, n):
        for i in range(n):
            x = inner(x, float(i + 1))
        return x
    for n in (1, 2, 2, 3):
        log(outer(np.linspace(0, 1, 3), n))


@scenario
def early_return_of_the_input(wrap, log):
    @wrap
    def clip_norm(g, c):
        n = np.linalg.norm(g)
        if n <= c:
            return g
        return g * (c / n)
    g = np.array([3.0, 4.0])
    for c in (10.0, 1.0, 10.0, 5.0):
        out = clip_norm(g, c)
        log(out)
        log(out is g)


@scenario
def nan_guarded_loss_with_float_conversion(wrap, log):
    @wrap
    def f(w, x):
        loss = float(np.mean((x @ w) ** 2))
        if math.isnan(loss) or loss > 1e6:
            return None
        return loss
    w = np.ones(2)
    for x in (np.ones((2, 2)), np.full((2, 2), np.nan), np.full((2, 2), 1e4), np.ones((2, 2))):
        log(f(w, x))


@scenario
def int_array_arguments_index_float_arrays(wrap, log):
    r = _rng(24)
    table = r.normal(size=(10, 3))

    @wrap
    def f(idx, w):
        rows = table[idx]
        return rows @ w, np.bincount(idx, minlength=10)
    w = np.ones(3)
    for idx in (np.array([1, 2]), np.array([3, 3]), np.array([9, 0]), np.array([0, 1])):
        log(f(idx, w))
    table[0] = 0.0
    log(f(np.array([0, 1]), w))


@scenario
def unique_and_sorting(wrap, log):
    @wrap
    def f(x):
        u, c = np.unique(np.round(x), return_counts=True)
        return u, c, np.sort(x)[::-1][:2]
    r = _rng(25)
    for _ in range(4):
        log(f(r.normal(size=6)))


@scenario
def where_with_division_by_zero_warning(wrap, log):
    @wrap
    def f(x):
        return np.where(x != 0, 1.0 / x, 0.0)
    for x in (np.ones(3), np.array([0.0, 2.0, 1.0]), np.ones(3) * 3):
        log(f(x))


@scenario
def errstate_inside(wrap, log):
    @wrap
    def f(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log(x)
        return np.nan_to_num(y, neginf=-1e3)
    for x in (np.ones(2), np.zeros(2), np.array([-1.0, 2.0])):
        log(f(x))


@scenario
def caller_changes_errstate_between_calls(wrap, log):
    @wrap
    def f(x):
        return 1.0 / x
    log.call(f, np.ones(2))
    with np.errstate(divide="raise"):
        log.call(f, np.zeros(2))
    log.call(f, np.zeros(2))
    with np.errstate(divide="ignore"):
        log.call(f, np.zeros(2))


@scenario
def print_options_changed_between_calls(wrap, log):
    @wrap
    def f(x):
        return np.array2string(x), x * 2
    x = np.array([1.123456789, 2.0])
    log(f(x))
    with np.printoptions(precision=2):
        log(f(x))
    log(f(x))


@scenario
def logging_module_inside(wrap, log):
    import logging
    logger = logging.getLogger("tapestry.test.users")
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    h = Keep()
    logger.addHandler(h)
    logger.setLevel(logging.INFO)
    try:
        @wrap
        def f(x):
            v = np.sum(x)
            logger.info("sum %.3f", v)
            return v * 2
        for k in range(3):
            log(f(np.ones(2) * k))
    finally:
        logger.removeHandler(h)
    log(len(records) >= 1)


@scenario
def attribute_deleted_between_calls(wrap, log):
    class M:
        scale = 1.0

        def __init__(self):
            self.scale = 2.0

        @wrap
        def f(self, x):
            return x * self.scale
    m = M()
    log(m.f(np.ones(2)))
    del m.scale
    log(m.f(np.ones(2)))
    m.scale = 4.0
    log(m.f(np.ones(2)))


@scenario
def object_array_argument(wrap, log):
    @wrap
    def f(x, n):
        return x[:n] * 2
    for n in (1, 2, 2, 3):
        log(f(np.arange(4.0), n))


# --- fourth batch --------------------------------------------------------------------
@scenario
def optimizer_update_inside_the_jitted_step(wrap, log):
    r = _rng(26)
    p = _mlp_params(r)
    x, y = r.normal(size=(8, 3)), r.normal(size=8)
    opt = tp.optim.Adam(lr=0.05)
    vg = tp.value_and_grad(_mlp_loss)

    @wrap
    def train_step(p, x, y):
        v, g = vg(p, x, y)
        opt.update(p, g)
        return v
    for _ in range(4):
        log(train_step(p, x, y))
        log(p)


@scenario
def sgd_momentum_inside_the_jitted_step(wrap, log):
    r = _rng(27)
    p = {"w": r.normal(size=3)}
    opt = tp.optim.SGD(lr=0.1, momentum=0.9)

    @wrap
    def train_step(p, t):
        g = tp.grad(lambda q: np.sum(np.sin(q["w"] * t) ** 2))(p)
        opt.update(p, g)
        return np.linalg.norm(p["w"])
    for t in (1.0, 2.0, 2.0, 0.5):
        log(train_step(p, t))
        log(p)


@scenario
def results_of_earlier_calls_stay_intact(wrap, log):
    @wrap
    def f(x):
        h = np.tanh(x)
        y = h * 2 + 1
        z = np.exp(-y)
        return y, z / np.sum(z), x + 0
    r = _rng(28)
    outs = [f(r.normal(size=5)) for _ in range(6)]
    log(outs)
    outs2 = [f(np.ones(5) * k) for k in range(3)]
    log(outs2)
    log(outs)


@scenario
def scalar_results_stay_intact(wrap, log):
    @wrap
    def f(x):
        a = np.sum(x)
        b = a * 2
        c = np.float64(3.0) * b
        return a, b, c, np.sqrt(np.abs(c))
    outs = [f(np.ones(3) * k) for k in range(5)]
    log(outs)
    log(f(np.ones(3)))
    log(outs)


@scenario
def batchnorm_train_and_eval_modes(wrap, log):
    class BN:
        def __init__(self):
            self.mean = np.zeros(3)
            self.var = np.ones(3)
            self.training = True

        @wrap
        def __call__(self, x):
            if self.training:
                m, v = x.mean(axis=0), x.var(axis=0)
                self.mean *= 0.9
                self.mean += 0.1 * m
                self.var = 0.9 * self.var + 0.1 * v
            else:
                m, v = self.mean, self.var
            return (x - m) / np.sqrt(v + 1e-5)
    bn = BN()
    r = _rng(29)
    for k in range(5):
        bn.training = k % 2 == 0
        log(bn(r.normal(size=(4, 3))))
        log((bn.mean, bn.var))


@scenario
def grad_of_jitted_method_with_changing_weights(wrap, log):
    class Model:
        def __init__(self, W):
            self.W = W

        @wrap
        def loss(self, x):
            return np.sum(np.tanh(x @ self.W) ** 2)
    r = _rng(30)
    m = Model(r.normal(size=(3, 2)))
    x = r.normal(size=3)
    g = tp.grad(m.loss)
    for k in range(4):
        log(g(x))
        m.W[k % 3] += 0.5
    m.W = np.ones((3, 2))
    log(g(x))


@scenario
def jit_of_grad_over_closure_data_mutated(wrap, log):
    r = _rng(31)
    X, Y = r.normal(size=(6, 2)), r.normal(size=6)
    g = wrap(tp.grad(lambda w: np.mean((X @ w - Y) ** 2)))
    w = np.zeros(2)
    for k in range(4):
        w = w - 0.1 * log(g(w))
        X[k] *= 2
    Y = Y + 1  # rebinds the closure cell
    log(g(w))


@scenario
def hessian_newton_steps(wrap, log):
    f = lambda x: np.sum(x ** 4) + x[0] * x[1]  # noqa: E731
    H = wrap(tp.hessian(f))
    G = wrap(tp.grad(f))
    x = np.array([1.0, -0.5])
    for _ in range(4):
        x = log(x - np.linalg.solve(H(x), G(x)))


@scenario
def stored_log_records_formatted_later(wrap, log):
    import logging
    logger = logging.getLogger("tapestry.test.users.later")
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)
    h = Keep()
    logger.addHandler(h)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        @wrap
        def f(x):
            v = np.sum(x)
            logger.info("sum %s", v)
            return v * 2
        for k in range(3):
            log(f(np.ones(2) * k))
    finally:
        logger.removeHandler(h)
    log(records[0].getMessage())


@scenario
def vmap_of_jitted_function(wrap, log):
    f = wrap(lambda x, s: np.sum(np.sin(x) * s))
    vf = tp.vmap(f, in_axes=(0, None))
    r = _rng(32)
    for s in (1.0, 2.0, 2.0):
        log(vf(r.normal(size=(4, 3)), s))


@scenario
def early_stopping_training_loop(wrap, log):
    r = _rng(33)
    p = _mlp_params(r)
    x, y = r.normal(size=(10, 3)), r.normal(size=10)
    vg = wrap(tp.value_and_grad(_mlp_loss))
    best, bad = np.inf, 0
    for epoch in range(10):
        v, g = vg(p, x, y)
        log(v)
        if v < best - 1e-3:
            best, bad = v, 0
        else:
            bad += 1
        if bad > 1:
            break
        for k in p:
            p[k] = p[k] - (0.5 if epoch < 3 else 2.0) * g[k]
    log(epoch)


@scenario
def accumulate_python_floats(wrap, log):
    @wrap
    def f(x, acc):
        return acc + float(np.sum(x)), acc * 0.5
    acc = 0.0
    for k in range(4):
        acc, half = log(f(np.ones(2) * k, acc))


# --- fifth batch ---------------------------------------------------------------------
@scenario
def scipy_minimize_with_jitted_value_and_grad(wrap, log):
    so = pytest.importorskip("scipy.optimize")
    r = _rng(34)
    A = r.normal(size=(6, 3))
    b = r.normal(size=6)
    vg = wrap(tp.value_and_grad(lambda x: np.sum((A @ x - b) ** 2) + 0.1 * np.sum(x ** 4)))
    calls = []

    def fun(x):
        v, g = vg(x)
        calls.append((float(v), g.copy()))
        return v, g
    for method in ("BFGS", "L-BFGS-B", "CG"):
        res = so.minimize(fun, np.zeros(3), jac=True, method=method)
        log(res.x)
    log(calls)


@scenario
def tp_minimize_with_args_and_jitted_objective(wrap, log):
    pytest.importorskip("scipy")
    r = _rng(35)

    def obj(p, X, y):
        return np.mean((X @ p["w"] + p["b"] - y) ** 2) + 0.01 * np.sum(p["w"] ** 2)
    f = wrap(obj)
    for n in (10, 10, 12):
        X, y = r.normal(size=(n, 2)), r.normal(size=n)
        res = tp.optimize.minimize(f, {"w": np.zeros(2), "b": 0.0}, args=(X, y),
                                   method="L-BFGS-B")
        log(res.x)


@scenario
def scipy_passes_the_same_buffer_changed_in_place(wrap, log):
    @wrap
    def f(x):
        return np.sum(np.cos(x)), np.sin(x), x
    x = np.zeros(3)
    outs = []
    for k in range(4):
        x[k % 3] = k + 0.5  # the caller reuses one buffer
        outs.append(f(x))
        log(outs[-1])
    log(outs)


@scenario
def grad_of_jitted_function_with_dict_params_unsorted(wrap, log):
    @wrap
    def loss(p, x):
        h = x
        for k, W in p.items():  # the caller's order
            h = np.tanh(h @ W)
        return np.sum(h ** 2)
    r = _rng(36)
    p = {"z": r.normal(size=(3, 3)), "a": r.normal(size=(3, 3))}  # (grad sorts keys)
    x = r.normal(size=3)
    for _ in range(3):
        v, g = log(tp.value_and_grad(loss)(p, x))
        p = {k: p[k] - 0.1 * g[k] for k in p}
    log(loss(p, x))


@scenario
def jit_of_value_and_grad_with_dict_params_unsorted(wrap, log):
    def loss(p, x):
        h = x
        for k, W in p.items():
            h = np.tanh(h @ W)
        return np.sum(h ** 2)
    step = wrap(tp.value_and_grad(loss))
    r = _rng(37)
    p = {"z": r.normal(size=(3, 3)), "a": r.normal(size=(3, 3))}  # (grad sorts keys)
    x = r.normal(size=3)
    for _ in range(3):
        v, g = log(step(p, x))
        p = {k: p[k] - 0.1 * g[k] for k in p}


@scenario
def attributes_set_lazily_on_first_call(wrap, log):
    class Lazy:
        @wrap
        def f(self, x):
            if not hasattr(self, "W"):
                self.W = np.ones((x.shape[-1], 2))
            return x @ self.W
    m = Lazy()
    x = np.arange(3.0)
    for _ in range(3):
        log(m.f(x))
    m.W = m.W * 2
    log(m.f(x))


@scenario
def nonlocal_counter_and_step_dependent_branch(wrap, log):
    step = 0

    @wrap
    def f(x):
        nonlocal step
        step += 1
        return x * (2.0 if step % 2 else 0.5)
    for _ in range(4):
        log(f(np.ones(2)))


@scenario
def global_step_counter_read_not_written(wrap, log):
    global STEP
    STEP = 0

    @wrap
    def f(x):
        warm = min(1.0, (STEP + 1) / 3)
        return x * warm
    for _ in range(5):
        log(f(np.ones(2)))
        STEP += 1


STEP = 0


@scenario
def generator_argument_drawing_inside_a_helper(wrap, log):
    def noise(rng, shape):
        return rng.standard_normal(shape)

    @wrap
    def f(x, rng):
        return x + 0.1 * noise(rng, x.shape)
    rng = np.random.default_rng(3)
    for _ in range(3):
        log(f(np.zeros(2), rng))
    log(rng.random())


@scenario
def legacy_random_state_argument(wrap, log):
    @wrap
    def f(x, rs):
        return x * rs.rand(*x.shape)
    rs = np.random.RandomState(0)
    for _ in range(3):
        log(f(np.ones(2), rs))


@scenario
def seeded_generator_made_from_global_seed(wrap, log):
    global SEED
    SEED = 1

    @wrap
    def f(x):
        return x + np.random.default_rng(SEED).normal(size=x.shape)
    for s in (1, 1, 2, 1):
        SEED = s
        log(f(np.zeros(3)))


SEED = 0


# --- sixth batch ---------------------------------------------------------------------
@scenario
def static_tuple_of_numbers_of_other_types(wrap, log):
    def f(x, weights):
        w = np.array(weights)
        return x[:len(weights)] * w, w // 2
    g = wrap(f, static_argnums=1) if wrap is jitted else f
    x = np.arange(4.0)
    for t in ((1, 2), (1.0, 2.0), (True, 2), (1, 2), (1.5, 2)):
        log(g(x, t))


@scenario
def static_signed_zero(wrap, log):
    def f(x, shift):
        return x / shift, np.copysign(1.0, shift) * x
    g = wrap(f, static_argnames="shift") if wrap is jitted else f
    x = np.ones(2)
    for s in (0.0, -0.0, 0.0, 1.0, -0.0):
        log(g(x, shift=s))


# --- seventh batch: whole small programs ------------------------------------------------
@scenario
def kmeans_with_empty_clusters(wrap, log):
    @wrap
    def assign_and_update(X, C):
        d = np.sum((X[:, None, :] - C[None]) ** 2, axis=-1)
        lab = np.argmin(d, axis=1)
        newC = C.copy()
        for k in range(C.shape[0]):
            members = X[lab == k]
            if len(members):
                newC[k] = members.mean(axis=0)
        return newC, lab, float(np.sum(np.min(d, axis=1)))
    r = _rng(40)
    X = np.concatenate([r.normal(size=(10, 2)) + 4, r.normal(size=(10, 2)) - 4])
    C = np.array([[0.0, 0.0], [100.0, 100.0], [4.0, 4.0]])
    for _ in range(5):
        C, lab, inertia = log(assign_and_update(X, C))


@scenario
def rnn_over_sequences_of_varying_length(wrap, log):
    r = _rng(41)
    Wx, Wh = r.normal(size=(2, 4)) * 0.5, r.normal(size=(4, 4)) * 0.5

    @wrap
    def run(seq, h0):
        h = h0
        outs = []
        for x in seq:
            h = np.tanh(x @ Wx + h @ Wh)
            outs.append(h)
        return np.stack(outs), h
    h = np.zeros(4)
    for n in (3, 3, 5, 1, 3):
        ys, h = log(run(r.normal(size=(n, 2)), h))


@scenario
def gp_cholesky_with_jitter_loop(wrap, log):
    @wrap
    def chol(K):
        jitter = 0.0
        while True:
            try:
                return np.linalg.cholesky(K + jitter * np.eye(len(K))), jitter
            except np.linalg.LinAlgError:
                jitter = 1e-6 if jitter == 0.0 else jitter * 10
    r = _rng(42)
    A = r.normal(size=(4, 2))
    for K in (A @ A.T, A @ A.T + np.eye(4), A @ A.T, np.eye(4), A @ A.T - 1e-3 * np.eye(4)):
        log(chol(K))


@scenario
def backtracking_line_search(wrap, log):
    def f(x):
        return np.sum((x - 1) ** 4) + np.sum(x ** 2)
    fg = tp.value_and_grad(f)

    @wrap
    def step(x):
        v, g = fg(x)
        t = 1.0
        while f(x - t * g) > v - 0.5 * t * float(g @ g):
            t *= 0.5
        return x - t * g, t
    x = np.array([3.0, -2.0])
    for _ in range(5):
        x, t = log(step(x))


@scenario
def adaptive_ode_integrator(wrap, log):
    @wrap
    def integrate(y0, k, T):
        t, y, h = 0.0, y0, 0.1
        n = 0
        while t < T:
            h = min(h, T - t)
            y1 = y + h * (-k * y)
            y2 = y + h / 2 * (-k * y)
            y2 = y2 + h / 2 * (-k * y2)
            err = float(np.max(np.abs(y1 - y2)))
            if err > 1e-3:
                h /= 2
                continue
            t, y, n = t + h, y2, n + 1
            if err < 1e-5:
                h *= 2
        return y, n
    for k, T in ((1.0, 1.0), (1.0, 1.0), (5.0, 1.0), (1.0, 2.0), (0.1, 1.0)):
        log(integrate(np.array([1.0, 2.0]), k, T))


@scenario
def softmax_cross_entropy_with_integer_labels(wrap, log):
    r = _rng(43)
    W = r.normal(size=(3, 4))

    def loss(W, X, y):
        z = X @ W
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
        return -np.mean(logp[np.arange(len(y)), y])
    vg = wrap(tp.value_and_grad(loss))
    for n in (5, 5, 7, 5):
        X, y = r.normal(size=(n, 3)), r.integers(0, 4, size=n)
        v, g = log(vg(W, X, y))
        W = W - 0.5 * g


@scenario
def pca_with_sign_normalization(wrap, log):
    @wrap
    def pca(X, k):
        Xc = X - X.mean(axis=0)
        U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
        signs = np.sign(Vt[np.arange(k), np.argmax(np.abs(Vt[:k]), axis=1)])
        comps = Vt[:k] * signs[:, None]
        return comps, S[:k] ** 2 / (len(X) - 1)
    r = _rng(44)
    for n, k in ((10, 2), (10, 2), (12, 1), (10, 3)):
        log(pca(r.normal(size=(n, 3)), k))


@scenario
def logistic_regression_trainer_class(wrap, log):
    class LogReg:
        def __init__(self, d, lr=0.5, l2=0.0):
            self.w = np.zeros(d)
            self.b = 0.0
            self.lr, self.l2 = lr, l2

        def loss(self, w, b, X, y):
            z = X @ w + b
            return np.mean(np.logaddexp(0, z) - y * z) + self.l2 * np.sum(w ** 2)

        @wrap
        def step(self, X, y):
            v, (gw, gb) = tp.value_and_grad(self.loss, argnums=(0, 1))(self.w, self.b, X, y)
            return v, self.w - self.lr * gw, self.b - self.lr * gb

        def fit(self, X, y, epochs):
            for _ in range(epochs):
                v, self.w, self.b = self.step(X, y)
            return v
    r = _rng(45)
    X = r.normal(size=(20, 3))
    y = (X[:, 0] > 0).astype(float)
    m = LogReg(3)
    log(m.fit(X, y, 3))
    m.l2 = 0.1
    log(m.fit(X, y, 2))
    m.lr = 0.05
    log(m.fit(X[:10], y[:10], 2))
    log((m.w, m.b))


@scenario
def simulated_annealing_with_generator(wrap, log):
    @wrap
    def anneal_step(x, T, rng):
        cand = x + rng.normal(scale=0.5, size=x.shape)
        dE = float(np.sum(cand ** 2) - np.sum(x ** 2))
        if dE < 0 or rng.random() < math.exp(-dE / T):
            return cand
        return x
    rng = np.random.default_rng(7)
    x = np.array([2.0, -2.0])
    for T in (1.0, 0.8, 0.6, 0.4, 0.2):
        x = log(anneal_step(x, T, rng))


@scenario
def histogram_and_quantiles(wrap, log):
    @wrap
    def stats(x, bins):
        h, edges = np.histogram(x, bins=bins)
        q = np.quantile(x, [0.1, 0.5, 0.9])
        return h, edges, q, np.percentile(x, 75)
    r = _rng(46)
    for bins in (5, 5, 3, 5):
        log(stats(r.normal(size=50), bins))


@scenario
def top_k_with_argsort_and_partition(wrap, log):
    @wrap
    def topk(x, k):
        idx = np.argsort(-x)[:k]
        part = np.partition(x, -k)[-k:]
        return idx, x[idx], np.sort(part)
    r = _rng(47)
    for k in (2, 2, 3, 1):
        log(topk(r.normal(size=8), k))


@scenario
def attention_with_mask_argument(wrap, log):
    @wrap
    def attn(q, k, v, mask=None):
        s = q @ k.T / math.sqrt(q.shape[-1])
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        return p @ v
    r = _rng(48)
    q, k, v = r.normal(size=(3, 4)), r.normal(size=(5, 4)), r.normal(size=(5, 2))
    log(attn(q, k, v))
    log(attn(q, k, v, np.tril(np.ones((3, 5), bool))))
    log(attn(q, k, v, np.ones((3, 5), bool)))
    log(attn(q * 2, k, v))


# --- eighth batch --------------------------------------------------------------------
@scenario
def masked_array_argument_and_closure(wrap, log):
    m = np.ma.array([1.0, 2.0, 3.0], mask=[False, False, False])
    w = np.ma.array([1.0, 1.0, 1.0], mask=[False, False, False])

    @wrap
    def f(m, x):
        return np.ma.sum(m * w) * x
    x = np.ones(2)
    log(f(m, x))
    m.mask[0] = True
    log(f(m, x))
    m[1] = np.ma.masked
    log(f(m, x))
    w.mask[2] = True
    log(f(m, x))


@scenario
def self_recursive_jitted_function(wrap, log):
    @wrap
    def fact(x, n):
        if n == 0:
            return x
        return fact(x * n, n - 1)
    for n in (3, 3, 4, 0):
        log(fact(np.ones(2), n))


# --- ninth batch ---------------------------------------------------------------------
@scenario
def method_calling_the_overridden_method_through_super(wrap, log):
    class Base:
        def __init__(self):
            self.scale = 1.0

        def forward(self, x):
            return x * self.scale

    class Child(Base):
        @wrap
        def forward(self, x):
            return super().forward(x) + 1

    c = Child()
    x = np.arange(3.0)
    log(c.forward(x))
    c.scale = 4.0
    log(c.forward(x))
    Base.forward = lambda self, x: x - self.scale
    log(c.forward(x))


@scenario
def dataclass_config_read_with_asdict(wrap, log):
    @dataclasses.dataclass
    class Cfg:
        a: float = 1.0
        b: float = 2.0

    cfg = Cfg()

    @wrap
    def f(x):
        return sum(v * x for v in dataclasses.asdict(cfg).values()), \
            np.array(dataclasses.astuple(cfg))
    x = np.ones(2)
    log(f(x))
    cfg.b = 5.0
    log(f(x))
    cfg.a = -1.0
    log(f(x))


@scenario
def equal_results_are_distinct_arrays(wrap, log):
    @wrap
    def f(x, s):
        return (x * 2, x * 2, x + 0, x + 0, np.copy(x), x.copy(), np.zeros(3), np.zeros(3),
                np.full(3, s), np.full(3, s), x * s, x * s, np.sum(x), np.sum(x),
                np.exp(x), np.exp(x))
    for k in range(4):
        outs = f(np.arange(3.0) + k, 2.0)
        for i, o in enumerate(outs):
            if isinstance(o, np.ndarray):
                o += 100 * (i + 1)  # a write into one result only
        log(outs)


@scenario
def results_derived_from_the_same_intermediate(wrap, log):
    @wrap
    def f(x):
        h = np.tanh(x)
        return h, h.T, h.reshape(-1), h[::-1], h[:2]
    for k in range(4):
        outs = f(np.arange(4.0).reshape(2, 2) + k)
        outs[0][0, 0] = -1.0  # visible through the views, as in the plain call
        log(outs)


# --- tenth batch ---------------------------------------------------------------------
@scenario
def nested_pytrees_with_none_empty_and_unsorted_dicts(wrap, log):
    import collections

    @wrap
    def f(tree, extra=None):
        layers = tree["layers"]
        out = collections.OrderedDict()
        for i, layer in enumerate(layers):
            out[f"l{i}"] = {k: v * (i + 1) for k, v in layer.items()}
        if extra is not None:
            out["extra"] = extra
        return out, list(tree), tree.get("meta", ())
    L = [{"w": np.ones(2), "b": np.zeros(1)}, {"z": np.ones(1), "a": np.ones(2)}]
    log(f({"layers": L}))
    log(f({"layers": L, "meta": ()}))
    log(f({"meta": (), "layers": L}))
    log(f({"layers": L[::-1]}, extra=np.ones(1)))
    log(f({"layers": []}, extra=None))
    log(f({"layers": L}))


@scenario
def static_and_dynamic_keywords_in_any_order(wrap, log):
    def f(x, *, scale, mode, **rest):
        y = x * scale
        for k, v in rest.items():
            y = y + v * len(k)
        return (y if mode == "id" else -y), tuple(rest)
    g = wrap(f, static_argnames="mode") if wrap is jitted else f
    x = np.ones(2)
    log(g(x, scale=2.0, mode="id", b=1.0, a=2.0))
    log(g(x, mode="id", scale=2.0, a=2.0, b=1.0))
    log(g(x, a=2.0, mode="neg", scale=3.0, b=1.0))
    log(g(x, scale=2.0, mode="id", b=1.0, a=2.0))


@scenario
def dataclass_holding_an_unsorted_dict(wrap, log):
    @dataclasses.dataclass
    class Model:
        layers: dict
        scale: np.ndarray

    @wrap
    def f(m, x):
        for W in m.layers.values():
            x = np.tanh(x @ W)
        return x * m.scale, {k: v.sum() for k, v in m.layers.items()}
    r = _rng(49)
    m = Model({"z": r.normal(size=(2, 2)), "a": r.normal(size=(2, 2))}, np.ones(2))
    x = np.ones(2)
    log(f(m, x))
    log(f(m, x * 2))
    m2 = Model(dict(reversed(list(m.layers.items()))), np.ones(2))
    log(f(m2, x))


@scenario
def jitted_function_on_a_dict_built_inside_grad(wrap, log):
    @wrap
    def net(p, x):
        for W in p.values():  # the caller's order
            x = np.tanh(x @ W)
        return {"y": x, "n": np.sum(x ** 2)}

    def loss(w1, w2, x):
        out = net({"second": w2, "first": w1}, x)
        return out["n"] + np.sum(list(out.values())[0])
    r = _rng(50)
    w1, w2 = r.normal(size=(2, 2)), r.normal(size=(2, 2))
    x = r.normal(size=2)
    vg = tp.value_and_grad(loss, argnums=(0, 1))
    for _ in range(3):
        v, (g1, g2) = log(vg(w1, w2, x))
        w1, w2 = w1 - 0.1 * g1, w2 - 0.1 * g2


@scenario
def attrgetter_and_methodcaller_in_the_closure(wrap, log):
    import operator

    class Layer:
        def __init__(self, g):
            self.gain = g

        def weight(self, k):
            return self.gain * k

    layers = [Layer(1.0), Layer(2.0)]
    gain = operator.attrgetter("gain")
    weight = operator.methodcaller("weight", 3.0)

    @wrap
    def f(x):
        return x * sum(map(gain, layers)) + sum(map(weight, layers))
    x = np.ones(2)
    log(f(x))
    layers[0].gain = 5.0
    log(f(x))
    layers[1].gain = -1.0
    log(f(x))


# --- eleventh batch ------------------------------------------------------------------
@scenario
def step_updates_params_in_place_and_appends_history(wrap, log):
    @wrap
    def step(params, grads, history, cfg):
        for p, g in zip(params, grads):
            p -= cfg["lr"] * g
        history.append(float(sum(np.sum(p ** 2) for p in params)))
        cfg["steps"] = cfg.get("steps", 0) + 1
        return len(history)
    params = [np.ones(2), np.ones(3)]
    grads = [np.ones(2), np.full(3, 0.5)]
    history, cfg = [], {"lr": 0.5}
    for _ in range(3):
        log(step(params, grads, history, cfg))
        log((params, history, dict(cfg)))


@scenario
def writes_into_argument_then_raises(wrap, log):
    @wrap
    def f(x, log_list):
        x -= 1
        log_list.append(x[0])
        if x[0] < 5:
            raise ValueError("small")
        return x * 2
    x = np.full(2, 5.5)
    seen = []
    for _ in range(3):
        log.call(f, x, seen)
        log((x, seen))


@scenario
def jitted_method_of_a_dataclass(wrap, log):
    a = Affine(np.eye(2) * 2, 0.5)
    call = (lambda x: a.jitted(x)) if wrap is jitted else (lambda x: a.plain(x))
    x = np.array([1.0, -1.0])
    log(call(x))
    a.b = 1.5
    log(call(x))
    a.W = np.eye(2) * 3
    log(call(x))
    a.norm = 1.0
    log(call(x))
    a.W[0, 1] = 1.0
    log(call(x))
    a.n_calls = 3
    log(call(x))


@scenario
def frozen_dataclass_config_and_namedtuple_state(wrap, log):
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        lr: float
        steps: int
        name: str = "sgd"

    class State(NamedTuple):
        w: np.ndarray
        t: int

    @wrap
    def run(state, cfg):
        w = state.w
        for _ in range(cfg.steps):
            w = w - cfg.lr * np.sin(w)
        return State(w, state.t + cfg.steps), cfg.name
    s = State(np.array([1.0, 2.0]), 0)
    for cfg in (Cfg(0.1, 2), Cfg(0.1, 2), Cfg(0.2, 2), Cfg(0.2, 3, "x"), Cfg(0.1, 2)):
        s, name = log(run(s, cfg))


# --- twelfth batch -------------------------------------------------------------------
@scenario
def generator_spawning_children(wrap, log):
    @wrap
    def f(x, rng):
        child = rng.spawn(1)[0]
        return x + child.normal(size=x.shape)
    rng = np.random.default_rng(0)
    for _ in range(3):
        log(f(np.zeros(2), rng))


@scenario
def seed_sequence_spawned_in_the_closure(wrap, log):
    ss = np.random.SeedSequence(11)

    @wrap
    def f(x):
        return x + np.random.default_rng(ss.spawn(1)[0]).normal(size=x.shape)
    for _ in range(3):
        log(f(np.zeros(2)))


@scenario
def small_and_unsigned_dtypes(wrap, log):
    @wrap
    def f(x, k):
        return x * k - x // 3, (x - 200) if x.dtype.kind == "u" else -x, np.sum(x), x.mean()
    for x in (np.arange(5, dtype=np.int8) * 30, np.arange(5, dtype=np.uint8) * 60,
              np.linspace(0, 4, 5).astype(np.float16), np.arange(5, dtype=np.uint16) * 9000,
              np.array([True, False, True])):
        log.call(f, x, 3)
        log.call(f, x, np.int8(3))


@scenario
def boolean_flag_arrays_and_masks_as_arguments(wrap, log):
    @wrap
    def f(x, keep):
        y = np.where(keep, x, 0.0)
        return y.sum() / max(int(keep.sum()), 1), x[keep]
    r = _rng(51)
    for _ in range(4):
        log(f(r.normal(size=6), r.random(6) > 0.5))


@scenario
def jitted_ufunc_partial_and_lambda_as_class_attributes(wrap, log):
    class Net:
        act = wrap(np.tanh)
        double = wrap(functools.partial(np.multiply, 2.0))
        method = wrap(lambda self, x: x * self.k)

        def __init__(self, k):
            self.k = k
    x = np.linspace(-1, 1, 3)
    n = Net(3.0)
    for k in range(3):
        log((n.act(x), n.double(x), n.method(x), Net.act(x)))
        n.k = float(k)


@scenario
def caller_turns_warnings_into_errors_the_function_catches(wrap, log):
    @wrap
    def f(x):
        try:
            return np.log(x), "log"
        except RuntimeWarning:
            return np.zeros_like(x), "fallback"
    good, bad = np.ones(2), np.array([0.0, 1.0])
    log(f(good))
    log(f(bad))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log(f(bad))
        log(f(good))
    log(f(bad))
    with np.errstate(divide="ignore"):
        log(f(bad))


@scenario
def lazily_created_attribute_compiles_after_the_first_call(wrap, log):
    class Model:
        @wrap
        def f(self, x):
            if not hasattr(self, "_W"):
                self._W = np.arange(6.0).reshape(x.shape[-1], 2)
            return np.tanh(x @ self._W)
    m = Model()
    r = _rng(52)
    for _ in range(3):
        log(m.f(r.normal(size=3)))
    m._W[0, 0] = 9.0
    log(m.f(np.ones(3)))
    del m._W
    log(m.f(np.ones(3)))
    log(m.f(np.ones(3) * 2))


@scenario
def returns_views_of_closed_over_arrays(wrap, log):
    base = np.arange(6.0)
    w = base[:3]

    @wrap
    def f(x):
        return x * w, w, base[3:], base
    x = np.ones(3)
    for k in range(4):
        y, a, b, c = log(f(x))
        log((a is w, c is base, b is base[3:]))
        if k == 1:
            b[0] = -1.0   # the plain call's result is a view of base
        if k == 2:
            a.shape = (3, 1)  # reshapes that result only


def check_scenario(fn, name):
    """Every call of scenario ``fn`` under jit gives the plain call's values
    and log (at least three calls)."""
    want, _ = _run(fn, plain)
    got, _ = _run(fn, jitted)
    assert len(want) == len(got) and len(want) >= 3, (len(want), len(got))
    for k, ((a, wa), (b, wb)) in enumerate(zip(want, got)):
        _same(b, a, f"{name}: call {k}")
        assert wb == wa, (f"{name}: call {k}", wb, wa)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_user_scenario(name):
    check_scenario(SCENARIOS[name], name)


#: Scenarios whose function cannot be replayed: the jitted run says so, once
#: per reason, and runs uncompiled (the results are compared above).
WARN_ONCE = ("global_numpy_random", "python_random_module", "generator_argument",
             "dropout_with_closed_over_generator", "losses_appended_to_a_history_list",
             "method_keeps_last_intermediate_on_self", "writes_into_argument",
             "list_argument_mutated_inside", "optimizer_update_inside_the_jitted_step",
             "counter_attribute_incremented_inside", "memoized_intermediate_in_a_dict_cache")


@pytest.mark.parametrize("name", WARN_ONCE)
def test_unreplayable_scenarios_warn_once_per_reason(name):
    _, jw = _run(SCENARIOS[name], jitted)
    assert jw, f"{name} ran compiled"
    assert len(jw) == len(set(jw)), jw


def test_choosing_fused_loops_adds_no_warnings():
    """Once hot, a program is timed against its fused version on the call's
    inputs: those extra runs must not warn (divide by zero) on top of the
    call's own warnings."""
    pytest.importorskip("numba")

    def f(x):
        return np.sin(1.0 / x) * 2.0 + 1.0
    jf = tp.jit(f, fuse="auto", fuse_after=3)
    x = np.array([0.0, 1.0, 2.0])
    counts = []
    for g in (f, jf):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(6):
                g(x)
        counts.append(sum(not issubclass(w.category, JitWarning) for w in caught))
    assert counts[1] == counts[0] > 0, counts


@dataclasses.dataclass
class Affine:
    W: np.ndarray
    b: float
    n_calls: int = 0

    def __post_init__(self):
        self.norm = float(np.linalg.norm(self.W))

    @tp.jit
    def jitted(self, x):
        return (x @ self.W + self.b) / self.norm

    def plain(self, x):
        return (x @ self.W + self.b) / self.norm


@pytest.mark.parametrize("make", [
    lambda: functools.partial(lambda W, x: x @ W * float(x[0]), np.eye(2)),
    lambda: type("Poly", (), {"c": 2.0, "__call__": lambda self, x: x * self.c * float(x[0])})(),
], ids=["partial", "callable_object"])
def test_unnamed_callables_run_uncompiled_past_max_traces(make):
    """A partial or a callable object (no __qualname__) that is traced past
    max_traces runs uncompiled with the warning naming it (it raised an
    AttributeError instead)."""
    f = make()
    jf = tp.jit(f, max_traces=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(3):
            x = np.ones(2) * k
            got = jf(x)
            assert np.array_equal(got, f(x))
    assert any(issubclass(w.category, JitWarning) for w in caught)
