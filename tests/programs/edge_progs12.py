"""Round-12 programs: plain NumPy code from many fields -- integrators with
in-place state, filters and smoothers, GP likelihoods, HMM/CRF recursions,
transformer blocks, stride-trick convolutions, optimal transport, n-body
and spring systems, option pricing, kinematics, signal processing,
survival and mixture models, scatter/gather on indices, sorting losses,
ties, linear algebra variants, einsum, padding, complex values and dtype
promotion -- differentiated unchanged by tapestry
(tests/test_user_programs12.py)."""
import numpy as np
import scipy.special as sp

from . import Program, rng

#: name -> Program, a registry of its own (tests/test_user_programs12.py).
PROGRAMS: dict = {}


def program(args, mode="grad", argnums=None):
    """Register the decorated loss in :data:`PROGRAMS` (see programs.program)."""
    def deco(fn):
        PROGRAMS[fn.__name__] = Program(fn.__name__, fn, args, mode, argnums, module=fn.__module__)
        return fn
    return deco


def _r(seed, *shape, dtype=np.float64):
    return rng(1200 + seed).standard_normal(shape).astype(dtype)


def _u(seed, *shape):
    return rng(1200 + seed).uniform(0.2, 1.0, shape)


def _spd(seed, n):
    a = _r(seed, n, n)
    return a @ a.T + n * np.eye(n)


# ---------------------------------------------------------------- integrators
@program(args=lambda: (np.array([1.0, 0.0, 0.0, 0.6]), np.array([1.0])))
def rk4_kepler_inplace_state(state0, gm):
    def f(s):
        r = s[:2]
        d = np.sqrt(np.sum(r * r)) ** 3
        out = np.empty_like(s)
        out[:2] = s[2:]
        out[2:] = -gm[0] * r / d
        return out
    s = state0.copy()
    dt = 0.05
    for _ in range(20):
        k1 = f(s)
        k2 = f(s + 0.5 * dt * k1)
        k3 = f(s + 0.5 * dt * k2)
        k4 = f(s + dt * k3)
        s += dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s[0] ** 2 + 0.3 * s[3]


@program(args=lambda: (_r(1, 5, 2) * 0.5, _r(2, 5, 2) * 0.1))
def leapfrog_inplace_q_p(q0, p0):
    q = q0.copy()
    p = p0.copy()
    dt = 0.02

    def force(q):
        d = q[:, None, :] - q[None, :, :]
        r2 = np.sum(d ** 2, axis=-1) + 0.1
        return -np.sum(d / r2[..., None] ** 1.5, axis=1)
    p += 0.5 * dt * force(q)
    for _ in range(8):
        q += dt * p
        p += dt * force(q)
    p -= 0.5 * dt * force(q)
    return np.sum(p ** 2) / 2 + np.sum(q[:, 0])


@program(args=lambda: (np.array([0.9, 0.1, 0.0]), np.array([0.4, 0.1])))
def sir_rows_written_into_traced_buffer(y0, theta):
    beta, gamma = theta
    traj = np.zeros((15, 3)) + 0.0 * y0
    traj[0] = y0
    for t in range(14):
        s, i, r = traj[t]
        traj[t + 1, 0] = s - beta * s * i
        traj[t + 1, 1] = i + beta * s * i - gamma * i
        traj[t + 1, 2] = r + gamma * i
    return np.sum(traj[:, 1] ** 2)


@program(args=lambda: (np.array([0.3, -0.2]), np.array([1.5])))
def verlet_pendulum_with_state_slices(x0, length):
    st = np.concatenate([x0, x0 * 0.0])
    dt = 0.1
    for _ in range(12):
        acc = -9.81 / length[0] * np.sin(st[:2])
        st[2:] += dt * acc
        st[:2] += dt * st[2:]
    return np.sum(np.cos(st[:2]))


# ---------------------------------------------------------------- filters
@program(args=lambda: (np.array([-0.5, -1.0]), _r(3, 10, 2)))
def kalman_cv_model_solve_and_joseph_form(log_qr, ys):
    q, r = np.exp(log_qr)
    F = np.array([[1.0, 1.0], [0.0, 1.0]])
    H = np.eye(2)
    Q = q * np.array([[1 / 3, 1 / 2], [1 / 2, 1.0]])
    R = r * np.eye(2)
    m = np.zeros(2)
    P = np.eye(2)
    ll = 0.0
    for y in ys:
        m = F @ m
        P = F @ P @ F.T + Q
        S = H @ P @ H.T + R
        v = y - H @ m
        K = np.linalg.solve(S, H @ P).T
        m = m + K @ v
        IKH = np.eye(2) - K @ H
        P = IKH @ P @ IKH.T + K @ R @ K.T
        P = 0.5 * (P + P.T)
        sign, ld = np.linalg.slogdet(S)
        ll -= 0.5 * (ld + v @ np.linalg.solve(S, v))
    return ll


@program(args=lambda: (np.array([0.2, -0.4]), _r(4, 8)))
def rts_smoother_scalar_arrays_preallocated(theta, ys):
    a, logq = theta
    q = np.exp(logq)
    n = len(ys)
    ms = np.zeros(n) * a
    Ps = np.zeros(n) * a
    mp = np.zeros(n) * a
    Pp = np.zeros(n) * a
    m, P = 0.0, 1.0
    for t in range(n):
        m, P = a * m, a * a * P + q
        mp[t], Pp[t] = m, P
        k = P / (P + 0.5)
        m = m + k * (ys[t] - m)
        P = (1 - k) * P
        ms[t], Ps[t] = m, P
    for t in range(n - 2, -1, -1):
        G = Ps[t] * a / Pp[t + 1]
        ms[t] = ms[t] + G * (ms[t + 1] - mp[t + 1])
        Ps[t] = Ps[t] + G * G * (Ps[t + 1] - Pp[t + 1])
    return np.sum(ms ** 2) + np.sum(np.log(Ps))


