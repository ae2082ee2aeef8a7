"""Round-10 programs: plain NumPy code from scientific users -- filters and
smoothers, Gaussian processes, small ODE integrators, attention, mixtures,
robust losses, flows, stencils, einsum, sorting/top-k, interpolation,
clipping at boundaries, masks, linear-algebra compositions, FFT pipelines,
float32, 0-d and empty inputs, pytrees -- differentiated unchanged by
tapestry (tests/test_user_programs10.py)."""
from collections import namedtuple

import numpy as np

from . import Program, rng

#: name -> Program, a registry of its own (tests/test_user_programs10.py).
PROGRAMS: dict = {}


def program(args, mode="grad", argnums=None):
    """Register the decorated loss in :data:`PROGRAMS` (see programs.program)."""
    def deco(fn):
        PROGRAMS[fn.__name__] = Program(fn.__name__, fn, args, mode, argnums, module=fn.__module__)
        return fn
    return deco


def _r(seed, *shape, dtype=np.float64):
    return rng(1000 + seed).standard_normal(shape).astype(dtype)


def _spd(seed, n):
    a = _r(seed, n, n)
    return a @ a.T + n * np.eye(n)


# ---------------------------------------------------------------- filters
@program(args=lambda: (np.array([0.3, -0.2]), _r(1, 12)))
def kalman_local_level_loglik(log_qr, ys):
    q, r = np.exp(log_qr)
    m, P, ll = 0.0, 1.0, 0.0
    for y in ys:
        P = P + q
        S = P + r
        K = P / S
        v = y - m
        ll = ll - 0.5 * (np.log(2 * np.pi * S) + v * v / S)
        m = m + K * v
        P = (1 - K) * P
    return ll


@program(args=lambda: (np.array([[0.9, 0.1], [-0.1, 0.8]]), _r(2, 10, 2)))
def kalman_2d_matrix_loglik(F, ys):
    Q, R = 0.1 * np.eye(2), 0.2 * np.eye(2)
    m, P, ll = np.zeros(2), np.eye(2), 0.0
    for y in ys:
        m = F @ m
        P = F @ P @ F.T + Q
        S = P + R
        v = y - m
        sign, logdet = np.linalg.slogdet(S)
        ll -= 0.5 * (logdet + v @ np.linalg.solve(S, v))
        K = P @ np.linalg.inv(S)
        m = m + K @ v
        P = (np.eye(2) - K) @ P
    return ll


@program(args=lambda: (np.array([0.1, -0.5]), _r(3, 8)))
def rts_smoother_scalar(log_qr, ys):
    q, r = np.exp(log_qr)
    ms, Ps, mp, Pp = [], [], [], []
    m, P = 0.0, 1.0
    for y in ys:
        mpred, Ppred = m, P + q
        K = Ppred / (Ppred + r)
        m = mpred + K * (y - mpred)
        P = (1 - K) * Ppred
        ms.append(m); Ps.append(P); mp.append(mpred); Pp.append(Ppred)
    sm, sP = ms[-1], Ps[-1]
    out = [sm]
    for k in range(len(ys) - 2, -1, -1):
        G = Ps[k] / Pp[k + 1]
        sm = ms[k] + G * (sm - mp[k + 1])
        sP = Ps[k] + G * G * (sP - Pp[k + 1])
        out.append(sm)
    return np.sum(np.array(out) ** 2) + sP


@program(args=lambda: (np.array([0.5, 0.2, -0.3]), _r(4, 20)))
def ar2_exact_loglik_via_toeplitz(theta, y):
    phi1, phi2, logs = theta
    n = 6
    lags = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    acf = np.exp(-0.5 * lags) * (1 + 0.1 * phi1) + 0.05 * phi2 * (lags == 1)
    S = np.exp(logs) * acf + 0.5 * np.eye(n)
    L = np.linalg.cholesky(S)
    z = np.linalg.solve(L, y[:n])
    return -0.5 * z @ z - np.sum(np.log(np.diag(L)))


@program(args=lambda: (_r(5, 3) * 0.3, _r(6, 15)))
def particle_filter_deterministic_resample_free(theta, ys):
    parts = np.linspace(-1, 1, 7)
    ll = 0.0
    for y in ys:
        parts = theta[0] * parts + 0.1 * np.sin(parts + theta[1])
        w = -0.5 * (y - parts) ** 2 / np.exp(theta[2])
        mx = np.max(w)
        ll += mx + np.log(np.mean(np.exp(w - mx)))
    return ll


# ---------------------------------------------------------------- GPs
def _gp_xy(seed, n=7):
    X = np.linspace(0, 3, n)[:, None] + 0.01 * _r(seed, n, 1)
    return X, np.sin(X[:, 0]) + 0.1 * _r(seed + 1, n)


@program(args=lambda: (np.array([0.1, -0.3, -1.0]),) + _gp_xy(10))
def gp_mll_cholesky_solve_triangular_by_hand(p, X, y):
    ell, sf, sn = np.exp(p)
    d2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = sf ** 2 * np.exp(-0.5 * d2 / ell ** 2) + sn ** 2 * np.eye(len(y))
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return 0.5 * y @ a + np.sum(np.log(np.diagonal(L))) + 0.5 * len(y) * np.log(2 * np.pi)


@program(args=lambda: (np.array([0.2, 0.1, -1.2]),) + _gp_xy(12))
def gp_mll_eigh(p, X, y):
    ell, sf, sn = np.exp(p)
    d = np.abs(X - X.T)
    K = sf ** 2 * (1 + np.sqrt(3) * d / ell) * np.exp(-np.sqrt(3) * d / ell)
    w, V = np.linalg.eigh(K)
    w = w + sn ** 2
    alpha = V.T @ y
    return 0.5 * np.sum(alpha ** 2 / w) + 0.5 * np.sum(np.log(w))


@program(args=lambda: (np.array([0.0, -1.0]),) + _gp_xy(14))
def gp_loo_cv_inverse_diagonal(p, X, y):
    ell, sn = np.exp(p)
    K = np.exp(-0.5 * (X - X.T) ** 2 / ell ** 2) + sn ** 2 * np.eye(len(y))
    Ki = np.linalg.inv(K)
    mu = y - (Ki @ y) / np.diag(Ki)
    var = 1.0 / np.diag(Ki)
    return np.sum(0.5 * np.log(var) + 0.5 * (y - mu) ** 2 / var)


@program(args=lambda: (np.array([0.3, -0.6]),) + _gp_xy(16, 6))
def gp_predictive_variance_trace(p, X, y):
    ell, sn = np.exp(p)
    Xs = np.linspace(-0.5, 3.5, 5)[:, None]
    k = lambda A, B: np.exp(-0.5 * (A - B.T) ** 2 / ell ** 2)
    K = k(X, X) + sn ** 2 * np.eye(len(X))
    Ks = k(Xs, X)
    L = np.linalg.cholesky(K)
    V = np.linalg.solve(L, Ks.T)
    var = 1.0 - np.einsum("ij,ij->j", V, V)
    return np.sum(np.log(var + 1e-3)) + np.trace(V.T @ V)


