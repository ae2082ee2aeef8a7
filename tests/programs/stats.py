"""Statistical programs: Gaussian processes, Bayesian likelihoods (with
scipy.special where it is a ufunc, tapestry.numpy where SciPy would convert),
mixtures, HMMs, Kalman filters, robust and order statistics."""
import numpy as np
import scipy.special as sp

import tapestry.numpy as tnp

from . import program, rng


def _gp_data():
    r = rng(100)
    X = np.sort(r.uniform(-2, 2, 8))
    y = np.sin(2 * X) + 0.1 * r.standard_normal(8)
    return X, y


@program(args=lambda: (np.array([0.3, -0.2, -1.0]),) + _gp_data())
def gp_marginal_likelihood_cholesky(log_params, X, y):
    ell, sf, sn = np.exp(log_params)
    d2 = (X[:, None] - X[None, :]) ** 2
    K = sf ** 2 * np.exp(-0.5 * d2 / ell ** 2) + (sn ** 2 + 1e-6) * np.eye(len(X))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(L))) + 0.5 * len(X) * np.log(2 * np.pi)


@program(args=lambda: (np.array([0.3, -0.2, -1.0]),) + _gp_data())
def gp_slogdet_inv(log_params, X, y):
    ell, sf, sn = np.exp(log_params[0]), np.exp(log_params[1]), np.exp(log_params[2])
    K = sf ** 2 * np.exp(-0.5 * np.subtract.outer(X, X) ** 2 / ell ** 2) + sn ** 2 * np.eye(len(X))
    sign, logdet = np.linalg.slogdet(K)
    return 0.5 * y @ np.linalg.inv(K) @ y + 0.5 * logdet


@program(args=lambda: (np.array([0.1, 0.5]),) + _gp_data())
def gp_predictive_mean_solve(log_params, X, y):
    ell, sn = np.exp(log_params)
    Xs = np.linspace(-2, 2, 5)
    k = lambda a, b: np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / ell ** 2)
    K = k(X, X) + sn ** 2 * np.eye(len(X))
    mean = k(Xs, X) @ np.linalg.solve(K, y)
    return np.sum((mean - np.sin(2 * Xs)) ** 2)


def _logreg_data():
    r = rng(101)
    X = r.standard_normal((20, 3))
    y = (X @ np.array([1.0, -2.0, 0.5]) + 0.3 * r.standard_normal(20) > 0).astype(float)
    return X, y


@program(args=lambda: (rng(102).standard_normal(3) * 0.1,) + _logreg_data(), argnums=(0,))
def bayes_logistic_expit(w, X, y):
    p = sp.expit(X @ w)
    loglik = np.sum(y * np.log(p) + (1 - y) * np.log1p(-p))
    logprior = -0.5 * np.sum(w ** 2)
    return -(loglik + logprior)


@program(args=lambda: (rng(102).standard_normal(3) * 0.1,) + _logreg_data(), argnums=(0,))
def bayes_logistic_log_expit(w, X, y):
    z = X @ w
    return -np.sum(y * sp.log_expit(z) + (1 - y) * sp.log_expit(-z))


@program(args=lambda: (np.array([0.2, 0.1]), rng(103).poisson(3.0, 15).astype(float), rng(104).standard_normal(15)),
         argnums=(0,))
def poisson_regression_gammaln(beta, counts, x):
    lam = np.exp(beta[0] + beta[1] * x)
    return -np.sum(counts * np.log(lam) - lam - sp.gammaln(counts + 1))


@program(args=lambda: (np.array([1.5, 0.7]), rng(105).gamma(2.0, 1.5, 12)), argnums=(0,))
def gamma_likelihood_gammaln(log_ab, x):
    a, b = np.exp(log_ab)
    ll = a * np.log(b) - sp.gammaln(a) + (a - 1) * np.log(x) - b * x
    return -np.sum(ll)


@program(args=lambda: (np.array([0.5, 1.0, 2.0]), rng(106).dirichlet([1, 2, 3], 10)), argnums=(0,))
def dirichlet_loglik(log_alpha, P):
    alpha = np.exp(log_alpha)
    return -np.sum(sp.gammaln(alpha.sum()) - sp.gammaln(alpha).sum() + ((alpha - 1) * np.log(P)).sum(axis=1))


@program(args=lambda: (np.array([0.0, 0.3]), rng(107).standard_t(4, 15)), argnums=(0,))
def student_t_loglik(params, x):
    mu, log_s = params
    nu = 4.0
    s = np.exp(log_s)
    z = (x - mu) / s
    ll = sp.gammaln((nu + 1) / 2) - sp.gammaln(nu / 2) - 0.5 * np.log(nu * np.pi) - log_s \
        - (nu + 1) / 2 * np.log1p(z ** 2 / nu)
    return -np.sum(ll)


@program(args=lambda: (rng(108).standard_normal(3), rng(109).standard_normal(3) * 0.3 - 1,
                       np.array([0.2, 0.5, 0.3]), rng(110).standard_normal(12)), argnums=(0, 1))
