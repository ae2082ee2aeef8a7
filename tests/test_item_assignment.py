"""Item assignment into a traced array (``y[key] = v``, and so ``y[key] op= v``):
NumPy's values, the gradient in both ``y`` and ``v`` (checked against finite
differences), the objects that see the write (another name, the views, the
array a view views), the refusals that name what to write instead, and the
transformations' compositions."""
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

#: The rules these finite-difference checks cover (tests/test_op_coverage.py).
SWEPT = {"setitem", np.put, np.putmask, np.place, np.put_along_axis, np.fill_diagonal, np.copyto,
         "ufunc.at"}

W = np.array([0.5, -1.5, 2.0, 1.25, -0.75, 3.0])


def _loss(y):
    """A nonlinear reading of every element (a gradient that tells them apart)."""
    w = np.resize(W, y.shape).astype(y.dtype) if y.shape else W[0]
    return np.sum(w * y * y + np.sin(y))


# key, y's shape, v's shape: every kind of key NumPy takes, v broadcast
KEYS = {
    "int": (2, (6,), ()),
    "negative_int": (-1, (6,), ()),
    "slice": (slice(1, 4), (6,), (3,)),
    "step_slice_broadcast_v": (slice(None, None, 2), (6,), ()),
    "negative_step": (slice(None, None, -2), (6,), (3,)),
    "ellipsis": (Ellipsis, (2, 3), (3,)),
    "none": ((None, 1), (2, 3), (1, 3)),
    "row": (1, (2, 3), (3,)),
    "column_broadcast": ((slice(None), 2), (2, 3), (1,)),
    "mixed_int_slice": ((0, slice(1, 3)), (2, 3), (2,)),
    "mask": (np.array([True, False, True, False, False, True]), (6,), (3,)),
    "mask_scalar_v": (np.array([True, False, True, False, False, True]), (6,), ()),
    "mask_2d": (np.array([[True, False, True], [False, True, False]]), (2, 3), (3,)),
    "fancy_list": ([4, 0, 2], (6,), (3,)),
    "fancy_negative": (np.array([-1, -3]), (6,), (2,)),
    "fancy_2d_rows": (np.array([1, 0]), (2, 3), (2, 3)),
    "fancy_pair": ((np.array([0, 1]), np.array([2, 0])), (2, 3), (2,)),
    "fancy_and_slice": ((slice(None), np.array([2, 0])), (2, 3), (2,)),
    "zero_d_empty_tuple": ((), (), ()),
    "zero_d_ellipsis": (Ellipsis, (), ()),
    "empty_slice": (slice(2, 2), (6,), ()),
    "empty_mask": (np.zeros(6, bool), (6,), (0,)),
    "empty_fancy": (np.array([], dtype=int), (6,), ()),
}


def _write(y0, v, key):
    y = (y0 * 1.0)[...]  # (0-d: an array, not a NumPy scalar, which refuses writes)
    y[key] = v * 2.0
    return _loss(y) + _loss(v)


def _inputs(yshape, vshape, dtype):
    rng = np.random.default_rng(len(yshape) * 7 + len(vshape))
    return (rng.standard_normal(yshape).astype(dtype),
            rng.standard_normal(vshape).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(KEYS))
def test_value_and_gradient_match_numpy(name, dtype):
    key, yshape, vshape = KEYS[name]
    y0, v = _inputs(yshape, vshape, dtype)
    want = _write(y0.copy(), v.copy(), key)
    got, g = tp.value_and_grad(_write, argnums=(0, 1))(y0, v, key)
    assert np.allclose(got, want, rtol=1e-6)
    assert g[0].dtype == dtype and g[1].dtype == dtype
    assert g[0].shape == y0.shape and g[1].shape == v.shape
    check_grads(lambda a, b: _write(a, b, key), (y0, v))


