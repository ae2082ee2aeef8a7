"""tapestry.scipy.linalg: solve_triangular, cho_factor/cho_solve and expm
against finite differences (real and complex, orders 1 and 2) and against
SciPy's own values; other names refuse traced arguments by name."""
import numpy as np
import pytest

import tapestry as tp
from cgrad import check_cgrads

sla = pytest.importorskip("scipy.linalg")
import tapestry.scipy.linalg as tsl  # noqa: E402


def _r(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _c(shape, seed):
    return _r(shape, seed) + 1j * _r(shape, seed + 100)


def _hpd(n, seed, complex_=False):
    a = _c((n, n), seed) if complex_ else _r((n, n), seed)
    return a @ np.conj(a.T) + n * np.eye(n)


OPERANDS = {
    "real_vector": lambda: (_r((3, 3), 1) + 3 * np.eye(3), _r((3,), 2)),
    "real_matrix": lambda: (_r((3, 3), 3) + 3 * np.eye(3), _r((3, 2), 4)),
    "complex": lambda: (_c((3, 3), 5) + 3 * np.eye(3), _c((3, 2), 6)),
    "complex_a_real_b": lambda: (_c((3, 3), 7) + 3 * np.eye(3), _r((3,), 8)),
}


@pytest.mark.parametrize("operands", list(OPERANDS))
@pytest.mark.parametrize("trans", [0, 1, "C"])
@pytest.mark.parametrize("lower,unit", [(False, False), (True, False), (True, True)])
def test_solve_triangular(operands, trans, lower, unit):
    a, b = OPERANDS[operands]()

    def f(a, b):
        return tsl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
    check_cgrads(f, (a, b), order=2)
    np.testing.assert_allclose(tp.vjp(f, a, b)[0], sla.solve_triangular(
        a, b, trans=trans, lower=lower, unit_diagonal=unit), rtol=1e-12)


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_and_cho_solve(complex_, lower):
    a, b = _hpd(3, 9, complex_), _c((3, 2), 10)
    check_cgrads(lambda a: tsl.cho_factor(a, lower)[0], (a,), order=2)
    np.testing.assert_allclose(tp.vjp(lambda a: tsl.cho_factor(a, lower)[0], a)[0],
                               sla.cho_factor(a, lower)[0], rtol=1e-12)

    def solve(a, b):
        return tsl.cho_solve(tsl.cho_factor(a, lower=lower), b)
    check_cgrads(solve, (a, b), order=2)
    np.testing.assert_allclose(tp.vjp(solve, a, b)[0],
                               sla.cho_solve(sla.cho_factor(a, lower), b), rtol=1e-10)


@pytest.mark.parametrize("a", [_r((3, 3), 11), _c((3, 3), 12), 0.5 * _r((2, 3, 3), 13)],
                         ids=["real", "complex", "stack"])
def test_expm(a):
    check_cgrads(tsl.expm, (a,), order=2)
    check_cgrads(tsl.expm, (a.astype(np.complex64 if a.dtype.kind == "c" else np.float32),))
    np.testing.assert_allclose(tp.vjp(tsl.expm, a)[0], sla.expm(a), rtol=1e-12)


def test_plain_arrays_are_scipy_and_other_names_refuse_traced():
    a = _hpd(3, 14)
    assert np.array_equal(tsl.expm(a), sla.expm(a))
    assert tsl.LinAlgError is sla.LinAlgError
    np.testing.assert_allclose(tsl.lu(a)[2], sla.lu(a)[2])
    with pytest.raises(NotImplementedError, match=r"scipy\.linalg\.lu .*custom_vjp"):
        tp.grad(lambda a: np.sum(tsl.lu(a)[2]))(a)


def test_scipy_linalg_itself_points_to_the_namespace():
    with pytest.raises(TypeError, match=r"tapestry\.scipy\.linalg"):
        tp.grad(lambda a: np.sum(sla.expm(a)))(_hpd(2, 15))
