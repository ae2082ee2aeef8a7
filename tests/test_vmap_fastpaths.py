"""The short paths vmap takes for common operations (a unary ufunc, an
item's ``np.sum``, ``u[j]`` with a per-item index, a binary operation
between items of different ranks or with a differentiated operand): each
must give what the general batching dispatch gives -- the loop over items
-- and leave the cases it does not cover (an empty batch, an escaped value,
operands that do not line up) to that dispatch."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.core.batched import EscapedBatchError
from tapestry.core.primitive import scale_cotangent

from vmap_checks import loop

RNG = np.random.default_rng(7)


def _same(a, b):
    for x, y in zip(tp.tree_util.tree_leaves(a), tp.tree_util.tree_leaves(b)):
        assert np.shape(x) == np.shape(y)
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-13)


CASES = {
    # name: (f, in_axes, args) -- each reaches one short path
    "unary ufunc": (lambda x: np.exp(x), (0,), (RNG.normal(size=(5, 3)),)),
    "unary ufunc, 0-d items": (lambda x: np.tanh(x), (0,), (RNG.normal(size=5),)),
    "sum of an item": (lambda x: np.sum(x), (0,), (RNG.normal(size=(6, 4, 3)),)),
    "sum of a 0-d item": (lambda x: np.sum(x), (0,), (RNG.normal(size=6),)),
    "sum of an int item": (lambda x: np.sum(x), (0,), (np.arange(12).reshape(4, 3),)),
    "u[j], j per item": (lambda j, u: u[j], (0, None), (np.array([2, 0, 2, 1]),
                                                        RNG.normal(size=3))),
    "u[j], 2-d u": (lambda j, u: u[j], (0, None), (np.array([1, 0, 1]),
                                                  RNG.normal(size=(2, 4)))),
    "u[j], j an array per item": (lambda j, u: u[j], (0, None),
                                  (np.array([[0, 1], [2, 2], [1, 0]]), RNG.normal(size=3))),
    "ranks differ": (lambda x, s: x + s, (0, 0), (RNG.normal(size=(4, 3)),
                                                 RNG.normal(size=4))),
    "ranks differ, other order": (lambda x, s: s - x, (0, 0), (RNG.normal(size=(4, 2, 3)),
                                                              RNG.normal(size=(4, 3)))),
    "shared operand": (lambda x, b: b * x, (0, None), (RNG.normal(size=(4, 3)),
                                                       RNG.normal(size=3))),
    "shared operand on the left": (lambda x, b: x - b, (0, None), (RNG.normal(size=(4, 3)),
                                                                   np.float64(0.3))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_the_loop(name):
    f, in_axes, args = CASES[name]
    _same(tp.vmap(f, in_axes=in_axes)(*args), loop(f, in_axes, args))


def _float_args(args):
    return [a for a in range(len(args)) if np.asarray(args[a]).dtype.kind == "f"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_the_loop(name):
    """``grad`` of a sum over ``vmap(f)``: the differentiated operands are
    traced below the batch (the shared-operand and ``u[j]`` paths)."""
    f, in_axes, args = CASES[name]
    nums = tuple(_float_args(args))
    if not nums:
        pytest.skip("no float argument")

    def total(g):
        return lambda *a: np.sum(np.sin(g(*a)))
    got = tp.grad(total(tp.vmap(f, in_axes=in_axes)), argnums=nums)(*args)
    want = tp.grad(total(lambda *a: loop(f, in_axes, a)), argnums=nums)(*args)
    _same(got, want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_per_example_gradients_match_the_loop(name):
    """``vmap(grad(f))``: the traced values are inside the batch."""
    f, in_axes, args = CASES[name]
    k = next((a for a in _float_args(args) if in_axes[a] is not None), None)
    if k is None:
        pytest.skip("no batched float argument")
    g = tp.grad(lambda *a: np.sum(f(*a)), argnums=k)
    _same(tp.vmap(g, in_axes=in_axes)(*args), loop(g, in_axes, args))


@pytest.mark.parametrize("name", sorted(CASES))
def test_empty_batch_keeps_the_item_shape(name):
    f, in_axes, args = CASES[name]
    empty = [a if ax is None else np.take(a, [], axis=ax) for a, ax in zip(args, in_axes)]
    out = tp.vmap(f, in_axes=in_axes)(*empty)
    one = f(*[a if ax is None else np.take(a, 0, axis=ax) for a, ax in zip(args, in_axes)])
    assert np.shape(out) == (0,) + np.shape(one)


@pytest.mark.parametrize("op", [np.exp, np.sum, lambda x: x + np.ones(3),
                                lambda x: x[0] + x, lambda x: 2.0 * x])
def test_escaped_value_is_refused(op):
    kept = []
    tp.vmap(lambda x: kept.append(x) or x)(np.ones((2, 3)))
    with pytest.raises(EscapedBatchError):
        op(kept[0])


def test_nested_vmap_uses_the_right_batch():
    x = RNG.normal(size=(3, 4, 5))
    s = RNG.normal(size=(3, 4))

    def f(x, s):
        return np.exp(x) * s + np.sum(x)
    inner = tp.vmap(f)
    got = tp.vmap(inner)(x, s)
    want = np.stack([np.stack([f(x[i, j], s[i, j]) for j in range(4)]) for i in range(3)])
    _same(got, want)


def test_w7_item_code_under_grad_matches_the_loop():
    """W7's per-item log density (every short path at once) and its
    gradient, against the same per-item code in a loop."""
    n = 30
    x, y, u = RNG.normal(size=(n, 20)), RNG.poisson(2.0, size=(n, 20)).astype(float), \
        RNG.normal(size=n)
    g = {"x": x, "y": y, "c": np.zeros((n, 20)), "j": np.arange(n)[::-1].copy()}

    def item(g, u, alpha, beta):
        uj = u[g["j"]]
        eta = alpha + beta * g["x"] + uj
        return np.sum(g["y"] * eta - np.exp(eta) - g["c"]) - 0.5 * uj * uj
    mapped = tp.value_and_grad(
        lambda u, a, b: np.sum(tp.vmap(item, in_axes=(0, None, None, None))(g, u, a, b)),
        argnums=(0, 1, 2))
    looped = tp.value_and_grad(
        lambda u, a, b: sum(item({k: v[i] for k, v in g.items()}, u, a, b) for i in range(n)),
        argnums=(0, 1, 2))
    _same(mapped(u, 0.1, 0.2), looped(u, 0.1, 0.2))


# --- the multiply rule's cotangent: a broadcast column of ones --------------------
def _column(values, k):
    return np.broadcast_to(np.asarray(values, float)[:, None], (len(values), k))


def test_ones_broadcast_over_trailing_axes_passes_y_through():
    """Every vmapped item's sum, summed: the cotangent reaching ``y * eta``
    is 1 broadcast along the item's axes, and ``1 * y`` is ``y``."""
    y = RNG.normal(size=(400, 20))
    assert scale_cotangent(_column(np.ones(400), 20), y) is y


@pytest.mark.parametrize("col", [np.r_[np.ones(399), 2.0], np.full(400, -1.0),
                                 np.r_[np.ones(399), np.nan]])
def test_other_broadcast_columns_are_multiplied(col):
    y = RNG.normal(size=(400, 20))
    g = _column(col, 20)
    out = scale_cotangent(g, y)
    assert out is not y
    np.testing.assert_array_equal(out, g * y)


def test_complex_ones_column_is_multiplied():
    """``(1+0j) * y`` is not ``y`` for a complex ``y`` with an infinite part."""
    y = np.full((400, 20), complex(1.0, np.inf))
    g = np.broadcast_to(np.ones((400, 1), complex), (400, 20))
    with np.errstate(invalid="ignore"):
        out, want = scale_cotangent(g, y), g * y
    assert out is not y
    np.testing.assert_array_equal(out, want)