@pytest.mark.parametrize("name", ["slice", "fancy_pair", "mask", "int"])
def test_second_order_and_forward_mode(name):
    key, yshape, vshape = KEYS[name]
    y0, v = _inputs(yshape, vshape, np.float64)
    f = lambda a, b: _write(a, b, key)  # noqa: E731
    check_grads(f, (y0, v), order=2)
    tangents = (np.ones_like(y0), np.ones_like(v))
    _, t = tp.jvp(f, (y0, v), tangents)
    g = tp.grad(f, argnums=(0, 1))(y0, v)
    assert np.isclose(t, np.sum(g[0]) + np.sum(g[1]))
    h = tp.hessian(lambda a: f(a, v))(y0)
    assert np.allclose(h, tp.jacfwd(tp.grad(lambda a: f(a, v)))(y0))


def test_repeated_fancy_index_last_write_wins_and_alone_gets_gradient():
    def f(x):
        y = x * 1.0
        y[[0, 2, 0, 0]] = x[2:] * np.array([1.0, 2.0, 3.0, 4.0])
        return _loss(y)

    x = np.linspace(-1.0, 1.5, 6)
    y = x.copy()
    y[[0, 2, 0, 0]] = x[2:] * np.array([1.0, 2.0, 3.0, 4.0])  # NumPy: y[0] = 4 * x[5]
    assert np.isclose(tp.value_and_grad(f)(x)[0], _loss(y))
    check_grads(f, (x,))
    g = tp.grad(lambda v: _with_repeats(v))(np.array([1.0, 2.0, 3.0]))
    assert np.array_equal(g, [0.0, 0.0, 1.0])  # the overwritten writes get nothing


def _with_repeats(v):
    y = np.zeros(2) + v[0] * 0.0
    y[[1, 1, 1]] = v
    return y[1]


def test_complex_value_into_real_array_refused_and_casts_kept():
    def f(x):
        y = x * 1.0
        y[0] = x[1] * 1j
        return np.sum(y)
    with pytest.raises(TypeError, match="complex v into a real y.*np.real"):
        tp.grad(f)(np.ones(3))

    def g(x):  # float64 written into float32: y stays float32, as NumPy keeps it
        y = x * np.float32(1.0)
        y[1:] = x[:2].astype(np.float64) * 3.0
        return y
    x = np.array([1.0, 2.0, 3.0], np.float32)
    assert tp.jvp(g, (x,), (x,))[0].dtype == np.float32 == g(x.copy()).dtype
    check_grads(lambda x: np.sum(g(x) ** 2), (x,))

    def h(x):  # a real value into a complex array: the imaginary part stays
        y = x * (1.0 + 1j)
        y[0] = x[1]
        return np.sum(np.abs(y) ** 2)
    check_grads(h, (np.array([1.0, 2.0, 3.0]),))


def test_the_object_itself_takes_the_write_and_recorded_values_do_not():
    def f(x):
        y = x * 1.0
        z = y               # another name: NumPy shows it the write
        a = y * 2.0         # computed before: keeps the old values
        head = y[:2]        # a view: shows the write
        y[0] = 100.0 * x[1]
        assert z is y and np.allclose(tp.stop_gradient(z)[0], tp.stop_gradient(y)[0])
        return np.sum(a * x) + np.sum(head ** 2) + np.sum(z ** 3)

    x = np.array([0.5, -1.0, 2.0])
    y = x * 1.0
    z, a, head = y, y * 2.0, y[:2]
    y[0] = 100.0 * x[1]
    want = np.sum(a * x) + np.sum(head ** 2) + np.sum(z ** 3)
    assert np.isclose(tp.value_and_grad(f)(x)[0], want)
    check_grads(f, (x,), order=2)


def test_write_through_views_reaches_the_array_and_its_other_views():
    def f(x):
        y = x * 1.0
        tail = y[1:]
        even = y[::2]
        tail[0] = 3.0 * x[0] ** 2   # y[1]
        g = y.reshape(2, 3)
        g[1, 2] = x[3]             # y[5]
        t = g.T
        t[0, 1] = -x[4]            # y[3]
        r = np.ravel(g)
        r[2] *= 5.0                # y[2]
        return _loss(y) + np.sum(even * W[:3]) + _loss(tail)

    x = np.linspace(-1.0, 1.5, 6)
    assert np.isclose(tp.value_and_grad(f)(x)[0], f(x.copy()))
    check_grads(f, (x,), order=2)


