"""Domain programs as scientists write them: epidemics, kinetics, curve
fitting, finance, reinforcement learning, embeddings, t-SNE, volume
rendering -- each a small loss with the idioms of its field."""
import numpy as np
import scipy.special as sp

from . import program, rng


@program(args=lambda: (np.array([0.3, 0.1]), np.array([5.0, 9.0, 16.0, 25.0, 33.0, 38.0])), argnums=(0,))
def sir_epidemic_euler_fit(params, observed_infected):
    beta, gamma = params
    S, I, R = 990.0, 10.0, 0.0
    N = 1000.0
    loss = 0.0
    day = 0
    for t in range(60):
        dS = -beta * S * I / N
        dR = gamma * I
        S, I, R = S + 0.1 * dS, I + 0.1 * (-dS - dR), R + 0.1 * dR
        if t % 10 == 9:
            loss += (np.log(I) - np.log(observed_infected[day])) ** 2
            day += 1
    return loss


@program(args=lambda: (np.array([1.2, 0.4]), np.array([0.5, 1.0, 2.0, 4.0, 8.0]), np.array([0.4, 0.6, 0.8, 0.9, 1.0])),
         argnums=(0,))
def michaelis_menten_fit(log_params, S, v):
    vmax, km = np.exp(log_params)
    return np.sum((vmax * S / (km + S) - v) ** 2)


@program(args=lambda: (np.array([10.0, 5000.0]), np.array([300.0, 320.0, 340.0, 360.0]), np.array([1e-3, 4e-3, 1.2e-2, 3.5e-2])),
         argnums=(0,))
def arrhenius_log_fit(params, T, k):
    lnA, Ea_over_R = params
    return np.sum((lnA - Ea_over_R / T - np.log(k)) ** 2) / 1e3


@program(args=lambda: (np.array([1.0, 0.3, 0.5, 2.0, 0.6, 0.2]), np.linspace(-1, 4, 30)), argnums=(0,))
def spectroscopy_two_gaussian_peaks(p, x):
    a1, m1, s1, a2, m2, s2 = p
    model = a1 * np.exp(-0.5 * ((x - m1) / s1) ** 2) + a2 * np.exp(-0.5 * ((x - m2) / s2) ** 2)
    data = 1.1 * np.exp(-0.5 * ((x - 0.2) / 0.4) ** 2) + 1.8 * np.exp(-0.5 * ((x - 2.1) / 0.5) ** 2)
    return np.sum((model - data) ** 2)


@program(args=lambda: (rng(950).standard_normal(7) * 0.3, np.linspace(0, 2 * np.pi, 25)), argnums=(0,))
def fourier_series_fit(coef, t):
    k = np.arange(1, 4)
    model = coef[0] + np.sin(np.outer(t, k)) @ coef[1:4] + np.cos(np.outer(t, k)) @ coef[4:]
    return np.mean((model - np.sign(np.sin(t))) ** 2)


@program(args=lambda: (np.array([0.2, 0.3]), np.array([100.0, 95.0, 105.0]), np.array([0.5, 1.0, 2.0])),
         argnums=(0,))
def black_scholes_calibration_ndtr(params, K, T):
    sigma, r = params
    S = 100.0
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    price = S * sp.ndtr(d1) - K * np.exp(-r * T) * sp.ndtr(d2)
    return np.sum((price - np.array([12.0, 20.0, 30.0])) ** 2)


@program(args=lambda: (np.array(100.0), np.array(0.25)), mode="hessian")
def black_scholes_gamma_hessian(S, sigma):
    K, T, r = 100.0, 1.0, 0.01
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    return S * sp.ndtr(d1) - K * np.exp(-r * T) * sp.ndtr(d2)


@program(args=lambda: (rng(951).standard_normal(4) * 0.1, rng(952).standard_normal((30, 4)) * 0.02 + 0.005))
def portfolio_mean_variance_softmax(logits, returns):
    w = np.exp(logits) / np.sum(np.exp(logits))
    mu = returns.mean(axis=0)
    Sigma = np.cov(returns, rowvar=False)
    return -(w @ mu) + 3.0 * w @ Sigma @ w