# ---------------------------------------------------------------- ODEs
@program(args=lambda: (np.array([1.0, 0.5, 0.3]),))
def rk4_van_der_pol(theta):
    mu, x, v = theta
    y = np.array([x, v])
    h = 0.05

    def f(y):
        return np.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])
    for _ in range(20):
        k1 = f(y); k2 = f(y + h / 2 * k1); k3 = f(y + h / 2 * k2); k4 = f(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y[0] ** 2 + 0.5 * y[1]


@program(args=lambda: (np.array([0.3, 0.1, -0.2, 0.4]), np.array(0.05)))
def leapfrog_double_well_energy_drift(q0p0, dt):
    q, p = q0p0[:2].copy(), q0p0[2:].copy()
    grad_U = lambda q: 4 * q ** 3 - 2 * q
    H0 = 0.5 * p @ p + np.sum(q ** 4 - q ** 2)
    for _ in range(15):
        p = p - 0.5 * dt * grad_U(q)
        q = q + dt * p
        p = p - 0.5 * dt * grad_U(q)
    H1 = 0.5 * p @ p + np.sum(q ** 4 - q ** 2)
    return (H1 - H0) * 1e3 + np.sum(q)


@program(args=lambda: (np.array([0.7, 0.2]),))
def euler_sir_epidemic_preallocated(theta):
    beta, gamma = np.exp(theta)
    out = np.zeros((30, 3))
    s, i, r = 0.99, 0.01, 0.0
    for t in range(30):
        ds = -beta * s * i
        di = beta * s * i - gamma * i
        s, i, r = s + 0.1 * ds, i + 0.1 * di, r + 0.1 * gamma * i
        out[t] = [s, i, r]
    return np.sum(out[:, 1]) + out[-1, 2]


@program(args=lambda: (np.array([2.0, 0.3]),))
def implicit_euler_linear_solve(theta):
    k, c = theta
    A = np.array([[0.0, 1.0], [-k, -c]])
    y = np.array([1.0, 0.0])
    M = np.eye(2) - 0.1 * A
    traj = []
    for _ in range(10):
        y = np.linalg.solve(M, y)
        traj.append(y[0])
    return np.sum(np.square(traj))


@program(args=lambda: (np.array([0.4, 1.3, -0.2]),))
def expm_via_eigendecomp_of_symmetric(a):
    H = np.array([[a[0], a[2]], [a[2], a[1]]])
    w, V = np.linalg.eigh(H)
    U = V @ np.diag(np.exp(0.5 * w)) @ V.T
    return np.sum(U @ np.array([1.0, -2.0]))


@program(args=lambda: (np.array([0.5, -0.3, 0.2]),))
def heun_adaptive_free_fixed_steps_with_while(theta):
    t, y, h = 0.0, theta.copy(), 0.1
    while t < 1.0 - 1e-12:
        f1 = np.cross(np.array([0.0, 0.0, 1.0]), y) - 0.1 * y
        ye = y + h * f1
        f2 = np.cross(np.array([0.0, 0.0, 1.0]), ye) - 0.1 * ye
        y = y + 0.5 * h * (f1 + f2)
        t += h
    return np.linalg.norm(y) + y[0]


# ---------------------------------------------------------------- attention / NN
def _softmax(z, axis=-1):
    z = z - np.max(z, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


@program(args=lambda: (_r(20, 4, 6), _r(21, 6, 6) * 0.3))
def causal_attention_triu_mask(x, W):
    q = x @ W
    s = q @ x.T / np.sqrt(6)
    mask = np.triu(np.ones((4, 4), dtype=bool), k=1)
    s = np.where(mask, -np.inf, s)
    a = _softmax(s)
    return np.sum((a @ x) ** 2)


@program(args=lambda: (_r(22, 5, 8), _r(23, 8, 8) * 0.3))
def attention_masked_fill_large_negative(x, W):
    s = (x @ W) @ x.T
    s[np.tril_indices(5, -1)] = -1e9
    a = _softmax(s, axis=1)
    return np.sum(a * s.clip(-5, 5))


@program(args=lambda: (_r(24, 2, 3, 4), _r(25, 4, 4) * 0.5, _r(26, 4, 4) * 0.5))
def batched_attention_einsum_bhd(x, Wq, Wk):
    q = np.einsum("btd,de->bte", x, Wq)
    k = np.einsum("btd,de->bte", x, Wk)
    s = np.einsum("bqe,bke->bqk", q, k) / 2.0
    a = _softmax(s)
    return np.einsum("bqk,bkd->", a, x)


@program(args=lambda: (_r(27, 6, 4), np.ones(4), np.zeros(4)))
def rmsnorm_then_layernorm(x, g, b):
    x = x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + 1e-6) * g
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return np.sum(np.tanh((x - mu) / np.sqrt(var + 1e-5) + b))


@program(args=lambda: (_r(28, 5, 3), np.array([0, 2, 1, 1, 0])))
def cross_entropy_take_along_axis(logits, labels):
    lse = np.log(np.sum(np.exp(logits - logits.max(1, keepdims=True)), 1)) + logits.max(1)
    picked = np.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return np.mean(lse - picked)


@program(args=lambda: (_r(29, 6, 4), np.array([3, 0, 1, 2, 2, 0])))
def label_smoothing_onehot_eye(logits, labels):
    Y = np.eye(4)[labels] * 0.9 + 0.1 / 4
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return -np.sum(Y * logp) / len(labels)


@program(args=lambda: (_r(30, 3, 5),))
def gelu_tanh_swish_mix(x):
    g = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    s = x / (1 + np.exp(-x))
    return np.sum(g * s) + np.sum(np.logaddexp(0, x))


@program(args=lambda: (_r(31, 4, 4), _r(32, 3, 4)))
def conv_via_sliding_window_view(k, img):
    from numpy.lib.stride_tricks import sliding_window_view
    x = np.pad(img, 1)
    win = sliding_window_view(x, (2, 2))
    return np.sum(np.einsum("ijkl,kl->ij", win, k[:2, :2]) ** 2)


@program(args=lambda: (_r(33, 8),))
def maxout_and_top2_mean(x):
    h = x.reshape(4, 2).max(axis=1)
    top = np.sort(h)[-2:]
    return np.sum(top) + np.sum(np.maximum(x, 0.0) ** 2)


@program(args=lambda: (_r(34, 3, 4), _r(35, 4)))
def gated_residual_block(W, x):
    h = W @ x
    gate = 1 / (1 + np.exp(-h))
    y = x[:3] + gate * np.tanh(h)
    return np.dot(y, y)


# ---------------------------------------------------------------- mixtures
@program(args=lambda: (np.array([-1.0, 0.5, 2.0]), np.array([0.1, -0.2, 0.0]), _r(40, 20)))
def gmm_loglik_manual_logsumexp(mu, log_s, x):
    lp = -0.5 * ((x[:, None] - mu) / np.exp(log_s)) ** 2 - log_s - 0.5 * np.log(2 * np.pi) + np.log(1 / 3)
    m = lp.max(axis=1, keepdims=True)
    return np.sum(m[:, 0] + np.log(np.exp(lp - m).sum(axis=1)))


@program(args=lambda: (_r(41, 3), _r(42, 3, 2), _r(43, 12, 2)))
def gmm_2d_isotropic_responsibilities_em_step(logits, mu, X):
    logw = logits - np.log(np.sum(np.exp(logits)))
    d2 = np.sum((X[:, None, :] - mu[None]) ** 2, axis=-1)
    lp = logw - 0.5 * d2
    lse = np.logaddexp.reduce(lp, axis=1)
    R = np.exp(lp - lse[:, None])
    new_mu = (R.T @ X) / R.sum(axis=0)[:, None]
    return np.sum(lse) + np.sum(new_mu ** 2)


@program(args=lambda: (np.array([0.2, 1.5]), _r(44, 15)))
def two_component_mixture_logaddexp(p, x):
    a, b = p
    l1 = np.log(0.3) - 0.5 * (x - a) ** 2
    l2 = np.log(0.7) - 0.5 * (x - b) ** 2 / 4 - np.log(2)
    return np.sum(np.logaddexp(l1, l2))


@program(args=lambda: (_r(45, 4), np.array([1, 0, 3, 3, 2, 1, 0])))
def categorical_loglik_bincount(logits, obs):
    counts = np.bincount(obs, minlength=4)
    logp = logits - np.log(np.sum(np.exp(logits)))
    return counts @ logp


@program(args=lambda: (_r(46, 3, 4),))
def hmm_viterbi_like_max_product(A):
    logA = A - np.log(np.exp(A).sum(axis=1, keepdims=True))[:, :1] if False else A
    delta = np.zeros(3)
    for t in range(4):
        delta = np.max(delta[:, None] + logA[:, :3], axis=0) + A[:, t]
    return np.max(delta)


# ---------------------------------------------------------------- robust losses
@program(args=lambda: (_r(50, 10) * 2, _r(51, 10)))
def huber_where_branches(pred, y):
    r = pred - y
    d = 1.0
    return np.sum(np.where(np.abs(r) <= d, 0.5 * r ** 2, d * (np.abs(r) - 0.5 * d)))


@program(args=lambda: (_r(52, 10) * 2,))
def tukey_biweight(r):
    c = 1.5
    inside = np.abs(r) < c
    rho = np.where(inside, c ** 2 / 6 * (1 - (1 - (r / c) ** 2) ** 3), c ** 2 / 6)
    return np.sum(rho)


@program(args=lambda: (_r(53, 10),))
def cauchy_and_log_cosh(r):
    return np.sum(np.log1p(r ** 2)) + np.sum(np.log(np.cosh(r)))


@program(args=lambda: (_r(54, 10) * 2, _r(55, 10)))
def quantile_loss_masked_by_boolean(pred, y):
    r = y - pred
    q = 0.8
    loss = np.zeros_like(r)
    pos = r >= 0
    loss[pos] = q * r[pos]
    loss[~pos] = (q - 1) * r[~pos]
    return loss.sum()


@program(args=lambda: (_r(56, 12),))
def smooth_l1_piecewise_select(x):
    return np.sum(np.select([x < -1, x > 1], [-x - 0.5, x - 0.5], 0.5 * x ** 2))


@program(args=lambda: (_r(57, 12) * 3,))
def hinge_squared_with_fmax(x):
    return np.sum(np.fmax(0, 1 - x) ** 2) + np.sum(np.fmin(x, 2.0))


@program(args=lambda: (_r(58, 12) * 3,))
def piecewise_linear_np_piecewise(x):
    return np.sum(np.piecewise(x, [x < 0, x >= 0], [lambda v: -0.5 * v, lambda v: v ** 2]))


# ---------------------------------------------------------------- flows
@program(args=lambda: (_r(60, 4, 4) * 0.3, _r(61, 6, 4)))
def triangular_flow_logdet(W, X):
    L = np.tril(W, -1) + np.diag(np.exp(np.diag(W)))
    Z = X @ L.T
    logdet = np.sum(np.diag(W))
    return np.sum(-0.5 * Z ** 2) + len(X) * logdet


@program(args=lambda: (_r(62, 3, 3) * 0.3, _r(63, 3)))
def triangular_solve_inverse_flow(W, z):
    from scipy.linalg import solve_triangular
    L = np.tril(W) + 2 * np.eye(3)
    x = solve_triangular(L, z, lower=True)
    return np.sum(x ** 2) - np.sum(np.log(np.abs(np.diag(L))))


@program(args=lambda: (_r(64, 4, 4) * 0.2 + np.eye(4), _r(65, 5, 4)))
def linear_flow_slogdet(A, X):
    sign, ld = np.linalg.slogdet(A)
    Z = X @ np.linalg.inv(A).T
    return -0.5 * np.sum(Z ** 2) - len(X) * ld


@program(args=lambda: (_r(66, 2), _r(67, 2), _r(68, 6, 4)))
def realnvp_coupling_layer(s_w, t_w, X):
    x1, x2 = X[:, :2], X[:, 2:]
    s = np.tanh(x1 * s_w)
    t = x1 * t_w
    y2 = x2 * np.exp(s) + t
    y = np.concatenate([x1, y2], axis=1)
    return np.sum(-0.5 * y ** 2) + np.sum(s)


@program(args=lambda: (np.array([0.5, -0.3, 0.8]), _r(69, 10)))
def planar_flow_1d(p, z):
    u, w, b = p
    h = np.tanh(w * z + b)
    f = z + u * h
    logdet = np.log(np.abs(1 + u * w * (1 - h ** 2)))
    return np.sum(-0.5 * f ** 2 + logdet)


@program(args=lambda: (_r(70, 3, 3) * 0.5,))
def det_and_inv_trace_ratio(A):
    A = A + 2 * np.eye(3)
    return np.linalg.det(A) * np.trace(np.linalg.inv(A))


# ---------------------------------------------------------------- stencils
@program(args=lambda: (_r(80, 16),))
def laplacian_roll_periodic_energy(u):
    lap = np.roll(u, 1) - 2 * u + np.roll(u, -1)
    return 0.5 * np.sum(lap ** 2) + np.sum(u ** 4) / 4


@program(args=lambda: (_r(81, 6, 5),))
def laplacian_2d_roll_both_axes(u):
    lap = (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
           + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4 * u)
    return np.sum(u * lap)


@program(args=lambda: (_r(82, 12),))
def finite_volume_flux_diff(u):
    flux = 0.5 * u ** 2
    dudt = -np.diff(flux, prepend=flux[-1])
    return np.sum((u + 0.1 * dudt) ** 2)


@program(args=lambda: (np.abs(_r(83, 10)) + 0.1,))
def cumsum_arc_length_param(ds):
    s = np.cumsum(ds)
    s = s / s[-1]
    return np.sum(np.sin(np.pi * s) * ds)


@program(args=lambda: (_r(84, 10),))
def second_order_diff_n2_and_gradient(u):
    return np.sum(np.diff(u, n=2) ** 2) + np.sum(np.gradient(u, 0.1, edge_order=2) ** 2)


@program(args=lambda: (np.array([0.3, 1.2]),))
def fem_1d_stiffness_assembly(p):
    n = 6
    k, f = np.exp(p)
    K = np.zeros((n, n))
    for e in range(n - 1):
        K[e:e + 2, e:e + 2] += k * np.array([[1, -1], [-1, 1]])
    K[0, 0] += 1.0
    F = f * np.ones(n)
    u = np.linalg.solve(K, F)
    return u @ F


@program(args=lambda: (_r(85, 5, 5),))
def gradient_2d_divergence(phi):
    gy, gx = np.gradient(phi)
    div = np.gradient(gx, axis=1) + np.gradient(gy, axis=0)
    return np.sum(div ** 2)


@program(args=lambda: (_r(86, 10),))
def cumprod_survival_and_cummax(h):
    s = np.cumprod(1 / (1 + np.exp(h)))
    return np.sum(s) + np.sum(np.maximum.accumulate(h))


@program(args=lambda: (_r(87, 8),))
def convolve_same_smoothing(u):
    k = np.array([0.25, 0.5, 0.25])
    return np.sum(np.convolve(u, k, mode="same") ** 2) + np.sum(np.convolve(u, u, mode="valid"))


@program(args=lambda: (_r(88, 8),))
def correlate_full_autocorr(u):
    ac = np.correlate(u, u, mode="full")
    return ac[len(u) - 1] + np.sum(ac[len(u):] ** 2)


# ---------------------------------------------------------------- einsum
@program(args=lambda: (_r(90, 3, 4), _r(91, 4, 5), _r(92, 5, 3)))
def einsum_chain_trace(A, B, C):
    return np.einsum("ij,jk,ki->", A, B, C)


@program(args=lambda: (_r(93, 4, 4),))
def einsum_diag_and_outer(A):
    d = np.einsum("ii->i", A)
    return np.sum(np.einsum("i,j->ij", d, d) * A) + np.einsum("ij,ij", A, A)


@program(args=lambda: (_r(94, 2, 3, 4), _r(95, 4, 3)))
def einsum_ellipsis_batch(X, W):
    return np.sum(np.einsum("...ij,jk->...ik", X, W) ** 2)


@program(args=lambda: (_r(96, 3, 3, 3),))
def einsum_repeated_index_three_way(T):
    return np.einsum("iii->", T) + np.einsum("iij->j", T) @ np.arange(3.0)


@program(args=lambda: (_r(97, 4, 3), _r(98, 4, 3)))
def einsum_optimize_true_bilinear(X, Y):
    M = np.einsum("ni,nj->ij", X, Y, optimize=True)
    return np.einsum("ij,ij->", M, M, optimize="greedy")


@program(args=lambda: (_r(99, 3, 4),))
def tensordot_and_kron(A):
    return np.sum(np.tensordot(A, A, axes=([1], [1]))) + np.sum(np.kron(A[:2, :2], A[1:, :2]) ** 2)


# ---------------------------------------------------------------- sorting / top-k
@program(args=lambda: (_r(100, 10),))
def topk_via_argsort(x):
    idx = np.argsort(x)[::-1][:3]
    return np.sum(x[idx] ** 2)


@program(args=lambda: (_r(101, 10),))
def partition_k_smallest(x):
    return np.sum(np.partition(x, 3)[:3] ** 2)


@program(args=lambda: (_r(102, 4, 6),))
def partition_axis_kth_row(X):
    return np.sum(np.partition(X, -2, axis=1)[:, -2:])


@program(args=lambda: (_r(103, 9),))
def median_and_quantile(x):
    return np.median(x) + np.quantile(x, 0.3) + np.percentile(x, 75, method="linear")


@program(args=lambda: (_r(104, 10),))
def sorted_spacing_loss(x):
    s = np.sort(x)
    return np.sum(np.log(np.diff(s)))


@program(args=lambda: (_r(105, 3, 5),))
def sort_axis0_rank_weighted(X):
    S = np.sort(X, axis=0)
    return np.sum(S * np.arange(3.0)[:, None])


@program(args=lambda: (_r(106, 8),))
def argmax_select_and_max(x):
    return x[np.argmax(x)] * np.min(x) + np.ptp(x)


@program(args=lambda: (_r(107, 8),))
def lexsort_pairs_then_cumsum(x):
    order = np.lexsort((np.arange(8), np.round(x)))
    return np.sum(np.cumsum(x[order]) ** 2)


@program(args=lambda: (_r(108, 6),))
def soft_rank_pairwise_sigmoid(x):
    d = x[:, None] - x[None, :]
    r = np.sum(1 / (1 + np.exp(-d / 0.3)), axis=1)
    return np.sum((r - np.arange(1, 7)) ** 2)


# ---------------------------------------------------------------- interp / clip
@program(args=lambda: (_r(110, 6),))
def interp_fp_outside_range(fp):
    xp = np.linspace(0, 1, 6)
    x = np.array([-0.5, 0.1, 0.33, 0.9, 1.5])
    return np.sum(np.interp(x, xp, fp) ** 2)


@program(args=lambda: (np.array([-0.2, 0.15, 0.47, 0.83, 1.2]),))
def interp_query_with_left_right(x):
    xp = np.linspace(0, 1, 6)
    fp = np.sin(3 * xp)
    return np.sum(np.interp(x, xp, fp, left=-1.0, right=2.0) * x)


@program(args=lambda: (np.array([0.1, 0.35, 0.55, 0.95]),))
def interp_xp_traced(xp_shift):
    xp = np.sort(xp_shift) + np.array([0.0, 0.0, 0.0, 0.0])
    fp = np.array([0.0, 1.0, 0.5, 2.0])
    return np.sum(np.interp(np.array([0.2, 0.4, 0.7]), xp, fp))


@program(args=lambda: (np.array([0.5, 1.2, -0.3, 0.9, 2.5]),))
def clip_box_projection(x):
    return np.sum(np.clip(x, 0.0, 1.0) ** 2 * x)


@program(args=lambda: (_r(111, 6), np.array([0.2]), np.array([0.7])))
def clip_traced_bounds(x, lo, hi):
    return np.sum(np.clip(x, lo, hi * 2) * np.arange(6.0))


@program(args=lambda: (_r(112, 6),))
def clip_one_sided_none(x):
    return np.sum(np.clip(x, None, 0.5) ** 2) + np.sum(np.clip(x, -0.2, None))


@program(args=lambda: (_r(113, 8),))
def clip_method_and_min_max_kw(x):
    return np.sum(x.clip(min=-0.5) * x.clip(max=0.3))


# ---------------------------------------------------------------- masks / ints
@program(args=lambda: (_r(120, 10), np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1], dtype=bool)))
def masked_mean_with_bool_sum(x, m):
    return np.sum(x * m) / m.sum() + np.mean(x[m] ** 2)


