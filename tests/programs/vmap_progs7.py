"""Vmapped programs of the seventh red-team round, in the style of
tests/programs/vmap_progs6.py, from fields the earlier rounds touched
lightly: kernels with per-item hyperparameters, ODE integrators, Kalman
filters and smoothers, transformer blocks, mixtures, survival analysis,
robust losses, particle physics, option pricing, message passing on
graphs, image filters, sorting-based losses, quantiles, cumulative
operations, factorizations and spectra, with awkward in_axes / out_axes and
transforms on either side (vmap of grad / jacfwd / jacrev / hessian, grad
of vmap, nested vmap, custom_vjp / custom_jvp inside).  Each is written
once against ``x`` (numpy or jax.numpy) and ``T`` and compared by
tests/test_user_programs_vmap7.py with jax.vmap and with a Python loop.

Only NumPy is imported here: the JAX child process imports this module too.
"""
from __future__ import annotations

import numpy as np

from .vmap_progs import random_arrays, registry

rng = np.random.default_rng(20261207)
B = 4
PROGRAMS: dict = {}

prog = registry(PROGRAMS)
r, spd = random_arrays(rng)


# --- helpers for the idioms NumPy and JAX spell differently --------------------------
def add_at(x, n, idx, vals):
    """``np.zeros(n)`` with ``vals`` added at ``idx`` (repeats accumulate)."""
    if x is np:
        out = np.zeros((n,) + np.shape(vals)[1:], dtype=np.result_type(vals))
        np.add.at(out, idx, vals)
        return out
    return x.zeros((n,) + vals.shape[1:], vals.dtype).at[idx].add(vals)


def bincount_w(x, idx, w, n):
    """``np.bincount(idx, w, minlength=n)``: JAX needs a static ``length``."""
    if x is np:
        return np.bincount(idx, weights=w, minlength=n)
    return x.bincount(idx, weights=w, length=n)


def logcumsumexp(x, a):
    """``np.logaddexp.accumulate(a)`` (JAX: ``jax.lax.cumlogsumexp``)."""
    if x is np:
        return np.logaddexp.accumulate(a)
    import jax
    return jax.lax.cumlogsumexp(a)


def windows(x, a, k):
    """The length-``k`` windows of the last axis of ``a`` (``sliding_window_view``)."""
    if x is np:
        return np.lib.stride_tricks.sliding_window_view(a, k, axis=-1)
    n = a.shape[-1] - k + 1
    return x.stack([a[..., i:i + k] for i in range(n)], axis=-2)


def windows2d(x, a, k):
    """The ``k x k`` windows of a 2-d ``a``: shape ``(h-k+1, w-k+1, k, k)``."""
    if x is np:
        return np.lib.stride_tricks.sliding_window_view(a, (k, k))
    h, w = a.shape[0] - k + 1, a.shape[1] - k + 1
    return x.stack([x.stack([a[i:i + k, j:j + k] for j in range(w)]) for i in range(h)])


E7 = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [4, 1], [3, 4]])   # graph edges
SRC, DST = E7[:, 0], E7[:, 1]


# === kernels and Gaussian processes, per-item hyperparameters =======================
@prog(r(7, 1), r(7), {"ell": np.abs(r(B)) + 0.4, "p": np.abs(r(B)) + 1.0,
                      "sf": np.abs(r(B)) + 0.5},
      in_axes=(None, None, {"ell": 0, "p": 0, "sf": 0}))
def gp_periodic_kernel_nll(X, y, h, x, T):
    d = x.abs(X - X.T)
    K = h["sf"] ** 2 * x.exp(-2 * x.sin(x.pi * d / h["p"]) ** 2 / h["ell"] ** 2) + 0.1 * x.eye(7)
    L = x.linalg.cholesky(K)
    a = x.linalg.solve(L, y)
    return 0.5 * a @ a + x.sum(x.log(x.diag(L)))


@prog(r(B, 6, 2), np.abs(r(B)) + 0.5, np.abs(r(B)) + 0.5, in_axes=(0, 0, 0))
def rational_quadratic_gram_eigvalsh(X, ell, alpha, x, T):
    d2 = x.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = (1 + d2 / (2 * alpha * ell ** 2)) ** (-alpha)
    return x.linalg.eigvalsh(K + 1e-3 * x.eye(6)), x.trace(K)


@prog(r(5, 2), r(5), np.abs(r(B, 2)) + 0.5, in_axes=(None, None, 0))
def gp_loglik_grad_wrt_lengthscales(X, y, ell, x, T):
    def nll(ell):
        d = (X[:, None, :] - X[None, :, :]) / ell
        K = x.exp(-0.5 * x.sum(d * d, -1)) + 0.2 * x.eye(5)
        s, ld = x.linalg.slogdet(K)
        return 0.5 * y @ x.linalg.solve(K, y) + 0.5 * ld
    return nll(ell), T.grad(nll)(ell)


@prog(r(B, 5, 2), r(3, 2), np.abs(r(B)) + 0.3, in_axes=(0, None, 0))
def rff_features_vs_exact_kernel(X, Wf, ell, x, T):
    phase = X @ Wf.T / ell
    phi = x.concatenate([x.cos(phase), x.sin(phase)], axis=-1) / x.sqrt(3.0)
    Kexact = x.exp(-0.5 * x.sum((X[:, None] - X[None]) ** 2, -1) / ell ** 2)
    return phi @ phi.T, x.linalg.norm(phi @ phi.T - Kexact)


@prog(r(B, 5), r(B, 5), np.abs(r(2)) + 0.5, in_axes=(0, 0, None))
def spectral_mixture_kernel_1d(t, y, w, x, T):
    tau = t[:, None] - t[None, :]
    K = w[0] * x.exp(-2 * x.pi ** 2 * tau ** 2) * x.cos(2 * x.pi * tau * w[1]) + 0.3 * x.eye(5)
    c, low = T.linalg.cho_factor(K, lower=True)
    return T.linalg.cho_solve((c, low), y), x.sum(x.log(x.diag(c)))


@prog(r(B, 3, 2), r(4, 2), in_axes=(0, None))
def mmd_rbf_between_sets(P, Q, x, T):
    def k(a, b):
        return x.exp(-0.5 * x.sum((a[:, None] - b[None]) ** 2, -1))
    return k(P, P).mean() + k(Q, Q).mean() - 2 * k(P, Q).mean()


