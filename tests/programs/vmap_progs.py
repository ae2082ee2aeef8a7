"""Realistic vmapped programs, each written once against a NumPy-like
namespace ``x`` (``numpy`` for tapestry, ``jax.numpy`` for JAX) and a
transform namespace ``T`` (``tapestry`` or JAX's), so the same text runs
under ``tp.vmap`` and ``jax.vmap`` (tests/test_user_programs_vmap.py).

``PROGRAMS[name] = VProg(f, args, in_axes, out_axes, axis_size, grad)``:
``f(*args, x=, T=)`` is the per-item function (``T.special`` and
``T.linalg`` are tapestry.scipy's or jax.scipy's), called as
``T.vmap(f, in_axes, out_axes, axis_size)(*args)``.  ``grad`` says whether
the gradient of a scalar of the outputs with respect to the float
arguments is compared as well (through the vmap).

Only NumPy is imported here: the JAX child process imports this module too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

rng = np.random.default_rng(20261126)
B = 5


@dataclass
class VProg:
    f: Callable
    args: tuple
    in_axes: Any = 0
    out_axes: Any = 0
    axis_size: Any = None
    grad: bool = True
    kwargs: dict = None    # keyword arguments: mapped over their axis 0, as in JAX


PROGRAMS: dict = {}


def registry(programs):
    """The ``@prog(*args, in_axes=...)`` decorator of a program module: it
    registers the decorated per-item function in ``programs`` as a
    :class:`VProg`, under its name (or ``name``)."""
    def prog(*args, in_axes=0, out_axes=0, axis_size=None, grad=True, name=None, kwargs=None):
        def deco(f):
            programs[name or f.__name__] = VProg(f, args, in_axes, out_axes, axis_size, grad,
                                                 kwargs or {})
            return f
        return deco
    return prog


def random_arrays(gen):
    """``(r, spd)`` drawing from ``gen``: ``r(*shape)`` standard normal,
    ``spd(..., n, n)`` symmetric positive definite matrices."""
    def r(*shape):
        return gen.standard_normal(shape)

    def spd(*shape):
        a = r(*shape)
        return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
    return r, spd


prog = registry(PROGRAMS)
r, spd = random_arrays(rng)


# --- data ---------------------------------------------------------------------------
XB = r(B, 3)                      # one 3-vector per item
YB = r(B, 2)
MB = r(B, 3, 3)
SPDB = spd(B, 3, 3)
SEQ = r(B, 4, 6)                  # a sequence of 4 tokens of width 6 per item
PAR = {"W1": r(4, 3), "b1": r(4), "W2": r(2, 4), "b2": r(2)}
ENS = {k: np.stack([v * (1 + 0.3 * j) for j in range(3)]) for k, v in PAR.items()}
W36 = r(3, 6)
W66 = r(6, 6) / 3
LAB = rng.integers(0, 3, B)
TOK = rng.integers(0, 7, (B, 4))
TABLE = r(7, 3)
PTS = r(B, 4, 2)                  # 4 points in 2-d per item
REF = r(6, 2)


# --- helpers the programs share (namespace passed in) --------------------------------
def _mlp(p, xi, x):
    h = x.tanh(p["W1"] @ xi + p["b1"])
    return p["W2"] @ h + p["b2"]


def _mse(p, xi, yi, x):
    return x.sum((_mlp(p, xi, x) - yi) ** 2)


def _lse(v, x, axis=None, keepdims=False):
    m = x.max(v, axis=axis, keepdims=True)
    out = x.log(x.sum(x.exp(v - m), axis=axis, keepdims=True)) + m
    return out if keepdims else (x.squeeze(out, axis=axis) if axis is not None else out.reshape(()))


def _softmax(v, x, axis=-1):
    e = x.exp(v - x.max(v, axis=axis, keepdims=True))
    return e / x.sum(e, axis=axis, keepdims=True)


def _layernorm(h, g, b, x, eps=1e-5):
    mu = x.mean(h, axis=-1, keepdims=True)
    var = x.var(h, axis=-1, keepdims=True)
    return (h - mu) / x.sqrt(var + eps) * g + b


# === per-example gradients ===========================================================
@prog(PAR, XB, YB, in_axes=(None, 0, 0))
def pe_grad_dict(p, xi, yi, x, T):
    return T.grad(_mse)(p, xi, yi, x)


@prog((r(2, 3), r(2)), XB, YB, in_axes=(None, 0, 0))
def pe_grad_tuple_params(p, xi, yi, x, T):
    def loss(p):
        W, b = p
        return x.sum((W @ xi + b - yi) ** 2)
    return T.grad(loss)(p)


@prog([r(4, 3), r(4), r(2, 4)], XB, YB, in_axes=(None, 0, 0))
def pe_grad_list_params(p, xi, yi, x, T):
    def loss(p):
        h = x.maximum(p[0] @ xi + p[1], 0.0)
        return 0.5 * x.sum((p[2] @ h - yi) ** 2)
    return T.grad(loss)(p)


@prog(PAR, XB, YB, in_axes=(None, 0, 0))
def pe_value_and_grad(p, xi, yi, x, T):
    return T.value_and_grad(lambda q: _mse(q, xi, yi, x))(p)


@prog(r(3), 0.5, XB, LAB.astype(float) % 2, in_axes=(None, None, 0, 0))
def pe_logistic_argnums(w, b, xi, yi, x, T):
    def nll(w, b):
        z = xi @ w + b
        return x.log1p(x.exp(-z)) + (1 - yi) * z
    return T.grad(nll, argnums=(0, 1))(w, b)


@prog(PAR, XB, YB, in_axes=(None, 0, 0))
def pe_grad_clipped(p, xi, yi, x, T):
    g = T.grad(_mse)(p, xi, yi, x)
    norm = x.sqrt(sum(x.sum(v ** 2) for v in g.values()))
    scale = x.minimum(1.0, 1.0 / (norm + 1e-12))
    return {k: v * scale for k, v in g.items()}


@prog(r(3, 3), XB, LAB, in_axes=(None, 0, 0))
def pe_softmax_xent(W, xi, yi, x, T):
    def loss(W):
        logits = W @ xi
        return _lse(logits, x) - logits[yi]
    return T.grad(loss)(W)


@prog(r(3), XB, in_axes=(None, 0))
def pe_hessian(w, xi, x, T):
    return T.hessian(lambda w: x.sum(x.log(1 + x.exp(w * xi))) + 0.1 * x.sum(w ** 4))(w)


@prog(PAR, XB, in_axes=(None, 0))
def pe_jacrev_input(p, xi, x, T):
    return T.jacrev(lambda v: _mlp(p, v, x))(xi)


@prog(PAR, XB, in_axes=(None, 0))
def pe_jacfwd_input(p, xi, x, T):
    return T.jacfwd(lambda v: _mlp(p, v, x))(xi)


@prog(PAR, XB, in_axes=(None, 0))
def pe_saliency(p, xi, x, T):
    return T.grad(lambda v: _mlp(p, v, x)[0])(xi)


@prog(PAR, XB, YB, in_axes=(None, 0, 0))
def pe_vg_has_aux(p, xi, yi, x, T):
    def loss(q):
        out = _mlp(q, xi, x)
        return x.sum((out - yi) ** 2), out
    (val, out), g = T.value_and_grad(loss, has_aux=True)(p)
    return val, out, g["W1"]


@prog(r(3, 2), r(B, 8), r(B, 6), in_axes=(None, 0, 0))
def pe_conv1d(k, sig, target, x, T):
    def loss(k):
        windows = x.stack([sig[i:i + 3] for i in range(6)])   # (6, 3)
        out = x.tanh(windows @ k).sum(axis=1)
        return x.mean((out - target) ** 2)
    return T.grad(loss)(k)


@prog(PAR, r(B, 2, 3), r(B, 2, 2), in_axes=(None, 0, 0))
def pe_minibatch_of_pairs(p, xs, ys, x, T):
    def loss(q):
        return sum(_mse(q, xs[j], ys[j], x) for j in range(2))
    return T.grad(loss)(p)["W2"]


# === grad of a function that calls vmap =================================================
@prog(PAR, r(B, 6, 3), r(B, 6, 2), in_axes=(None, 0, 0))
def grad_of_vmapped_loss(p, Xs, Ys, x, T):
    def total(q):
        return x.mean(T.vmap(lambda a, b: _mse(q, a, b, x))(Xs, Ys))
    return T.grad(total)(p)


@prog(r(3), r(B, 6, 3), in_axes=(None, 0))
def hvp_of_vmapped(w, Xs, x, T):
    def f(w):
        return x.sum(T.vmap(lambda a: x.sin(a @ w) ** 2)(Xs))
    v = x.ones(3)
    return T.grad(lambda w: x.sum(T.grad(f)(w) * v))(w)


# === ensembles ==========================================================================
@prog(ENS, XB[0], YB[0], in_axes=(0, None, None))
def ens_loss(p, xi, yi, x, T):
    return _mse(p, xi, yi, x)


@prog({"W": r(3, 2, 3), "b": r(2)}, r(4, 3), in_axes=({"W": 0, "b": None}, None))
def ens_none_leaf(p, X, x, T):
    return x.tanh(X @ p["W"].T + p["b"])


@prog((r(3, 2, 3), r(2)), XB[0], in_axes=((0, None), None))
def ens_tuple_none_leaf(p, xi, x, T):
    W, b = p
    return _softmax(W @ xi + b, x)


@prog(ENS, r(6, 3), in_axes=(0, None))
def ens_predict_dataset(p, X, x, T):
    h = x.tanh(X @ p["W1"].T + p["b1"])
    return h @ p["W2"].T + p["b2"]


@prog(ENS, XB[0], YB[0], in_axes=(0, None, None))
def ens_value_and_grad(p, xi, yi, x, T):
    return T.value_and_grad(_mse)(p, xi, yi, x)


@prog(ENS, XB, YB, in_axes=(0, None, None))
def ens_over_data(p, Xs, Ys, x, T):
    return T.vmap(lambda a, b: _mse(p, a, b, x))(Xs, Ys)


@prog([r(3, 3, 3), r(3, 3)], r(3, 3), in_axes=([0, None], 0))
def ens_list_in_axes(p, xi, x, T):
    return x.tanh(p[0] @ xi) @ p[1]


# === attention / softmax / norms =========================================================
@prog(XB)
def softmax_stable(v, x, T):
    return _softmax(v, x)


@prog(XB)
def log_softmax(v, x, T):
    return v - _lse(v, x)


@prog(SEQ, r(6), r(6), in_axes=(0, None, None))
def layernorm(h, g, b, x, T):
    return _layernorm(h, g, b, x)


@prog(SEQ, r(6, 4), r(6, 4), r(6, 4), in_axes=(0, None, None, None))
def self_attention(h, Wq, Wk, Wv, x, T):
    q, k, v = h @ Wq, h @ Wk, h @ Wv
    s = q @ k.T / x.sqrt(4.0)
    return _softmax(s, x) @ v


@prog(SEQ, W66, W66.T.copy(), in_axes=(0, None, None))
def multihead_attention(h, Wqk, Wo, x, T):
    L = h.shape[0]
    q = (h @ Wqk).reshape(L, 2, 3).transpose(1, 0, 2)     # (heads, L, 3)
    s = x.einsum("hld,hmd->hlm", q, q) / x.sqrt(3.0)
    o = x.einsum("hlm,hmd->hld", _softmax(s, x), q)
    return x.transpose(o, (1, 0, 2)).reshape(L, 6) @ Wo


@prog(SEQ)
def causal_attention(h, x, T):
    L = h.shape[0]
    s = h @ h.T
    mask = x.tril(x.ones((L, L))) > 0
    s = x.where(mask, s, -x.inf)
    return _softmax(s, x) @ h


@prog(SEQ, r(6), in_axes=(0, None))
def rmsnorm(h, g, x, T):
    return h / x.sqrt(x.mean(h ** 2, axis=-1, keepdims=True) + 1e-6) * g


@prog(SEQ, W66, in_axes=(0, None))
def gelu_mlp(h, W, x, T):
    u = h @ W
    return 0.5 * u * (1 + x.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))


@prog(SEQ)
def batchnorm_over_tokens(h, x, T):
    return (h - h.mean(axis=0)) / x.sqrt(h.var(axis=0) + 1e-5)


@prog(SEQ, W66, W66.T.copy(), r(6), r(6), in_axes=(0, None, None, None, None))
def transformer_block(h, W1, W2, g, b, x, T):
    a = _softmax(h @ h.T / x.sqrt(6.0), x) @ h
    h = _layernorm(h + a, g, b, x)
    return _layernorm(h + x.maximum(h @ W1, 0) @ W2, g, b, x).mean(axis=0)


@prog(r(B, 4, 3), r(B, 3, 3) * 2, in_axes=(0, 0))
def temperature_softmax(v, t, x, T):
    return _softmax(v / (1.0 + t[0] ** 2), x, axis=0)


@prog(XB, np.array(1.7), in_axes=(0, None))
def entropy_of_softmax(v, temp, x, T):
    p = _softmax(v / temp, x)
    return -x.sum(p * x.log(p))


# === kernels, distances ===================================================================
@prog(PTS, 0.8, in_axes=(0, None))
def rbf_gram(p, ls, x, T):
    d2 = x.sum((p[:, None, :] - p[None, :, :]) ** 2, axis=-1)
    return x.exp(-0.5 * d2 / ls ** 2)


@prog(PTS, REF, in_axes=(0, None))
def cdist_to_reference(p, ref, x, T):
    return x.sqrt(x.sum((p[:, None, :] - ref[None, :, :]) ** 2, axis=-1))


@prog(PTS)
def pairwise_nested_vmap(p, x, T):
    k = lambda a, b: x.exp(-x.sum((a - b) ** 2))  # noqa: E731
    return T.vmap(T.vmap(k, in_axes=(None, 0)), in_axes=(0, None))(p, p)


@prog(np.abs(r(B)) + 0.5, PTS[0], r(4), in_axes=(0, None, None))
def gp_log_marginal(ls, X, y, x, T):
    d2 = x.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = x.exp(-0.5 * d2 / ls ** 2) + 0.1 * x.eye(X.shape[0])
    L = x.linalg.cholesky(K)
    alpha = x.linalg.solve(K, y)
    return -0.5 * y @ alpha - x.sum(x.log(x.diagonal(L))) - 2 * x.log(2 * x.pi)


@prog(r(B, 2), PTS[0], r(4), in_axes=(0, None, None))
def gp_predictive_mean(xs, X, y, x, T):
    K = x.exp(-x.sum((X[:, None] - X[None]) ** 2, -1)) + 0.1 * x.eye(4)
    ks = x.exp(-x.sum((X - xs) ** 2, axis=1))
    return ks @ x.linalg.solve(K, y), 1.0 - ks @ x.linalg.solve(K, ks)


@prog(PTS)
def matern32_gram(p, x, T):
    d = x.sqrt(x.sum((p[:, None, :] - p[None, :, :]) ** 2, axis=-1) + 1e-9)
    return (1 + x.sqrt(3.0) * d) * x.exp(-x.sqrt(3.0) * d)


@prog(r(B, 2), REF, in_axes=(0, None), grad=False)
def knn_indices(q, ref, x, T):
    d = x.sum((ref - q) ** 2, axis=1)
    return x.argsort(d)[:3]


@prog(r(B, 2), REF, r(6), in_axes=(0, None, None))
def knn_regression(q, ref, vals, x, T):
    d = x.sum((ref - q) ** 2, axis=1)
    idx = x.argsort(d)[:3]
    return x.mean(vals[idx])


@prog(PTS, PTS[::-1].copy(), in_axes=(0, 0))
def linear_kernel_cross(a, b, x, T):
    return a @ b.T + 1.0


# === ODEs ================================================================================
@prog(r(B, 2), in_axes=0)
def rk4_oscillator(y, x, T):
    def f(y):
        return x.stack([y[1], -y[0] - 0.1 * y[1]])
    h = 0.1
    for _ in range(5):
        k1 = f(y); k2 = f(y + h / 2 * k1); k3 = f(y + h / 2 * k2); k4 = f(y + h * k3)  # noqa: E702
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


@prog(np.abs(r(B)) + 0.2, np.abs(r(B)) + 1.0, in_axes=(0, 0))
def euler_logistic(rate, cap, x, T):
    y, ys = 0.1, []
    for _ in range(8):
        y = y + 0.2 * rate * y * (1 - y / cap)
        ys.append(y)
    return x.stack(ys)


@prog(r(B, 3) * 0.5 + 1.0, np.array([10.0, 28.0, 8 / 3]), in_axes=(0, None))
def lorenz_rk4(s, th, x, T):
    def f(s):
        return x.stack([th[0] * (s[1] - s[0]), s[0] * (th[1] - s[2]) - s[1], s[0] * s[1] - th[2] * s[2]])
    h = 0.005
    for _ in range(4):
        k1 = f(s); k2 = f(s + h / 2 * k1); k3 = f(s + h / 2 * k2); k4 = f(s + h * k3)  # noqa: E702
        s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s


@prog(r(B, 2), r(B, 2), in_axes=(0, 0))
def leapfrog_pendulum(q, p, x, T):
    dt = 0.05
    for _ in range(6):
        p = p - 0.5 * dt * x.sin(q)
        q = q + dt * p
        p = p - 0.5 * dt * x.sin(q)
    return x.concatenate([q, p])


@prog(r(B, 3), r(3, 3) * 0.3, in_axes=(0, None))
def linear_ode_expm_series(y0, A, x, T):
    E, term = x.eye(3), x.eye(3)
    for k in range(1, 8):
        term = term @ A / k
        E = E + term
    return E @ y0


@prog(r(B, 4), in_axes=0)
def heat_equation_steps(u, x, T):
    for _ in range(5):
        lap = x.roll(u, 1) + x.roll(u, -1) - 2 * u
        u = u + 0.2 * lap
    return u


# === MCMC log-densities ====================================================================
@prog(r(B, 3), spd(3, 3), in_axes=(0, None))
def gaussian_logp_precision(z, P, x, T):
    return -0.5 * z @ P @ z


@prog(r(B, 3), r(8, 3), (r(8) > 0).astype(float), in_axes=(0, None, None))
def logistic_posterior_chains(w, X, y, x, T):
    z = X @ w
    return x.sum(y * z - x.logaddexp(0.0, z)) - 0.5 * x.sum(w ** 2)


@prog(r(B, 3), r(3), SPDB, in_axes=(0, None, 0))
def mvn_logpdf_slogdet(z, mu, S, x, T):
    sign, logdet = x.linalg.slogdet(S)
    d = z - mu
    return -0.5 * (d @ x.linalg.solve(S, d) + logdet + 3 * x.log(2 * x.pi))


@prog(r(B, 3), 3.0, in_axes=(0, None))
def student_t_logp(z, nu, x, T):
    return -0.5 * (nu + 1) * x.sum(x.log1p(z ** 2 / nu))


@prog(r(B, 3), r(B, 3), in_axes=(0, 0))
def hmc_leapfrog(q, p, x, T):
    logp = lambda q: -0.5 * x.sum(q ** 2) - 0.1 * x.sum(q ** 4)  # noqa: E731
    eps = 0.1
    p = p + 0.5 * eps * T.grad(logp)(q)
    for _ in range(3):
        q = q + eps * p
        p = p + eps * T.grad(logp)(q)
    return q, p


@prog(r(B, 3), r(B, 3), np.log(rng.uniform(size=B)), in_axes=(0, 0, 0))
def metropolis_accept(cur, prop, logu, x, T):
    logp = lambda q: -0.5 * x.sum(q ** 2)  # noqa: E731
    accept = logu < logp(prop) - logp(cur)
    return x.where(accept, prop, cur), accept


@prog(r(B, 3), rng.integers(0, 3, 10), r(10), in_axes=(0, None, None))
def hierarchical_group_means(mu, group, y, x, T):
    return -0.5 * x.sum((y - mu[group]) ** 2) - 0.5 * x.sum(mu ** 2)


@prog(np.abs(r(B)) + 0.5, r(B), r(12), in_axes=(0, 0, None))
def normal_logp_sigma_mu(sigma, mu, data, x, T):
    return x.sum(-0.5 * ((data - mu) / sigma) ** 2 - x.log(sigma)) - 0.5 * x.log(2 * x.pi) * data.size


# === mixtures / logsumexp ====================================================================
@prog(r(B), r(3), np.log(np.array([0.2, 0.5, 0.3])), np.array([0.5, 1.0, 2.0]),
      in_axes=(0, None, None, None))
def gmm_loglik(z, means, logw, sds, x, T):
    comp = logw - 0.5 * ((z - means) / sds) ** 2 - x.log(sds) - 0.5 * x.log(2 * x.pi)
    return _lse(comp, x)


@prog(r(B, 6), r(3), in_axes=(0, None))
def gmm_responsibilities(z, means, x, T):
    logits = -0.5 * (z[:, None] - means[None, :]) ** 2
    return _softmax(logits, x, axis=1)


@prog(r(B, 4, 3))
def logsumexp_keepdims(v, x, T):
    return v - _lse(v, x, axis=1, keepdims=True)


@prog(r(B, 4), r(4, 2), in_axes=(0, None))
def mixture_of_experts(h, W, x, T):
    gate = _softmax(h @ W, x)
    experts = x.stack([x.tanh(h), x.sin(h)])    # (2, 4)
    return gate @ experts


@prog(r(B, 5))
def logaddexp_reduce(v, x, T):
    acc = v[0]
    for j in range(1, 5):
        acc = x.logaddexp(acc, v[j])
    return acc


# === linear algebra ====================================================================
@prog(SPDB, XB)
def solve_both(A, b, x, T):
    return x.linalg.solve(A, b)


@prog(SPDB, XB[0], in_axes=(0, None))
def solve_matrix_batched(A, b, x, T):
    return x.linalg.solve(A, b)


@prog(SPDB[0], XB, in_axes=(None, 0))
def solve_rhs_batched(A, b, x, T):
    return x.linalg.solve(A, b)


@prog(SPDB, r(B, 3, 2))
def solve_matrix_rhs(A, b, x, T):
    return x.linalg.solve(A, b)


def _spd(M, x):
    """A symmetric positive definite matrix built from a free parameter (the
    gradient of cholesky / eigh in A itself follows NumPy's convention, one
    triangle, where JAX's is symmetrised: tests/test_user_programs_jax.py)."""
    return M @ M.T + M.shape[0] * x.eye(M.shape[0])


@prog(MB)
def cholesky_factor(M, x, T):
    return x.linalg.cholesky(_spd(M, x))


@prog(MB, XB)
def cholesky_solve_two_steps(M, b, x, T):
    L = x.linalg.cholesky(_spd(M, x))
    z = x.linalg.solve(L, b)
    return x.linalg.solve(L.T, z)


@prog(MB)
def slogdet_both(A, x, T):
    s, l = x.linalg.slogdet(A)
    return s, l


@prog(MB)
def eigh_values_and_projector(M, x, T):
    w, v = x.linalg.eigh(_spd(M, x))
    return w, v @ x.diag(w ** 2) @ v.T


@prog(MB)
def eigvalsh(M, x, T):
    return x.linalg.eigvalsh(_spd(M, x))


@prog(MB)
def inv(A, x, T):
    return x.linalg.inv(A)


@prog(MB)
def det(A, x, T):
    return x.linalg.det(A)


@prog(r(B, 5, 3), r(B, 5))
def lstsq(A, b, x, T):
    return x.linalg.lstsq(A, b, rcond=None)[0]


@prog(r(B, 4, 3))
def pinv(A, x, T):
    return x.linalg.pinv(A)


@prog(MB)
def norms(A, x, T):
    return (x.linalg.norm(A), x.linalg.norm(A, ord=1), x.linalg.norm(A, ord=x.inf),
            x.linalg.norm(A, axis=0), x.linalg.norm(A[0], ord=3))


@prog(MB)
def matrix_power_trace(A, x, T):
    return x.trace(x.linalg.matrix_power(A, 3)) + x.trace(x.linalg.matrix_power(A, 0))


@prog(MB)
def qr_r_abs(A, x, T):
    q, rr = x.linalg.qr(A)
    return x.abs(x.diag(rr)), q @ rr


@prog(r(B, 4, 3))
def svd_values(A, x, T):
    return x.linalg.svd(A, compute_uv=False)


@prog(XB, r(B, 3))
def cross_and_outer(a, b, x, T):
    return x.cross(a, b), x.outer(a, b), x.kron(a, b[:2])


@prog(MB, r(3, 3, 2), in_axes=(0, None))
def tensordot_axes(A, Tn, x, T):
    return x.tensordot(A, Tn, axes=([0, 1], [0, 1])), x.tensordot(A, A, axes=1)


@prog(MB)
def logdet_via_cholesky(M, x, T):
    return 2 * x.sum(x.log(x.diag(x.linalg.cholesky(_spd(M, x)))))


@prog(MB, XB)
def inner_vdot_dot(A, v, x, T):
    return x.inner(v, v), x.vdot(v, A @ v), x.dot(A, v), x.matmul(v, A)


@prog(SPDB, in_axes=0)
def newton_inverse_sqrt(A, x, T):
    Y = x.eye(3) / x.trace(A)
    for _ in range(4):
        Y = 0.5 * Y @ (3 * x.eye(3) - A @ Y @ Y)
    return Y


# === gathers / indexing =================================================================
@prog(TABLE, TOK, in_axes=(None, 0))
def embedding_lookup(E, tok, x, T):
    return E[tok].mean(axis=0)


@prog(r(B, 7, 3), in_axes=0)
def constant_index_batched_table(E, x, T):
    idx = x.array([0, 3, 3, 6])
    return E[idx] * 2.0


@prog(r(B, 7), TOK)
def gather_both_batched(v, tok, x, T):
    return v[tok]


@prog(r(B, 4, 3), rng.integers(0, 3, (B, 4, 1)))
def take_along_axis(v, idx, x, T):
    return x.take_along_axis(v, idx, axis=1)


@prog(r(5, 4), rng.integers(0, 5, B), rng.integers(0, 4, B), in_axes=(None, 0, 0))
def gather_2d_pair(t, i, j, x, T):
    return t[i, j]


@prog(r(B, 4, 3), LAB, in_axes=(0, 0))
def slice_with_batched_column(t, j, x, T):
    return t[:, j]


@prog(r(B, 4, 3), in_axes=0)
def negative_and_step_slices(t, x, T):
    return t[-1], t[::-2, 1:], t[..., -1], t[1:3, None, :]


@prog(r(B, 3), LAB, np.eye(3), in_axes=(0, 0, None))
def one_hot_eye(v, lab, eye, x, T):
    oh = eye[lab]
    return x.sum(oh * x.log(_softmax(v, x)))


@prog(r(B, 3), LAB, in_axes=(0, 0))
def one_hot_arange(v, lab, x, T):
    oh = (x.arange(3) == lab).astype(v.dtype)
    return oh * v, oh


@prog(r(B, 4))
def argmax_one_hot(v, x, T):
    return (x.arange(4) == x.argmax(v)) * v


@prog(TABLE, -rng.integers(1, 7, B), in_axes=(None, 0))
def gather_negative_index(E, i, x, T):
    return E[i]


@prog(r(B, 5))
def mask_mean(v, x, T):
    m = v > 0
    return x.sum(x.where(m, v, 0.0)) / x.maximum(x.sum(m), 1)


@prog(r(B, 7), rng.integers(0, 7, 3), in_axes=(0, None))
def take_unbatched_indices(v, idx, x, T):
    return x.take(v, idx), v[idx]


@prog(r(6, 3), rng.integers(0, 6, (B, 2)), in_axes=(None, 0))
def take_rows_axis0(t, idx, x, T):
    return x.take(t, idx, axis=0)


@prog(r(B, 4), rng.integers(0, 4, B))
def scatter_by_one_hot(v, i, x, T):
    oh = (x.arange(4) == i).astype(v.dtype)
    return v * (1 - oh) + 10.0 * oh


@prog(r(B, 4), LAB, in_axes=(0, 0))
def dynamic_slice_window(v, start, x, T):
    idx = start + x.arange(2)
    return v[idx]


# === scans / sorting ====================================================================
@prog(r(B, 6))
def cumsum_cumprod(v, x, T):
    return x.cumsum(v), x.cumprod(1 + 0.1 * v), x.cumsum(v[::-1])[::-1]


@prog(r(B, 3, 4))
def cumsum_axis(v, x, T):
    return x.cumsum(v, axis=0), x.cumsum(v, axis=-1)


@prog(r(B, 6))
def sort_topk_values(v, x, T):
    return x.sort(v)[-3:], -x.sort(-v)


@prog(r(B, 6), grad=False)
def argsort_ranks(v, x, T):
    return x.argsort(x.argsort(v)), x.argsort(v)[::-1][:2]


@prog(r(B, 3, 4))
def sort_axis0(v, x, T):
    return x.sort(v, axis=0), x.sort(v, axis=1)


@prog(r(B, 6))
def diff_and_quantile(v, x, T):
    return x.diff(v), x.diff(v, n=2), x.quantile(v, 0.3), x.median(v), x.percentile(v, 75.0)


@prog(np.sort(r(6)), r(B, 4), in_axes=(None, 0), grad=False)
def searchsorted_bins(edges, q, x, T):
    return x.searchsorted(edges, q)


@prog(r(B, 5), grad=False)
def argmax_argmin_ints(v, x, T):
    return x.argmax(v), x.argmin(v), x.count_nonzero(v > 0), x.any(v > 1), x.all(v > -2)


@prog(r(B, 3, 4))
def max_min_axis(v, x, T):
    return x.max(v, axis=1), x.min(v, axis=0), x.amax(v), x.ptp(v, axis=1)


@prog(r(B, 6), in_axes=0)
def topk_mask_mean(v, x, T):
    thr = x.sort(v)[-3]
    return x.sum(x.where(v >= thr, v, 0.0)) / 3


# === elementwise choices =================================================================
@prog(r(B, 5) * 2, 1.0, in_axes=(0, None))
def huber(v, d, x, T):
    a = x.abs(v)
    return x.where(a <= d, 0.5 * v ** 2, d * (a - 0.5 * d))


@prog(r(B, 5))
def activations(v, x, T):
    return (x.where(v > 0, v, 0.01 * v), x.clip(v, -0.5, 0.5), x.maximum(v, 0.0),
            x.minimum(v, -v), x.abs(v), x.sign(v) * v ** 2)


@prog(r(B, 5), 0.3, in_axes=(0, None))
def soft_threshold(v, t, x, T):
    return x.sign(v) * x.maximum(x.abs(v) - t, 0.0)


@prog(r(B, 5))
def nested_where(v, x, T):
    return x.where(v > 0.5, 1.0, x.where(v < -0.5, -1.0, v ** 3))


@prog(r(B, 5))
def safe_log_nan_to_num(v, x, T):
    out = x.log(x.where(v > 0, v, 1.0))
    return x.nan_to_num(x.where(v > 0, out, x.nan)), x.isfinite(x.log(x.abs(v)))


@prog(r(B, 5), r(B, 5))
def clip_by_batched_bounds(v, lo, x, T):
    return x.clip(v, -x.abs(lo), x.abs(lo))


@prog(r(B, 5))
def softplus_sigmoid(v, x, T):
    return x.logaddexp(0.0, v), 1 / (1 + x.exp(-v)), x.tanh(v / 2)


@prog(r(B, 5), r(5), in_axes=(0, None))
def weighted_l1(v, w, x, T):
    return x.sum(x.abs(v - w) * x.exp(w))


# === einsum ===============================================================================
@prog(MB, XB, r(3, 4), in_axes=(0, 0, None))
def einsum_forms(A, v, W, x, T):
    return (x.einsum("ij,j->i", A, v), x.einsum("ij,jk->ik", A, W), x.einsum("i,i->", v, v),
            x.einsum("ii->", A), x.einsum("ij->ji", A), x.einsum("i,j->ij", v, v),
            x.einsum("ij,ij->i", A, A), x.einsum("ii->i", A))


@prog(r(B, 2, 3, 3), r(3, 3), in_axes=(0, None))
def einsum_batch_inside(A, W, x, T):
    return (x.einsum("bij,jk->bik", A, W), x.einsum("...ij,...jk->...ik", A, A),
            x.einsum("bij,bij->b", A, A))


@prog(XB, r(3, 3, 3), MB, in_axes=(0, None, 0))
def einsum_three_operands(v, Tn, A, x, T):
    return x.einsum("i,ijk,kl->jl", v, Tn, A), x.einsum("ijk,k->ij", Tn, v)


@prog(r(3, 4), r(B, 4), in_axes=(None, 0))
def einsum_unbatched_first(W, v, x, T):
    return x.einsum("ij,j->i", W, v), x.einsum("j,ij->i", v, W)


@prog(r(B, 3, 4))
def einsum_implicit(A, x, T):
    return x.einsum("ij,kj", A, A), x.einsum("ij", A)


# === shape manipulation ===================================================================
@prog(r(B, 2, 3, 4))
def reshapes(a, x, T):
    return a.reshape(-1), a.reshape(2, -1), x.reshape(a, (6, 4)), a.ravel(), a.flatten(), a.reshape((3, 2, 4), order="C")


@prog(r(B, 2, 3, 4))
def transposes(a, x, T):
    return a.T, x.transpose(a, (1, 0, 2)), a.transpose(2, 0, 1), x.moveaxis(a, 0, -1), x.swapaxes(a, 0, 2), x.moveaxis(a, [0, 1], [-1, -2])


@prog(r(B, 3, 1, 4))
def expand_squeeze(a, x, T):
    return (x.squeeze(a, axis=1), x.expand_dims(a, 0), x.expand_dims(a, -1), a[None, :, 0, None],
            x.squeeze(a), x.expand_dims(a[:, 0], axis=(0, 2)))


@prog(XB, r(3), in_axes=(0, None))
def concatenate_mixed(v, c, x, T):
    return x.concatenate([v, c]), x.concatenate([c, v, c]), x.concatenate([v[None], c[None]], axis=0), x.concatenate([v[:, None], c[:, None]], axis=-1)


@prog(XB, r(3), in_axes=(0, None))
def stack_mixed(v, c, x, T):
    return x.stack([v, c]), x.stack([c, v], axis=1), x.stack([v, c, v], axis=-1)


@prog(XB, r(3), in_axes=(0, None))
def hstack_vstack(v, c, x, T):
    return x.hstack([v, c]), x.vstack([v, c]), x.column_stack([v, c]), x.dstack([v, c])


@prog(r(B, 3, 2))
def pads(a, x, T):
    return (x.pad(a, ((1, 0), (0, 2))), x.pad(a, 1), x.pad(a, ((0, 0), (1, 1)), mode="edge"),
            x.pad(a, ((2, 1), (0, 0)), mode="reflect"), x.pad(a, ((1, 1), (1, 1)), constant_values=3.0))


@prog(r(B, 3, 4))
def rolls(a, x, T):
    return x.roll(a, 1), x.roll(a, -2, axis=1), x.roll(a, 1, axis=0), x.roll(a, (1, 2), axis=(0, 1))


@prog(r(B, 2, 3))
def tile_repeat(a, x, T):
    return x.tile(a, (2, 1)), x.repeat(a, 2, axis=1), x.repeat(a, 3), x.tile(a, 2)


@prog(r(B, 6, 2))
def splits(a, x, T):
    p, q, s = x.split(a, [1, 4])
    return p, q, s, x.split(a, 2, axis=0)[1], x.array_split(a, 2, axis=1)[0]


@prog(r(B, 3), in_axes=0)
def broadcast_to_shape(v, x, T):
    return x.broadcast_to(v, (2, 3)), x.broadcast_to(v[:, None], (3, 4))


@prog(r(B, 3, 4))
def flips(a, x, T):
    return x.flip(a), x.flip(a, axis=1), x.flipud(a), x.fliplr(a), x.rot90(a)


@prog(MB)
def triangles_diagonals(A, x, T):
    return x.triu(A), x.tril(A, -1), x.diag(A), x.diag(A, k=1), x.diagonal(A), x.trace(A), x.diag(A[0])


@prog(r(B, 2, 3))
def atleast_ravel_meshgrid(a, x, T):
    gx, gy = x.meshgrid(a[0], a[1], indexing="ij")
    return x.atleast_2d(a[0]), gx * gy, x.atleast_3d(a)


# === FFT ===================================================================================
@prog(r(B, 8))
def rfft_power(v, x, T):
    f = x.fft.rfft(v)
    return x.abs(f) ** 2


@prog(r(B, 8))
def fft_roundtrip(v, x, T):
    return x.real(x.fft.ifft(x.fft.fft(v) * x.exp(-0.1 * x.arange(8.0))))


@prog(r(B, 4, 4))
def fft2_abs(a, x, T):
    return x.abs(x.fft.fft2(a)), x.real(x.fft.ifft2(a))


@prog(r(B, 8))
def lowpass_irfft(v, x, T):
    f = x.fft.rfft(v)
    keep = x.arange(f.shape[0]) < 3
    return x.fft.irfft(x.where(keep, f, 0.0), n=8)


@prog(r(B, 8))
def fft_freq_derivative(v, x, T):
    k = x.fft.rfftfreq(8, d=0.1)
    return x.fft.irfft(2j * x.pi * k * x.fft.rfft(v), n=8)


@prog(r(B, 8), r(3), in_axes=(0, None))
def convolve_correlate(v, k, x, T):
    return x.convolve(v, k), x.convolve(v, k, mode="same"), x.correlate(v, k, mode="valid")


# === polynomials / interpolation ============================================================
@prog(r(B, 4), 0.7, in_axes=(0, None))
def polyval_batched_coeffs(c, t, x, T):
    return x.polyval(c, t)


@prog(r(4), r(B, 5), in_axes=(None, 0))
def polyval_batched_points(c, t, x, T):
    return x.polyval(c, t)


KNOTS = np.array([0.0, 0.5, 1.5, 2.0])


@prog(r(4), rng.uniform(0, 2, (B, 3)), in_axes=(None, 0))
def interp_batched_points(fp, q, x, T):
    return x.interp(q, x.asarray(KNOTS), fp)


@prog(r(B, 4), np.array([0.2, 1.0, 1.9]), in_axes=(0, None))
def interp_batched_values(fp, q, x, T):
    return x.interp(q, x.asarray(KNOTS), fp)


@prog(r(B, 4), in_axes=0)
def horner_loop(c, x, T):
    t = x.linspace(-1.0, 1.0, 5)
    acc = x.zeros_like(t)
    for j in range(c.shape[0]):
        acc = acc * t + c[j]
    return acc


@prog(r(B, 4), in_axes=0)
def trapezoid_integral(f, x, T):
    t = x.linspace(0, 1, 4)
    return x.sum(0.5 * (f[1:] + f[:-1]) * x.diff(t))


# === nested vmap ===========================================================================
@prog(r(B, 3), r(4, 3), in_axes=(0, None))
def nested_pairwise_two_batches(a, bs, x, T):
    return T.vmap(lambda u: x.dot(a, u) / (1 + x.sum(u ** 2)))(bs)


@prog(r(B, 3, 4))
def nested_inner_in_axes1(m, x, T):
    return T.vmap(lambda col: x.sum(col ** 2), in_axes=1)(m)


@prog(r(B, 3, 4))
def nested_inner_out_axes1(m, x, T):
    return T.vmap(lambda row: x.cumsum(row), out_axes=1)(m)


@prog(r(B, 3), r(B, 4, 3))
def nested_vmap_grad(w, xs, x, T):
    return T.vmap(T.grad(lambda w, u: x.sin(w @ u)), in_axes=(None, 0))(w, xs)


@prog(r(B, 2, 3))
def triple_nested(a, x, T):
    return T.vmap(T.vmap(lambda s: s * x.sin(s)))(a)


# === in_axes / out_axes / axis_size ==========================================================
@prog(r(3, B), in_axes=1)
def in_axes_1(v, x, T):
    return x.sum(v ** 2) * v


@prog(r(3, 4, B), in_axes=-1)
def in_axes_minus1(a, x, T):
    return a @ a.T


@prog(r(3, B, 4), r(4), in_axes=(-2, None))
def in_axes_minus2(a, w, x, T):
    return a @ w


@prog(r(B, 3), r(3, B), in_axes=(0, 1))
def in_axes_mixed(a, b, x, T):
    return a * b


@prog(r(B, 3), out_axes=1)
def out_axes_1(v, x, T):
    return x.outer(v, v)


@prog(r(B, 3), out_axes=-1)
def out_axes_minus1(v, x, T):
    return x.outer(v, v)[None]


@prog(r(B, 3), r(3), in_axes=(0, None), out_axes=(0, None))
def out_axes_none(v, w, x, T):
    return v * w, w ** 2


@prog(r(B, 3), out_axes={"a": 1, "b": (0, -1)})
def out_axes_pytree(v, x, T):
    return {"a": x.outer(v, v), "b": (v.sum(), v[:, None] * v)}


@prog(r(3), in_axes=None, axis_size=4)
def axis_size_only(w, x, T):
    return x.sin(w) * 2


@prog(r(3), in_axes=(None,), axis_size=4, out_axes=1)
def axis_size_out_axes(w, x, T):
    return x.outer(w, w)


@prog(r(B, 3), axis_size=B)
def axis_size_consistent(v, x, T):
    return v - v.mean()


@prog(r(B), r(3), in_axes=(0, None))
def scalar_items_with_vector(s, w, x, T):
    return s * w + x.exp(s)


@prog(r(B, 3))
def zero_d_output(v, x, T):
    return x.sum(v ** 2), x.float64(2.0) * 0 + x.max(v)


@prog(r(0, 3), r(3, 4), in_axes=(0, None))
def empty_batch_matmul(v, W, x, T):
    return x.tanh(v @ W), x.sum(v)


@prog(r(0, 3, 3), in_axes=0)
def empty_batch_shapes(A, x, T):
    return A.T.reshape(-1), x.concatenate([A, A]), x.cumsum(A, axis=0)


@prog(r(B, 3), r(B, 3), grad=False)
def bool_and_int_outputs(a, b, x, T):
    return a > b, (a > 0) & (b > 0), x.sum(a > 0), (a > 0).astype(int) * 3, x.logical_xor(a > 0, b > 0)


@prog(rng.integers(0, 10, (B, 4)), grad=False)
def integer_arithmetic(k, x, T):
    return k * 2 + 1, k // 3, k % 3, x.sum(k), x.cumsum(k), x.maximum(k, 4), k.astype(float) / 2


# === transforms inside ========================================================================
@prog(r(B, 2))
def rosenbrock_hessian(v, x, T):
    f = lambda u: (1 - u[0]) ** 2 + 10 * (u[1] - u[0] ** 2) ** 2  # noqa: E731
    return T.hessian(f)(v)


@prog(r(B, 3), r(B, 3))
def hvp_forward_over_reverse(v, t, x, T):
    f = lambda u: x.sum(x.sin(u) * x.roll(u, 1))  # noqa: E731
    return T.jvp(T.grad(f), (v,), (t,))[1]


@prog(r(B, 3))
def jacobian_pair(v, x, T):
    f = lambda u: x.stack([x.sum(u ** 2), x.prod(u), u[0] * u[2]])  # noqa: E731
    return T.jacfwd(f)(v), T.jacrev(f)(v)


@prog(r(B, 3), 0.5, in_axes=(0, None))
def custom_vjp_clip_grad(v, c, x, T):
    @T.custom_vjp
    def clip_grad(u):
        return u
    clip_grad.defvjp(lambda u: (u, None), lambda _, g: (x.clip(g, -c, c),))
    return T.grad(lambda u: x.sum(clip_grad(u) ** 3))(v)


@prog(r(B, 3))
def custom_jvp_softplus(v, x, T):
    @T.custom_jvp
    def softplus(u):
        return x.log1p(x.exp(u))
    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] / (1 + x.exp(-p[0]))))
    return softplus(v) * 2


