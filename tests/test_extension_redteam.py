"""Red-team findings on the extension points (custom_jvp, custom_vjp,
checkpoint) composed with the transforms: each test failed before its fix."""
import numpy as np
import pytest

import tapestry as tp


@tp.custom_jvp
def straight_through_round(x):
    return np.round(x)


@straight_through_round.defjvp
def _st_round_jvp(primals, tangents):
    return straight_through_round(primals[0]), tangents[0]


@tp.custom_jvp
def square_via_stop(x):
    # fun's own derivative (x) differs from the rule's (2x): only the rule may be used
    return tp.stop_gradient(x) * x


@square_via_stop.defjvp
def _square_via_stop_jvp(primals, tangents):
    return square_via_stop(primals[0]), 2 * primals[0] * tangents[0]


@pytest.mark.parametrize("second", [
    tp.hessian,
    lambda f: tp.grad(tp.grad(f)),
    lambda f: tp.jacfwd(tp.jacrev(f)),
    lambda f: tp.jacrev(tp.jacfwd(f)),
    lambda f: tp.jacfwd(tp.jacfwd(f)),
    lambda f: tp.jacrev(tp.jacrev(f)),
], ids=["hessian", "grad_grad", "fwd_rev", "rev_fwd", "fwd_fwd", "rev_rev"])
def test_custom_jvp_rule_used_at_every_order(second):
    # d2/ds2 [st(s) * s] with st' = 1 is 2; fun's derivative (0) at the outer
    # level gave 1.  Likewise s^3 through square_via_stop: 6s, not 5s.
    np.testing.assert_allclose(second(lambda s: straight_through_round(s) * s)(1.3), 2.0)
    for s in (1.5, -0.7):
        np.testing.assert_allclose(second(lambda s: square_via_stop(s) * s)(s), 6 * s)


def test_custom_jvp_rule_used_at_outer_level_of_vector_hessian():
    x = np.array([0.5, -1.2, 2.0, 0.3])
    h = tp.hessian(lambda x: np.sum(square_via_stop(x) * np.sin(x)))(x)
    # f = x^2 sin x per element: f'' = 2 sin x + 4x cos x - x^2 sin x
    want = 2 * np.sin(x) + 4 * x * np.cos(x) - x ** 2 * np.sin(x)
    np.testing.assert_allclose(h, np.diag(want), atol=1e-12)


def _careless_bwd(x, g):
    x *= 2.0  # writes into its residual, which is the caller's array
    return (g * np.cos(x / 2.0),)


@tp.custom_vjp
def sin_keeping_x(x):
    return np.sin(x)


sin_keeping_x.defvjp(lambda x: (np.sin(x), x), _careless_bwd)


def test_custom_vjp_bwd_cannot_write_into_the_callers_array():
    x = np.array([0.5, -1.2, 2.0, 0.3])
    x0 = x.copy()
    g = tp.grad(lambda x: np.sum(sin_keeping_x(x)))(x)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_allclose(g, np.cos(x0))


def test_custom_vjp_pullback_runs_again_on_the_same_residuals():
    x = np.array([0.5, -1.2, 2.0, 0.3])
    _, pullback = tp.vjp(lambda x: sin_keeping_x(x * 1.0), x)
    first = pullback(np.ones(4))[0]
    second = pullback(np.ones(4))[0]
    np.testing.assert_allclose(first, np.cos(x))
    np.testing.assert_allclose(second, np.cos(x))


@tp.custom_jvp
def cube_writing(x):
    x *= 1.0  # writes into its argument (the caller's array under grad)
    return x ** 3


@cube_writing.defjvp
def _cube_writing_jvp(primals, tangents):
    x, = primals
    x *= 3.0  # a rule writing into its primal
    return (x / 3.0) ** 3, 3 * (x / 3.0) ** 2 * tangents[0]


@pytest.mark.parametrize("transform", ["grad", "jvp", "hessian"])
def test_custom_jvp_fun_and_rule_cannot_write_into_the_callers_array(transform):
    x = np.array([0.5, -1.2, 2.0, 0.3])
    x0 = x.copy()
    if transform == "grad":
        np.testing.assert_allclose(tp.grad(lambda x: np.sum(cube_writing(x)))(x), 3 * x0 ** 2)
    elif transform == "jvp":
        np.testing.assert_allclose(tp.jvp(cube_writing, (x,), (np.ones(4),))[1], 3 * x0 ** 2)
    else:
        np.testing.assert_allclose(tp.hessian(lambda x: np.sum(cube_writing(x)))(x),
                                   np.diag(6 * x0))
    np.testing.assert_array_equal(x, x0)