# === ODE integrators ===================================================================
@prog(np.abs(r(B, 2)) * 0.3 + 0.1, np.array([0.99, 0.01, 0.0]), in_axes=(0, None))
def sir_epidemic_rk4_params(p, s0, x, T):
    beta, gamma = p[0] * 3, p[1]

    def f(s):
        inf = beta * s[0] * s[1]
        return x.stack([-inf, inf - gamma * s[1], gamma * s[1]])
    s, dt, peak = s0, 0.5, s0[1]
    for _ in range(10):
        k1 = f(s)
        k2 = f(s + dt / 2 * k1)
        k3 = f(s + dt / 2 * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        peak = x.maximum(peak, s[1])
    return s, peak


@prog(np.abs(r(B, 2)) + 0.5, np.abs(r(4)) * 0.5 + 0.5, in_axes=(0, None))
def lotka_volterra_rk4_trajectory_grad(y0, th, x, T):
    def sim(y0):
        def f(y):
            return x.stack([th[0] * y[0] - th[1] * y[0] * y[1],
                            -th[2] * y[1] + th[3] * y[0] * y[1]])
        y, dt, out = y0, 0.1, []
        for _ in range(8):
            k1 = f(y)
            k2 = f(y + dt / 2 * k1)
            k3 = f(y + dt / 2 * k2)
            k4 = f(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            out.append(y)
        return x.stack(out)
    traj = sim(y0)
    return traj, T.jacrev(lambda v: sim(v)[-1])(y0)


@prog(r(B, 3, 2), r(B, 3, 2) * 0.1, in_axes=(0, 0))
def nbody_leapfrog_softened_gravity(q, v, x, T):
    m = x.array([1.0, 0.5, 0.2])

    def acc(q):
        d = q[None, :, :] - q[:, None, :]
        r2 = x.sum(d * d, -1) + 0.1
        return x.sum(m[None, :, None] * d / r2[..., None] ** 1.5, axis=1)
    dt = 0.05
    for _ in range(5):
        v = v + 0.5 * dt * acc(q)
        q = q + dt * v
        v = v + 0.5 * dt * acc(q)
    ke = 0.5 * x.sum(m * x.sum(v * v, -1))
    return q, ke


@prog(r(B, 2), np.abs(r(B)) + 0.5, in_axes=(0, 0))
def symplectic_euler_pendulum_energy_drift(y0, g, x, T):
    th, om = y0[0], y0[1]
    e0 = 0.5 * om ** 2 - g * x.cos(th)
    for _ in range(12):
        om = om - 0.1 * g * x.sin(th)
        th = th + 0.1 * om
    return th, om, 0.5 * om ** 2 - g * x.cos(th) - e0


@prog(r(B, 6), 0.2, in_axes=(0, None))
def heat_equation_periodic_roll_steps(u, k, x, T):
    for _ in range(6):
        u = u + k * (x.roll(u, 1) - 2 * u + x.roll(u, -1))
    return u, x.sum(u)


@prog(r(B, 2), np.abs(r(B)) + 0.1, in_axes=(0, 0))
def implicit_euler_linear_solve_steps(y0, c, x, T):
    A = x.stack([x.stack([-c, 1.0 + 0 * c]), x.stack([-1.0 + 0 * c, -c])])
    M = x.eye(2) - 0.2 * A
    y, ys = y0, []
    for _ in range(5):
        y = x.linalg.solve(M, y)
        ys.append(y)
    return x.stack(ys, axis=-1)


@prog(r(B, 3), in_axes=0)
def rk4_rhs_jacobian_stability_check(y0, x, T):
    def f(y):
        return x.stack([10 * (y[1] - y[0]), y[0] * (28 - y[2]) - y[1], y[0] * y[1] - 8 / 3 * y[2]])
    J = T.jacfwd(f)(y0)
    return J, x.trace(J), x.linalg.eigvals(J).real.max() if x is not np else \
        np.max(np.linalg.eigvals(J).real)


# === Kalman filters and smoothers ======================================================
@prog(r(B, 5, 2), np.abs(r(B)) * 0.1 + 0.05, in_axes=(0, 0))
def kalman_constant_velocity_2d_joseph(z, q, x, T):
    dt = 1.0
    F = x.array([[1, 0, dt, 0], [0, 1, 0, dt], [0, 0, 1, 0], [0, 0, 0, 1.0]])
    H = x.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
    R = 0.5 * x.eye(2)
    m, P, nis = x.zeros(4), x.eye(4), 0.0
    for t in range(5):
        m, P = F @ m, F @ P @ F.T + q * x.eye(4)
        S = H @ P @ H.T + R
        K = x.linalg.solve(S, H @ P).T
        e = z[t] - H @ m
        nis = nis + e @ x.linalg.solve(S, e)
        m = m + K @ e
        IKH = x.eye(4) - K @ H
        P = IKH @ P @ IKH.T + K @ R @ K.T
    return m, x.diag(P), nis


@prog(r(B, 6), np.array(0.9), np.array(0.2), np.array(0.5), in_axes=(0, None, None, None))
def rts_smoother_1d(z, a, q, rv, x, T):
    ms, Ps, mp, Pp = [], [], [], []
    m, P = 0.0, 1.0
    for t in range(6):
        m_, P_ = a * m, a * a * P + q
        K = P_ / (P_ + rv)
        m, P = m_ + K * (z[t] - m_), (1 - K) * P_
        mp.append(m_)
        Pp.append(P_)
        ms.append(m)
        Ps.append(P)
    sm, sP = [ms[-1]], [Ps[-1]]
    for t in range(4, -1, -1):
        G = Ps[t] * a / Pp[t + 1]
        sm.insert(0, ms[t] + G * (sm[0] - mp[t + 1]))
        sP.insert(0, Ps[t] + G * G * (sP[0] - Pp[t + 1]))
    return x.stack(sm), x.stack(sP)


@prog(r(B, 4, 2), in_axes=0)
def information_filter_update_cholesky(z, x, T):
    Lam, eta = 0.5 * x.eye(2), x.zeros(2)
    Rinv = 2.0 * x.eye(2)
    for t in range(4):
        Lam = Lam + Rinv
        eta = eta + Rinv @ z[t]
    L = x.linalg.cholesky(Lam)
    mean = T.linalg.cho_solve((L, True), eta)
    return mean, 2 * x.sum(x.log(x.diag(L)))


@prog(r(B, 2), spd(B, 2, 2) * 0.2, in_axes=(0, 0))
def unscented_transform_sigma_points(m, P, x, T):
    n, lam = 2, 1.0
    L = x.linalg.cholesky((n + lam) * 0.5 * (P + P.T))
    pts = x.concatenate([m[None], m[None] + L.T, m[None] - L.T])
    w = x.concatenate([x.array([lam / (n + lam)]), x.full(2 * n, 0.5 / (n + lam))])
    y = x.stack([x.sin(pts[:, 0]) + pts[:, 1], pts[:, 0] * pts[:, 1]], axis=-1)
    mu = w @ y
    d = y - mu
    return mu, (w[:, None] * d).T @ d


@prog(r(B, 5), {"a": np.array(0.7), "q": np.array(0.3)}, in_axes=(0, None))
def kalman_loglik_grad_wrt_shared_params(z, th, x, T):
    def ll(th):
        m, P, out = 0.0, 1.0, 0.0
        for t in range(5):
            m, P = th["a"] * m, th["a"] ** 2 * P + th["q"]
            S = P + 0.4
            out = out - 0.5 * (x.log(S) + (z[t] - m) ** 2 / S)
            K = P / S
            m, P = m + K * (z[t] - m), (1 - K) * P
        return out
    return ll(th), T.grad(ll)(th)


# === transformer blocks per example ===================================================
D = 6
TB = {"Wq": r(D, D) / 3, "Wk": r(D, D) / 3, "Wv": r(D, D) / 3, "Wo": r(D, D) / 3,
      "W1": r(D, 8) / 3, "W2": r(8, D) / 3, "g1": 1 + 0.1 * r(D), "g2": 1 + 0.1 * r(D)}


def _ln(h, g, x):
    mu = h.mean(-1, keepdims=True)
    return (h - mu) / x.sqrt(h.var(-1, keepdims=True) + 1e-5) * g


def _gelu(h, x):
    return 0.5 * h * (1 + x.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


@prog(r(B, 4, D), TB, in_axes=(0, None))
def pre_ln_transformer_block_two_heads(h, p, x, T):
    a = _ln(h, p["g1"], x)
    q = (a @ p["Wq"]).reshape(4, 2, 3).transpose(1, 0, 2)
    k = (a @ p["Wk"]).reshape(4, 2, 3).transpose(1, 0, 2)
    v = (a @ p["Wv"]).reshape(4, 2, 3).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / x.sqrt(3.0)
    s = x.where(x.tril(x.ones((4, 4), dtype=bool)), s, -1e9)
    w = x.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    o = (w @ v).transpose(1, 0, 2).reshape(4, D)
    h = h + o @ p["Wo"]
    return h + _gelu(_ln(h, p["g2"], x) @ p["W1"], x) @ p["W2"]


@prog(r(B, 4, D), TB, in_axes=(0, None))
def transformer_block_grad_wrt_params_dict(h, p, x, T):
    def loss(p):
        a = _ln(h, p["g1"], x)
        s = (a @ p["Wq"]) @ (a @ p["Wk"]).T / x.sqrt(6.0)
        w = x.exp(s - s.max(-1, keepdims=True))
        w = w / w.sum(-1, keepdims=True)
        o = h + w @ (a @ p["Wv"]) @ p["Wo"]
        return x.mean((o - h) ** 2)
    g = T.grad(loss)(p)
    return g["Wq"], g["g1"], loss(p)


@prog(r(B, 4, 4), in_axes=0)
def rotary_position_embedding(q, x, T):
    pos = x.arange(4.0)[:, None]
    freq = 1.0 / 100 ** (x.arange(0, 4, 2) / 4)
    ang = pos * freq[None, :]
    c, s = x.cos(ang), x.sin(ang)
    q1, q2 = q[:, 0::2], q[:, 1::2]
    rot = x.stack([q1 * c - q2 * s, q1 * s + q2 * c], axis=-1).reshape(4, 4)
    return rot, rot @ rot.T


@prog(r(B, 2, 5, 3), np.array([0.5, 0.25]), in_axes=(0, None))
def alibi_bias_attention_weights(q, slopes, x, T):
    i = x.arange(5)
    bias = -slopes[:, None, None] * x.abs(i[None, :, None] - i[None, None, :])
    s = x.einsum("hqd,hkd->hqk", q, q) + bias
    return x.exp(s - T.special.logsumexp(s, axis=-1, keepdims=True))


@prog(r(B, 3, 4), r(5, 4), r(5, 4), rng.integers(1, 6, B), in_axes=(0, None, None, 0))
def cross_attention_memory_key_padding(q, km, vm, n, x, T):
    s = q @ km.T
    s = x.where(x.arange(5)[None, :] < n, s, -x.inf)
    p = T.special.softmax(s, axis=-1)
    return p @ vm, p.sum(0)


@prog(r(B, 5, 4), r(4, 4) / 2, in_axes=(0, None))
def multi_query_attention_shared_kv_head(h, W, x, T):
    q = (h @ W).reshape(5, 2, 2)
    k = h[:, :2]
    s = x.einsum("thd,sd->hts", q, k)
    p = x.exp(s - x.max(s, axis=-1, keepdims=True))
    p = p / x.sum(p, axis=-1, keepdims=True)
    return x.einsum("hts,sd->thd", p, h[:, 2:]).reshape(5, 4)


@prog(r(B, 6, 3), in_axes=0)
def attention_pooling_entropy_and_argmax(h, x, T):
    s = h @ x.array([0.5, -1.0, 0.3])
    p = T.special.softmax(s)
    return p @ h, -x.sum(p * T.special.log_softmax(s)), x.argmax(p)


# === mixtures with logsumexp ==========================================================
@prog(r(B, 6), r(3), np.abs(r(3)) + 0.5, r(3), in_axes=(0, None, None, None))
def gmm_1d_loglik_special_logsumexp(v, mu, sig, lw, x, T):
    lp = (-0.5 * ((v[:, None] - mu) / sig) ** 2 - x.log(sig) - 0.5 * x.log(2 * x.pi)
          + lw - T.special.logsumexp(lw))
    return x.sum(T.special.logsumexp(lp, axis=1)), x.exp(lp - T.special.logsumexp(lp, axis=1,
                                                                                    keepdims=True))


@prog(r(B, 5, 2), r(3, 2), spd(3, 2, 2), in_axes=(0, None, None))
def gmm_full_cov_cholesky_batched_components(v, mu, S, x, T):
    L = x.linalg.cholesky(0.5 * (S + x.swapaxes(S, -1, -2)))   # one gradient convention
    d = v[:, None, :] - mu[None]
    z = x.linalg.solve(L[None], d[..., None])[..., 0]
    lp = -0.5 * x.sum(z * z, -1) - x.sum(x.log(x.diagonal(L, axis1=-2, axis2=-1)), -1)
    return T.special.logsumexp(lp - x.log(3.0), axis=-1).sum()


@prog(rng.poisson(3.0, (B, 6)).astype(float), np.abs(r(2)) + 1.0, r(2), in_axes=(0, None, None))
def poisson_mixture_em_step(k, lam, lw, x, T):
    lp = k[:, None] * x.log(lam) - lam - T.special.gammaln(k[:, None] + 1) + lw
    resp = x.exp(lp - T.special.logsumexp(lp, axis=1, keepdims=True))
    nk = resp.sum(0)
    return (resp * k[:, None]).sum(0) / nk, x.log(nk / 6.0)


@prog(r(B, 5), r(3, 5) / 2, in_axes=(0, None))
def mixture_of_experts_gating_logsumexp(h, Wg, x, T):
    logits = Wg @ h
    lg = logits - T.special.logsumexp(logits)
    experts = x.stack([x.tanh(h), h ** 2 / 5, x.sin(h)])
    return x.exp(lg) @ experts, lg


@prog(r(B, 4, 3), in_axes=0)
def hmm_forward_log_space_logaddexp(obs_lp, x, T):
    A = x.log(x.array([[0.8, 0.15, 0.05], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]]))
    a = obs_lp[0] - x.log(3.0)
    for t in range(1, 4):
        a = T.special.logsumexp(a[:, None] + A, axis=0) + obs_lp[t]
    return T.special.logsumexp(a)


# === survival analysis ================================================================
@prog(np.abs(r(B, 6)) + 0.1, (rng.random((B, 6)) > 0.3).astype(float), np.abs(r(B, 2)) + 0.5,
      in_axes=(0, 0, 0))
def weibull_censored_loglik_and_grad(t, ev, th, x, T):
    def ll(th):
        k, lam = th[0], th[1]
        z = t / lam
        return x.sum(ev * (x.log(k / lam) + (k - 1) * x.log(z)) - z ** k)
    return ll(th), T.grad(ll)(th)


@prog(np.sort(np.abs(r(B, 6)), axis=1), (rng.random((B, 6)) > 0.3).astype(float), r(B, 6, 2),
      r(2), in_axes=(0, 0, 0, None))
def cox_partial_likelihood_reverse_logcumsumexp(t, ev, X, beta, x, T):
    eta = X @ beta
    risk = logcumsumexp(x, eta[::-1])[::-1]        # log sum over the risk set t_j >= t_i
    return x.sum(ev * (eta - risk)), risk


@prog(np.abs(r(B, 6)) * 0.3 + 0.05, in_axes=0)
def kaplan_meier_like_cumprod_survival(h, x, T):
    s = x.cumprod(1 - h / (1 + h))
    return s, -x.log(s[-1]), x.cumsum(h)


@prog(np.abs(r(B, 5)) + 0.2, (rng.random((B, 5)) > 0.4).astype(float), r(B, 5), r(B, 5),
      in_axes=(0, 0, 0, 0))
def lognormal_aft_censored_log_ndtr(t, ev, mu, ls, x, T):
    sig = x.exp(0.3 * ls)
    z = (x.log(t) - mu) / sig
    ll = ev * (-0.5 * z ** 2 - x.log(sig * t) - 0.5 * x.log(2 * x.pi)) + (1 - ev) * T.special.log_ndtr(-z)
    return x.sum(ll)


@prog(np.abs(r(B, 7)) + 0.1, np.linspace(0.2, 2.0, 4), in_axes=(0, None))
def piecewise_constant_hazard_searchsorted(t, cuts, x, T):
    k = x.searchsorted(cuts, t)
    haz = 0.3 + 0.1 * x.arange(5.0)
    width = x.diff(x.concatenate([x.zeros(1), cuts]))
    H_full = x.concatenate([x.zeros(1), x.cumsum(haz[:4] * width)])
    start = x.concatenate([x.zeros(1), cuts])
    H = H_full[k] + haz[k] * (t - start[k])
    return x.exp(-H), k


# === robust losses ====================================================================
@prog(r(B, 8) * 2, np.abs(r(B)) + 0.5, in_axes=(0, 0))
def tukey_biweight_cauchy_geman_mcclure(res, c, x, T):
    u = res / c
    tukey = x.where(x.abs(u) < 1, c ** 2 / 6 * (1 - (1 - u ** 2) ** 3), c ** 2 / 6)
    cauchy = 0.5 * c ** 2 * x.log1p(u ** 2)
    gm = 0.5 * u ** 2 / (1 + u ** 2)
    return tukey.sum(), cauchy.sum(), gm.mean()


@prog(r(B, 6), r(B, 6), np.array([0.1, 0.5, 0.9]), in_axes=(0, 0, None))
def pinball_quantile_loss_multiple_taus(y, yh, tau, x, T):
    e = y[None, :] - yh[None, :]
    return x.mean(x.maximum(tau[:, None] * e, (tau[:, None] - 1) * e), axis=1)


@prog(r(B, 6) * 3, in_axes=0)
def log_cosh_stable_and_pseudo_huber(e, x, T):
    lc = x.abs(e) + x.log1p(x.exp(-2 * x.abs(e))) - x.log(2.0)
    ph = x.sqrt(1 + e ** 2) - 1
    return lc, ph, T.grad(lambda v: x.sum(x.abs(v) + x.log1p(x.exp(-2 * x.abs(v)))))(e)


@prog(r(B, 5, 2), r(2), in_axes=(0, None))
def irls_huber_regression_two_steps(X, w0, x, T):
    y = X @ x.array([1.0, -2.0]) + 0.3 * X[:, 0] ** 3
    w = w0
    for _ in range(2):
        e = y - X @ w
        wt = x.where(x.abs(e) <= 1.0, 1.0, 1.0 / x.maximum(x.abs(e), 1e-12))
        A = X.T @ (wt[:, None] * X) + 1e-3 * x.eye(2)
        w = x.linalg.solve(A, X.T @ (wt * y))
    return w


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def asymmetric_laplace_and_epsilon_insensitive(y, yh, x, T):
    e = y - yh
    eps = x.maximum(x.abs(e) - 0.3, 0.0)
    return x.sum(eps), x.sum(x.where(e > 0, 0.7 * e, -0.3 * e)), x.clip(e, -0.5, 0.5)


# === physics: pairwise potentials =====================================================
@prog(r(B, 5, 2) * 1.5, in_axes=0)
def lennard_jones_energy_forces_via_grad(q, x, T):
    def energy(q):
        d = q[:, None, :] - q[None, :, :]
        r2 = x.sum(d * d, -1) + x.eye(5)
        inv6 = (1.0 / r2) ** 3
        e = 4 * (inv6 ** 2 - inv6)
        return 0.5 * x.sum(e * (1 - x.eye(5)))
    return energy(q), -T.grad(energy)(q)


@prog(r(B, 4, 3) * 2, 3.0, in_axes=(0, None))
def coulomb_minimum_image_periodic_box(q, L, x, T):
    d = q[:, None, :] - q[None, :, :]
    d = d - L * x.round(d / L)
    r_ = x.sqrt(x.sum(d * d, -1) + x.eye(4))
    ch = x.array([1.0, -1.0, 1.0, -1.0])
    return 0.5 * x.sum(ch[:, None] * ch[None, :] / r_ * (1 - x.eye(4)))


@prog(r(B, 5, 2), np.abs(r(B)) + 0.5, in_axes=(0, 0))
def spring_chain_energy_hessian(q, k, x, T):
    def energy(q):
        d = x.diff(q, axis=0)
        ln = x.sqrt(x.sum(d * d, -1))
        return 0.5 * k * x.sum((ln - 1.0) ** 2)
    return energy(q), T.hessian(energy)(q).reshape(10, 10).trace()


@prog(r(B, 4, 3), np.array([1.0, 1.5, 2.0]), in_axes=(0, None))
def morse_potential_triu_pairs(q, p, x, T):
    i, j = x.triu_indices(4, k=1)
    rr = x.linalg.norm(q[i] - q[j], axis=-1)
    return x.sum(p[0] * (1 - x.exp(-p[1] * (rr - p[2]))) ** 2), rr


@prog(r(B, 6, 2) * 2, 1.2, in_axes=(0, None))
def neighbour_count_cutoff_smooth(q, rc, x, T):
    d = x.sqrt(x.sum((q[:, None] - q[None]) ** 2, -1) + 1e-12)
    fc = x.where(d < rc, 0.5 * (x.cos(x.pi * d / rc) + 1), 0.0) * (1 - x.eye(6))
    return fc.sum(1), (d < rc).sum(1) - 1


@prog(r(B, 3, 3), r(B, 3, 3) * 0.1, np.array([1.0, 2.0, 3.0]), in_axes=(0, 0, None))
def rigid_body_inertia_tensor_eigh(q, v, m, x, T):
    c = (m[:, None] * q).sum(0) / m.sum()
    d = q - c
    I = x.sum(m[:, None, None] * (x.sum(d * d, -1)[:, None, None] * x.eye(3)
                                  - d[:, :, None] * d[:, None, :]), axis=0)
    w = x.linalg.eigvalsh(I)
    L_ = x.sum(m[:, None] * x.cross(d, v), axis=0)
    return w, L_, x.linalg.solve(I + 1e-3 * x.eye(3), L_)


# === finance ==========================================================================
def _bs_call(S, K, T_, r_, sig, x, sp):
    d1 = (x.log(S / K) + (r_ + 0.5 * sig ** 2) * T_) / (sig * x.sqrt(T_))
    d2 = d1 - sig * x.sqrt(T_)
    return S * sp.ndtr(d1) - K * x.exp(-r_ * T_) * sp.ndtr(d2)


@prog(100 + 10 * r(B), np.abs(r(B)) * 0.1 + 0.15, np.array([90.0, 100.0, 110.0]),
      in_axes=(0, 0, None))
def black_scholes_call_strike_ladder(S, sig, K, x, T):
    return _bs_call(S, K, 1.0, 0.02, sig, x, T.special)


@prog(100 + 10 * r(B), np.abs(r(B)) * 0.1 + 0.15, in_axes=(0, 0))
def black_scholes_greeks_nested_grad(S, sig, x, T):
    price = lambda s, v: _bs_call(s, 100.0, 0.5, 0.01, v, x, T.special)  # noqa: E731
    delta = T.grad(price, 0)(S, sig)
    gamma = T.grad(T.grad(price, 0), 0)(S, sig)
    vega = T.grad(price, 1)(S, sig)
    vanna = T.grad(T.grad(price, 0), 1)(S, sig)
    return price(S, sig), delta, gamma, vega, vanna


@prog(np.abs(r(B)) * 0.1 + 0.2, 100.0, in_axes=(0, None))
def crr_binomial_tree_american_put(sig, S0, x, T):
    n, dt, rr, K = 6, 1.0 / 6, 0.03, 100.0
    u = x.exp(sig * x.sqrt(dt))
    d = 1 / u
    p = (x.exp(rr * dt) - d) / (u - d)
    j = x.arange(n + 1.0)
    V = x.maximum(K - S0 * u ** (n - j) * d ** j, 0.0)
    for i in range(n - 1, -1, -1):
        j = x.arange(i + 1.0)
        cont = x.exp(-rr * dt) * (p * V[:-1] + (1 - p) * V[1:])
        V = x.maximum(cont, K - S0 * u ** (i - j) * d ** j)
    return V[0]


@prog(np.abs(r(B)) * 0.1 + 0.2, r(64), in_axes=(0, None))
def monte_carlo_asian_call_shared_normals(sig, z, x, T):
    zs = z.reshape(16, 4)
    dt = 0.25
    logS = x.log(100.0) + x.cumsum((0.01 - 0.5 * sig ** 2) * dt + sig * x.sqrt(dt) * zs, axis=1)
    avg = x.exp(logS).mean(1)
    pay = x.maximum(avg - 100.0, 0.0)
    return pay.mean(), pay.std()


@prog(np.abs(r(B)) * 5 + 8, 100.0, in_axes=(0, None))
def implied_vol_newton_fixed_iterations(price, S, x, T):
    sig = 0.3 + 0 * price
    for _ in range(8):
        f = lambda v: _bs_call(S, 100.0, 1.0, 0.0, v, x, T.special) - price  # noqa: E731
        sig = sig - f(sig) / T.grad(f)(sig)
    return sig


@prog(r(B, 4) / 4, spd(4, 4) / 20, r(4) * 0.05, in_axes=(0, None, None))
def portfolio_variance_sharpe_softmax_weights(logit, C, mu, x, T):
    w = T.special.softmax(logit)
    var = w @ C @ w
    return w @ mu / x.sqrt(var), T.grad(lambda l: -(T.special.softmax(l) @ mu))(logit)


@prog(r(B, 10) * 0.02, in_axes=0)
def max_drawdown_and_sortino(ret, x, T):
    wealth = x.exp(x.cumsum(x.log1p(ret)))
    peak = x.maximum.accumulate(wealth) if x is np else __import__("jax").lax.cummax(wealth)
    dd = 1 - wealth / peak
    down = x.minimum(ret, 0.0)
    return x.max(dd), ret.mean() / x.sqrt(x.mean(down ** 2) + 1e-12)


# === graphs: message passing with gathers and scatters ===============================
@prog(r(B, 5, 3), r(3, 3) / 2, in_axes=(0, None))
def gcn_layer_add_at_scatter(h, W, x, T):
    msg = h[SRC] @ W
    agg = add_at(x, 5, DST, msg)
    deg = add_at(x, 5, DST, x.ones(7))
    return x.tanh(agg / x.maximum(deg, 1.0)[:, None] + h)


@prog(r(B, 5, 3), r(B, 7), in_axes=(0, 0))
def edge_weighted_aggregation_bincount_weights(h, ew, x, T):
    w = x.exp(ew)
    out = x.stack([bincount_w(x, DST, w * h[SRC, c], 5) for c in range(3)], axis=1)
    return out, bincount_w(x, DST, w, 5)


@prog(r(B, 5, 3), r(3), in_axes=(0, None))
def graph_attention_segment_softmax(h, a, x, T):
    e = x.tanh(h[SRC] @ a + h[DST] @ a)
    emax = add_at(x, 5, DST, x.zeros(7)) + x.max(e)
    num = x.exp(e - emax[DST])
    den = add_at(x, 5, DST, num)
    alpha = num / den[DST]
    return add_at(x, 5, DST, alpha[:, None] * h[SRC]), alpha


@prog(r(B, 5, 3), in_axes=0)
def normalized_laplacian_dense_from_edges(h, x, T):
    A = add_at(x, 5, SRC, x.eye(5)[DST]) if x is not np else np.eye(5)[SRC].T @ np.eye(5)[DST]
    A = A + A.T
    d = A.sum(1)
    Dm = 1 / x.sqrt(d)
    Lap = x.eye(5) - Dm[:, None] * A * Dm[None, :]
    return Lap @ h, x.einsum("ic,ij,jc->", h, Lap, h)


@prog(r(B, 6), rng.integers(0, 3, 6), in_axes=(0, None))
def segment_mean_and_max_shared_ids(v, seg, x, T):
    s = bincount_w(x, seg, v, 3)
    c = bincount_w(x, seg, x.ones(6), 3)
    onehot = seg[:, None] == x.arange(3)[None, :]
    mx = x.max(x.where(onehot, v[:, None], -x.inf), axis=0)
    return s / c, mx


@prog(r(B, 6), rng.integers(0, 3, (B, 6)), in_axes=(0, 0))
def segment_sum_per_item_ids_add_at(v, seg, x, T):
    return add_at(x, 3, seg, v), add_at(x, 3, seg, v ** 2)


@prog(r(B, 5), in_axes=0)
def pagerank_power_iteration_from_edges(pers, x, T):
    A = np.zeros((5, 5))
    A[DST, SRC] = 1.0
    P = A / A.sum(0, keepdims=True)
    p0 = T.special.softmax(pers)
    v = p0
    for _ in range(10):
        v = 0.85 * P @ v + 0.15 * p0
    return v


# === image ops ========================================================================
SOBEL = np.array([[1.0, 0, -1], [2, 0, -2], [1, 0, -1]])


@prog(r(B, 6, 6), r(3, 3), in_axes=(0, None))
def conv2d_valid_sliding_window_view(img, k, x, T):
    w = windows2d(x, img, 3)
    return x.einsum("ijkl,kl->ij", w, k)


@prog(r(B, 5, 5), in_axes=0)
def sobel_edges_pad_reflect(img, x, T):
    p = x.pad(img, 1, mode="reflect")
    w = windows2d(x, p, 3)
    gx = x.einsum("ijkl,kl->ij", w, SOBEL)
    gy = x.einsum("ijkl,kl->ij", w, SOBEL.T)
    return x.sqrt(gx ** 2 + gy ** 2 + 1e-9)


@prog(r(B, 6, 6), in_axes=0)
def laplacian_via_roll_and_total_variation(img, x, T):
    lap = (x.roll(img, 1, 0) + x.roll(img, -1, 0) + x.roll(img, 1, 1) + x.roll(img, -1, 1)
           - 4 * img)
    tv = x.sum(x.abs(x.diff(img, axis=0))) + x.sum(x.abs(x.diff(img, axis=1)))
    return lap, tv


@prog(r(B, 4, 6), in_axes=0)
def max_pool_and_avg_pool_reshape(img, x, T):
    blocks = img.reshape(2, 2, 3, 2).transpose(0, 2, 1, 3)
    return blocks.max(axis=(-2, -1)), blocks.mean(axis=(-2, -1)), img.reshape(2, 2, 6).max(1)


@prog(r(B, 3, 3), in_axes=0)
def nearest_and_bilinear_upsample(img, x, T):
    up = x.repeat(x.repeat(img, 2, axis=0), 2, axis=1)
    t = x.linspace(0, 2, 5)
    i0 = x.clip(x.floor(t).astype(int), 0, 1)
    f = t - i0
    rows = img[i0] * (1 - f)[:, None] + img[i0 + 1] * f[:, None]
    bil = rows[:, i0] * (1 - f)[None, :] + rows[:, i0 + 1] * f[None, :]
    return up, bil


@prog(r(B, 5, 5), in_axes=0)
def gaussian_blur_separable_pad_edge(img, x, T):
    g = x.array([0.25, 0.5, 0.25])
    p = x.pad(img, ((1, 1), (0, 0)), mode="edge")
    v = g[0] * p[:-2] + g[1] * p[1:-1] + g[2] * p[2:]
    q = x.pad(v, ((0, 0), (1, 1)), mode="constant", constant_values=0.5)
    return g[0] * q[:, :-2] + g[1] * q[:, 1:-1] + g[2] * q[:, 2:]


@prog(r(B, 2, 6, 6), r(3, 2, 3, 3) / 3, in_axes=(0, None))
def conv2d_multichannel_stride2_einsum(img, k, x, T):
    p = x.pad(img, ((0, 0), (1, 1), (1, 1)))
    cols = x.stack([x.stack([p[:, i:i + 3, j:j + 3] for j in range(0, 6, 2)])
                    for i in range(0, 6, 2)])                 # (3, 3, C, 3, 3)
    out = x.einsum("ijckl,ockl->oij", cols, k)
    return x.maximum(out, 0.0)


@prog(r(B, 8, 8), in_axes=0)
def fft2_lowpass_and_power_spectrum(img, x, T):
    F = x.fft.fft2(img)
    fy = x.fft.fftfreq(8)[:, None]
    fx = x.fft.fftfreq(8)[None, :]
    mask = (fy ** 2 + fx ** 2) < 0.1
    return x.fft.ifft2(F * mask).real, x.abs(x.fft.fftshift(F)) ** 2


# === sorting-based losses and quantiles ===============================================
@prog(r(B, 6), r(B, 6) * 0.5 + 1, in_axes=(0, 0))
def wasserstein_1d_sorted_samples(a, b, x, T):
    return x.mean(x.abs(x.sort(a) - x.sort(b))), x.mean((x.sort(a) - x.sort(b)) ** 2)


@prog(r(B, 10), 0.8, in_axes=(0, None))
def cvar_via_sort_top_fraction(loss, alpha, x, T):
    s = x.sort(loss)[::-1]
    k = 2
    return s[:k].mean(), x.quantile(loss, alpha), x.mean(x.maximum(loss - x.quantile(loss, alpha), 0)) / (1 - alpha)


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def listnet_top1_and_pairwise_hinge(s, rel, x, T):
    p_true = T.special.softmax(rel)
    lp = T.special.log_softmax(s)
    diff = s[:, None] - s[None, :]
    better = rel[:, None] > rel[None, :]
    return -x.sum(p_true * lp), x.sum(x.where(better, x.maximum(0, 1 - diff), 0.0))


@prog(r(B, 12), in_axes=0)
def quantile_methods_and_iqr(a, x, T):
    q = x.quantile(a, x.array([0.25, 0.5, 0.75]))
    return (q, q[2] - q[0], x.percentile(a, 90.0, method="nearest"),
            x.quantile(a, 0.3, method="lower"), x.quantile(a, 0.3, method="midpoint"))


@prog(r(B, 8, 3), in_axes=0)
def median_absolute_deviation_rows(a, x, T):
    med = x.median(a, axis=0)
    mad = x.median(x.abs(a - med), axis=0)
    return med, mad, x.nanmedian(a, axis=1)


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def spearman_via_double_argsort(a, b, x, T):
    ra = x.argsort(x.argsort(a)).astype(float)
    rb = x.argsort(x.argsort(b)).astype(float)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return ra @ rb / x.sqrt((ra @ ra) * (rb @ rb)), x.sort(a * b)


@prog(r(B, 5, 3), r(3, 4), in_axes=(0, None))
def sliced_wasserstein_shared_projections(P, dirs, x, T):
    Q = P[::-1] * 0.5 + 1.0
    pp = x.sort(P @ dirs, axis=0)
    qq = x.sort(Q @ dirs, axis=0)
    return x.mean((pp - qq) ** 2)


@prog(r(B, 7), in_axes=0)
def soft_rank_sigmoid_pairwise(s, x, T):
    P = T.special.expit((s[:, None] - s[None, :]) / 0.1)
    return 1 + P.sum(0) - 0.5, x.argsort(x.argsort(-s))


@prog(r(B, 9), np.array([0.1, 0.5, 0.35, 0.9]), in_axes=(0, 0))
def value_at_risk_per_item_level_quantile_and_percentile(loss, lev, x, T):
    var = x.quantile(loss, lev)
    return var, x.percentile(loss, 100 * lev, method="midpoint"), x.mean(x.maximum(loss - var, 0.0))


@prog(np.round(r(B, 6)), np.array([0.5, 0.2, 0.8, 1.0]), in_axes=(0, 0))
def heaviside_step_per_item_value_at_zero(k, h, x, T):
    step = x.heaviside(k, h)                   # k holds exact zeros: the step's value there is h
    return step, x.sum(step * k + h * step)


# === cumulative operations ============================================================
@prog(r(B, 6), in_axes=0)
def logcumsumexp_vs_naive(a, x, T):
    lc = logcumsumexp(x, a)
    return lc, x.log(x.cumsum(x.exp(a))), x.exp(a - lc)


@prog(r(B, 3, 5), in_axes=0)
def cumsum_axis_minus1_then_normalize_rows(a, x, T):
    c = x.cumsum(x.exp(a), axis=-1)
    return c / c[:, -1:], x.cumprod(x.tanh(a), axis=0)


@prog(r(B, 8), 0.9, in_axes=(0, None))
def ema_cumsum_closed_form_vs_loop(v, beta, x, T):
    n = 8
    i = x.arange(n)
    wts = beta ** (i[:, None] - i[None, :]) * (i[:, None] >= i[None, :])
    closed = (1 - beta) * wts @ v
    e, out = 0.0, []
    for t in range(n):
        e = beta * e + (1 - beta) * v[t]
        out.append(e)
    return closed, x.stack(out)


@prog(r(B, 7), in_axes=0)
def running_min_max_via_ufunc_accumulate(a, x, T):
    if x is np:
        return np.minimum.accumulate(a), np.maximum.accumulate(a[::-1])[::-1]
    import jax
    return jax.lax.cummin(a), jax.lax.cummax(a, reverse=True)


@prog(np.abs(r(B, 6)) + 0.1, np.linspace(0.1, 0.6, 6), in_axes=(0, None))
def cumulative_trapezoid_manual(f, t, x, T):
    inc = 0.5 * (f[1:] + f[:-1]) * x.diff(t)
    return x.concatenate([x.zeros(1), x.cumsum(inc)])


@prog(r(B, 6), in_axes=0)
def diff_cumsum_roundtrip_and_ediff1d(a, x, T):
    c = x.cumsum(a)
    return x.diff(c, prepend=0.0), x.ediff1d(a, to_begin=a[:1]), x.cumsum(x.diff(a))


# === linear algebra, factorizations =================================================
@prog(r(B, 5, 3), r(B, 5), in_axes=(0, 0))
def lstsq_residuals_and_qr_solve(A, y, x, T):
    w, res, rank, sv = x.linalg.lstsq(A, y, rcond=None)
    Q, R = x.linalg.qr(A)
    w2 = T.linalg.solve_triangular(R, Q.T @ y)
    return w, w2, sv


@prog(spd(B, 4, 4), in_axes=0)
def eigh_matrix_functions_sqrt_log(S, x, T):
    S = 0.5 * (S + S.T)
    w, V = x.linalg.eigh(S)
    sqrtS = (V * x.sqrt(w)) @ V.T
    logS = (V * x.log(w)) @ V.T
    return sqrtS, x.trace(logS), sqrtS @ sqrtS - S


@prog(r(B, 4, 3), in_axes=0)
def svd_low_rank_and_nuclear_norm(A, x, T):
    U, s, Vt = x.linalg.svd(A, full_matrices=False)
    A1 = s[0] * x.outer(U[:, 0], Vt[0])
    return x.abs(A1), x.sum(s), x.linalg.norm(A, 2), x.linalg.cond(A)


@prog(spd(B, 3, 3), spd(3, 3), in_axes=(0, None))
def kl_between_mvn_slogdet_trace_solve(S1, S0, x, T):
    m = x.array([0.1, -0.2, 0.3])
    tr = x.trace(x.linalg.solve(S0, S1))
    quad = m @ x.linalg.solve(S0, m)
    return 0.5 * (tr + quad - 3 + x.linalg.slogdet(S0)[1] - x.linalg.slogdet(S1)[1])


@prog(r(B, 3, 3) * 0.5, in_axes=0)
def matrix_exponential_via_eig_of_symmetric_and_expm(A, x, T):
    S = A + A.T
    w, V = x.linalg.eigh(S)
    E1 = V @ x.diag(x.exp(w)) @ V.T
    return E1, T.linalg.expm(S), x.linalg.matrix_power(x.eye(3) + S / 8, 8)


@prog(r(B, 4, 4), in_axes=0)
def pinv_projection_and_matrix_rank(A, x, T):
    A = A.at[:, 3].set(A[:, 0] + A[:, 1]) if x is not np else \
        np.concatenate([A[:, :3], (A[:, 0] + A[:, 1])[:, None]], axis=1)
    P = A @ x.linalg.pinv(A, rcond=1e-8)
    return P, x.linalg.matrix_rank(A)


@prog(spd(B, 3, 3), r(B, 3, 2), in_axes=(0, 0))
def cholesky_whitening_and_mahalanobis(S, v, x, T):
    L = x.linalg.cholesky(0.5 * (S + S.T))
    z = T.linalg.solve_triangular(L, v, lower=True)
    return z, x.sum(z * z, axis=0), x.linalg.inv(L)


@prog(r(3, 3), r(B, 3, 3), in_axes=(None, 0))
def sylvester_like_kron_solve(A, C, x, T):
    n = 3
    M = x.kron(x.eye(n), A) + x.kron(A.T, x.eye(n)) + 4 * x.eye(n * n)
    X = x.linalg.solve(M, C.T.reshape(-1)).reshape(n, n).T
    return X, A @ X + X @ A + 4 * X - C


@prog(spd(B, 4, 4), in_axes=0)
def conjugate_gradient_fixed_iterations(A, x, T):
    b = x.ones(4)
    v = x.zeros(4)
    res = b - A @ v
    p = res
    for _ in range(4):
        Ap = A @ p
        alpha = (res @ res) / (p @ Ap)
        v = v + alpha * p
        rn = res - alpha * Ap
        p = rn + (rn @ rn) / (res @ res) * p
        res = rn
    return v, x.linalg.solve(A, b)


@prog(r(B, 3, 3) + 2 * np.eye(3), in_axes=0)
def det_inv_grad_identity_jacobi(A, x, T):
    gdet = T.grad(lambda M: x.linalg.det(M))(A)
    return gdet, x.linalg.det(A) * x.linalg.inv(A).T


@prog(spd(B, 3, 3), in_axes=0)
def eigh_top_eigenvector_sign_fixed_grad(S, x, T):
    def top(S):
        w, V = x.linalg.eigh(0.5 * (S + S.T))
        v = V[:, -1]
        return w[-1], v * x.sign(v[0])
    w, v = top(S)
    return w, v, T.grad(lambda S: top(S)[0])(S)


# === FFT ==============================================================================
@prog(r(B, 8), r(B, 8), in_axes=(0, 0))
def fft_circular_convolution_vs_direct(a, b, x, T):
    fc = x.fft.ifft(x.fft.fft(a) * x.fft.fft(b)).real
    direct = x.stack([x.sum(a * x.roll(b[::-1], k + 1)) for k in range(8)])
    return fc, direct


@prog(r(B, 16), in_axes=0)
def welch_like_psd_hann_windows(s, x, T):
    w = x.hanning(8)
    segs = x.stack([s[i:i + 8] * w for i in range(0, 9, 4)])
    P = x.abs(x.fft.rfft(segs, axis=-1)) ** 2
    return P.mean(0) / x.sum(w ** 2)


@prog(r(B, 8), in_axes=0)
def spectral_derivative_periodic(u, x, T):
    k = x.fft.rfftfreq(8, d=1.0 / 8) * 2 * x.pi / 8
    return x.fft.irfft(1j * k * x.fft.rfft(u), n=8), x.fft.irfft(-(k ** 2) * x.fft.rfft(u), n=8)


@prog(r(B, 4, 6), in_axes=0)
def rfft2_irfft2_roundtrip_axes(a, x, T):
    F = x.fft.rfft2(a)
    return x.fft.irfft2(F, s=a.shape), x.abs(x.fft.rfft(a, axis=0)), x.fft.fft(a, axis=0, norm="ortho").imag


@prog(r(B, 8), 3, in_axes=(0, None))
def autocorrelation_via_fft_zero_pad(s, lag, x, T):
    c = s - s.mean()
    F = x.fft.rfft(c, n=16)
    ac = x.fft.irfft(F * x.conj(F), n=16)[:8]
    return ac / ac[0], ac[lag] / ac[0]


# === in_axes / out_axes pytrees with negative axes ===================================
@prog({"a": r(3, B), "b": (r(2, 2, B), r(3))}, in_axes=({"a": -1, "b": (-1, None)},),
      out_axes={"s": -1, "t": None, "u": -2})
def dict_tuple_in_axes_negative_out_dict(d, x, T):
    a = d["a"]
    m, w = d["b"]
    return {"s": m @ a[:2], "t": w * 2, "u": x.outer(a, w)}


@prog(r(2, B, 3), r(B, 3), in_axes=(-2, 0), out_axes=(-1, 1))
def in_axes_minus2_out_axes_mixed(a, b, x, T):
    return a @ b, x.stack([a.sum(0), b])


@prog([r(B, 3), r(3, B)], {"k": r(B)}, in_axes=([0, 1], {"k": 0}), out_axes=[0, -1])
def list_and_dict_in_axes_list_out_axes(l, d, x, T):
    u, v = l
    return [u * d["k"] + v, x.outer(u, v)]


@prog(r(B, 2, 3), in_axes=0, out_axes=({"m": 1},))
def single_tuple_out_axes_with_dict(a, x, T):
    return ({"m": a.T @ a},)


@prog(r(3, 4, B), in_axes=2, out_axes=-3)
def in_axes2_out_axes_minus3_matrix_output(a, x, T):
    return a @ a.T


# === nested vmap =======================================================================
@prog(r(B, 5, 2), r(3, 2), in_axes=(0, None))
def nested_vmap_pairwise_kernel_matrix(X, Z, x, T):
    k = lambda u, v: x.exp(-x.sum((u - v) ** 2))  # noqa: E731
    K = T.vmap(T.vmap(k, in_axes=(None, 0)), in_axes=(0, None))(X, Z)
    return K, K.sum(1)


@prog(r(B, 3, 4), in_axes=0)
def nested_vmap_columns_then_rows_out_axes(a, x, T):
    f = T.vmap(T.vmap(lambda s: x.sin(s) * s, in_axes=0, out_axes=0), in_axes=1, out_axes=1)
    return f(a)


@prog(r(B, 3), r(B, 2, 3), in_axes=(0, 0))
def triple_nested_vmap_outer_products(a, b, x, T):
    f = T.vmap(T.vmap(T.vmap(lambda u, v: u * v, in_axes=(0, None)), in_axes=(None, 0)),
               in_axes=(None, 0))
    return f(a, b)


@prog(r(B, 4, 2), in_axes=0)
def nested_vmap_grad_of_pair_energy(q, x, T):
    e = lambda u, v: 1.0 / (x.sum((u - v) ** 2) + 0.5)  # noqa: E731
    F = T.vmap(T.vmap(T.grad(e), in_axes=(None, 0)), in_axes=(0, None))(q, q)
    return F.sum(1)


@prog(r(B, 3), r(5, 3), in_axes=(0, None))
def inner_vmap_axis_size_and_none(a, C, x, T):
    f = T.vmap(lambda c: c @ a, in_axes=0)
    g = T.vmap(lambda: a * 2, in_axes=(), axis_size=3)
    return f(C), g()


# === vmap of transforms, grad of vmap ================================================
@prog(r(B, 3), r(3, 3), in_axes=(0, None))
def vmap_of_jacrev_and_jacfwd_agree(a, W, x, T):
    f = lambda v: x.tanh(W @ v) * v  # noqa: E731
    return T.jacrev(f)(a), T.jacfwd(f)(a)


@prog(r(B, 3), in_axes=0)
def vmap_of_hessian_of_logsumexp(a, x, T):
    return T.hessian(lambda v: T.special.logsumexp(v))(a)


@prog(r(B, 2), in_axes=0)
def vmap_of_hessian_via_jacfwd_jacrev(a, x, T):
    f = lambda v: x.sin(v[0]) * x.exp(v[1]) + v[0] ** 3 * v[1]  # noqa: E731
    return T.jacfwd(T.jacrev(f))(a), T.jacrev(T.jacfwd(f))(a)


@prog(r(B, 4), r(4), in_axes=(0, None))
def vmap_of_value_and_grad_has_aux(a, w, x, T):
    def f(v):
        z = x.tanh(v * w)
        return x.sum(z ** 2), z.max()
    (val, aux), g = T.value_and_grad(f, has_aux=True)(a)
    return val, aux, g


@prog(r(B, 3), in_axes=0)
def vmap_of_grad_of_grad_third_derivative(a, x, T):
    f = lambda s: x.sin(s) * s ** 2  # noqa: E731
    d3 = T.grad(T.grad(T.grad(f)))
    return T.vmap(d3)(a)


@prog(r(B, 3), r(B, 3), in_axes=(0, 0))
def vmap_of_jvp_hvp_forward_over_reverse(a, t, x, T):
    f = lambda v: x.sum(x.exp(v) * v[::-1])  # noqa: E731
    return T.jvp(T.grad(f), (a,), (t,))


@prog(r(B, 2, 3), in_axes=0)
def vmap_of_jacrev_matrix_input_output(M, x, T):
    return T.jacrev(lambda A: A @ A.T)(M)


@prog(r(B, 3), in_axes=0)
def grad_of_vmap_inside_vmap_per_item(a, x, T):
    def loss(v):
        return x.sum(T.vmap(lambda s, t: x.sin(s * t))(v, v[::-1]))
    return T.grad(loss)(a)


@prog(r(B, 3), r(3), in_axes=(0, None))
def vmap_of_vjp_with_matrix_cotangent(a, w, x, T):
    y, pull = T.vjp(lambda v: x.outer(v, w), a)
    return pull(x.ones_like(y) * 0.5)[0], y


# === custom_vjp / custom_jvp inside vmap =============================================
@prog(r(B, 5) * 10, in_axes=0)
def custom_vjp_safe_norm_inside_vmap(a, x, T):
    @T.custom_vjp
    def safe_norm(v):
        return x.sqrt(x.sum(v * v))

    def fwd(v):
        n = x.sqrt(x.sum(v * v))
        return n, (v, n)

    def bwd(res, g):
        v, n = res
        return (g * v / x.maximum(n, 1e-12),)
    safe_norm.defvjp(fwd, bwd)
    return safe_norm(a), T.grad(safe_norm)(a)


@prog(r(B, 4), in_axes=0)
def custom_jvp_log1pexp_inside_vmap(a, x, T):
    @T.custom_jvp
    def softplus(v):
        return x.logaddexp(v, 0.0)

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (v,), (t,) = primals, tangents
        return softplus(v), t * T.special.expit(v)
    return softplus(a), T.grad(lambda v: x.sum(softplus(v)))(a), T.jacfwd(softplus)(a)


@prog(r(B, 3), np.abs(r(B)) + 0.1, in_axes=(0, 0))
def custom_vjp_two_args_per_item_scale(a, s, x, T):
    @T.custom_vjp
    def f(v, c):
        return x.sum(x.sin(v) * c)

    def fwd(v, c):
        return f(v, c), (v, c)

    def bwd(res, g):
        v, c = res
        return g * x.cos(v) * c, g * x.sum(x.sin(v))
    f.defvjp(fwd, bwd)
    return f(a, s), T.grad(f, argnums=(0, 1))(a, s)


@prog(r(B, 4), in_axes=0)
def custom_vjp_gradient_clip_in_loss_grad_of_vmap(a, x, T):
    @T.custom_vjp
    def clipg(v):
        return v

    def fwd(v):
        return v, None

    def bwd(_, g):
        return (x.clip(g, -0.5, 0.5),)
    clipg.defvjp(fwd, bwd)
    return x.sum(clipg(a) ** 3), clipg(a) * a


# === statistics and probabilistic models, more ======================================
@prog(r(B, 6), r(B, 2), in_axes=(0, 0))
def student_t_regression_loglik_grad(y, th, x, T):
    def ll(th):
        mu, logs = th[0], th[1]
        nu = 4.0
        z = (y - mu) / x.exp(logs)
        return x.sum(T.special.gammaln((nu + 1) / 2) - T.special.gammaln(nu / 2)
                     - 0.5 * x.log(nu * x.pi) - logs - (nu + 1) / 2 * x.log1p(z ** 2 / nu))
    return ll(th), T.grad(ll)(th), T.hessian(ll)(th)


@prog(rng.dirichlet(np.ones(4), B), np.abs(r(4)) + 0.5, in_axes=(0, None))
def dirichlet_logpdf_and_entropy(p, alpha, x, T):
    sp = T.special
    lognorm = x.sum(sp.gammaln(alpha)) - sp.gammaln(x.sum(alpha))
    lp = x.sum((alpha - 1) * x.log(p)) - lognorm
    return lp, -x.sum(p * x.log(p)), sp.digamma(alpha).sum()


@prog(r(B, 5), r(B, 5), in_axes=(0, 0))
def von_mises_loglik_bessel_i0e(theta, mu, x, T):
    kappa = 2.0 + x.tanh(mu) ** 2
    lnorm = x.log(2 * x.pi * T.special.i0e(kappa)) + kappa
    return x.sum(kappa * x.cos(theta - mu) - lnorm)


@prog(r(B, 6, 2), in_axes=0)
def bootstrap_fixed_resample_indices(d, x, T):
    idx = np.array([[0, 1, 1, 3, 5, 2], [4, 4, 0, 2, 1, 5], [5, 3, 3, 0, 1, 2]])
    res = d[idx]                                  # (3, 6, 2)
    mu = res.mean(1)
    return mu.std(0), x.corrcoef(d.T)[0, 1]


@prog(r(B, 8), in_axes=0)
def ar2_yule_walker_solve(s, x, T):
    c = s - s.mean()
    r0, r1, r2 = (c @ c) / 8, (c[1:] @ c[:-1]) / 8, (c[2:] @ c[:-2]) / 8
    R = x.stack([x.stack([r0, r1]), x.stack([r1, r0])])
    return x.linalg.solve(R, x.stack([r1, r2]))


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def auc_pairwise_sigmoid_and_hard(pos, neg, x, T):
    d = pos[:, None] - neg[None, :]
    return T.special.expit(d * 5).mean(), (d > 0).mean(dtype=float), x.logaddexp(0.0, -d).mean()


@prog(np.abs(r(B, 5)) + 0.5, r(B, 5), in_axes=(0, 0))
def gamma_regression_log_link_deviance(y, eta, x, T):
    mu = x.exp(eta)
    dev = 2 * x.sum(-x.log(y / mu) + (y - mu) / mu)
    return dev, T.grad(lambda e: 2 * x.sum(-x.log(y / x.exp(e)) + (y - x.exp(e)) / x.exp(e)))(eta)


@prog(r(B, 4, 3), r(3), in_axes=(0, None))
def softmax_regression_hessian_via_jacfwd_of_grad(X, w, x, T):
    def nll(w):
        z = X @ w
        return T.special.logsumexp(z) - z[0]
    return T.jacfwd(T.grad(nll))(w)


# === numerics: special ops, where-guarded gradients ===================================
@prog(r(B, 6) * 3, in_axes=0)
def sinc_and_safe_division_where(a, x, T):
    safe = x.where(a == 0, 1.0, a)
    return x.sinc(a), x.where(a == 0, 1.0, x.sin(safe) / safe), x.arctan(a) / (1 + a ** 2)


@prog(r(B, 5), in_axes=0)
def logit_clip_eps_and_entropy(a, x, T):
    p = x.clip(T.special.expit(a), 1e-6, 1 - 1e-6)
    return x.log(p / (1 - p)), -(p * x.log(p) + (1 - p) * x.log1p(-p))


@prog(r(B, 4) * 5, in_axes=0)
def expm1_log1p_pairs_and_erfc(a, x, T):
    return x.expm1(a * 0.1), x.log1p(x.abs(a)), T.special.erfc(a), T.special.erfcx(x.abs(a))


@prog(np.abs(r(B, 4)) + 0.1, in_axes=0)
def gammaincc_poisson_cdf_and_xlog1py(lam, x, T):
    return T.special.gammaln(lam + 1.0), T.special.xlog1py(lam, lam), T.special.digamma(lam + 1)


# === shape and creation with batched values ===========================================
@prog(r(B), r(B, 3), in_axes=(0, 0))
def np_full_batched_fill_in_loss(s, a, x, T):
    return x.full(3, s) * a, x.full((2, 3), s).sum(0)


@prog(r(B, 3), in_axes=0)
def block_diag_from_pieces_and_zeros_like(a, x, T):
    Z = x.zeros((3, 3))
    M = x.block([[x.diag(a), Z], [Z, x.outer(a, a)]])
    return M, x.zeros_like(M) + a.sum()


@prog(r(B, 2, 3), in_axes=0)
def linspace_batched_endpoints_and_geomspace(a, x, T):
    return x.linspace(a[0], a[1], 4, axis=-1), x.linspace(0.0, a[0, 0], 3)


@prog(r(B, 4), in_axes=0)
def tri_masks_and_vander(a, x, T):
    V = x.vander(a, 3)
    return V, x.tri(4) @ a, x.triu(x.outer(a, a), 1).sum()


@prog(r(B, 3, 4), in_axes=0)
def moveaxis_swapaxes_and_einsum_transpose_roundtrip(a, x, T):
    b = x.moveaxis(a[None], 0, -1)[..., 0]
    return x.swapaxes(b, 0, 1), x.einsum("ij->ji", a), x.transpose(a[None, :, :], (2, 0, 1)).squeeze(1)


@prog(r(B, 6), in_axes=0)
def array_split_uneven_and_stack(a, x, T):
    parts = x.array_split(a, 4)
    return x.stack([p.sum() for p in parts]), x.concatenate(parts[::-1])


# === per-example training loops =======================================================
@prog(r(B, 5, 2), r(B, 5), r(2), in_axes=(0, 0, None))
def gd_loop_per_task_linear_regression(X, y, w0, x, T):
    w = w0
    loss = lambda w: x.mean((X @ w - y) ** 2)  # noqa: E731
    for _ in range(5):
        w = w - 0.1 * T.grad(loss)(w)
    return w, loss(w)


@prog(r(B, 4), {"W": r(3, 4) / 2, "b": np.zeros(3)}, in_axes=(0, None))
def adam_single_step_on_per_example_grad(xi, p, x, T):
    def loss(p):
        return x.sum(x.tanh(p["W"] @ xi + p["b"]) ** 2)
    g = T.grad(loss)(p)
    m = {k: 0.1 * v for k, v in g.items()}
    v = {k: 0.001 * v ** 2 for k, v in g.items()}
    mh = {k: m[k] / (1 - 0.9) for k in m}
    vh = {k: v[k] / (1 - 0.999) for k in v}
    return {k: p[k] - 0.01 * mh[k] / (x.sqrt(vh[k]) + 1e-8) for k in p}


@prog(r(B, 3), r(3, 3) / 2, in_axes=(0, None))
def maml_second_order_inner_step(xi, W, x, T):
    def inner(W):
        return x.sum((W @ xi - 1.0) ** 2)

    def outer(W):
        Wa = W - 0.1 * T.grad(inner)(W)
        return x.sum(x.tanh(Wa @ xi))
    return T.grad(outer)(W)


@prog(r(B, 4), r(B), in_axes=(0, 0))
def newton_logistic_one_feature_steps(xi, yi, x, T):
    w = 0.0 * yi
    xs = xi
    ys = (xs * yi > 0).astype(float)
    for _ in range(4):
        p = T.special.expit(w * xs)
        g = x.sum((p - ys) * xs) + 0.1 * w
        h = x.sum(p * (1 - p) * xs ** 2) + 0.1
        w = w - g / h
    return w


# === indexing idioms in applied code ==================================================
@prog(r(B, 6, 3), rng.integers(0, 6, (B, 4)), rng.integers(0, 6, (B, 4)), in_axes=(0, 0, 0))
def triplet_margin_gather_anchor_pos(emb, ia, ip, x, T):
    a, p = emb[ia], emb[ip]
    n = emb[(ia + 1) % 6]
    dp = x.sum((a - p) ** 2, -1)
    dn = x.sum((a - n) ** 2, -1)
    return x.maximum(dp - dn + 0.2, 0.0).mean()


@prog(r(10, 3), rng.integers(0, 10, (B, 5)), rng.random((B, 5)) > 0.3, in_axes=(None, 0, 0))
def embedding_masked_mean_pool_shared_table(E, ids, m, x, T):
    e = E[ids]
    w = m.astype(float)
    return (w[:, None] * e).sum(0) / x.maximum(w.sum(), 1.0)


@prog(r(B, 5, 5), rng.integers(0, 5, (B, 3)), in_axes=(0, 0))
def submatrix_gather_ix_and_logdet(S, k, x, T):
    A = S @ S.T + x.eye(5)
    sub = A[x.ix_(k, k)] + 0.1 * x.eye(3)
    return x.linalg.slogdet(sub)[1], sub


@prog(r(B, 4, 5), rng.integers(0, 5, (B, 4)), in_axes=(0, 0))
def ctc_like_gather_log_probs_cumsum(logits, lab, x, T):
    lp = logits - T.special.logsumexp(logits, axis=-1, keepdims=True)
    picked = x.take_along_axis(lp, lab[:, None], axis=-1)[:, 0]
    return x.cumsum(picked), lp[x.arange(4), lab]


@prog(r(B, 5), rng.integers(0, 5, B), in_axes=(0, 0))
def one_hot_via_arange_eq_and_label_smoothing(z, y, x, T):
    oh = (x.arange(5) == y).astype(z.dtype)
    t = oh * 0.9 + 0.02
    return -x.sum(t * T.special.log_softmax(z)), oh


# === float32 items ====================================================================
@prog((0.5 * r(B, 4, 3)).astype(np.float32), (0.5 * r(3, 3)).astype(np.float32), in_axes=(0, None))
def float32_attention_block_grad(h, W, x, T):
    def f(W):
        q = h @ W
        s = q @ h.T / x.sqrt(x.float32(3.0))
        p = T.special.softmax(s, axis=-1)
        return x.sum((p @ h) ** 2)
    return f(W), T.grad(f)(W)


@prog(r(B, 6).astype(np.float32), in_axes=0)
def float32_cumsum_sort_quantile(a, x, T):
    return x.cumsum(a), x.sort(a), x.quantile(a, 0.5).astype(x.float32)


@prog(spd(B, 3, 3).astype(np.float32), r(B, 3).astype(np.float32), in_axes=(0, 0))
def float32_cholesky_solve(S, b, x, T):
    L = x.linalg.cholesky(0.5 * (S + S.T))
    return T.linalg.cho_solve((L, True), b), x.linalg.slogdet(S)[1]
