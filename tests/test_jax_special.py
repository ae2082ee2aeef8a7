"""Differential tests against JAX (skipped without it): tapestry's gradients
of scipy.special functions equal jax.grad of jax.scipy.special's, for the
same inputs and random cotangents -- a check independent of finite
differences, which cannot tell a rule from a wrong one that happens to
agree to 1e-5.

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


def _u(lo, hi, seed, shape=(5,)):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def _tss():
    import tapestry.scipy.special as tss
    return tss


# name -> (function of a namespace s (scipy.special or jax.scipy.special), inputs)
CASES = {
    "gamma": (lambda s, x: s.gamma(x), lambda: (_u(0.5, 4, 1),)),
    "loggamma": (lambda s, x: s.loggamma(x), lambda: (_u(0.5, 4, 2),)),
    "beta_betaln": (lambda s, a, b: s.beta(a, b) + s.betaln(a, b),
                    lambda: (_u(0.5, 3, 3), _u(0.5, 3, 4))),
    "poch": (lambda s, z, m: s.poch(z, m), lambda: (_u(0.5, 3, 5), _u(0.2, 2, 6))),
    "gammainc_x": (lambda s, x: s.gammainc(2.5, x) + s.gammaincc(1.5, x), lambda: (_u(0.3, 3, 7),)),
    "betainc_x": (lambda s, x: s.betainc(2.5, 1.5, x), lambda: (_u(0.1, 0.9, 8),)),
    "erfinv_ndtri": (lambda s, p: s.erfinv(2 * p - 1) + s.ndtri(p), lambda: (_u(0.05, 0.95, 9),)),
    "erfcx": (lambda s, x: s.erfcx(x), lambda: (_u(-2, 2, 10),)),
    "bessel_i": (lambda s, x: (s.i0(x), s.i0e(x), s.i1(x), s.i1e(x)), lambda: (_u(-3, 3, 11),)),
    "exp_integrals": (lambda s, x: (s.expi(x), s.exp1(x), s.expn(3, x)), lambda: (_u(0.2, 3, 12),)),
    "zeta_q": (lambda s, q: s.zeta(3.5, q), lambda: (_u(0.5, 3, 13),)),
    "polygamma": (lambda s, x: (_tss() if s.__name__ == "scipy.special" else s).polygamma(2, x),
                  lambda: (_u(0.5, 3, 14),)),
    "multigammaln": (lambda s, a: (_tss() if s.__name__ == "scipy.special" else s
                                   ).multigammaln(a, 3), lambda: (_u(2, 4, 15, ()),)),
    "entropies": (lambda s, x, y: (s.entr(x), s.kl_div(x, y), s.rel_entr(x, y)),
                  lambda: (_u(0.2, 2, 16), _u(0.2, 2, 17))),
    "spence": (lambda s, x: s.spence(x), lambda: (_u(0.2, 0.95, 18),)),  # JAX: NaN above 1
    "hyp1f1_z": (lambda s, z: s.hyp1f1(0.7, 1.6, z), lambda: (_u(-2, 2, 19),)),
}


def _ct(y, seed):
    return np.random.default_rng(seed).standard_normal(np.shape(y))


def _flat(tree):
    return [leaf for t in tree for leaf in _flat(t)] if isinstance(tree, tuple) else [tree]


def _scalar(m, f, s, args):
    """sum_k <ct_k, y_k> over the outputs: one number whose gradient is the VJP."""
    ys = _flat(f(s, *args))
    return sum(m.sum(y * _ct(y, 50 + i)) for i, y in enumerate(ys))


def _jax_main(out):
    """In the child: JAX's gradients for every case, saved to ``out``."""
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.special as js
    saved = {}
    for name, (f, make) in CASES.items():
        args = make()
        grads = jax.jit(jax.grad(lambda *a: _scalar(jnp, f, js, a),
                                 argnums=tuple(range(len(args)))))(*map(jnp.asarray, args))
        for i, g in enumerate(grads):
            saved[f"{name}/g{i}"] = np.asarray(g)
    np.savez(out, **saved)


@pytest.fixture(scope="module")
def jax_results(tmp_path_factory):
    return results_from_child(__file__, tmp_path_factory)


@pytest.mark.parametrize("name", list(CASES))
def test_grad_matches_jax(name, jax_results):
    import scipy.special as sp
    f, make = CASES[name]
    args = make()
    ours = tp.grad(lambda *a: _scalar(np, f, sp, a), argnums=tuple(range(len(args))))(*args)
    for i, g in enumerate(ours):
        np.testing.assert_allclose(g, jax_results[f"{name}/g{i}"], rtol=1e-7, atol=1e-10)


if __name__ == "__main__":
    _jax_main(sys.argv[1])
