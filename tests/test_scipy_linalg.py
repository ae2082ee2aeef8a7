"""tapestry.scipy.linalg: solve_triangular, cho_factor/cho_solve, expm,
solve_sylvester, sqrtm and solve_banded
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


SYLVESTER = {
    "real": lambda: (_r((3, 3), 20), _r((3, 3), 21), _r((3, 3), 22)),
    "rectangular": lambda: (_r((2, 2), 23), _r((4, 4), 24), _r((2, 4), 25)),
    "complex": lambda: (_c((3, 3), 26), _c((3, 3), 27), _c((3, 3), 28)),
    "complex_q_real_ab": lambda: (_r((3, 3), 29), _r((3, 3), 30), _c((3, 3), 31)),
}


@pytest.mark.parametrize("operands", list(SYLVESTER))
def test_solve_sylvester(operands):
    """Orders 1 and 2 against finite differences, real and complex; a real
    equation's transposed one meets a complex cotangent, which SciPy 1.17
    solves wrongly unless its operands are made complex first."""
    a, b, q = SYLVESTER[operands]()
    check_cgrads(tsl.solve_sylvester, (a, b, q), order=2)
    x = tp.vjp(tsl.solve_sylvester, a, b, q)[0]
    np.testing.assert_allclose(a @ x + x @ b, q, atol=1e-10)
    dt = np.result_type(a, b, q)
    np.testing.assert_allclose(x, sla.solve_sylvester(*(v.astype(dt) for v in (a, b, q))),
                               rtol=1e-12)


@pytest.mark.parametrize("a", [_hpd(3, 32), _r((3, 3), 33) + 4 * np.eye(3), _c((3, 3), 34),
                               np.diag([-1.0, 2.0, 3.0]) + 0.1 * _r((3, 3), 35)],
                         ids=["spd", "real", "complex", "negative_eigenvalue"])
def test_sqrtm(a):
    check_cgrads(tsl.sqrtm, (a,), order=2)
    x = tp.vjp(tsl.sqrtm, a)[0]
    np.testing.assert_allclose(x @ x, a, atol=1e-10)
    assert np.array_equal(tsl.sqrtm(a), sla.sqrtm(a))
    assert tp.grad(lambda a: np.sum(np.real(tsl.sqrtm(a))))(a.real).dtype == np.float64


@pytest.mark.parametrize("l_u, b_shape", [((1, 1), (5,)), ((2, 1), (5, 2)), ((0, 2), (5,)),
                                          ((2, 0), (5, 3)), ((0, 0), (5,))])
@pytest.mark.parametrize("complex_", [False, True])
def test_solve_banded(l_u, b_shape, complex_):
    l, u = l_u
    ab = (_c if complex_ else _r)((l + u + 1, 5), 36)
    ab[u] += 4.0  # the diagonal: well conditioned
    b = (_c if complex_ else _r)(b_shape, 37)

    def f(ab, b):
        return tsl.solve_banded((l, u), ab, b)
    check_cgrads(f, (ab, b), order=2)
    np.testing.assert_allclose(tp.vjp(f, ab, b)[0], sla.solve_banded((l, u), ab, b),
                               rtol=1e-12)
    # the storage's corners (outside the matrix) get no gradient
    g = tp.grad(lambda ab: np.sum(np.abs(f(ab, b)) ** 2))(ab)
    for r in range(l + u + 1):
        d = r - u
        dead = slice(5 - d, 5) if d > 0 else slice(0, -d)
        assert not np.any(g[r, dead])


def test_new_rules_under_jit_vmap_and_autograd_routing():
    a = _hpd(3, 38)
    f = lambda a: np.sum(np.sin(tsl.sqrtm(a)))  # noqa: E731
    assert np.array_equal(tp.jit(tp.grad(f))(a), tp.grad(f)(a))
    stack = np.stack([a, a + np.eye(3)])
    np.testing.assert_allclose(tp.vmap(tp.grad(f))(stack),
                               np.stack([tp.grad(f)(s) for s in stack]), rtol=1e-12)
    # autograd.scipy.linalg reaches the rules in a fresh process too
    import subprocess
    import sys
    code = ("import numpy as np, tapestry.autograd as ag, tapestry.autograd.scipy.linalg as asl\n"
            "a = np.diag([2.0, 3.0, 4.0]) + 0.1\n"
            "print(ag.grad(lambda a: np.sum(asl.sqrtm(a)))(a)[0, 0])\n"
            "ag.grad(lambda a: np.sum(asl.solve_sylvester(a, a, a)))(a)\n"
            "ag.grad(lambda b: np.sum(asl.solve_banded((0, 0), np.ones((1, 3)), b)))(a[0])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    want = tp.grad(lambda a: np.sum(tsl.sqrtm(a)))(np.diag([2.0, 3.0, 4.0]) + 0.1)[0, 0]
    np.testing.assert_allclose(float(out.stdout), want, rtol=1e-10)


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


@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_other_triangle_follows_the_installed_scipy(monkeypatch, lower):
    """SciPy 1.18 zeros the triangle cho_factor does not use (before, it held
    ``a``'s entries): traced calls give what the installed SciPy gives, and
    gradients that match finite differences of it, either way."""
    import tapestry.scipy.linalg as mod
    real = sla.cho_factor

    def zeroing(a, lower=False, overwrite_a=False, check_finite=True):
        c, low = real(a, lower, overwrite_a, check_finite)
        return (np.tril(c) if low else np.triu(c)), low
    a = _hpd(3, 9, False)
    for plain in (real, zeroing):
        monkeypatch.setattr(mod._sla, "cho_factor", plain)
        monkeypatch.setattr(mod, "_KEEPS_A", [])
        np.testing.assert_allclose(tp.vjp(lambda a: tsl.cho_factor(a, lower)[0], a)[0],
                                   plain(a, lower)[0], rtol=1e-12)
        check_cgrads(lambda a: tsl.cho_factor(a, lower)[0], (a,), order=2)
        # overwrite_a=True: LAPACK's own output, a's entries kept
        L = np.linalg.cholesky(a)
        lapack = L + np.triu(a, 1) if lower else L.T + np.tril(a, -1)
        np.testing.assert_allclose(
            tp.vjp(lambda a: tsl.cho_factor(a, lower, overwrite_a=True)[0], a)[0],
            lapack, rtol=1e-12)
