"""Call sequences built to break a trace-once compiler: each jitted call is
compared with the plain call of the same function (values, shapes, types)."""
import numpy as np
import pytest

import tapestry as tp
from jit_checks import quiet, same


@pytest.mark.parametrize("k_type", [int, np.int64, np.int32])
def test_sequence_repeated_by_an_int_argument(k_type):
    # ``[x] * k``: Python repeats the list, reading ``k``; the replay must not
    # keep the trace's length
    def f(x, k):
        return np.concatenate([x] * k), np.stack(k * (x,)), len([0] * k), [x] * k

    jf = tp.jit(f)
    x = np.arange(6.0).reshape(2, 3)
    for k in [1, 2, 3, 2, 1]:
        same(quiet(jf, x, k_type(k)), f(x, k_type(k)))


def test_sequence_repeated_by_a_computed_int():
    def f(x, k):
        return np.stack([x] * (k + 1)).sum(axis=0)

    jf = tp.jit(f)
    g = tp.jit(tp.grad(lambda x, k: np.sum(f(x, k) ** 2)))
    x = np.arange(3.0)
    for k in [0, 2, 1, 2]:
        same(quiet(jf, x, k), f(x, k))
        same(quiet(g, x, k), tp.grad(lambda x, k: np.sum(f(x, k) ** 2))(x, k))


def test_int_power_of_an_int_argument_changes_type():
    # ``2 ** k`` is an int for k >= 0 and a float for k < 0: code reading the
    # dtype (or casting into it) must see the call's own type
    def f(x, k):
        y = np.arange(3) * (2 ** k)
        z = np.zeros(3, dtype=y.dtype)
        z[0] = 0.75
        return z + y * x, str(y.dtype)

    jf = tp.jit(f)
    x = np.ones(3)
    for k in [1, -1, 2, -2, 1]:
        same(quiet(jf, x, k), f(x, k))


@pytest.mark.parametrize("which", ["base", "exponent"])
def test_float_power_of_a_float_argument_may_be_complex(which):
    # ``(-4.0) ** 0.5`` is a complex in Python
    def f(x, s):
        p = s ** 0.5 if which == "base" else (-2.0) ** s
        return x * abs(p), np.result_type(p).kind

    jf = tp.jit(f)
    x = np.ones(2)
    vals = [4.0, -4.0, 9.0, -1.0] if which == "base" else [2.0, 0.5, 3.0, 1.5]
    for s in vals:
        same(quiet(jf, x, s), f(x, s))


def _alias_0d_reshape(x):
    y = (x * 1.0).reshape(())  # a 0-d view of a temporary: a 0-d array in NumPy
    z = y
    y += 1.0                   # in place: z sees it
    return z * x[0]


def _alias_0d_squeeze(x):
    y = np.squeeze(x * 2.0)
    z = y
    y -= x[0] ** 2
    return z * y


def _alias_0d_ellipsis(x):
    y = (x * 1.0)[0, ...]
    zs = [y]
    y **= 2
    return zs[0] + x[0]


def _sum_rebinds(x):
    s = np.sum(x)              # a NumPy scalar: s += 1 rebinds, t keeps the old value
    t = s
    s += 1.0
    return t * s


def _np_copy_of_a_scalar(x):
    y = np.copy(np.sum(x))     # np.copy of a NumPy scalar is a 0-d array
    z = y
    y += 1.0
    return z * x[0]


def _copy_of_a_0d_view(x):
    y = (x * 1.0).reshape(()).copy()
    z = y
    y *= 3.0
    return z * x[0]


def _copy_of_a_scalar_rebinds(x):
    y = np.sum(x * 2.0).copy()  # a NumPy scalar's copy is a scalar
    z = y
    y += 1.0
    return z * y


@pytest.mark.parametrize("f", [_alias_0d_reshape, _alias_0d_squeeze, _alias_0d_ellipsis,
                               _sum_rebinds, _np_copy_of_a_scalar, _copy_of_a_0d_view,
                               _copy_of_a_scalar_rebinds])
def test_augmented_assignment_into_a_0d_view_changes_it_in_place(f):
    for v in [2.0, 0.7]:
        x = np.array([v])
        want = f(x)
        tp.testing.check_grads(f, (x,))
        gw = tp.grad(f)(x)
        for vg in (tp.value_and_grad(f), tp.jit(tp.value_and_grad(f)),
                   tp.value_and_grad(tp.jit(f))):
            val, g = quiet(vg, x)
            np.testing.assert_allclose(val, want, rtol=1e-15)
            np.testing.assert_allclose(g, gw, rtol=1e-15)
        xs = np.array([[v], [v + 1.0]])
        np.testing.assert_allclose(tp.vmap(f)(xs), [f(r) for r in xs], rtol=1e-15)


def _reshape_view_or_copy(x):
    y = x * 1.0              # laid out as x
    v = y.reshape(-1)        # NumPy: a view of y if it is C-ordered, a copy if not
    y += 1.0
    return np.sum(v * np.arange(1.0, v.size + 1)) + np.sum(y)


