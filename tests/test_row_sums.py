"""Sums over short trailing rows (every item's sum under vmap, a (rows, 1)
input's cotangent) run as one einsum: same values as np.sum up to
rounding, the same bits whatever the position of a row in the batch, the
same bits under jit, and gradients checked against finite differences."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.core.batching import trailing_sum
from tapestry.core.primitive import unbroadcast
from tapestry.testing import check_grads

rng = np.random.default_rng(0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape,axes", [((100, 3), (1,)), ((50, 20), (1,)), ((9, 4, 5), (1, 2)),
                                        ((9, 4, 5), (2,)), ((8, 256), (1,))])
def test_trailing_sum_matches_numpy(shape, axes, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    s = trailing_sum(a, axes)
    assert s is not None and s.dtype == dtype and s.shape == np.sum(a, axis=axes).shape
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(s, np.sum(a, axis=axes), rtol=tol, atol=tol)


def test_trailing_sum_declines_what_it_does_not_cover():
    a = rng.standard_normal((100, 20))
    assert trailing_sum(a, (0,)) is None                      # not trailing
    assert trailing_sum(a.astype(np.int64), (1,)) is None     # not float
    assert trailing_sum(a.astype(complex), (1,)) is None
    assert trailing_sum(a[:4], (1,)) is None                  # too few rows
    assert trailing_sum(rng.standard_normal((10, 1000)), (1,)) is None  # long rows
    assert trailing_sum(a, ()) is None


def test_same_path_for_every_layout_and_bits_independent_of_position():
    # the path is chosen from shape and dtype (a jit replay takes the one its
    # trace took); like np.sum's, the rounding may follow the memory layout
    a = rng.standard_normal((64, 20))
    s = trailing_sum(a, (1,))
    for other in (np.asfortranarray(a), np.repeat(a, 2, axis=1)[:, ::2]):
        t = trailing_sum(other, (1,))
        assert t is not None
        np.testing.assert_allclose(t, s, rtol=1e-13, atol=1e-13)
    assert np.array_equal(trailing_sum(a[8:40], (1,)), s[8:40])
    assert np.array_equal(trailing_sum(a[:9], (1,)), s[:9])


def test_unbroadcast_to_a_column():
    g = rng.standard_normal((30, 7))
    np.testing.assert_allclose(unbroadcast(g, (30, 1)), g.sum(axis=1, keepdims=True),
                               rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradients_through_item_sums_and_column_broadcasts(dtype):
    x = rng.standard_normal((40, 6)).astype(dtype)
    c = rng.standard_normal((40, 1)).astype(dtype)

    def per_item(row, c):
        return np.sum(np.sin(row) * c) + np.sum(row ** 2, keepdims=True)[0]

    f = lambda x, c: np.sum(tp.vmap(per_item)(x, c) ** 2)  # noqa: E731
    check_grads(f, (x, c), order=2)
    g = lambda x, c: np.sum(np.tanh(x + c) * x)  # noqa: E731  (c's cotangent: row sums)
    check_grads(g, (x, c), order=2)


def test_item_sums_under_vmap_match_the_loop():
    x = rng.standard_normal((50, 3, 4))
    for f in (lambda v: np.sum(v), lambda v: v.sum(axis=-1), lambda v: np.mean(v),
              lambda v: np.sum(v, axis=(0, 1), keepdims=True)):
        np.testing.assert_allclose(tp.vmap(f)(x), np.stack([f(v) for v in x]), rtol=1e-13)


def test_jit_replays_the_same_bits():
    x = rng.standard_normal((50, 20))
    f = tp.value_and_grad(lambda x: np.sum(tp.vmap(lambda v: np.sum(np.exp(v)) ** 2)(x)))
    jf = tp.jit(f, fuse=False)
    for _ in range(3):
        v0, g0 = f(x)
        v1, g1 = jf(x)
        assert v0 == v1 and np.array_equal(g0, g1)
    y = np.asfortranarray(x)
    assert np.array_equal(jf(y)[1], f(y)[1])