# ---------------------------------------------------------------- GP
@program(args=lambda: (np.array([0.1, -0.3, -1.0]), np.linspace(0, 3, 9), _r(5, 9)))
def gp_mll_tapestry_scipy_cho(theta, x, y):
    import tapestry.scipy.linalg as tsl
    ell, sf, sn = np.exp(theta)
    K = sf ** 2 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / ell ** 2) + (sn ** 2 + 1e-6) * np.eye(len(x))
    c, low = tsl.cho_factor(K, lower=True)
    alpha = tsl.cho_solve((c, low), y)
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(c)))


@program(args=lambda: (np.array([0.1, -0.3, -1.0]), np.linspace(0, 3, 9), _r(5, 9)))
def gp_mll_solve_triangular_upper_trans(theta, x, y):
    import tapestry.scipy.linalg as tsl
    ell, sf, sn = np.exp(theta)
    K = sf ** 2 * np.exp(-np.abs(x[:, None] - x[None, :]) / ell) + sn ** 2 * np.eye(len(x))
    U = np.linalg.cholesky(K).T
    z = tsl.solve_triangular(U, y, trans="T", lower=False)
    return 0.5 * z @ z + np.sum(np.log(np.abs(np.diagonal(U))))


# ---------------------------------------------------------------- HMM / CRF
@program(args=lambda: (_r(6, 3, 3), _r(7, 3), _r(8, 7, 3)))
def hmm_forward_logsumexp_scipy(logits_A, logits_pi, emis):
    logA = logits_A - sp.logsumexp(logits_A, axis=1, keepdims=True)
    alpha = logits_pi - sp.logsumexp(logits_pi) + emis[0]
    for t in range(1, emis.shape[0]):
        alpha = sp.logsumexp(alpha[:, None] + logA, axis=0) + emis[t]
    return sp.logsumexp(alpha)


@program(args=lambda: (_r(9, 4, 4), _r(10, 6, 4), np.array([0, 2, 2, 1, 3, 0])))
def linear_chain_crf_nll(trans, unary, tags):
    alpha = unary[0].copy()
    for t in range(1, unary.shape[0]):
        alpha = np.logaddexp.reduce(alpha[:, None] + trans, axis=0) + unary[t]
    logZ = np.logaddexp.reduce(alpha)
    gold = np.sum(unary[np.arange(len(tags)), tags]) + np.sum(trans[tags[:-1], tags[1:]])
    return logZ - gold


@program(args=lambda: (_r(11, 3, 3), _r(12, 6, 3)))
def hmm_scaled_forward_normalising_in_place(logits_A, emis_logits):
    A = np.exp(logits_A)
    A /= A.sum(axis=1, keepdims=True)
    B = np.exp(emis_logits)
    alpha = np.full(3, 1.0 / 3) * B[0]
    ll = 0.0
    for t in range(1, B.shape[0]):
        c = alpha.sum()
        ll += np.log(c)
        alpha /= c
        alpha = (alpha @ A) * B[t]
    return ll + np.log(alpha.sum())


# ---------------------------------------------------------------- transformer
@program(args=lambda: (_r(13, 5, 8) * 0.5, _r(14, 8, 24) * 0.3, _r(15, 8, 8) * 0.3, np.array([1, 1, 1, 0, 0])))
def transformer_block_padding_mask(x, Wqkv, Wo, valid):
    def ln(h):
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        return (h - mu) / np.sqrt(var + 1e-5)
    h = ln(x)
    q, k, v = np.split(h @ Wqkv, 3, axis=-1)
    q = q.reshape(5, 2, 4).transpose(1, 0, 2)
    k = k.reshape(5, 2, 4).transpose(1, 0, 2)
    v = v.reshape(5, 2, 4).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(4)
    mask = valid[None, None, :].astype(bool)
    s = np.where(mask, s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(-1, keepdims=True)
    o = (w @ v).transpose(1, 0, 2).reshape(5, 8)
    y = x + o @ Wo
    return np.sum(ln(y)[valid.astype(bool)] ** 2 * np.arange(1, 9))


@program(args=lambda: (_r(16, 6, 6),))
def masked_fill_inplace_then_softmax(scores):
    s = scores.copy()
    s[np.triu_indices(6, k=1)] = -1e9
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=1, keepdims=True)
    return np.sum(p[:, :4] ** 2 * scores[:, :4])


# ---------------------------------------------------------------- conv / pool
@program(args=lambda: (_r(17, 9, 10), _r(18, 3, 3)))
def conv2d_sliding_window_view_stride2(img, k):
    from numpy.lib.stride_tricks import sliding_window_view
    win = sliding_window_view(img, (3, 3))[::2, ::2]
    out = np.einsum("ijkl,kl->ij", win, k)
    return np.sum(np.tanh(out))


@program(args=lambda: (_r(19, 2, 8, 8),))
def maxpool_reshape_then_avgpool_with_ties_from_relu(x):
    r = np.maximum(x, 0.0)
    m = r.reshape(2, 4, 2, 4, 2).max(axis=(2, 4))
    a = m.reshape(2, 2, 2, 2, 2).mean(axis=(2, 4))
    return np.sum(a ** 2) + np.sum(m)


@program(args=lambda: (_r(20, 12), _r(21, 3)))
def conv1d_sliding_window_axis_kw(x, k):
    from numpy.lib.stride_tricks import sliding_window_view
    w = sliding_window_view(x, window_shape=3, axis=0)
    return np.sum((w @ k[::-1] - np.convolve(x, k, mode="valid")) ** 2) + np.sum((w @ k) ** 2)


# ---------------------------------------------------------------- optimal transport
@program(args=lambda: (_r(22, 5, 2), _r(23, 4, 2)))
def sinkhorn_log_domain(x, y):
    C = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    eps = 0.5
    la = np.log(np.full(5, 1 / 5))
    lb = np.log(np.full(4, 1 / 4))
    f = np.zeros(5)
    g = np.zeros(4)
    for _ in range(30):
        f = -eps * sp.logsumexp((g[None, :] - C) / eps + lb[None, :], axis=1)
        g = -eps * sp.logsumexp((f[:, None] - C) / eps + la[:, None], axis=0)
    P = np.exp((f[:, None] + g[None, :] - C) / eps + la[:, None] + lb[None, :])
    return np.sum(P * C)