def _reshape_write_through(x):
    y = x * 1.0
    v = y.reshape(-1)
    v[0] = 5.0               # reaches y only through a view
    return np.sum(y * x)


def _np_reshape_view_or_copy(x):
    y = x * 1.0
    v = np.reshape(y, -1)
    y += 1.0
    return np.sum(v * np.arange(1.0, v.size + 1)) + np.sum(y)


def test_item_layout_decides_view_or_copy_under_jit_of_vmap():
    xs = np.arange(12.0).reshape(2, 2, 3) / 10
    jv = tp.jit(tp.vmap(_reshape_view_or_copy))
    for b in [xs, np.asfortranarray(xs), xs, np.asfortranarray(xs)]:
        np.testing.assert_array_equal(quiet(jv, b), [_reshape_view_or_copy(r) for r in b])


@pytest.mark.parametrize("f", [_reshape_view_or_copy, _reshape_write_through,
                               _np_reshape_view_or_copy])
def test_argument_layout_decides_view_or_copy_under_jit_of_grad(f):
    # the trace's decision (view or copy, which decides what an update in
    # place reaches) must not be replayed for an argument laid out otherwise
    a = np.arange(6.0).reshape(2, 3) / 10
    jvg, vgj = tp.jit(tp.value_and_grad(f)), tp.value_and_grad(tp.jit(f))
    for x in [a, np.asfortranarray(a), a, a.T.copy().T, np.asfortranarray(a)]:
        want, gw = tp.value_and_grad(f)(x)
        assert want == f(x)
        for vg in (jvg, vgj):
            val, g = quiet(vg, x)
            assert val == want
            np.testing.assert_array_equal(g, gw)


def _ravel_of_reversed(x):
    a = x * 1.0
    v = a[::-1].ravel()      # NumPy copies (not contiguous)
    a /= 2.0
    return np.sum(v * x)


def _ravel_of_strided(x):
    a = x * 1.0
    v = np.ravel(a[::2])
    a += 1.0
    return np.sum(v * x[::2])


def _view_of_a_ravel_copy(x):
    r = (x * 1.0)[::-1].ravel()   # a contiguous copy ...
    v = r.ravel()                 # ... which this views
    v[0] = x[0] ** 2
    return np.sum(r * x)


@pytest.mark.parametrize("f", [_ravel_of_reversed, _ravel_of_strided, _view_of_a_ravel_copy])
def test_ravel_copies_where_numpy_copies(f):
    x = np.array([0.3, 0.9, 0.2, 0.7])
    tp.testing.check_grads(f, (x,))
    for vg in (tp.value_and_grad(f), tp.jit(tp.value_and_grad(f)),
               tp.value_and_grad(tp.jit(f))):
        val, g = quiet(vg, x)
        assert val == f(x)
        np.testing.assert_array_equal(g, tp.grad(f)(x))
    xs = np.stack([x, x[::-1]])
    for vf in (tp.vmap(f), tp.jit(tp.vmap(f))):
        np.testing.assert_array_equal(quiet(vf, xs), [f(r) for r in xs])


@pytest.mark.parametrize("order", ["K", "A"])
def test_ravel_in_memory_order(order):
    a = np.arange(24.0).reshape(2, 3, 4) / 10
    w = np.arange(1.0, 25.0)

    def f(x):
        return np.sum(np.ravel(x * 1.0, order=order) * w)

    jvg = tp.jit(tp.value_and_grad(f))
    for x in [np.asfortranarray(a), a, a.transpose(1, 0, 2), a[:, ::-1], a[:, :, ::2]]:
        w = np.arange(1.0, x.size + 1)
        tp.testing.check_grads(f, (x,))
        val, g = tp.value_and_grad(f)(x)
        assert val == f(x)
        jval, jg = quiet(jvg, x)
        assert jval == val
        np.testing.assert_array_equal(jg, g)


@pytest.mark.parametrize("copy", [lambda y: y.copy(), lambda y: np.copy(y, order="C"),
                                  lambda y: y.copy(order="F"), lambda y: np.copy(y)])
def test_a_copy_is_laid_out_as_numpys(copy):
    # ndarray.copy() is C-ordered: a reshape of it views it, whatever the
    # layout of what was copied; an update of the copy reaches the view
    def f(x):
        c = copy(x * 1.0)
        v = c.reshape(-1)
        c += 1.0
        return np.sum(v * np.arange(1.0, v.size + 1)) + np.sum(c)

    a = np.arange(6.0).reshape(2, 3) / 10
    jvg = tp.jit(tp.value_and_grad(f))
    for x in [np.asfortranarray(a), a, np.asfortranarray(a)]:
        val, g = tp.value_and_grad(f)(x)
        assert val == f(x)
        jval, jg = quiet(jvg, x)
        assert jval == val
        np.testing.assert_array_equal(jg, g)
