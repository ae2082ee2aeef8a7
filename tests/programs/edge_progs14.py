"""Round-14 programs: scipy.special at its special points (gammaln, digamma,
betaln, expit, erf, xlogy, logsumexp with -inf and b), tapestry.scipy.stats
log-densities, np.linalg qr / det / inv / pinv / matrix_power / norm(ord),
cumprod / diff / gradient / trapezoid, convolve / correlate, sort / argsort /
take_along_axis / percentile, clip / maximum ties, masked softmax with -inf,
complex losses (abs, angle, real / imag, fft), int and bool arrays mixed in,
einsum with repeated indices and ellipsis, 0-d and empty broadcasting,
float32 end to end, tp.optimize and pytrees -- differentiated unchanged by
tapestry (tests/test_user_programs14.py)."""
import dataclasses
from typing import NamedTuple

import numpy as np
import scipy.special as sp

import tapestry as tp
import tapestry.numpy as tnp
import tapestry.scipy.special as tsp
import tapestry.scipy.stats as tst

from . import Program, rng

#: name -> Program, a registry of its own (tests/test_user_programs14.py).
PROGRAMS: dict = {}


def program(args, mode="grad", argnums=None):
    """Register the decorated loss in :data:`PROGRAMS` (see programs.program)."""
    def deco(fn):
        PROGRAMS[fn.__name__] = Program(fn.__name__, fn, args, mode, argnums, module=fn.__module__)
        return fn
    return deco


def _r(seed, *shape, dtype=np.float64):
    return rng(1400 + seed).standard_normal(shape).astype(dtype)


def _u(seed, *shape, lo=0.2, hi=1.0, dtype=np.float64):
    return rng(1400 + seed).uniform(lo, hi, shape).astype(dtype)


def _spd(seed, n):
    a = _r(seed, n, n)
    return a @ a.T + n * np.eye(n)


# ---------------------------------------------------------------- scipy.special
@program(args=lambda: (np.array([-2.5, -0.5, 0.5, 1.0, 2.0, 7.5]),))
def gammaln_negative_half_integers_and_one_two(x):
    """gammaln at negative non-integers (log|Γ|), at 1 and 2 (zeros)."""
    return np.sum(sp.gammaln(x) * np.arange(1.0, 7.0))


@program(args=lambda: (np.array([2e-2, 0.5, 1.0, 1.4616321449683622, 30.0]),))
def digamma_near_zero_and_at_its_minimum(x):
    return np.sum(sp.digamma(x) ** 2 * 1e-3) + np.sum(sp.digamma(x) * x)


@program(args=lambda: (np.array([0.5, 1.0, 2.0]), np.array([0.5, 3.0, 1e-2])))
def betaln_beta_binomial_loglik(a, b):
    k = np.array([0, 2, 5])
    n = 5
    return -np.sum(sp.betaln(k + a, n - k + b) - sp.betaln(a, b) - np.log(n + 1) - sp.betaln(n - k + 1, k + 1))


@program(args=lambda: (np.array([-40.0, -5.0, 0.0, 5.0, 40.0]),))
def expit_and_log_expit_saturated(z):
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    return -np.sum(y * sp.log_expit(z) + (1 - y) * sp.log_expit(-z)) + np.sum(sp.expit(z) ** 2)


@program(args=lambda: (np.array([0.0, 1e-8, -0.3, 2.0, 6.0]),))
def erf_erfc_at_zero_and_tails(x):
    return np.sum(sp.erf(x) * x) + np.sum(np.log(sp.erfc(x)))


@program(args=lambda: (np.array([0.2, 0.5, 0.3]), np.array([0.0, 0.4, 0.6])), argnums=(0,))
def xlogy_kl_divergence_with_zero_target(q, p):
    """KL(p||q) with p containing an exact 0: xlogy(0, .) is 0, its q-grad 0."""
    return np.sum(sp.xlogy(p, p) - sp.xlogy(p, q))


@program(args=lambda: (np.array([0.0, 0.4, 0.6]),))
def xlogy_entropy_grad_at_positive_entries(p):
    return -np.sum(sp.xlogy(p + 0.1, p + 0.1))


@program(args=lambda: (np.array([0.3, 1.2, -0.4]),))
def xlog1py_bernoulli_loglik(t):
    p = sp.expit(t)
    y = np.array([0.0, 1.0, 1.0])
    return -np.sum(sp.xlogy(y, p) + sp.xlog1py(1 - y, -p))


@program(args=lambda: (np.array([1.0, -np.inf, 2.0, -np.inf]),))
def tnp_logsumexp_with_minus_inf_entries(z):
    """-inf entries are excluded; their gradient is exactly 0."""
    zz = np.where(np.isfinite(z), z, -np.inf)
    return tnp.logsumexp(zz) + np.sum(np.where(np.isfinite(z), z, 0.0) ** 2)


@program(args=lambda: (np.array([0.5, -1.0, 2.0]), np.array([0.3, 0.2, 0.5])))
def tnp_logsumexp_b_weights_and_axis_keepdims(a, w):
    A = a[:, None] + np.array([[0.0, 1.0]])
    return np.sum(tnp.logsumexp(A, axis=0, b=w[:, None], keepdims=True)) + tnp.logsumexp(a, b=w)