@prog(r(B, 3), r(3, 3), in_axes=(0, None))
def custom_vjp_with_residuals(v, W, x, T):
    @T.custom_vjp
    def f(u, W):
        return x.tanh(W @ u)
    def fwd(u, W):
        y = x.tanh(W @ u)
        return y, (u, W, y)
    def bwd(res, g):
        u, W, y = res
        gy = g * (1 - y ** 2)
        return W.T @ gy, x.outer(gy, u)
    f.defvjp(fwd, bwd)
    return f(v, W)


@prog(r(B, 3), in_axes=0)
def stop_gradient_target(v, x, T):
    target = T.stop_gradient(v ** 2)
    return x.sum((v - target) ** 2)


@prog(r(B, 3))
def checkpointed_layer(v, x, T):
    layer = T.checkpoint(lambda u: x.tanh(x.roll(u, 1) * u))
    return layer(layer(v))


@prog(r(B, 3), r(B, 3))
def vjp_inside(v, ct, x, T):
    y, pull = T.vjp(lambda u: x.cumsum(x.sin(u)), v)
    return y, pull(ct)[0]


@prog(r(B, 3))
def grad_of_grad_scalar(v, x, T):
    f = lambda s: x.sin(s) * s ** 3  # noqa: E731
    return T.vmap(T.grad(T.grad(f)))(v)


