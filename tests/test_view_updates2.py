"""Augmented assignment with live views, round two (see
test_view_updates.py): programs whose result silently differed from plain
NumPy's. A copy (``y.copy()``, ``np.copy(y)``) of an array that is no view
was the array itself, so an update of either moved the other's views; a
view of a NumPy scalar (``np.expand_dims(np.sum(x), 0)``) followed the
scalar's update; ``//=``, ``%=`` (vmap) and ``@=``, ``//=``, ``%=`` (jit)
rebound without updating the views; ``for r in y: y += 1`` gave rows of the
array ``y`` was bound to before the update.
"""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

X = np.linspace(0.3, 1.8, 6)
M3 = np.array([[0.5, 0.1, 0.0], [0.2, 0.4, 0.1], [0.0, 0.3, 0.6]])


def copy_then_view(x):
    y = x * 1.0
    c = y.copy()
    h = c[:2]  # a view of the copy: y's update does not reach it
    y += 1
    return h * y[:2]


def copy_updated(x):
    y = x * 1.0
    h = y[:2]
    c = y.copy()
    c += 1  # updates the copy only: h (a view of y) keeps its values
    return h * c[:2]


def np_copy_updated(x):
    y = x * 1.0
    h = y[:2]
    c = np.copy(y)
    c *= 2
    return h * c[:2]


def np_copy_then_view(x):
    y = x * 1.0
    c = np.copy(y)
    h = c[:2]
    y *= 2
    return h * y[:2]


def rows_of_an_updated_array(x):
    y = x.reshape(3, 2) * 1.0
    out = 0.0
    for r in y:  # NumPy's rows are views of the array being iterated
        y += 1
        out = out + r
    return out


def floordiv_and_mod(x):
    y = x * 3.0
    v = y[1:]
    y //= 2
    w = y[:3]
    y %= 1.3
    return v + w[0] * x[1:]


def matmul_into(x):
    y = x.reshape(2, 3) * 1.0
    v = y[0]
    y @= M3
    return v * x[:3]


COPIES = [copy_then_view, copy_updated, np_copy_updated, np_copy_then_view,
          rows_of_an_updated_array]


@pytest.mark.parametrize("f", COPIES, ids=lambda f: f.__name__)
def test_copies_and_iterated_rows_match_numpy_under_every_transform(f):
    xs = np.stack([X, X * 1.3 + 0.1])
    ref = f(X.copy())
    v, t = tp.jvp(f, (X,), (np.ones(6),))
    assert np.allclose(v, ref)
    assert np.allclose(tp.vmap(f)(xs), [f(a.copy()) for a in xs])
    assert np.allclose(tp.jit(f)(X), ref)
    loss = lambda x: np.sum(f(x) * np.arange(1.0, ref.size + 1).reshape(ref.shape))
    check_grads(loss, (X,))
    check_grads(loss, (X.astype(np.float32),), rtol=2e-3, atol=2e-3, eps=1e-3)
    g = tp.grad(loss)(X)
    assert np.allclose(tp.jit(tp.grad(loss))(X), g)
    assert np.allclose(tp.vmap(tp.grad(loss))(xs)[0], g)
    assert np.allclose(tp.jacrev(f)(X), tp.jacfwd(f)(X))


@pytest.mark.parametrize("f", [floordiv_and_mod, matmul_into], ids=lambda f: f.__name__)
def test_every_augmented_operator_updates_views_under_vmap_and_jit(f):
    xs = np.stack([X, X * 1.3 + 0.1])
    ref = [f(a.copy()) for a in xs]
    assert np.allclose(tp.vmap(f)(xs), ref)
    assert np.allclose(tp.jit(f)(xs[0]), ref[0])
    assert np.allclose(tp.jit(f)(xs[1]), ref[1])
    assert np.allclose(tp.jvp(f, (X,), (np.ones(6),))[0], f(X.copy()))
    weights = np.cos(np.arange(np.size(ref[0])) + 0.5)
    loss = lambda x: np.sum(f(x) * weights)
    check_grads(loss, (X,))
    assert np.allclose(tp.vmap(tp.grad(loss))(xs)[0], tp.grad(loss)(X))
    assert np.allclose(tp.hessian(loss)(X), tp.jacfwd(tp.grad(loss))(X))


def test_integer_augmented_operators_update_views_under_vmap():
    def f(x):
        y = (x * 10).astype(np.int64)
        v = y[1:]
        y &= 12
        y |= 1
        y ^= 2
        y <<= 1
        y >>= 1
        return v
    xs = np.stack([X, X * 2])
    assert np.array_equal(tp.vmap(f)(xs), [f(a.copy()) for a in xs])