@program(args=lambda: (_u(24, 6), _u(25, 6)))
def sinkhorn_scaling_inplace_uv(a, b):
    a = a / a.sum()
    b = b / b.sum()
    xs = np.linspace(0, 1, 6)
    K = np.exp(-np.subtract.outer(xs, xs) ** 2 / 0.1)
    u = np.ones(6)
    v = np.ones(6)
    for _ in range(25):
        u = a / (K @ v)
        v = b / (K.T @ u)
    P = u[:, None] * K * v[None, :]
    return np.sum(P * np.subtract.outer(xs, xs) ** 2)


# ---------------------------------------------------------------- physics
@program(args=lambda: (_r(26, 6, 3),))
def nbody_fill_diagonal_on_traced_distances(pos):
    d = pos[:, None, :] - pos[None, :, :]
    r = np.sqrt(np.sum(d ** 2, axis=-1))
    np.fill_diagonal(r, 1.0)
    inv = 1.0 / r
    np.fill_diagonal(inv, 0.0)
    return -0.5 * np.sum(inv)


@program(args=lambda: (_r(27, 6, 2) + np.arange(6)[:, None],))
def spring_network_forces_add_at(x):
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [0, 2], [1, 3], [0, 1]])
    d = x[edges[:, 1]] - x[edges[:, 0]]
    L = np.linalg.norm(d, axis=1)
    f = ((L - 1.0) / L)[:, None] * d
    F = np.zeros_like(x)
    np.add.at(F, edges[:, 0], f)
    np.add.at(F, edges[:, 1], -f)
    return np.sum(F ** 2) + 0.5 * np.sum((L - 1.0) ** 2)


@program(args=lambda: (_r(28, 7, 2),))
def lennard_jones_masked_pairs_with_nan_diagonal(pos):
    d = pos[:, None, :] - pos[None, :, :]
    r2 = np.einsum("ijk,ijk->ij", d, d)
    mask = ~np.eye(7, dtype=bool)
    r2 = np.where(mask, r2, 1.0) + 0.5
    s6 = (1.0 / r2) ** 3
    e = 4 * (s6 ** 2 - s6)
    return np.sum(e[mask]) / 2


# ---------------------------------------------------------------- finance
@program(args=lambda: (np.array([100.0, 95.0, 110.0]), np.array([0.2, 0.3, 0.25]), np.array([0.5, 1.0, 2.0])))
def black_scholes_ndtr_and_erf(S, sigma, T):
    K, r = 100.0, 0.03
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    call = S * sp.ndtr(d1) - K * np.exp(-r * T) * sp.ndtr(d2)
    put = K * np.exp(-r * T) * 0.5 * (1 + sp.erf(-d2 / np.sqrt(2))) - S * 0.5 * sp.erfc(d1 / np.sqrt(2))
    return np.sum(call) + np.sum(put) + np.sum(sp.log_ndtr(d1))


@program(args=lambda: (np.array([0.05, 0.2]), rng(29).standard_normal((200, 12))))
def monte_carlo_asian_call_fixed_draws(mu_sigma, z):
    mu, sigma = mu_sigma
    dt = 1 / 12
    logS = np.log(100.0) + np.cumsum((mu - 0.5 * sigma ** 2) * dt + sigma * np.sqrt(dt) * z, axis=1)
    avg = np.exp(logS).mean(axis=1)
    payoff = np.maximum(avg - 100.0, 0.0)
    return np.exp(-mu) * payoff.mean()


# ---------------------------------------------------------------- robotics
@program(args=lambda: (np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.8, 0.5])))
def planar_arm_forward_kinematics_arctan2(q, links):
    ang = np.cumsum(q)
    xy = np.stack([np.cumsum(links * np.cos(ang)), np.cumsum(links * np.sin(ang))], axis=1)
    target = np.array([1.2, 0.9])
    heading = np.arctan2(xy[-1, 1], xy[-1, 0])
    return np.sum((xy[-1] - target) ** 2) + (heading - 0.5) ** 2


@program(args=lambda: (np.array([0.2, -0.4, 0.9]), _r(30, 4, 3)))
def rodrigues_rotation_cross_and_outer(w, pts):
    th = np.linalg.norm(w)
    k = w / th
    Kx = np.zeros((3, 3)) * th
    Kx[0, 1], Kx[0, 2] = -k[2], k[1]
    Kx[1, 0], Kx[1, 2] = k[2], -k[0]
    Kx[2, 0], Kx[2, 1] = -k[1], k[0]
    R = np.eye(3) + np.sin(th) * Kx + (1 - np.cos(th)) * Kx @ Kx
    rot = pts @ R.T
    alt = pts * np.cos(th) + np.cross(k, pts) * np.sin(th) + np.outer(pts @ k, k) * (1 - np.cos(th))
    return np.sum(rot ** 2 * np.arange(1, 4)) + np.sum(alt[:, 0])


@program(args=lambda: (np.array([0.1, 0.2, 0.3]),))
def euler_angles_zyx_rotation_matrix_stack(e):
    cz, sz = np.cos(e[0]), np.sin(e[0])
    cy, sy = np.cos(e[1]), np.sin(e[1])
    cx, sx = np.cos(e[2]), np.sin(e[2])
    one, zero = np.ones_like(cz), np.zeros_like(cz)
    Rz = np.stack([np.stack([cz, -sz, zero]), np.stack([sz, cz, zero]), np.stack([zero, zero, one])])
    Ry = np.stack([np.stack([cy, zero, sy]), np.stack([zero, one, zero]), np.stack([-sy, zero, cy])])
    Rx = np.stack([np.stack([one, zero, zero]), np.stack([zero, cx, -sx]), np.stack([zero, sx, cx])])
    R = Rz @ Ry @ Rx
    pitch = np.arcsin(-R[2, 0])
    yaw = np.arctan2(R[1, 0], R[0, 0])
    return pitch * 2 + yaw + np.trace(R)