def test_augmented_assignment_into_views():
    def f(x):
        y = x.copy()
        y[1:] *= 2.0
        y[::2] += x[:3] ** 2
        v = y[:2]
        v -= 1.0
        return _loss(y)

    x = np.linspace(-1.0, 1.5, 6)
    assert np.isclose(tp.value_and_grad(f)(x)[0], f(x.copy()))
    check_grads(f, (x,))


def test_read_only_views_refused_as_numpy_refuses():
    def diag(x):
        y = np.outer(x, x)
        np.diagonal(y)[0] = 1.0
        return np.sum(y)

    def bcast(x):
        y = np.broadcast_to(x * 1.0, (2, 3))
        y[0, 0] = 1.0
        return np.sum(y)
    for f in (diag, bcast):
        with pytest.raises(ValueError, match="read-only"), np.errstate(all="ignore"):
            f(np.ones(3))  # NumPy itself
        with pytest.raises(ValueError, match="read-only"):
            tp.grad(f)(np.ones(3))


def test_write_into_an_argument_refused_with_the_fix():
    def f(x):
        x[0] = 5.0
        return np.sum(x)

    def through_view(x):
        v = x[1:]
        v[0] = 5.0
        return np.sum(x)

    def copied(x):
        x = x.copy()
        x[0] = 5.0
        return np.sum(x ** 2)

    for g in (f, through_view):
        for transform in (tp.grad, tp.vmap, lambda f: tp.jit(tp.grad(f))):
            with pytest.raises(TypeError, match="argument.*x = x.copy()"):
                transform(g)(np.ones((2, 3)) if transform is tp.vmap else np.ones(3))
    assert np.allclose(tp.grad(copied)(np.ones(3)), [0.0, 2.0, 2.0])


def test_traced_value_into_a_plain_array_still_refused():
    def f(x):
        out = np.zeros(3)
        out[1] = x[0]
        return np.sum(out)
    with pytest.raises(TypeError, match="plain"):
        tp.grad(f)(np.ones(3))


def test_inner_differentiation_writing_into_an_outer_array():
    """Refused where the outer array cannot hold the inner value; where it
    can, what the inner tape recorded keeps the values it read."""
    def refused(x):
        y = x * 1.0

        def g(z):
            y[0] = z
            return np.sum(y)
        return tp.grad(g)(2.0)
    with pytest.raises(TypeError, match="inner differentiation or vmap"):
        tp.grad(refused)(np.ones(3))

    @tp.custom_vjp
    def mul(a, b):
        return a * b
    mul.defvjp(lambda a, b: (a * b, (a, b)), lambda res, g: (g * res[1], np.sum(g * res[0])))

    def kept(x):
        y = x * 1.0

        def g(z):
            a = y * z
            b = np.stack([y, y * z])
            c = mul(y, z)
            d = tp.checkpoint(lambda q, w: q * w)(y, z)
            y[0] = 100.0   # after the reads: they keep y's old values
            return np.sum(a) + np.sum(b) + np.sum(c) + np.sum(d)
        return tp.grad(g)(2.0)
    x = np.array([1.0, 2.0, 3.0])
    value, grad = tp.value_and_grad(kept)(x)
    assert np.isclose(value, 4 * np.sum(x)) and np.allclose(grad, 4.0)


def _program(x):
    y = x * 1.0
    y[0] = 5.0
    y[1:] = y[:-1] * x[1:]
    y[[0, 0, 2]] = x[3:] * np.array([1.0, 2.0, 3.0])
    v = y[::2]
    v += 1.0
    return np.sum(y ** 2)


_X = np.linspace(-1.0, 1.5, 6)
_XS = np.stack([_X, 2 * _X])


@pytest.mark.parametrize("how", ["jit_grad", "grad_jit", "vmap_grad", "grad_vmap", "vmap",
                                 "jit", "jit_vmap", "jvp", "hessian"])
