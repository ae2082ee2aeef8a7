"""tapestry.jit, third round: ``grad(jit(f))`` (jit/reverse.py) against calls
built to make its compiled pullback differ from the plain call's.

The pullback recomputes ``f``'s forward at the stored point, so it must see
what the forward saw; where that cannot be (``f``'s closure or an object it
reads changed in place between the forward and the pullback) it refuses
with an error naming the value, never a gradient of another function.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.jit import JitWarning

from test_jit_redteam import same


def _pullback_after(make, change, x, ct):
    """``vjp(f, x)``'s pullback applied to ``ct`` after ``change`` ran, for
    the plain ``f`` and for ``jit(f)`` (each from its own ``make()``): the
    jitted one equals the plain one or raises naming the change."""
    state, f = make()
    _, pb = tp.vjp(f, x)
    change(state)
    want = pb(ct)
    state, f = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        _, jpb = tp.vjp(tp.jit(f), x)
        change(state)
        try:
            got = jpb(ct)
        except RuntimeError as e:
            assert "between the forward and the pullback" in str(e)
            return
    same(got, want)


def test_pullback_after_the_closure_changed_in_place():
    x = np.linspace(-1.0, 1.0, 5)

    def make():
        w = np.arange(1.0, 6.0)
        return w, lambda v: np.sum(np.sin(v * w))

    def zero(w):
        w[:] = 0.5
    _pullback_after(make, zero, x, 1.0)


def test_pullback_after_an_instance_attribute_changed():
    x = np.linspace(-1.0, 1.0, 3)

    class Model:
        def __init__(self):
            self.W = np.arange(1.0, 10.0).reshape(3, 3)

        def __call__(self, v):
            return np.tanh(self.W @ v)

    def make():
        m = Model()
        return m, lambda v: m(v)

    def in_place(m):
        m.W *= 0.5

    def rebind(m):
        m.W = m.W * 0.5
    _pullback_after(make, in_place, x, np.ones(3))
    _pullback_after(make, rebind, x, np.ones(3))


def test_pullback_after_a_global_read_by_a_helper_changed():
    x = np.linspace(-1.0, 1.0, 4)
    table = {"s": np.array([1.0, 2.0, 3.0, 4.0])}

    def helper(v):
        return np.exp(v * table["s"])

    def make():
        table["s"] = np.array([1.0, 2.0, 3.0, 4.0])
        return table, lambda v: helper(v) ** 2

    def change(t):
        t["s"][:] = -1.0
    _pullback_after(make, change, x, np.ones(4))


def test_pullback_of_a_traced_cotangent_after_the_closure_changed():
    """The uncompiled pullback (a cotangent traced by an outer grad) is
    checked the same way."""
    x = np.linspace(-1.0, 1.0, 3)

    def run(jitted):
        w = np.arange(1.0, 4.0)
        f = (lambda v: np.sin(v * w) * v)
        _, pb = tp.vjp(tp.jit(f) if jitted else f, x)
        w[:] = 3.0
        return tp.grad(lambda c: np.sum(pb(c)[0] ** 2))(np.ones(3))
    want = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        try:
            got = run(True)
        except RuntimeError as e:
            assert "between the forward and the pullback" in str(e)
            return
    same(got, want)


def test_unchanged_closure_still_compiles_the_pullback():
    w = np.arange(1.0, 6.0)
    f = lambda v: np.sum(np.sin(v * w))  # noqa: E731
    jf = tp.jit(f)
    x = np.linspace(-1.0, 1.0, 5)
    for k in range(3):
        same(tp.grad(jf)(x + k), tp.grad(f)(x + k))
    w[2] = 7.0  # changed between calls, not within one: a new forward, a new point
    same(tp.grad(jf)(x), tp.grad(f)(x))
    assert jf._reverse is not None


_model = None


class _Model:
    def __init__(self):
        self.W = np.arange(1.0, 10.0).reshape(3, 3) / 10

    def __call__(self, v):
        return np.tanh(self.W @ v)


@pytest.mark.parametrize("change", ["in place", "rebound"])
def test_a_callable_global_object_is_guarded(change):
    """``m(v)`` with ``m`` a callable object reached as a global: its
    ``__call__`` and the attributes it reads are guarded (the forward
    program, not only the pullback, would replay a stale ``m.W``)."""
    global _model
    _model = _Model()
    f = lambda v: _model(v)  # noqa: E731
    jf = tp.jit(f)
    x = np.ones(3)
    same(jf(x), f(x))
    same(jf(x), f(x))
    if change == "in place":
        _model.W *= 0.5
    else:
        _model.W = _model.W * 0.5
    same(jf(x), f(x))
    same(tp.grad(lambda v: np.sum(jf(v)))(x), tp.grad(lambda v: np.sum(f(v)))(x))
