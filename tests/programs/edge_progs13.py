"""Round-13 programs: Kalman filters and RTS smoothers, Gaussian processes
with jitter, HMC leapfrog with an inner gradient, RK4 with in-place state
buffers, mixtures with logsumexp and masks, masked attention, k-means with
argmin-selected centres, splines (interp, searchsorted, digitize), FFT
convolutions, eigh/svd in losses, pytrees of parameters (dataclass,
NamedTuple, dict), float32 throughout, 0-d and empty edge cases --
differentiated unchanged by tapestry (tests/test_user_programs13.py)."""
import dataclasses
from typing import NamedTuple

import numpy as np
import scipy.special as sp

import tapestry as tp
import tapestry.numpy as tnp
import tapestry.scipy.linalg as tsl

from . import Program, rng

#: name -> Program, a registry of its own (tests/test_user_programs13.py).
PROGRAMS: dict = {}


def program(args, mode="grad", argnums=None):
    """Register the decorated loss in :data:`PROGRAMS` (see programs.program)."""
    def deco(fn):
        PROGRAMS[fn.__name__] = Program(fn.__name__, fn, args, mode, argnums, module=fn.__module__)
        return fn
    return deco


def _r(seed, *shape, dtype=np.float64):
    return rng(1300 + seed).standard_normal(shape).astype(dtype)


def _u(seed, *shape, lo=0.2, hi=1.0):
    return rng(1300 + seed).uniform(lo, hi, shape)


def _spd(seed, n, dtype=np.float64):
    a = _r(seed, n, n)
    return (a @ a.T + n * np.eye(n)).astype(dtype)


# ---------------------------------------------------------------- Kalman / RTS
_YS = _r(90, 12, 2)


@program(args=lambda: (np.array([0.9, 0.2]), np.array([0.3]), np.array([0.5])))
def kalman_loglik_solve_slogdet(a, log_q, log_r):
    """Constant-velocity model, innovations likelihood with solve and slogdet."""
    F = np.array([[1.0, 1.0], [0.0, 1.0]]) * a[0] + tnp.array([[0.0, 0.0], [0.0, a[1]]])
    H = np.eye(2)
    Q = np.exp(log_q[0]) * np.eye(2)
    R = np.exp(log_r[0]) * np.eye(2)
    m = np.zeros(2)
    P = np.eye(2)
    ll = 0.0
    for y in _YS:
        m = F @ m
        P = F @ P @ F.T + Q
        S = H @ P @ H.T + R
        v = y - H @ m
        sign, logdet = np.linalg.slogdet(S)
        ll = ll - 0.5 * (logdet + v @ np.linalg.solve(S, v))
        K = np.linalg.solve(S, H @ P).T
        m = m + K @ v
        P = P - K @ S @ K.T
    return -ll


@program(args=lambda: (np.array([0.8]), np.array([-1.0]), np.array([-0.5])))
def kalman_cholesky_triangular_update(phi, log_q, log_r):
    """Square-root style: S = L Lᵀ, whitened innovation by solve_triangular."""
    F = tnp.array([[phi[0], 0.1], [0.0, phi[0]]])
    Q = np.exp(log_q) * np.eye(2)
    R = np.exp(log_r) * np.eye(2)
    m = np.zeros(2)
    P = np.eye(2)
    nll = 0.0
    for y in _YS[:8]:
        m = F @ m
        P = F @ P @ F.T + Q
        S = P + R
        L = np.linalg.cholesky(S)
        e = tsl.solve_triangular(L, y - m, lower=True)
        nll = nll + 0.5 * e @ e + np.sum(np.log(np.diag(L)))
        K = tsl.solve_triangular(L.T, tsl.solve_triangular(L, P, lower=True), lower=False).T
        m = m + K @ (y - m)
        P = (np.eye(2) - K) @ P
    return nll


def _kf_rts(F, Q, R, ys):
    n = len(ys)
    ms = np.zeros_like(np.broadcast_to(F[0], (n, 2)))
    Ps = np.zeros_like(np.broadcast_to(F, (n, 2, 2)))
    mp = np.zeros_like(ms)
    Pp = np.zeros_like(Ps)
    m, P = np.zeros(2), np.eye(2)
    for k in range(n):
        m = F @ m
        P = F @ P @ F.T + Q
        mp[k], Pp[k] = m, P
        K = P @ np.linalg.inv(P + R)
        m = m + K @ (ys[k] - m)
        P = P - K @ P
        ms[k], Ps[k] = m, P
    for k in range(n - 2, -1, -1):
        G = Ps[k] @ F.T @ np.linalg.inv(Pp[k + 1])
        ms[k] = ms[k] + G @ (ms[k + 1] - mp[k + 1])
        Ps[k] = Ps[k] + G @ (Ps[k + 1] - Pp[k + 1]) @ G.T
    return ms, Ps


@program(args=lambda: (np.array([0.95, 0.05]), np.array([0.2, 0.3])))
def rts_smoother_buffers_written_per_step(fa, qr):
    F = tnp.array([[fa[0], fa[1]], [0.0, fa[0]]])
    ms, Ps = _kf_rts(F, qr[0] * np.eye(2), qr[1] * np.eye(2), _YS[:8])
    return np.sum((ms - _YS[:8]) ** 2) + np.sum(np.trace(Ps, axis1=1, axis2=2))


@program(args=lambda: (np.array([0.7, 0.4]),))
def kalman_steady_state_riccati_iteration(qr):
    P = np.eye(2)
    F = np.array([[1.0, 0.5], [0.0, 1.0]])
    for _ in range(30):
        P = F @ P @ F.T + qr[0] * np.eye(2)
        P = P - P @ np.linalg.solve(P + qr[1] * np.eye(2), P)
    return np.linalg.det(P) + np.trace(P)


# ---------------------------------------------------------------- Gaussian processes
_XG = np.linspace(-2, 2, 9)
_YG = np.sin(2 * _XG) + 0.1 * _r(91, 9)


@program(args=lambda: (np.array([0.3, -0.2, -1.5]),))
def gp_nll_cholesky_jitter(theta):
    ell, sf, sn = np.exp(theta)
    d = _XG[:, None] - _XG[None, :]
    K = sf ** 2 * np.exp(-0.5 * d ** 2 / ell ** 2) + (sn ** 2 + 1e-6) * np.eye(len(_XG))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, _YG))
    return 0.5 * _YG @ alpha + np.sum(np.log(np.diagonal(L))) + 0.5 * len(_XG) * np.log(2 * np.pi)


@program(args=lambda: (np.array([0.3, -0.2, -1.5]),))
def gp_nll_cho_factor_cho_solve(theta):
    ell, sf, sn = np.exp(theta)
    d2 = (_XG[:, None] - _XG[None, :]) ** 2
    K = sf ** 2 * np.exp(-0.5 * d2 / ell ** 2)
    K[np.diag_indices_from(K)] += sn ** 2 + 1e-8
    c, low = tsl.cho_factor(K, lower=True)
    alpha = tsl.cho_solve((c, low), _YG)
    return 0.5 * _YG @ alpha + np.sum(np.log(np.diag(c)))


