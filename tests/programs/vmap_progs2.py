"""More realistic vmapped programs, in the style of tests/programs/vmap_progs.py:
the idioms ported JAX code uses (per-example losses and gradients, GMM and
GP log-likelihoods, ensembles over stacked parameter dicts, in_axes /
out_axes pytrees, derivatives inside and outside, custom rules, fixed-length
loops, tables read from a closure and indexed per item), each written once
against ``x`` (numpy or jax.numpy) and ``T`` (tapestry or JAX's transforms)
and compared by tests/test_user_programs_vmap2.py.

Tables read from a closure are written ``x.asarray(TABLE)[i]`` (a JAX
array in JAX, a plain NumPy array here: NumPy indexes it itself).

Only NumPy is imported here: the JAX child process imports this module too.
"""
from __future__ import annotations

import numpy as np

from .vmap_progs import random_arrays, registry

rng = np.random.default_rng(20261127)
B = 4
PROGRAMS: dict = {}


prog = registry(PROGRAMS)
r, spd = random_arrays(rng)


# --- data ---------------------------------------------------------------------------
X4 = r(B, 4)
Y4 = r(B, 4)
Y2 = r(B, 2)
LAB3 = rng.integers(0, 3, B)
LAB5 = rng.integers(0, 5, B)
BIN = (rng.random(B) > 0.5).astype(float)
CNT = rng.integers(0, 6, B).astype(float)
SEQ = r(B, 5, 3)
IDX = rng.integers(0, 6, (B, 3))
STATES = rng.integers(0, 3, (B, 6))
PTS = r(B, 2)
XTRAIN = r(6, 2)
YTRAIN = r(6)
EMB = r(6, 4)                                   # a closure table: 6 rows of width 4
WCOL = r(3, 6)                                  # a closure matrix, columns picked per item
LOGT = np.log(np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]))
SKILL = r(5)
MLP = {"W1": r(5, 4) / 2, "b1": r(5) / 4, "W2": r(3, 5) / 2, "b2": r(3) / 4}
DEEP = {"layer1": {"w": r(5, 4) / 2, "b": r(5) / 4}, "layer2": {"w": r(2, 5) / 2, "b": r(2) / 4}}
ENS = {k: np.stack([v * (1 + 0.25 * j) for j in range(3)]) for k, v in MLP.items()}
ENS_DEEP = {lk: {k: np.stack([v * (1 - 0.2 * j) for j in range(3)]) for k, v in lv.items()}
            for lk, lv in DEEP.items()}
MEANS = r(3, 4)
LOGVARS = r(3, 4) / 3
LOGW = np.log(np.array([0.5, 0.3, 0.2]))
MATS = r(B, 3, 3) + 3 * np.eye(3)
SPDS = spd(B, 3, 3)
RHS = r(B, 3)
EPS = r(B, 2)


# --- helpers (namespace passed in) -----------------------------------------------------
def mlp(p, v, x):
    h = x.tanh(p["W1"] @ v + p["b1"])
    return p["W2"] @ h + p["b2"]


def deep(p, v, x):
    h = x.maximum(p["layer1"]["w"] @ v + p["layer1"]["b"], 0.0) + 0.1 * v.sum()
    return p["layer2"]["w"] @ h + p["layer2"]["b"]


def log_softmax(z, x):
    m = x.max(z, axis=-1, keepdims=True)
    return z - m - x.log(x.sum(x.exp(z - m), axis=-1, keepdims=True))


def sqdist(a, b, x):
    return x.sum((a - b) ** 2)


# === per-example losses and gradients =================================================
@prog((r(4), 0.3), X4, BIN, in_axes=(None, 0, 0))
def logreg_value_and_grad(p, xi, yi, x, T):
    def nll(p):
        w, b = p
        z = xi @ w + b
        return x.logaddexp(0.0, z) - yi * z
    return T.value_and_grad(nll)(p)


@prog({"w": r(4), "b": np.array(0.1)}, X4, BIN, 0.01, in_axes=(None, 0, 0, None))
def logreg_l2_grad_dict(p, xi, yi, lam, x, T):
    def loss(p):
        z = x.dot(p["w"], xi) + p["b"]
        prob = 1 / (1 + x.exp(-z))
        return -(yi * x.log(prob) + (1 - yi) * x.log1p(-prob)) + lam * x.sum(p["w"] ** 2)
    return T.grad(loss)(p)


@prog(MLP, X4, Y2 @ np.ones((2, 3)), in_axes=(None, 0, 0))
def mlp_grad_relu_dict(p, xi, yi, x, T):
    def loss(p):
        h = x.maximum(p["W1"] @ xi + p["b1"], 0.0)
        return 0.5 * x.sum((p["W2"] @ h + p["b2"] - yi) ** 2)
    return T.grad(loss)(p)


@prog(MLP, X4, LAB3, in_axes=(None, 0, 0))
def softmax_xent_eye_one_hot(p, xi, yi, x, T):
    def loss(p):
        return -x.sum(x.eye(3)[yi] * log_softmax(mlp(p, xi, x), x))
    return T.value_and_grad(loss)(p)


@prog(MLP, X4, LAB3, in_axes=(None, 0, 0))
def softmax_xent_take_along_axis(p, xi, yi, x, T):
    def loss(p):
        lp = log_softmax(mlp(p, xi, x), x)
        return -x.take_along_axis(lp, x.reshape(yi, (1,)), axis=0)[0]
    return T.grad(loss)(p)["W1"]


