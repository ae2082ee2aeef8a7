"""``tapestry.jit`` composed with every other transformation, in both orders
(``jit(T(f))`` and ``T(jit(f))``), in float64 and float32, on 0-d, empty and
ordinary arrays, against ``T(f)`` without jit: bit for bit (the NumPy replay,
``fuse=False``).  Each call is made on two inputs, so the second is a replay."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapestry as tp
from jit_checks import same


def f(x, w):
    """A scalar function of an array and a weight, with a reduction, a
    transcendental, broadcasting and a keyword argument inside."""
    return np.sum(np.tanh(x * w) ** 2, axis=None) + np.mean(np.sin(x), keepdims=False)


def f_vec(x, w):
    return np.tanh(x * w) + np.sin(x) * 2.0


ck = tp.custom_vjp(lambda x, w: np.sum(np.tanh(x * w) ** 2))
ck.defvjp(lambda x, w: (np.sum(np.tanh(x * w) ** 2), (x, w)),
          lambda res, g: (g * 2 * np.tanh(res[0] * res[1]) * (1 - np.tanh(res[0] * res[1]) ** 2)
                          * res[1],
                          g * np.sum(2 * np.tanh(res[0] * res[1])
                                     * (1 - np.tanh(res[0] * res[1]) ** 2) * res[0])))

#: name -> (transform of a function of (x, w), the function it transforms)
TRANSFORMS = {
    "grad": (lambda g: tp.grad(g), f),
    "grad_argnums": (lambda g: tp.grad(g, argnums=(0, 1)), f),
    "value_and_grad": (lambda g: tp.value_and_grad(g), f),
    "vjp": (lambda g: (lambda x, w: tp.vjp(lambda x: g(x, w), x)[1](np.ones_like(x))),
            f_vec),
    "jacobian": (lambda g: tp.jacobian(g), f_vec),
    "jacfwd": (lambda g: tp.jacfwd(g), f_vec),
    "hessian": (lambda g: tp.hessian(g), f),
    "hvp": (lambda g: (lambda x, w: tp.hessian_vector_product(g)(x, w, np.ones_like(x))), f),
    "jvp": (lambda g: (lambda x, w: tp.jvp(lambda x: g(x, w), (x,), (np.ones_like(x),))), f_vec),
    "linearize": (lambda g: (lambda x, w: tp.linearize(lambda x: g(x, w), x)[1](
        np.ones_like(x))), f_vec),
    "elementwise_grad": (lambda g: tp.elementwise_grad(g), f_vec),
    "vmap": (lambda g: tp.vmap(g, in_axes=(0, None)), f),
    "vmap_grad": (lambda g: tp.vmap(tp.grad(g), in_axes=(0, None)), f),
    "grad_vmap": (lambda g: tp.grad(lambda x, w: np.sum(tp.vmap(g, in_axes=(0, None))(x, w))),
                  f),
    "checkpoint": (lambda g: tp.grad(tp.checkpoint(g)), f),
    "custom_vjp": (lambda g: tp.grad(lambda x, w: g(x, w) + ck(x, w)), f),
    "parallel_sum": (lambda g: tp.grad(lambda x, w: tp.parallel_sum(
        lambda r, w: g(r, w), list(x), w, executor="threads", chunk_size=2)), f),
    "parallel_map": (lambda g: (lambda x, w: tp.parallel_map(
        lambda r, w: g(r, w), list(x), w, chunk_size=2)), f),
}

#: transformations that map over a leading axis: inputs get one
_MAPS = {"vmap", "vmap_grad", "grad_vmap", "parallel_sum", "parallel_map"}


def _inputs(name, shape, dtype, k):
    r = np.random.default_rng(k)
    if name in _MAPS:
        shape = (3,) + shape
    x = r.standard_normal(shape).astype(dtype)
    return x, dtype(0.7 + 0.1 * k)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(4,), (), (0,)])
@pytest.mark.parametrize("order", ["jit_outside", "jit_inside"])
@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_jit_composed_with(name, order, shape, dtype):
    T, g = TRANSFORMS[name]
    if shape == (0,) and name in ("hessian", "jacobian", "jacfwd"):
        shape = (2,)  # (an empty Jacobian is fine too, but says less)
    plain = T(g)
    if order == "jit_outside":
        composed = tp.jit(plain, fuse=False)
    else:
        composed = T(tp.jit(g, fuse=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error", tp.JitWarning)  # compiled, never run uncompiled
        for k in range(2):
            x, w = _inputs(name, shape, dtype, k)
            try:
                want = plain(x, w)
            except (TypeError, ValueError, NotImplementedError) as e:
                with pytest.raises(type(e)):
                    composed(x, w)
                continue
            same(composed(x, w), want)


@pytest.mark.parametrize("order", ["jit_outside", "jit_inside"])
def test_jit_with_grad_on_complex_inputs(order):
    h = lambda z: np.sum(np.abs(np.sin(z)) ** 2)  # noqa: E731
    z = np.array([1 + 2j, 0.5 - 1j])
    plain = tp.grad(h)
    composed = tp.jit(plain, fuse=False) if order == "jit_outside" else tp.grad(tp.jit(h))
    for k in range(2):
        same(composed(z * (k + 1)), plain(z * (k + 1)))


@pytest.mark.parametrize("order", ["jit_outside", "jit_inside"])
def test_jit_with_grad_keywords_and_integer_arguments(order):
    def h(x, n, *, scale=1.0):
        return np.sum(x[:n] ** 2) * scale
    plain = tp.grad(h)
    composed = (tp.jit(plain, fuse=False) if order == "jit_outside"
                else tp.grad(tp.jit(h, fuse=False)))
    x = np.arange(5.0)
    for n, s in ((2, 1.0), (3, 2.0), (2, 3.0)):
        same(composed(x, n, scale=s), plain(x, n, scale=s))


def test_pytrees_of_different_structure_meet_by_name_under_jit():
    pb = tp.jit(lambda p, c: tp.vjp(lambda p: {"a": p["w"] * 2}, p)[1](c))
    p = {"w": np.ones(2)}
    same(pb(p, {"a": np.ones(2)}), tp.vjp(lambda p: {"a": p["w"] * 2}, p)[1]({"a": np.ones(2)}))
    with pytest.raises(Exception, match="'b'|structure|keys"):
        pb(p, {"b": np.ones(2)})


def test_vmap_of_a_jit_compiles_the_batched_function():
    f = tp.jit(lambda w, x: np.tanh(x @ w).sum(), fuse=False)
    v = tp.vmap(f, in_axes=(None, 0))
    plain = tp.vmap(lambda w, x: np.tanh(x @ w).sum(), in_axes=(None, 0))
    r = np.random.default_rng(11)
    w = r.normal(size=(3, 2))
    for _ in range(3):
        X = r.normal(size=(5, 3))
        assert np.array_equal(v(w, X), plain(w, X))
    assert v.cache_info()["traces"] == 1 and v.cache_info()["programs"] == 1
    g = tp.grad(lambda w: np.sum(v(w, X)))(w)
    assert np.array_equal(g, tp.grad(lambda w: np.sum(plain(w, X)))(w))
    gv = tp.vmap(tp.jit(tp.grad(lambda w, x: np.tanh(x @ w).sum())), in_axes=(None, 0))(w, X)
    assert np.array_equal(gv, tp.vmap(tp.grad(lambda w, x: np.tanh(x @ w).sum()),
                                      in_axes=(None, 0))(w, X))


def test_vmap_of_a_jit_is_made_once_per_axes():
    """``vmap(jit(f))`` called afresh (as ``parallel_sum(jit(f), ...,
    vectorize=True)`` does every call) reuses one compiled program per axes,
    instead of a new jit that traces again every time."""
    f = tp.jit(lambda w, x: np.tanh(x @ w).sum(), fuse=False)
    r = np.random.default_rng(12)
    w, X = r.normal(size=(3, 2)), r.normal(size=(5, 3))
    axes = {"w": None, "x": 0}
    made = [tp.vmap(f, in_axes=(None, 0)) for _ in range(3)]
    assert made[0] is made[1] is made[2]
    assert tp.vmap(f, in_axes=[None, 0]) is made[0]  # (a list is a tuple of axes)
    assert tp.vmap(f, in_axes=(0, 0)) is not made[0]
    assert tp.vmap(f, in_axes=(None, 0), out_axes=0) is made[0]
    for _ in range(3):
        tp.vmap(f, in_axes=(None, 0))(w, X)
    assert made[0].cache_info()["traces"] == 1
    d = tp.jit(lambda p: np.tanh(p["x"] @ p["w"]).sum(), fuse=False)
    v = tp.vmap(d, in_axes=(axes,))
    assert tp.vmap(d, in_axes=({"w": None, "x": 0},)) is v
    assert tp.vmap(d, in_axes=({"x": 0, "w": None},)) is not v  # (key order: not assumed)
    same(v({"w": w, "x": X}), tp.vmap(d.fun, in_axes=(axes,))({"w": w, "x": X}))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_jit_of_vmap_indexes_an_unbatched_array_by_a_per_item_index(dtype):
    """``u[j]`` with ``u`` passed with ``in_axes=None`` and ``j`` one index
    per item, inside ``jit(vmap(f))``: the staged ``u`` hands the batched
    index to vmap's gather (Python does not reflect ``[]``, so deferring
    with NotImplemented made NotImplemented the value, and the jit ran
    uncompiled).  Values and gradients as without jit."""
    def f(x, j, u, a):
        return np.sum(a * x + u[j]) - 0.5 * u[j] * u[j]
    r = np.random.default_rng(13)
    X, J = r.normal(size=(6, 4)).astype(dtype), np.array([0, 2, 1, 2, 0, -1])
    U = r.normal(size=3).astype(dtype)
    axes = (0, 0, None, None)
    jf = tp.jit(tp.vmap(f, in_axes=axes))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no JitWarning: it compiles)
        for _ in range(2):
            same(jf(X, J, U, 1.5), tp.vmap(f, in_axes=axes)(X, J, U, 1.5))
    assert jf.cache_info()["programs"] == 1

    def loss(u, a, g):
        return np.sum(g(f, in_axes=axes)(X, J, u, a))
    for _ in range(2):
        same(tp.grad(loss, argnums=(0, 1))(U, 1.5, lambda *a, **k: tp.jit(tp.vmap(*a, **k))),
             tp.grad(loss, argnums=(0, 1))(U, 1.5, tp.vmap))
