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


def rk4_pendulum(m, s, dt):
    """One RK4 step of a pendulum; the state is a (q, p) tuple."""
    def f(q, p):
        return p, -m.sin(q)
    q, p = s
    k1 = f(q, p)
    k2 = f(q + dt / 2 * k1[0], p + dt / 2 * k1[1])
    k3 = f(q + dt / 2 * k2[0], p + dt / 2 * k2[1])
    k4 = f(q + dt * k3[0], p + dt * k3[1])
    return (q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
            p + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))


def linalg_mix(m, M, b):
    s, ld = m.linalg.slogdet(M)
    return {"x": m.linalg.solve(M, b), "ld": s * ld, "inv": m.linalg.inv(M),
            "det": m.linalg.det(M), "n": m.linalg.norm(M @ b)}


def decomp_loss(m, A):
    q, r = m.linalg.qr(A)
    sv = m.linalg.svd(A, compute_uv=False)
    return m.sum(r ** 2) + m.sum(q * A) ** 2 + m.sum(sv ** 3) + m.linalg.norm(A, "nuc")


def spd_loss(m, x):
    S = m.outer(x, x) + m.diag(m.arange(1.0, x.shape[0] + 1))
    L = m.linalg.cholesky(S)
    w = m.linalg.eigh(S)[0]
    return 2 * m.sum(m.log(m.diag(L))) + m.sum(w ** 2) + m.trace(m.linalg.inv(S))


def specials(m, sp, x):
    return (sp.gammaln(x), sp.digamma(x), sp.erf(x), sp.expit(x), sp.log_ndtr(x - 1),
            sp.logsumexp(x), sp.softmax(x), sp.xlogy(x, x + 1))


def select_ops(m, x):
    s = m.sort(x)
    return (m.where(s > 0, s ** 2, m.clip(s, -0.5, 0.5)), m.cumsum(x) * m.cumprod(x * 0.5 + 1),
            m.max(x.reshape(2, 3), axis=1, keepdims=True), x[m.argsort(x)][::2],
            m.einsum("i,j->ij", x, x)[1:3], m.var(x.reshape(3, 2), axis=0))


def extra_cases(m, ad, sla, sp, inp):
    """More programs: physics steps, linalg, special functions, selections,
    tuples as primals, 0-d inputs, jvp of grad, linearize called repeatedly."""
    M, b, A, y, s0, S, T = (inp[k] for k in ("M", "bvec", "A", "y", "s0", "S", "T"))
    out = {
        "rk4_jacfwd": ad.jacfwd(lambda s: rk4_pendulum(m, s, 0.1))(s0),
        "rk4_jvp": ad.jvp(lambda s: rk4_pendulum(m, s, 0.1), (s0,), ((b[:2], b[1:]),)),
        "linalg_jvp": ad.jvp(lambda M, b: linalg_mix(m, M, b), (M, b), (T, y)),
        "linalg_jacfwd": ad.jacfwd(lambda M, b: linalg_mix(m, M, b), argnums=(0, 1))(M, b),
        "decomp_hess": ad.hessian(lambda A: decomp_loss(m, A))(A.T),
        "spd_hess": ad.hessian(lambda x: spd_loss(m, x))(b),
        "expm_tri": ad.jvp(lambda M, b: (sla.expm(0.3 * M), sla.solve_triangular(M, b, lower=True),
                                         sla.cho_solve(sla.cho_factor(S, lower=True), b * M[0])),
                           (M, b), (T, y)),
        "specials": ad.jvp(lambda x: specials(m, sp, x), (y * y + 0.5,), (b,)),
        "special_hess": ad.hessian(lambda x: m.sum(sp.gammaln(x) * sp.erf(x) + sp.logsumexp(2 * x)))(
            y * y + 0.5),
        "select": ad.jacfwd(lambda x: select_ops(m, x))(inp["x6"]),
        "zero_d_hess": ad.hessian(lambda a, c: m.sin(a * c) + a ** 3 * m.log(c), argnums=(0, 1))(
            inp["a0"], inp["c0"]),
        "hess_argnums": ad.hessian(lambda x, W, c: m.sum(m.tanh(W @ x) * c) + c ** 2 * m.sum(x ** 4),
                                   argnums=(0, 2))(b, M, inp["a0"]),
        "jvp_of_grad": ad.jvp(ad.grad(lambda M: m.sum(m.linalg.solve(M, b) ** 2)), (M,), (T,)),
    }
    y0, f_jvp = ad.linearize(lambda M, b: linalg_mix(m, M, b), M, b)
    out["linearize_many"] = (y0, f_jvp(T, y), f_jvp(M, b), f_jvp(T, y))
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
    import jax.scipy.linalg
    import jax.scipy.special
    results.update(extra_cases(jnp, jax, jax.scipy.linalg, jax.scipy.special, inputs))
    sys.stdout.buffer.write(pickle.dumps(_to_numpy(results)))