@prog(MLP, X4, LAB3, in_axes=(None, 0, 0))
def per_example_grad_norms(p, xi, yi, x, T):
    g = T.grad(lambda q: -log_softmax(mlp(q, xi, x), x)[yi])(p)
    return x.sqrt(sum(x.sum(v ** 2) for v in g.values()))


@prog(MLP, X4, LAB3, 1.0, in_axes=(None, 0, 0, None))
def dp_clipped_grads(p, xi, yi, c, x, T):
    g = T.grad(lambda q: -log_softmax(mlp(q, xi, x), x)[yi])(p)
    norm = x.sqrt(sum(x.sum(v ** 2) for v in g.values()))
    return {k: v / x.maximum(1.0, norm / c) for k, v in g.items()}


@prog(r(4) / 3, X4, CNT, in_axes=(None, 0, 0))
def poisson_regression_grad(w, xi, ci, x, T):
    return T.grad(lambda w: x.exp(xi @ w) - ci * (xi @ w))(w)


@prog(r(4), X4, Y4[:, 0] * 3, 1.0, in_axes=(None, 0, 0, None))
def huber_regression_grad(w, xi, yi, delta, x, T):
    def loss(w):
        e = xi @ w - yi
        a = x.abs(e)
        return x.where(a < delta, 0.5 * e ** 2, delta * (a - 0.5 * delta))
    return T.grad(loss)(w)


@prog(r(5, 4), X4, LAB5, 0.1, in_axes=(None, 0, 0, None))
def label_smoothing_xent(W, xi, yi, eps, x, T):
    def loss(W):
        target = (1 - eps) * x.eye(5)[yi] + eps / 5
        return -x.sum(target * log_softmax(W @ xi, x))
    return loss(W), T.grad(loss)(W)


@prog(r(5, 4), X4, LAB5, in_axes=(None, 0, 0))
def focal_loss_grad(W, xi, yi, x, T):
    def loss(W):
        lp = log_softmax(W @ xi, x)
        pt = x.exp(x.sum(lp * x.eye(5)[yi]))
        return -((1 - pt) ** 2) * x.log(pt)
    return T.grad(loss)(W)


@prog(r(5, 4), X4, LAB5, in_axes=(None, 0, 0))
def multiclass_hinge(W, xi, yi, x, T):
    s = W @ xi
    onehot = x.eye(5)[yi]
    margins = x.maximum(0.0, s - x.sum(s * onehot) + 1.0) * (1 - onehot)
    return x.sum(margins)


@prog(r(3), X4[:, :3], Y4[:, 0], in_axes=(None, 0, 0))
def per_example_fisher_diag(w, xi, yi, x, T):
    g = T.grad(lambda w: 0.5 * (x.tanh(xi @ w) - yi) ** 2)(w)
    return g ** 2


@prog(MLP, X4, in_axes=(None, 0))
def input_saliency_times_input(p, xi, x, T):
    return T.grad(lambda v: mlp(p, v, x)[0])(xi) * xi


# === Gaussian mixtures =================================================================
@prog(MEANS, LOGVARS, LOGW, X4, in_axes=(None, None, None, 0))
def gmm_diag_loglik(mu, logvar, logw, xi, x, T):
    lp = -0.5 * x.sum((xi - mu) ** 2 / x.exp(logvar) + logvar + x.log(2 * x.pi), axis=-1)
    return T.special.logsumexp(logw + lp)


@prog(MEANS, LOGVARS, LOGW, X4, in_axes=(None, None, None, 0))
def gmm_responsibilities_softmax(mu, logvar, logw, xi, x, T):
    lp = -0.5 * x.sum((xi - mu) ** 2 / x.exp(logvar) + logvar, axis=-1)
    return T.special.softmax(logw + lp)


@prog(MEANS, X4, in_axes=(None, 0))
def gmm_mean_grad(mu, xi, x, T):
    def ll(mu):
        return T.special.logsumexp(-0.5 * x.sum((xi - mu) ** 2, axis=1))
    return T.grad(ll)(mu)


@prog(MEANS[:, :3], SPDS[:3], X4[:, :3], in_axes=(None, None, 0))
def gmm_full_cov_loglik(mu, covs, xi, x, T):
    def comp(m, S):
        d = xi - m
        sign, logdet = x.linalg.slogdet(S)
        return -0.5 * (d @ x.linalg.solve(S, d) + logdet + 3 * x.log(2 * x.pi))
    return T.special.logsumexp(T.vmap(comp)(mu, covs)) - x.log(3.0)


@prog(r(3, 2), r(3, 2) / 3, X4[:, :2], in_axes=(None, None, 0))
def mdn_loglik(mu, logs, yi, x, T):
    lp = -0.5 * x.sum(((yi - mu) / x.exp(logs)) ** 2 + 2 * logs, axis=-1)
    return T.special.logsumexp(lp, b=x.ones(3) / 3)


# === Gaussian processes and kernels ====================================================
def _rbf(a, b, ell, x):
    return x.exp(-0.5 * sqdist(a, b, x) / ell ** 2)


@prog(PTS, XTRAIN, 0.7, in_axes=(0, None, None))
def rbf_row_vmap_over_vmap(a, X, ell, x, T):
    return T.vmap(lambda b: _rbf(a, b, ell, x))(X)


@prog(XTRAIN, XTRAIN[:3], 0.9, in_axes=(None, None, None), axis_size=2)
def gram_matrix_vmap_vmap(X1, X2, ell, x, T):
    K = T.vmap(T.vmap(lambda a, b: _rbf(a, b, ell, x), (None, 0)), (0, None))(X1, X2)
    return K.sum(axis=1)


