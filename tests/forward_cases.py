"""Functions for the differential tests against JAX, written once over a
NumPy-like module ``m``, and JAX's answers for them.

JAX runs in a child process (``python forward_cases.py`` reads the inputs
from stdin and writes JAX's results to stdout, both pickled): JAX starts
threads, and the parallel tests fork later in the same pytest process.
"""
import pickle
import sys

import numpy as np


def mlp(m, p, x):
    h = m.tanh(p["W"] @ x + p["b"])
    return m.sum(h ** 2) + m.sum(m.exp(-p["b"] ** 2))


def dict_out(m, A, x):
    return {"s": m.sin(x), "pair": (x[0] * x, m.sum(x ** 3)), "mat": A @ x}


def two_args(m, a, b):
    return m.sum(m.tanh(b @ a)) * m.sum(a ** 2) + m.prod(b[0])


def with_aux(m, x):
    return m.sum(m.log1p(x ** 2)), {"norm": m.sum(x ** 2)}


def cases(m, ad, inp):
    """``{name: result}`` of each transformation ``ad`` (tapestry or jax
    module) on the functions above; ``m`` is the matching NumPy module."""
    p, x, A, tp_, tx, a, b, v = (inp[k] for k in ("p", "x", "A", "tp", "tx", "a", "b", "v"))
    out = {
        "jvp_mlp": ad.jvp(lambda p, x: mlp(m, p, x), (p, x), (tp_, tx)),
        "jvp_aux": ad.jvp(lambda x: with_aux(m, x), (x,), (tx,), has_aux=True),
        "hess_p": ad.hessian(lambda p: mlp(m, p, x))(p),
        "hess_ab": ad.hessian(lambda a, b: two_args(m, a, b), argnums=(0, 1))(a, b),
        "hess_b": ad.hessian(lambda a, b: two_args(m, a, b), argnums=1)(a, b),
    }
    y, f_jvp = ad.linearize(lambda x: dict_out(m, A, x), x)
    out["linearize"] = (y, f_jvp(tx))
    for jname in ("jacfwd", "jacrev"):
        jac = getattr(ad, jname)
        out[jname] = (jac(lambda x: dict_out(m, A, x))(x),
                      jac(lambda p, x: mlp(m, p, x), argnums=(0, 1))(p, x),
                      jac(lambda p: {"y": mlp(m, p, x), "b": p["b"] * 2})(p),
                      jac(lambda x: with_aux(m, x), has_aux=True)(x))
    return out


def hvp_jax(jax, m, inp):
    p, x, v = inp["p"], inp["x"], inp["v"]
    return jax.jvp(jax.grad(lambda p: mlp(m, p, x)), (p,), (v,))[1]


def _to_numpy(tree):
    if isinstance(tree, dict):
        return {k: _to_numpy(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_to_numpy(v) for v in tree)
    return np.asarray(tree)


if __name__ == "__main__":
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    inputs = pickle.load(sys.stdin.buffer)
    results = cases(jnp, jax, inputs)
    results["hvp"] = hvp_jax(jax, jnp, inputs)
    sys.stdout.buffer.write(pickle.dumps(_to_numpy(results)))
