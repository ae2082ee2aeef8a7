"""Default jit (the NumPy replay) in compositions, compared bit for bit
with the plain call: forward mode through a jitted function."""
import numpy as np
import pytest

import tapestry as tp


def _same(a, b):
    la, lb = tp.tree_util.tree_leaves(a), tp.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes(), (x, y)


def _f(x):
    return np.sin(x) ** 3 * x[0]


def _two(x, W):
    h = np.tanh(x @ W)
    return {"h": h * x[1], "s": np.sum(np.exp(h) * x)}


@pytest.mark.parametrize("seed", range(4))
def test_jacfwd_of_jit_has_the_plain_bits(seed):
    # the node's tangent was the pullback transposed: the same Jacobian with
    # other rounding (-2.2e-16 in an entry)
    jf = tp.jit(_f)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        x = rng.normal(size=5)
        _same(tp.jacfwd(_f)(x), tp.jacfwd(jf)(x))


@pytest.mark.parametrize("seed", range(3))
def test_jvp_and_jacfwd_of_jit_with_several_outputs_and_arguments(seed):
    jf = tp.jit(_two)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        x, W = rng.normal(size=3), rng.normal(size=(3, 3))
        tx, tW = rng.normal(size=3), rng.normal(size=(3, 3))
        _same(tp.jvp(_two, (x, W), (tx, tW)), tp.jvp(jf, (x, W), (tx, tW)))
        _same(tp.jacfwd(_two, argnums=(0, 1))(x, W), tp.jacfwd(jf, argnums=(0, 1))(x, W))
        _same(tp.linearize(_two, x, W)[1](tx, tW), tp.linearize(jf, x, W)[1](tx, tW))


def test_forward_mode_through_jit_sees_a_closure_changed_in_place():
    C = np.array([1.0, 2.0, 3.0])

    def f(x):
        return np.sin(x * C) * C

    jf = tp.jit(f)
    x, t = np.array([0.3, -0.2, 0.9]), np.array([1.0, 0.5, -2.0])
    for _ in range(3):
        _same(tp.jvp(f, (x,), (t,)), tp.jvp(jf, (x,), (t,)))
        _same(tp.jacfwd(f)(x), tp.jacfwd(jf)(x))
        C[0] += 0.7


def test_forward_mode_through_jit_keeps_the_type_of_a_constant_outputs_tangent():
    # an output that does not depend on the inputs: the transposed pullback
    # gave a 0-d array where the plain sweep gives a NumPy scalar
    def g(x, y):
        return {"a": x * 2, "b": np.ones(2) * 3.0, "c": y}

    jg = tp.jit(g)
    x, t = np.array([1.0, -2.0]), np.array([0.0, -0.0])
    for _ in range(3):
        _same(tp.jvp(g, (x, 2.0), (t, 0.0)), tp.jvp(jg, (x, 2.0), (t, 0.0)))
        a, b = tp.jvp(g, (x, 2.0), (t, 0.0))[1], tp.jvp(jg, (x, 2.0), (t, 0.0))[1]
        assert all(type(a[k]) is type(b[k]) for k in a)
        _same(tp.jacfwd(g, argnums=(0, 1))(x, 2.0), tp.jacfwd(jg, argnums=(0, 1))(x, 2.0))


def _loss(x):
    return np.sum(np.sin(x) ** 3 * x[0]) + np.prod(np.cos(x[:2]))


@pytest.mark.parametrize("seed", range(3))
def test_forward_mode_over_a_jitted_gradient_has_the_plain_bits(seed):
    # a Hessian as jacfwd(jit(grad(f))): a common way to write it
    jg = tp.jit(tp.grad(_loss))
    g = tp.grad(_loss)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        x = rng.normal(size=4)
        _same(tp.jacfwd(g)(x), tp.jacfwd(jg)(x))
        _same(tp.jvp(g, (x,), (x * 0.5,)), tp.jvp(jg, (x,), (x * 0.5,)))
        _same(tp.linearize(g, x)[1](x), tp.linearize(jg, x)[1](x))


# --- constants the function returns that share memory ---------------------------------
def _c_twice(x):
    c = np.ones(3)
    return c, c, x * 2


