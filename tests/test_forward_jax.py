"""Differential tests against JAX: the same functions, written once over a
NumPy-like module, through tapestry's and JAX's jvp / linearize / jacfwd /
jacrev / hessian; pytree results compared leaf by leaf, structure included.
Skipped when JAX is not installed."""
import numpy as np
import pytest

import tapestry as tp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4))


def mlp(m, p, x):
    h = m.tanh(p["W"] @ x + p["b"])
    return m.sum(h ** 2) + m.sum(m.exp(-p["b"] ** 2))


def dict_out(m, x):
    return {"s": m.sin(x), "pair": (x[0] * x, m.sum(x ** 3)), "mat": A @ x}


def two_args(m, a, b):
    return m.sum(m.tanh(b @ a)) * m.sum(a ** 2) + m.prod(b[0])


def with_aux(m, x):
    return m.sum(m.log1p(x ** 2)), {"norm": m.sum(x ** 2)}


def _params():
    return ({"W": rng.standard_normal((3, 4)), "b": rng.standard_normal(3)},
            rng.standard_normal(4))


def _same(ours, theirs):
    """Same structure (as JAX builds it) and the same leaves."""
    o_leaves, o_td = jax.tree_util.tree_flatten(ours)  # key order as JAX sorts it
    t_leaves, t_def = jax.tree_util.tree_flatten(theirs)
    assert len(o_leaves) == len(t_leaves), (o_td, t_def)
    assert jax.tree_util.tree_structure(ours) == t_def
    for a, b in zip(o_leaves, t_leaves):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


def test_jvp_and_linearize_on_pytrees():
    p, x = _params()
    tp_ = tp.tree_map(lambda l: rng.standard_normal(np.shape(l)), p)
    tx = rng.standard_normal(4)
    ours = tp.jvp(lambda p, x: mlp(np, p, x), (p, x), (tp_, tx))
    theirs = jax.jvp(lambda p, x: mlp(jnp, p, x), (p, x), (tp_, tx))
    _same(ours, theirs)
    y, f_jvp = tp.linearize(lambda x: dict_out(np, x), x)
    yj, fj = jax.linearize(lambda x: dict_out(jnp, x), x)
    _same(y, yj)
    _same(f_jvp(tx), fj(tx))


def test_jvp_has_aux():
    x, t = rng.standard_normal(4), rng.standard_normal(4)
    _same(tp.jvp(lambda x: with_aux(np, x), (x,), (t,), has_aux=True),
          jax.jvp(lambda x: with_aux(jnp, x), (x,), (t,), has_aux=True))


@pytest.mark.parametrize("ours,theirs", [(tp.jacfwd, jax.jacfwd), (tp.jacrev, jax.jacrev)],
                         ids=["jacfwd", "jacrev"])
def test_jacobians_of_pytrees(ours, theirs):
    p, x = _params()
    _same(ours(lambda x: dict_out(np, x))(x), theirs(lambda x: dict_out(jnp, x))(x))
    _same(ours(lambda p, x: mlp(np, p, x), argnums=(0, 1))(p, x),
          theirs(lambda p, x: mlp(jnp, p, x), argnums=(0, 1))(p, x))
    _same(ours(lambda p: {"y": mlp(np, p, x), "b": p["b"] * 2})(p),
          theirs(lambda p: {"y": mlp(jnp, p, x), "b": p["b"] * 2})(p))
    _same(ours(lambda x: with_aux(np, x), has_aux=True)(x),
          theirs(lambda x: with_aux(jnp, x), has_aux=True)(x))


def test_hessians_of_pytrees():
    p, x = _params()
    _same(tp.hessian(lambda p: mlp(np, p, x))(p), jax.hessian(lambda p: mlp(jnp, p, x))(p))
    a, b = rng.standard_normal(4), rng.standard_normal((2, 4))
    _same(tp.hessian(lambda a, b: two_args(np, a, b), argnums=(0, 1))(a, b),
          jax.hessian(lambda a, b: two_args(jnp, a, b), argnums=(0, 1))(a, b))
    _same(tp.hessian(lambda a, b: two_args(np, a, b), argnums=1)(a, b),
          jax.hessian(lambda a, b: two_args(jnp, a, b), argnums=1)(a, b))


def test_hessian_vector_product_against_jax():
    p, x = _params()
    v = tp.tree_map(lambda l: rng.standard_normal(np.shape(l)), p)
    ours = tp.hessian_vector_product(lambda p: mlp(np, p, x))(p, v)
    theirs = jax.jvp(jax.grad(lambda p: mlp(jnp, p, x)), (p,), (v,))[1]
    _same(ours, theirs)