def test_under_every_transformation(how):
    f, g = _program, tp.grad(_program)
    run, want = {
        "jit_grad": (lambda: tp.jit(g)(_X), lambda: g(_X)),
        "grad_jit": (lambda: tp.grad(tp.jit(f))(_X), lambda: g(_X)),
        "vmap_grad": (lambda: tp.vmap(g)(_XS), lambda: np.stack([g(_X), g(2 * _X)])),
        "grad_vmap": (lambda: tp.grad(lambda xs: np.sum(tp.vmap(f)(xs)))(_XS),
                      lambda: np.stack([g(_X), g(2 * _X)])),
        "vmap": (lambda: tp.vmap(f)(_XS), lambda: np.array([f(_X.copy()), f(2 * _X)])),
        "jit": (lambda: tp.jit(f)(_X), lambda: f(_X.copy())),
        "jit_vmap": (lambda: tp.jit(tp.vmap(f))(_XS), lambda: np.array([f(_X.copy()), f(2 * _X)])),
        "jvp": (lambda: tp.jvp(f, (_X,), (np.ones(6),))[1], lambda: np.sum(g(_X))),
        "hessian": (lambda: tp.hessian(f)(_X), lambda: tp.jacfwd(g)(_X)),
    }[how]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no item-by-item fallback
        got = run()
    np.testing.assert_allclose(got, want(), rtol=1e-10, atol=1e-12)
    if how == "jit_grad":
        np.testing.assert_allclose(tp.jit(g)(2 * _X), g(2 * _X), rtol=1e-10)  # the replay


def _per_item_index(x, i):
    y = x * 1.0
    y[i] = x[0] ** 2
    return np.sum(y ** 2 * np.arange(6.0))


def _per_item_rows(x, i):
    y = (x * 1.0).reshape(3, 2)
    y[i] = x[:2] * 3          # a row per item, the value per item
    y[i, 1 - i % 2] += 1.0
    y[np.stack([i, i])] = x[4:] * 5   # a repeated per-item index: the last write
    return np.sum(y ** 3)