# === float32 ===============================================================================
@prog({k: v.astype(np.float32) for k, v in PAR.items()}, XB.astype(np.float32),
      YB.astype(np.float32), in_axes=(None, 0, 0))
def f32_per_example_grad(p, xi, yi, x, T):
    return T.grad(_mse)(p, xi, yi, x)


@prog(r(B, 5).astype(np.float32))
def f32_softmax_layernorm(v, x, T):
    return _softmax(v, x), (v - v.mean()) / x.sqrt(v.var() + 1e-5), x.cumsum(v), x.sort(v)


@prog(r(B, 3).astype(np.float32), r(3, 2), in_axes=(0, None))
def f32_with_f64_param(v, W, x, T):
    return x.tanh(v @ W)


@prog(r(B, 3, 3).astype(np.float32), r(B, 3).astype(np.float32))
def f32_solve(M, b, x, T):
    A = _spd(M, x)
    return x.linalg.solve(A, b), x.linalg.cholesky(A)


@prog(r(B, 4).astype(np.float32), r(4).astype(np.float32), in_axes=(0, None))
def f32_scalar_constants(v, w, x, T):
    return 2.5 * v + 1 - w / 3.0, x.where(v > 0, v, 0.0), x.maximum(v, 0.5), x.sum(v * w)


