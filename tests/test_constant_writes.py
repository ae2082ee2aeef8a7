"""A plain NumPy array written after a traced operation read it.

The backward sweep runs after the whole function: a rule that reads a
plain array (``x * buf``'s rule reads ``buf``) must see the values the
operation saw, not what the function wrote into the array afterwards (a
scratch buffer reused in a loop, an index array refilled, a mask cleared).
Each case is compared with the same function written with fresh arrays
(no writes), with central differences, and across the transformations.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapestry as tp
from tapestry.core.tape import COPY_ALWAYS, Tape
from tapestry.testing import check_grads


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def scratch_loop(n):
    """The reused-buffer loop: ``buf`` holds k+1 at the k-th product."""
    def f(x):
        buf = np.zeros(n)
        total = 0.0
        for k in range(3):
            buf[:] = k + 1.0
            total = total + np.sum(np.sin(x) * buf)
        return total

    def fresh(x):
        return sum(np.sum(np.sin(x) * np.full(n, k + 1.0)) for k in range(3))
    return f, fresh


@pytest.mark.parametrize("n", [3, COPY_ALWAYS // 8 + 5])  # copied each use; compared
def test_scratch_buffer_reused_in_a_loop(n):
    f, fresh = scratch_loop(n)
    x = np.linspace(0.1, 0.9, n)
    want = tp.grad(fresh)(x)
    np.testing.assert_allclose(want, 6.0 * np.cos(x))
    np.testing.assert_allclose(tp.grad(f)(x), want)
    np.testing.assert_allclose(tp.value_and_grad(f)(x)[1], want)
    np.testing.assert_allclose(tp.vjp(f, x)[1](1.0)[0], want)
    np.testing.assert_allclose(tp.jit(tp.grad(f))(x), want)
    np.testing.assert_allclose(tp.jit(tp.grad(f))(x), want)  # the replay
    np.testing.assert_allclose(tp.jvp(f, (x,), (np.ones(n),))[1], np.sum(want))
    np.testing.assert_allclose(tp.vmap(tp.grad(f))(np.stack([x, x])), [want, want])
    np.testing.assert_allclose(tp.grad(lambda x: f(x) ** 2)(x), 2 * f(x) * want)
    if n < 10:
        np.testing.assert_allclose(tp.hessian(f)(x), tp.hessian(fresh)(x), atol=1e-12)
        np.testing.assert_allclose(_fd(f, x), want, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_written_after_use_each_kind_of_operation(dtype):
    """Products, matmul, where, power, index arrays, masks, keywords."""
    def run(write):
        def f(x):
            w = np.linspace(1.0, 2.0, 5).astype(dtype)
            A = (np.eye(5) * 2.0).astype(dtype)
            idx = np.array([0, 1, 1])
            m = np.array([True, False, True, False, True])
            lo = np.full(5, 0.35, dtype)
            total = np.sum(x * w) + np.sum((A @ x) ** 2) + np.sum(x ** w)
            total = total + np.sum(x[idx] ** 2) + np.sum(np.take(x, idx) ** 3)
            total = total + np.sum(x[m] ** 2) + np.sum(np.clip(x, lo, 0.8) ** 2)
            total = total + np.sum(np.where(m, x ** 2, x))
            if write:
                w[:] = 7.0
                A[:] = 1.0
                idx[:] = [4, 4, 3]
                m[:] = ~m
                lo[:] = 0.0
            return total
        return f
    x = np.linspace(0.2, 0.9, 5).astype(dtype)
    want = tp.grad(run(False))(x)
    got = tp.grad(run(True))(x)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    check_grads(run(True), (x.astype(np.float64),))


def test_written_index_key_of_item_assignment():
    def f(x, write):
        y = np.zeros(4) * x[0]
        key = np.array([1, 3])
        y[key] = x[:2] ** 2
        if write:
            key[:] = 0
        return np.sum(y * np.arange(1.0, 5.0))
    x = np.array([0.3, 0.7, 1.1])
    np.testing.assert_allclose(tp.grad(lambda x: f(x, True))(x), tp.grad(lambda x: f(x, False))(x))


def test_keyword_array_written_after_use():
    def f(x, write):
        m = np.array([True, False, True])
        s = np.sum(x ** 2, where=m)
        if write:
            m[:] = False
        return s
    x = np.array([0.3, 0.7, 1.1])
    np.testing.assert_allclose(tp.grad(lambda x: f(x, True))(x), [0.6, 0.0, 2.2])


def test_out_buffer_reused():
    def f(x):
        b = np.empty(3)
        t = 0.0
        for k in range(3):
            np.multiply(np.arange(3.0), k + 1, out=b)
            t = t + np.sum(np.sin(x) * b)
        return t
    x = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(tp.grad(f)(x), 6 * np.arange(3.0) * np.cos(x))


def test_view_written_through_its_base_and_0d_and_empty():
    def f(x):
        base = np.linspace(1.0, 2.0, 6)
        v = base[1:4]
        s = np.sum(x * v)
        base[:] = -1.0  # through the base: v sees it
        z = np.array(2.0)
        s = s + np.sum(x * z)
        z[...] = 9.0
        e = np.zeros((0,))
        s = s + np.sum(np.concatenate([x, e]) * np.ones(3))
        return s
    x = np.array([0.3, 0.7, 1.1])
    np.testing.assert_allclose(tp.grad(f)(x), np.linspace(1.0, 2.0, 6)[1:4] + 2.0 + 1.0)


def test_shape_changed_in_place_between_uses():
    def f(x):
        b = np.arange(1.0, 601.0)
        s = np.sum(x * b)
        b.shape = (600, 1)
        return s + np.sum(x * b.ravel())
    x = np.linspace(0.0, 1.0, 600)
    np.testing.assert_allclose(tp.grad(f)(x), 2 * np.arange(1.0, 601.0))


def test_own_constant_copies_once_per_value_and_spares_read_only_memory():
    t = Tape()
    small = np.ones(3)
    assert t.own_constant(small) is not small
    big = np.ones(COPY_ALWAYS)  # 8 * 4096 bytes: kept once, compared after
    c1 = t.own_constant(big)
    assert c1 is not big and t.own_constant(big) is c1
    big[7] = 2.0
    c2 = t.own_constant(big)
    assert c2 is not c1 and c1[7] == 1.0 and c2[7] == 2.0
    strided = np.ones(2 * COPY_ALWAYS)[::2]
    s1 = t.own_constant(strided)
    assert t.own_constant(strided) is s1
    strided[0] = 5.0
    assert t.own_constant(strided)[0] == 5.0 and s1[0] == 1.0
    frozen = np.ones(COPY_ALWAYS)
    frozen.setflags(write=False)
    assert t.own_constant(frozen) is frozen  # nothing can write into it


def test_read_only_data_gives_the_same_gradient():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((50, 4))
    frozen = data.copy()
    frozen.setflags(write=False)
    w = rng.standard_normal(4)
    g1 = tp.grad(lambda w: np.sum(np.tanh(data @ w)))(w)
    g2 = tp.grad(lambda w: np.sum(np.tanh(frozen @ w)))(w)
    np.testing.assert_array_equal(g1, g2)


def test_custom_rules_read_their_plain_array_arguments_as_called():
    @tp.custom_vjp
    def scaled(x, c):
        return x * c
    scaled.defvjp(lambda x, c: (x * c, c), lambda c, g: (g * c, None))

    @tp.custom_jvp
    def scaled_j(x, c):
        return x * c

    @scaled_j.defjvp
    def _(primals, tangents):
        x, c = primals
        return x * c, tangents[0] * c

    c0 = np.array([1.0, 2.0, 3.0])
    want = 2 * np.array([0.3, 0.7, 1.1]) * c0 ** 2
    for fn in (scaled, scaled_j):
        def f(x):
            c = c0.copy()
            s = np.sum(fn(x, c) ** 2)
            c[:] = 0.0
            return s
        x = np.array([0.3, 0.7, 1.1])
        np.testing.assert_allclose(tp.grad(f)(x), want)
        np.testing.assert_allclose(tp.jit(tp.grad(f))(x), want)


def test_checkpoint_closure_written_after_use_is_refused_by_name():
    def f(x):
        c = np.array([1.0, 2.0, 3.0])
        s = np.sum(tp.checkpoint(lambda x: np.sin(x) * c)(x))
        c[:] = 0.0
        return s
    with pytest.raises(Exception, match="checkpoint"):
        tp.grad(f)(np.array([0.3, 0.7, 1.1]))


def test_memmap_written_after_use(tmp_path):
    def f(x):
        m = np.memmap(tmp_path / "m.dat", dtype=np.float64, mode="w+", shape=(3,))
        m[:] = [1.0, 2.0, 3.0]
        s = np.sum(x * m) + np.sum(np.multiply(m, x ** 2))
        m[:] = 0.0
        return s
    x = np.array([0.3, 0.7, 1.1])
    np.testing.assert_allclose(tp.grad(f)(x), [1.0, 2.0, 3.0] * (1 + 2 * x))


def test_a_fresh_array_per_step_is_not_kept_alive_by_the_tape():
    """The tape holds its copy, not the caller's array (a loop making a new
    constant each step keeps one array per step, not two)."""
    import weakref
    t = Tape()
    a = np.arange(float(COPY_ALWAYS))
    ref = weakref.ref(a)
    c = t.own_constant(a)
    del a
    assert ref() is None
    b = np.arange(float(COPY_ALWAYS)) + 1.0  # may reuse a's id: gets its own copy
    assert t.own_constant(b)[0] == 1.0 and c[0] == 0.0


@pytest.mark.parametrize("transform", ["grad", "jit(grad)", "hessian", "jvp"])
def test_a_traced_value_written_through_flat_names_the_write(transform):
    """``out.flat[0] = v`` with a traced ``v``: NumPy's flat iterator drops
    tapestry's refusal of ``float(v)`` and raises "Error setting single item
    of array.", naming neither the write nor the fix; the error says both,
    as for ``out[0] = v``."""
    def f(x):
        out = np.zeros(3)
        out.flat[0] = x[0]
        return np.sum(out)
    x = np.ones(3)
    call = {"grad": lambda: tp.grad(f)(x), "jit(grad)": lambda: tp.jit(tp.grad(f))(x),
            "hessian": lambda: tp.hessian(f)(x), "jvp": lambda: tp.jvp(f, (x,), (x,))}
    with pytest.raises(TypeError, match=r"writing a traced array into a plain NumPy array"):
        call[transform]()


def test_numpys_own_flat_error_passes_unchanged():
    """The same NumPy error with no traced value behind it is the
    function's own: it passes as it is."""
    def f(x):
        out = np.zeros(3)
        out.flat[0] = np.ones(2)  # NumPy's own error
        return np.sum(x)
    with pytest.raises(ValueError, match="Error setting single item"):
        tp.grad(f)(np.ones(3))


