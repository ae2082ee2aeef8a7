"""tests/programs/edge_progs9.py: augmented assignment into a view of a
traced array.  NumPy writes through the view into the base array; tapestry
writes the view's new values into the base (a new value that the base's
object takes), so each program agrees with NumPy and differentiates
exactly (they were refused by name before item assignment was supported).
An augmented assignment into a fresh array (a temporary's reshape
included) still rebinds and is differentiated correctly."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

from programs.edge_progs9 import PROGRAMS as REGISTRY
from programs.runner import CORRECT, classify

NAMES = sorted(REGISTRY)


def test_module_has_programs():
    assert len(NAMES) == 5


@pytest.mark.parametrize("name", NAMES)
def test_program(name):
    o = classify(REGISTRY[name])
    assert o.status == CORRECT, (o.status, o.reason, o.where)


def _write_through_view(x):
    y = x * 1.0
    v = y[::2]
    v += 1.0
    return np.sum(y ** 2)


def _fresh_arrays_only(x):
    acc = x * 0.0
    for k in range(1, 4):
        acc += x ** k
    h = (x * 2.0).reshape(2, 3)
    h += 1.0
    r = x[1:4] * 1.0
    r *= 2.0
    return np.sum(acc ** 2) + np.sum(np.sin(h)) + np.sum(r)


_X = np.linspace(-1.0, 1.5, 6)
_TRANSFORMS = {
    "grad": lambda f: tp.grad(f)(_X),
    "vmap": lambda f: tp.vmap(f)(np.stack([_X, 2 * _X])),
    "vmap_grad": lambda f: tp.vmap(tp.grad(f))(np.stack([_X, 2 * _X])),
    "jit_grad": lambda f: tp.jit(tp.grad(f))(_X),
    "grad_jit": lambda f: tp.grad(tp.jit(f))(_X),
    "jvp": lambda f: tp.jvp(f, (_X,), (np.ones(6),))[1],
    "hessian": lambda f: tp.hessian(f)(_X),
}


def _reference(how, f):
    """What ``_TRANSFORMS[how](f)`` must give: f and its gradient at copies
    of the inputs, so that NumPy's writes do not reach the reference."""
    g = tp.grad(f)
    return {
        "grad": lambda: g(_X),
        "vmap": lambda: np.array([f(_X.copy()), f(2 * _X)]),
        "vmap_grad": lambda: np.stack([g(_X), g(2 * _X)]),
        "jit_grad": lambda: g(_X),
        "grad_jit": lambda: g(_X),
        "jvp": lambda: np.sum(g(_X)),
        "hessian": lambda: tp.jacfwd(g)(_X),
    }[how]()


@pytest.mark.parametrize("how", sorted(_TRANSFORMS))
def test_write_through_view_agrees_with_numpy_under_every_transform(how):
    """Before: vmap gave the value with y unchanged and jit(grad)/grad(jit)
    a gradient missing the update, both silently; then it was refused."""
    check_grads(_write_through_view, (_X,), order=2)
    assert np.isclose(tp.value_and_grad(_write_through_view)(_X)[0],
                      _write_through_view(_X.copy()))
    np.testing.assert_allclose(_TRANSFORMS[how](_write_through_view),
                               _reference(how, _write_through_view), rtol=1e-10, atol=1e-12)


def test_plain_jit_still_writes_through_the_view():
    assert tp.jit(_write_through_view)(_X) == pytest.approx(_write_through_view(_X.copy()))


@pytest.mark.parametrize("how", sorted(_TRANSFORMS))
def test_updates_of_fresh_arrays_still_rebind(how):
    """A temporary's reshape or a copied slice is no view of a live traced
    array: its augmented assignment rebinds and differentiates as before."""
    check_grads(_fresh_arrays_only, (_X,), order=2)
    np.testing.assert_allclose(_TRANSFORMS[how](_fresh_arrays_only),
                               _reference(how, _fresh_arrays_only), rtol=1e-10, atol=1e-12)


_VIEWS = {
    "slice": lambda y: y[1::2],
    "ellipsis": lambda y: y[...],
    "newaxis": lambda y: y[None, :],
    "reshape_method": lambda y: y.reshape(2, 3),
    "transpose_of_reshape": lambda y: y.reshape(2, 3).T,
    "ravel": np.ravel,
    "squeeze": lambda y: np.squeeze(y[None]),
    "expand_dims": lambda y: np.expand_dims(y, 0),
    "swapaxes": lambda y: np.swapaxes(y.reshape(2, 3), 0, 1),
    "moveaxis": lambda y: np.moveaxis(y.reshape(2, 3), 0, 1),
    "atleast_2d": np.atleast_2d,
}


@pytest.mark.parametrize("how", ["grad", "vmap"])
@pytest.mark.parametrize("view", sorted(_VIEWS))
def test_every_kind_of_view_writes_through(view, how):
    def f(x):
        y = x * 1.0
        v = _VIEWS[view](y)
        v *= 3.0
        return np.sum(y ** 2 * np.arange(6.0))
    want = _reference(how, f)
    np.testing.assert_allclose(_TRANSFORMS[how](f), want, rtol=1e-10, atol=1e-12)
    assert np.isclose(tp.value_and_grad(f)(_X)[0], f(_X.copy()))
    if how == "grad":
        check_grads(f, (_X,))