# ---------------------------------------------------------------- signal processing
@program(args=lambda: (_r(31, 32), _r(32, 5)))
def fir_filter_then_fft_band_energy(x, h):
    y = np.convolve(x, h, mode="same")
    Y = np.fft.rfft(y * np.hanning(32))
    f = np.fft.rfftfreq(32, d=0.1)
    band = (f > 1.0) & (f < 3.0)
    return np.sum(np.abs(Y[band]) ** 2) + np.sum(np.angle(Y[1:4]))


@program(args=lambda: (_r(33, 20), _r(34, 20)))
def cross_correlation_lag_weighted(a, b):
    c = np.correlate(a, b, mode="full")
    lags = np.arange(-19, 20)
    return np.sum(c * np.exp(-0.1 * lags ** 2)) + np.sum(np.correlate(a, b[:5], mode="same") ** 2)


@program(args=lambda: (_u(35, 10), np.linspace(0, 2 * np.pi, 25)))
def periodic_interp_of_cumsum_knots(dx, xq):
    xp = np.cumsum(dx)
    fp = np.sin(xp)
    return np.sum(np.interp(xq, xp, fp, period=2 * np.pi) ** 2)


@program(args=lambda: (_r(36, 40),))
def diff_cumsum_detrend_and_zero_crossings(x):
    y = np.cumsum(x) * 0.1
    t = np.arange(40.0)
    slope = np.sum((t - t.mean()) * (y - y.mean())) / np.sum((t - t.mean()) ** 2)
    r = y - slope * t
    d2 = np.diff(r, n=2, prepend=r[0], append=r[-1])
    n_cross = np.sum(np.diff(np.sign(r)) != 0)
    return np.sum(d2 ** 2) * (1 + n_cross) + np.sum(np.diff(r, append=0.0) ** 2)


@program(args=lambda: (_r(37, 16) + 1j * _r(38, 16),))
def complex_signal_phase_and_magnitude_loss(z):
    Z = np.fft.fft(z)
    mag = np.abs(Z)
    ph = np.angle(Z * np.exp(-1j * 0.3))
    return np.sum(np.log1p(mag)) + np.sum(np.cos(ph)) + np.real(np.vdot(z, Z[::-1])) * 0.01


# ---------------------------------------------------------------- survival
@program(args=lambda: (_r(39, 3) * 0.3, _r(40, 12, 3), rng(41).exponential(1.0, 12), (rng(42).uniform(size=12) < 0.7).astype(float)))
def cox_partial_likelihood_logcumsumexp(beta, X, times, events):
    order = np.argsort(-times)
    eta = X[order] @ beta
    log_risk = np.logaddexp.accumulate(eta)
    return -np.sum((eta - log_risk) * events[order])


@program(args=lambda: (np.array([0.3, -0.2]), rng(43).exponential(2.0, 15), (rng(44).uniform(size=15) < 0.6)))
def weibull_aft_censored_loglik(theta, t, observed):
    log_k, log_lam = theta
    k, lam = np.exp(log_k), np.exp(log_lam)
    z = (t / lam) ** k
    ll = np.where(observed, np.log(k / lam) + (k - 1) * np.log(t / lam) - z, -z)
    return -np.sum(ll)


@program(args=lambda: (_r(45, 8) * 0.5,))
def kaplan_meier_style_cumprod_of_hazards(logits):
    h = sp.expit(logits)
    S = np.cumprod(1 - h)
    return np.sum(S) + np.sum(np.log(S[-3:]))


# ---------------------------------------------------------------- mixtures
@program(args=lambda: (_r(46, 3), _r(47, 3, 2), _r(48, 3, 2) * 0.2, _r(49, 20, 2)))
def gmm_diag_logsumexp_b_weights(logits, mu, log_s, x):
    w = sp.softmax(logits)
    s = np.exp(log_s)
    lp = -0.5 * np.sum(((x[:, None, :] - mu[None]) / s[None]) ** 2 + 2 * log_s[None] + np.log(2 * np.pi), axis=-1)
    return -np.sum(sp.logsumexp(lp, b=w[None, :], axis=1))


@program(args=lambda: (_r(50, 2), _r(51, 10)))
def mixture_em_step_responsibilities_stop(params, x):
    mu = params
    d = -0.5 * (x[:, None] - mu[None]) ** 2
    resp = np.exp(d - sp.logsumexp(d, axis=1, keepdims=True))
    nk = resp.sum(0)
    new_mu = (resp * x[:, None]).sum(0) / nk
    return np.sum((new_mu - mu) ** 2) + np.sum(resp[:, 0] * np.log(resp[:, 0] + 1e-12))


# ---------------------------------------------------------------- sparse ops on indices
@program(args=lambda: (_r(52, 10), np.array([0, 2, 2, 1, 0, 4, 4, 4, 3, 0])))
def segment_mean_bincount_weights(v, seg):
    s = np.bincount(seg, weights=v, minlength=6)
    c = np.bincount(seg, minlength=6)
    m = s / np.maximum(c, 1)
    return np.sum(m ** 2) + np.sum((v - m[seg]) ** 2)


@program(args=lambda: (_r(53, 12),))
def unique_return_inverse_of_rounded_keys(v):
    keys = np.round(v * 2) / 2
    uniq, inv = np.unique(keys, return_inverse=True)
    sums = np.zeros(len(uniq)) * v[0]
    np.add.at(sums, inv, v)
    return np.sum(sums ** 2) + np.sum(uniq * 0.0)