def expand_dims_of_scalar(x):
    y = np.sum(x) * 1.0  # a NumPy scalar: its expand_dims is a copy
    e = np.expand_dims(y, 0)
    y += 1
    return e * x


def transpose_of_scalar(x):
    y = np.sum(x ** 2) * 1.0
    e = y.T
    b = np.broadcast_to(y, (6,))
    v = y.view()
    y *= 2
    return e * x + b * v


def views_of_a_0d_array(x):
    y = (x[2:3] * 1.0).reshape(())  # a 0-d array (a view): its views follow it
    v = y[...]
    e = np.expand_dims(y, 0)
    y *= x[0]
    return v * x + e


@pytest.mark.parametrize("f", [expand_dims_of_scalar, transpose_of_scalar,
                               views_of_a_0d_array], ids=lambda f: f.__name__)
def test_views_of_scalars_are_copies_and_of_0d_arrays_views(f):
    ref = f(X.copy())
    assert np.allclose(tp.jvp(f, (X,), (np.ones(6),))[0], ref)
    assert np.allclose(tp.jit(f)(X), ref)
    loss = lambda x: np.sum(f(x) * np.arange(1.0, 7.0))
    check_grads(loss, (X,))
    assert np.allclose(tp.jit(tp.grad(loss))(X), tp.grad(loss)(X))


def test_view_of_a_per_item_0d_value_refuses_when_used_after_an_update():
    # inside vmap a 0-d value may be a NumPy scalar (its views are copies)
    # or a 0-d array (views): which one is not known per item, so a use of
    # such a view after the update refuses rather than guess
    xs = np.stack([X, X * 2])
    with pytest.raises(TypeError, match="0-d value y inside vmap"):
        tp.vmap(expand_dims_of_scalar)(xs)
    with pytest.raises(TypeError, match="0-d value y inside vmap"):
        tp.vmap(tp.grad(lambda x: np.sum(expand_dims_of_scalar(x))))(xs)

    def unused(x):
        y = np.sum(x) * 1.0
        e = np.expand_dims(y, 0)
        s = np.sum(e)  # used before the update: fine
        y += 1
        return s * x + y

    assert np.allclose(tp.vmap(unused)(xs), [unused(a.copy()) for a in xs])
    # a per-item 0-d value that is itself a view is an array: views follow it
    assert np.allclose(tp.vmap(views_of_a_0d_array)(xs),
                       [views_of_a_0d_array(a.copy()) for a in xs])


def test_views_of_a_stale_view_refuse_too():
    # y becomes per-item under vmap: its view h cannot follow (refuses), and
    # g, a view of h, kept the old values silently before
    w = np.arange(1.0, 5.0)
    data = np.ones((3, 4))

    def loss(w, use_view):
        def item(x):
            y = w * 1.0
            h = y[:3]
            g = h[::2]
            y += x
            return np.sum(y) + (np.sum(g) if use_view else 0.0)
        return np.sum(tp.vmap(item)(data))

    assert np.allclose(tp.grad(loss)(w, False), 3.0)
    with pytest.raises(TypeError, match="view of y .* was used after"):
        tp.grad(loss)(w, True)


def ravel_f_of_transpose(x):
    # y.T is F-ordered, so its ravel(order="F") is a view of y in NumPy; the
    # batch's ravel copies, so vmap decided by the batch's memory before
    y = x.reshape(2, 3) * 1.0
    v = y.T.ravel(order="F")
    r = y.reshape(3, 2, order="F")  # a copy, per item too
    y *= 2
    return v + r.ravel()


def conj_of_real(x):
    y = x * 1.0
    c = y.conj()  # NumPy: y itself, so it shows the update
    y += 1
    return c * y


@pytest.mark.parametrize("f", [ravel_f_of_transpose, conj_of_real], ids=lambda f: f.__name__)
def test_views_decided_per_item_and_conj_of_real_follow_updates(f):
    xs = np.stack([X, X * 1.3 + 0.1])
    ref = [f(a.copy()) for a in xs]
    assert np.allclose(tp.vmap(f)(xs), ref)
    assert np.allclose(tp.jvp(f, (X,), (np.ones(6),))[0], ref[0])
    assert np.allclose(tp.jit(f)(X), ref[0])
    loss = lambda x: np.sum(f(x) * np.cos(np.arange(6.0)))
    check_grads(loss, (X,))
    assert np.allclose(tp.vmap(tp.grad(loss))(xs)[0], tp.grad(loss)(X))
