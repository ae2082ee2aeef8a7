"""tapestry.scipy.special: scipy.special's Python (non-ufunc) functions on
traced arrays, against finite differences and SciPy's own values."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

sp = pytest.importorskip("scipy.special")
import tapestry.scipy.special as tss  # noqa: E402

rng = np.random.default_rng(3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_polygamma_broadcasts_and_differentiates_twice(dtype):
    n = np.array([0, 1, 2, 3])
    x = rng.uniform(0.5, 3.0, (3, 1)).astype(dtype)
    check_grads(lambda x: tss.polygamma(n, x), (x,), order=1 if dtype == np.float32 else 2)
    np.testing.assert_allclose(tss.polygamma(n, x), sp.polygamma(n, x))


def test_polygamma_order_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"scipy\.special\.polygamma is not "
                                                  r"differentiable in argument 0"):
        tp.grad(lambda n: tss.polygamma(n, 1.5))(1.0)


def test_multigammaln_matches_scipy_and_differentiates():
    a = rng.uniform(3.0, 5.0, 5)
    check_grads(lambda a: tss.multigammaln(a, 4), (a,), order=2)
    value, g = tp.value_and_grad(lambda a: np.sum(tss.multigammaln(a, 3)))(a)
    np.testing.assert_allclose(value, np.sum(sp.multigammaln(a, 3)))
    np.testing.assert_allclose(g, sum(sp.digamma(a - 0.5 * j) for j in range(3)))
    with pytest.raises(ValueError):
        tp.grad(lambda a: np.sum(tss.multigammaln(a, 9)))(a)  # SciPy's check: a > (d-1)/2


@pytest.mark.parametrize("kind", ["jn", "yn", "in", "kn"])
@pytest.mark.parametrize("derivative", [False, True])
def test_spherical_bessel(kind, derivative):
    f = getattr(tss, f"spherical_{kind}")
    n = np.array([0, 1, 2, 3])
    low = 0.3 if kind == "kn" else -3.0
    z = rng.uniform(low, 3.0, (3, 1))
    z[np.abs(z) < 0.3] = 0.5
    check_grads(lambda z: f(n, z, derivative), (z,), order=2)
    np.testing.assert_allclose(tp.stop_gradient(f(n, z, derivative)),
                               getattr(sp, f"spherical_{kind}")(n, z, derivative))


def test_spherical_bessel_derivative_flag_is_the_derivative():
    n, z = np.array([0, 1, 2]), rng.uniform(0.5, 3.0, 3)
    g = tp.grad(lambda z: np.sum(tss.spherical_jn(n, z)))(z)
    np.testing.assert_allclose(g, sp.spherical_jn(n, z, derivative=True), rtol=1e-12)


@pytest.mark.parametrize("name", ["logsumexp", "softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_softmax_family_has_scipy_defaults(name, axis):
    x = rng.standard_normal((3, 4))
    f = getattr(tss, name)
    check_grads(lambda x: f(x, axis=axis), (x,), order=2)
    np.testing.assert_allclose(f(x, axis=axis),
                               getattr(sp, name)(x, axis=axis))
    value = tp.value_and_grad(lambda x: np.sum(f(x, axis=axis) ** 2))(x)[0]
    np.testing.assert_allclose(value, np.sum(getattr(sp, name)(x, axis=axis) ** 2))


def test_logsumexp_weights():
    a, b = rng.standard_normal(5), rng.uniform(0.5, 2, 5)
    check_grads(lambda a, b: tss.logsumexp(a, b=b), (a, b), order=2)


def test_other_names_are_scipy_special_itself():
    assert tss.gamma is sp.gamma and tss.zeta is sp.zeta


@pytest.mark.parametrize("call", [lambda x: sp.polygamma(1, x), lambda x: sp.softmax(x),
                                  lambda x: sp.multigammaln(x, 2)])
def test_scipy_wrappers_point_to_this_namespace(call):
    with pytest.raises(TypeError, match=r"tapestry\.scipy\.special \(polygamma"):
        tp.grad(lambda x: np.sum(call(x)))(np.array([2.0, 3.0]))