@program(args=lambda: (_r(121, 10), np.array([0, 3, 3, 7, 9])))
def integer_index_repeated_scatter_add(x, idx):
    out = np.zeros(4)
    np.add.at(out, idx % 4, x[idx])
    return np.sum(out ** 2)


@program(args=lambda: (_r(122, 4, 5),))
def nonzero_and_where_single_arg(X):
    r, c = np.nonzero(X > 0)
    return np.sum(X[r, c] ** 2) + np.sum(X[np.where(X < -0.5)])


@program(args=lambda: (_r(123, 10),))
def compress_and_extract(x):
    return np.sum(np.compress(x > 0, x) ** 2) + np.sum(np.extract(x < 0, x))


@program(args=lambda: (_r(124, 6, 3), np.array([2, 0, 1, 0, 2, 2])))
def group_means_via_unique(X, g):
    keys = np.unique(g)
    return sum(np.sum(X[g == k].mean(axis=0) ** 2) for k in keys)


@program(args=lambda: (_r(125, 5, 5),))
def triu_indices_pairwise_sum(X):
    i, j = np.triu_indices(5, k=1)
    return np.sum(X[i, j] * X[j, i])


@program(args=lambda: (_r(126, 8),))
def masked_array_filled_where_out(x):
    y = np.zeros_like(x)
    np.divide(1.0, x, out=y, where=np.abs(x) > 0.3)
    return np.sum(y)