@pytest.mark.parametrize("how", ["grad", "vmap"])
def test_copies_made_by_indexing_still_rebind(how):
    """Fancy and boolean indexing copy in NumPy too: the update rebinds."""
    def f(x):
        y = x * 1.0
        v = y[[0, 2]]
        v += 1.0
        w = y[y > 0.2]
        w *= 2.0
        return np.sum(y ** 2) + np.sum(v ** 3) + np.sum(w)
    want = {"grad": lambda: check_grads(f, (_X,)) or tp.grad(f)(_X),
            "vmap": lambda: np.array([f(_X.copy()), f(2 * _X)])}[how]()
    if how == "vmap":
        np.testing.assert_allclose(_TRANSFORMS[how](f), want)


@pytest.mark.parametrize("how", sorted(_TRANSFORMS))
def test_a_copy_of_a_view_is_updated_as_numpy_updates_it(how):
    """``v = y[::2].copy(); v += 1`` (and np.copy) is NumPy's own idiom for
    updating a separate array: the copy rebinds, ``y`` is unchanged, under
    every transform; the same code on plain arrays gives the reference."""
    def f(x):
        y = x * 2.0
        v = y[::2].copy()
        v += 1.0
        w = np.copy(y[1::2].reshape(3, 1))
        w *= 3.0
        return np.sum(v * y[1::2]) + np.sum(w[:, 0] * y[::2] ** 2)
    got = _TRANSFORMS[how](f)
    if how == "grad":
        check_grads(f, (_X,), order=2)
    g = tp.grad(f)
    want = {"grad": lambda: g(_X), "vmap": lambda: [f(_X), f(2 * _X)],
            "vmap_grad": lambda: [g(_X), g(2 * _X)], "jit_grad": lambda: g(_X),
            "grad_jit": lambda: g(_X), "jvp": lambda: np.sum(g(_X)),
            "hessian": lambda: np.stack([(g(_X + 1e-6 * e) - g(_X - 1e-6 * e)) / 2e-6
                                         for e in np.eye(6)], axis=1)}[how]()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("how", ["grad", "vmap"])
@pytest.mark.parametrize("call", ["resize((3,))"])
def test_in_place_methods_refused_by_name(call, how):
    """Before, under grad: AttributeError "'Var' object has no attribute
    'sort'", no fix named."""
    name = call.split("(")[0]

    def f(x):
        y = x * 1.0
        eval(f"y.{call}")
        return np.sum(y ** 2)
    # vmap's own message (an AttributeError, as before) names the method too
    err, msg = {"grad": (TypeError, rf"y\.{name}\(\.\.\.\) changes the traced array y in place"),
                "vmap": (AttributeError, rf"x\.{name}\(\) changes a batched value in place")}[how]
    with pytest.raises(err, match=msg):
        _TRANSFORMS[how](f)


@pytest.mark.parametrize("how", ["grad", "vmap"])
@pytest.mark.parametrize("call", ["fill(2.0)", "put([0, -1], [1.0, 3.0])"])
def test_in_place_writing_methods_write_as_numpy(call, how):
    """y.fill and y.put are item assignment (they were refused by name)."""
    def f(x):
        y = x * 1.0
        eval(f"y.{call}")
        return np.sum(y ** 2 * x)
    np.testing.assert_allclose(_TRANSFORMS[how](f), _reference(how, f), rtol=1e-12)


def test_query_methods_of_ndarray_work_on_traced_arrays():
    def f(x):
        cut = x.searchsorted(0.5)
        return np.sum(x[cut:] ** 2) + np.sum(x.compress([True, False, True, False, True, True])) \
            + 0.0 * x.nbytes / x.itemsize + np.sum(x[x.argpartition(2)[:2]])
    x = np.sort(_X) + 0.1  # no entry at the cut 0.5: piecewise smooth there
    check_grads(f, (x,))
    assert tp.grad(f)(x).shape == x.shape


@pytest.mark.parametrize("how", ["grad", "vmap"])
@pytest.mark.parametrize("call", ["sort()", "partition(1)", "sort(axis=0)"])
def test_sort_and_partition_in_place_are_item_assignment(call, how):
    """``y.sort()`` / ``y.partition(k)`` on a value made inside f: ``y[...] =
    np.sort(y)`` (they were refused by name); a view taken before sees
    the new order, as in NumPy."""
    def f(x):
        y = x.reshape(2, 3) * 1.0
        head = y[0]
        eval(f"y.{call}")
        return np.sum(y * np.arange(6.0).reshape(2, 3)) + np.sum(head ** 2)
    x = np.array([3.0, 1.0, 4.0, 1.5, 5.0, 0.5])
    if how == "grad":
        check_grads(f, (x,), order=2)
    else:
        xs = np.stack([x, x[::-1] * 2])
        np.testing.assert_allclose(tp.vmap(f)(xs), [f(v) for v in xs], rtol=1e-14)