@program(args=lambda: (np.array([2.0, 3.5, 0.7]),))
def polygamma_trigamma_fisher_information(a):
    return np.sum(tsp.polygamma(1, a)) - np.sum(sp.gammaln(a)) + tsp.multigammaln(a[0] + 2, 2)


@program(args=lambda: (np.array([0.3, 1.5, 4.0]),))
def gammainc_gammaincc_cdf_mix(x):
    return np.sum(sp.gammainc(2.5, x) * sp.gammaincc(1.5, x + 0.1))


@program(args=lambda: (np.array([-3.0, 0.0, 2.5]),))
def ndtr_log_ndtr_probit_loglik(z):
    y = np.array([0, 1, 1])
    return -np.sum(np.where(y == 1, sp.log_ndtr(z), sp.log_ndtr(-z))) + np.sum(sp.ndtr(z))


@program(args=lambda: (np.array([0.1, 0.5, 0.9]),))
def logit_of_probabilities_and_back(p):
    return np.sum(sp.expit(2 * sp.logit(p)) ** 2) + np.sum(sp.logit(p))


@program(args=lambda: (np.array([0.3, 2.0, 5.0]),))
def i0e_i1e_von_mises_lognorm(k):
    return np.sum(np.log(sp.i0e(k)) + k) + np.sum(sp.i1e(k) / sp.i0e(k))


@program(args=lambda: (np.array([1.5, 0.5, 3.0]),))
def softmax_log_softmax_tapestry_scipy_special(z):
    return np.sum(tsp.softmax(z) * np.array([1.0, 2.0, 3.0])) + tsp.log_softmax(z)[1]


@program(args=lambda: (np.array([0.0, 0.5, 2.0]),))
def entr_rel_entr_kl_div(p):
    q = np.array([0.3, 0.3, 0.4])
    return np.sum(sp.entr(p + 0.1)) + np.sum(sp.rel_entr(p + 0.1, q)) + np.sum(sp.kl_div(p + 0.2, q))


# ---------------------------------------------------------------- scipy.stats
@program(args=lambda: (np.array([0.2]), np.array([-0.3])))
def tst_norm_logpdf_logcdf_censored(mu, log_s):
    x = np.array([0.1, -1.0, 2.0, 0.5])
    cens = np.array([False, False, True, True])
    s = np.exp(log_s[0])
    ll = np.where(cens, tst.norm.logsf(x, mu[0], s), tst.norm.logpdf(x, mu[0], s))
    return -np.sum(ll)


@program(args=lambda: (np.array([1.2, 0.4]),))
def tst_gamma_and_beta_logpdf_shapes(ab):
    x = np.array([0.2, 0.5, 0.8])
    return -np.sum(tst.beta.logpdf(x, ab[0], ab[1] + 1)) - np.sum(tst.gamma.logpdf(x + 1, ab[0] + 1, scale=ab[1]))


@program(args=lambda: (np.array([0.5, 1.5]),))
def tst_t_logpdf_df_and_scale(th):
    x = np.array([-2.0, 0.0, 3.0])
    return -np.sum(tst.t.logpdf(x, np.exp(th[0]) + 1, loc=0.1, scale=np.exp(th[1])))


@program(args=lambda: (np.array([0.3, 2.0]),))
def tst_poisson_logpmf_with_zero_counts(th):
    k = np.array([0, 0, 3, 7])
    return -np.sum(tst.poisson.logpmf(k, np.exp(th[0]) * np.array([1.0, 2.0, 3.0, 4.0]) + th[1] ** 2))


@program(args=lambda: (np.array([0.4, -0.2]), np.array([[1.0, 0.3], [0.3, 2.0]])))
def tst_multivariate_normal_logpdf_mean_cov(m, C):
    X = _r(5, 6, 2)
    C = 0.5 * (C + C.T)
    return -np.sum(tst.multivariate_normal.logpdf(X, m, C))


@program(args=lambda: (np.array([1.5, 2.0, 0.7]),))
def tst_dirichlet_logpdf_concentration(alpha):
    x = np.array([0.2, 0.5, 0.3])
    return -tst.dirichlet.logpdf(x, alpha)


@program(args=lambda: (np.array([2.5]),))
def tst_chi2_logpdf_and_cdf(k):
    x = np.array([0.5, 2.0, 4.0])
    return np.sum(tst.chi2.logpdf(x, k[0])) + np.sum(tst.chi2.cdf(x * k[0], 2.5))


# ---------------------------------------------------------------- linalg
@program(args=lambda: (_r(10, 5, 3),))
def qr_reduced_q_projection_residual(A):
    Q, R = np.linalg.qr(A)
    y = np.arange(5.0)
    return np.sum((y - Q @ (Q.T @ y)) ** 2) + np.sum(np.log(np.abs(np.diag(R))))


@program(args=lambda: (_r(11, 4, 4) + 3 * np.eye(4),))
def qr_complete_mode_and_r_mode(A):
    Q, R = np.linalg.qr(A, mode="complete")
    r = np.linalg.qr(A, mode="r")
    return np.sum(Q[:, 0] * np.arange(4.0)) + np.sum(np.abs(r)) * 0.1 + np.sum(R ** 2)


@program(args=lambda: (_r(12, 3, 5),))
def qr_wide_matrix(A):
    Q, R = np.linalg.qr(A)
    return np.sum(R[:, :3] ** 2) + np.sum(Q[:, 0] * np.array([1.0, 2.0, 3.0])) ** 2