@program(args=lambda: (_r(54, 5, 3), np.array([4, 0, 4, 2, 2, 2, 1])))
def embedding_bag_add_at_on_traced_zeros(E, ids):
    out = np.zeros((3, 3)) + 0 * E[:3]
    bags = np.array([0, 0, 1, 1, 1, 2, 2])
    np.add.at(out, bags, E[ids])
    return np.sum(np.tanh(out))


@program(args=lambda: (_r(55, 8),))
def unique_values_of_traced_with_duplicates(v):
    w = np.concatenate([v, v[:3]])
    u, idx, inv, cnt = np.unique(w, return_index=True, return_inverse=True, return_counts=True)
    return np.sum(u ** 2 * cnt) + np.sum(w[idx]) + np.sum(u[inv] * w)


# ---------------------------------------------------------------- sorting losses, ties
@program(args=lambda: (np.array([3.0, 1.0, 2.0, 2.0, 5.0, 1.0, 4.0]),))
def median_and_quantiles_with_tied_values(x):
    y = x * np.array([1, 1, 1, 1, 1, 1, 1.0])
    return (np.median(y) + np.quantile(y, 0.3) + np.percentile(y, [10, 90]).sum()
            + np.quantile(y, 0.5, method="nearest") + np.quantile(y, 0.25, method="midpoint"))


@program(args=lambda: (_r(56, 11),))
def quantile_methods_family(x):
    t = 0.0
    for m in ("linear", "lower", "higher", "nearest", "midpoint", "hazen", "weibull",
              "median_unbiased", "normal_unbiased", "inverted_cdf", "averaged_inverted_cdf",
              "closest_observation", "interpolated_inverted_cdf"):
        t = t + np.quantile(x, [0.13, 0.5, 0.77], method=m).sum() * (1 + len(m) * 0.01)
    return t


@program(args=lambda: (_r(57, 4, 9),))
def partition_kth_tuple_and_percentile_axis(x):
    p = np.partition(x, (2, 6), axis=1)
    return np.sum(p[:, 2] * 3 + p[:, 6]) + np.sum(np.percentile(x, 75, axis=0, keepdims=True) ** 2)


@program(args=lambda: (np.array([0.0, 1.0, 1.0, -1.0, 2.0]), np.array([1.0, 1.0, 0.5, -1.0, 0.0])))
def maximum_minimum_clip_exact_ties(x, y):
    return (np.sum(np.maximum(x, y) ** 2) + np.sum(np.minimum(x, y) * np.arange(5))
            + np.sum(np.clip(x, -1.0, 1.0) * np.arange(1, 6)) + np.sum(np.fmax(x, y) * 0.5)
            + np.sum(np.abs(x - y)))


@program(args=lambda: (np.array([1.0, 3.0, 3.0, 2.0, 0.5]),))
def max_with_tie_and_argmax_gather(x):
    return np.max(x) * 2 + x[np.argmax(x)] + np.max(np.stack([x, x[::-1]]), axis=0).sum()


@program(args=lambda: (_r(58, 10), _r(59, 10)))
def spearman_like_sorted_and_ranked(x, y):
    xs = np.sort(x)
    ys = np.sort(y)[::-1]
    rx = np.argsort(np.argsort(x))
    return np.sum((xs - ys) ** 2) + np.sum(x * rx) + np.sum(np.sort(np.stack([x, y]), axis=0)[1])


# ---------------------------------------------------------------- linalg variants
@program(args=lambda: (_r(60, 4, 4),))
def norm_ord_variants_matrix(a):
    t = 0.0
    for o in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
        t = t + np.linalg.norm(a, ord=o)
    return t


@program(args=lambda: (_r(61, 6),))
def norm_ord_variants_vector(v):
    t = 0.0
    for o in (None, 1, 2, 3, 0.5, np.inf, -np.inf, -1):
        t = t + np.linalg.norm(v, ord=o)
    return t + np.linalg.norm(v.reshape(2, 3), axis=1, ord=3).sum() + np.linalg.norm(v.reshape(2, 3), axis=0, keepdims=True).sum()


@program(args=lambda: (_spd(62, 4), _r(63, 4, 4)))
def det_slogdet_inv_solve_pinv_lstsq_mix(S, A):
    sign, ld = np.linalg.slogdet(A)
    x = np.linalg.solve(S, A[:, 0])
    r = np.linalg.lstsq(A[:, :3], A[:, 3], rcond=None)[0]
    return (np.linalg.det(A) + sign * ld + np.trace(np.linalg.inv(S)) + x @ x
            + np.sum(np.linalg.pinv(A[:3]) ** 2) + r @ r)


@program(args=lambda: (_r(64, 4, 4),))
def eigh_uplo_upper_of_nonsymmetric(a):
    w, v = np.linalg.eigh(a, UPLO="U")
    return np.sum(w * np.arange(4)) + np.sum(v[:, -1] ** 4)


@program(args=lambda: (_spd(65, 4) + _r(66, 4, 4) * 0.3,))
def cholesky_upper_true_of_nonsymmetric(a):
    U = np.linalg.cholesky(a, upper=True)
    return np.sum(U * np.arange(16).reshape(4, 4))


@program(args=lambda: (_r(67, 4, 4),))
def svd_hermitian_true_and_pinv_hermitian(a):
    s = a + a.T
    sv = np.linalg.svd(s, hermitian=True, compute_uv=False)
    P = np.linalg.pinv(s + 5 * np.eye(4), hermitian=True)
    return np.sum(sv * np.arange(1, 5)) + np.trace(P)


@program(args=lambda: (_r(68, 3, 4, 4),))
def array_api_linalg_trace_diagonal_matrix_transpose(a):
    return (np.sum(np.linalg.trace(a) ** 2) + np.sum(np.linalg.diagonal(a, offset=1) * 3)
            + np.sum(np.linalg.matrix_transpose(a)[:, 0] * np.arange(4))
            + np.sum(np.linalg.matrix_norm(a, ord="nuc")) + np.sum(np.linalg.vector_norm(a, axis=(1, 2), ord=3)))


