"""The extension points (custom_vjp, custom_jvp, checkpoint, pytree
registration) under vmap and jit, in both orders with the differentiation
transforms: each behaves as the loop over the items (vmap) or the uncompiled
call (jit) does, or is refused by name -- never a dead internal wrapper
(a ``Var``, a batched or a staged value) handed back as if it were a value.

The compositions that already behaved are covered in tests/test_vmap.py,
tests/test_jit*.py and tests/test_custom_*.py; this file holds the classes
that did not."""
import dataclasses
import warnings

import numpy as np
import pytest

import tapestry as tp

rng = np.random.default_rng(11)
X = rng.standard_normal((4, 3))
C = rng.standard_normal((4, 3))
W = rng.standard_normal(3)
DEAD = ("Var", "Batched", "Staged")


def loop(f, in_axes, args):
    """The reference: ``f`` per item, results stacked on axis 0."""
    n = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)])
            for i in range(n)]
    return tp.tree_map(lambda *xs: np.stack(xs), *outs)


def close(a, b, tol=1e-10):
    la, ta = tp.tree_flatten(a)
    lb, tb = tp.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        assert type(x).__name__ not in DEAD, x
        assert np.shape(x) == np.shape(y) and np.result_type(x) == np.result_type(y)
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


# --- aux data of an output pytree holding a traced value ----------------------
class Scaled:
    """A registered class whose aux data (``scale``) is a number."""

    def __init__(self, a, scale):
        self.a, self.scale = a, scale


tp.tree_util.register_pytree_node(Scaled, lambda s: ((s.a,), s.scale),
                                  lambda scale, ch: Scaled(ch[0], scale))


@dataclasses.dataclass
class Meta:
    w: np.ndarray
    n: object


tp.tree_util.register_dataclass(Meta, data_fields=["w"], meta_fields=["n"])


@pytest.mark.parametrize("make", [lambda x, s: Scaled(x * 2.0, s), lambda x, s: Meta(x * 2.0, s)],
                         ids=["register_pytree_node", "register_dataclass"])
def test_vmap_refuses_an_output_whose_aux_data_differs_between_items(make):
    """Aux data is rebuilt as it is: a per-item value there came back as a
    batched value of a vmap that had returned."""
    with pytest.raises(TypeError, match=r"vmap.*aux data.*differs between items"):
        tp.vmap(make)(X, np.arange(4.0))
    with pytest.raises(TypeError, match=r"vmap.*aux data.*differs between items"):
        tp.vmap(lambda x: make(x, np.sum(x)))(X)
    out = tp.vmap(make, in_axes=(0, None))(X, 2.0)  # an unbatched aux is fine
    assert out.__class__ is make(W, 2.0).__class__
    close(out.w if hasattr(out, "w") else out.a, 2.0 * X)


@pytest.mark.parametrize("how", ["vjp", "jvp", "linearize", "value_and_grad_aux"])
def test_differentiation_refuses_an_output_whose_aux_data_is_differentiated(how):
    """``vjp`` returned the primal output with a ``Var`` in its aux data."""
    f = lambda x: Scaled(np.sin(x), np.sum(x))  # noqa: E731
    calls = {"vjp": lambda: tp.vjp(f, W),
             "jvp": lambda: tp.jvp(f, (W,), (W,)),
             "linearize": lambda: tp.linearize(f, W),
             "value_and_grad_aux": lambda: tp.value_and_grad(
                 lambda x: (np.sum(x ** 2), f(x)), has_aux=True)(W)}
    with pytest.raises(TypeError, match=r"Scaled whose aux data.*being differentiated"):
        calls[how]()
    # aux data computed from constants is fine
    y, pb = tp.vjp(lambda x: Scaled(np.sin(x), 3.0), W)
    assert y.scale == 3.0
    close(pb(Scaled(np.ones(3), 3.0)), (np.cos(W),))


def test_jit_output_with_aux_data_computed_from_the_arguments_runs_as_the_plain_call():
    """The program rebuilt outputs with the trace's aux data: the trace call
    handed back a dead staged value, and a replay would repeat the first
    call's value.  It now runs uncompiled, with a warning naming the class."""
    h = lambda x, s: Scaled(x * s, s)  # noqa: E731
    jh = tp.jit(h)
    with pytest.warns(tp.JitWarning, match="Scaled.*aux data"):
        first = jh(W, 2.0)
    for s in (2.0, 3.0, 5.0):
        out, want = jh(W, s), h(W, s)
        assert out.scale == want.scale and type(out.scale) is type(want.scale)
        close(out.a, want.a)
    g = lambda x: Meta(np.cos(x), np.sum(x))  # noqa: E731
    with pytest.warns(tp.JitWarning, match="Meta"):
        out = tp.jit(g)(W)
    assert out.n == g(W).n and type(out.n).__name__ not in DEAD
    assert first.scale == 2.0
    with pytest.raises(tp.JitError, match="Scaled"):
        tp.jit(h, strict=True)(W, 2.0)


def test_jit_output_with_constant_aux_data_stays_compiled():
    jh = tp.jit(lambda x: Scaled(x * 2.0, 7))
    with warnings.catch_warnings():
        warnings.simplefilter("error", tp.JitWarning)
        for k in range(3):
            out = jh(W + k)
            assert out.scale == 7
            close(out.a, (W + k) * 2.0)
    assert jh.cache_info()["traces"] == 1
