"""Augmented assignment into an array with live views (``head = y[:3];
y += 1``): NumPy's views share memory, so ``head`` shows the new values.
tapestry rebinds ``y``; every live view of it is updated with it, under
every transform and composition, and ``y`` keeps its shape and dtype as
NumPy's in-place operator does. Before, ``head`` silently kept the old
values (grad, jvp and vmap gave 8.0 where NumPy gives 14.0 for ``slice_add``).
"""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads


def slice_add(x):
    y = x * 1.0
    head = y[:3]
    y += 1
    return np.sum(head * y[:3])


def transpose_mul(x):
    y = x.reshape(2, 3) * 1.0
    t = y.T
    y *= 2
    return np.sum(t * t)


def view_of_view(x):
    y = x * 2.0
    a = y[1:]
    b = a[::2]
    y -= x
    return np.sum(b ** 2) + np.sum(a * x[1:])


def views_in_a_list(x):
    y = x.reshape(3, 2) + 0.0
    rows = [y[i] for i in range(3)]
    y /= 3.0
    return sum(np.sum(r * r) for r in rows)


def view_functions(x):
    y = np.reshape(x, (2, 3)) + 0.0
    r = np.ravel(y)
    s = y.reshape(3, 2)
    e = np.expand_dims(y, 0)
    y **= 2
    return np.sum(r * np.arange(6)) + np.sum(s[0]) + np.sum(e[0, 1])


def loop_of_views(x):
    y = x * 1.0
    out = 0.0
    for i in range(3):
        row = y[i:i + 2]
        y += np.sin(row).sum()
        out = out + np.sum(row * y[i:i + 2])
    return out


def scalar_items_are_copies(x):
    # y[0] of a vector is a NumPy scalar, a copy: it keeps its value
    y = x + 0.0
    items = [y[i] for i in range(3)]
    y *= 5.0
    return sum(r * r for r in items) + np.sum(y)


PROGRAMS = [slice_add, transpose_mul, view_of_view, views_in_a_list, view_functions,
            loop_of_views, scalar_items_are_copies]
X = np.linspace(0.3, 1.8, 6)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_values_match_numpy_and_derivatives_match_finite_differences(f):
    for x in (X, X.astype(np.float32)):
        v = tp.value_and_grad(f)(x)[0]
        assert np.allclose(v, f(x.copy()), rtol=1e-6)
        assert np.allclose(tp.jvp(f, (x,), (np.ones_like(x),))[0], f(x.copy()), rtol=1e-6)
    check_grads(f, (X,), order=2)


def test_the_issue_example_gives_numpys_value():
    assert np.isclose(slice_add(np.arange(5.0)), 14.0)
    assert np.isclose(tp.value_and_grad(slice_add)(np.arange(5.0))[0], 14.0)
    assert np.allclose(tp.grad(slice_add)(np.arange(5.0)), [2, 4, 6, 0, 0])


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_every_composition_agrees(f):
    xs = np.stack([X, 2 * X])
    ref = np.array([f(a.copy()) for a in xs])
    g = tp.grad(f)(X)
    t = np.cos(X)
    assert np.allclose(tp.vmap(f)(xs), ref)
    assert np.allclose(tp.jit(f)(X), ref[0])
    assert np.allclose(tp.jit(tp.vmap(f))(xs), ref)
    assert np.allclose(tp.vmap(tp.jit(f))(xs), ref)
    assert np.allclose(tp.jit(tp.grad(f))(X), g)
    assert np.allclose(tp.grad(tp.jit(f))(X), g)
    assert np.allclose(tp.vmap(tp.grad(f))(xs)[0], g)
    assert np.allclose(tp.grad(lambda x: np.sum(tp.vmap(f)(np.stack([x, x]))))(X), 2 * g)
    assert np.allclose(tp.jvp(f, (X,), (t,))[1], g @ t)
    assert np.allclose(tp.jvp(tp.jit(f), (X,), (t,))[1], g @ t)
    assert np.allclose(tp.jit(tp.hessian(f))(X), tp.hessian(f)(X))
    assert np.allclose(tp.hessian(f)(X) @ t, tp.jvp(tp.grad(f), (X,), (t,))[1])


def test_in_place_update_keeps_the_dtype_as_numpy_does():
    def f(x):
        y = x * 1
        y += np.ones(3)  # float64 into float32: NumPy keeps float32
        return y

    x = np.linspace(0.1, 0.3, 3, dtype=np.float32)
    assert f(x.copy()).dtype == np.float32
    assert tp.jvp(f, (x,), (x,))[0].dtype == np.float32
    assert tp.vmap(f)(np.stack([x, x])).dtype == np.float32
    g = tp.grad(lambda x: np.sum(f(x) ** 2))(x)
    assert g.dtype == np.float32 and np.allclose(g, 2 * (x + 1), rtol=1e-6)


def test_in_place_update_that_numpy_refuses_is_refused():
    def broadcast(x):
        y = x * 1
        y += np.ones((2, 3))
        return np.sum(y)

    def complex_into_real(x):
        y = x * 1
        y += 1j * x
        return np.sum(y).real

    for f, err, words in [(broadcast, ValueError, "non-broadcastable output operand"),
                          (complex_into_real, TypeError, "cannot cast")]:
        with pytest.raises(err):
            f(np.ones(3))  # NumPy itself
        with pytest.raises(err, match=words):
            tp.grad(f)(np.ones(3))
        with pytest.raises(err, match=words):
            tp.vmap(f)(np.ones((2, 3)))