@prog(r(B, 4).astype(np.float32))
def f32_reductions(v, x, T):
    return x.mean(v), x.std(v), x.max(v), x.linalg.norm(v), x.prod(v)


@prog(r(B, 8).astype(np.float32))
def f32_fft(v, x, T):
    return x.abs(x.fft.rfft(v))


# === keyword arguments (mapped over axis 0) ====================================================
@prog(r(B, 3), in_axes=0, kwargs={"scale": np.abs(r(B)) + 0.5})
def kwarg_mapped(v, x, T, scale=1.0):
    return x.tanh(v * scale)


@prog(r(3, B), r(3), in_axes=(1, None), kwargs={"params": {"w": r(B, 3), "b": r(B)}})
def kwarg_pytree_with_in_axes(v, c, x, T, params=None):
    return v @ params["w"] + params["b"] + x.sum(c * v)


# === more end-to-end programs ===================================================================
@prog({"m": r(3, 4, 3) * 0.1, "v": np.abs(r(3, 4, 3)) * 0.01, "w": r(3, 4, 3)}, r(3, 4, 3),
      in_axes=({"m": 0, "v": 0, "w": 0}, 0))
def adam_step_per_member(state, g, x, T):
    b1, b2, lr = 0.9, 0.999, 1e-2
    m = b1 * state["m"] + (1 - b1) * g
    v = b2 * state["v"] + (1 - b2) * g ** 2
    return {"m": m, "v": v, "w": state["w"] - lr * m / (x.sqrt(v) + 1e-8)}