@program(args=lambda: (_r(13, 3, 3),))
def det_of_nonsymmetric_and_negative(A):
    return np.linalg.det(A) ** 2 + np.linalg.det(A @ A.T + np.eye(3))


@program(args=lambda: (_r(14, 2, 3, 3) + 2 * np.eye(3),))
def batched_det_inv_trace(A):
    return np.sum(np.linalg.det(A)) + np.sum(np.trace(np.linalg.inv(A), axis1=-2, axis2=-1))


@program(args=lambda: (_r(15, 5, 3),))
def pinv_tall_least_squares_fit(A):
    y = np.arange(5.0)
    x = np.linalg.pinv(A) @ y
    return np.sum((A @ x - y) ** 2) + np.sum(x ** 2)


@program(args=lambda: (_r(16, 3, 3) * 0.4 + np.eye(3),))
def matrix_power_negative_zero_and_large(A):
    return (np.sum(np.linalg.matrix_power(A, -2)) + np.sum(np.linalg.matrix_power(A, 0))
            + np.sum(np.linalg.matrix_power(A, 5)) * 0.1)


@program(args=lambda: (_r(17, 4, 3),))
def matrix_norms_every_ord(A):
    return (np.linalg.norm(A, 1) + np.linalg.norm(A, -1) + np.linalg.norm(A, np.inf)
            + np.linalg.norm(A, -np.inf) + np.linalg.norm(A, 2) + np.linalg.norm(A, -2)
            + np.linalg.norm(A, "fro") + np.linalg.norm(A, "nuc"))


@program(args=lambda: (_r(18, 5),))
def vector_norms_every_ord(x):
    return (np.linalg.norm(x, 1) + np.linalg.norm(x, 3) + np.linalg.norm(x, np.inf) + np.linalg.norm(x, -np.inf)
            + np.linalg.norm(x, 0.5) + np.linalg.norm(x, -2) + np.linalg.norm(x))


@program(args=lambda: (_r(19, 2, 3, 4),))
def norm_axis_tuple_and_keepdims(X):
    return (np.sum(np.linalg.norm(X, axis=(1, 2))) + np.sum(np.linalg.norm(X, ord=1, axis=(1, 2)))
            + np.sum(np.linalg.norm(X, axis=-1, keepdims=True) * X))


@program(args=lambda: (_r(20, 3, 3) + 3 * np.eye(3),))
def inv_of_inv_and_solve_matrix_rhs(A):
    B = np.linalg.inv(np.linalg.inv(A))
    return np.sum(B * np.arange(9.0).reshape(3, 3)) + np.sum(np.linalg.solve(A, np.eye(3)))


@program(args=lambda: (_spd(21, 3),))
def cholesky_of_spd_and_logdet(S):
    S = 0.5 * (S + S.T)
    L = np.linalg.cholesky(S)
    return 2 * np.sum(np.log(np.diag(L))) - np.linalg.slogdet(S)[1] * 0.5 + np.sum(L)


@program(args=lambda: (_r(22, 4, 2),))
def lstsq_solution_and_residuals(A):
    y = np.array([1.0, 0.0, 2.0, -1.0])
    x, res, rank, s = np.linalg.lstsq(A, y, rcond=None)
    return np.sum(x ** 2) + np.sum(res) + np.sum(s)


@program(args=lambda: (_r(23, 3, 3),))
def cond_and_matrix_rank_constant(A):
    return np.linalg.cond(A) * 0.01 + np.linalg.matrix_rank(A) * np.sum(A ** 2)


# ---------------------------------------------------------------- cumulative / differences
@program(args=lambda: (np.array([0.5, 2.0, 0.0, 3.0, 1.5]),))
def cumprod_through_an_exact_zero(x):
    return np.sum(np.cumprod(x) * np.arange(1.0, 6.0))


@program(args=lambda: (np.array([[0.5, 0.0], [2.0, 1.5], [0.0, 3.0]]),))
def cumprod_two_zeros_axis0(x):
    return np.sum(np.cumprod(x, axis=0) ** 2) + np.prod(x[1])


@program(args=lambda: (np.array([1.0, 0.0, 0.0, 2.0]),))
def prod_with_two_zeros(x):
    return np.prod(x) + np.prod(x[:3] + 1)


@program(args=lambda: (_r(24, 7),))
def diff_orders_prepend_append(x):
    return (np.sum(np.diff(x, n=2) ** 2) + np.sum(np.diff(x, prepend=0.0) ** 2)
            + np.sum(np.diff(x, append=x[:1]) * np.arange(7.0)) + np.sum(np.diff(x, n=0)))


@program(args=lambda: (_r(25, 6),))
def gradient_uniform_spacing_and_edge_order(y):
    return (np.sum(np.gradient(y) ** 2) + np.sum(np.gradient(y, 0.5, edge_order=2) ** 2)
            + np.sum(np.gradient(y, np.array([0.0, 0.1, 0.3, 0.6, 1.0, 1.5])) * np.arange(6.0)))


@program(args=lambda: (_r(26, 6), np.array([0.0, 0.2, 0.5, 0.9, 1.0, 1.8])))
def trapezoid_values_and_sample_points(y, x):
    return np.trapezoid(y ** 2, x) + np.trapezoid(y, dx=0.3) + np.trapezoid(np.exp(x), x)