def test_scalars_rebind_freely():
    # a 0-d value may be a NumPy scalar, which += rebinds to any shape
    def f(x):
        s = np.sum(x)
        s += x
        return np.sum(s * s)

    assert np.allclose(tp.grad(f)(X), tp.grad(lambda x: np.sum((np.sum(x) + x) ** 2))(X))


def test_vmap_item_is_not_a_view():
    # under vmap y[0] is a column of the batch, but for the item a scalar copy
    def f(x):
        y = x * 1.0
        r = y[0]
        r += 1.0   # updates r alone (it was refused as a view)
        return r * np.sum(y)

    xs = np.stack([X, 2 * X])
    assert np.allclose(tp.vmap(f)(xs), [f(a.copy()) for a in xs])


def test_view_that_cannot_follow_its_array_refuses_when_used():
    w = np.arange(1.0, 5.0)
    data = np.ones((3, 4))

    def loss(w, use_view):
        def item(x):
            y = w * 1.0
            h = y[:2]
            y += x   # y becomes per-item; h cannot become per-item in place
            return np.sum(y) + (np.sum(h) if use_view else 0.0)
        return np.sum(tp.vmap(item)(data))

    assert np.allclose(tp.grad(loss)(w, False), 3.0)  # unused: no refusal
    with pytest.raises(TypeError, match="view of y .* was used after"):
        tp.grad(loss)(w, True)


def split_views(x):
    y = x * 1.0
    a, b = np.split(y, 2)
    parts = np.array_split(y.reshape(3, 2), 3)
    y *= 2
    return np.sum(a * b) + sum(np.sum(p ** 2) for p in parts)


def flips_and_diagonals(x):
    y = x.reshape(2, 3) * 1.0
    f, r = np.flip(y, 1), np.rot90(y)
    d = np.diagonal(np.outer(x, x))
    m = np.outer(x, x)
    dm = np.diag(m)
    m += 1
    y += 1
    return np.sum(f[0] * r[:, 0]) + np.sum(d) + np.sum(dm)


def same_value_views(x):
    # NumPy: np.squeeze(y) with nothing to squeeze and y.real of a real y are
    # views of y, np.atleast_1d(y) of a vector is y itself; all show y += 1
    y = x * 1.0
    s, r, a = np.squeeze(y), y.real, np.atleast_1d(y)
    y += 1
    return np.sum(s * r) + np.sum(a)


MORE = [split_views, flips_and_diagonals, same_value_views]


@pytest.mark.parametrize("f", MORE, ids=lambda f: f.__name__)
def test_views_made_by_functions_follow_their_array(f):
    xs = np.stack([X, 2 * X])
    assert np.allclose(tp.value_and_grad(f)(X)[0], f(X.copy()))
    assert np.allclose(tp.vmap(f)(xs), [f(a.copy()) for a in xs])
    assert np.allclose(tp.jit(tp.grad(f))(X), tp.grad(f)(X))
    check_grads(f, (X,), order=2)


def deep_copies(x):
    import copy
    y = x * 1.0
    v = y[:2]
    state = copy.deepcopy({"v": v, "y": y})   # independent arrays, as in NumPy
    c = copy.copy(v)
    c += 1
    y += 10
    return np.sum(c * state["v"]) + np.sum(state["y"] ** 2) + np.sum(v)


def test_copy_and_deepcopy_of_traced_values_are_independent_arrays():
    # deepcopy used to copy the tape: the result was refused as a leaked tracer
    f = deep_copies
    xs = np.stack([X, 2 * X])
    assert np.allclose(tp.value_and_grad(f)(X)[0], f(X.copy()))
    assert np.allclose(tp.vmap(f)(xs), [f(a.copy()) for a in xs])
    assert np.allclose(tp.jit(tp.grad(f))(X), tp.grad(f)(X))
    assert np.allclose(tp.jvp(f, (X,), (np.ones(6),))[1], tp.grad(f)(X).sum())
    check_grads(f, (X,), order=2)


def test_view_method_follows_its_array_and_writes_through():
    def f(x):
        y = x * 1.0
        v = y.view()
        y *= 3.0
        return np.sum(v * x)

    xs = np.stack([X, 2 * X])
    assert np.allclose(tp.value_and_grad(f)(X)[0], f(X.copy()))
    assert np.allclose(tp.vmap(f)(xs), [f(a.copy()) for a in xs])
    check_grads(f, (X,), order=2)

    def g(x):
        y = x * 1.0
        v = y.view()
        v += 1.0   # NumPy writes into y (vmap rebound v silently; then it was refused)
        return np.sum(y * y)

    assert np.allclose(tp.value_and_grad(g)(X)[0], g(X.copy()))
    assert np.allclose(tp.vmap(g)(xs), [g(a.copy()) for a in xs])
    check_grads(g, (X,), order=2)


def test_sliding_windows_follow_their_array():
    def f(x):
        y = x * 1.0
        w = np.lib.stride_tricks.sliding_window_view(y, 3)
        y *= 2.0
        return np.sum(w[:, 0] * w[:, 2])

    xs = np.stack([X, 2 * X])
    assert np.allclose(tp.value_and_grad(f)(X)[0], f(X.copy()))
    assert np.allclose(tp.vmap(f)(xs), [f(a.copy()) for a in xs])
    check_grads(f, (X,), order=2)