@prog(r(B, 2), r(B, 2, 2) * 0.1, r(B), np.array([[1.0, 0.1], [0.0, 1.0]]), np.array([[1.0, 0.0]]),
      in_axes=(0, 0, 0, None, None))
def kalman_step(m, Pfac, y, F, H, x, T):
    P = Pfac @ Pfac.T + 0.5 * x.eye(2)
    m, P = F @ m, F @ P @ F.T + 0.01 * x.eye(2)
    S = H @ P @ H.T + 0.1
    K = P @ H.T @ x.linalg.inv(S)
    m = m + (K @ (y[None] - H @ m))
    P = (x.eye(2) - K @ H) @ P
    return m, P, -0.5 * (y - (H @ m)[0]) ** 2 / S[0, 0]


@prog(r(3), r(20, 3), (r(20) > 0).astype(float), np.array([0.5, 1.0, 2.0, 4.0, 8.0]),
      in_axes=(None, None, None, 0))
def ridge_path_newton(w0, X, y, lam, x, T):
    def nll(w):
        z = X @ w
        return x.sum(x.logaddexp(0.0, z) - y * z) + 0.5 * lam * w @ w
    w = w0
    for _ in range(3):
        g = T.grad(nll)(w)
        H = T.hessian(nll)(w)
        w = w - x.linalg.solve(H, g)
    return w