@program(args=lambda: (rng(953).standard_normal((3, 4)) * 0.3, rng(954).standard_normal((6, 4)),
                       rng(955).integers(0, 3, 6), rng(956).standard_normal(6)))
def reinforce_policy_gradient(theta, states, actions, returns_):
    logits = states @ theta.T
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    chosen = logp[np.arange(len(actions)), actions]
    baseline = np.mean(returns_)
    return -np.mean(chosen * (returns_ - baseline))


@program(args=lambda: (rng(957).standard_normal((5, 3)) * 0.3, rng(958).standard_normal((5, 3)) * 0.3,
                       np.array([0, 1, 2, 2]), np.array([1, 2, 3, 4]), rng(959).integers(0, 5, (4, 3))))
def word2vec_negative_sampling(W_in, W_out, centers, contexts, negatives):
    v = W_in[centers]
    u_pos = W_out[contexts]
    u_neg = W_out[negatives]                       # (4, 3 negatives, dim); rows repeat
    pos = sp.log_expit(np.sum(v * u_pos, axis=1))
    neg = np.sum(sp.log_expit(-np.einsum("bd,bkd->bk", v, u_neg)), axis=1)
    return -np.mean(pos + neg)


@program(args=lambda: (rng(960).standard_normal((6, 2)),))
def tsne_kl_loss(Y):
    X = np.random.default_rng(7).standard_normal((6, 5))
    D = np.sum((X[:, None] - X[None]) ** 2, axis=-1)
    P = np.exp(-D) * (1 - np.eye(6))
    P = P / P.sum()
    dY = np.sum((Y[:, None] - Y[None]) ** 2, axis=-1)
    Q = (1 / (1 + dY)) * (1 - np.eye(6))
    Q = Q / Q.sum()
    mask = ~np.eye(6, dtype=bool)
    return np.sum(P[mask] * np.log(P[mask] / Q[mask]))


@program(args=lambda: (rng(961).uniform(0.1, 2.0, 8), rng(962).uniform(0, 1, (8, 3))))
def nerf_volume_rendering_cumprod(sigma, colors):
    delta = 0.1
    alpha = 1 - np.exp(-sigma * delta)
    trans = np.cumprod(np.concatenate([[1.0], 1 - alpha[:-1] + 1e-10]))
    weights = alpha * trans
    rgb = weights @ colors
    return np.sum((rgb - np.array([0.5, 0.3, 0.2])) ** 2)


@program(args=lambda: (rng(963).standard_normal((3, 2)), rng(964).standard_normal((20, 2))))
def soft_kmeans_softmin(centroids, X):
    d2 = np.sum((X[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
    r = np.exp(-d2 / 0.5)
    r = r / r.sum(axis=1, keepdims=True)
    return np.sum(r * d2)


@program(args=lambda: (rng(965).standard_normal((4, 4)) * 0.1, rng(966).integers(0, 4, 8), rng(967).integers(0, 2, 8),
                       rng(968).standard_normal(8), rng(969).integers(0, 4, 8)))
def q_learning_td_loss(Q, s, a, rwd, s_next):
    a = a % 4
    target = rwd + 0.9 * np.max(Q[s_next], axis=1)
    pred = Q[s, a]
    return np.mean((pred - target) ** 2)


@program(args=lambda: (np.array([0.8, 0.05]), np.linspace(0, 10, 11)), argnums=(0,))
def pharmacokinetics_one_compartment(params, t):
    ka, ke = params
    dose, V = 100.0, 10.0
    conc = dose * ka / (V * (ka - ke)) * (np.exp(-ke * t) - np.exp(-ka * t))
    obs = 9.0 * (np.exp(-0.06 * t) - np.exp(-0.9 * t))
    return np.sum((conc - obs) ** 2)


@program(args=lambda: (np.array([0.5, 2.0]),))
def advection_upwind_roll(params):
    c, width = params
    x = np.linspace(0, 1, 20, endpoint=False)
    u = np.exp(-((x - 0.3) * width * 5) ** 2)
    for _ in range(10):
        u = u - c * 0.5 * (u - np.roll(u, 1))
    return np.sum(u * x)
