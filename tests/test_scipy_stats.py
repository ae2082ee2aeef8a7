"""tapestry.scipy.stats: scipy.stats's names and signatures, differentiable
(finite differences), SciPy's values on plain arrays; scipy.stats itself is
refused by name, pointing here."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

st = pytest.importorskip("scipy.stats")
import tapestry.scipy.stats as tst  # noqa: E402

X = np.array([0.3, 1.2, 2.0])
CASES = {  # name -> (tapestry function of the parameters, SciPy's at the same point, params)
    "norm.logpdf": (lambda m, s: tst.norm.logpdf(X, m, s), lambda m, s: st.norm.logpdf(X, m, s),
                    (0.5, 1.5)),
    "norm.cdf": (lambda m, s: tst.norm.cdf(X, m, s), lambda m, s: st.norm.cdf(X, m, s), (0.5, 1.5)),
    "t.logpdf": (lambda m, s: tst.t.logpdf(X, 4.0, m, s), lambda m, s: st.t.logpdf(X, 4.0, m, s),
                 (0.2, 0.9)),
    "gamma.logpdf": (lambda a, s: tst.gamma.logpdf(X, a, scale=s),
                     lambda a, s: st.gamma.logpdf(X, a, scale=s), (2.0, 1.3)),
    "poisson.logpmf": (lambda mu, _: tst.poisson.logpmf(np.arange(3), mu) * _,
                       lambda mu, _: st.poisson.logpmf(np.arange(3), mu) * _, (1.7, 1.0)),
    "beta.logpdf": (lambda a, b: tst.beta.logpdf(X / 3, a, b), lambda a, b: st.beta.logpdf(X / 3, a, b),
                    (2.0, 3.0)),
    "beta.logpdf loc scale": (lambda l, s: tst.beta.logpdf(X, 2.0, 3.0, l, s),
                              lambda l, s: st.beta.logpdf(X, 2.0, 3.0, l, s), (-0.5, 3.0)),
    "chi2.logpdf loc scale": (lambda l, s: tst.chi2.logpdf(X, 3.0, l, s),
                              lambda l, s: st.chi2.logpdf(X, 3.0, l, s), (-0.4, 1.7)),
    "gamma.cdf": (lambda a, s: tst.gamma.cdf(X, 2.0, loc=a, scale=s),
                  lambda a, s: st.gamma.cdf(X, 2.0, loc=a, scale=s), (-0.2, 1.3)),
    "poisson.logpmf loc": (lambda mu, _: tst.poisson.logpmf(np.arange(3) + 2, mu, 2) * _,
                           lambda mu, _: st.poisson.logpmf(np.arange(3) + 2, mu, 2) * _, (1.7, 1.0)),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_are_scipys_and_gradients_finite_differences(name, dtype):
    f, ref, params = CASES[name]
    p = tuple(np.asarray(v, dtype) for v in params)
    np.testing.assert_allclose(f(*p), ref(*params), rtol=1e-5 if dtype == np.float32 else 1e-12)
    check_grads(lambda *q: np.sum(f(*q)), p)


def test_multivariate_normal_and_the_refusal_of_scipy_stats():
    mean, cov = np.array([0.1, -0.2]), np.array([[2.0, 0.3], [0.3, 1.0]])
    x = np.array([[0.5, 0.4], [-1.0, 0.2]])
    np.testing.assert_allclose(tst.multivariate_normal.logpdf(x, mean, cov),
                               st.multivariate_normal.logpdf(x, mean, cov), rtol=1e-12)
    check_grads(lambda m, c: np.sum(tst.multivariate_normal.logpdf(x, m, c)), (mean, cov))
    with pytest.raises(TypeError, match=r"scipy\.stats\.norm\.logpdf.*tapestry\.scipy\.stats"):
        tp.grad(lambda m: np.sum(st.norm.logpdf(X, m, 1.0)))(0.5)