def gmm_tnp_logsumexp(means, log_sds, weights, x):
    sds = np.exp(log_sds)
    comp = -0.5 * ((x[:, None] - means) / sds) ** 2 - np.log(sds) - 0.5 * np.log(2 * np.pi)
    return -np.sum(tnp.logsumexp(comp + np.log(weights), axis=1))


@program(args=lambda: (rng(108).standard_normal(3), np.array([0.2, 0.5, 0.3]), rng(110).standard_normal(12)),
         argnums=(0,))
def gmm_scipy_logsumexp(means, weights, x):
    comp = -0.5 * (x[:, None] - means) ** 2 + np.log(weights)
    return -np.sum(sp.logsumexp(comp, axis=1))


@program(args=lambda: (rng(111).standard_normal((2, 2)), rng(112).standard_normal((2, 2)),
                       rng(113).integers(0, 2, 7)))
def hmm_forward_algorithm(trans_logits, emit_logits, obs):
    logA = trans_logits - tnp.logsumexp(trans_logits, axis=1, keepdims=True)
    logB = emit_logits - tnp.logsumexp(emit_logits, axis=1, keepdims=True)
    alpha = np.log(np.array([0.5, 0.5])) + logB[:, obs[0]]
    for t in range(1, len(obs)):
        alpha = tnp.logsumexp(alpha[:, None] + logA, axis=0) + logB[:, obs[t]]
    return -tnp.logsumexp(alpha)


@program(args=lambda: (rng(114).standard_normal((2, 2)), rng(115).standard_normal((3, 2)),
                       rng(116).integers(0, 3, 6)))
def hmm_scaled_forward(A_logits, B_logits, obs):
    A = np.exp(A_logits) / np.exp(A_logits).sum(axis=1, keepdims=True)
    B = np.exp(B_logits) / np.exp(B_logits).sum(axis=0, keepdims=True)
    alpha = np.ones(2) / 2 * B[obs[0]]
    loglik = 0.0
    for o in obs[1:]:
        c = alpha.sum()
        loglik += np.log(c)
        alpha = (alpha / c) @ A * B[o]
    return -(loglik + np.log(alpha.sum()))


@program(args=lambda: (np.array([-1.0, -0.5]), rng(117).standard_normal(10).cumsum()), argnums=(0,))
def kalman_filter_1d(log_qr, ys):
    q, r = np.exp(log_qr)
    m, P = 0.0, 1.0
    nll = 0.0
    for y in ys:
        P = P + q
        S = P + r
        K = P / S
        nll += 0.5 * (np.log(2 * np.pi * S) + (y - m) ** 2 / S)
        m = m + K * (y - m)
        P = (1 - K) * P
    return nll


@program(args=lambda: (rng(118).standard_normal((2, 2)) * 0.3 + np.eye(2) * 0.8, rng(119).standard_normal((6, 2))))
def kalman_filter_matrix(F, ys):
    Q, R, H = 0.1 * np.eye(2), 0.2 * np.eye(2), np.eye(2)
    m, P = np.zeros(2), np.eye(2)
    nll = 0.0
    for y in ys:
        m, P = F @ m, F @ P @ F.T + Q
        S = H @ P @ H.T + R
        v = y - H @ m
        nll = nll + 0.5 * (v @ np.linalg.solve(S, v) + np.log(np.linalg.det(S)))
        K = P @ H.T @ np.linalg.inv(S)
        m, P = m + K @ v, (np.eye(2) - K @ H) @ P
    return nll


@program(args=lambda: (rng(120).standard_normal(2), np.array([[1.0, 0.3], [0.3, 0.5]]), rng(121).standard_normal((10, 2))))
def mvn_logpdf(mu, Sigma, X):
    d = X - mu
    L = np.linalg.cholesky(Sigma)
    z = np.linalg.solve(L, d.T)
    return -np.sum(-0.5 * np.sum(z ** 2, axis=0) - np.log(np.diag(L)).sum() - np.log(2 * np.pi))


@program(args=lambda: (rng(122).standard_normal(3), rng(123).standard_normal(3) * 0.2))
def gaussian_kl(mu, log_sigma):
    return np.sum(0.5 * (np.exp(2 * log_sigma) + mu ** 2 - 1) - log_sigma)


@program(args=lambda: (rng(124).standard_normal(3) * 0.1, rng(125).standard_normal((15, 3)),
                       (rng(126).random(15) > 0.5).astype(float)), argnums=(0,))
def probit_regression_ndtr(w, X, y):
    z = X @ w
    return -np.sum(y * sp.log_ndtr(z) + (1 - y) * sp.log_ndtr(-z))


@program(args=lambda: (rng(127).standard_normal(4) * 0.5,))
def erf_activation_sum(x):
    return np.sum(sp.erf(x) * x + sp.erfc(x) ** 2)


@program(args=lambda: (rng(128).standard_normal(11),))
def pinball_quantile_loss(pred):
    y = np.linspace(-1.5, 1.5, 11)
    r = y - pred
    tau = 0.8
    return np.sum(np.maximum(tau * r, (tau - 1) * r))