@program(args=lambda: (_r(69, 5, 3), _r(70, 3), _r(71, 5)))
def matvec_vecmat_vecdot_numpy2(A, x, y):
    return np.sum(np.matvec(A, x) ** 2) + np.sum(np.vecmat(y, A) ** 3) + np.sum(np.vecdot(A, x[None, :]))


@program(args=lambda: (_r(72, 2, 3, 2, 3) + 3 * np.eye(6).reshape(2, 3, 2, 3), _r(73, 2, 3)))
def tensorsolve_tensorinv(a, b):
    x = np.linalg.tensorsolve(a, b)
    ainv = np.linalg.tensorinv(a, ind=2)
    return np.sum(x ** 2) + np.sum(ainv * 0.1)


@program(args=lambda: (_r(74, 4, 4),))
def cond_p_variants(a):
    a = a + 4 * np.eye(4)
    return sum(np.linalg.cond(a, p) for p in (None, 2, -2, "fro", 1, -1, np.inf, -np.inf, "nuc"))


# ---------------------------------------------------------------- einsum
@program(args=lambda: (_r(75, 3, 3), _r(76, 3, 4), _r(77, 4, 3), _r(78, 3)))
def einsum_many_patterns(a, b, c, v):
    return (np.einsum("ii", a) + np.einsum("ii->i", a).sum() + np.einsum("ij,jk,ki->", a, b, c)
            + np.einsum("i,i", v, v) + np.einsum("ij,ij->", a, a) + np.einsum("ij->", b)
            + np.einsum("i,j->ij", v, v).sum() + np.einsum("ij,j", a, v).sum()
            + np.einsum("...j,j->...", b.T, v).sum() + np.einsum("ij,kj->ik", b, b).trace()
            + np.einsum("bi,bj->b", np.stack([a, a]).reshape(6, 3), np.stack([a, a]).reshape(6, 3)).sum()
            + np.einsum("iij->j", np.stack([a, a, a])).sum() + np.einsum(a, [0, 1], v, [1], [0]).sum())


# ---------------------------------------------------------------- pad / tile / repeat
@program(args=lambda: (_r(79, 4, 5),))
def pad_every_mode(x):
    t = 0.0
    w = 1.0
    for mode, kw in (("constant", {"constant_values": 1.5}), ("edge", {}), ("reflect", {}),
                     ("symmetric", {}), ("wrap", {}),
                     ("linear_ramp", {"end_values": 2.0}), ("maximum", {}), ("minimum", {}),
                     ("mean", {}), ("median", {}), ("mean", {"stat_length": 2})):
        p = np.pad(x, ((2, 3), (1, 2)), mode=mode, **kw)
        t = t + w * np.sum(p * np.arange(p.size).reshape(p.shape) * 0.01)
        w += 0.1
    return t


@program(args=lambda: (_r(134, 6, 7), _r(135, 3, 3)))
def image_border_by_local_statistics_then_conv(img, k):
    from numpy.lib.stride_tricks import sliding_window_view
    p = np.pad(img, 1, mode="median", stat_length=3)
    q = np.pad(img, ((1, 1), (1, 1)), mode="maximum", stat_length=2)
    win = sliding_window_view(p + 0.5 * q, (3, 3))
    return np.sum(np.einsum("ijkl,kl->ij", win, k) ** 2)


@program(args=lambda: (_r(136, 16),))
def tapered_signal_linear_ramp_then_fft(x):
    y = np.pad(x - x.mean(), (4, 4), mode="linear_ramp", end_values=0.0)
    return np.sum(np.abs(np.fft.rfft(y)) ** 2 * np.linspace(0, 1, 13))


@program(args=lambda: (_r(137, 5, 4),))
def mean_padded_moving_average(x):
    p = np.pad(x, ((2, 2), (0, 0)), mode="mean", stat_length=((2, 3), (1, 1)))
    sm = (p[:-4] + p[1:-3] + p[2:-2] + p[3:-1] + p[4:]) / 5
    return np.sum((sm - x) ** 2) + np.sum(np.pad(x, 1, mode="minimum") * 0.1)


@program(args=lambda: (_r(133, 6),))
def pad_reflect_odd_extrapolation(x):
    return np.sum(np.pad(x, 3, mode="reflect", reflect_type="odd") ** 2)


@program(args=lambda: (_r(80, 3, 2),))
def tile_repeat_with_arrays(x):
    a = np.tile(x, (2, 3))
    b = np.repeat(x, [1, 3, 2], axis=0)
    c = np.repeat(x, 2)
    return np.sum(a * np.arange(a.size).reshape(a.shape)) + np.sum(b ** 2 * np.arange(6)[:, None]) + np.sum(np.cumsum(c) * c)


# ---------------------------------------------------------------- masks in place
@program(args=lambda: (_r(81, 6, 5),))
def boolean_mask_inplace_chain(x):
    y = x.copy()
    y[y < 0] = 0.0
    y[y > 1] *= 0.5
    m = np.abs(x) < 0.5
    y[m] += x[m] ** 2
    y[:, 0][y[:, 0] > 0.2] -= 1.0
    return np.sum(y ** 2 * np.arange(5))


@program(args=lambda: (_r(82, 10), _r(83, 10)))
def copyto_putmask_place_on_traced(x, y):
    z = x.copy()
    np.copyto(z, y, where=x > 0)
    w = x * 1.0
    np.putmask(w, y < 0, y * 2)
    return np.sum(z ** 2 * np.arange(10)) + np.sum(w ** 3)


# ---------------------------------------------------------------- complex
@program(args=lambda: (_r(84, 3, 3), _r(85, 3, 3)))
def complex_hermitian_eigvalsh_and_det(re, im):
    z = re + 1j * im
    H = z @ z.conj().T + np.eye(3)
    w = np.linalg.eigvalsh(H)
    d = np.linalg.det(z)
    return np.sum(w ** 2) + np.abs(d) + np.angle(d) + np.real(np.trace(np.linalg.inv(H)))