@program(args=lambda: (_r(27, 3, 5),))
def trapezoid_axis0_and_cumsum_integral(Y):
    return np.sum(np.trapezoid(Y, axis=0) ** 2) + np.sum(np.cumsum(Y, axis=1)[:, -1])


@program(args=lambda: (_r(28, 5),))
def cummax_cummin_accumulate(x):
    return np.sum(np.maximum.accumulate(x) * np.arange(5.0)) + np.sum(np.minimum.accumulate(x))


# ---------------------------------------------------------------- convolve / correlate
@program(args=lambda: (_r(29, 8), _r(30, 3)))
def convolve_modes_full_same_valid(x, k):
    return (np.sum(np.convolve(x, k) ** 2) + np.sum(np.convolve(x, k, mode="same") * x)
            + np.sum(np.convolve(k, x, mode="valid") ** 3))


@program(args=lambda: (_r(31, 6), _r(32, 4)))
def correlate_modes_and_lag_argmax(x, y):
    c = np.correlate(x, y, mode="full")
    return np.sum(c ** 2) + c[np.argmax(c)] + np.sum(np.correlate(x, y, "same"))


@program(args=lambda: (_r(33, 5) + 1j * _r(34, 5), _r(35, 3)), argnums=(1,))
def correlate_complex_conjugates_second(z, k):
    return np.sum(np.abs(np.correlate(z, k + 0.5j * k, "valid")) ** 2)


@program(args=lambda: (_r(36, 4),))
def polymul_polyval_roots_free(c):
    p = np.polymul(c, c[::-1])
    return np.sum(np.polyval(p, np.array([0.3, -0.5, 1.1])) ** 2)


# ---------------------------------------------------------------- sort / select
@program(args=lambda: (np.array([0.3, -1.0, 2.0, 0.35, 1.0, -0.5]),))
def sort_reversed_and_head_weighted(x):
    return np.sum(np.sort(x) * np.arange(6.0)) + np.sum(np.sort(x)[::-1][:2])


@program(args=lambda: (_r(37, 3, 4),))
def argsort_take_along_axis_rows(X):
    idx = np.argsort(X, axis=1)
    Xs = np.take_along_axis(X, idx, axis=1)
    return np.sum(Xs * np.arange(4.0)) + np.sum(np.take_along_axis(X, idx[:, -1:], axis=1) ** 2)


@program(args=lambda: (_r(38, 9),))
def percentile_methods_and_q_array(x):
    return (np.sum(np.percentile(x, [10, 50, 90])) + np.percentile(x, 25, method="nearest")
            + np.percentile(x, 75, method="lower") + np.percentile(x, 40, method="midpoint")
            + np.nanpercentile(x, 60))


@program(args=lambda: (_r(39, 4, 5),))
def quantile_axis_keepdims_and_median(X):
    return (np.sum(np.quantile(X, 0.3, axis=1, keepdims=True) * X) + np.sum(np.median(X, axis=0))
            + np.median(X))


@program(args=lambda: (np.array([0.1, np.nan, 2.0, -1.0, np.nan, 0.5]),))
def nan_reductions_ignore_missing(x):
    return (np.nanmean(x) + np.nansum(x) ** 2 + np.nanmax(x) + np.nanmin(x) + np.nanstd(x)
            + np.nanmedian(x) + np.nanvar(x) + np.nanprod(x) + np.sum(np.nancumsum(x) ** 2))


@program(args=lambda: (_r(40, 6),))
def argpartition_topk_and_sort_descending(x):
    k = 3
    idx = np.argpartition(-x, k)[:k]
    return np.sum(x[idx] ** 2) + np.sum(-np.sort(-x)[:2])


@program(args=lambda: (_r(41, 5),))
def searchsorted_of_sorted_traced_bins(x):
    s = np.sort(x)
    i = np.searchsorted(s, np.array([-0.5, 0.0, 0.5]))
    return np.sum(s[np.clip(i, 0, 4)] ** 2)


# ---------------------------------------------------------------- clip / max ties
@program(args=lambda: (np.array([-2.0, -0.5, 0.5, 3.0]),))
def clip_huber_like_away_from_bounds(x):
    return np.sum(np.clip(x, -1, 1) ** 2) + np.sum(np.clip(x, a_min=None, a_max=0.7) * x)


@program(args=lambda: (np.array([0.5, -0.3, 1.5]), np.array([0.2, 0.4, 1.0])))
def maximum_minimum_fmax_distinct(x, y):
    return np.sum(np.maximum(x, y) ** 2 + np.minimum(x, y) * 3 + np.fmax(x, y) * np.fmin(x, y))


@program(args=lambda: (np.array([0.5, -0.3, 1.5, -2.0]),))
def relu_leaky_elu_variants(x):
    return (np.sum(np.maximum(x, 0) ** 2) + np.sum(np.where(x > 0, x, 0.1 * x))
            + np.sum(np.where(x > 0, x, np.expm1(np.minimum(x, 0)))))


@program(args=lambda: (_r(42, 3, 4),))
def max_amax_along_axes_keepdims(X):
    return np.sum(np.max(X, axis=1, keepdims=True) * X) + np.sum(np.amin(X, axis=0)) + X.max() * np.ptp(X)


# ---------------------------------------------------------------- masked softmax
@program(args=lambda: (_r(43, 4, 5),))
def masked_softmax_minus_inf_with_where(S):
    mask = np.tril(np.ones((4, 5), dtype=bool))
    S = np.where(mask, S, -np.inf)
    P = np.exp(S - np.max(S, axis=-1, keepdims=True))
    P = P / np.sum(P, axis=-1, keepdims=True)
    return np.sum(P * np.arange(5.0))