@prog(r(4), r(B, 16, 4), in_axes=(None, 0))
def mc_expectation_shared_params(theta, eps, x, T):
    z = theta + 0.5 * eps
    return x.mean(x.sin(z @ theta)), x.std(z, axis=0)


@prog(PAR, r(B, 3), LAB, in_axes=(None, 0, 0))
def per_example_xent_grad_norm(p, xi, yi, x, T):
    def loss(q):
        h = x.tanh(q["W1"] @ xi + q["b1"])
        logits = x.concatenate([q["W2"] @ h + q["b2"], x.zeros(1)])
        return _lse(logits, x) - x.sum(logits * (x.arange(3) == yi))
    g = T.grad(loss)(p)
    return x.sqrt(sum(x.sum(v ** 2) for v in g.values()))


@prog(r(B, 3, 3) * 0.5, in_axes=0)
def expm_scaling_squaring(A, x, T):
    A = A / 4.0
    E, term = x.eye(3), x.eye(3)
    for k in range(1, 10):
        term = term @ A / k
        E = E + term
    for _ in range(2):
        E = E @ E
    return E


@prog(r(B, 6), in_axes=0)
def ar1_loglik(z, x, T):
    phi = x.tanh(z[0])
    e = z[2:] - phi * z[1:-1]
    return -0.5 * x.sum(e ** 2) - 0.5 * (1 - phi ** 2) * z[1] ** 2 + 0.5 * x.log1p(-phi ** 2)


@prog(r(B, 4, 2), in_axes=0)
def polygon_area_perimeter(p, x, T):
    q = x.roll(p, -1, axis=0)
    area = 0.5 * x.abs(x.sum(p[:, 0] * q[:, 1] - q[:, 0] * p[:, 1]))
    per = x.sum(x.sqrt(x.sum((q - p) ** 2, axis=1)))
    return area, per


@prog(r(B, 5), r(5, 5) * 0.3, in_axes=(0, None))
def power_iteration(v, A, x, T):
    M = A @ A.T + x.eye(5)
    for _ in range(5):
        v = M @ v
        v = v / x.linalg.norm(v)
    return v @ M @ v