@prog(np.array([0.5, 0.8, 1.2, 2.0]), XTRAIN, YTRAIN, in_axes=(0, None, None))
def gp_nll_per_lengthscale(ell, X, y, x, T):
    K = T.vmap(T.vmap(lambda a, b: _rbf(a, b, ell, x), (None, 0)), (0, None))(X, X)
    K = K + 0.1 * x.eye(6)
    L = x.linalg.cholesky(K)
    alpha = x.linalg.solve(K, y)
    return 0.5 * y @ alpha + x.sum(x.log(x.diag(L)))


@prog(PTS, XTRAIN, YTRAIN, in_axes=(0, None, None))
def gp_posterior_mean_var(xs, X, y, x, T):
    K = T.vmap(T.vmap(lambda a, b: _rbf(a, b, 1.0, x), (None, 0)), (0, None))(X, X)
    K = K + 0.1 * x.eye(6)
    k = T.vmap(lambda b: _rbf(xs, b, 1.0, x))(X)
    return k @ x.linalg.solve(K, y), 1.0 - k @ x.linalg.solve(K, k)


@prog(PTS, XTRAIN, 0.8, in_axes=(0, None, None))
def matern52_row(a, X, ell, x, T):
    def k(b):
        d = x.sqrt(sqdist(a, b, x) + 1e-12) / ell
        return (1 + x.sqrt(5.0) * d + 5.0 / 3.0 * d ** 2) * x.exp(-x.sqrt(5.0) * d)
    return T.vmap(k)(X)


@prog(PTS, XTRAIN, in_axes=(0, None))
def periodic_kernel_row(a, X, x, T):
    return T.vmap(lambda b: x.exp(-2 * x.sum(x.sin(x.pi * x.abs(a - b) / 1.5) ** 2)))(X)


@prog(r(B, 2) / 2, XTRAIN, in_axes=(0, None))
def ard_lengthscales_gram_trace(logell, X, x, T):
    ell = x.exp(logell)
    K = T.vmap(T.vmap(lambda a, b: x.exp(-0.5 * x.sum(((a - b) / ell) ** 2)), (None, 0)),
               (0, None))(X, X)
    return x.trace(K @ K)


@prog(X4, Y4, in_axes=(0, 0))
def triplet_distances(a, p, x, T):
    n = p[::-1]
    return x.maximum(0.0, x.linalg.norm(a - p) - x.linalg.norm(a - n) + 1.0)


@prog(X4, r(6, 4), LAB5 % 6, in_axes=(0, None, 0))
def infonce_per_anchor(q, keys, pos, x, T):
    logits = keys @ q / 0.5
    return T.special.logsumexp(logits) - logits[pos]


@prog(X4, MEANS, in_axes=(0, None))
def kmeans_assign_cost(xi, C, x, T):
    d = T.vmap(lambda c: sqdist(xi, c, x))(C)
    return x.argmin(d), x.min(d)


# === ensembles over stacked parameters =================================================
@prog(ENS, X4[0], in_axes=(0, None))
def ensemble_predict_one_input(p, xi, x, T):
    return mlp(p, xi, x)


@prog(ENS, X4, in_axes=(0, None))
def ensemble_predict_dataset_inner_vmap(p, X, x, T):
    return T.vmap(lambda v: mlp(p, v, x))(X)


@prog(ENS_DEEP, X4, Y2, in_axes=(0, None, None))
def ensemble_nested_dict_value_and_grad(p, X, Y, x, T):
    def loss(p):
        return x.mean((T.vmap(lambda v: deep(p, v, x))(X) - Y) ** 2)
    return T.value_and_grad(loss)(p)


@prog(ENS_DEEP, X4, Y2, 0.1, in_axes=(0, None, None, None))
def ensemble_sgd_step(p, X, Y, lr, x, T):
    def loss(p):
        return x.mean((T.vmap(lambda v: deep(p, v, x))(X) - Y) ** 2)
    g = T.grad(loss)(p)
    return {lk: {k: p[lk][k] - lr * g[lk][k] for k in p[lk]} for lk in p}


@prog({"W1": ENS["W1"], "b1": MLP["b1"], "W2": ENS["W2"], "b2": MLP["b2"]}, X4,
      in_axes=({"W1": 0, "b1": None, "W2": 0, "b2": None}, None))
def ensemble_dict_in_axes_with_none(p, X, x, T):
    return T.vmap(lambda v: mlp(p, v, x))(X).mean(axis=0)


@prog(ENS, X4, in_axes=(0, None), out_axes=1)
def ensemble_out_axes_1(p, X, x, T):
    return T.vmap(lambda v: mlp(p, v, x)[0])(X)


@prog(ENS, X4, in_axes=(0, None), out_axes=(0, None))
def ensemble_out_axes_none_for_shared(p, X, x, T):
    return mlp(p, X[0], x), X.sum(axis=0)


# === in_axes / out_axes forms ===========================================================
@prog(r(4, B), r(3), r(3, B, 2), in_axes=(-1, None, 1))
def in_axes_negative_and_middle(a, w, m, x, T):
    return x.tanh(a[:3] * w) @ m


@prog(X4, Y4, out_axes=(0, -1))
def out_axes_tuple_negative(a, b, x, T):
    return a * b, x.outer(a, b)


@prog(X4, out_axes={"stat": 0, "const": None})
def out_axes_dict_none_const(a, x, T):
    return {"stat": x.sum(a ** 2), "const": x.arange(3.0)}


@prog([X4, r(4)], in_axes=([0, None],))
def in_axes_list_pytree(pair, x, T):
    a, w = pair
    return x.dot(a, w)