@program(args=lambda: (_r(44, 3, 4),))
def masked_log_softmax_nll_minus_inf(S):
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)
    Z = np.where(mask, S, -np.inf)
    logp = Z - tnp.logsumexp(Z, axis=1, keepdims=True)
    y = np.array([1, 2, 3])
    return -np.sum(logp[np.arange(3), y])


@program(args=lambda: (_r(45, 4),))
def softmax_with_minus_inf_added_mask(z):
    m = np.array([0.0, -np.inf, 0.0, -np.inf])
    e = np.exp(z + m - np.max(z + m))
    return np.sum(e / e.sum() * np.array([1.0, 5.0, 2.0, 7.0]))


# ---------------------------------------------------------------- complex
@program(args=lambda: (_r(46, 4), _r(47, 4)))
def complex_abs_angle_real_imag(a, b):
    z = a + 1j * b
    return np.sum(np.abs(z) ** 2) + np.sum(np.angle(z)) + np.sum(np.real(z * z)) + np.sum(np.imag(z ** 3))


@program(args=lambda: (_r(48, 8),))
def fft_magnitude_spectrum_loss(x):
    X = np.fft.fft(x)
    target = np.abs(np.fft.fft(np.arange(8.0)))
    return np.sum((np.abs(X) - target) ** 2)


@program(args=lambda: (_r(49, 8),))
def rfft_phase_and_irfft_roundtrip(x):
    X = np.fft.rfft(x)
    y = np.fft.irfft(X * np.exp(-0.3j * np.arange(5)), n=8)
    return np.sum(y ** 2 * np.arange(8.0)) + np.sum(np.angle(X[1:4]))


@program(args=lambda: (_r(50, 3), _r(51, 3)))
def complex_conj_vdot_and_hermitian_form(a, b):
    z = a + 1j * b
    H = np.array([[2.0, 1j, 0.0], [-1j, 3.0, 0.5], [0.0, 0.5, 1.0]])
    return np.real(np.vdot(z, H @ z)) + np.abs(np.vdot(z, z.conj()))


@program(args=lambda: (_r(52, 4, 4),))
def fft2_ifft2_shift_lowpass(X):
    F = np.fft.fftshift(np.fft.fft2(X))
    mask = np.zeros((4, 4))
    mask[1:3, 1:3] = 1.0
    return np.sum(np.real(np.fft.ifft2(np.fft.ifftshift(F * mask))) ** 2)


@program(args=lambda: (np.array([0.3, 1.2]),))
def complex_exp_log_sqrt_branch(t):
    z = np.exp(1j * t) * (1 + t)
    return np.sum(np.abs(np.log(z))) + np.sum(np.real(np.sqrt(z))) + np.sum(np.imag(z ** 0.5))


@program(args=lambda: (_r(53, 6),))
def complex128_astype_from_float_and_back(x):
    z = x.astype(np.complex128) * (1 + 2j)
    return np.sum(np.real(z).astype(np.float64) * np.imag(z))


# ---------------------------------------------------------------- int / bool mixed
@program(args=lambda: (_r(54, 6), np.array([0, 2, 1, 0, 2, 1])))
def int_labels_bincount_weights_and_onehot(x, lab):
    s = np.bincount(lab, weights=x, minlength=3)
    oh = np.eye(3)[lab]
    return np.sum(s ** 2) + np.sum(oh * x[:, None] * np.arange(3.0))


@program(args=lambda: (_r(55, 5), np.array([True, False, True, True, False])))
def bool_mask_multiply_add_and_index(x, m):
    return np.sum(x * m) + np.sum(x[m] ** 2) + np.sum(m + x) + np.sum(~m * x ** 3)