@prog(r(B, 3), np.abs(r(3)) + 0.5, in_axes=(0, None))
def diag_gaussian_kl(mu, sd, x, T):
    return 0.5 * x.sum(sd ** 2 + mu ** 2 - 1 - 2 * x.log(sd))


@prog(r(B, 8), in_axes=0)
def moving_average_conv_valid(v, x, T):
    k = x.ones(3) / 3
    return x.convolve(v, k, mode="valid"), x.cumsum(v)[2:] - x.concatenate([x.zeros(1), x.cumsum(v)[:-3]])


@prog(r(B, 3), r(B, 3), in_axes=(0, 0))
def quaternion_rotation(v, axis_angle, x, T):
    th = x.linalg.norm(axis_angle)
    k = axis_angle / th
    return v * x.cos(th) + x.cross(k, v) * x.sin(th) + k * (k @ v) * (1 - x.cos(th))


@prog(r(B, 6), in_axes=0)
def sparsemax_like_threshold(z, x, T):
    s = -x.sort(-z)
    k = x.arange(1, 7)
    cs = x.cumsum(s)
    support = (1 + k * s) > cs
    kz = x.sum(support)
    tau = (x.sum(x.where(support, s, 0.0)) - 1) / kz
    return x.maximum(z - tau, 0.0)


@prog(r(B, 4, 4), in_axes=0)
def gram_schmidt(A, x, T):
    qs = []
    for j in range(A.shape[1]):
        v = A[:, j]
        for q in qs:
            v = v - (q @ v) * q
        qs.append(v / x.linalg.norm(v))
    return x.stack(qs, axis=1)


@prog(r(B, 3), r(7, 3), in_axes=(0, None))
def nearest_codebook_vq(z, codebook, x, T):
    d = x.sum((codebook - z) ** 2, axis=1)
    k = x.argmin(d)
    q = codebook[k]
    return z + T.stop_gradient(q - z), k


@prog(rng.integers(0, 7, (B, 5)), TABLE, r(3), in_axes=(0, None, None))
def bag_of_words_logit(tokens, E, w, x, T):
    counts = x.sum(tokens[:, None] == x.arange(7)[None, :], axis=0)
    return (counts @ E) @ w


@prog(r(B, 4), r(4), in_axes=(0, None), out_axes=(0, None))
def shared_and_per_item_outputs(v, c, x, T):
    return v * c, c.sum()


@prog(r(2, B, 3), in_axes=1, out_axes=-1)
def in_axes1_out_axes_minus1_pairs(a, x, T):
    return a[0] * a[1], x.outer(a[0], a[1])


@prog(r(B, 3), r(B, 3), in_axes=(0, 0))
def nested_vmap_jacobian_of_vmap(a, b, x, T):
    f = lambda u: T.vmap(lambda s, t: x.sin(s) * t, in_axes=(0, None))(u, b[0])  # noqa: E731
    return T.jacrev(f)(a)


@prog(r(B, 3), in_axes=0)
def python_scalar_and_constant_outputs(v, x, T):
    return 1.5, x.ones(2), v.sum()


@prog(r(B, 4, 3), in_axes=0)
def unpack_rows_loop(m, x, T):
    acc = 0.0
    for row in m:
        acc = acc + x.tanh(row).sum()
    a, b, c = m.T
    return acc, a * b - c


@prog(r(B, 5), 2, in_axes=(0, None), grad=False)
def top_k_indices_static_k(v, k, x, T):
    return x.argsort(-v)[:k], x.sort(v)[::-1][:k]


# === jit around and inside, complex outputs, odd layouts ===========================================
@prog(r(B, 3), W36, in_axes=(0, None))
def jit_inside_vmap(v, W, x, T):
    return T.jit(lambda a, b: x.tanh(a @ b))(v, W)


@prog(r(B, 8), in_axes=0, grad=False)
def complex_fft_output(v, x, T):
    return x.fft.fft(v), x.fft.rfft(v) * 1j


@prog(r(B, 4) + 1j * r(B, 4), in_axes=0, grad=False)
def complex_input_ops(z, x, T):
    return x.abs(z), x.conj(z) * z, x.angle(z), x.real(z @ z), x.exp(1j * x.real(z))


@prog(r(B, 3), in_axes=0)
def bool_mask_then_float(v, x, T):
    m = (v > 0) | (v < -1)
    return m * 1.0 * v, ~m, x.where(~m, v, -v)


@prog({"a": (r(B, 2), r(2, B)), "b": [r(3)]}, in_axes=({"a": (0, 1), "b": None},))
def nested_pytree_in_axes(d, x, T):
    a0, a1 = d["a"]
    return a0 * a1 + d["b"][0][:2]


@prog(r(B, 3), r(B, 3), in_axes=(0, 0), out_axes=({"u": -1, "v": 0}, None))
def out_axes_dict_and_none(a, b, x, T):
    return {"u": x.outer(a, b), "v": a - b}, x.ones(3)


@prog(r(B, 3).astype(np.float32), in_axes=0)
def f32_grad_inside(v, x, T):
    return T.grad(lambda u: x.sum(x.tanh(u) ** 2))(v), T.jacfwd(lambda u: x.sin(u) * u[0])(v)


@prog(r(B, 3, 2).astype(np.float32), r(2, 4), in_axes=(0, None))
def f32_einsum_with_f64(a, W, x, T):
    return x.einsum("ij,jk->ik", a, W.astype(np.float32)), a @ W


@prog(rng.integers(0, 5, B), in_axes=0, grad=False)
def int_input_float_output(k, x, T):
    return x.sqrt(k), k / 2, x.arange(3) * k, x.exp(-k * 1.0)


# === the wider NumPy surface, per item ============================================================
@prog(r(B, 4, 3))
def norm_variants(A, x, T):
    return (x.linalg.norm(A, axis=-1, keepdims=True), x.linalg.norm(A, "fro"), x.linalg.norm(A, 2),
            x.linalg.norm(A, "nuc"), x.linalg.norm(A, -x.inf), x.linalg.norm(A[0], 1))


@prog(r(B, 4, 3))
def svd_reconstruct(A, x, T):
    u, s, vh = x.linalg.svd(A, full_matrices=False)
    return u @ x.diag(s) @ vh, s


@prog(r(B, 6, 3))
def cov_corrcoef(D, x, T):
    return x.cov(D.T), x.corrcoef(D.T), x.cov(D, rowvar=False, ddof=0)


@prog(r(B, 5))
def nan_reductions(v, x, T):
    w = x.where(v > 0.8, x.nan, v)
    return x.nanmean(w), x.nansum(w), x.nanmax(w), x.nanstd(w), x.nanmin(w)


@prog(r(B, 3, 4))
def reductions_axes_keepdims(a, x, T):
    return (x.mean(a, axis=(0, 1)), x.std(a, keepdims=True), x.sum(a, axis=-1, keepdims=True),
            x.var(a, axis=1, ddof=1), x.prod(a, axis=0), x.max(a, axis=1, initial=-1.0),
            x.sum(a, axis=0, where=a > 0), x.average(a, axis=1, weights=x.arange(1.0, 5.0)))


@prog(r(B), r(B) + 3.0)
def linspace_batched_endpoints(a, b, x, T):
    # (np.full((3,), a) and np.full_like(plain, a) with a per item are refused:
    # NumPy writes the fill value into a plain array; test_refusals checks them)
    return x.linspace(a, b, 5), x.full_like(a * x.ones(2), b), x.ones(3) * a


@prog(r(B, 4))
def triu_indices_pairs(p, x, T):
    i, j = x.triu_indices(4, k=1)
    d = x.abs(p[:, None] - p[None, :])
    return d[i, j], d[x.diag_indices(4)], p[x.tril_indices(2)[0]]


@prog(r(B, 2, 2), r(B, 2))
def block_matrix(A, b, x, T):
    return x.block([[A, b[:, None]], [b[None, :], x.ones((1, 1))]])


@prog(r(B, 6))
def sort_via_argsort_take_along(v, x, T):
    idx = x.argsort(v)
    return x.take_along_axis(v, idx, axis=-1), v[idx[::-1]], x.cumsum(v[idx])


@prog(r(B, 5), r(B, 5) + 0.1)
def elementwise_zoo(a, b, x, T):
    return (x.arctan2(a, b), x.hypot(a, b), x.sinc(a), x.deg2rad(a), x.mod(a, 0.7),
            x.heaviside(a, 0.5), x.floor_divide(a, 0.3), x.power(x.abs(b), 1.5), x.float_power(x.abs(a), 2),
            x.clip(a, None, 0.2), x.expm1(a), x.log2(x.abs(b) + 1), x.cbrt(a), x.square(a),
            x.reciprocal(b + 2.0), x.fmax(a, b), x.fmin(a, b), x.copysign(a, b), x.arcsinh(a), x.logaddexp2(a, b))


