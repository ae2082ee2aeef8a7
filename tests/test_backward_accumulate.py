"""Cotangent accumulation: in place only into buffers nobody else can see.

The engine adds later contributions into a rule's fresh result (see
``tapestry.core.backward._FRESH``).  These tests pin down that user arrays,
arrays a rule keeps elsewhere, and node buffers are never written, and that
the in-place path gives the same bits as adding into a new buffer.
"""
import numpy as np
import pytest

import tapestry as tp
from tapestry.core import backward as B
from tapestry.testing import check_grads


def test_user_arrays_are_never_written():
    # ``x * y`` hands ``y`` itself to x's cotangent (sum's cotangent is a
    # broadcast 1), which is then accumulated with other contributions.
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(40), rng.standard_normal(40)
    y0 = y.copy()

    def f(x):
        return np.sum(x * y) + np.sum(np.exp(x)) + np.sum(x * y)
    g = tp.grad(f)(x)
    assert np.array_equal(y, y0)
    np.testing.assert_allclose(g, 2 * y0 + np.exp(x), rtol=1e-13)


def test_rule_result_held_elsewhere_is_not_written():
    stash = []

    @tp.custom_vjp
    def double(x):
        return 2.0 * x

    def double_fwd(x):
        return 2.0 * x, None

    def double_bwd(res, g):
        c = 2.0 * g
        stash.append(c)  # the rule keeps its result: it is not fresh
        return (c,)
    double.defvjp(double_fwd, double_bwd)
    x = np.linspace(-1, 1, 30)

    def f(x):
        return np.sum(double(x)) + np.sum(np.sin(x))
    g = tp.grad(f)(x)
    np.testing.assert_allclose(g, 2.0 + np.cos(x), rtol=1e-13)
    assert np.array_equal(stash[0], np.full(30, 2.0))


@pytest.mark.parametrize("first", [True, False])
def test_primitive_rule_result_held_elsewhere_is_not_written(first):
    from tapestry.core.primitive import Primitive
    stash = []

    def rule(g, ans, x):
        c = np.cos(x) * g
        stash.append(c)
        return c
    my_sin = Primitive(np.sin, "my_sin", vjps=(rule,))
    x = np.linspace(-1, 1, 30)
    if first:  # the held result is the first contribution the sweep sees
        g = tp.grad(lambda x: np.sum(np.exp(x)) + np.sum(my_sin(x)))(x)
    else:
        g = tp.grad(lambda x: np.sum(my_sin(x)) + np.sum(np.exp(x)))(x)
    np.testing.assert_allclose(g, np.cos(x) + np.exp(x), rtol=1e-13)
    np.testing.assert_allclose(stash[0], np.cos(x), rtol=1e-15)


def test_in_place_path_gives_the_bits_of_a_new_buffer():
    # Same sums in the same order: the in-place path must not change bits.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 9))

    def f(x):
        return np.sum(np.tanh(x) * 3.0) + np.sum(np.exp(x) * x) + np.sum(np.sin(x) ** 2)
    g = tp.grad(f)(x)
    t, e, s = 3.0 * (1 - np.tanh(x) ** 2), np.exp(x) * x + np.exp(x), \
        2 * np.sin(x) * np.cos(x)
    check_grads(f, (x,))
    np.testing.assert_allclose(g, t + e + s, rtol=1e-12)


def test_fresh_detection_sees_holders():
    if B._FRESH is None:
        pytest.skip("reference counts are not used on this interpreter")
    ids = {}

    def site(prev, hold=None):
        c = np.ones(3)
        ids["c"] = id(c)
        if hold is not None:
            hold.append(c)
        return B.accumulate(prev, c, 0, set())
    prev = np.zeros(3)
    assert id(site(prev)) == ids["c"]  # fresh: reused
    assert np.array_equal(prev, np.zeros(3))
    held = []
    r = site(prev, held)
    assert r is not held[0] and np.array_equal(held[0], np.ones(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mixed_dtype_contributions_keep_precision(dtype):
    x = np.linspace(0.1, 1.0, 12).astype(dtype)
    w = np.linspace(1.0, 2.0, 12)  # float64 constant: promotes one use

    def f(x):
        return np.sum(np.exp(x)) + np.sum(x * w)
    g = tp.grad(f)(x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, np.exp(x.astype(np.float64)) + w,
                               rtol=1e-6 if dtype == np.float32 else 1e-13)


# --- Negated cotangents: -a is computed only when nothing is added to it -----------
def test_negated_cotangent_meets_another_contribution_bitwise():
    # W6's pattern: d/d eta of (y * eta - exp(eta)) is y - exp(eta), one subtraction
    rng = np.random.default_rng(5)
    eta, y = rng.standard_normal((80, 60)), rng.poisson(2.0, (80, 60)).astype(float)
    g = tp.grad(lambda e: np.sum(y * e - np.exp(e)))(eta)
    assert type(g) is np.ndarray
    assert np.array_equal(g, y + (-np.exp(eta)))  # the same bits as adding -exp(eta)
    assert np.array_equal(g, y - np.exp(eta))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_negated_cotangent_alone_becomes_an_array(dtype):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((70, 70)).astype(dtype), rng.standard_normal((70, 70)).astype(dtype)
    ga, gb = tp.grad(lambda a, b: np.sum((a - b) * a), argnums=(0, 1))(a, b)
    assert type(gb) is np.ndarray and gb.dtype == dtype
    np.testing.assert_allclose(gb, -a, rtol=1e-6)
    np.testing.assert_allclose(ga, 2 * a - b, rtol=1e-5 if dtype == np.float32 else 1e-12)
    # a negated contribution reaching a leaf with no other one
    gn = tp.grad(lambda b: np.sum(np.sin(a) - b * 1.0) + 0.0)(b)
    assert type(gn) is np.ndarray and np.array_equal(gn, -np.ones_like(b))


def test_two_negated_contributions_and_check_grads():
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((90, 50)), rng.standard_normal((90, 50))

    def f(x):
        return np.sum(w - x * w) - np.sum(np.exp(x)) + np.sum(-x)
    g = tp.grad(f)(x)
    np.testing.assert_allclose(g, -w - np.exp(x) - 1.0, rtol=1e-12)
    check_grads(f, (x,))
    check_grads(lambda x: np.sum(np.tanh(w - x) * x), (x,), order=2)


def test_negated_with_broadcasting_and_vjp():
    rng = np.random.default_rng(8)
    x, b = rng.standard_normal((64, 80)), rng.standard_normal(80)
    y, pull = tp.vjp(lambda x, b: x - b, x, b)
    ct = rng.standard_normal((64, 80))
    gx, gb = pull(ct)
    assert type(gx) is np.ndarray and type(gb) is np.ndarray
    assert np.array_equal(gx, ct) and np.allclose(gb, -ct.sum(0))
    gx2, gb2 = pull(ct)  # the pullback can be called again
    assert np.array_equal(gb, gb2)