@program(args=lambda: (_r(127, 8),))
def put_along_and_scatter_assign(x):
    y = x.copy()
    y[[1, 3, 5]] = x[[0, 2, 4]] * 2
    y[y < -1] = 0.0
    return np.sum(y ** 2)


@program(args=lambda: (_r(128, 4, 4),))
def fill_diagonal_in_copy(A):
    B = A.copy()
    np.fill_diagonal(B, 1.0)
    return np.sum(B ** 2)


@program(args=lambda: (_r(129, 4, 4),))
def diag_indices_assign(A):
    B = A * 1.0
    i = np.diag_indices(4)
    B[i] = np.exp(A[i])
    return np.sum(B @ B)


# ---------------------------------------------------------------- linalg
@program(args=lambda: (_r(130, 5, 3),))
def svd_nuclear_norm(A):
    return np.sum(np.linalg.svd(A, compute_uv=False))


@program(args=lambda: (_r(131, 4, 3),))
def svd_reconstruct_rank1(A):
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    R = s[0] * np.outer(U[:, 0], Vt[0])
    return np.sum((A - R) ** 2)


@program(args=lambda: (_r(132, 5, 3),))
def qr_r_diag_logabs(A):
    Q, R = np.linalg.qr(A)
    return np.sum(np.log(np.abs(np.diag(R)))) + np.sum(Q[:, 0] * A[:, 1])


@program(args=lambda: (_r(133, 4, 4),))
def eigh_top_eigenvalue_symmetrized(A):
    S = A + A.T
    w, V = np.linalg.eigh(S)
    return w[-1] + np.abs(V[:, -1]) @ np.arange(4.0)


@program(args=lambda: (_r(134, 4, 4),))
def eigvalsh_logsumexp(A):
    w = np.linalg.eigvalsh(A @ A.T + np.eye(4))
    return np.log(np.sum(np.exp(w)))


@program(args=lambda: (_r(135, 5, 3),))
def pinv_projection(A):
    P = A @ np.linalg.pinv(A)
    return np.sum(P * np.arange(25.0).reshape(5, 5))


@program(args=lambda: (_r(136, 6, 3), _r(137, 6)))
def lstsq_residual(A, b):
    x, res, rank, sv = np.linalg.lstsq(A, b, rcond=None)
    return np.sum((A @ x - b) ** 2) + np.sum(x)


@program(args=lambda: (_r(138, 3, 4),))
def norms_fro_nuc_2_inf(A):
    return (np.linalg.norm(A) + np.linalg.norm(A, "nuc") + np.linalg.norm(A, 2)
            + np.linalg.norm(A, np.inf) + np.linalg.norm(A, 1))


@program(args=lambda: (_r(139, 3, 4),))
def vector_norms_axis_ord(A):
    return (np.sum(np.linalg.norm(A, axis=1)) + np.sum(np.linalg.norm(A, ord=1, axis=0))
            + np.sum(np.linalg.norm(A, ord=3, axis=1)) + np.linalg.norm(A[0], np.inf))


@program(args=lambda: (_r(140, 3, 3),))
def matrix_power_and_det(A):
    return np.sum(np.linalg.matrix_power(A, 3)) + np.linalg.det(A @ A.T + np.eye(3))


@program(args=lambda: (_r(141, 2, 3, 3),))
def batched_solve_and_inv(A):
    A = A + 3 * np.eye(3)
    b = np.ones((2, 3, 1))
    return np.sum(np.linalg.solve(A, b)) + np.sum(np.linalg.inv(A)[:, 0])


@program(args=lambda: (_r(142, 4, 4),))
def cholesky_logdet_batched_stack(A):
    S = np.stack([A @ A.T + np.eye(4), A.T @ A + 2 * np.eye(4)])
    L = np.linalg.cholesky(S)
    return np.sum(np.log(np.diagonal(L, axis1=-2, axis2=-1)))


@program(args=lambda: (_r(143, 3, 3),))
def eig_general_real_spectrum(A):
    S = A @ A.T + np.eye(3)
    w = np.linalg.eigvals(S @ np.diag([1.0, 2.0, 3.0]))
    return np.sum(np.real(w))


@program(args=lambda: (_r(144, 4, 2),))
def gram_schmidt_loop(A):
    Q = np.zeros_like(A)
    for j in range(A.shape[1]):
        v = A[:, j]
        for i in range(j):
            v = v - (Q[:, i] @ A[:, j]) * Q[:, i]
        Q[:, j] = v / np.linalg.norm(v)
    return np.sum(Q * np.arange(8.0).reshape(4, 2))


@program(args=lambda: (_r(145, 3, 3),))
def cond_number_via_svd(A):
    s = np.linalg.svd(A + 2 * np.eye(3), compute_uv=False)
    return s[0] / s[-1] + np.linalg.cond(A + 2 * np.eye(3))


@program(args=lambda: (_r(146, 4, 4),))
def multi_dot_chain(A):
    return np.sum(np.linalg.multi_dot([A, A.T, A, np.ones((4, 1))]))


@program(args=lambda: (_r(147, 3, 3),))
def trace_of_inverse_via_solve_eye(A):
    A = A @ A.T + np.eye(3)
    return np.trace(np.linalg.solve(A, np.eye(3))) + np.linalg.slogdet(A)[1]


# ---------------------------------------------------------------- FFT
@program(args=lambda: (_r(150, 16),))
def fft_power_spectrum_lowpass(x):
    X = np.fft.fft(x)
    P = np.abs(X) ** 2
    return np.sum(P[:4]) / len(x)


@program(args=lambda: (_r(151, 16),))
def rfft_filter_irfft_roundtrip(x):
    X = np.fft.rfft(x)
    H = np.exp(-np.arange(len(X)) / 3.0)
    y = np.fft.irfft(X * H, n=len(x))
    return np.sum(y ** 2)


@program(args=lambda: (_r(152, 8), _r(153, 8)))
def complex_signal_ifft_phase(re, im):
    z = re + 1j * im
    y = np.fft.ifft(np.fft.fft(z) * np.exp(1j * np.linspace(0, 1, 8)))
    return np.sum(np.real(y) ** 2) + np.sum(np.angle(y[1:3]))


