"""Differential tests against JAX (skipped without it): tapestry's VJPs of
numpy.fft and numpy.linalg functions equal jax.vjp's for the same random
complex cotangents.  Both use the pairing Re(c*t) (docs/complex.md), so
they must agree exactly, up to rounding.  Hermitian functions are compared
through B + Bᴴ, since JAX symmetrizes their input where NumPy reads one
triangle.

JAX runs in a child process (this file run as a script): JAX starts
threads, and a process that has imported it must not fork, which the
parallel tests of this suite do."""
import importlib.util
import sys

import numpy as np
import pytest

import tapestry as tp
from jax_child import results_from_child

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="JAX is not installed (the peers extra)")


def _c(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _r(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _herm(m, b):
    return b + m.conj(m.swapaxes(b, -1, -2)) + 6 * m.eye(b.shape[-1])


def _sl(m):
    """scipy.linalg's differentiable stand-in for this namespace."""
    if m is np:
        import tapestry.scipy.linalg as tsl
        return tsl
    import jax.scipy.linalg
    return jax.scipy.linalg


def _ct_like(y, seed):
    y = np.asarray(y)
    ct = _c(y.shape, seed) if y.dtype.kind == "c" else _r(y.shape, seed)
    return ct.astype(y.dtype)


# name -> (function of a namespace m, where m is numpy or jax.numpy; inputs)
CASES = {
    "fft_ortho": (lambda m, x: m.fft.fft(x, n=6, norm="ortho"), lambda: (_c((3, 5), 1),)),
    "rfft_real": (lambda m, x: m.fft.rfft(x, n=7), lambda: (_r((2, 6), 2),)),
    "irfft": (lambda m, z: m.fft.irfft(z, n=8, norm="forward"), lambda: (_c((2, 5), 3),)),
    "irfft_odd": (lambda m, z: m.fft.irfft(z, n=5), lambda: (_c((4,), 4),)),
    "rfftn": (lambda m, x: m.fft.rfftn(x, s=(3, 4)), lambda: (_r((2, 3, 5), 5),)),
    "irfftn": (lambda m, z: m.fft.irfftn(z, s=(4, 6)), lambda: (_c((3, 4), 6),)),
    "ifft2_hfft": (lambda m, z: m.fft.hfft(m.fft.ifft2(z), n=6), lambda: (_c((3, 4), 7),)),
    "fftshift": (lambda m, z: m.fft.ifftshift(m.fft.fftshift(z, axes=0) * 2), lambda: (_c((3, 4), 8),)),
    "det_inv_solve": (lambda m, a, b: (m.linalg.det(a), m.linalg.inv(a), m.linalg.solve(a, b)),
                      lambda: (_c((2, 3, 3), 9), _c((2, 3, 2), 10))),
    "slogdet": (lambda m, a: tuple(m.linalg.slogdet(a)), lambda: (_c((3, 3), 11),)),
    "cholesky": (lambda m, b: m.linalg.cholesky(_herm(m, b)), lambda: (_c((3, 3), 12),)),
    "eigh": (lambda m, b: (m.linalg.eigh(_herm(m, b))[0],
                           m.linalg.eigh(_herm(m, b))[1] * m.conj(m.linalg.eigh(_herm(m, b))[1])),
             lambda: (_c((3, 3), 13),)),
    "svd": (lambda m, a: (m.linalg.svd(a, full_matrices=False)[1],
                          m.linalg.svd(a, full_matrices=False)[0] @ m.linalg.svd(a, full_matrices=False)[2]),
            lambda: (_c((4, 3), 14),)),
    "qr": (lambda m, a: tuple(m.linalg.qr(a)), lambda: (_c((4, 3), 15),)),
    "pinv_lstsq": (lambda m, a, b: (m.linalg.pinv(a), m.linalg.lstsq(a, b)[0]),
                   lambda: (_r((5, 3), 16), _r((5,), 17))),
    "eigvals": (lambda m, a: m.linalg.eigvals(a), lambda: (_c((3, 3), 18),)),
    "matrix_power_norms": (lambda m, a: (m.linalg.matrix_power(a, 3), m.linalg.norm(a),
                                         m.linalg.norm(a, 2), m.linalg.norm(a, "nuc")),
                           lambda: (_c((3, 3), 19),)),
    "scipy_expm": (lambda m, a: _sl(m).expm(a), lambda: (0.5 * _c((3, 3), 22),)),
    "scipy_solve_triangular": (
        lambda m, a, b: (_sl(m).solve_triangular(a, b, trans=1, lower=True),
                         _sl(m).solve_triangular(a, b, trans="C", unit_diagonal=True)),
        lambda: (_c((3, 3), 23) + 3 * np.eye(3), _c((3, 2), 24))),
    "scipy_cho_solve": (lambda m, b, y: _sl(m).cho_solve(_sl(m).cho_factor(_herm(m, b)), y),
                        lambda: (_c((3, 3), 25), _c((3,), 26))),
    "products": (lambda m, a, b: (m.vdot(a, b), m.kron(a, b), m.tensordot(a, b.T, 1)),
                 lambda: (_c((2, 3), 20), _c((2, 3), 21))),
}


def _flat(tree):
    """Leaves of nested tuples (namedtuples included), in order."""
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _flat(t)]
    return [np.asarray(tree)]


def _unflat_like(tree, leaves):
    if isinstance(tree, (tuple, list)):
        return tuple(_unflat_like(t, leaves) for t in tree)
    return leaves.pop(0)


def _cotangents(ys):
    return [_ct_like(y, 99 + i) for i, y in enumerate(_flat(ys))]


def _jax_main(out):
    """In the child: JAX's outputs and VJPs for every case, saved to ``out``."""
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    saved = {}
    for name, (f, make) in CASES.items():
        args = make()
        ys, pull = jax.vjp(lambda *a: f(jnp, *a), *[jnp.asarray(a) for a in args])
        np_ys = tp.vjp(lambda *a: f(np, *a), *args)[0]
        cts = _cotangents(np_ys)
        gs = pull(_unflat_like(ys, [jnp.asarray(c) for c in cts]))
        for i, y in enumerate(_flat(ys)):
            saved[f"{name}/y{i}"] = y
        for i, g in enumerate(gs):
            saved[f"{name}/g{i}"] = np.asarray(g)
    np.savez(out, **saved)


@pytest.fixture(scope="module")
def jax_results(tmp_path_factory):
    return results_from_child(__file__, tmp_path_factory)


@pytest.mark.parametrize("name", list(CASES))
def test_vjp_matches_jax(name, jax_results):
    f, make = CASES[name]
    args = make()
    ys, pullback = tp.vjp(lambda *a: f(np, *a), *args)
    for i, y in enumerate(_flat(ys)):
        np.testing.assert_allclose(y, jax_results[f"{name}/y{i}"], rtol=1e-8, atol=1e-10)
    ours = pullback(_unflat_like(ys, _cotangents(ys)))
    for i, g in enumerate(ours):
        np.testing.assert_allclose(g, jax_results[f"{name}/g{i}"], rtol=1e-7, atol=1e-9)


if __name__ == "__main__":
    _jax_main(sys.argv[1])