@prog({"a": r(3, B), "b": {"c": r(B, 2), "d": r(2)}},
      in_axes=({"a": -1, "b": {"c": 0, "d": None}},))
def in_axes_nested_dict_negative(t, x, T):
    return x.sum(t["a"]) * t["b"]["c"] + t["b"]["d"]


@prog(np.float64(1.5), in_axes=None, axis_size=3)
def axis_size_no_batched_input(c, x, T):
    return x.sin(c) * x.ones(2)


@prog(r(3), in_axes=(None,), axis_size=4, out_axes=1)
def axis_size_out_axes_1(c, x, T):
    return x.cumsum(c)


@prog(X4, Y4, in_axes=(0, 1))
def in_axes_1_on_square(a, b, x, T):
    return a @ b


# === derivatives inside and outside =====================================================
def _field(v, x):
    return x.stack([x.sin(v[0]) * v[1], v[0] * v[1] ** 2, x.tanh(v[0] - v[1])])


@prog(PTS)
def vmap_jacfwd(v, x, T):
    return T.jacfwd(lambda u: _field(u, x))(v)


@prog({"a": PTS, "b": r(B)})
def vmap_jacrev_dict_input(d, x, T):
    return T.jacrev(lambda d: x.sin(d["a"]) * d["b"] + d["a"][::-1] ** 2)(d)


@prog(r(B, 3, 2))
def jacfwd_of_inner_vmap(P, x, T):
    return T.jacfwd(lambda Q: T.vmap(lambda q: x.sum(x.sin(q) * q[::-1]))(Q))(P)


@prog(PTS)
def vmap_hessian_logdensity(v, x, T):
    return T.hessian(lambda u: -x.log1p(u[0] ** 2) - 0.5 * (u[1] - u[0] ** 2) ** 2)(v)


@prog(r(B, 3, 2))
def vmap_vmap_hessian(P, x, T):
    return T.vmap(T.hessian(lambda u: x.sum(x.cos(u) * u ** 2)))(P)


@prog(PTS, EPS)
def vmap_jvp_both_batched(v, t, x, T):
    return T.jvp(lambda u: _field(u, x), (v,), (t,))


@prog(PTS, np.array([0.3, -0.7]), in_axes=(0, None))
def vmap_jvp_shared_tangent(v, t, x, T):
    return T.jvp(lambda u: _field(u, x), (v,), (t,))[1]


@prog(PTS, r(B, 3))
def vmap_vjp(v, ct, x, T):
    out, pull = T.vjp(lambda u: _field(u, x), v)
    return out, pull(ct)[0]


@prog(X4, Y4)
def hvp_jvp_of_grad(v, t, x, T):
    g = T.grad(lambda u: x.sum(x.tanh(u) ** 2) + x.prod(x.cos(u)))
    return T.jvp(g, (v,), (t,))[1]


@prog(PTS)
def laplacian_trace_of_hessian(v, x, T):
    return x.trace(T.hessian(lambda u: x.exp(-x.sum(u ** 2)) * x.sin(u[0]))(v))


@prog(r(2, 2) / 2, PTS, in_axes=(None, 0))
def flow_logdet_jacobian(W, v, x, T):
    f = lambda u: u + x.tanh(W @ u)  # noqa: E731
    J = T.jacfwd(f)(v)
    return f(v), x.linalg.slogdet(J)[1]


@prog(r(3, 2), PTS, in_axes=(None, 0))
def jacobian_trace_grad_wrt_params(W, v, x, T):
    def tr(W):
        return x.trace(T.jacrev(lambda u: x.tanh(W @ u)[:2])(v))
    return T.grad(tr)(W)


@prog(PTS)
def grad_of_grad_norm(v, x, T):
    return T.grad(lambda u: x.sum(T.grad(lambda w: x.sum(x.sin(w) * w ** 2))(u) ** 2))(v)


# === custom rules ========================================================================
@prog(X4)
def custom_vjp_straight_through_round(v, x, T):
    @T.custom_vjp
    def ste(u):
        return x.round(u)
    ste.defvjp(lambda u: (ste(u), None), lambda _, g: (g,))
    return T.grad(lambda u: x.sum(ste(u * 2) * u))(v)


@prog(X4, 0.5, in_axes=(0, None))
def custom_vjp_gradient_reversal(v, lam, x, T):
    @T.custom_vjp
    def flip(u):
        return u
    flip.defvjp(lambda u: (u, None), lambda _, g: (-lam * g,))
    return T.grad(lambda u: x.sum(x.sin(flip(u)) * u))(v)


@prog(np.abs(X4) + 0.1)
def custom_vjp_safe_log_in_loss(v, x, T):
    @T.custom_vjp
    def slog(u):
        return x.log(u)
    slog.defvjp(lambda u: (x.log(u), u), lambda u, g: (g / x.maximum(u, 1e-6),))
    return x.sum(slog(v) * v)


@prog(X4)
def custom_jvp_logsumexp(v, x, T):
    @T.custom_jvp
    def lse(u):
        m = x.max(u)
        return m + x.log(x.sum(x.exp(u - m)))

    def lse_jvp(p, t):
        u, = p
        du, = t
        s = x.exp(u - lse(u))
        return lse(u), x.sum(s * du)
    lse.defjvp(lse_jvp)
    return lse(v), T.grad(lse)(v)


