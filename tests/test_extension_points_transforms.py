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
from vmap_checks import loop
from tapestry.testing import check_grads

rng = np.random.default_rng(11)
X = rng.standard_normal((4, 3))
C = rng.standard_normal((4, 3))
W = rng.standard_normal(3)
DEAD = ("Var", "Batched", "Staged")


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


def test_vmap_output_aux_data_holding_a_shared_argument_is_the_callers_array():
    """An ``in_axes=None`` array reaches ``f`` through a proxy; put in aux
    data, the proxy itself was handed back, where a loop gives the array."""
    out = tp.vmap(lambda x, w: Scaled(x * 2.0, (w, "k")), in_axes=(0, None))(X, W)
    assert out.scale[0] is W and out.scale[1] == "k"
    out = tp.vmap(lambda x, w: Meta(x * w, w), in_axes=(0, None))(X, W)
    assert out.n is W
    close(out.w, X * W)


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


# --- custom_vjp residuals that are not arrays, in grad(vmap(...)) -------------
RESIDUALS = {"str": lambda x: "mode", "callable": lambda x: np.sin, "object": lambda x: object(),
             "int": lambda x: 3, "float": lambda x: 2.5, "shape": lambda x: x.shape}


def _with_residual(kind):
    @tp.custom_vjp
    def f(x):
        return np.sum(x ** 2)

    def fwd(x):
        return f(x), (x, RESIDUALS[kind](x))

    def bwd(res, g):
        x, r = res
        # what the plain rule gets: the Python value fwd made, usable in Python
        if kind == "str":
            assert r == "mode"
        elif kind == "callable":
            assert r(0.0) == 0.0
        elif kind in ("int", "float"):
            assert isinstance(r, (int, float)) and r == RESIDUALS[kind](x)
        elif kind == "shape":
            return (np.reshape(2 * g * x, r),)
        return (2 * g * x,)
    f.defvjp(fwd, bwd)
    return f


