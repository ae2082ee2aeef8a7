"""Red-team round 6 of vmap: what the realistic programs of
tests/programs/vmap_progs6.py found beyond a comparison of values."""
import numpy as np
import pytest

import tapestry as tp
import tapestry.scipy.special as tss
from tapestry.testing import check_grads

RNG = np.random.default_rng(66)
A = RNG.standard_normal((4, 5))
W = RNG.standard_normal((4, 5))          # signed weights: some sums are negative


def _signed_lse(a, b):
    return tss.logsumexp(a, b=b, return_sign=True)


def test_logsumexp_return_sign_under_vmap_is_the_loop():
    """scipy.special.logsumexp(..., return_sign=True) with signed weights
    ran on plain arrays but was refused on a batched or traced one (value
    included): now the log of the magnitude and the sign, as SciPy's."""
    from scipy.special import logsumexp
    got, sign = tp.vmap(_signed_lse)(A, W)
    want = [logsumexp(a, b=b, return_sign=True) for a, b in zip(A, W)]
    assert np.any(sign < 0) and np.any(sign > 0)
    np.testing.assert_allclose(got, [w[0] for w in want], rtol=1e-12)
    np.testing.assert_array_equal(sign, [w[1] for w in want])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logsumexp_return_sign_gradients_through_vmap(dtype):
    a, b = A.astype(dtype), W.astype(dtype)

    def loss(a, b):
        s, sign = tp.vmap(_signed_lse)(a, b)
        return np.sum(np.sin(s) * sign)
    check_grads(loss, (a, b))
    per_item = tp.vmap(tp.grad(lambda a, b: _signed_lse(a, b)[0], argnums=(0, 1)))(a, b)
    loop = [tp.grad(lambda a, b: _signed_lse(a, b)[0], argnums=(0, 1))(x, y) for x, y in zip(a, b)]
    for k in range(2):
        np.testing.assert_allclose(per_item[k], np.stack([g[k] for g in loop]),
                                   rtol=1e-5 if dtype == np.float32 else 1e-12)


# --- weighted histograms with values outside the range ---------------------------------
PTS = 1.5 * RNG.standard_normal((4, 9))       # some values fall outside (-2, 2), per item
PTS2 = 1.5 * RNG.standard_normal((4, 9))
WTS = RNG.standard_normal((4, 9)) ** 2

HISTS = {
    "histogram": lambda a, b, w: np.histogram(a, bins=4, range=(-2.0, 2.0), weights=w)[0],
    "histogram density": lambda a, b, w: np.histogram(a, 3, (-2.0, 2.0), weights=w,
                                                      density=True)[0],
    "histogram2d": lambda a, b, w: np.histogram2d(a, b, bins=3, range=[[-2, 2], [-1, 2]],
                                                  weights=w)[0],
    "histogramdd": lambda a, b, w: np.histogramdd(np.stack([a, b], -1), bins=(2, 3),
                                                  range=[(-2, 2), (-1, 1)], weights=w)[0],
}


@pytest.mark.parametrize("name", sorted(HISTS))
def test_weighted_histogram_with_a_range_under_vmap_is_the_loop(name):
    """Which values fall outside ``range`` differs per item: the weighted
    counts were refused under vmap (a data-dependent selection of the
    weights); they are the loop's, and linear in the weights."""
    f = HISTS[name]
    assert np.any(np.abs(PTS) > 2)
    got = tp.vmap(f)(PTS, PTS2, WTS)
    np.testing.assert_allclose(got, np.stack([f(*z) for z in zip(PTS, PTS2, WTS)]), rtol=1e-12)
    check_grads(lambda w: np.sum(np.sin(tp.vmap(f, in_axes=(0, 0, 0))(PTS, PTS2, w))), (WTS,))
    per_item = tp.vmap(tp.grad(lambda w, a, b: np.sum(np.sin(f(a, b, w)))))(WTS, PTS, PTS2)
    loop = [tp.grad(lambda w: np.sum(np.sin(f(a, b, w))))(w) for a, b, w in zip(PTS, PTS2, WTS)]
    np.testing.assert_allclose(per_item, np.stack(loop), rtol=1e-12)


# --- var / std with a per-item where= mask ------------------------------------------
MASK = RNG.random((4, 5)) > 0.4
MASK[:, :2] = True


@pytest.mark.parametrize("name", ["var", "std"])
def test_masked_moments_under_vmap_and_grad_are_the_loop(name):
    """np.var/np.std(..., where=mask), the masked statistics of padded data,
    were refused under grad (so per-example gradients and grad of vmap);
    they now follow the loop, the mask batched with the data."""
    f = lambda a, m: getattr(np, name)(a, ddof=1, where=m)  # noqa: E731
    got = tp.vmap(f)(A, MASK)
    np.testing.assert_allclose(got, [f(a, m) for a, m in zip(A, MASK)], rtol=1e-12)
    check_grads(lambda a: np.sum(np.sin(tp.vmap(f)(a, MASK))), (A,))
    per_item = tp.vmap(tp.grad(f))(A, MASK)
    loop = np.stack([tp.grad(f)(a, m) for a, m in zip(A, MASK)])
    np.testing.assert_allclose(per_item, loop, rtol=1e-12)
    assert np.all(per_item[~MASK] == 0)