@prog(X4, r(3, 4), in_axes=(0, None))
def custom_vjp_two_args_pe_grad(v, W, x, T):
    @T.custom_vjp
    def layer(W, u):
        return x.tanh(W @ u)

    def fwd(W, u):
        y = x.tanh(W @ u)
        return y, (W, u, y)

    def bwd(res, g):
        W, u, y = res
        gy = g * (1 - y ** 2)
        return x.outer(gy, u), W.T @ gy
    layer.defvjp(fwd, bwd)
    return T.grad(lambda W: x.sum(layer(W, v) ** 2))(W)


# === NumPy operations per item ==========================================================
@prog(X4, -0.5, 0.8, in_axes=(0, None, None))
def where_clip_chain(v, lo, hi, x, T):
    c = x.clip(v, lo, hi)
    return x.where(v > 0, c * 2, x.where(v < -1, -1.0, c ** 2))


@prog(X4)
def sparsemax_projection(z, x, T):
    zs = x.sort(z)[::-1]
    k = x.arange(1, 5)
    cs = x.cumsum(zs)
    support = (1 + k * zs) > cs
    kz = x.sum(support)
    tau = (x.sum(x.where(support, zs, 0.0)) - 1) / kz
    return x.maximum(z - tau, 0.0)


@prog(X4, Y4)
def spearman_ranks(a, b, x, T):
    ra = x.argsort(x.argsort(a)).astype(float)
    rb = x.argsort(x.argsort(b)).astype(float)
    return x.corrcoef(ra, rb)[0, 1], a[x.argsort(b)]


@prog(r(B, 6))
def topk_take_along_axis(v, x, T):
    idx = x.argsort(-v)[:3]
    return x.take_along_axis(v, idx, axis=0), idx


@prog(r(B, 5))
def softmax_cdf_cumsum(v, x, T):
    p = T.special.softmax(v)
    c = x.cumsum(p)
    return c, x.sum(c < 0.5)


@prog(X4, r(4, 4, 4), in_axes=(0, None))
def einsum_bilinear_shared_tensor(v, Wt, x, T):
    return x.einsum("i,ijk,k->j", v, Wt, v)


@prog(SEQ, r(3, 3), r(3, 3), in_axes=(0, None, None))
def einsum_attention_scores(s, Wq, Wk, x, T):
    q, k = s @ Wq, s @ Wk
    a = x.einsum("qd,kd->qk", q, k) / x.sqrt(3.0)
    return T.special.softmax(a, axis=-1) @ s


@prog(MATS, RHS)
def linalg_solve_per_item(A, b, x, T):
    return x.linalg.solve(A, b)


@prog(MATS, RHS)
def inv_quadratic_form(A, b, x, T):
    return b @ x.linalg.inv(A) @ b


@prog(MATS)
def det_and_slogdet(A, x, T):
    s, ld = x.linalg.slogdet(A)
    return x.linalg.det(A), s, ld


@prog(MATS, RHS)
def cholesky_two_triangular_solves(A, b, x, T):
    L = x.linalg.cholesky(A @ A.T + 3 * x.eye(3))
    z = T.linalg.solve_triangular(L, b, lower=True)
    return T.linalg.solve_triangular(L.T, z, lower=False), x.sum(x.log(x.diag(L)))


@prog(X4, MATS)
def norm_variants(v, A, x, T):
    return (x.linalg.norm(v), x.linalg.norm(v, 1), x.linalg.norm(v, x.inf),
            x.linalg.norm(A, "fro"), x.linalg.norm(A, axis=0))


@prog(r(B, 3, 4))
def logsumexp_axis_keepdims(v, x, T):
    return T.special.logsumexp(v, axis=1, keepdims=True), T.special.logsumexp(v, axis=0)


@prog(r(B, 3, 4))
def log_softmax_special(v, x, T):
    return T.special.log_softmax(v, axis=-1)


# === fixed-length loops ===================================================================
@prog({"Wx": r(4, 3) / 2, "Wh": r(4, 4) / 3, "b": r(4) / 4}, SEQ, in_axes=(None, 0))
def rnn_over_sequence(p, s, x, T):
    h = x.zeros(4)
    for t in range(s.shape[0]):
        h = x.tanh(p["Wx"] @ s[t] + p["Wh"] @ h + p["b"])
    return h


@prog({"Wx": r(4, 3) / 2, "Wh": r(4, 4) / 3}, SEQ, Y4, in_axes=(None, 0, 0))
def rnn_per_example_grad(p, s, yi, x, T):
    def loss(p):
        h = x.zeros(4)
        for t in range(5):
            h = x.tanh(p["Wx"] @ s[t] + p["Wh"] @ h)
        return x.sum((h - yi) ** 2)
    return T.grad(loss)(p)


@prog(r(B, 6), 0.3, in_axes=(0, None))
def ema_loop(v, a, x, T):
    m = v[0]
    out = []
    for t in range(1, 6):
        m = (1 - a) * m + a * v[t]
        out.append(m)
    return x.stack(out)


@prog(r(B, 6), 0.5, 1.0, in_axes=(0, None, None))
def kalman_filter_1d(obs, q, rvar, x, T):
    m, P, ll = 0.0, 1.0, 0.0
    for t in range(6):
        P = P + q
        S = P + rvar
        ll = ll - 0.5 * (x.log(2 * x.pi * S) + (obs[t] - m) ** 2 / S)
        K = P / S
        m = m + K * (obs[t] - m)
        P = (1 - K) * P
    return ll, m


@prog(np.abs(X4) + 0.5)
def newton_sqrt_iterations(a, x, T):
    y = x.ones_like(a)
    for _ in range(6):
        y = 0.5 * (y + a / y)
    return y