@program(args=lambda: (np.array([0.1, 0.0, -1.0]),))
def gp_predictive_mean_var_slogdet(theta):
    ell, sf, sn = np.exp(theta)
    xs = np.array([-0.5, 0.3, 1.7])
    k = lambda a, b: sf ** 2 * np.exp(-0.5 * np.subtract.outer(a, b) ** 2 / ell ** 2)
    K = k(_XG, _XG) + sn ** 2 * np.eye(len(_XG))
    Ks = k(xs, _XG)
    mu = Ks @ np.linalg.solve(K, _YG)
    var = sf ** 2 - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T))
    s, ld = np.linalg.slogdet(K)
    return np.sum(mu ** 2) + np.sum(np.log(var)) + 0.1 * ld


@program(args=lambda: (_u(3, 9, lo=0.5, hi=1.5), np.array([0.8])))
def gp_ard_inputs_differentiated(x, ell):
    d = (x[:, None] - x[None, :]) / ell
    K = np.exp(-0.5 * d ** 2) + 1e-3 * np.eye(len(x))
    return np.linalg.slogdet(K)[1] + _YG @ np.linalg.solve(K, _YG)


@program(args=lambda: (np.array([0.5, 1.2]),))
def gp_matern32_abs_distances_with_zero_diagonal(theta):
    ell, sf = np.exp(theta)
    r = np.abs(_XG[:, None] - _XG[None, :])
    s3 = np.sqrt(3.0) * r / ell
    K = sf ** 2 * (1 + s3) * np.exp(-s3) + 0.01 * np.eye(len(_XG))
    return np.linalg.slogdet(K)[1] + _YG @ np.linalg.solve(K, _YG)


# ---------------------------------------------------------------- HMC
def _logp(q):
    return -0.5 * np.sum(q ** 2 / np.array([1.0, 4.0, 0.25])) - 0.1 * np.sum(q ** 4)


@program(args=lambda: (np.array([0.5, -0.3, 0.2]), np.array([0.1, 0.4, -0.2])))
def hmc_leapfrog_inner_grad(q0, p0):
    """The loss differentiates through tp.grad of the log density."""
    g = tp.grad(_logp)
    q, p = q0, p0
    eps = 0.1
    p = p + 0.5 * eps * g(q)
    for _ in range(5):
        q = q + eps * p
        p = p + eps * g(q)
    p = p - 0.5 * eps * g(q)
    H0 = -_logp(q0) + 0.5 * p0 @ p0
    H1 = -_logp(q) + 0.5 * p @ p
    return np.minimum(0.0, H0 - H1) + np.sum(q)


@program(args=lambda: (np.array([0.5, -0.3, 0.2]), np.array([0.1, 0.4, -0.2])))
def hmc_leapfrog_value_and_grad_inplace(q0, p0):
    vg = tp.value_and_grad(_logp)
    q = q0.copy()
    p = p0.copy()
    lp, gq = vg(q)
    for _ in range(4):
        p += 0.05 * gq
        q += 0.1 * p
        lp, gq = vg(q)
        p += 0.05 * gq
    return lp + 0.5 * np.sum(p ** 2)


@program(args=lambda: (np.array([0.5, -0.3, 0.2]),))
def nuts_style_uturn_criterion(p0):
    q = np.zeros(3)
    p = p0
    traj = []
    for _ in range(6):
        p = p + 0.1 * tp.grad(_logp)(q)
        q = q + 0.2 * p
        traj.append(q)
    traj = np.stack(traj)
    dq = traj[-1] - traj[0]
    uturn = (dq @ p) < 0
    return np.where(uturn, 0.0, np.sum(traj ** 2)) + dq @ p0


# ---------------------------------------------------------------- ODEs
@program(args=lambda: (np.array([1.0, 0.0]), np.array([1.5, 0.3])))
def rk4_state_buffer_slice_assign(y0, theta):
    def f(y, out):
        out[0] = y[1]
        out[1] = -theta[0] * np.sin(y[0]) - theta[1] * y[1]
        return out
    y = np.empty_like(y0)
    y[:] = y0
    k = np.zeros_like(np.stack([y0] * 4))
    h = 0.1
    for _ in range(15):
        f(y, k[0])
        f(y + 0.5 * h * k[0], k[1])
        f(y + 0.5 * h * k[1], k[2])
        f(y + h * k[2], k[3])
        y[:] = y + h / 6 * (k[0] + 2 * k[1] + 2 * k[2] + k[3])
    return y[0] ** 2 + y[1]


@program(args=lambda: (np.array([1.0, 0.5]), np.array([0.7])))
def rk4_trajectory_preallocated_and_trapezoid(y0, k):
    T = 20
    ys = np.zeros_like(np.broadcast_to(y0, (T + 1, 2)))
    ys[0] = y0
    h = 0.05
    A = tnp.array([[0.0, 1.0], [-k[0], -0.1]])
    for t in range(T):
        y = ys[t]
        k1 = A @ y
        k2 = A @ (y + h / 2 * k1)
        k3 = A @ (y + h / 2 * k2)
        k4 = A @ (y + h * k3)
        ys[t + 1] = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.trapezoid(ys[:, 0] ** 2, dx=h)


@program(args=lambda: (np.array([1.0, 0.2]), np.array([0.5])))
def euler_adjoint_manual_custom_vjp(y0, lam):
    """Discrete adjoint of explicit Euler written as a custom_vjp."""
    @tp.custom_vjp
    def solve(y0, lam):
        y = y0.copy()
        for _ in range(10):
            y = y + 0.1 * (-lam * y)
        return y

    def fwd(y0, lam):
        ys = [y0]
        y = y0
        for _ in range(10):
            y = y + 0.1 * (-lam * y)
            ys.append(y)
        return y, (ys, lam)

    def bwd(res, ybar):
        ys, lam = res
        a = ybar
        lbar = np.zeros(1)
        for y in reversed(ys[:-1]):
            lbar = lbar + np.sum(a * (-0.1 * y))
            a = a * (1 - 0.1 * lam)
        return a, lbar
    solve.defvjp(fwd, bwd)
    return np.sum(solve(y0, lam) ** 2)