@program(args=lambda: (_r(86, 6), _r(87, 6)))
def complex_polar_roundtrip_and_sqrt(r, th):
    z = np.abs(r) * np.exp(1j * th)
    w = np.sqrt(z) * np.conj(z)
    return np.sum(np.real(w) ** 2 + np.imag(w)) + np.sum(np.abs(z + 1j) ** 2) + np.sum(np.angle(w))


@program(args=lambda: (_r(88, 4, 4),))
def eigvals_complex_pairs_abs_and_real(a):
    w = np.linalg.eigvals(a)
    return np.sum(np.abs(w) ** 2) + np.sum(np.real(w) ** 3) + np.sum(np.imag(w) ** 2)


# ---------------------------------------------------------------- dtypes
@program(args=lambda: (_r(89, 6, dtype=np.float32), _r(90, 6, dtype=np.float32)))
def float32_with_python_floats_and_numpy_scalars(x, y):
    z = 0.5 * x + 2 * y + np.float32(0.1) * x * y
    w = np.exp(z) / (1.0 + np.exp(z))
    return np.sum(w * np.arange(6)) + np.float64(0.0) * 0 + np.sum(np.sqrt(x ** 2 + 1e-3))


@program(args=lambda: (_r(91, 8, dtype=np.float16),))
def float16_mean_cumsum_softmax(x):
    e = np.exp(x - x.max())
    p = e / e.sum()
    return np.mean(np.cumsum(p) * x) + np.std(x)


@program(args=lambda: (_r(92, 5), np.array([1, 0, 3, 2, 2])))
def integer_and_bool_intermediates(x, k):
    idx = (x > 0).astype(int) + k
    w = np.where(idx > 2, x, -x)
    c = np.count_nonzero(x > 0)
    return np.sum(w * idx) * c + np.sum(x[idx % 5]) + np.sum((x > 0) * x)


# ---------------------------------------------------------------- polynomials
@program(args=lambda: (_r(93, 4), np.linspace(-1, 1, 7)))
def numpy_polynomial_polyval_chebval(c, x):
    from numpy.polynomial import chebyshev as C
    from numpy.polynomial import polynomial as P
    return np.sum(P.polyval(x, c) ** 2) + np.sum(C.chebval(x, c))


@program(args=lambda: (_r(94, 6),))
def fmod_remainder_and_divmod(x):
    y = 3 * x
    return np.sum(np.fmod(y, 1.3)) + np.sum(np.remainder(y, 0.7) ** 2) + np.sum(np.divmod(y, 0.9)[1])


# ---------------------------------------------------------------- shape semantics of products
@program(args=lambda: (_r(95, 2, 3, 4), _r(96, 5, 4, 2)))
def dot_of_nd_arrays(a, b):
    return np.sum(np.tanh(np.dot(a, b)) * np.arange(2 * 3 * 5 * 2).reshape(2, 3, 5, 2))


@program(args=lambda: (_r(97, 2, 3, 4), _r(98, 5, 4)))
def inner_and_tensordot_axis_pairs(a, b):
    t = np.tensordot(a, b.T.reshape(4, 5), axes=([2], [0]))
    u = np.tensordot(a, a, axes=([1, 0], [1, 0]))
    return np.sum(np.inner(a, b) ** 2) + np.sum(t * 0.3) + np.trace(u)


@program(args=lambda: (_spd(99, 3)[None] + _r(100, 3, 3, 3) * 0.1, _r(101, 3, 3)))
def solve_stack_with_matrix_rhs_numpy2(A, B):
    X = np.linalg.solve(A, B)
    return np.sum(X ** 2 * np.arange(27).reshape(3, 3, 3))


@program(args=lambda: (_spd(102, 3)[None] + _r(103, 2, 3, 3) * 0.1, _r(104, 3)))
def solve_stack_with_one_vector_rhs(A, b):
    x = np.linalg.solve(A, b)
    return np.sum(x ** 2 * np.arange(6).reshape(2, 3))


@program(args=lambda: (_r(105, 3), _r(106, 2, 3, 4)))
def matmul_vector_with_batched_matrix(v, M):
    return np.sum((v @ M) ** 2) + np.sum(np.matmul(M, v[:, None] * np.ones(4)) if False else M @ np.ones(4) @ v)


@program(args=lambda: (_r(107, 4, 3), _r(108, 3, 4)))
def cross_with_axis_arguments(a, b):
    c1 = np.cross(a, b.T)
    c2 = np.cross(a.T, b, axisa=0, axisb=0, axisc=0)
    c3 = np.cross(a, b.T, axis=1)
    return np.sum(c1 * np.arange(12).reshape(4, 3)) + np.sum(c2 ** 2) + np.sum(c3[:, 1])


@program(args=lambda: (_r(109, 3, 4, 5),))
def trace_diagonal_with_axes_and_offsets(a):
    return (np.sum(np.trace(a, offset=1, axis1=1, axis2=2) ** 2) + np.sum(np.trace(a, offset=-1, axis1=0, axis2=2))
            + np.sum(np.diagonal(a, offset=-1, axis1=2, axis2=1) * np.arange(3)[None, :, None].reshape(3, 1) if False
                     else np.diagonal(a, offset=-1, axis1=2, axis2=1) ** 3))


@program(args=lambda: (_r(110, 2, 3), _r(111, 3, 2, 2)))
def kron_outer_of_mixed_ndims(a, b):
    return np.sum(np.kron(a, b) ** 2 * 0.1) + np.sum(np.outer(a, b[0]) * np.arange(24).reshape(6, 4))


@program(args=lambda: (_r(112, 4, 3), _r(113, 3, 5), _r(114, 2, 4, 5)))
def einsum_broadcast_ellipsis_and_optimize(a, b, c):
    return (np.einsum("ij,jk,...ik->...", a, b, c, optimize="greedy").sum()
            + np.einsum("...ij,...ij->...i", c, c).sum() + np.einsum("ij...,j->i...", c.transpose(1, 2, 0), np.ones(5)).sum()
            + np.einsum("ik,kj->ji", a, b, optimize=True).sum() ** 2)