@prog(r(3), r(B, 5, 3), r(B, 5), 0.1, in_axes=(None, 0, 0, None))
def maml_inner_adaptation(w, Xt, yt, lr, x, T):
    def loss(w):
        return x.mean((Xt @ w - yt) ** 2)
    for _ in range(3):
        w = w - lr * T.grad(loss)(w)
    return loss(w)


@prog(r(B, 6), 0.9, in_axes=(0, None))
def discounted_returns(rw, gamma, x, T):
    G = 0.0
    out = []
    for t in range(5, -1, -1):
        G = rw[t] + gamma * G
        out.append(G)
    return x.stack(out[::-1])


@prog(r(B, 6), r(B, 7), 0.9, 0.95, in_axes=(0, 0, None, None))
def gae_advantages(rw, val, gamma, lam, x, T):
    adv, out = 0.0, []
    for t in range(5, -1, -1):
        delta = rw[t] + gamma * val[t + 1] - val[t]
        adv = delta + gamma * lam * adv
        out.append(adv)
    return x.stack(out[::-1])


@prog(MLP, X4, in_axes=(None, 0))
def neural_ode_euler(p, v, x, T):
    for _ in range(4):
        v = v + 0.1 * x.concatenate([mlp(p, v, x), x.zeros(1)])
    return v


# === tables read from a closure, indexed per item =========================================
@prog(IDX)
def closure_embedding_bag(ids, x, T):
    return x.mean(x.asarray(EMB)[ids], axis=0)


@prog(X4, IDX[:, 0] % 6, in_axes=(0, 0))
def closure_columns_picked(v, j, x, T):
    return x.asarray(WCOL)[:, j] * v[:3]


@prog(X4, IDX[:, 0])
def closure_row_dot_grad(v, i, x, T):
    return T.grad(lambda u: x.tanh(u @ x.asarray(EMB)[i]) ** 2)(v)


@prog(STATES)
def hmm_sequence_logprob_closure(s, x, T):
    logT = x.asarray(LOGT)
    return x.sum(logT[s[:-1], s[1:]])


@prog(STATES)
def markov_chain_loop_lookup(s, x, T):
    logT = x.asarray(LOGT)
    lp = 0.0
    for t in range(5):
        lp = lp + logT[s[t], s[t + 1]]
    return lp


@prog(rng.integers(0, 5, (B, 2)), 1.0, in_axes=(0, None))
def bradley_terry_closure_skills(pair, scale, x, T):
    sk = x.asarray(SKILL)
    return -x.logaddexp(0.0, -(sk[pair[0]] - sk[pair[1]]) * scale)


@prog(r(3, 4), X4, LAB3, in_axes=(None, 0, 0))
def policy_gradient_eye_actions(W, s, a, x, T):
    def logp(W):
        return x.sum(log_softmax(W @ s, x) * x.eye(3)[a])
    return T.grad(logp)(W)


@prog(r(3, 4), X4, LAB3, r(B), X4[::-1], 0.9, in_axes=(None, 0, 0, 0, 0, None))
def q_learning_td_error(W, s, a, rw, s2, gamma, x, T):
    def td(W):
        q = W @ s
        target = rw + gamma * x.max(W @ s2)
        return 0.5 * (x.sum(q * x.eye(3)[a]) - T.stop_gradient(target)) ** 2
    return T.value_and_grad(td)(W)


@prog(IDX)
def modular_index_take_closure(ids, x, T):
    return x.take(x.asarray(EMB[:, 0]), (ids * 5 + 1) % 6)


@prog(X4, LAB3)
def one_hot_arange_compare(v, l, x, T):
    oh = (x.arange(3) == l).astype(v.dtype)
    return x.concatenate([v[:3] * oh, oh])


# === outputs: tuples, dicts, lists, integers, booleans =====================================
@prog(X4)
def returns_tuple_value_and_dict(v, x, T):
    return x.sum(v), {"mean": x.mean(v), "max": x.max(v), "argmax": x.argmax(v)}


@prog(X4)
def returns_list_of_mixed(v, x, T):
    return [v > 0, x.sum(v > 0), x.cumsum(v), (v * 10).astype(x.int32)]


@prog(X4, Y4)
def integer_and_bool_outputs(a, b, x, T):
    return x.argmax(a), x.all(a < b), x.count_nonzero(a > b), x.any(x.isnan(a))


@prog(X4)
def python_number_outputs(v, x, T):
    return 3, 2.5, x.sum(v)


# === models ===============================================================================
@prog({"We": r(2, 4) / 2, "Wd": r(4, 2) / 2}, X4, EPS, in_axes=(None, 0, 0))
def vae_elbo_fixed_noise(p, v, eps, x, T):
    def elbo(p):
        h = p["We"] @ v
        mu, logs = h, 0.1 * h
        z = mu + x.exp(logs) * eps
        rec = -0.5 * x.sum((p["Wd"] @ z - v) ** 2)
        kl = 0.5 * x.sum(x.exp(2 * logs) + mu ** 2 - 1 - 2 * logs)
        return rec - kl
    return T.value_and_grad(elbo)(p)


@prog(r(B, 4) / 2, X4, BIN, in_axes=(0, None, None))
def bayes_logreg_logpost_chains(w, X, y, x, T):
    def lp(w):
        z = X @ w
        return x.sum(y * z - x.logaddexp(0.0, z)) - 0.5 * x.sum(w ** 2)
    return T.value_and_grad(lp)(w)


@prog(Y4[:, 0], 0.5, 3.0, in_axes=(0, None, None))
def student_t_logpdf_gammaln(v, s, nu, x, T):
    g = T.special.gammaln
    return (g((nu + 1) / 2) - g(nu / 2) - 0.5 * x.log(nu * x.pi * s ** 2)
            - (nu + 1) / 2 * x.log1p((v / s) ** 2 / nu))


