"""No public transformation hands a traced value (a ``Var``) back to its
caller: every transformation, applied to functions that close over the
values being differentiated (through custom rules, checkpoint, parallel
maps and nested transformations), either returns plain arrays equal to
the derivative of the same function written without them, or raises an
error that says to pass the value as an argument."""
import numpy as np
import pytest

import tapestry as tp
from tapestry import LeakedTracerError
from tapestry.core.var import Var

rng = np.random.default_rng(7)
W0 = rng.standard_normal((3, 3)) * 0.5
H0 = rng.standard_normal(3)


def _plain(W, h):
    return np.sum(np.tanh(h @ W))


def _closure(W, h):
    def f(h):
        return np.tanh(h @ W)
    return np.sum(f(h))


def _checkpoint(W, h):
    return np.sum(tp.checkpoint(lambda h: np.tanh(h @ W))(h))


def _checkpoint_arg(W, h):
    return np.sum(tp.checkpoint(lambda h, W: np.tanh(h @ W))(h, W))


def _custom_vjp(W, h):
    @tp.custom_vjp
    def f(h):
        return np.tanh(h @ W)

    def f_fwd(h):
        y = np.tanh(h @ W)
        return y, y
    f.defvjp(f_fwd, lambda y, g: ((g * (1 - y ** 2)) @ W.T,))
    return np.sum(f(h))


def _custom_jvp(W, h):
    @tp.custom_jvp
    def f(h):
        return np.tanh(h @ W)

    @f.defjvp
    def f_jvp(p, t):
        y = np.tanh(p[0] @ W)
        return y, (1 - y ** 2) * (t[0] @ W)
    return np.sum(f(h))


def _parallel_map(W, h):
    rows = np.stack([h, 2.0 * h])
    return np.sum(tp.parallel_map(lambda r: np.tanh(r @ W), rows, executor="serial")[0])


def _parallel_sum(W, h):
    return tp.parallel_sum(lambda r: np.sum(np.tanh(r @ W)), [h], executor="serial")


def _nested(W, h):  # an inner transformation over a closure, used by an outer one
    g = tp.grad(lambda h: _closure(W, h))(h)
    return _plain(W, h) + 0.0 * np.sum(g)


def _nested_checkpoint(W, h):
    g = tp.grad(lambda h: _checkpoint(W, h))(h)
    return _plain(W, h) + 0.0 * np.sum(g)


FUNCTIONS = [_closure, _checkpoint, _checkpoint_arg, _custom_vjp, _custom_jvp,
             _parallel_map, _parallel_sum, _nested, _nested_checkpoint]


def _vjp(f, W, h):
    y, pb = tp.vjp(f, W, h)
    return y, pb(1.0)


def _linearize(f, W, h):
    y, f_jvp = tp.linearize(f, W, h)
    return y, f_jvp(np.ones_like(W), np.ones_like(h))


TRANSFORMS = {
    "grad": lambda f, W, h: tp.grad(f, (0, 1))(W, h),
    "grad_h": lambda f, W, h: tp.grad(f, 1)(W, h),
    "value_and_grad": lambda f, W, h: tp.value_and_grad(f, (0, 1))(W, h),
    "aux": lambda f, W, h: tp.grad(lambda W, h: (f(W, h), f(W, h)), (0, 1), has_aux=True)(W, h),
    "vjp": _vjp,
    "jacrev": lambda f, W, h: tp.jacrev(f, (0, 1))(W, h),
    "jacfwd": lambda f, W, h: tp.jacfwd(f, (0, 1))(W, h),
    "jvp": lambda f, W, h: tp.jvp(f, (W, h), (np.ones_like(W), np.ones_like(h))),
    "linearize": _linearize,
    "hessian": lambda f, W, h: tp.hessian(f, 1)(W, h),
    "hessian_all": lambda f, W, h: tp.hessian(f, (0, 1))(W, h),
    "hvp": lambda f, W, h: tp.hessian_vector_product(f, (0, 1))(W, h, (W, h)),
    "elementwise_grad": lambda f, W, h: tp.elementwise_grad(f, (0, 1))(W, h),
    "grad_of_grad": lambda f, W, h: tp.grad(lambda W: np.sum(tp.grad(f, 1)(W, h)))(W),
}


def _traced_leaves(tree):
    return [x for x in tp.tree_flatten(tree)[0] if isinstance(x, Var)]


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("how", sorted(TRANSFORMS))
def test_no_transformation_returns_a_traced_value(how, f):
    transform = TRANSFORMS[how]
    try:
        got = transform(f, W0, H0)
    except TypeError as e:  # a refusal is fine if it says what to do
        assert "as an argument" in str(e) or "shared argument" in str(e), str(e)
        return
    assert _traced_leaves(got) == [], f"{how} returned a traced value"
    ref = transform(_plain, W0, H0)
    for a, b in zip(tp.tree_flatten(got)[0], tp.tree_flatten(ref)[0], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_closure_free_functions_are_never_refused():
    for how, transform in TRANSFORMS.items():
        for f in (_checkpoint, _checkpoint_arg, _closure, _nested):
            assert _traced_leaves(transform(f, W0, H0)) == [], how


def test_a_traced_value_reaching_the_output_raises_at_the_boundary():
    escaped = []

    def keep(x):
        escaped.append(x)
        return np.sum(x)
    tp.grad(keep)(np.ones(2))  # escaped[0]: traced on a finished tape
    with pytest.raises(LeakedTracerError, match=r"grad: the result holds a traced value"):
        tp.grad(lambda x: (np.sum(x), escaped[0]), has_aux=True)(np.ones(2))
    with pytest.raises(LeakedTracerError, match=r"vjp: the result holds a traced value"):
        tp.vjp(lambda x: (x, escaped[0]), np.ones(2))
    with pytest.raises(LeakedTracerError, match=r"jvp: the result holds a traced value"):
        tp.jvp(lambda x: (x, escaped[0]), (np.ones(2),), (np.ones(2),))


def test_pullbacks_and_linear_maps_may_themselves_be_differentiated():
    # a traced cotangent (tangent) legitimately gives traced results: the
    # boundary check must not refuse them
    _, pb = tp.vjp(lambda h: np.tanh(h @ W0), H0)
    J = tp.jacobian(lambda h: np.tanh(h @ W0))(H0)
    np.testing.assert_allclose(tp.jacobian(lambda u: pb(u)[0])(np.ones(3)), J.T)
    _, f_jvp = tp.linearize(lambda h: np.tanh(h @ W0), H0)
    np.testing.assert_allclose(tp.jacobian(f_jvp)(np.ones(3)), J)