@pytest.mark.parametrize("transform", ["grad", "jit(grad)", "jvp", "vmap(grad)"])
def test_the_fix_the_refusal_names_differentiates(transform):
    """The refusal of ``out[i] = v`` into ``np.zeros(n)`` names
    ``np.zeros_like(x, shape=(n,))``: that buffer is followed, and its
    gradient is the loop's (checked against finite differences)."""
    from tapestry.testing import check_grads

    def plain(x):
        out = np.zeros(4)
        for i in range(3):
            out[i + 1] = x[i] ** 2 * x[(i + 1) % 3]
        return np.sum(out * np.arange(1.0, 5.0))

    def fixed(x):
        out = np.zeros_like(x, shape=(4,))
        for i in range(3):
            out[i + 1] = x[i] ** 2 * x[(i + 1) % 3]
        return np.sum(out * np.arange(1.0, 5.0))
    x = np.array([0.3, -1.2, 0.7])
    with pytest.raises(TypeError, match=r"np\.zeros_like\(x, shape=\(n,\)\)"):
        tp.grad(plain)(x)
    assert fixed(x) == pytest.approx(plain(x), rel=1e-15)
    if transform == "grad":
        check_grads(fixed, (x,), order=2)
    elif transform == "jit(grad)":
        np.testing.assert_allclose(tp.jit(tp.grad(fixed))(x), tp.grad(fixed)(x), rtol=1e-15)
    elif transform == "jvp":
        t = np.array([1.0, 0.5, -2.0])
        np.testing.assert_allclose(tp.jvp(fixed, (x,), (t,))[1], tp.grad(fixed)(x) @ t,
                                   rtol=1e-12)
    else:
        xs = np.stack([x, x * 2.0, -x])
        want = np.stack([tp.grad(fixed)(r) for r in xs])
        np.testing.assert_allclose(tp.vmap(tp.grad(fixed))(xs), want, rtol=1e-12)