@prog(SEQ, r(3), r(3), in_axes=(0, None, None))
def causal_self_attention_tril(s, g, b, x, T):
    mu = s.mean(axis=-1, keepdims=True)
    h = (s - mu) / x.sqrt(s.var(axis=-1, keepdims=True) + 1e-5) * g + b
    a = h @ h.T / x.sqrt(3.0)
    mask = x.tril(x.ones((5, 5))) > 0
    a = x.where(mask, a, -1e9)
    return T.special.softmax(a, axis=-1) @ h + s


@prog(r(B, 10), np.array([0.25, 0.5, 0.25]), in_axes=(0, None))
def conv1d_valid_per_item(sig, k, x, T):
    return x.convolve(sig, k, mode="valid")


@prog(X4, MEANS, in_axes=(0, None))
def rbf_features_then_linear(v, C, x, T):
    phi = x.exp(-T.vmap(lambda c: sqdist(v, c, x))(C))
    return phi @ x.arange(1.0, 4.0)


@prog(r(B, 3), r(B, 3))
def quaternion_like_cross_products(a, b, x, T):
    c = x.cross(a, b)
    return c, x.dot(c, a), x.linalg.norm(c)


@prog(r(B, 2, 3))
def vmap_over_rows_inner_in_axes_1(M, x, T):
    return T.vmap(lambda col: x.sum(col ** 2), in_axes=1)(M)


@prog(r(B, 3, 2))
def nested_inner_out_axes_1(M, x, T):
    return T.vmap(lambda row: x.stack([row, row ** 2]), out_axes=1)(M)


@prog(X4, Y4)
def vmap_of_grad_of_vmap(a, b, x, T):
    return T.grad(lambda u: x.sum(T.vmap(lambda s, t: x.sin(s * t))(u, b)))(a)


@prog(np.array([0.01, 0.05, 0.1]), r(4), r(6, 4), r(6), in_axes=(0, None, None, None))
def gd_sweep_learning_rates(lr, w0, X, y, x, T):
    w = w0
    for _ in range(5):
        w = w - lr * T.grad(lambda w: x.mean((X @ w - y) ** 2))(w)
    return w


@prog(r(B, 4), in_axes=0)
def stop_gradient_in_normalizer(v, x, T):
    return v / T.stop_gradient(x.linalg.norm(v))


@prog(r(B, 3), r(B, 3))
def kl_diag_gaussians(mu, logs, x, T):
    return 0.5 * x.sum(x.exp(2 * logs) + mu ** 2 - 1 - 2 * logs)


@prog(X4)
def checkpointed_block(v, x, T):
    blk = T.checkpoint(lambda u: x.tanh(u) * x.cos(u))
    return T.grad(lambda u: x.sum(blk(blk(u))))(v)


@prog(X4, kwargs={"scale": np.arange(1.0, B + 1)})
def kwarg_mapped_scale(v, x, T, scale):
    return v * scale


# === more models: images, HMMs, transport, finance, physics ===========================
IMG = r(6, 6)
LOGA = np.log(np.array([[0.8, 0.2], [0.3, 0.7]]))
LOGE = np.log(np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]]))
OBS = rng.integers(0, 3, (B, 5))


@prog(r(B, 4, 8), {"Wq": r(8, 8) / 3, "Wk": r(8, 8) / 3, "Wv": r(8, 8) / 3, "Wo": r(8, 8) / 3},
      in_axes=(0, None))
def multihead_reshape_transpose(s, p, x, T):
    def heads(m):
        return x.transpose(x.reshape(s @ m, (4, 2, 4)), (1, 0, 2))
    q, k, v = heads(p["Wq"]), heads(p["Wk"]), heads(p["Wv"])
    a = x.einsum("hqd,hkd->hqk", q, k) / 2.0
    a = x.exp(a - a.max(-1, keepdims=True))
    a = a / a.sum(-1, keepdims=True)
    o = x.reshape(x.transpose(a @ v, (1, 0, 2)), (4, 8))
    return o @ p["Wo"]


@prog(r(B, 6, 6), r(3, 3) / 3, in_axes=(0, None))
def conv2d_static_slices(img, k, x, T):
    rows = []
    for i in range(4):
        rows.append(x.stack([x.sum(img[i:i + 3, j:j + 3] * k) for j in range(4)]))
    return x.maximum(x.stack(rows), 0.0).mean()


@prog(rng.uniform(0.5, 4.5, (B, 2)), r(B, 6, 6), in_axes=(0, 0))
def bilinear_interp_batched_image(p, img, x, T):
    i0 = x.floor(p).astype(int)
    f = p - i0
    a, b = img[i0[0], i0[1]], img[i0[0] + 1, i0[1]]
    c, d = img[i0[0], i0[1] + 1], img[i0[0] + 1, i0[1] + 1]
    return (a * (1 - f[0]) * (1 - f[1]) + b * f[0] * (1 - f[1]) + c * (1 - f[0]) * f[1]
            + d * f[0] * f[1])


@prog(rng.uniform(0.5, 4.5, (B, 2)))
def bilinear_interp_closure_image(p, x, T):
    img = x.asarray(IMG)
    i0 = x.floor(p).astype(int)
    f = p - i0
    a, b = img[i0[0], i0[1]], img[i0[0] + 1, i0[1]]
    return a * (1 - f[0]) + b * f[0] + f[1]