@program(args=lambda: (_r(154, 4, 6),))
def fft2_energy_fftshift(X):
    F = np.fft.fftshift(np.fft.fft2(X))
    return np.sum(np.abs(F[1:3, 2:4]))


@program(args=lambda: (_r(155, 10), _r(156, 10)))
def fft_circular_convolution(a, b):
    c = np.real(np.fft.ifft(np.fft.fft(a) * np.fft.fft(b)))
    return np.sum(c ** 2)


@program(args=lambda: (_r(157, 12),))
def rfft_norm_ortho_and_conj(x):
    X = np.fft.rfft(x, norm="ortho")
    return np.real(np.sum(X * np.conj(X))) + np.sum(np.imag(X) ** 2)


@program(args=lambda: (_r(158, 8),))
def complex_exp_phasor_sum(theta):
    z = np.exp(1j * theta)
    return np.abs(np.sum(z)) ** 2 + np.real(np.prod(z[:3]))


@program(args=lambda: (_r(159, 3, 8),))
def fft_axis0_batch_hfft(X):
    F = np.fft.fft(X, axis=1)
    return np.sum(np.abs(F) ** 2) + np.sum(np.fft.irfft(np.fft.rfft(X, axis=1), axis=1)[:, 0])


# ---------------------------------------------------------------- float32
@program(args=lambda: (_r(160, 5, dtype=np.float32),))
def float32_logsumexp_softplus(x):
    return np.log(np.sum(np.exp(x))) + np.sum(np.log1p(np.exp(x)))


@program(args=lambda: (_r(161, 4, 3, dtype=np.float32), _r(162, 3, dtype=np.float32)))
def float32_linear_regression_mse(W, b):
    X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    return np.mean((X * W + b) ** 2)


@program(args=lambda: (_r(163, 4, 4, dtype=np.float32),))
def float32_linalg_inv_det(A):
    A = A + np.float32(3) * np.eye(4, dtype=np.float32)
    return np.linalg.det(A) + np.sum(np.linalg.inv(A))


@program(args=lambda: (_r(164, 6, dtype=np.float32),))
def float32_with_python_float_and_float64_scalar(x):
    return np.sum(x * 2.5 + np.float64(0.1) * x ** 2)


@program(args=lambda: (_r(165, 8, dtype=np.float32),))
def float32_fft_power(x):
    return np.sum(np.abs(np.fft.rfft(x)) ** 2)


@program(args=lambda: (_r(166, 6, dtype=np.float32),))
def float32_mean_var_std(x):
    return x.mean() + x.var() + np.std(x, ddof=1)


@program(args=lambda: (_r(167, 6, dtype=np.float32),))
def float32_cumsum_sort_interp(x):
    s = np.sort(x)
    return np.sum(np.cumsum(s)) + np.sum(np.interp(np.float32([0.1, 0.5]), np.arange(6.0), x))


@program(args=lambda: (_r(168, 3, 3, dtype=np.float32),))
def float32_eigh_svd(A):
    S = A @ A.T
    return np.sum(np.linalg.eigvalsh(S)) + np.sum(np.linalg.svd(A, compute_uv=False))


# ---------------------------------------------------------------- 0-d / empty
@program(args=lambda: (np.array(0.7),))
def zero_d_array_polynomial(x):
    return x ** 3 - 2 * x + np.sin(x)


@program(args=lambda: (np.array(0.3), np.array(1.2)))
def zero_d_two_args_atan2_hypot(a, b):
    return np.arctan2(a, b) + np.hypot(a, b)


@program(args=lambda: (np.array(0.4),))
def zero_d_broadcast_into_vector(s):
    v = s * np.arange(5.0) + np.zeros(5)
    return np.sum(np.exp(v)) + v.max()


@program(args=lambda: (_r(170, 5),))
def empty_slice_sum_plus_value(x):
    e = x[5:]
    return np.sum(e) + np.sum(x[:0] ** 2) + np.sum(x ** 2) + np.prod(x[3:3])


@program(args=lambda: (_r(171, 4),))
def empty_mask_and_concatenate_empty(x):
    m = x > 100
    return np.sum(np.concatenate([x[m], x])) + np.sum(np.zeros((0, 4)) @ x)


@program(args=lambda: (_r(172, 3),))
def reduce_with_initial_and_where(x):
    return np.max(x, initial=-10.0) + np.sum(x, where=x > 0) + np.min(x[x > 5], initial=3.0)


@program(args=lambda: (np.array(1.3),))
def zero_d_item_free_reshape(x):
    return np.sum(np.reshape(x, (1, 1)) * np.ones((2, 2))) + np.squeeze(x[None]) ** 2


# ---------------------------------------------------------------- pytrees
Params = namedtuple("Params", ["w", "b"])


@program(args=lambda: (Params(_r(180, 3, 2), _r(181, 2)), _r(182, 5, 3)))
def namedtuple_params_linear(p, X):
    return np.sum(np.tanh(X @ p.w + p.b) ** 2)


@program(args=lambda: ({"layers": [(_r(183, 3, 3) * 0.5, _r(184, 3)), (_r(185, 3, 1) * 0.5, _r(186, 1))]},
                       _r(187, 4, 3)))
def dict_of_list_of_tuples_mlp(params, X):
    h = X
    for W, b in params["layers"]:
        h = np.tanh(h @ W + b)
    return np.sum(h ** 2)


@program(args=lambda: ({"a": np.array(0.5), "b": (np.array([1.0, 2.0]), 0.3)},))
def dict_with_python_float_leaf(p):
    return p["a"] * np.sum(p["b"][0] ** 2) + p["b"][1] ** 2 * p["a"]


@program(args=lambda: ({"mu": _r(188, 3), "log_sigma": _r(189, 3) * 0.1}, _r(190, 10, 3)))
def dict_params_diag_gaussian_nll(p, X):
    s = np.exp(p["log_sigma"])
    return np.sum(0.5 * ((X - p["mu"]) / s) ** 2 + p["log_sigma"])


# ---------------------------------------------------------------- misc numerics
@program(args=lambda: (_r(200, 6),))
def logsumexp_with_inf_entries(x):
    z = np.concatenate([x, [-np.inf]])
    m = np.max(z)
    return m + np.log(np.sum(np.exp(z - m)))


@program(args=lambda: (np.abs(_r(201, 6)) + 0.2,))
def entropy_with_zero_probabilities(w):
    p = np.concatenate([w, [0.0]]) / np.sum(w)
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0))


@program(args=lambda: (_r(202, 6),))
def sqrt_of_sum_squares_safe_where(x):
    r2 = np.concatenate([x ** 2, [0.0]])
    safe = np.where(r2 > 0, r2, 1.0)
    return np.sum(np.where(r2 > 0, np.sqrt(safe), 0.0))


@program(args=lambda: (np.abs(_r(203, 6)) + 0.5,))
def power_with_array_exponent(x):
    return np.sum(x ** x) + np.sum(np.power(2.0, x)) + np.sum(np.float_power(x, 1.5))


@program(args=lambda: (_r(204, 5),))
def polynomial_np_polyval_and_poly1d(c):
    x = np.linspace(-1, 1, 7)
    return np.sum(np.polyval(c, x) ** 2) + np.poly1d(c)(0.5)


@program(args=lambda: (_r(205, 7),))
def trapz_simpson_by_hand(y):
    x = np.linspace(0, 1, 7)
    h = x[1] - x[0]
    simpson = h / 3 * (y[0] + 4 * np.sum(y[1:-1:2]) + 2 * np.sum(y[2:-1:2]) + y[-1])
    return simpson + np.trapezoid(y ** 2, x) if hasattr(np, "trapezoid") else simpson + np.trapz(y ** 2, x)


@program(args=lambda: (np.array([1.3, 0.4]),))
def newton_iteration_fixed_steps(p):
    a, b = p
    x = 1.0
    for _ in range(6):
        x = x - (x ** 3 - a * x - b) / (3 * x ** 2 - a)
    return x


@program(args=lambda: (_r(206, 3, 4),))
def stack_split_concat_roundtrip(A):
    parts = np.split(A, 2, axis=1)
    B = np.hstack(parts[::-1])
    C = np.vstack([B, A])
    a, b, c = np.array_split(C.ravel(), 3)
    return np.sum(a * c) + np.sum(b ** 2)


@program(args=lambda: (_r(207, 3, 4),))
def tile_repeat_broadcast_to(A):
    return (np.sum(np.tile(A, (2, 1)) ** 2) + np.sum(np.repeat(A, 2, axis=1) * 0.5)
            + np.sum(np.broadcast_to(A[0], (3, 4)) * A))


@program(args=lambda: (_r(208, 4, 4),))
def flip_rot90_transpose(A):
    return np.sum(np.rot90(A) * A) + np.sum(np.flip(A, 0) * A.T) + np.sum(np.fliplr(A)[:, 0])


