"""scipy.special ufuncs on traced arrays, against finite differences."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

sp = pytest.importorskip("scipy.special")
rng = np.random.default_rng(0)

UNARY = [
    ("expit", lambda: rng.standard_normal((3, 4))),
    ("log_expit", lambda: rng.standard_normal(5)),
    ("logit", lambda: rng.uniform(0.1, 0.9, (2, 3))),
    ("gammaln", lambda: rng.uniform(0.5, 4.0, 6)),
    ("digamma", lambda: rng.uniform(0.5, 4.0, 6)),
    ("erf", lambda: rng.standard_normal(4)),
    ("erfc", lambda: rng.standard_normal(4)),
    ("ndtr", lambda: rng.standard_normal(4)),
    ("log_ndtr", lambda: rng.standard_normal(4)),
]


@pytest.mark.parametrize("name,make", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unary(name, make, dtype):
    f = getattr(sp, name)
    check_grads(lambda x: f(x) * 1.5, (make().astype(dtype),))


@pytest.mark.parametrize("name", ["expit", "gammaln", "erf"])
def test_second_order(name):
    f = getattr(sp, name)
    check_grads(lambda x: np.sum(f(x)), (rng.uniform(0.5, 2.0, 4),), order=2)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_binary_with_broadcasting(name):
    f = getattr(sp, name)
    check_grads(lambda x, y: f(x, y), (rng.uniform(0.5, 2, (3, 1)), rng.uniform(0.5, 2, 4)))


def test_poisson_loglik_through_gammaln():
    y = rng.poisson(3.0, 10).astype(float)
    eta = rng.standard_normal(10)
    g = tp.grad(lambda e: np.sum(y * e - np.exp(e) - sp.gammaln(y + 1)))(eta)
    np.testing.assert_allclose(g, y - np.exp(eta))


#: Registry keys whose rules this module checks against finite differences
#: (read by tests/test_op_coverage.py, the coverage spec).
SWEPT = {getattr(sp, name) for name, _ in UNARY} | {sp.xlogy, sp.xlog1py}