@pytest.mark.parametrize("f", [_per_item_index, _per_item_rows], ids=["index", "rows"])
def test_vmap_per_item_value_and_index_in_one_write(f):
    idx = np.array([1, 2])
    want_g = np.stack([tp.grad(f)(_XS[k], idx[k]) for k in range(2)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one write for the batch, no item-by-item fallback
        got_v = tp.vmap(f)(_XS, idx)
        got_g = tp.vmap(tp.grad(f))(_XS, idx)
        got_gv = tp.grad(lambda xs: np.sum(tp.vmap(f)(xs, idx)))(_XS)
    assert np.allclose(got_v, [f(_XS[k].copy(), idx[k]) for k in range(2)])
    assert np.allclose(got_g, want_g) and np.allclose(got_gv, want_g)
    check_grads(lambda x: f(x, 1), (_X,))


def test_vmap_value_into_a_shared_traced_array_refused():
    def f(x):
        y = x[0] * 1.0   # not per item

        def item(r):
            y[0] = r[0]
            return np.sum(y)
        return np.sum(tp.vmap(item)(x))
    with pytest.raises(TypeError, match="inner differentiation or vmap|vmap"):
        tp.grad(f)(np.ones((2, 3)))


def _dep_index(x):
    y = x * 1.0
    y[np.argsort(x)[:3]] = x[:3] ** 2               # an index computed from x
    y[np.array([0, 0, 1]) + (np.argmax(x) > 100)] = x[3:] * 2.0   # repeats, staged under jit
    return np.sum(y ** 2)


def _rows_and_chains(x):
    y = (x * 1.0).reshape(2, 3)
    for r in y:                  # rows: views of y
        r[0] = r[1] * r[2]
    a = y.reshape(3, 2)[1:].T    # a view of a view of a view
    a[1, 0] = x[0] * 10.0
    np.flip(y)[0, 0] = 0.5 * x[1]
    np.split(y, 3, axis=1)[1][0] *= 4.0
    y[0] += y[1]
    y[:, 1] -= 1.0
    return np.sum(y ** 3)


_X6 = np.array([0.3, -1.2, 2.0, 0.7, -0.4, 1.1])


@pytest.mark.parametrize("f", [_dep_index, _rows_and_chains], ids=["dep_index", "views"])
@pytest.mark.parametrize("how", ["grad", "jit_grad", "grad_jit", "vmap_grad", "grad_vmap"])
def test_data_dependent_indices_and_views_of_views(f, how):
    g = tp.grad(f)
    if how == "grad":
        assert np.isclose(tp.value_and_grad(f)(_X6)[0], f(_X6.copy()))
        check_grads(f, (_X6,))
        return
    xs = np.stack([_X6, 1.5 * _X6])
    run = {"jit_grad": lambda: np.stack([tp.jit(g)(a) for a in xs]),  # traced, then replayed
           "grad_jit": lambda: np.stack([tp.grad(tp.jit(f))(a) for a in xs]),
           "vmap_grad": lambda: tp.vmap(g)(xs),
           "grad_vmap": lambda: tp.grad(lambda b: np.sum(tp.vmap(f)(b)))(xs)}[how]
    np.testing.assert_allclose(run(), np.stack([g(a) for a in xs]), rtol=1e-10)


def test_vmap_copy_of_the_argument_and_views_see_the_write():
    def f(x):
        y = x.copy()
        head, z = y[:2], y
        y[1] = y[0] * y[2]
        return head, z

    xs = np.array([[0.3, -1.2, 2.0], [0.7, -0.4, 1.1]])
    got = tp.vmap(f)(xs)
    want = [f(a.copy()) for a in xs]
    for k in range(2):
        np.testing.assert_allclose(got[k], np.stack([w[k] for w in want]))


def test_write_into_a_view_of_a_per_item_0d_value_refused():
    def f(x):
        s = np.sum(x)
        y = s[...]  # NumPy: a copy of a scalar, a view of a 0-d array; vmap cannot tell
        y[...] = s ** 2
        return y * x[0]
    assert np.isclose(tp.value_and_grad(f)(_X6)[0], f(_X6.copy()))  # one value: NumPy's copy
    check_grads(f, (_X6,))
    with pytest.raises(TypeError, match=r"0-d value y inside vmap.*y\[\.\.\.\]\.copy\(\)"):
        tp.vmap(f)(np.stack([_X6, _X6]))


def test_custom_rule_sees_one_object_for_an_outer_array_passed_twice():
    """The objects an inner custom_vjp's rules get for an enclosing level's
    array are their own (a later write cannot reach them), one per array."""
    seen = []

    @tp.custom_vjp
    def f3(a, b, c):
        return a * b * c

    def fwd(a, b, c):
        seen.append(a is b)
        return a * b * c, (a, b, c)
    f3.defvjp(fwd, lambda res, g: (g * res[1] * res[2], g * res[0] * res[2],
                                   np.sum(g * res[0] * res[1])))

    def outer(x):
        y = x * 1.0
        return tp.grad(lambda z: np.sum(f3(y, y, z)))(2.0)
    x = np.array([1.0, 2.0])
    assert np.allclose(tp.grad(outer)(x), 2 * x) and seen == [True]


#: NumPy's other writes into an array, now item assignment at NumPy's positions
#: (each was refused by name before).
_X9 = np.array([0.3, -1.2, 2.0, 0.7, -0.4, 1.1, 0.9, -2.0, 0.45])
WRITES = {
    "put_repeats": lambda y, x: np.put(y, [0, -1, 0], x[2:4] * 3),
    "put_wrap": lambda y, x: np.put(y, [10, 2], x[0] ** 2, mode="wrap"),
    "put_clip": lambda y, x: np.put(y, [100, -5], x[:2], mode="clip"),
    "put_method": lambda y, x: y.put([1, 2], x[:2] * 2),
    "putmask": lambda y, x: np.putmask(y, np.arange(9) % 3 == 0, x[:4] * 2),
    "place": lambda y, x: np.place(y, np.arange(9) % 3 == 1, x[:2] * 2),
    "put_along_axis": lambda y, x: np.put_along_axis(y.reshape(3, 3), np.array([[0], [2], [1]]),
                                                     x[:3, None] * 5, axis=1),
    "put_along_none": lambda y, x: np.put_along_axis(y, np.array([4, 0]), x[1] * 2, axis=None),
    "fill_diagonal": lambda y, x: np.fill_diagonal(y.reshape(3, 3), x[:2] * 4),
    "fill_diagonal_wrap": lambda y, x: np.fill_diagonal(y.reshape(9, 1), x[3], wrap=True),
    "copyto": lambda y, x: np.copyto(y.reshape(3, 3), x[:3] * 2),
    "copyto_where": lambda y, x: np.copyto(y, x[::-1], where=np.arange(9) > 4),
    "fill": lambda y, x: y[:4].fill(x[0] * 3),
}


def _writes(name):
    def f(x):
        y = x * 1.0
        WRITES[name](y, x)
        return np.sum(y ** 2 * np.arange(1.0, 10.0))
    return f


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(WRITES))
def test_numpy_in_place_functions(name, dtype):
    f, x = _writes(name), _X9.astype(dtype)
    assert np.isclose(tp.value_and_grad(f)(x)[0], f(x.copy()), rtol=1e-6)
    check_grads(f, (x,))
    if dtype is np.float64:
        g, xs = tp.grad(f), np.stack([x, 2 * x])
        np.testing.assert_allclose(tp.jit(g)(1.5 * x), g(1.5 * x), rtol=1e-12)
        np.testing.assert_allclose(tp.vmap(f)(xs), [f(a.copy()) for a in xs], rtol=1e-12)
        np.testing.assert_allclose(tp.vmap(g)(xs), np.stack([g(a) for a in xs]), rtol=1e-12)


def test_numpy_in_place_functions_refusals():
    with pytest.raises(TypeError, match="np.put would write a traced value into a plain"):
        tp.grad(lambda x: np.sum(np.put(np.zeros(3), [0], x) or x))(np.ones(1))
    with pytest.raises(TypeError, match="np.copyto would write a traced value into a plain"):
        tp.grad(lambda x: np.sum(np.copyto(np.zeros(3), x) or x))(np.ones(3))
    with pytest.raises(TypeError, match="Cannot cast.*same_kind"):
        tp.grad(lambda x: np.copyto(x * 1.0, x * 1j) or np.sum(x))(np.ones(3))
    with pytest.raises(IndexError, match="out of bounds"):
        tp.grad(lambda x: np.put(x * 1.0, [7], 1.0) or np.sum(x))(np.ones(3))
    with pytest.raises(ValueError, match="takes one value"):
        tp.grad(lambda x: (x * 1.0).fill(x[:2]) or np.sum(x))(np.ones(3))
    with pytest.raises(TypeError, match="per item.*np.where"):  # a per-item mask
        tp.vmap(lambda x: np.putmask(x * 1.0, x > 0, 0.0) or x)(np.ones((2, 3)))


# --- ufunc.at into a traced array ---------------------------------------------------------
AT_CASES = {
    "add, repeated": (np.add, [0, 0, 2]),
    "subtract, repeated": (np.subtract, [1, 1, 1]),
    "add, one index": (np.add, 2),
    "multiply, unique": (np.multiply, [0, 1, 4]),
    "maximum, unique": (np.maximum, [0, 2]),
    "negative (unary), unique": (np.negative, [0, 4]),
}


def _at_program(ufunc, idx):
    n = np.size(idx)

    def f(x):
        y = x * 1.5
        if ufunc.nin == 1:
            ufunc.at(y, idx)
        else:
            ufunc.at(y, idx, (x[3:3 + n] if np.ndim(idx) else x[5]) ** 2)
        return y
    return f


@pytest.mark.parametrize("name", sorted(AT_CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ufunc_at_writes_into_a_traced_array(name, dtype):
    """``np.add.at(y, idx, v)`` and the other ufuncs' ``at`` on a traced ``y``:
    NumPy's values (repeats accumulate for add/subtract), exact gradients."""
    ufunc, idx = AT_CASES[name]
    f = _at_program(ufunc, idx)
    x = np.linspace(-1.2, 1.1, 6).astype(dtype)
    np.testing.assert_allclose(tp.vjp(f, x)[0], f(x), rtol=1e-6)
    assert tp.vjp(f, x)[0].dtype == dtype
    check_grads(lambda x: np.sum(np.sin(f(x))), (x,), order=2)
    g = tp.grad(lambda x: np.sum(np.sin(f(x))))
    np.testing.assert_allclose(tp.jit(g)(x), g(x), rtol=1e-6)
    np.testing.assert_allclose(tp.grad(tp.jit(lambda x: np.sum(np.sin(f(x)))))(x), g(x),
                               rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xs = np.stack([x, -x])
        np.testing.assert_allclose(tp.vmap(g)(xs), np.stack([g(x), g(-x)]), rtol=1e-6)


def test_ufunc_at_repeats_of_other_ufuncs_and_inputs_refused_by_name():
    def mul_rep(x):
        y = x * 1.0
        np.multiply.at(y, [0, 0], 2.0)
        return np.sum(y)
    with pytest.raises(TypeError, match=r"np\.multiply\.at.*repeated indices"):
        tp.grad(mul_rep)(np.ones(3))

    def into_input(x):
        np.add.at(x, [0], 1.0)
        return np.sum(x)
    with pytest.raises(TypeError, match="argument of the function being transformed"):
        tp.grad(into_input)(np.ones(3))


def test_ufunc_at_updates_aliases_and_views_as_numpy_does():
    def f(x):
        y = x * 1.0
        z, head = y, y[:2]
        np.add.at(y, [0, 0], x[2])
        return z[0] + head[0] * 10.0
    x = np.array([1.0, 2.0, 3.0])
    y = x * 1.0
    z, head = y, y[:2]
    np.add.at(y, [0, 0], x[2])
    assert tp.vjp(f, x)[0] == z[0] + head[0] * 10.0
    np.testing.assert_allclose(tp.grad(f)(x), [11.0, 0.0, 22.0])


# --- augmented assignment in place: another name sees it, as in NumPy --------------------
def _alias_program(x):
    y = x * 1.5
    z, head = y, y[:2]
    y += x ** 2
    y *= x
    s = np.sum(x)          # 0-d: rebound (NumPy's scalars rebind too)
    t = s
    s += 1.0
    return np.sum(z * x) + np.sum(head) * t + s


def test_augmented_assignment_updates_other_names_as_numpy_does():
    x = np.array([0.5, -1.0, 2.0])
    assert np.isclose(tp.vjp(_alias_program, x)[0], _alias_program(x))
    for dtype in (np.float64, np.float32):
        check_grads(_alias_program, (x.astype(dtype),), order=2)
    g = tp.grad(_alias_program)
    np.testing.assert_allclose(tp.jit(g)(x), g(x))
    np.testing.assert_allclose(tp.grad(tp.jit(_alias_program))(x), g(x))
    xs = np.stack([x, -x, 2 * x])
    np.testing.assert_allclose(tp.vmap(_alias_program)(xs), [_alias_program(r) for r in xs])
    np.testing.assert_allclose(tp.vmap(g)(xs), np.stack([g(r) for r in xs]))
    np.testing.assert_allclose(tp.grad(lambda xs: np.sum(tp.vmap(_alias_program)(xs)))(xs),
                               np.stack([g(r) for r in xs]))
    np.testing.assert_allclose(tp.hessian(_alias_program)(x),
                               tp.jacobian(g)(x), rtol=1e-10)


def test_augmented_assignment_on_an_argument_or_an_inner_value_rebinds():
    def on_argument(x):
        z = x
        x += 1.0            # rebound: the caller's array and z unchanged
        return np.sum(x * z)
    a = np.ones(2)
    np.testing.assert_allclose(tp.grad(on_argument)(a), 2 * a + 1.0)
    np.testing.assert_array_equal(a, np.ones(2))

    def outer(w):
        y = w * 1.0
        z = y

        def inner(v):
            u = y           # the enclosing level's array
            u += v          # inner value: u is rebound, y keeps its values
            return np.sum(u ** 2)
        return np.sum(tp.grad(inner)(w)) + np.sum(z)
    w = np.array([0.3, 0.7])
    value, grad = tp.value_and_grad(outer)(w)   # inner grad: 2 (y + v) = 4 w
    np.testing.assert_allclose(value, 5 * np.sum(w))
    np.testing.assert_allclose(grad, [5.0, 5.0])