@program(args=lambda: (_r(209, 6),))
def where_nan_to_num_guard(x):
    y = np.log(np.abs(x)) * (x > 0)
    return np.sum(np.nan_to_num(y)) + np.sum(np.nanmax(np.where(x > 0, x, np.nan)))


@program(args=lambda: (_r(210, 8),))
def nansum_nanmean_with_nan_inputs(x):
    z = np.where(x > 0.5, np.nan, x)
    return np.nansum(z ** 2) + np.nanmean(z) + np.nanstd(z)


@program(args=lambda: (_r(211, 5, 3),))
def cov_corrcoef_of_traced(X):
    return np.sum(np.cov(X.T)) + np.sum(np.corrcoef(X.T) ** 2)


@program(args=lambda: (_r(212, 4),))
def outer_subtract_and_meshgrid(x):
    XX, YY = np.meshgrid(x, x ** 2, indexing="ij")
    return np.sum(np.subtract.outer(x, x) ** 2 * XX) + np.sum(YY * np.multiply.outer(x, x))


@program(args=lambda: (_r(213, 6),))
def sinc_special_functions(x):
    return np.sum(np.sinc(x)) + np.sum(np.arcsinh(x)) + np.sum(np.expm1(x) * np.exp2(x))


@program(args=lambda: (np.abs(_r(214, 6)) * 0.5 + 0.1,))
def special_scipy_gammaln_digamma_erf(x):
    from scipy.special import gammaln, digamma, erf, xlogy
    return np.sum(gammaln(x) + digamma(x + 1) + erf(x)) + np.sum(xlogy(x, x))


@program(args=lambda: (_r(215, 6),))
def round_floor_stop_gradient_like(x):
    q = np.round(x * 4) / 4
    return np.sum((x - q) ** 2) + np.sum(np.floor(x) * x)


@program(args=lambda: (_r(216, 4, 5),))
def apply_along_axis_style_loop(X):
    return sum(np.max(row) - np.min(row) for row in X) + np.sum([np.dot(r, r) for r in X])


@program(args=lambda: (_r(217, 5),))
def vectorize_free_list_comprehension_array(x):
    y = np.array([xi ** 2 if xi > 0 else -xi for xi in x])
    return np.sum(y * np.arange(5))


@program(args=lambda: (_r(218, 6),))
def np_sign_abs_copysign(x):
    return np.sum(np.sign(x) * x ** 2) + np.sum(np.copysign(x, -1.0)) + np.sum(np.abs(x) ** 1.5)


@program(args=lambda: (_r(219, 3, 4),))
def mean_over_tuple_axes_keepdims(X):
    X3 = X.reshape(3, 2, 2)
    m = X3.mean(axis=(1, 2), keepdims=True)
    return np.sum((X3 - m) ** 2) + np.sum(X3.std(axis=(0, 2)))


@program(args=lambda: (_r(220, 5),), mode="hessian")
def hessian_softplus_quadratic(x):
    return np.sum(np.logaddexp(0, x)) + 0.5 * x @ x + x[0] * x[1] ** 2


@program(args=lambda: (_r(221, 3, 3).ravel(),), mode="hessian")
def hessian_logdet_of_spd(a):
    A = a.reshape(3, 3)
    return np.linalg.slogdet(A @ A.T + np.eye(3))[1]


@program(args=lambda: (_r(222, 4),), mode="hessian")
def hessian_norm_and_exp(x):
    return np.linalg.norm(x) ** 3 + np.sum(np.exp(-x ** 2))


@program(args=lambda: (_r(223, 6), _r(224, 6)), mode="aux")
def aux_returns_dict(x, y):
    r = x - y
    return np.sum(r ** 2), {"max": np.max(np.abs(r)), "mean": np.mean(r)}


# ---------------------------------------------------------------- smooth functions written at awkward points
@program(args=lambda: (np.array([0.5, 0.0, -1.3, 2.0]),))
def prod_with_an_exact_zero(x):
    return np.prod(x) + np.prod(x[1:] + 1.0)


@program(args=lambda: (np.array([0.5, 0.0, -1.3, 0.0, 2.0]),))
def prod_with_two_zeros_and_cumprod(x):
    return np.prod(x) + np.sum(np.cumprod(x))


@program(args=lambda: (np.array([[1.0, 2.0, 0.0], [0.0, 3.0, 1.5]]),))
def prod_axis_with_zeros_keepdims(X):
    return np.sum(np.prod(X, axis=1, keepdims=True) * np.array([[1.0], [2.0]])) + np.sum(X.prod(axis=0))


@program(args=lambda: (np.array([[1.0, 2.0], [2.0, 4.0]]),))
def det_of_singular_matrix(A):
    return np.linalg.det(A) + np.linalg.det(A @ A)


@program(args=lambda: (np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, 0.0]]),))
def det_3x3_singular_rank2(A):
    return np.linalg.det(A) * 3.0


@program(args=lambda: (np.array([0.0, 0.5, -0.7]),))
def sinc_at_zero(x):
    return np.sum(np.sinc(x))


@program(args=lambda: (np.array([0.0, 0.2, 1.0]),))
def x_power_integer_at_zero(x):
    return np.sum(x ** 3) + np.sum(np.power(x, 2)) + np.sum(x ** 1.0) + np.sum(np.square(x))


@program(args=lambda: (np.array([0.0, 0.4]),))
def x_power_zero_exponent_at_zero(x):
    return np.sum(x ** 0) + np.sum(x ** 0.0 * 2) + np.sum(np.power(x, 0))


@program(args=lambda: (np.array([0.0, 1.0]), np.array([2.0, 3.0])))
def zero_base_power_traced_exponent(x, p):
    return np.sum(x ** p)


@program(args=lambda: (np.array([0.3, 0.0, -0.2]),))
def log1p_expm1_tanh_near_zero(x):
    return np.sum(np.log1p(x) * np.expm1(x)) + np.sum(np.tanh(x) / (1 + x ** 2))


@program(args=lambda: (np.array([[1.0, 2.0], [3.0, 4.0]]),))
def float_power_int_matrix_entries(A):
    return np.sum(np.float_power(A, 3)) + np.sum(A ** -1)


@program(args=lambda: (np.array([1e-3, 2.0, 0.7]),))
def sqrt_cbrt_small_positive(x):
    return np.sum(np.sqrt(x)) + np.sum(np.cbrt(x)) + np.sum(np.cbrt(-x))


@program(args=lambda: (np.array([0.4, -0.9, 0.0]),))
def cbrt_at_zero_times_zero(x):  # inf * 0 = nan at 0, as in JAX (tests/test_user_programs10.py)
    return np.sum(np.cbrt(x) * x ** 2)


@program(args=lambda: (np.array([0.3, -1.2, 2.7, 3.4]),))
def round_half_even_and_rint(x):
    return np.sum(np.round(x) * x) + np.sum(np.rint(x) ** 2 * x) + np.sum(np.fix(x) * x)


@program(args=lambda: (np.array([1.0, 1.0, 0.5]),))
def logaddexp_equal_args(x):
    return np.sum(np.logaddexp(x, x)) + np.logaddexp2(x[0], x[1])


@program(args=lambda: (np.array([0.0, 0.0, 3.0]),))
def logsumexp_all_equal_entries(x):
    z = x[:2]
    m = np.max(z)
    return m + np.log(np.sum(np.exp(z - m))) + x[2]


@program(args=lambda: (np.array([2.0, -1.0, 0.5]),))
def mean_var_of_constant_plus_traced(x):
    c = np.array([1.0, 1.0, 1.0])
    return np.var(c + 0.0 * x) + np.mean(x) + np.var(x)


@program(args=lambda: (np.array([3.0, 4.0, 0.0]),))
def linalg_norm_vector_with_zero_entry(x):
    return np.linalg.norm(x) + np.linalg.norm(x, 3) + np.linalg.norm(x, 1)


@program(args=lambda: (np.array([[2.0, 0.0], [0.0, 1.0]]),))
def spectral_norm_diagonal_matrix(A):
    return np.linalg.norm(A, 2) + np.linalg.norm(A, -2) + np.linalg.cond(A)


@program(args=lambda: (np.array([[1.0, 0.5], [0.5, 3.0]]), np.array([[0.0, 1.0], [1.0, 0.0]])))
def eigh_well_separated_with_offdiag(A, B):
    w, V = np.linalg.eigh(A + 0.1 * B)
    return np.sum(w ** 2) + np.sum(V[:, 0] ** 2 * np.array([1.0, 2.0]))


@program(args=lambda: (_r(300, 6, 2), np.array([1.0, 0.5])))
def rank_deficient_lstsq_min_norm(A, w):
    M = np.concatenate([A, A[:, :1] * 2.0], axis=1)  # 3 columns, rank 2
    x = np.linalg.lstsq(M, np.arange(6.0), rcond=None)[0]
    return np.sum(x * np.array([1.0, 2.0, 3.0])) + w @ w