@prog(r(B, 5))
def select_where_chain(v, x, T):
    return x.select([v < -0.5, v > 0.5], [v ** 2, x.sin(v)], default=0.1 * v)


@prog(r(B, 5), grad=False)
def piecewise_values(v, x, T):
    # (its gradient inside vmap is refused by name: the pieces are gathered per item)
    return x.piecewise(v, [v < 0, v >= 0], [lambda u: -u, lambda u: u ** 2])


@prog(r(B, 3), r(B, 3))
def dot_matmul_1d(a, b, x, T):
    M = x.outer(a, b)
    return x.dot(a, b), a @ M, M @ b, x.vdot(a, b), x.matmul(a, M), x.inner(M, a)


@prog(r(B, 2, 3))
def concat_axis_none_and_lists(a, x, T):
    return x.concatenate([a, a * 2], axis=None), x.concatenate((a, a), axis=1), x.stack(list(a))


@prog(r(B, 4), grad=False)
def rounding_and_comparisons(v, x, T):
    return (x.round(v, 1), x.floor(v), x.ceil(v), x.trunc(v), x.isclose(v, 0.1, atol=0.5),
            x.sign(v), x.rint(v * 3))


@prog(r(B, 3, 4))
def einsum_optimize_and_trace(a, x, T):
    return x.einsum("ij,kj,kl->il", a, a, a, optimize=True), x.trace(a @ a.T), x.diagonal(a, 1)


# === hyperparameter sweeps, namedtuples, jit around vmap ==============================================
@prog(r(3), r(10, 3), r(10), np.array([0.01, 0.03, 0.1, 0.3]), in_axes=(None, None, None, 0))
def lr_sweep_gradient_descent(w, X, y, lr, x, T):
    loss = lambda w: x.mean((X @ w - y) ** 2) + 0.01 * x.sum(w ** 2)  # noqa: E731
    for _ in range(5):
        w = w - lr * T.grad(loss)(w)
    return loss(w), w


@prog(MB)
def namedtuple_results(A, x, T):
    return x.linalg.slogdet(A), x.linalg.eigh(_spd(A, x)).eigenvalues, x.linalg.svd(A).S


@prog(r(B, 4, 3), in_axes=0)
def jit_of_vmap_inside(a, x, T):
    return T.jit(T.vmap(lambda row: x.tanh(row) @ row))(a)


@prog([r(B, 3), r(B, 3)], in_axes=([0, 0],), out_axes=[0, 1])
def list_in_and_out_axes(pair, x, T):
    a, b = pair
    return [a + b, x.outer(a, b)]


@prog(r(B, 3), in_axes=0)
def custom_vjp_inside_grad(v, x, T):
    @T.custom_vjp
    def safe_norm(u):
        return x.sqrt(x.sum(u ** 2))

    def fwd(u):
        n = x.sqrt(x.sum(u ** 2))
        return n, (u, n)

    def bwd(res, g):
        u, n = res
        return (g * u / x.maximum(n, 1e-12),)
    safe_norm.defvjp(fwd, bwd)
    return T.grad(lambda u: safe_norm(u) ** 2 + safe_norm(x.sin(u)))(v)


@prog(r(B, 3), in_axes=0)
def custom_jvp_inside_hessian(v, x, T):
    @T.custom_jvp
    def f(u):
        return x.log1p(x.exp(u))
    f.defjvp(lambda p, t: (f(p[0]), t[0] * (1 / (1 + x.exp(-p[0])))))
    return T.hessian(lambda u: x.sum(f(u) * u[::-1]))(v)


@prog(r(B, 3).astype(np.float32), in_axes=0)
def f32_scalar_types(v, x, T):
    return x.float32(2.0) * v, v * 2, v / 3, v + x.float32(1) / 7, x.sqrt(x.abs(v)) ** 1.5


@prog(MB, grad=False)
def raw_factorizations(A, x, T):
    """Raw factors, signs included: NumPy and JAX both take them from LAPACK."""
    q, rr = x.linalg.qr(A)
    w, v = x.linalg.eigh(_spd(A, x))
    u, s, vh = x.linalg.svd(A)
    return q, rr, w, v, u, s, vh


# === SciPy namespaces (tapestry.scipy / jax.scipy) ====================================================
@prog(np.abs(r(B, 4)) + 0.5, np.abs(r(B)) + 1.0, in_axes=(0, 0))
def gamma_poisson_logp(lam, a, x, T):
    k = x.arange(4.0)
    sp = T.special
    return x.sum(k * x.log(lam) - lam - sp.gammaln(k + 1)) + (a - 1) * x.sum(x.log(lam)) - sp.gammaln(a)


@prog(r(B, 5), in_axes=0)
def special_softmax_logsumexp(v, x, T):
    sp = T.special
    return sp.logsumexp(v), sp.softmax(v), sp.log_softmax(v), sp.expit(v), sp.logsumexp(v, b=x.arange(1.0, 6.0))


@prog(r(B, 4), in_axes=0)
def special_misc_functions(v, x, T):
    sp = T.special
    u = x.abs(v) + 0.3
    return (sp.erf(v), sp.digamma(u), sp.xlogy(u, u), sp.ndtr(v), sp.log_ndtr(v), sp.betaln(u, u + 1),
            sp.logit(1 / (1 + x.exp(-v))), sp.entr(u), sp.i0e(v), sp.gammainc(2.5, u))


@prog(r(B, 2), PTS[0], r(4), in_axes=(0, None, None))
def gp_cholesky_solve_triangular(xs, X, y, x, T):
    la = T.linalg
    K = x.exp(-x.sum((X[:, None] - X[None]) ** 2, -1)) + 0.1 * x.eye(4)
    L = x.linalg.cholesky(K)
    alpha = la.solve_triangular(L.T, la.solve_triangular(L, y, lower=True), lower=False)
    ks = x.exp(-x.sum((X - xs) ** 2, axis=1))
    v = la.solve_triangular(L, ks, lower=True)
    return ks @ alpha, 1.0 - v @ v


@prog(MB, XB, in_axes=(0, 0))
def cho_factor_solve(M, b, x, T):
    la = T.linalg
    c = la.cho_factor(_spd(M, x), lower=True)
    return la.cho_solve(c, b)


@prog(r(B, 3, 3) * 0.5, in_axes=0)
def scipy_expm(A, x, T):
    return T.linalg.expm(A)


@prog(r(B, 3), in_axes=0)
def nested_inner_returns_outer_value(a, x, T):
    inner = T.vmap(lambda k: (a * 2, a.sum() * k), out_axes=(None, 0))(x.arange(4.0))
    bcast = T.vmap(lambda k: a * 3, axis_size=2, in_axes=None)(1.0)
    return inner[0], inner[1], bcast


@prog(r(B, 3), r(4, 3), in_axes=(0, None))
def nested_inner_none_of_outer_batched(a, bs, x, T):
    return T.vmap(lambda u, v: x.dot(u, v) * x.ones(2), in_axes=(None, 0), out_axes=1)(a, bs)


@prog(r(B, 4, 2), in_axes=0)
def pairwise_forces_masked_self(p, x, T):
    d = p[:, None, :] - p[None, :, :]
    d2 = x.sum(d ** 2, axis=-1)
    eye = x.eye(4, dtype=bool)
    safe = x.where(eye, 1.0, d2)                        # the double-where idiom
    inv_r = x.where(eye, 0.0, 1.0 / x.sqrt(safe))
    energy = 0.5 * x.sum(inv_r)
    forces = -T.grad(lambda q: 0.5 * x.sum(x.where(eye, 0.0, 1.0 / x.sqrt(
        x.where(eye, 1.0, x.sum((q[:, None, :] - q[None, :, :]) ** 2, axis=-1))))))(p)
    return energy, forces


@prog(r(B, 4, 2), in_axes=0)
def pairwise_naive_sqrt_where(p, x, T):
    d2 = x.sum((p[:, None, :] - p[None, :, :]) ** 2, axis=-1)
    return x.sum(x.where(x.eye(4) > 0, 0.0, x.sqrt(d2)))


@prog(r(B, 3), r(B, 6, 3) * 0.1, np.log(rng.uniform(size=(B, 6))), in_axes=(0, 0, 0))
def ensemble_sampler_walk(w, steps, logu, x, T):
    logp = lambda q: -0.5 * x.sum(q ** 2) - x.sum(x.log1p(q ** 2))  # noqa: E731
    acc = 0.0
    for t in range(6):
        prop = w + steps[t]
        ok = logu[t] < logp(prop) - logp(w)
        w = x.where(ok, prop, w)
        acc = acc + ok
    return w, acc / 6