@program(args=lambda: (_r(56, 5),))
def int_array_times_float_and_true_divide(x):
    k = np.arange(5)
    return np.sum(x * k) + np.sum(x / (k + 1)) + np.sum(k // 2 * x) + np.sum(x ** k)


@program(args=lambda: (_r(57, 5),))
def bool_sum_count_in_denominator(x):
    m = x > 0
    return np.sum(np.where(m, x, 0.0)) / max(m.sum(), 1) + np.mean(x[x < 0.5] ** 2)


@program(args=lambda: (_r(58, 4),))
def floor_round_sign_constants_in_loss(x):
    return np.sum(x * np.floor(x * 3)) + np.sum(np.sign(x) * x) + np.sum(np.round(x, 1) * x)


# ---------------------------------------------------------------- einsum
@program(args=lambda: (_r(59, 3, 3),))
def einsum_repeated_index_trace_and_diag(A):
    return np.einsum("ii", A) + np.sum(np.einsum("ii->i", A) ** 2) + np.einsum("ij,ji", A, A)


@program(args=lambda: (_r(60, 2, 3, 3),))
def einsum_batched_diag_ellipsis(A):
    return np.sum(np.einsum("...ii->...i", A) ** 2) + np.sum(np.einsum("...ii", A))


@program(args=lambda: (_r(61, 2, 3, 4), _r(62, 4, 5)))
def einsum_ellipsis_matmul_and_outer(X, W):
    return np.sum(np.einsum("...ij,jk->...ik", X, W) ** 2) + np.sum(np.einsum("...i,...j->...ij", X[0], X[1]))


@program(args=lambda: (_r(63, 3, 3, 3),))
def einsum_three_way_diagonal(T):
    return np.sum(np.einsum("iii->i", T) ** 2) + np.einsum("iij->", T) + np.sum(np.einsum("iji", T) ** 2)


@program(args=lambda: (_r(64, 3), _r(65, 3, 3)))
def einsum_quadratic_form_implicit_output(x, A):
    return np.einsum("i,ij,j", x, A, x) + np.einsum("ij,ij", A, A) + np.sum(np.einsum("ij", A) * A)


# ---------------------------------------------------------------- 0-d / empty broadcast
@program(args=lambda: (np.array(0.7), _r(66, 4)))
def zero_d_array_parameter_broadcast(s, x):
    return np.sum((x * s) ** 2) + s ** 3 + np.sum(np.exp(s) + x * 0)


@program(args=lambda: (_r(67, 3),))
def empty_array_reductions_added(x):
    e = x[3:]
    return np.sum(x ** 2) + np.sum(e) + np.sum(e * x[:0]) + np.prod(e) + np.sum(np.zeros((0, 3)) @ x)


@program(args=lambda: (_r(68, 3),))
def broadcast_against_empty_and_concat(x):
    z = np.concatenate([x, x[:0], np.zeros(0)])
    w = x[:, None] + np.zeros((3, 0))
    return np.sum(z ** 2) + np.sum(w) + np.sum(np.stack([x, x])[:, :0])


@program(args=lambda: (np.array(1.3),))
def zero_d_through_linalg_and_ufuncs(s):
    A = np.eye(2) * s + np.array([[0.0, 1.0], [0.0, 0.0]])
    return np.linalg.det(A) + np.sum(np.linalg.inv(A)) + np.float64(2.0) * s + np.sqrt(s)


@program(args=lambda: (np.array([0.5]),))
def size_one_arrays_item_free(x):
    return float(0) + np.sum(x * x[0]) + x[0] ** 2 + np.squeeze(x) * 2


# ---------------------------------------------------------------- float32
@program(args=lambda: (_r(69, 4, 3, dtype=np.float32), _r(70, 3, dtype=np.float32)))
def float32_mlp_softmax_xent(W, b):
    X = _r(71, 5, 4, dtype=np.float32)
    y = np.array([0, 1, 2, 1, 0])
    Z = np.tanh(X @ W + b)
    Z = Z - Z.max(axis=1, keepdims=True)
    logp = Z - np.log(np.sum(np.exp(Z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(5), y])


@program(args=lambda: (_u(72, 4, dtype=np.float32),))
def float32_special_and_stats(x):
    return np.sum(sp.gammaln(x + np.float32(1))) + np.sum(sp.expit(x)) + np.sum(tst.norm.logpdf(x))


@program(args=lambda: (_r(73, 3, 3, dtype=np.float32),))
def float32_linalg_det_inv_norm(A):
    A = A + np.float32(3) * np.eye(3, dtype=np.float32)
    return np.linalg.det(A) + np.sum(np.linalg.inv(A)) + np.linalg.norm(A, 2) + np.linalg.norm(A, "nuc")


@program(args=lambda: (_r(74, 8, dtype=np.float32),))
def float32_fft_cumsum_sort(x):
    return (np.sum(np.abs(np.fft.rfft(x)) ** 2) * np.float32(0.1) + np.sum(np.cumsum(x) ** 2)
            + np.sum(np.sort(x) * np.arange(8, dtype=np.float32)))


# ---------------------------------------------------------------- pytrees
class Params(NamedTuple):
    W: np.ndarray
    b: np.ndarray


@dataclasses.dataclass
class Model:
    enc: Params
    scale: np.ndarray
    meta: str = "m"


tp.tree_util.register_dataclass(Model, data_fields=["enc", "scale"], meta_fields=["meta"]) \
    if hasattr(tp.tree_util, "register_dataclass") else None


@program(args=lambda: (Params(_r(75, 3, 2), _r(76, 2)),))
def namedtuple_params_tree_map_l2(p):
    X = _r(77, 4, 3)
    reg = sum(np.sum(l ** 2) for l in tp.tree_util.tree_leaves(p))
    return np.sum(np.tanh(X @ p.W + p.b) ** 2) + 0.1 * reg


@program(args=lambda: ({"layers": [{"W": _r(78, 3, 3), "b": _r(79, 3)}, {"W": _r(80, 3, 1), "b": _r(81, 1)}],
                        "log_temp": np.array(0.1)},))
def nested_dict_list_mlp(params):
    h = _r(82, 5, 3)
    for layer in params["layers"]:
        h = np.tanh(h @ layer["W"] + layer["b"])
    return np.sum(h ** 2) * np.exp(params["log_temp"])


@program(args=lambda: (Model(Params(_r(83, 2, 2), _r(84, 2)), np.array([0.5])),))
def dataclass_nested_namedtuple_model(m):
    X = _r(85, 3, 2)
    return np.sum((X @ m.enc.W + m.enc.b) ** 2 * m.scale)


@program(args=lambda: ([_r(86, 3), (_r(87, 2), np.array(0.3))],))
def list_of_tuple_with_zero_d_leaf(tree):
    a, (b, c) = tree
    return np.sum(a ** 2) * c + np.sum(b * c ** 2) + np.sum(tp.tree_util.tree_map(lambda l: np.sum(l ** 2), tree)[1][0])


@program(args=lambda: ({"w": _r(88, 3), "b": np.array(0.0)},))
def tree_map_sgd_steps_inside_loss(p):
    X = _r(89, 6, 3)
    y = np.arange(6.0) * 0.1

    def loss(q):
        return np.mean((X @ q["w"] + q["b"] - y) ** 2)
    for _ in range(3):
        g = tp.grad(loss)(p)
        p = tp.tree_util.tree_map(lambda a, ga: a - 0.1 * ga, p, g)
    return loss(p)


# ---------------------------------------------------------------- misc science
@program(args=lambda: (np.array([1.0, 0.5]),))
def logistic_growth_euler_cumprod(th):
    r, K = th
    t = np.linspace(0, 1, 6)
    x = 0.1
    out = []
    for dt in np.diff(t):
        x = x + dt * r * x * (1 - x / K)
        out.append(x)
    return np.sum((np.stack(out) - np.linspace(0.2, 0.4, 5)) ** 2)


@program(args=lambda: (_u(90, 5, lo=0.5, hi=2.0),))
def outer_subtract_pairwise_log_kernel(x):
    D = np.abs(np.subtract.outer(x, x)) + np.eye(5)
    return np.sum(np.log(D)) + np.sum(np.multiply.outer(x, x)[np.triu_indices(5, 1)])


@program(args=lambda: (_r(91, 4),))
def hypot_arctan2_polar_coords(x):
    r = np.hypot(x, x[::-1] + 1)
    th = np.arctan2(x, x[::-1] + 1)
    return np.sum(r * np.cos(th)) + np.sum(th ** 2)


@program(args=lambda: (_u(92, 4, lo=0.1, hi=0.9),))
def log1p_expm1_logaddexp2_stability(p):
    return (np.sum(np.log1p(-p)) + np.sum(np.expm1(p) ** 2) + np.sum(np.logaddexp2(p, 1 - p))
            + np.sum(np.log2(p) + np.log10(p)))


@program(args=lambda: (_r(93, 5),))
def sinc_heaviside_nonzero_and_where(x):
    return np.sum(np.sinc(x)) + np.sum(np.heaviside(x, 0.5) * x) + np.sum(np.sinc(x * 0 + np.array([0.0, 1, 2, 3, 4])) * x)


@program(args=lambda: (_r(94, 6),))
def roll_flip_rot90_stencil(x):
    X = x.reshape(2, 3)
    return np.sum(np.roll(x, 2) * x) + np.sum(np.flip(X) * X) + np.sum(np.rot90(np.vstack([X, X])) ** 2)


@program(args=lambda: (_r(95, 3, 4),))
def std_var_ddof_and_average_weights(X):
    return (np.sum(np.std(X, axis=0, ddof=1)) + np.var(X, ddof=2) + np.sum(np.average(X, axis=1, weights=np.arange(1.0, 5.0)))
            + np.sum(np.cov(X)) + np.sum(np.corrcoef(X)))


@program(args=lambda: (_r(96, 5),))
def linspace_traced_endpoints_interp(x):
    grid = np.linspace(x[0], x[0] + 2.0, 5)
    return np.sum(grid * x) + np.sum(np.interp(np.array([0.1, 0.5]), np.arange(5.0), x))


@program(args=lambda: (_r(97, 3),))
def meshgrid_outer_sum_and_tril(x):
    A, B = np.meshgrid(x, x ** 2, indexing="ij")
    return np.sum(np.tril(A * B)) + np.sum(np.triu(A, 1))

#: name -> (fn, args): HIPS-autograd-style programs (tapestry.autograd), below.
AUTOGRAD_PROGRAMS: dict = {}


# ---------------------------------------------------------------- HIPS autograd style
def _ag(args):
    def deco(fn):
        AUTOGRAD_PROGRAMS[fn.__name__] = (fn, args)
        return fn
    return deco


import tapestry.autograd.numpy as anp  # noqa: E402  (as a HIPS autograd user writes it)
import tapestry.autograd.scipy.special as asp  # noqa: E402
import tapestry.autograd.scipy.stats as ast  # noqa: E402


@_ag(lambda: (_r(100, 3, 2) * 0.5,))
def ag_logistic_regression_log_loss(W):
    X, y = _r(101, 6, 3), np.array([0, 1, 1, 0, 1, 0])
    logits = anp.dot(X, W)
    logp = logits - asp.logsumexp(logits, axis=1, keepdims=True)
    return -anp.sum(logp[anp.arange(6), y])


@_ag(lambda: (np.array([0.5, -0.3, 1.2]),))
def ag_gaussian_mixture_scipy_stats_norm(mu):
    x = np.linspace(-2, 2, 7)
    comp = ast.norm.logpdf(x[:, None], mu[None, :], 0.7)
    return -anp.sum(asp.logsumexp(comp + anp.log(anp.array([0.2, 0.3, 0.5])), axis=1))


@_ag(lambda: (_u(102, 4, lo=0.5, hi=2.0),))
def ag_dirichlet_kl_gammaln_digamma(a):
    b = np.array([1.0, 2.0, 0.5, 1.5])
    a0, b0 = anp.sum(a), anp.sum(b)
    return (asp.gammaln(a0) - anp.sum(asp.gammaln(a)) - asp.gammaln(b0) + anp.sum(asp.gammaln(b))
            + anp.sum((a - b) * (asp.digamma(a) - asp.digamma(a0))))


@_ag(lambda: (_r(103, 4),))
def ag_rnn_loop_with_list_and_concatenate(h0):
    W = _r(104, 4, 4) * 0.4
    hs = []
    h = h0
    for t in range(5):
        h = anp.tanh(anp.dot(W, h) + 0.1 * t)
        hs.append(h)
    return anp.sum(anp.concatenate(hs) ** 2)


@_ag(lambda: (_r(105, 3, 3) + 3 * np.eye(3),))
def ag_linalg_inv_det_slogdet_solve(A):
    s, ld = anp.linalg.slogdet(A)
    return (anp.sum(anp.linalg.inv(A)) + anp.linalg.det(A) * 0.1 + ld
            + anp.sum(anp.linalg.solve(A, anp.ones(3))))


@_ag(lambda: (_r(106, 8),))
def ag_fft_power_spectrum(x):
    F = anp.fft.rfft(x)
    return anp.sum(anp.abs(F) ** 2 * anp.arange(5)) + anp.sum(anp.real(anp.fft.ifft(F * 1j)))


@_ag(lambda: ({"w": _r(107, 3), "b": 0.5},))
def ag_dict_params_flatten_roundtrip(p):
    from tapestry.autograd.misc import flatten
    flat, unflatten = flatten(p)
    q = unflatten(flat * 2.0)
    X = _r(108, 4, 3)
    return anp.sum((anp.dot(X, q["w"]) + q["b"]) ** 2)


@_ag(lambda: (_r(109, 5),))
def ag_where_abs_sign_piecewise(x):
    return anp.sum(anp.where(x > 0, x ** 2, anp.abs(x) * 0.5)) + anp.sum(anp.sign(x) * x ** 3)


@_ag(lambda: (_r(110, 4, 3),))
def ag_einsum_trace_and_outer(A):
    return anp.einsum("ij,ij->", A, A) + anp.sum(anp.einsum("i,j->ij", A[0], A[1]) ** 2) + anp.trace(anp.dot(A.T, A))


@_ag(lambda: (_r(111, 6),))
def ag_cumsum_sort_max_mean_var(x):
    return anp.sum(anp.cumsum(x) ** 2) + anp.sum(anp.sort(x) * anp.arange(6)) + anp.max(x) + anp.var(x) + anp.std(x)


@_ag(lambda: (_u(112, 5, lo=0.1, hi=0.9),))
def ag_beta_bernoulli_with_xlogy(p):
    y = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    return -anp.sum(asp.xlogy(y, p) + asp.xlogy(1 - y, 1 - p)) - anp.sum(ast.beta.logpdf(p, 2.0, 3.0))


@_ag(lambda: (_r(113, 3),))
def ag_multivariate_normal_logpdf(m):
    X = _r(114, 5, 3)
    C = _spd(115, 3)
    return -anp.sum(ast.multivariate_normal.logpdf(X, m, C))


@_ag(lambda: (_r(116, 4),))
def ag_tuple_list_container_returns(x):
    def parts(x):
        return (anp.sin(x), [anp.cos(x), x ** 2])
    a, (b, c) = parts(x)
    return anp.sum(a * b) + anp.sum(c)


@_ag(lambda: (_r(117, 2, 3),))
def ag_reshape_transpose_stack_and_pad(X):
    Y = anp.stack([X, X ** 2], axis=0).transpose(1, 0, 2).reshape(2, 6)
    return anp.sum(anp.pad(Y, ((1, 0), (0, 2))) * anp.arange(24.0).reshape(3, 8) / 10.0)


@_ag(lambda: (_r(118, 6),))
def ag_convolve_and_clip(x):
    return anp.sum(anp.convolve(x, anp.array([0.25, 0.5, 0.25]), mode="valid") ** 2) + anp.sum(anp.clip(x, -0.5, 0.5))


@_ag(lambda: (np.array([0.7, -0.2]),))
def ag_fixed_point_implicit_gradient(a):
    from tapestry.autograd.misc.fixed_points import fixed_point

    def newton_sqrt(a):
        return lambda x: 0.5 * (x + (a[0] ** 2 + 1) / x)
    x = fixed_point(newton_sqrt, a, 1.0, lambda u, v: anp.abs(u - v), 1e-12)
    return x ** 2 + a[1] * x


@_ag(lambda: (_r(119, 4) * 0.3,))
def ag_complex_abs_angle(x):
    z = x[:2] + 1j * x[2:]
    return anp.sum(anp.abs(z ** 2)) + anp.sum(anp.angle(z)) + anp.sum(anp.real(anp.conj(z) * z))


@_ag(lambda: (_r(120, 5),))
def ag_float32_cast_then_exp(x):
    return anp.sum(anp.exp(x.astype(anp.float32)).astype(anp.float64) * x)


@_ag(lambda: (_u(121, 3, lo=0.5, hi=3.0),))
def ag_gamma_poisson_logpmf(lam):
    k = np.array([0, 2, 5])
    return -anp.sum(ast.poisson.logpmf(k, lam)) - anp.sum(ast.gamma.logpdf(lam, 2.0))


@_ag(lambda: (_r(122, 3),))
def ag_norm_and_outer_and_prod(x):
    return anp.linalg.norm(x) + anp.sum(anp.outer(x, x) ** 2) + anp.prod(x + 2)