@program(args=lambda: (_r(301, 4, 3),))
def pinv_of_rank_deficient(A):
    M = np.concatenate([A, A[:, :1]], axis=1)  # 4x4 rank 3
    return np.sum(np.linalg.pinv(M) * np.arange(16.0).reshape(4, 4))


@program(args=lambda: (_r(302, 5, 3),))
def svd_full_matrices_singular_values_only_used(A):
    U, s, Vt = np.linalg.svd(A)
    return np.sum(s ** 2) + np.sum(U[:, :3] @ np.diag(s) @ Vt * A)


@program(args=lambda: (_r(303, 3, 5),))
def svd_wide_matrix_reduced(A):
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    return np.sum(np.abs(U[0])) + np.sum(s) + np.sum(np.abs(Vt[:, 0]))


@program(args=lambda: (_r(304, 3, 5),))
def qr_of_wide_matrix(A):
    Q, R = np.linalg.qr(A)
    return np.sum(R ** 2) + np.sum(np.abs(Q))


@program(args=lambda: (_r(305, 4, 4),))
def qr_reduced_solve_least_squares(A):
    Q, R = np.linalg.qr(A[:, :3])
    x = np.linalg.solve(R, Q.T @ np.ones(4))
    return np.sum(x ** 2)


@program(args=lambda: (_r(306, 4, 4),))
def inv_of_batched_transpose_matmul(A):
    B = np.stack([A, A.T, A @ A.T]) + 4 * np.eye(4)
    return np.sum(np.linalg.inv(B) @ np.swapaxes(B, -1, -2))


@program(args=lambda: (_r(307, 3, 3),))
def slogdet_negative_determinant(A):
    B = A @ A.T + np.eye(3)
    B = B[[1, 0, 2]]  # row swap: negative determinant
    s, ld = np.linalg.slogdet(B)
    return s * ld + np.linalg.det(B)


@program(args=lambda: (_r(308, 2, 2) + 1j * _r(309, 2, 2),), argnums=())
def complex_matrix_nothing_to_differentiate(Z):
    return np.real(np.trace(Z @ Z.conj().T))


@program(args=lambda: (_r(310, 3), _r(311, 3)))
def complex_linalg_solve_real_loss(a, b):
    M = np.diag(a + 2.0) + 1j * np.outer(b, b) * 0.1
    x = np.linalg.solve(M, np.ones(3, dtype=complex))
    return np.sum(np.abs(x) ** 2)


@program(args=lambda: (_r(312, 3), _r(313, 3)))
def complex_eigvalsh_hermitian(a, b):
    H = np.diag(a) + 1j * (np.outer(b, np.ones(3)) - np.outer(np.ones(3), b)) * 0.3
    return np.sum(np.linalg.eigvalsh(H) ** 2)


@program(args=lambda: (_r(314, 3), _r(315, 3)))
def complex_det_abs_and_inv(a, b):
    M = np.diag(a + 3.0) + 1j * np.outer(b, b) * 0.2
    return np.abs(np.linalg.det(M)) + np.real(np.trace(np.linalg.inv(M)))


@program(args=lambda: (_r(316, 4), _r(317, 4)))
def complex_svd_singular_values(a, b):
    Z = (a[:, None] * b[None, :] + np.eye(4)) + 1j * (b[:, None] - a[None, :])
    return np.sum(np.linalg.svd(Z, compute_uv=False))


@program(args=lambda: (_r(318, 8),))
def complex_abs_squared_vs_conj(x):
    z = np.fft.fft(x)
    return np.sum((z * z.conj()).real) - np.sum(np.abs(z) ** 2) + np.sum(np.abs(z[1:3]))


@program(args=lambda: (_r(319, 6),))
def complex_sqrt_log_of_negative_reals(x):
    z = x.astype(complex) - 2.0
    return np.sum(np.real(np.sqrt(z))) + np.sum(np.imag(np.log(z + 0.1j)))


@program(args=lambda: (_r(320, 6),))
def real_if_close_free_angle_unwrap(x):
    z = np.exp(1j * 3 * x)
    ph = np.unwrap(np.angle(z))
    return np.sum(ph * np.arange(6.0))


# ---------------------------------------------------------------- dtypes
@program(args=lambda: (_r(330, 5, dtype=np.float32),))
def float32_sum_with_dtype_float64(x):
    return np.sum(x, dtype=np.float64) + np.mean(x, dtype=np.float64)


@program(args=lambda: (_r(331, 5, dtype=np.float32),))
def float32_times_numpy_float64_scalar(x):
    return np.sum(x * np.float64(1.5))


@program(args=lambda: (_r(332, 5, dtype=np.float32),))
def float32_plus_float64_array(x):
    return np.sum(x + np.linspace(0, 1, 5))


@program(args=lambda: (_r(333, 5, dtype=np.float32),))
def float32_astype_float64_then_back(x):
    y = x.astype(np.float64) ** 2
    return np.sum(y.astype(np.float32))


@program(args=lambda: (_r(334, 5),))
def float64_cast_down_to_float32(x):
    return np.sum(np.tanh(x.astype(np.float32)))


@program(args=lambda: (_r(335, 5, dtype=np.float32),))
def float32_integer_array_mixing(x):
    return np.sum(x * np.arange(5)) + np.sum(x / np.int64(3)) + np.sum(x ** 2)


@program(args=lambda: (_r(336, 5, dtype=np.float32),))
def float32_interp_returns_float64(x):
    return np.sum(np.interp(np.array([0.5, 2.5, 3.9], dtype=np.float32), np.arange(5.0), x))


@program(args=lambda: (_r(337, 6, dtype=np.float32),))
def float32_median_percentile(x):
    return np.median(x) + np.percentile(x, 30)


@program(args=lambda: (_r(338, 3, 3, dtype=np.float32),))
def float32_linalg_norms(A):
    return np.linalg.norm(A) + np.linalg.norm(A, 2) + np.sum(np.linalg.norm(A, axis=0))


@program(args=lambda: (_r(339, 3, 3, dtype=np.float32),))
def float32_cholesky_solve_slogdet(A):
    S = A @ A.T + np.eye(3, dtype=np.float32)
    L = np.linalg.cholesky(S)
    return np.sum(np.linalg.solve(L, np.ones(3, dtype=np.float32))) + np.linalg.slogdet(S)[1]


@program(args=lambda: (_r(340, 8, dtype=np.float32),))
def float32_complex64_fft_roundtrip(x):
    return np.sum(np.real(np.fft.ifft(np.fft.fft(x) * 0.5)) ** 2)


@program(args=lambda: (_r(341, 4, dtype=np.float32), _r(342, 4)))
def float32_and_float64_args_mixed(a, b):
    return np.sum(a * b) + np.sum(np.exp(a))


@program(args=lambda: (np.float32(0.7),))
def numpy_float32_scalar_argument(x):
    return x ** 2 + np.sin(x)


@program(args=lambda: (np.float64(0.7), 1.3))
def numpy_float64_scalar_and_python_float(x, y):
    return x * y + np.exp(x - y)


@program(args=lambda: (_r(343, 4, dtype=np.float16),))
def float16_input_sum_squares(x):
    return np.sum(x.astype(np.float32) ** 2)


@program(args=lambda: (_r(344, 5, dtype=np.float32),))
def float32_where_with_python_scalar(x):
    return np.sum(np.where(x > 0, x, 0.01 * x)) + np.sum(np.maximum(x, 0.1))


@program(args=lambda: (_r(345, 5, dtype=np.float32),))
def float32_cumsum_diff_clip(x):
    return np.sum(np.clip(np.cumsum(x), -1, 1)) + np.sum(np.diff(x) ** 2)


@program(args=lambda: (_r(346, 3, 4, dtype=np.float32),))
def float32_einsum_softmax_logsumexp(X):
    S = np.einsum("ij,kj->ik", X, X)
    S = S - S.max(axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(S), axis=1)))


# ---------------------------------------------------------------- empty / 0-d corners
@program(args=lambda: (np.zeros((0, 3)), _r(350, 3)))
def empty_batch_plus_regulariser(X, w):
    return np.sum((X @ w) ** 2) + np.sum(w ** 2) + np.sum(X)


@program(args=lambda: (np.zeros(0), _r(351, 2)))
def empty_vector_arg_mean_guarded(e, w):
    return (np.sum(e) if e.size == 0 else np.mean(e)) + np.sum(w ** 3)


@program(args=lambda: (np.array(0.5), _r(352, 3)))
def zero_d_scale_times_vector_norm(s, v):
    return s * np.linalg.norm(v) + np.sum(np.outer(s, v))


@program(args=lambda: (np.array([[0.8]]),))
def one_by_one_linalg(A):
    return np.linalg.det(A) + np.linalg.inv(A)[0, 0] + np.linalg.cholesky(A)[0, 0] + np.linalg.eigh(A)[0][0]