@program(args=lambda: (rng(129).standard_normal(9),))
def median_absolute_deviation(x):
    med = np.median(x)
    return np.median(np.abs(x - med)) + med ** 2


@program(args=lambda: (rng(130).standard_normal(20),))
def trimmed_mean_sort(x):
    s = np.sort(x)
    return np.mean(s[2:-2]) ** 2 + s[-1]


@program(args=lambda: (rng(131).standard_normal(21),))
def percentile_spread(x):
    q1, q3 = np.percentile(x, [25, 75])
    return (q3 - q1) + np.quantile(x, 0.9)


@program(args=lambda: (rng(132).standard_normal((12, 3)),))
def covariance_corrcoef(X):
    C = np.cov(X, rowvar=False)
    R = np.corrcoef(X.T)
    return np.sum(C ** 2) + np.sum(np.triu(R, 1) ** 2)


@program(args=lambda: (np.array([0.4]), rng(133).standard_normal(15), np.linspace(-2, 2, 7)))
def kernel_density_estimate(log_bw, data, grid):
    h = np.exp(log_bw[0])
    dens = np.mean(np.exp(-0.5 * ((grid[:, None] - data[None, :]) / h) ** 2), axis=1) / (h * np.sqrt(2 * np.pi))
    return -np.sum(np.log(dens))


@program(args=lambda: (rng(134).uniform(0.5, 1.5, 30), rng(135).uniform(-2, 2, 30)), argnums=(0,))
def histogram_weights(w, data):
    hist, edges = np.histogram(data, bins=5, range=(-2, 2), weights=w)
    return np.sum(hist ** 2)


@program(args=lambda: (rng(136).uniform(0.5, 1.5, 12), rng(137).integers(0, 4, 12)), argnums=(0,))
def bincount_group_sums(w, groups):
    s = np.bincount(groups, weights=w, minlength=4)
    return np.sum(s ** 2) + s[0] * s[1]


@program(args=lambda: (rng(138).standard_normal(10), rng(139).integers(0, 3, 10)), argnums=(0,))
def group_means_boolean_masks(x, groups):
    loss = 0.0
    for g in range(3):
        xs = x[groups == g]
        loss += np.mean(xs) ** 2 if len(xs) else 0.0
    return loss


@program(args=lambda: (rng(140).standard_normal(8), np.array([1.0, 2.0, 2.0, 3.0, 1.0, 1.0, 4.0, 2.0])),
         argnums=(0,))
def average_with_weights(x, w):
    return np.average(x ** 2, weights=w) + np.var(x)


@program(args=lambda: (rng(141).standard_normal(10) + 2,))
def nan_reductions_masked(x):
    y = np.where(x > 2.5, np.nan, x)
    return np.nansum(y ** 2) + np.nanmean(y) + np.nanmax(y)


@program(args=lambda: (rng(142).standard_normal(3) * 0.3, rng(143).standard_normal(12).cumsum()), argnums=(0,))
def arma_residual_loop(phi, y):
    loss = 0.0
    for t in range(3, len(y)):
        pred = phi[0] * y[t - 1] + phi[1] * y[t - 2] + phi[2] * y[t - 3]
        loss += (y[t] - pred) ** 2
    return loss


@program(args=lambda: (np.array([0.3, -0.4]), rng(144).standard_normal(15)), argnums=(0,))
def softplus_loglik_stable(theta, x):
    sigma = np.logaddexp(0, theta[1]) + 1e-3
    return np.sum(0.5 * ((x - theta[0]) / sigma) ** 2 + np.log(sigma))


@program(args=lambda: (rng(145).uniform(0.2, 0.8, 6), rng(146).integers(0, 10, 6).astype(float)), argnums=(0,))
def binomial_xlogy(p, k):
    n = 10.0
    return -np.sum(sp.xlogy(k, p) + sp.xlog1py(n - k, -p))


@program(args=lambda: (np.array([0.3, -0.2, -1.0]),) + _gp_data())
def gp_scipy_linalg_cho_solve(log_params, X, y):
    import scipy.linalg as sla
    ell, sf, sn = np.exp(log_params)
    K = sf ** 2 * np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / ell ** 2) + sn ** 2 * np.eye(len(X))
    c, low = sla.cho_factor(K)
    alpha = sla.cho_solve((c, low), y)
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(c)))


@program(args=lambda: (np.array([0.3, -0.2, -1.0]),) + _gp_data())
def gp_tapestry_scipy_linalg(log_params, X, y):
    import tapestry.scipy.linalg as tsla
    ell, sf, sn = np.exp(log_params)
    K = sf ** 2 * np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / ell ** 2) + sn ** 2 * np.eye(len(X))
    L = np.linalg.cholesky(K)
    z = tsla.solve_triangular(L, y, lower=True)
    c, low = tsla.cho_factor(K, lower=True)
    alpha = tsla.cho_solve((c, low), y)
    return 0.5 * z @ z + 0.01 * np.sum(alpha ** 2) + np.sum(np.log(np.diag(L)))