@prog(r(B, 4, 4))
def sinkhorn_iterations(C, x, T):
    def from_lse(z, ax):
        return x.log(x.sum(x.exp(z - z.max(ax, keepdims=True)), ax)) + z.max(ax)
    la, lb, K = x.zeros(4), x.zeros(4), -C / 0.5
    for _ in range(5):
        la = -from_lse(K + lb[None, :], 1) - x.log(4.0)
        lb = -from_lse(K + la[:, None], 0) - x.log(4.0)
    return x.exp(K + la[:, None] + lb[None, :])


@prog(OBS, grad=False)
def hmm_forward_closure_tables(o, x, T):
    A, E = x.asarray(LOGA), x.asarray(LOGE)
    alpha = x.log(x.array([0.5, 0.5])) + E[:, o[0]]
    for t in range(1, 5):
        m = alpha[:, None] + A
        alpha = x.log(x.sum(x.exp(m - m.max(0)), 0)) + m.max(0) + E[:, o[t]]
    return x.log(x.sum(x.exp(alpha - alpha.max()))) + alpha.max()


@prog(OBS, grad=False)
def viterbi_backtrack(o, x, T):
    A, E = x.asarray(LOGA), x.asarray(LOGE)
    d, bps = E[:, o[0]], []
    for t in range(1, 5):
        m = d[:, None] + A
        bps.append(x.argmax(m, 0))
        d = x.max(m, 0) + E[:, o[t]]
    s = x.argmax(d)
    path = [s]
    for bp in bps[::-1]:
        s = bp[s]
        path.append(s)
    return x.stack(path[::-1]), x.max(d)


@prog(np.array([90.0, 100.0, 110.0]), 100.0, 0.2, 1.0, in_axes=(0, None, None, None))
def black_scholes_greeks(K, S, sig, t, x, T):
    def price(S, sig):
        d1 = (x.log(S / K) + 0.5 * sig ** 2 * t) / (sig * x.sqrt(t))
        d2 = d1 - sig * x.sqrt(t)
        return S * T.special.ndtr(d1) - K * T.special.ndtr(d2)
    return price(S, sig), T.grad(price, argnums=(0, 1))(S, sig)


@prog(r(B, 4, 2) * 2)
def lennard_jones_forces(P, x, T):
    def energy(P):
        def pair(a, b):
            d2 = x.sum((a - b) ** 2) + 1.0
            return 4 * (d2 ** -6 - d2 ** -3)
        E = T.vmap(T.vmap(pair, (None, 0)), (0, None))(P, P)
        return 0.5 * x.sum(x.where(x.eye(4) > 0, 0.0, E))
    return energy(P), -T.grad(energy)(P)


@prog(np.array([0.1, 1.0, 10.0]), r(6, 3), r(6), in_axes=(0, None, None))
def ridge_closed_form_per_lambda(lam, X, y, x, T):
    w = x.linalg.solve(X.T @ X + lam * x.eye(3), X.T @ y)
    return w, x.mean((X @ w - y) ** 2)


@prog(r(B, 3) / 3, r(8, 3), (rng.random(8) > 0.5).astype(float), in_axes=(0, None, None))
def newton_step_logreg(w, X, y, x, T):
    def nll(w):
        z = X @ w
        return x.sum(x.logaddexp(0.0, z) - y * z) + 0.5 * x.sum(w ** 2)
    g, H = T.grad(nll)(w), T.hessian(nll)(w)
    return w - x.linalg.solve(H, g)


@prog(r(B, 5))
def entropy_policy(z, x, T):
    p, lp = T.special.softmax(z), T.special.log_softmax(z)
    ent = lambda u: -x.sum(T.special.softmax(u) * T.special.log_softmax(u))  # noqa: E731
    return -x.sum(p * lp), T.grad(ent)(z)


@prog(r(B, 4), r(4, 4), in_axes=(0, None))
def segment_sum_one_hot_matmul(v, W, x, T):
    seg = x.array([0, 1, 1, 2])
    oh = (seg[:, None] == x.arange(3)[None, :]).astype(v.dtype)
    return (x.tanh(W @ v)) @ oh


@prog(r(B, 3), r(7, 3), in_axes=(0, None))
def mc_expectation_shared_samples(mu, eps, x, T):
    z = mu + eps
    return x.mean(x.sin(z).sum(-1)), x.std(z, axis=0)


@prog(r(B, 5), r(B, 5))
def cosine_similarity_and_pearson(a, b, x, T):
    cs = a @ b / (x.linalg.norm(a) * x.linalg.norm(b))
    ac, bc = a - a.mean(), b - b.mean()
    return cs, x.sum(ac * bc) / x.sqrt(x.sum(ac ** 2) * x.sum(bc ** 2))


@prog(r(B, 6), np.int64(2), in_axes=(0, None))
def static_k_topk_mean(v, k, x, T):
    return x.sort(v)[-2:].mean()


@prog(r(B, 3, 3))
def expm_series_loop(A, x, T):
    out, term = x.eye(3), x.eye(3)
    for n in range(1, 8):
        term = term @ A / n
        out = out + term
    return out


@prog(r(B, 4))
def gumbel_free_argmax_onehot(z, x, T):
    i = x.argmax(z)
    return x.eye(4)[i], (x.arange(4) == i).astype(float) * z


@prog(r(B, 4), rng.integers(0, 4, (B, 4)))
def permute_by_batched_perm(v, perm, x, T):
    return v[perm], x.take(v, perm)


@prog(r(B, 4), rng.integers(0, 6, (B, 2)))
def closure_img_pair_index(v, ij, x, T):
    img = x.asarray(IMG)
    return v * img[ij[0], ij[1]] + img[ij[0]][:4]