@program(args=lambda: (np.array(0.9),))
def zero_d_through_atleast_1d_and_stack(x):
    v = np.atleast_1d(x)
    return np.sum(np.stack([v, v ** 2])) + np.sum(np.concatenate([v, np.array([1.0])]) ** 2)


@program(args=lambda: (np.array(0.3),))
def zero_d_cumsum_and_sort(x):
    return np.sum(np.cumsum(x)) + np.sum(np.sort(np.atleast_1d(x))) + np.max(x)


@program(args=lambda: (np.array(1.5),))
def zero_d_linspace_endpoint_traced(b):
    t = np.linspace(0.0, b, 5)
    return np.sum(np.sin(t))


@program(args=lambda: (np.array([0.2, 1.3]),))
def arange_like_grid_from_traced_scale(p):
    x = p[0] + p[1] * np.arange(6.0)
    return np.trapezoid(np.exp(-x ** 2), x) if hasattr(np, "trapezoid") else np.trapz(np.exp(-x ** 2), x)


# ---------------------------------------------------------------- indexing corners
@program(args=lambda: (_r(360, 6),))
def negative_index_and_step_slices(x):
    return x[-1] * x[-2] + np.sum(x[::-2]) + np.sum(x[4:1:-1] ** 2)


@program(args=lambda: (_r(361, 4, 5),))
def advanced_mixed_with_slice_and_newaxis(X):
    return np.sum(X[[0, 2], 1:4] ** 2) + np.sum(X[:, [1, 1, 3]][None] * 2) + np.sum(X[1, None, :])


@program(args=lambda: (_r(362, 4, 5),))
def boolean_row_mask_and_column_index(X):
    m = np.array([True, False, True, True])
    return np.sum(X[m, 2]) + np.sum(X[m][:, [0, 4]] ** 2)


@program(args=lambda: (_r(363, 6),))
def take_modes_wrap_clip(x):
    return np.sum(np.take(x, [0, 7, -8], mode="wrap")) + np.sum(np.take(x, [2, 9], mode="clip") ** 2)


@program(args=lambda: (_r(364, 3, 4),))
def choose_and_select_rows(X):
    return np.sum(np.choose([0, 2, 1, 0], X)) + np.sum(X[np.arange(3), [3, 0, 1]])


@program(args=lambda: (_r(365, 3, 4),))
def ix_grid_indexing(X):
    return np.sum(X[np.ix_([0, 2], [1, 3])] ** 2)


@program(args=lambda: (_r(366, 8),))
def searchsorted_bucket_sum(x):
    edges = np.array([-1.0, 0.0, 1.0])
    b = np.searchsorted(edges, x)
    return np.sum(x * b) + np.sum(np.bincount(b, weights=x, minlength=4) ** 2)


@program(args=lambda: (_r(367, 5, 5),))
def diagonal_offsets_and_trace_offset(A):
    return np.sum(np.diagonal(A, 1) ** 2) + np.trace(A, offset=-2) + np.sum(np.diag(A, -1))


@program(args=lambda: (_r(368, 4),))
def diag_of_vector_and_tril_triu(v):
    D = np.diag(v, k=1)
    return np.sum(np.tril(D + 1.0) * np.triu(np.outer(v, v)).T[:5, :5][:4, :4].sum()) + np.sum(D)


@program(args=lambda: (_r(369, 2, 3, 4),))
def transpose_axes_reshape_order_f(X):
    Y = np.transpose(X, (2, 0, 1)).reshape(4, 6)
    Z = X.reshape(6, 4, order="F")
    return np.sum(Y * np.arange(24.0).reshape(4, 6)) + np.sum(Z[:, 0] ** 2) + np.sum(X.ravel(order="F")[:5])


@program(args=lambda: (_r(370, 6),))
def ellipsis_and_none_index(x):
    X = x.reshape(2, 3)
    return np.sum(X[..., 1] ** 2) + np.sum(X[None, ..., None] * 2) + X[..., -1][0]


@program(args=lambda: (_r(371, 10),))
def roll_with_shift_tuple_and_flip(x):
    X = x.reshape(2, 5)
    return np.sum(np.roll(X, (1, -2), axis=(0, 1)) * np.arange(10.0).reshape(2, 5)) + np.sum(np.roll(x, 13)[:3])


@program(args=lambda: (_r(372, 4, 3),))
def delete_insert_append(X):
    Y = np.delete(X, 1, axis=0)
    Z = np.insert(X[:, 0], 2, 5.0)
    W = np.append(X[0], X[1])
    return np.sum(Y ** 2) + np.sum(Z * np.arange(5.0)) + np.sum(W ** 3)


@program(args=lambda: (_r(373, 5),))
def pad_modes_edge_reflect_wrap(x):
    return (np.sum(np.pad(x, 2, mode="edge") * np.arange(9.0)) + np.sum(np.pad(x, (1, 3), mode="reflect") ** 2)
            + np.sum(np.pad(x, 2, mode="wrap")[:3]) + np.sum(np.pad(x, 1, mode="constant", constant_values=2.0) * x[0]))


# ---------------------------------------------------------------- reductions with ties
@program(args=lambda: (np.array([1.0, 3.0, -2.0, 3.5, 0.2]),))
def max_min_argmax_no_ties(x):
    return np.max(x) - np.min(x) + np.amax(x[:3]) + x.max(initial=0.0)


@program(args=lambda: (_r(380, 4, 5),))
def max_over_axis_tuple_keepdims(X):
    X3 = X.reshape(2, 2, 5)
    return np.sum(np.max(X3, axis=(0, 2), keepdims=True) * 2) + np.sum(np.min(X3, axis=-1))


@program(args=lambda: (_r(381, 6),))
def nanmax_nanargmax_ignoring_nan(x):
    z = np.concatenate([x, [np.nan]])
    return np.nanmax(z) + np.nanmin(z) + z[np.nanargmax(z)]


@program(args=lambda: (_r(382, 3, 4),))
def cummin_ufunc_accumulate_axis(X):
    return np.sum(np.minimum.accumulate(X, axis=1)) + np.sum(np.add.accumulate(X, axis=0) ** 2)


@program(args=lambda: (_r(383, 3, 4),))
def ufunc_reduce_multiply_and_maximum(X):
    return np.sum(np.multiply.reduce(X, axis=0)) + np.sum(np.maximum.reduce(X, axis=1))


@program(args=lambda: (_r(384, 8),))
def ufunc_reduceat_segment_sums(x):
    return np.sum(np.add.reduceat(x, [0, 3, 5]) ** 2)


@program(args=lambda: (_r(385, 5),))
def ufunc_outer_and_accumulate_multiply(x):
    return np.sum(np.multiply.outer(x, x[:3]) ** 2) + np.sum(np.multiply.accumulate(x))


# ---------------------------------------------------------------- vector-valued + jac programs
@program(args=lambda: (_r(390, 3),), mode="hessian")
def hessian_of_rk4_step(y):
    h = 0.1
    f = lambda y: np.array([y[1], -np.sin(y[0]), y[0] * y[2]]) if False else np.stack([y[1], -np.sin(y[0]), y[0] * y[2]])
    k1 = f(y); k2 = f(y + h / 2 * k1); k3 = f(y + h / 2 * k2); k4 = f(y + h * k3)
    y1 = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.sum(y1 ** 2)


@program(args=lambda: (_r(391, 4),), mode="hessian")
def hessian_of_logsumexp_and_sort(x):
    return np.log(np.sum(np.exp(x))) + np.sum(np.sort(x) * np.arange(4.0))


@program(args=lambda: (_r(392, 3),), mode="hessian")
def hessian_of_eigh_min_eigenvalue(a):
    A = np.diag(a * np.array([1.0, 3.0, 6.0])) + 0.2 * np.ones((3, 3))
    return np.linalg.eigvalsh(A)[0]


@program(args=lambda: (np.array([0.3, 0.0, -0.5]),), mode="hessian")
def hessian_of_prod_with_zero(x):
    return np.prod(x + np.array([0.0, 0.0, 1.0])) + np.prod(x)


@program(args=lambda: (_r(393, 4),), mode="hessian")
def hessian_of_fft_power(x):
    return np.sum(np.abs(np.fft.rfft(x)) ** 4)


@program(args=lambda: (_r(394, 2, 2).ravel(),), mode="hessian")
def hessian_of_inv_trace(a):
    A = a.reshape(2, 2) + 3 * np.eye(2)
    return np.trace(np.linalg.inv(A)) + np.linalg.det(A) ** 2


@program(args=lambda: (_r(395, 4),), mode="hessian")
def hessian_through_where_and_clip(x):
    return np.sum(np.where(x > 0, x ** 3, -x ** 2)) + np.sum(np.clip(x, -0.3, 0.3) ** 2 * x)