# ---------------------------------------------------------------- in-place methods
@program(args=lambda: (_r(115, 8),))
def ndarray_sort_in_place_on_copy(x):
    y = x.copy()
    y.sort()
    z = x.reshape(2, 4).copy()
    z.sort(axis=0)
    return np.sum(y * np.arange(8)) + np.sum(z[1] ** 2)


@program(args=lambda: (_r(116, 5), _r(117, 3)))
def repeated_index_augmented_assignment(x, v):
    y = x.copy()
    y[[0, 0, 2]] += v
    y[np.array([1, 1])] *= v[:2]
    return np.sum(y * np.arange(1, 6))


@program(args=lambda: (_r(118, 4, 4),))
def write_through_transpose_and_strided_views(x):
    y = x.copy()
    y.T[0] = y[0] * 2
    y[::2, 1::2] = -y[1::2, ::2]
    d = y.reshape(16)
    d[::5] += 1.0
    return np.sum(y ** 2 * np.arange(16).reshape(4, 4))


@program(args=lambda: (_r(119, 6),))
def explicit_out_on_traced_arrays(x):
    y = x.copy()
    np.multiply(y, 2.0, out=y)
    np.exp(y, out=y)
    z = np.empty_like(y) + 0.0 * y
    np.add(y, x, out=z)
    return np.sum(z * np.arange(6))


# ---------------------------------------------------------------- interp / signal edges
@program(args=lambda: (_r(120, 6), np.array([-0.5, 0.3])))
def interp_with_traced_left_right(fp, lr):
    xp = np.linspace(0, 1, 6)
    xq = np.array([-1.0, 0.1, 0.5, 0.9, 2.0])
    return np.sum(np.interp(xq, xp, fp, left=lr[0], right=lr[1]) ** 2)


@program(args=lambda: (_r(121, 4), _r(122, 9)))
def convolve_short_first_and_complex_correlate(a, v):
    z = a + 1j * a[::-1]
    w = v[:4] - 1j * v[4:8]
    return (np.sum(np.convolve(a, v) ** 2) + np.sum(np.convolve(a, v, mode="valid"))
            + np.sum(np.abs(np.correlate(z, w, mode="full")) ** 2) + np.real(np.correlate(w, z)[0]))


@program(args=lambda: (_r(123, 12),))
def fft_variants_n_norm_shift(x):
    a = np.fft.fft(x, n=8, norm="forward")
    b = np.fft.ifft(x, n=16, norm="ortho")
    c = np.fft.irfft(np.fft.rfft(x)[:5], n=9)
    d = np.fft.fftshift(np.fft.fft2(x.reshape(3, 4), s=(4, 6)), axes=1)
    e = np.fft.hfft(x[:5] + 0j, n=7)
    f = np.fft.ihfft(x)
    return (np.sum(np.abs(a) ** 2) + np.sum(np.real(b) * np.arange(16)) + np.sum(c ** 2)
            + np.sum(np.abs(d)) + np.sum(e * np.arange(7)) + np.sum(np.imag(f)))


@program(args=lambda: (_r(124, 4, 5), np.cumsum(_u(125, 5))))
def gradient_nonuniform_2d_axis_tuple_edge2(f, xs):
    gy, gx = np.gradient(f, 0.5, xs, edge_order=2)
    gx1 = np.gradient(f, xs, axis=1)
    return np.sum(gx ** 2) + np.sum(gy * gx) + np.sum(gx1 * np.arange(5))


@program(args=lambda: (_r(126, 6, 3), _u(127, 6)))
def cov_average_weighted_rowvar_false(X, w):
    C = np.cov(X, rowvar=False, aweights=w, ddof=0)
    m, sw = np.average(X, axis=0, weights=np.stack([w, w, w], axis=1), returned=True)
    R = np.corrcoef(X.T)
    return np.trace(C) + np.sum(m ** 2) + np.sum(sw) + np.sum(R ** 2)


# ---------------------------------------------------------------- truncated pseudo-inverses
def _with_singular_values(seed, m, n, svals):
    r = rng(1300 + seed)
    U = np.linalg.qr(r.standard_normal((m, m)))[0]
    V = np.linalg.qr(r.standard_normal((n, n)))[0]
    S = np.zeros((m, n))
    S[np.arange(len(svals)), np.arange(len(svals))] = svals
    return U @ S @ V.T


@program(args=lambda: (_with_singular_values(1, 6, 4, [3.0, 1.0, 0.3, 0.02]), _r(130, 6)))
def truncated_svd_regularised_lstsq(A, y):
    coef = np.linalg.lstsq(A, y, rcond=0.05)[0]
    return np.sum((A @ coef - y) ** 2) + 0.1 * coef @ coef


@program(args=lambda: (np.linspace(0, 1, 9) + 0.01 * np.cos(np.arange(9)), np.sin(3 * np.linspace(0, 1, 9))))
def polyfit_with_rcond_regularisation(x, y):
    c = np.polyfit(x, y, 5, rcond=0.02)
    return np.sum((np.polyval(c, x) - y) ** 2) + np.sum(c ** 2) * 1e-3


@program(args=lambda: (_with_singular_values(2, 5, 5, [4.0, 2.0, 1.0, 0.1, 0.05]),))
def pinv_rtol_truncated_projection(A):
    P = np.linalg.pinv(A, rtol=0.1)
    return np.sum((A @ P) * np.arange(25).reshape(5, 5)) + np.sum(P ** 2)


@program(args=lambda: (_spd(131, 4) + np.triu(_r(132, 4, 4), 1),))
def pinv_hermitian_reads_the_lower_triangle(K):
    P = np.linalg.pinv(K, hermitian=True)
    return np.sum(P * np.cos(np.arange(16)).reshape(4, 4)) + np.trace(P @ P)