@pytest.mark.parametrize("kind", list(RESIDUALS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_custom_vjp_residuals_that_are_not_arrays_under_grad_of_vmap(kind, dtype):
    """The mapped fwd's residuals went through vmap's outputs: a string or an
    object was refused as a vmap output, a number came back stacked."""
    f = _with_residual(kind)
    Xd = X.astype(dtype)
    want = loop(tp.grad(f), (0,), (Xd,))
    tol = 1e-10 if dtype == np.float64 else 1e-5
    close(tp.grad(lambda X: np.sum(tp.vmap(f)(X)))(Xd), want, tol)
    with warnings.catch_warnings():  # (under pytest, jit may not guard what bwd reaches)
        warnings.simplefilter("ignore", tp.JitWarning)
        close(tp.jit(tp.grad(lambda X: np.sum(tp.vmap(f)(X))))(Xd), want, tol)
    close(tp.vmap(tp.grad(f))(Xd), want, tol)
    check_grads(lambda X: np.sum(tp.vmap(f)(X)), (Xd,))


# --- rules reading a value batched by a vmap inside the differentiation -------
def _cvjp_reading(c, where):
    @tp.custom_vjp
    def f(y):
        return np.sum(np.sin(y) * (c if where == "fun" else 1.0))

    def fwd(y):
        return f(y), y

    def bwd(y, g):
        return (g * np.cos(y) * c,)
    f.defvjp(fwd, bwd)
    return f


def _cjvp_reading(c, where):
    @tp.custom_jvp
    def f(y):
        return np.sum(np.sin(y) * (c if where == "fun" else 1.0))

    @f.defjvp
    def f_jvp(p, t):
        return f(p[0]), np.sum(np.cos(p[0]) * c * t[0])
    return f


MAKERS = {"custom_vjp": _cvjp_reading, "custom_jvp": _cjvp_reading}


def _loop_map(f):
    """``vmap(f)`` over axis 0 written as a Python loop (the reference)."""
    return lambda *args: np.stack([f(*[a[i] for a in args]) for i in range(len(args[0]))])


def _outer_calls(make, where, vmap=tp.vmap):
    """The compositions where a vmap runs inside the differentiation and the
    custom function reads that vmap's per-item ``c`` from its closure."""
    item = lambda x, c: make(c, where)(x)  # noqa: E731
    return {
        "grad(vmap) x batched": lambda: tp.grad(lambda X: np.sum(vmap(item)(X, C)))(X),
        "grad(vmap) x shared": lambda: tp.grad(
            lambda w: np.sum(vmap(lambda c: item(w, c))(C)))(W),
        "jvp(vmap) x batched": lambda: tp.jvp(lambda X: vmap(item)(X, C), (X,), (C,)),
        "jvp(vmap) x shared": lambda: tp.jvp(
            lambda w: vmap(lambda c: item(w, c))(C), (W,), (W,)),
        "value_and_grad(vmap)": lambda: tp.value_and_grad(
            lambda X: np.sum(vmap(item)(X, C)))(X),
    }


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("where", ["fun", "rule only"])
@pytest.mark.parametrize("how", list(_outer_calls(_cvjp_reading, "fun")))
def test_custom_rule_reading_a_value_batched_inside_the_differentiation_runs_item_by_item(
        kind, where, how):
    """These returned a dead batched value (jvp), raised the escaped-value
    error that names neither the function nor the fix, or mixed the
    closure's items with the batch; then they were refused: the rule cannot
    see the value per item.  The vmap now runs the function once per item,
    where the value is a constant: a loop's results."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _outer_calls(MAKERS[kind], where)[how]()
    want = _outer_calls(MAKERS[kind], where, _loop_map)[how]()
    for g, w in zip(tp.tree_leaves(got), tp.tree_leaves(want)):
        close(g, w)


def test_a_rule_reading_a_batched_value_it_hides_from_the_look_is_still_refused():
    """The look before running sees closure cells; a rule that reaches the
    per-item value another way (an attribute) is refused when it runs, after
    the vmap returned, as before."""
    box = type("Box", (), {})()

    @tp.custom_vjp
    def f(y):
        return np.sum(np.sin(y))
    f.defvjp(lambda y: (f(y), y), lambda y, g: (g * np.cos(y) * box.c,))

    def item(x, c):
        box.c = c
        return f(x)
    with pytest.raises(TypeError, match="custom_vjp: f uses a value batched by the enclosing vmap"):
        tp.grad(lambda X: np.sum(tp.vmap(item)(X, C)))(X)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_custom_rule_reading_a_batched_value_works_when_vmap_is_outside(kind):
    """The loop's order (vmap of grad) reads the per-item value as a constant."""
    item = lambda x, c: MAKERS[kind](c, "fun")(x)  # noqa: E731
    close(tp.vmap(tp.grad(item))(X, C), loop(tp.grad(item), (0, 0), (X, C)))


@pytest.mark.parametrize("kind", list(MAKERS))
def test_rules_mapped_by_a_later_vmap_are_not_refused(kind):
    """A pullback or a linearized function called under vmap gets batched
    cotangents or tangents: its rule's batched results come from its inputs."""
    f = MAKERS[kind](W, "fun")
    y, pb = tp.vjp(f, W)
    close(tp.vmap(pb)(C[:, 0]), loop(pb, (0,), (C[:, 0],)))
    y, f_jvp = tp.linearize(f, W)
    close(tp.vmap(f_jvp)(C), loop(f_jvp, (0,), (C,)))


@pytest.mark.parametrize("shared", [False, True])
def test_checkpoint_reading_a_value_batched_inside_the_differentiation(shared):
    """checkpoint records such a call as an ordinary one (as it does for a
    closure over a differentiated value): ``jvp`` returned a dead batched
    value of the wrong shape, ``grad`` raised the escaped-value error."""
    def item(x, c):
        return np.sum(tp.checkpoint(lambda y: np.sin(y) * c)(x))
    if shared:
        g = lambda w: np.sum(tp.vmap(lambda c: item(w, c))(C))  # noqa: E731
        close(tp.grad(g)(W), sum(loop(lambda c: tp.grad(item)(W, c), (0,), (C,))))
        check_grads(g, (W,))
        return
    g = lambda X: np.sum(tp.vmap(item)(X, C))  # noqa: E731
    close(tp.grad(g)(X), loop(tp.grad(item), (0, 0), (X, C)))
    close(tp.value_and_grad(g)(X)[0], np.sum(loop(item, (0, 0), (X, C))))
    jv = lambda x, c, t: tp.jvp(lambda x: item(x, c), (x,), (t,))  # noqa: E731
    close(tp.jvp(lambda X: tp.vmap(item)(X, C), (X,), (C,)), loop(jv, (0, 0, 0), (X, C, C)))
    check_grads(g, (X,))