@program(args=lambda: (np.array([2.0, 0.5]),))
def rk4_with_checkpointed_steps(y0):
    @tp.checkpoint
    def step(y):
        f = lambda y: np.array([y[1], -np.sin(y[0])]) if False else np.stack([y[1], -np.sin(y[0])])
        h = 0.1
        k1 = f(y); k2 = f(y + h / 2 * k1); k3 = f(y + h / 2 * k2); k4 = f(y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    y = y0
    for _ in range(10):
        y = step(y)
    return np.sum(y ** 2)


@program(args=lambda: (np.array([0.1, 0.5, 0.9]),))
def heat_equation_explicit_inplace_laplacian(u0):
    u = np.zeros(7)
    u[2:5] = u0
    for _ in range(20):
        lap = np.zeros_like(u)
        lap[1:-1] = u[:-2] - 2 * u[1:-1] + u[2:]
        u += 0.2 * lap
        u[0] = u[-1] = 0.0
    return np.sum(u ** 3)


# ---------------------------------------------------------------- mixtures
_XM = np.concatenate([_r(92, 15) - 2, _r(93, 15) + 2])


@program(args=lambda: (np.array([-1.5, 1.8]), np.array([0.0, 0.1]), np.array([0.2, -0.2])))
def gmm_1d_logsumexp_tnp(mu, log_s, logits):
    logw = logits - tnp.logsumexp(logits)
    lp = logw - log_s - 0.5 * ((_XM[:, None] - mu) / np.exp(log_s)) ** 2 - 0.5 * np.log(2 * np.pi)
    return -np.sum(tnp.logsumexp(lp, axis=1))


@program(args=lambda: (np.array([-1.5, 1.8]), np.array([0.0, 0.1])))
def gmm_manual_logsumexp_where_mask(mu, log_s):
    mask = np.array([True, False] * 15)
    lp = -log_s - 0.5 * ((_XM[:, None] - mu) / np.exp(log_s)) ** 2
    mx = np.max(lp, axis=1, keepdims=True)
    lse = mx[:, 0] + np.log(np.sum(np.exp(lp - mx), axis=1))
    return -np.sum(np.where(mask, lse, 0.0)) - 0.5 * np.sum(np.where(~mask, lp[:, 0], 0.0))


@program(args=lambda: (np.array([-1.5, 1.8]), np.array([0.3, 0.7])))
def mixture_log_with_missing_values_where_nan(mu, w):
    x = _XM.copy()
    x[::7] = np.nan
    ok = ~np.isnan(x)
    xs = np.where(ok, x, 0.0)
    dens = w / np.sum(w) * np.exp(-0.5 * (xs[:, None] - mu) ** 2)
    return -np.sum(np.where(ok, np.log(np.sum(dens, axis=1)), 0.0))


@program(args=lambda: (np.array([-1.5, 1.8]), np.array([0.2, -0.1])))
def mixture_logaddexp_two_components(mu, logits):
    a = logits[0] - 0.5 * (_XM - mu[0]) ** 2
    b = logits[1] - 0.5 * (_XM - mu[1]) ** 2
    return -np.sum(np.logaddexp(a, b) - np.logaddexp(logits[0], logits[1]))


@program(args=lambda: (np.array([-30.0, 0.0, 2.0]),))
def logsumexp_with_minus_inf_masked_entries(z):
    mask = np.array([[True, True, False], [False, False, True], [True, False, True]])
    s = np.where(mask, z, -np.inf)
    return np.sum(tnp.logsumexp(s, axis=1))


# ---------------------------------------------------------------- attention
_Q = _r(20, 5, 4)


def _softmax(s, axis=-1):
    s = s - np.max(s, axis=axis, keepdims=True)
    e = np.exp(s)
    return e / np.sum(e, axis=axis, keepdims=True)


@program(args=lambda: (_r(21, 4, 4) * 0.5, _r(22, 4, 4) * 0.5))
def causal_attention_minus_inf_mask(Wq, Wk):
    q, k = _Q @ Wq, _Q @ Wk
    s = q @ k.T / 2.0
    mask = np.triu(np.ones((5, 5), bool), 1)
    s = np.where(mask, -np.inf, s)
    a = _softmax(s)
    return np.sum(a @ _Q * np.cos(np.arange(20)).reshape(5, 4))


@program(args=lambda: (_r(21, 4, 4) * 0.5,))
def attention_masked_fill_large_negative_inplace(Wq):
    s = (_Q @ Wq) @ _Q.T
    s[np.tril_indices(5, -1)] = -1e9
    a = _softmax(s)
    return np.sum(a * np.arange(25.0).reshape(5, 5))


@program(args=lambda: (_r(23, 2, 5, 4) * 0.5,))
def multihead_attention_padding_mask_einsum(x):
    pad = np.array([[False] * 5, [False, False, False, True, True]])
    s = np.einsum("bqd,bkd->bqk", x, x) / 2
    s = np.where(pad[:, None, :], -np.inf, s)
    a = tnp.softmax(s, axis=-1)
    out = np.einsum("bqk,bkd->bqd", a, x)
    return np.sum(np.where(pad[..., None], 0.0, out) ** 2)


@program(args=lambda: (_r(24, 6, 3),))
def attention_fully_masked_row_nan_to_num(x):
    s = x @ x.T
    mask = np.ones((6, 6), bool)
    mask[0] = False                          # a query with no keys
    s = np.where(mask, s, -np.inf)
    mx = np.max(s, axis=1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.exp(s - mx)
    a = e / np.maximum(np.sum(e, axis=1, keepdims=True), 1e-30)
    return np.sum(a @ x)


# ---------------------------------------------------------------- k-means / assignments
_XK = np.concatenate([_r(30, 10, 2) + 3, _r(31, 10, 2) - 3, _r(32, 10, 2)])


@program(args=lambda: (np.array([[2.5, 2.5], [-2.5, -3.0], [0.2, 0.1]]),))
def kmeans_argmin_selected_centres(C):
    d = np.sum((_XK[:, None, :] - C[None]) ** 2, axis=-1)
    idx = np.argmin(d, axis=1)
    return np.sum((_XK - C[idx]) ** 2)


@program(args=lambda: (np.array([[2.5, 2.5], [-2.5, -3.0], [0.2, 0.1]]),))
def kmeans_lloyd_updates_then_loss(C):
    for _ in range(3):
        d = np.linalg.norm(_XK[:, None, :] - C[None], axis=-1)
        idx = d.argmin(axis=1)
        onehot = np.eye(3)[idx]
        C = (onehot.T @ _XK + C) / (onehot.sum(0)[:, None] + 1)
    return np.sum(np.min(np.sum((_XK[:, None] - C) ** 2, -1), axis=1))


@program(args=lambda: (np.array([[2.5, 2.5], [-2.5, -3.0], [0.2, 0.1]]),))
def kmeans_take_along_axis_of_distances(C):
    d = np.sum((_XK[:, None, :] - C[None]) ** 2, axis=-1)
    idx = np.argmin(d, axis=1)[:, None]
    return np.sum(np.take_along_axis(d, idx, axis=1))


@program(args=lambda: (np.array([[2.5, 2.5], [-2.5, -3.0], [0.2, 0.1]]),))
def soft_kmeans_temperature_softmin(C):
    d = np.sum((_XK[:, None, :] - C[None]) ** 2, axis=-1)
    w = tnp.softmax(-d / 0.5, axis=1)
    return np.sum(w * d)


@program(args=lambda: (np.array([[2.5, 2.5], [-2.5, -3.0], [0.2, 0.1]]),))
def kmeans_add_at_scatter_centres(C):
    d = np.sum((_XK[:, None, :] - C[None]) ** 2, axis=-1)
    idx = np.argmin(d, axis=1)
    sums = np.zeros_like(C)
    np.add.at(sums, idx, _XK - C[idx])
    return np.sum(sums ** 2)


@program(args=lambda: (_u(33, 8, lo=0.0, hi=4.0),))
def nearest_neighbour_distance_sorted_unique(x):
    s = np.sort(x)
    gaps = np.diff(s)
    return np.sum(np.sqrt(gaps + 1e-3)) + np.max(s) - np.min(s)


# ---------------------------------------------------------------- splines / interpolation
_KX = np.linspace(0, 1, 8)


@program(args=lambda: (np.sin(3 * _KX), _u(34, 6, lo=0.05, hi=0.95)))
def interp_values_and_query_points(fp, xq):
    return np.sum(np.interp(xq, _KX, fp) ** 2)


@program(args=lambda: (np.sin(3 * _KX),))
def interp_with_left_right_outside(fp):
    xq = np.array([-0.5, 0.1, 0.55, 1.3])
    return np.sum(np.interp(xq, _KX, fp, left=0.0, right=fp[-1] * 2) * np.arange(1, 5))


@program(args=lambda: (np.sin(3 * _KX), _u(35, 6, lo=0.02, hi=0.98)))
def piecewise_linear_searchsorted_manual(fp, xq):
    i = np.clip(np.searchsorted(_KX, xq) - 1, 0, len(_KX) - 2)
    t = (xq - _KX[i]) / (_KX[i + 1] - _KX[i])
    return np.sum((1 - t) * fp[i] + t * fp[i + 1])


@program(args=lambda: (np.cos(2 * _KX), _u(36, 7, lo=0.02, hi=0.98)))
def digitize_bins_histogram_weights(w, xq):
    b = np.digitize(xq, _KX) - 1
    return np.sum(w[b] * xq ** 2) + np.sum(np.bincount(b, weights=xq, minlength=8) * w)


@program(args=lambda: (np.sin(4 * _KX), _u(37, 9, lo=0.03, hi=0.97)))
def natural_cubic_spline_tridiagonal_solve(fp, xq):
    n = len(_KX)
    h = np.diff(_KX)
    A = np.zeros((n, n))
    A[0, 0] = A[-1, -1] = 1.0
    for i in range(1, n - 1):
        A[i, i - 1], A[i, i], A[i, i + 1] = h[i - 1], 2 * (h[i - 1] + h[i]), h[i]
    rhs = np.zeros_like(fp)
    rhs[1:-1] = 6 * (np.diff(fp[1:]) / h[1:] - np.diff(fp[:-1]) / h[:-1])
    M = np.linalg.solve(A, rhs)
    i = np.clip(np.searchsorted(_KX, xq, side="right") - 1, 0, n - 2)
    t0, t1 = xq - _KX[i], _KX[i + 1] - xq
    s = (M[i] * t1 ** 3 + M[i + 1] * t0 ** 3) / (6 * h[i]) \
        + (fp[i] / h[i] - M[i] * h[i] / 6) * t1 + (fp[i + 1] / h[i] - M[i + 1] * h[i] / 6) * t0
    return np.sum(s ** 2)


@program(args=lambda: (np.array([0.0, 0.3, 0.45, 0.8, 1.0]), np.array([1.0, 2.0, 0.5, 1.5, 0.3])))
def interp_with_differentiated_knots(xp, fp):
    xq = np.linspace(0.06, 0.94, 7)          # off the knots (a kink there)
    return np.sum(np.interp(xq, xp, fp) ** 2)


@program(args=lambda: (np.array([0.2, 0.5, 0.9, 1.4]),))
def interp_periodic_angles(fp):
    xq = np.array([-0.3, 0.7, 2.5, 6.0])
    return np.sum(np.interp(xq, [0.0, 1.5, 3.0, 4.5], fp, period=6.0))


# ---------------------------------------------------------------- FFT
@program(args=lambda: (_r(40, 16), _r(41, 5)))
def fft_circular_convolution_rfft(x, k):
    kp = np.pad(k, (0, 11))
    y = np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(kp), n=16)
    return np.sum(y ** 2)


@program(args=lambda: (_r(42, 12), _r(43, 4)))
def fft_linear_convolution_zero_padded_vs_convolve(x, k):
    n = 12 + 4 - 1
    y = np.fft.irfft(np.fft.rfft(x, n) * np.fft.rfft(k, n), n)
    return np.sum(y * np.cos(np.arange(n))) + np.sum(np.convolve(x, k) * np.sin(np.arange(n)))


@program(args=lambda: (_r(44, 8, 8),))
def fft2_power_spectrum_fftshift_radial(img):
    P = np.abs(np.fft.fftshift(np.fft.fft2(img))) ** 2
    yy, xx = np.indices((8, 8)) - 4
    r = np.sqrt(xx ** 2 + yy ** 2)
    return np.sum(P * np.exp(-r)) / 64


@program(args=lambda: (_r(45, 32),))
def spectral_derivative_ifft_real_part(u):
    k = np.fft.fftfreq(32, d=1 / 32) * 2 * np.pi / 32
    du = np.real(np.fft.ifft(1j * k * np.fft.fft(u)))
    return np.sum(du ** 2) + np.sum(u * du)


@program(args=lambda: (_r(46, 10),))
def fft_autocorrelation_wiener_khinchin(x):
    x = x - x.mean()
    f = np.fft.rfft(x, 20)
    ac = np.fft.irfft(f * np.conj(f), 20)[:10]
    return np.sum((ac / ac[0]) ** 2)


@program(args=lambda: (_r(47, 4, 8),))
def fft_batched_axis_norm_ortho(x):
    F = np.fft.fft(x, axis=1, norm="ortho")
    return np.sum(np.abs(F[:, 1:4]) ** 2) + np.sum(np.angle(F[:, 1]) ** 2)


# ---------------------------------------------------------------- eigh / svd
@program(args=lambda: (_r(50, 5, 5),))
def eigh_of_symmetrised_top_eigenvalue_and_vector(a):
    S = (a + a.T) / 2
    w, V = np.linalg.eigh(S)
    v = V[:, -1] * np.sign(V[0, -1])
    return w[-1] + np.sum(v * np.arange(5.0))


@program(args=lambda: (_r(51, 6, 4),))
def svd_nuclear_norm_and_top_singular_vector(a):
    U, s, Vt = np.linalg.svd(a, full_matrices=False)
    u = U[:, 0] * np.sign(U[0, 0])
    return np.sum(s) + np.sum(u ** 3)


@program(args=lambda: (_r(52, 5, 3),))
def pca_explained_variance_ratio_eigh_cov(x):
    xc = x - x.mean(0)
    C = np.cov(xc, rowvar=False)
    w = np.linalg.eigvalsh(C)[::-1]
    return w[0] / np.sum(w)


@program(args=lambda: (_r(53, 4, 4),))
def matrix_sqrt_via_eigh_spd(a):
    S = a @ a.T + np.eye(4)
    w, V = np.linalg.eigh(S)
    R = (V * np.sqrt(w)) @ V.T
    return np.sum(R * np.arange(16.0).reshape(4, 4))


@program(args=lambda: (_r(54, 4, 4),))
def spectral_norm_via_svd_and_norm2(a):
    return np.linalg.svd(a, compute_uv=False)[0] + np.linalg.norm(a, 2) + np.linalg.norm(a, "nuc")


@program(args=lambda: (_r(55, 3, 3),))
def procrustes_rotation_svd(a):
    B = _r(56, 3, 3)
    U, s, Vt = np.linalg.svd(a.T @ B)
    R = U @ Vt
    return np.sum((a @ R - B) ** 2)


@program(args=lambda: (_r(57, 5, 5),))
def eigh_uplo_upper_only_reads_upper(a):
    w = np.linalg.eigvalsh(a, UPLO="U")
    return np.sum(w ** 2 * np.arange(1, 6))


@program(args=lambda: (_r(58, 5, 5),))
def log_det_via_eigvalsh_of_spd(a):
    S = a @ a.T + 0.5 * np.eye(5)
    return np.sum(np.log(np.linalg.eigvalsh(S))) - np.linalg.slogdet(S)[1] * 0.5


# ---------------------------------------------------------------- pytrees
@dataclasses.dataclass
class MLP:
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    act: str = "tanh"


class Norm(NamedTuple):
    scale: np.ndarray
    shift: np.ndarray


_XP = _r(60, 7, 3)
_YP = _r(61, 7)


@program(args=lambda: (MLP(_r(62, 3, 4), np.zeros(4), _r(63, 4)),))
def dataclass_mlp_params(p):
    h = getattr(np, p.act)(_XP @ p.W1 + p.b1)
    return np.mean((h @ p.W2 - _YP) ** 2)


@program(args=lambda: (Norm(np.ones(3), np.zeros(3)), _r(64, 3)))
def namedtuple_layernorm_params(n, w):
    mu = _XP.mean(-1, keepdims=True)
    sd = _XP.std(-1, keepdims=True)
    h = (_XP - mu) / (sd + 1e-5) * n.scale + n.shift
    return np.sum((h @ w - _YP) ** 2)


@program(args=lambda: ({"enc": {"W": _r(65, 3, 2), "b": np.zeros(2)},
                        "dec": [_r(66, 2, 3), np.zeros(3)], "log_s": np.array(0.1)},))
def nested_dict_list_autoencoder(p):
    z = np.tanh(_XP @ p["enc"]["W"] + p["enc"]["b"])
    xh = z @ p["dec"][0] + p["dec"][1]
    return np.sum((xh - _XP) ** 2) / np.exp(p["log_s"]) + p["log_s"] * _XP.size


@program(args=lambda: ({"a": np.array(0.5), "b": None, "c": (np.array([1.0, 2.0]),)},))
def dict_with_none_and_zero_d_leaves(p):
    return p["a"] ** 3 + np.sum(p["c"][0] ** 2 * p["a"])


@program(args=lambda: ([_r(67, 3, 3) * 0.3 for _ in range(3)],))
def list_of_layers_residual(Ws):
    h = _XP
    for W in Ws:
        h = h + np.tanh(h @ W)
    return np.sum(h ** 2)


# ---------------------------------------------------------------- float32
@program(args=lambda: (_r(70, 4, 3, dtype=np.float32), _r(71, 3, dtype=np.float32)))
def float32_logistic_regression(w, b):
    x = _r(72, 10, 4, dtype=np.float32)
    y = (np.arange(10) % 2).astype(np.float32)
    z = (x @ w) @ b
    return np.mean(np.logaddexp(np.float32(0), z) - y * z)


@program(args=lambda: (_r(73, 4, 4, dtype=np.float32),))
def float32_cholesky_solve_slogdet(a):
    S = a @ a.T + np.float32(4) * np.eye(4, dtype=np.float32)
    L = np.linalg.cholesky(S)
    y = np.linalg.solve(L, np.ones(4, np.float32))
    return np.sum(y ** 2) + np.linalg.slogdet(S)[1]


@program(args=lambda: (_r(74, 16, dtype=np.float32),))
def float32_fft_power(x):
    return np.sum(np.abs(np.fft.rfft(x)) ** 2) / 16


@program(args=lambda: (_r(75, 5, 5, dtype=np.float32),))
def float32_eigh_softmax_mix(a):
    S = (a + a.T) / np.float32(2)
    w = np.linalg.eigvalsh(S)
    return np.sum(tnp.softmax(w) * w)


@program(args=lambda: (np.linspace(0, 1, 6).astype(np.float32), np.float32(0.37) + np.zeros(3, np.float32)))
def float32_interp_knots_values(fp, xq):
    return np.sum(np.interp(xq * np.arange(1, 4, dtype=np.float32) / 3, np.linspace(0, 1, 6), fp) ** 2)


@program(args=lambda: (_r(76, 3, dtype=np.float32), _r(77, 3, dtype=np.float32)))
def float32_rk4_inplace(y0, th):
    y = y0.copy()
    h = np.float32(0.1)
    for _ in range(8):
        k1 = -th * y
        k2 = -th * (y + h / 2 * k1)
        k3 = -th * (y + h / 2 * k2)
        k4 = -th * (y + h * k3)
        y += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.sum(y ** 2)


@program(args=lambda: (_r(78, 6, 4, dtype=np.float32),))
def float32_attention_with_float64_mask_constant(x):
    mask = np.triu(np.full((6, 6), -1e9), 1)       # float64 constant
    s = x @ x.T + mask
    return np.sum(tnp.softmax(s, axis=-1) @ x)


# ---------------------------------------------------------------- 0-d / empty
@program(args=lambda: (np.array(0.7),))
def zero_d_array_through_linalg_and_reductions(x):
    A = np.array([[2.0, 0.0], [0.0, 3.0]]) * x
    return np.linalg.det(A) + np.sum(x) + np.max(x) + np.mean(x ** 2)


@program(args=lambda: (np.array(0.7), _r(79, 4)))
def empty_slices_in_sums_and_concat(a, v):
    e = v[4:]
    return np.sum(e) * a + np.sum(np.concatenate([e, v[:2]])) + a * np.prod(e)


@program(args=lambda: (_r(80, 0, 3), _r(81, 3)))
def empty_batch_matmul_mean_of_nothing_guarded(x, w):
    y = x @ w
    return np.sum(y) + np.sum(w ** 2) + (np.mean(y) if y.size else 0.0)


@program(args=lambda: (np.float64(1.3),))
def numpy_scalar_argument(x):
    return np.sin(x) * np.exp(x) + tnp.linalg.norm([x, 2.0])


@program(args=lambda: (np.array(0.3), np.array([])))
def empty_vector_logsumexp_and_interp(a, e):
    return a * 2 + np.sum(np.interp(e, [0.0, 1.0], [0.0, 1.0])) + np.sum(e ** 2)


@program(args=lambda: (_r(82, 3),))
def empty_index_list_gather(x):
    idx = np.array([], dtype=int)
    return np.sum(x[idx]) + np.sum(x[[0, 0, 2]] ** 2)


# ---------------------------------------------------------------- misc scientific
@program(args=lambda: (np.array([0.5, 1.5]),))
def poisson_regression_log_link_gammaln(beta):
    x = np.linspace(0, 2, 10)
    y = np.array([1, 0, 2, 3, 2, 5, 4, 7, 9, 8])
    eta = beta[0] + beta[1] * x
    return -np.sum(y * eta - np.exp(eta) - sp.gammaln(y + 1))


@program(args=lambda: (np.array([0.4, -0.2, 0.1]),))
def ar_process_lfilter_style_loop_buffer(a):
    x = _r(83, 20)
    y = np.zeros(20)
    for t in range(20):
        y[t] = x[t]
        for j in range(3):
            if t - j - 1 >= 0:
                y[t] -= a[j] * y[t - j - 1]
    return np.sum(y ** 2)


@program(args=lambda: (np.array([1.0, 0.5, 0.2]),))
def survival_weibull_with_censoring_mask(theta):
    t = _u(84, 12, lo=0.1, hi=3.0)
    event = np.arange(12) % 3 != 0
    k, lam = np.exp(theta[0]), np.exp(theta[1])
    logh = np.log(k / lam) + (k - 1) * np.log(t / lam)
    H = (t / lam) ** k
    return -np.sum(np.where(event, logh, 0.0) - H) + theta[2] ** 2


@program(args=lambda: (_r(85, 6, 6) * 0.1,))
def matrix_exponential_expm_vs_series(A):
    E = tsl.expm(A)
    S = np.eye(6)
    T = np.eye(6)
    for k in range(1, 12):
        T = T @ A / k
        S = S + T
    return np.sum(E * S)


@program(args=lambda: (np.array([0.3, 0.5, 0.2]),))
def markov_chain_stationary_eig(p):
    P = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    P = P * 0.9 + 0.1 * p
    P = P / P.sum(1, keepdims=True)
    A = np.vstack([P.T - np.eye(3), np.ones((1, 3))])
    pi = np.linalg.lstsq(A, np.array([0, 0, 0, 1.0]), rcond=None)[0]
    return np.sum(pi * np.array([1.0, 2.0, 3.0]))


@program(args=lambda: (_r(86, 8),))
def huber_loss_where_abs(r):
    d = 0.5
    a = np.abs(r)
    return np.sum(np.where(a <= d, 0.5 * r ** 2, d * (a - 0.5 * d)))


@program(args=lambda: (_u(87, 10, lo=0.05, hi=0.95),))
def quantile_pinball_loss_and_median(q):
    y = _r(88, 10)
    tau = 0.7
    e = y - q
    return np.sum(np.maximum(tau * e, (tau - 1) * e)) + np.median(q) + np.percentile(q, 30)


@program(args=lambda: (_r(89, 5),))
def cumsum_cumprod_survival_curve(h):
    haz = 1 / (1 + np.exp(-h))
    S = np.cumprod(1 - haz)
    return np.sum(S) + np.sum(np.cumsum(haz) ** 2)


# ---------------------------------------------------------------- batched linalg, NumPy 2 API
_AB = np.stack([_spd(100 + i, 3) for i in range(4)])


@program(args=lambda: (_AB.copy(), _r(101, 4, 3)))
def batched_solve_stack_of_vectors_b_3d(A, b):
    x = np.linalg.solve(A, b[..., None])[..., 0]
    return np.sum(x ** 2) + np.sum(np.linalg.slogdet(A)[1])


@program(args=lambda: (_AB.copy(),))
def batched_cholesky_upper_keyword(A):
    U = np.linalg.cholesky(A, upper=True)
    return np.sum(U * np.arange(9.0).reshape(3, 3)) + np.sum(np.log(np.diagonal(U, axis1=-2, axis2=-1)))


@program(args=lambda: (_r(102, 3, 3) * 0.5,))
def matrix_power_and_multi_dot(A):
    M = np.linalg.matrix_power(A, 3) + np.linalg.matrix_power(A + 2 * np.eye(3), -1)
    return np.sum(np.linalg.multi_dot([A, M, A.T, np.ones((3, 2))]))


@program(args=lambda: (_r(103, 4, 5), _r(104, 5)))
def linalg_vector_norm_matrix_norm_vecdot(A, v):
    return (np.sum(np.linalg.vector_norm(A, axis=1, ord=3)) + np.linalg.matrix_norm(A, ord="fro")
            + np.sum(np.linalg.vecdot(A, v)) + np.linalg.matrix_norm(A, ord=np.inf))


@program(args=lambda: (_r(105, 3), _r(106, 3)))
def linalg_outer_cross_matrix_transpose(a, b):
    O = np.linalg.outer(a, b)
    return np.sum(np.linalg.matrix_transpose(O) * O) + np.sum(np.linalg.cross(a, b) ** 2) \
        + np.linalg.trace(O, offset=1)


@program(args=lambda: (_spd(107, 4),))
def det_negative_sign_slogdet(A):
    B = A.copy()
    B[[0, 1]] = B[[1, 0]]                     # a row swap: determinant negative
    s, ld = np.linalg.slogdet(B)
    return s * np.exp(ld) + np.linalg.det(B) + ld


@program(args=lambda: (_r(108, 2, 3, 2, 3) * 0.3 + np.eye(6).reshape(2, 3, 2, 3), _r(109, 2, 3)))
def tensorsolve_and_tensorinv(A, b):
    x = np.linalg.tensorsolve(A, b)
    Ai = np.linalg.tensorinv(A, ind=2)
    return np.sum(x ** 2) + np.sum(Ai * 0.1)


@program(args=lambda: (np.stack([_r(110, 4, 4), _r(111, 4, 4)]),))
def batched_eigh_stacked_symmetric(a):
    S = a + np.swapaxes(a, -1, -2)
    w, V = np.linalg.eigh(S)
    return np.sum(w[:, -1]) + np.sum(np.abs(V[:, :, 0]) ** 3)


@program(args=lambda: (_r(112, 3, 3), _r(113, 3, 3)))
def hermitian_eigh_complex_from_two_reals(re, im):
    H = (re + 1j * im)
    H = H + H.conj().T
    w, V = np.linalg.eigh(H)
    return np.sum(w ** 2) + np.sum(np.abs(V[:, -1] * np.exp(-1j * np.angle(V[0, -1]))) ** 2 * np.arange(3))


@program(args=lambda: (_r(114, 5, 3),))
def qr_r_diagonal_logabs(A):
    Q, R = np.linalg.qr(A)
    return np.sum(np.log(np.abs(np.diag(R)))) + np.sum(Q[:, 0] * np.sign(R[0, 0]))


# ---------------------------------------------------------------- fft variants
@program(args=lambda: (_r(120, 6, 8),))
def rfftn_with_s_and_axes_norm_forward(x):
    F = np.fft.rfftn(x, s=(8, 10), axes=(0, 1), norm="forward")
    return np.sum(np.abs(F) ** 2) * 100


@program(args=lambda: (_r(121, 9),))
def hfft_ihfft_roundtrip_weights(x):
    h = np.fft.ihfft(x)
    y = np.fft.hfft(h * np.exp(-0.1 * np.arange(len(h))), n=9)
    return np.sum(y * np.cos(np.arange(9)))


@program(args=lambda: (_r(122, 5, 6),))
def fftn_ifftshift_gaussian_filter(img):
    ky = np.fft.fftfreq(5)[:, None]
    kx = np.fft.fftfreq(6)[None, :]
    G = np.exp(-20 * (kx ** 2 + ky ** 2))
    out = np.fft.ifftn(np.fft.fftn(img) * G).real
    return np.sum(np.fft.ifftshift(out) * np.arange(30).reshape(5, 6))


# ---------------------------------------------------------------- searchsorted / digitize variants
@program(args=lambda: (np.cos(_KX), _u(123, 6, lo=0.02, hi=0.98)))
def searchsorted_with_sorter_unsorted_knots(fp, xq):
    perm = np.array([3, 0, 7, 1, 5, 2, 6, 4])
    kx = _KX[perm]
    order = np.argsort(kx)
    i = np.searchsorted(kx, xq, sorter=order)
    j = order[np.clip(i, 1, 7) - 1]
    return np.sum(fp[perm][j] * xq)


@program(args=lambda: (np.cos(_KX[:7]), _u(124, 9, lo=0.0, hi=1.0)))
def digitize_right_true_decreasing_bins(w, xq):
    bins = _KX[::-1]
    b = np.digitize(xq, bins, right=True)
    return np.sum(w[np.clip(b - 1, 0, 6)] * np.sqrt(xq))


@program(args=lambda: (_u(125, 20, lo=0.0, hi=1.0), _u(126, 20)))
def histogram_weights_density_edges(x, w):
    h, e = np.histogram(x, bins=5, range=(0, 1), weights=w, density=True)
    return np.sum(h * np.arange(5)) + np.sum(np.histogram(x, bins=4, weights=w ** 2)[0])


# ---------------------------------------------------------------- transforms inside programs
@program(args=lambda: (_r(130, 3), ))
def per_example_grad_norms_vmap_inside(w):
    X = _XP
    def loss1(w, x, y):
        return (x @ w - y) ** 2
    g = tp.vmap(tp.grad(loss1), in_axes=(None, 0, 0))(w, X, _YP)
    return np.sum(np.sqrt(np.sum(g ** 2, axis=1) + 1e-6))


@program(args=lambda: (_r(131, 3),))
def jit_inside_loss_called_in_loop(w):
    @tp.jit
    def step(w, x):
        return w - 0.1 * np.tanh(x @ w) * x
    for x in _XP[:4]:
        w = step(w, x)
    return np.sum(w ** 2)


@program(args=lambda: (_r(132, 4),), mode="hessian")
def hessian_mode_gp_like_quadratic_logdet(x):
    K = np.exp(-0.5 * np.subtract.outer(x, x) ** 2) + 0.5 * np.eye(4)
    return np.linalg.slogdet(K)[1] + x @ np.linalg.solve(K, x)


@program(args=lambda: (_r(133, 3),), mode="hessian")
def hessian_mode_logsumexp_softplus(x):
    return tnp.logsumexp(np.stack([x, 2 * x, -x]), axis=0).sum() + np.sum(np.logaddexp(0, x) ** 2)


@program(args=lambda: (_r(134, 3),), mode="hessian")
def hessian_mode_eigvalsh_of_outer(x):
    S = np.outer(x, x) + np.diag(np.arange(1.0, 4.0))
    return np.sum(np.linalg.eigvalsh(S) ** 3)


@program(args=lambda: (_r(135, 4),))
def jvp_inside_loss_directional_derivative(x):
    v = np.ones(4)
    _, t = tp.jvp(lambda z: np.sum(np.sin(z) * z ** 2), (x,), (v,))
    return t ** 2


@program(args=lambda: (_r(136, 3),))
def custom_vjp_pytree_dict_arg_in_loss(w):
    @tp.custom_vjp
    def f(p):
        return np.sum(p["a"] * np.exp(p["b"]))

    def fwd(p):
        e = np.exp(p["b"])
        return np.sum(p["a"] * e), (p["a"], e)

    def bwd(res, g):
        a, e = res
        return ({"a": g * e, "b": g * a * e},)
    f.defvjp(fwd, bwd)
    return f({"a": w, "b": 0.5 * w}) + np.sum(w ** 2)


@program(args=lambda: (_r(137, 6),))
def checkpoint_with_kwargs_and_tuple_out(x):
    def block(x, scale=1.0):
        h = np.tanh(x) * scale
        return h, np.sum(h ** 2)
    blk = tp.checkpoint(block)
    h, s = blk(x, scale=2.0)
    h2, s2 = blk(h[::-1], scale=0.5)
    return s + s2 + np.sum(h2)


# ---------------------------------------------------------------- views and in-place
@program(args=lambda: (_r(140, 6),))
def strided_view_inplace_update(x):
    y = x * 1.0
    y[::2] += y[1::2] ** 2
    v = y[1:5]
    v *= 2.0
    return np.sum(y ** 2)


@program(args=lambda: (_r(141, 3, 4),))
def transpose_view_row_assignment(x):
    y = x.copy()
    y.T[0] = np.sin(y[:, 1])
    y[:, -1] -= y.mean(axis=1)
    return np.sum(y ** 3)


@program(args=lambda: (_r(142, 8),))
def boolean_mask_assign_clip_negative(x):
    y = x.copy()
    y[y < 0] = 0.1 * y[y < 0]
    y[np.abs(y) > 1] = np.sign(y[np.abs(y) > 1])
    return np.sum(y ** 2 * np.arange(8))


@program(args=lambda: (_r(143, 4, 4),))
def fill_diagonal_and_triu_indices_assign(A):
    B = A @ A.T
    np.fill_diagonal(B, np.diag(B) + 1.0)
    iu = np.triu_indices(4, 1)
    C = np.zeros_like(B)
    C[iu] = B[iu]
    C = C + C.T + np.diag(np.diag(B))
    return np.linalg.slogdet(C)[1]


# ---------------------------------------------------------------- misc NN / stats
@program(args=lambda: (_r(150, 10, 4) * 0.5, _r(151, 4)))
def label_smoothing_cross_entropy_take_along_axis(W, b):
    x = _r(152, 6, 10)
    y = np.array([0, 3, 1, 2, 3, 0])
    logits = x @ W + b
    logp = logits - tnp.logsumexp(logits, axis=1, keepdims=True)
    nll = -np.take_along_axis(logp, y[:, None], axis=1)[:, 0]
    return np.mean(0.9 * nll - 0.1 * logp.mean(1))


@program(args=lambda: (_r(153, 8, 3),))
def batchnorm_train_mode_var_ddof(x):
    mu = x.mean(0)
    var = x.var(0, ddof=1)
    h = (x - mu) / np.sqrt(var + 1e-5)
    return np.sum(h ** 3 * np.arange(1, 4))


@program(args=lambda: (_u(154, 5), _u(155, 5)))
def kl_divergence_dirichlet_gammaln_digamma(a, b):
    a0, b0 = a.sum(), b.sum()
    return (sp.gammaln(a0) - np.sum(sp.gammaln(a)) - sp.gammaln(b0) + np.sum(sp.gammaln(b))
            + np.sum((a - b) * (sp.digamma(a) - sp.digamma(a0))))


@program(args=lambda: (_r(156, 12),))
def contrastive_cosine_similarity_matrix(z):
    Z = z.reshape(4, 3)
    Zn = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    S = Zn @ Zn.T / 0.5
    np.fill_diagonal(S, -np.inf)
    pos = np.array([1, 0, 3, 2])
    return -np.mean(S[np.arange(4), pos] - tnp.logsumexp(S, axis=1))


@program(args=lambda: (_r(157, 5),))
def gumbel_softmax_fixed_noise(logits):
    g = -np.log(-np.log(_u(158, 5, lo=0.01, hi=0.99)))
    y = tnp.softmax((logits + g) / 0.3)
    return np.sum(y * np.arange(5.0))


@program(args=lambda: (_r(159, 4, 4),))
def sinkhorn_plain_domain_iterations(C):
    K = np.exp(-np.abs(C))
    u = np.ones(4)
    for _ in range(20):
        v = 1 / (K.T @ u)
        u = 1 / (K @ v)
    P = u[:, None] * K * v[None]
    return np.sum(P * np.abs(C))


@program(args=lambda: (np.array([0.2, 0.3]),))
def lotka_volterra_euler_list_of_states(theta):
    a, b = theta
    s = np.array([1.0, 0.5])
    traj = [s]
    for _ in range(30):
        ds = np.stack([a * s[0] - s[0] * s[1], s[0] * s[1] * b - 0.3 * s[1]])
        s = s + 0.1 * ds
        traj.append(s)
    return np.sum(np.array(traj) ** 2) if False else np.sum(np.stack(traj) ** 2)


@program(args=lambda: (_r(160, 6),))
def sort_based_trimmed_mean_and_partition(x):
    s = np.sort(x)
    p = np.partition(x, 2)[:3]
    return np.mean(s[1:-1]) + np.sum(p ** 2)


@program(args=lambda: (_r(161, 3, 4),))
def apply_along_axis_user_function(x):
    return np.sum(np.apply_along_axis(lambda r: np.sum(np.exp(r)) / (1 + r @ r), 1, x))


@program(args=lambda: (_r(162, 5),))
def tnp_vectorize_scalar_branch_function(x):
    def f(t):
        return t ** 2 if t > 0 else np.sin(t)
    return np.sum(tnp.vectorize(f)(x))


@program(args=lambda: (np.array(0.4), np.array(1.3)))
def zero_d_gp_two_points(ell, x1):
    k = np.exp(-0.5 * (x1 - 0.2) ** 2 / ell ** 2)
    K = tnp.array([[1.0 + 1e-3, k], [k, 1.0 + 1e-3]])
    return np.linalg.slogdet(K)[1] + np.linalg.solve(K, np.array([1.0, -1.0])) @ np.array([1.0, -1.0])


@program(args=lambda: (_r(163, 0, 2), _r(164, 2)))
def empty_data_kmeans_and_logsumexp(X, C):
    d = np.sum((X[:, None, :] - C[None, None]) ** 2, -1)
    return np.sum(d) + tnp.logsumexp(C) + np.sum(np.max(d, axis=0, initial=0.0))


@program(args=lambda: (_r(165, 3, 0),))
def empty_columns_matmul_norm(A):
    return np.sum(A @ A.T) + np.linalg.norm(A) + np.sum(A.T @ np.ones(3))


# ---------------------------------------------------------------- state objects, aliasing, custom rules
class _KalmanObject:
    """An object-oriented filter: the state lives on ``self`` between steps."""

    def __init__(self):
        self.m = np.zeros(2)
        self.P = np.eye(2)

    def step(self, y, log_q):
        P = self.P + np.exp(log_q) * np.eye(2)
        S = P + 0.5 * np.eye(2)
        K = P @ np.linalg.inv(S)
        v = y - self.m
        self.m = self.m + K @ v
        self.P = P - K @ P
        return 0.5 * v @ np.linalg.solve(S, v) + 0.5 * np.linalg.slogdet(S)[1]


@program(args=lambda: (np.array(0.1),))
def kalman_object_state_on_self(log_q):
    kf = _KalmanObject()
    return sum(kf.step(y, log_q) for y in _YS[:6])


@program(args=lambda: (np.array([[0.5, -0.3, 0.1], [0.2, 0.7, -0.4]]),))
def leapfrog_rows_unpacked_as_views(state0):
    state = state0 * 1.0
    q, p = state                      # rows of state: views, as in NumPy
    for _ in range(4):
        p += 0.1 * (-q - 0.1 * q ** 3)
        q += 0.1 * p
    return np.sum(state ** 2) + np.sum(q * p)


@program(args=lambda: (np.linspace(-1, 1, 6),))
def checkpointed_dropout_with_a_generator(x):
    rng = np.random.default_rng(7)

    def layer(h, rng):
        keep = rng.random(h.shape) > 0.3
        return np.tanh(h) * keep / 0.7
    blk = tp.checkpoint(layer)
    return np.sum(blk(blk(x, rng), rng) ** 2)


@tp.custom_jvp
def _softplus(x):
    return np.logaddexp(0.0, x)


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _softplus(x), t / (1.0 + np.exp(-x))


@program(args=lambda: (_r(170, 6) * 3,))
def custom_jvp_softplus_regression(z):
    return np.sum((_softplus(z) - np.linspace(0, 2, 6)) ** 2)


@tp.custom_vjp
def _grad_scale(x, s):
    return x


_grad_scale.defvjp(lambda x, s: (x, s), lambda s, g: (g * s, None))


@program(args=lambda: (_r(171, 5),))
def custom_vjp_linear_gradient_scaling(x):
    """Reverse and forward mode agree with a rule linear in g (the scaled
    gradient is what both see)."""
    return np.sum(np.sin(_grad_scale(x, 1.0)) * x)


@program(args=lambda: (np.diag([1.0, 1.0, 3.0]) + 0.0,))
def eigh_values_at_a_repeated_eigenvalue(S):
    w = np.linalg.eigh(S)[0]
    return np.sum(w ** 3) + np.sum(np.exp(w))


@program(args=lambda: (_r(172, 3, 4),))
def nested_vmap_per_row_per_column_inside(x):
    inner = tp.vmap(tp.vmap(lambda a: np.sin(a) * a, in_axes=0), in_axes=1, out_axes=1)
    return np.sum(inner(x) ** 2)