def _c_and_view(x):
    c = np.ones(3)
    return c, c[1:], x * c.sum()


def _views_of_one(x):
    c = np.arange(6.0).reshape(2, 3)
    return {"row": c[1], "col": c[:, 0], "y": x + 1}


def _f_order(x):
    c = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    return c, c[:, 1], c.T, x


def _objects(x):
    c = np.array([1, "a", None], dtype=object)
    return c, c[1:], x


@pytest.fixture
def always_whole(monkeypatch):
    """fuse=True keeps whole-program kernels whenever they compile."""
    from tapestry.jit import api
    monkeypatch.setattr(api, "_faster", lambda new, old, inputs, repeats=5: True)


@pytest.mark.filterwarnings("ignore::tapestry.JitWarning")
@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("f", [_c_twice, _c_and_view, _views_of_one, _f_order, _objects])
def test_returned_constants_share_memory_as_in_the_plain_call(f, fuse, always_whole):
    # each constant output was copied on its own: `a, b = jf(x); a[0] = 5`
    # left b alone where the plain call's b changes with a
    jf = tp.jit(f, fuse=fuse)
    x = np.arange(3.0)
    for _ in range(6):
        a = tp.tree_util.tree_leaves(f(x))
        b = tp.tree_util.tree_leaves(jf(x))
        _same(a, b)
        for i in range(len(a)):
            for j in range(len(a)):
                assert (a[i] is a[j]) == (b[i] is b[j])
                assert np.shares_memory(a[i], a[j]) == np.shares_memory(b[i], b[j])
            assert not any(np.shares_memory(b[i], y) for y in tp.tree_util.tree_leaves(f(x))
                           if not np.shares_memory(y, x))  # (nor the trace's constants)
    # a write into one output shows in those sharing its memory (the last
    # call's: a write into the trace's own result makes the next call trace again)
    for k in range(len(a)):
        if a[k].dtype.kind == "f" and a[k].flags.writeable and a[k].size:
            a[k].flat[-1] = 7.5
            b[k].flat[-1] = 7.5
    _same(a, b)
    assert jf.cache_info()["traces"] == 1


@pytest.mark.parametrize("elements", [1 << 22, 5000, 1])
def test_jacfwd_of_jit_pushes_chunks_through_a_large_intermediate(elements, monkeypatch):
    # jacfwd pushes as many tangents at once as f's largest value allows;
    # the jitted call pushes the batch it is handed through f in such chunks
    import tapestry.core.api_forward as forward
    monkeypatch.setattr(forward, "_BATCH_ELEMENTS", elements)
    W = np.random.default_rng(3).normal(size=(40, 40))

    def f(x):
        h = np.tanh(np.outer(x, x) @ W)
        return {"a": h.sum(axis=1)[:5] * x[:5], "b": np.ones(2)}

    jf = tp.jit(f)
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.normal(size=40)
        _same(tp.jacfwd(f)(x), tp.jacfwd(jf)(x))


def _g(x):
    return np.sin(x) ** 3 * x[0] + np.exp(x[1] * x)


@pytest.mark.parametrize("seed", range(3))
def test_traced_tangents_through_jit_have_the_plain_bits(seed):
    # tangents batched by vmap, a jvp of a jvp, a gradient of a jvp
    jg = tp.jit(_g)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        x, T = rng.normal(size=3), rng.normal(size=(4, 3))
        _same(tp.vmap(lambda t: tp.jvp(_g, (x,), (t,))[1])(T),
              tp.vmap(lambda t: tp.jvp(jg, (x,), (t,))[1])(T))
        _same(tp.jvp(lambda x: tp.jvp(_g, (x,), (x,))[1], (x,), (x * 2,)),
              tp.jvp(lambda x: tp.jvp(jg, (x,), (x,))[1], (x,), (x * 2,)))
        _same(tp.grad(lambda x: np.sum(tp.jvp(_g, (x,), (x,))[1]))(x),
              tp.grad(lambda x: np.sum(tp.jvp(jg, (x,), (x,))[1]))(x))
        _same(tp.vmap(tp.jacfwd(_g))(T), tp.vmap(tp.jacfwd(jg))(T))
