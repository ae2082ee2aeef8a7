"""Vmapped programs of the sixth red-team round, in the style of
tests/programs/vmap_progs5.py: numerically careful NumPy idioms as users
write them (stable log-sum-exp and cross-entropy variants, masked
attention, norms over axis tuples, Gaussian-process and Kalman linear
algebra, RK4 loops, polynomials, scans, sorting, binning, gathers, shape
chains), with the batch axis in awkward places (last axis of a matrix,
negative axes, nested pytrees of in_axes, ``axis_size``) and transforms on
either side (vmap of vmap, vmap of grad, grad of vmap, jacobian, jit).
Each is written once against ``x`` (numpy or jax.numpy) and ``T`` and
compared by tests/test_user_programs_vmap6.py with jax.vmap and with a
Python loop.

Only NumPy is imported here: the JAX child process imports this module too.
"""
from __future__ import annotations

import numpy as np

from .vmap_progs import random_arrays, registry

rng = np.random.default_rng(20261206)
B = 4
PROGRAMS: dict = {}

prog = registry(PROGRAMS)
r, spd = random_arrays(rng)


def bincount_weights(x, idx, w, n):
    """``np.bincount(idx, w, minlength=n)``: JAX needs a static ``length``."""
    if x is np:
        return np.bincount(idx, weights=w, minlength=n)
    return x.bincount(idx, weights=w, length=n)


def cummax(x, a):
    """``np.maximum.accumulate(a)`` (JAX: ``jax.lax.cummax``)."""
    if x is np:
        return np.maximum.accumulate(a)
    import jax
    return jax.lax.cummax(a)


def with_row(x, a, i, row):
    """``a`` with row ``i`` replaced (NumPy: a write into a copy)."""
    if x is np:
        out = a.copy()
        out[i] = row
        return out
    return a.at[i].set(row)


X6 = r(B, 6)
Y6 = r(B, 6)
SPD3 = spd(B, 3, 3)
SPD3_LAST = np.moveaxis(spd(B, 3, 3), 0, -1)       # batch axis last: (3, 3, B)
LABELS = rng.integers(0, 6, B)
GRID = np.linspace(-2.0, 2.0, 9)


def _lse(v, x, axis=None, keepdims=False):
    m = x.max(v, axis=axis, keepdims=True)
    s = x.log(x.sum(x.exp(v - m), axis=axis, keepdims=True)) + m
    return s if keepdims else x.squeeze(s, axis=axis)


# === stable log-sum-exp, softmax, cross-entropy ======================================
@prog(r(B, 3, 4), in_axes=0)
def lse_over_axis_tuple_keepdims(a, x, T):
    s = _lse(a, x, axis=(0, 1), keepdims=True)
    return s, a - s, _lse(a, x, axis=(-1,))


@prog(X6, LABELS, in_axes=(0, 0))
def xent_integer_label_index(z, y, x, T):
    logp = z - _lse(z, x, axis=-1, keepdims=True)
    return -logp[y], x.exp(logp).sum()


@prog(r(B, 3, 6), rng.integers(0, 6, (B, 3)), in_axes=(0, 0))
def xent_rows_take_along_axis_keepdims(z, y, x, T):
    logp = z - _lse(z, x, axis=-1, keepdims=True)
    picked = x.take_along_axis(logp, y[:, None], axis=-1)
    return -x.mean(picked), x.argmax(logp, axis=-1)


@prog(X6, rng.random((B, 6)) > 0.3, in_axes=(0, 0))
def softmax_masked_neg_inf(z, m, x, T):
    m = m.at[0].set(True) if x is not np else np.where(np.arange(6) == 0, True, m)
    zm = x.where(m, z, -x.inf)
    p = x.exp(zm - x.max(zm))
    return p / p.sum()


@prog(X6, (rng.random((B, 6)) > 0.5).astype(float), in_axes=(0, 0))
def bce_with_logits_stable(z, y, x, T):
    return x.mean(x.maximum(z, 0) - z * y + x.log1p(x.exp(-x.abs(z))))


@prog(X6, r(B, 6) ** 2, in_axes=(0, 0))
def special_logsumexp_weighted_sign(z, w, x, T):
    s, sg = T.special.logsumexp(z, b=w - 0.5, return_sign=True)
    return s, sg, T.special.logsumexp(z, b=w)


@prog(r(B, 5), r(B, 5), in_axes=(0, 0))
def kl_between_softmaxes(a, b, x, T):
    la = a - _lse(a, x)
    lb = b - _lse(b, x)
    return x.sum(x.exp(la) * (la - lb))


@prog(r(B, 6), 1.7, in_axes=(0, None))
def label_smoothed_xent_temperature(z, tau, x, T):
    logp = z / tau - _lse(z / tau, x)
    target = x.full(6, 0.1 / 5).at[2].set(0.9) if x is not np else \
        np.where(np.arange(6) == 2, 0.9, 0.1 / 5)
    return -x.dot(target, logp)


@prog(r(B, 6), in_axes=0)
def log_softmax_via_logaddexp_reduce(z, x, T):
    acc = z[0]
    for k in range(1, 6):
        acc = x.logaddexp(acc, z[k])
    return z - acc


# === attention with masks =============================================================
@prog(r(B, 5, 4), r(B, 5, 4), r(B, 5, 4), in_axes=(0, 0, 0))
def causal_attention_triu_large_negative(q, k, v, x, T):
    s = q @ k.T / x.sqrt(4.0)
    s = s - 1e9 * x.triu(x.ones((5, 5)), k=1)
    p = x.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v


@prog(r(B, 2, 5, 3), r(5, 3), rng.integers(2, 6, B), in_axes=(0, None, 0))
def multihead_shared_keys_length_mask(q, k, n, x, T):
    s = x.einsum("hqd,kd->hqk", q, k)
    valid = x.arange(5) < n
    s = x.where(valid[None, None, :], s, -1e30)
    p = x.exp(s - x.max(s, axis=-1, keepdims=True))
    p = p / x.sum(p, axis=-1, keepdims=True)
    return x.einsum("hqk,kd->qhd", p, k).reshape(5, 6)


@prog(r(B, 4, 3), r(7), in_axes=(0, None))
def relative_position_bias_gather(h, table, x, T):
    i = x.arange(4)
    rel = i[:, None] - i[None, :] + 3                     # 0..6
    s = h @ h.T + table[rel]
    return s - _lse(s, x, axis=1, keepdims=True)


@prog(r(B, 4, 6), r(6), r(6), in_axes=(0, None, None))
def layernorm_then_attention_pool(h, g, b, x, T):
    mu = h.mean(axis=-1, keepdims=True)
    var = ((h - mu) ** 2).mean(axis=-1, keepdims=True)
    hn = (h - mu) / x.sqrt(var + 1e-5) * g + b
    w = x.exp(hn[:, 0] - hn[:, 0].max())
    return (w / w.sum()) @ hn


@prog(r(B, 2, 3, 4), r(3, 4), in_axes=(0, None))
def layernorm_axis_tuple_and_groupnorm(h, g, x, T):
    mu = x.mean(h, axis=(-2, -1), keepdims=True)
    sd = x.std(h, axis=(1, 2), keepdims=True)
    ln = (h - mu) / (sd + 1e-6) * g
    grp = h.reshape(2, 2, 6)
    gn = (grp - grp.mean(axis=-1, keepdims=True)) / x.sqrt(grp.var(axis=-1, keepdims=True) + 1e-5)
    return ln, gn.reshape(h.shape)


@prog(r(B, 3, 4), in_axes=0)
def rmsnorm_keepdims_methods(h, x, T):
    ms = (h * h).mean(-1, keepdims=True)
    return h / x.sqrt(ms + 1e-6), h.max(axis=(0, 1)), h.min(0).sum()


# === Gaussian processes and Cholesky =================================================
@prog(r(6, 2), r(6), {"ell": np.abs(r(B, 2)) + 0.5, "sf": np.abs(r(B)) + 0.5,
                      "sn": np.abs(r(B)) * 0.1 + 0.1},
      in_axes=(None, None, {"ell": 0, "sf": 0, "sn": 0}))
def gp_nll_ard_hyperparameters(X, y, h, x, T):
    d = (X[:, None, :] - X[None, :, :]) / h["ell"]
    K = h["sf"] ** 2 * x.exp(-0.5 * x.sum(d ** 2, axis=-1)) + h["sn"] ** 2 * x.eye(6)
    L = x.linalg.cholesky(K)
    alpha = x.linalg.solve(L.T, x.linalg.solve(L, y))
    return 0.5 * y @ alpha + x.sum(x.log(x.diagonal(L))) + 3.0 * x.log(2 * x.pi)


@prog(r(B, 5, 2), r(B, 5), r(3, 2), in_axes=(0, 0, None))
def gp_predict_mean_var_solve_inv(X, y, Xs, x, T):
    def k(a, b):
        return x.exp(-0.5 * x.sum((a[:, None] - b[None]) ** 2, -1))
    K = k(X, X) + 0.1 * x.eye(5)
    Ks = k(Xs, X)
    mean = Ks @ x.linalg.solve(K, y)
    var = 1.0 - x.einsum("ij,jk,ik->i", Ks, x.linalg.inv(K), Ks)
    return mean, var


@prog(SPD3, r(B, 3), in_axes=(0, 0))
def mvn_logpdf_slogdet_solve(S, v, x, T):
    sign, logdet = x.linalg.slogdet(S)
    return -0.5 * (v @ x.linalg.solve(S, v) + logdet + 3 * x.log(2 * x.pi)), sign


@prog(SPD3_LAST, r(3), in_axes=(-1, None))
def batch_axis_last_matrix_inv_det(S, v, x, T):
    return x.linalg.inv(S) @ v, x.linalg.det(S), x.linalg.slogdet(S)[1]


@prog(r(3, B, 3) + 3 * np.eye(3)[:, None, :], r(3, 2), in_axes=(1, None))
def batch_axis_middle_solve_matrix_rhs(A, Bm, x, T):
    return x.linalg.solve(A, Bm), x.linalg.solve(A.T, Bm[:, 0])


@prog(SPD3, in_axes=0)
def cholesky_logdet_of_symmetrized(S, x, T):
    A = 0.5 * (S + S.T)
    L = x.linalg.cholesky(A)
    return 2 * x.sum(x.log(x.diag(L))), x.linalg.det(A)


@prog(r(B, 4, 2), np.abs(r(B)) + 0.3, in_axes=(0, 0))
def matern52_gram_logdet_scalar_lengthscale(X, ell, x, T):
    d = x.sqrt(x.sum((X[:, None] - X[None]) ** 2, -1) + 1e-12) / ell
    K = (1 + x.sqrt(5.0) * d + 5.0 / 3.0 * d ** 2) * x.exp(-x.sqrt(5.0) * d) + 0.1 * x.eye(4)
    return x.linalg.slogdet(K)[1], x.trace(x.linalg.inv(K))


# === ODEs, Kalman filters, recurrences ===============================================
@prog(np.abs(r(B, 2)) + 0.2, np.array([1.0, 0.0]), 0.05, in_axes=(0, None, None))
def rk4_damped_oscillator_params(p, y0, dt, x, T):
    def f(y):
        return x.array([y[1], -p[0] * y[0] - p[1] * y[1]])
    y, traj = y0, []
    for _ in range(8):
        k1 = f(y)
        k2 = f(y + dt / 2 * k1)
        k3 = f(y + dt / 2 * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        traj.append(y)
    return x.stack(traj), y


@prog(r(B, 2), 0.1, in_axes=(0, None))
def rk4_van_der_pol_tuple_state(y0, dt, x, T):
    mu = 1.5
    u, v = y0[0], y0[1]
    for _ in range(6):
        def f(u, v):
            return v, mu * (1 - u ** 2) * v - u
        a1, b1 = f(u, v)
        a2, b2 = f(u + dt / 2 * a1, v + dt / 2 * b1)
        a3, b3 = f(u + dt / 2 * a2, v + dt / 2 * b2)
        a4, b4 = f(u + dt * a3, v + dt * b3)
        u = u + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        v = v + dt / 6 * (b1 + 2 * b2 + 2 * b3 + b4)
    return u, v


@prog(r(B, 6, 2), np.array([[1.0, 0.1], [0.0, 1.0]]), np.array([[1.0, 0.0]]),
      in_axes=(0, None, None))
def kalman_filter_2d_loglik(obs, F, H, x, T):
    m, P = x.zeros(2), x.eye(2)
    Q, R = 0.01 * x.eye(2), 0.25 * x.eye(1)
    ll = 0.0
    for t in range(6):
        m, P = F @ m, F @ P @ F.T + Q
        S = H @ P @ H.T + R
        K = P @ H.T @ x.linalg.inv(S)
        e = obs[t, :1] - H @ m
        ll = ll - 0.5 * (e @ x.linalg.solve(S, e) + x.linalg.slogdet(S)[1])
        m = m + K @ e
        P = (x.eye(2) - K @ H) @ P
    return ll, m, P


@prog(r(B, 5), np.array(0.8), np.array(0.3), in_axes=(0, None, None))
def kalman_1d_joseph_form(z, a, q, x, T):
    m, P, out = 0.0, 1.0, []
    for t in range(5):
        m, P = a * m, a * a * P + q
        K = P / (P + 0.5)
        m = m + K * (z[t] - m)
        P = (1 - K) ** 2 * P + K ** 2 * 0.5
        out.append(m)
    return x.array(out), P


@prog(r(B, 3), r(3, 3) / 3, in_axes=(0, None))
def rnn_python_loop_history_concat(h0, W, x, T):
    hs = [h0]
    for t in range(4):
        hs.append(x.tanh(W @ hs[-1] + 0.1 * t))
    H = x.concatenate([h[None] for h in hs], axis=0)
    return H, x.cumsum(H, axis=0)[-1]


# === polynomials ======================================================================
@prog(r(B, 4), GRID, in_axes=(0, None))
def polyval_batched_coeffs_grid_and_polyder(c, t, x, T):
    return x.polyval(c, t), x.polyval(x.polyder(c), t)


@prog(r(4), r(B, 3), in_axes=(None, 0))
def polyval_shared_coeffs_horner_check(c, t, x, T):
    acc = x.zeros_like(t)
    for ck in c:
        acc = acc * t + ck
    return x.polyval(c, t), acc


@prog(r(B, 9), in_axes=0)
def polyfit_degree2_then_eval(y, x, T):
    t = x.linspace(-1.0, 1.0, 9)
    c = x.polyfit(t, y, 2)
    return c, x.polyval(c, t) - y


@prog(r(B, 3), r(B, 2), in_axes=(0, 0))
def polymul_polyadd_polyint(a, b, x, T):
    return x.polymul(a, b), x.polyadd(a, b), x.polyint(a)


# === scans and differences ===========================================================
@prog(r(B, 6), in_axes=0)
def exclusive_cumsum_concat_and_normalize(a, x, T):
    w = x.exp(a)
    c = x.concatenate([x.zeros(1), x.cumsum(w)[:-1]])
    return c / w.sum(), x.cumsum(w[::-1])[::-1]


@prog(r(B, 3, 5), in_axes=0)
def cumprod_axis0_diff_axis0_keep(a, x, T):
    s = 1 + 0.2 * a
    return x.cumprod(s, axis=0), x.diff(a, axis=0), x.diff(a, n=2, axis=-1, append=a[:, -1:])


@prog(r(B, 7), in_axes=0)
def cummax_via_maximum_accumulate_and_drawdown(a, x, T):
    p = x.cumsum(a)
    peak = cummax(x, p)
    return p - peak, x.min(p - peak)


@prog(r(B, 5), r(B, 5), in_axes=(0, 0))
def discounted_cumsum_matrix_form(r_, g, x, T):
    i = x.arange(5)
    D = x.where(i[None, :] >= i[:, None], 0.9 ** (i[None, :] - i[:, None]), 0.0)
    return D @ r_, x.cumsum(g * r_)


# === sorting and ranking =============================================================
@prog(r(B, 5, 3), in_axes=0)
def sort_rows_by_first_column(a, x, T):
    order = x.argsort(a[:, 0])
    return a[order], x.sort(a, axis=0), x.argsort(a, axis=0)


@prog(r(B, 6), in_axes=0)
def ranks_double_argsort_soft(a, x, T):
    ranks = x.argsort(x.argsort(a))
    return ranks, a * ranks, x.take_along_axis(a, x.argsort(a)[::-1], axis=0)[:3]


@prog(r(B, 4, 5), in_axes=0)
def take_along_axis_sorted_axis0_and_none(a, x, T):
    i0 = x.argsort(a, axis=0)
    return (x.take_along_axis(a, i0, axis=0), x.take_along_axis(a, x.argsort(a, axis=None),
                                                                axis=None))


@prog(r(B, 8), in_axes=0)
def trimmed_mean_sort_slice(a, x, T):
    s = x.sort(a)
    return s[2:-2].mean(), x.median(a), x.quantile(a, 0.25)


@prog(r(B, 4, 6), in_axes=0)
def median_percentile_axis(a, x, T):
    return x.median(a, axis=-1), x.percentile(a, x.array([10.0, 90.0]), axis=0), \
        x.quantile(a, 0.5, axis=1, keepdims=True)


# === piecewise: where / clip / maximum ===============================================
@prog(X6 * 2, in_axes=0)
def smooth_l1_and_leaky_relu(a, x, T):
    sl1 = x.where(x.abs(a) < 1, 0.5 * a ** 2, x.abs(a) - 0.5)
    return sl1, x.maximum(0.01 * a, a), x.minimum(x.maximum(a, -1.0), 1.0)


@prog(X6, r(B, 1) - 1, r(B, 1) + 1, in_axes=(0, 0, 0))
def clip_batched_array_bounds_and_method(a, lo, hi, x, T):
    return x.clip(a, lo, hi), a.clip(lo[0], None), x.clip(a, None, hi)


@prog(X6, in_axes=0)
def piecewise_linear_where_chain(a, x, T):
    return x.where(a < -1, -1 - 0.1 * (a + 1),
                   x.where(a < 0.5, a, 0.5 + 2 * (a - 0.5)))


@prog(X6, in_axes=0)
def select_with_default_and_safe_log(a, x, T):
    pos = x.where(a > 0, a, 1.0)
    return x.select([a < -0.5, a > 0], [a ** 2, x.log(pos)], default=-a)


@prog(X6, r(6), in_axes=(0, None))
def maximum_shared_and_heaviside_mix(a, w, x, T):
    return x.sum(x.maximum(a, w) * x.minimum(a, -w)), x.fmin(a, w) - x.fmax(a, 0.3)


# === einsum ==========================================================================
@prog(r(B, 3, 3), r(3, 3), in_axes=(0, None))
def einsum_trace_diag_and_frobenius(a, w, x, T):
    return (x.einsum("ii->", a), x.einsum("ii->i", a), x.einsum("ij,ij->", a, w),
            x.einsum("ij,ji->", a, a))


@prog(r(B, 3), r(B, 4), r(2), in_axes=(0, 0, None))
def einsum_outer_three_and_broadcast(a, b, c, x, T):
    return x.einsum("i,j,k->ijk", a, b, c), x.einsum("...i,i->...", x.outer(b, a), a)


@prog(r(B, 2, 3, 4), r(3, 4), in_axes=(0, None))
def einsum_ellipsis_front_and_batch_dims(a, w, x, T):
    return x.einsum("...jk,jk->...", a, w), x.einsum("bjk,bjl->bkl", a, a)


@prog(r(3, 4), r(B, 4, 5), r(5, 2), in_axes=(None, 0, None))
def einsum_chain_batched_middle(a, b, c, x, T):
    return x.einsum("ij,jk,kl->il", a, b, c), x.einsum("ij,jk,kl->li", a, b, c, optimize=True)


@prog(r(B, 4), in_axes=0)
def einsum_same_operand_twice(a, x, T):
    return x.einsum("i,i->", a, a), x.einsum("i,j->ij", a, a), x.einsum(a, [0], a, [1], [1, 0])


# === interp, searchsorted, binning ===================================================
@prog(np.sin(GRID), r(B, 5) * 2, in_axes=(None, 0))
def interp_left_right_fill(fp, q, x, T):
    xp = GRID
    return x.interp(q, xp, fp, left=-5.0, right=5.0), x.interp(q, xp, fp)


@prog(r(B, 9), r(B, 5) * 3, in_axes=(0, 0))
def interp_periodic(fp, q, x, T):
    xp = x.asarray(GRID)
    return x.interp(q, xp, fp, period=4.0)


@prog(GRID, r(B), in_axes=(None, 0))
def interp_scalar_query(xp, q, x, T):
    return x.interp(q, xp, xp ** 2), x.interp(q * 0.5, xp, x.exp(xp))


@prog(GRID, r(B, 7), r(B, 7), in_axes=(None, 0, 0))
def histogram_binning_searchsorted_bincount(edges, v, w, x, T):
    k = x.clip(x.searchsorted(edges, v, side="right") - 1, 0, 7)
    return bincount_weights(x, k, w, 8), k


@prog(GRID, r(B, 7), r(B, 7), in_axes=(None, 0, 0))
def histogram_one_hot_binning(edges, v, w, x, T):
    inb = (v[:, None] >= edges[None, :-1]) & (v[:, None] < edges[None, 1:])
    counts = inb.sum(axis=0)
    return counts, x.sum(inb * w[:, None], axis=0), x.digitize(v, edges)


@prog(np.sort(r(B, 6), axis=1), r(B, 3), in_axes=(0, 0))
def searchsorted_linear_interp_manual(s, q, x, T):
    k = x.clip(x.searchsorted(s, q), 1, 5)
    lo, hi = s[k - 1], s[k]
    t = (q - lo) / (hi - lo)
    return t, k


# === gathers with integer arrays =====================================================
@prog(r(B, 5, 2), rng.integers(0, 5, (5, 2)), in_axes=(0, None))
def neighbour_list_gather_shared(pos, nbr, x, T):
    d = pos[nbr] - pos[:, None, :]
    return x.sum(x.sqrt(x.sum(d ** 2, -1) + 1e-9), axis=1)


@prog(r(B, 5, 2), rng.integers(0, 5, (B, 5, 2)), in_axes=(0, 0))
def neighbour_list_gather_batched(pos, nbr, x, T):
    d = pos[nbr] - pos[:, None, :]
    return x.einsum("ikd,ikd->i", d, d)


@prog(r(B, 4, 5), rng.integers(0, 4, (B, 2)), rng.integers(0, 5, (B, 3)), in_axes=(0, 0, 0))
def ix_grid_gather(a, i, j, x, T):
    return a[x.ix_(i, j)], a[i][:, j]


@prog(r(B, 4, 4), in_axes=0)
def triu_indices_gather_and_with_row(a, x, T):
    iu = x.triu_indices(4, k=1)
    v = a[iu]
    return v, with_row(x, a, 1, v[:4])


@prog(r(8, 3), rng.integers(0, 8, (B, 4)), np.array([0.1, 0.2, 0.3, 0.4]), in_axes=(None, 0, None))
def embedding_bag_weighted(E, ids, w, x, T):
    return w @ E[ids], E[ids[::-1]].max(axis=0)


# === shape chains ====================================================================
@prog(r(B, 4, 6), in_axes=0)
def patchify_reshape_transpose(img, x, T):
    p = img.reshape(2, 2, 3, 2).transpose(0, 2, 1, 3).reshape(6, 4)
    return p, x.moveaxis(img.reshape(2, 2, 6), (0, 1), (-1, -2))


@prog(r(B, 3), r(3), in_axes=(0, None))
def stack_concat_chains_negative_axes(a, w, x, T):
    s = x.stack([a, w, a * w], axis=-1)          # (3, 3)
    c = x.concatenate([s, s[:, :1]], axis=-1)    # (3, 4)
    return c.reshape(-1), x.swapaxes(x.expand_dims(c, (0, 2)), 0, -1), x.squeeze(c[None, :, :1], axis=(0, 2))


@prog(r(2, 3, B), in_axes=-1, out_axes=-2)
def in_last_out_minus2_transposes(a, x, T):
    return a.T @ a, x.transpose(a, (1, 0))


@prog(r(B, 2, 3), r(B, 3), in_axes=(0, 0))
def hstack_vstack_column_stack_split(a, b, x, T):
    v = x.vstack([a, b])
    p, q = x.split(v, [1], axis=0)
    return x.column_stack([b, b]), x.hstack([a[0], b]), p, q.sum(axis=0)


# === reductions with axis tuples and keepdims ========================================
@prog(r(B, 2, 3, 4), in_axes=0)
def reductions_axis_tuples_keepdims(a, x, T):
    return (x.sum(a, axis=(0, 2), keepdims=True), x.max(a, axis=(-2, -1)),
            x.prod(1 + 0.1 * a, axis=(1,)), x.std(a, axis=(0, -1)),
            x.var(a, axis=(0, 1, 2), ddof=1), x.mean(a, axis=(-3, -1), keepdims=True))


@prog(r(B, 3, 4), in_axes=0)
def norms_axis_tuples_and_keepdims(a, x, T):
    return (x.linalg.norm(a, axis=(0, 1)), x.linalg.norm(a, axis=-1, keepdims=True),
            x.linalg.norm(a, ord=1, axis=0), x.linalg.norm(a, "fro"))


@prog(r(B, 3, 4) > 0, r(B, 3, 4), in_axes=(0, 0))
def any_all_count_axis_tuples(m, a, x, T):
    return (x.any(m, axis=(0, 1)), x.all(m, axis=-1, keepdims=True),
            x.sum(x.where(m, a, 0.0), axis=(0, 1)) / x.maximum(m.sum(axis=(0, 1)), 1))


@prog(r(B, 3, 4), in_axes=0)
def argmax_keepdims_take_along(a, x, T):
    k = x.argmax(a, axis=1, keepdims=True)
    return k, x.take_along_axis(a, k, axis=1)


# === in_axes / out_axes / axis_size ==================================================
@prog((r(B, 3), {"w": r(3), "s": r(3, B)}), in_axes=((0, {"w": None, "s": -1}),))
def nested_tuple_dict_in_axes_negative(t, x, T):
    a, d = t
    return a * d["w"] + d["s"], {"n": x.sum(a * d["s"])}


@prog(r(3), axis_size=4, in_axes=(None,), out_axes=1)
def axis_size_all_unbatched_out_axes1(w, x, T):
    return x.outer(w, w)


@prog(r(B, 3), r(3), in_axes=(0, None), out_axes=(0, None, -1))
def out_axes_mixed_none_and_negative(a, w, x, T):
    return a * w, w * 2, x.outer(a, w)


@prog(r(3, B), r(B), in_axes=(1, 0), out_axes=[0, 1])
def list_out_axes_and_column_batch(a, s, x, T):
    return [a * s, x.stack([a, a + s])]


# === nested transforms ================================================================
@prog(r(B, 3), r(5, 3), in_axes=(0, None))
def vmap_of_vmap_rbf_different_axes(a, C, x, T):
    k = T.vmap(lambda c: x.exp(-x.sum((a - c) ** 2)), in_axes=0)(C)
    K2 = T.vmap(T.vmap(lambda u, v: u * v, in_axes=(0, None)), in_axes=(None, 0))(a, C[:, 0])
    return k, K2


@prog(r(3), r(B, 3), r(B), in_axes=(None, 0, 0))
def vmap_grad_argnums_tuple_logistic(w, xi, yi, x, T):
    def loss(w, xi):
        z = w @ xi
        return x.log1p(x.exp(-yi * z))
    gw, gx = T.grad(loss, argnums=(0, 1))(w, xi)
    return gw, gx


@prog(r(B, 3), in_axes=0)
def vmap_jacobian_of_softmax(a, x, T):
    def sm(v):
        e = x.exp(v - v.max())
        return e / e.sum()
    return T.jacrev(sm)(a), T.jacfwd(sm)(a)


@prog(r(B, 3), r(3, 3), in_axes=(0, None))
def jit_inside_vmap_hessian(a, W, x, T):
    f = T.jit(lambda v: T.hessian(lambda u: x.sum(x.tanh(W @ u) ** 2))(v))
    return f(a)


@prog(r(B, 3), in_axes=0)
def vmap_grad_of_inner_vmap_sum(a, x, T):
    def inner(v):
        return x.sum(T.vmap(lambda s: x.sin(s) * s, in_axes=0)(v * v))
    return T.grad(inner)(a), T.value_and_grad(inner)(a)[0]


@prog(r(B, 2, 3), r(3), in_axes=(0, None))
def vmap_inner_in_axes1_out_axes_minus1(a, w, x, T):
    return T.vmap(lambda col, wi: col * wi + x.sum(col), in_axes=(1, 0), out_axes=-1)(a, w)


@prog(r(B, 4), in_axes=0)
def vmap_jvp_and_vjp_inside(a, x, T):
    f = lambda v: x.cumsum(x.sin(v))  # noqa: E731
    y, jv = T.jvp(f, (a,), (x.ones_like(a),))
    _, pull = T.vjp(f, a)
    return y, jv, pull(x.ones(4))[0]


# === numerics that are easy to get wrong =============================================
@prog(r(B, 5) * 30, in_axes=0)
def softplus_stable_large_inputs(a, x, T):
    return x.logaddexp(0.0, a), x.where(a > 20, a, x.log1p(x.exp(x.minimum(a, 20))))


@prog(r(B, 5), in_axes=0)
def norm_normalize_safe(a, x, T):
    n = x.sqrt(x.sum(a * a) + 1e-12)
    return a / n, x.arctan2(a[1:], a[:-1]), x.hypot(a[0], a[1])


@prog(r(B, 6), in_axes=0)
def integer_and_float_mix_floor_mod(a, x, T):
    k = x.floor(a * 2).astype(int)
    return k % 3, a * (k % 2), x.remainder(a, 0.7), x.round(a, 2)


@prog(np.abs(r(B, 5)) + 0.1, r(B, 5), in_axes=(0, 0))
def power_and_log_family(a, b, x, T):
    return a ** b, x.power(a, 3), x.float_power(a, 0.5), x.log10(a) + x.log2(a), x.sqrt(a) ** -1


# === jit on either side, with static arguments =======================================
@prog(r(B, 3), r(4, 3), in_axes=(0, None))
def jit_of_inner_vmap_with_static_argnums(a, C, x, T):
    def dist(c, v, p):
        return x.sum(x.abs(c - v) ** p) ** (1.0 / p)
    f = T.jit(lambda C, v, p: T.vmap(dist, in_axes=(0, None, None))(C, v, p), static_argnums=(2,))
    return f(C, a, 2), f(C, a, 3)


@prog(r(B, 3), r(3, 3), in_axes=(0, None))
def vmap_inner_of_jit_grad(a, W, x, T):
    g = T.jit(T.grad(lambda v, W: x.sum(x.tanh(W @ v)) + 0.5 * v @ v, argnums=(0, 1)))
    gv, gW = g(a, W)
    return gv, gW


@prog(r(B, 2, 3), in_axes=0)
def jit_vmap_jit_rows(a, x, T):
    row = T.jit(lambda v: x.exp(v - x.max(v)) / x.sum(x.exp(v - x.max(v))))
    return T.jit(T.vmap(row))(a)


# === Python structure over items =====================================================
@prog(r(B, 4, 2), in_axes=0)
def iterate_rows_unpack_pairs(pts, x, T):
    area = 0.0
    n = len(pts)
    for k, (u, v) in enumerate(pts):
        u2, v2 = pts[(k + 1) % n]
        area = area + u * v2 - u2 * v
    return 0.5 * area, pts.shape[0] * x.ones(1)


@prog(r(B, 3), in_axes=0)
def list_comprehension_and_sum_builtin(a, x, T):
    terms = [a[i] * a[j] for i in range(3) for j in range(i, 3)]
    return sum(terms), x.stack(terms), max(a.shape) * a


@prog(r(B, 2), in_axes=0)
def unpack_scalar_components_polar(v, x, T):
    px, py = v
    rad = x.sqrt(px ** 2 + py ** 2)
    th = x.arctan2(py, px)
    return x.stack([rad * x.cos(th), rad * x.sin(th)]), rad, th


@prog(r(B, 3).astype(np.float32), r(3, 3).astype(np.float32), in_axes=(0, None))
def float32_layer_grad_and_norm(a, W, x, T):
    g = T.grad(lambda W: x.sum(x.tanh(W @ a) ** 2))(W)
    return g, x.linalg.norm(g), x.exp(a).dtype == a.dtype


@prog(np.zeros((0, 3)), r(3), in_axes=(0, None))
def empty_batch_softmax_and_solve(a, w, x, T):
    e = x.exp(a - a.max())
    return e / e.sum(), x.linalg.solve(x.eye(3) * 2.0, a + w)


# === statistics ======================================================================
@prog(r(B, 6, 2), in_axes=0)
def cov_weighted_average_and_corr(a, x, T):
    w = x.linspace(0.5, 1.5, 6)
    mu = x.average(a, axis=0, weights=w)
    C = x.cov(a, rowvar=False)
    return mu, C, x.corrcoef(a.T)[0, 1]


@prog(r(B, 8), in_axes=0)
def standardize_ddof_and_zscore_clip(a, x, T):
    z = (a - a.mean()) / a.std(ddof=1)
    return x.clip(z, -1.5, 1.5), x.var(a, ddof=1), x.nanmean(x.where(a > 0, a, x.nan))


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def pearson_and_cosine_and_mse(a, b, x, T):
    ac, bc = a - a.mean(), b - b.mean()
    return (ac @ bc / x.sqrt((ac @ ac) * (bc @ bc)),
            x.dot(a, b) / (x.linalg.norm(a) * x.linalg.norm(b)), x.mean((a - b) ** 2))


# === linear algebra, more =============================================================
@prog(r(B, 4, 3), r(B, 4), in_axes=(0, 0))
def normal_equations_ridge_and_lstsq(A, y, x, T):
    w = x.linalg.solve(A.T @ A + 0.1 * x.eye(3), A.T @ y)
    w2 = x.linalg.lstsq(A, y, rcond=None)[0]
    return w, w2, x.linalg.pinv(A) @ y


@prog(r(B, 3, 3), in_axes=0)
def qr_orthogonalize_and_det_sign(A, x, T):
    Q, R = x.linalg.qr(A + 3 * x.eye(3))
    s = x.sign(x.diag(R))
    return Q * s, x.abs(x.linalg.det(Q)), x.linalg.matrix_power(A, 3)


@prog(SPD3, r(3, 2), in_axes=(0, None))
def scipy_cho_solve_and_solve_triangular(S, Bm, x, T):
    L = x.linalg.cholesky(0.5 * (S + S.T))      # symmetric: one gradient convention
    y = T.linalg.solve_triangular(L, Bm, lower=True)
    z = T.linalg.solve_triangular(L.T, y, lower=False)
    return z, T.linalg.cho_solve((L, True), Bm)


@prog(r(B, 3, 3) * 0.3, in_axes=0)
def expm_and_series_compare(A, x, T):
    E = T.linalg.expm(A)
    S, term = x.eye(3), x.eye(3)
    for k in range(1, 10):
        term = term @ A / k
        S = S + term
    return E, S


@prog(r(B, 4), r(B, 4), in_axes=(0, 0))
def gram_schmidt_two_vectors(u, v, x, T):
    e1 = u / x.linalg.norm(u)
    w = v - (v @ e1) * e1
    e2 = w / x.linalg.norm(w)
    return x.stack([e1, e2]), x.outer(e1, e2) - x.outer(e2, e1)


# === gradients of losses through vmap over data with in_axes None params ============
@prog({"W": r(3, 4) / 2, "b": r(3)}, r(B, 4), rng.integers(0, 3, B), in_axes=(None, 0, 0))
def per_example_xent_grad_dict_params(p, xi, yi, x, T):
    def loss(p):
        z = p["W"] @ xi + p["b"]
        return _lse(z, x) - z[yi]
    g = T.grad(loss)(p)
    return g, x.sqrt(sum(x.sum(v ** 2) for v in g.values()))


@prog(r(3), r(B, 3), r(B), in_axes=(None, 0, 0))
def hessian_vector_per_example(w, xi, yi, x, T):
    def loss(w):
        return x.log1p(x.exp(-yi * (w @ xi)))
    H = T.hessian(loss)(w)
    return H @ xi, x.trace(H)


# === NumPy keyword arguments users reach for =========================================
@prog(r(B, 3, 4), in_axes=0)
def flips_rolls_rot90_multi_axis(a, x, T):
    return (x.flip(a, axis=(0, 1)), x.roll(a, shift=(1, -2), axis=(0, 1)),
            x.rot90(a, k=3, axes=(1, 0)), x.roll(a, 5))


@prog(r(B, 3, 3, 2), in_axes=0)
def trace_diagonal_offsets_and_axes(a, x, T):
    return (x.trace(a, offset=1, axis1=0, axis2=1), x.diagonal(a, offset=-1, axis1=1, axis2=0),
            x.trace(a[..., 0], offset=-1))


@prog(r(B, 3), rng.integers(1, 3, 3), in_axes=(0, None))
def repeat_array_counts_tile_kron(a, k, x, T):
    return x.repeat(a, k, total_repeat_length=int(k.sum())) if x is not np else np.repeat(a, k), \
        x.tile(a, (2, 1)), x.kron(a, x.ones(2))


@prog(r(B, 5), (rng.random((B, 5)) > 0.3), in_axes=(0, 0))
def reductions_where_and_initial(a, m, x, T):
    return (x.sum(a, where=m), x.max(a, where=m, initial=-10.0), x.mean(a, where=m | (x.arange(5) == 0)),
            x.min(a, initial=0.5))


@prog(r(B, 3, 4), r(B, 4, 3), in_axes=(0, 0))
def tensordot_axes_pairs_and_matmul_broadcast(a, b, x, T):
    return (x.tensordot(a, b, axes=([1, 0], [0, 1])), x.tensordot(a, b, axes=0).shape[0] * 1.0,
            x.matmul(a[None], b[None, None]).sum(axis=(0, 1)))


@prog(spd(B, 2, 3, 3), r(B, 2, 3), in_axes=(0, 0))
def stacked_linalg_inside_item(S, v, x, T):
    L = x.linalg.cholesky(0.5 * (S + x.swapaxes(S, -1, -2)))
    return (x.linalg.solve(S, v[..., None])[..., 0], x.linalg.det(S), x.linalg.slogdet(S)[1],
            x.linalg.inv(S) @ v[..., None], x.diagonal(L, axis1=-2, axis2=-1))


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def average_returned_and_aweights_cov(a, w, x, T):
    w = x.exp(w)
    avg, sw = x.average(a, weights=w, returned=True)
    return avg, sw, x.cov(x.stack([a, a ** 2]), aweights=w)


@prog(r(B, 5), in_axes=0)
def nan_to_num_isclose_and_logical(a, x, T):
    b = x.where(a > 1.0, x.inf, a)
    c = x.nan_to_num(b, posinf=3.0)
    return c, x.isclose(a, c), x.logical_xor(a > 0, c > 0.5)


@prog(r(B, 4, 3), in_axes=0)
def sort_axis_none_and_argsort_stable(a, x, T):
    q = x.round(a, 1)
    return x.sort(a, axis=None), x.argsort(q, axis=0, stable=True), x.sort(a, axis=0)[::-1]


# === indexing, more ==================================================================
@prog(r(3, 4, 5), rng.integers(0, 3, B), rng.integers(0, 5, B), in_axes=(None, 0, 0))
def shared_array_batched_ints_separated(a, i, j, x, T):
    return a[i, :, j], a[i, 1:3, :][..., j], a[:, :, j].T


@prog(r(B, 4, 5), rng.integers(0, 5, (2, 3)), in_axes=(0, None))
def batched_array_shared_2d_index_second_axis(a, k, x, T):
    return a[:, k], a[1, k], a[..., k[0]]


@prog(r(B, 6), np.array([True, False, True, True, False, True]), in_axes=(0, None))
def shared_bool_mask_and_compress(a, m, x, T):
    return a[m], x.compress(m, a), x.extract(m, a)


@prog(r(B, 4, 3), rng.integers(0, 4, B), in_axes=(0, 0))
def batched_scalar_index_row_and_negative(a, i, x, T):
    return a[i], a[-i - 1], a[i, ::-1], x.take(a, i, axis=0)


@prog(r(B, 4, 4), in_axes=0)
def tril_mask_and_diag_embed(a, x, T):
    L = x.tril(a) + x.diag(x.exp(x.diag(a))) - x.diag(x.diag(a))
    return L @ L.T, x.diagflat(x.diag(a)), x.tril(a, -1).sum()


# === nested transforms, more ==========================================================
@prog({"w": r(B, 3), "b": r(B)}, r(5, 3), in_axes=({"w": 0, "b": 0}, None))
def ensemble_grad_of_inner_vmap_mse(p, X, x, T):
    def loss(p):
        pred = T.vmap(lambda xi: x.tanh(p["w"] @ xi + p["b"]))(X)
        return x.mean((pred - 0.5) ** 2)
    return T.value_and_grad(loss)(p)


@prog(r(B, 3), r(B, 3), in_axes=(0, 0))
def jacobian_of_cross_product_both_args(a, b, x, T):
    jacobian = T.jacobian if x is np else T.jacrev      # tapestry's name for jacrev
    Ja, Jb = jacobian(lambda u, v: x.cross(u, v), argnums=(0, 1))(a, b)
    return Ja, Jb


@prog(r(B, 2), in_axes=0)
def hessian_of_rosenbrock_and_newton_step(v, x, T):
    f = lambda u: (1 - u[0]) ** 2 + 10 * (u[1] - u[0] ** 2) ** 2  # noqa: E731
    H = T.hessian(f)(v)
    g = T.grad(f)(v)
    return v - x.linalg.solve(H + 5 * x.eye(2), g), H


@prog(r(B, 3), r(2, 3), in_axes=(0, None))
def vmap_of_vmap_of_grad_pairwise(a, C, x, T):
    k = lambda u, v: x.exp(-x.sum((u - v) ** 2))  # noqa: E731
    return T.vmap(T.grad(k, argnums=1), in_axes=(None, 0))(a, C)


@prog(r(B, 3), in_axes=0, axis_size=None, kwargs={"scale": np.abs(r(B)) + 0.5,
                                                 "shift": r(B, 3)})
def kwargs_two_mapped_leaves(a, x, T, scale=1.0, shift=0.0):
    return a * scale + shift, x.sum((a - shift) ** 2) / scale


# === creation from batched values ====================================================
@prog(r(B), r(B, 3), in_axes=(0, 0))
def full_and_full_like_with_batched_fill(s, a, x, T):
    return x.full(3, s), x.full_like(a, s) * a, x.eye(3) * s + x.diag(a), x.zeros(a.shape) + s


@prog(r(B, 4), r(B), in_axes=(0, 0))
def append_insert_delete_batched_scalar(a, s, x, T):
    return (x.append(a, s), x.insert(a, 1, s), x.delete(a, x.array([0, 2])),
            x.concatenate([a, x.atleast_1d(s)]))


@prog(r(B, 3), r(B, 2), in_axes=(0, 0))
def meshgrid_broadcast_arrays_batched(a, b, x, T):
    U, V = x.meshgrid(a, b, indexing="ij")
    p, q = x.broadcast_arrays(a[:, None], b[None, :])
    return U * V, p - q, x.broadcast_to(a, (2, 3)).sum(0)


@prog(r(2, 3), r(B, 3, 4), in_axes=(None, 0))
def dot_inner_vdot_2d_items(M, a, x, T):
    return x.dot(M, a), x.inner(a.T, M), x.vdot(a[:2, :3], M), x.einsum("IJ,JK->IK", M, a)


# === signal and differences, more =====================================================
@prog(r(B, 8), r(B, 3), in_axes=(0, 0))
def convolve_both_batched_modes(s, k, x, T):
    return x.convolve(s, k, mode="full"), x.correlate(s, k, mode="valid"), x.convolve(k, s, "same")


@prog(r(B, 6), np.cumsum(np.abs(r(B, 6)), axis=1), in_axes=(0, 0))
def gradient_and_trapezoid_with_batched_spacing(y, t, x, T):
    tr = x.trapezoid(y, t) if hasattr(x, "trapezoid") else x.trapz(y, t)
    return x.gradient(y, t), tr, x.gradient(y, 0.5)


@prog(r(B, 3, 4), in_axes=0)
def gradient_default_and_axis(a, x, T):
    gy, gx = x.gradient(a)
    return gy, gx, x.gradient(a, axis=1)


@prog(r(B, 8), in_axes=0)
def rfft_n_and_fftshift_power(a, x, T):
    F = x.fft.rfft(a, n=10)
    return x.abs(F) ** 2, x.fft.fftshift(x.fft.fft(a).real), x.fft.irfft(F, n=10)


@prog(r(B, 4, 3), r(B, 4, 3), in_axes=(0, 0))
def cross_axisa_axisb(a, b, x, T):
    return x.cross(a, b, axisa=-1, axisb=-1), x.cross(a.T, b.T, axisa=0, axisb=0, axisc=0)


# === sorting, more ====================================================================
@prog(r(B, 7), in_axes=0)
def partition_kth_and_argpartition_values(a, x, T):
    p = x.partition(a, 3)
    return p[3], p[:3].sum(), x.sort(a[x.argpartition(a, 2)[:2]])


@prog(np.sort(r(6)), r(B, 4), in_axes=(None, 0), grad=False)
def digitize_right_and_searchsorted_sorter(edges, v, x, T):
    perm = x.arange(6)[::-1]
    rev = edges[perm]
    return x.digitize(v, edges, right=True), x.searchsorted(rev, v, sorter=perm)


# === in_axes / out_axes, more ========================================================
@prog(r(B), in_axes=0, out_axes=-1)
def zero_d_item_out_axes_minus1(s, x, T):
    return s ** 2, x.stack([s, 2 * s]), x.outer(x.ones(2), x.stack([s, s]))


@prog(r(B, 3), r(3), in_axes=[0, None])
def list_in_axes_top_level(a, w, x, T):
    return a @ w, a - w


@prog(r(3, 4), r(B, 4), in_axes=(None, 0), out_axes=(None, 0))
def grad_wrt_shared_used_batched_out_none(W, v, x, T):
    return W * 2.0, x.tanh(W @ v)


@prog(r(B, 3).astype(np.float32), r(3), r(B, 3).astype(np.int64), in_axes=(0, None, 0))
def dtype_mix_float32_float64_int(a, w, k, x, T):
    kf = k.astype(a.dtype)                      # NumPy: float32 + int64 is float64, JAX: float32
    return a * w, a + kf, (a * 2).astype(x.float64) + w, x.mean(k), a / kf.clip(1, None)


# === transforms vmapped over tangents and cotangents =================================
@prog(np.eye(3), r(3), in_axes=(0, None), name="vmap_of_jvp_over_tangents_only")
def jvp_columns_of_jacobian(t, x0, x, T):
    f = lambda v: x.sin(v) * x.cumsum(v) + x.sum(v ** 3)  # noqa: E731
    return T.jvp(f, (x0,), (t,))[1]


@prog(np.eye(3), r(3), in_axes=(0, None), name="vmap_of_vjp_pullback_over_cotangents")
def vjp_rows_of_jacobian(c, x0, x, T):
    f = lambda v: x.tanh(x.outer(v, v) @ v)  # noqa: E731
    _, pull = T.vjp(f, x0)
    return pull(c)[0]


@prog(r(B, 3), r(B, 3), r(3), in_axes=(0, 0, None))
def vmap_jvp_batched_primal_and_tangent_pytree(p, t, w, x, T):
    f = lambda d: {"y": x.exp(d["a"]) * w, "z": x.sum(d["a"] ** 2)}  # noqa: E731
    out, tan = T.jvp(f, ({"a": p},), ({"a": t},))
    return out["y"], tan["y"], tan["z"]


@prog(r(B, 3), r(3, 3) / 2, in_axes=(0, None))
def vmap_linear_solve_grad_wrt_matrix(b, A, x, T):
    M = A + 3 * x.eye(3)
    gM = T.grad(lambda M: x.sum(x.linalg.solve(M, b) ** 2))(M)
    gdet = T.grad(lambda M: x.linalg.slogdet(M)[1])(M)
    return gM, gdet


@prog(r(B, 4), in_axes=0)
def custom_vjp_clipped_gradient_inside_vmap(a, x, T):
    @T.custom_vjp
    def clip_grad(v):
        return v

    def fwd(v):
        return v, None

    def bwd(_, g):
        return (x.clip(g, -0.1, 0.1),)
    clip_grad.defvjp(fwd, bwd)
    return T.grad(lambda v: x.sum(clip_grad(v) ** 3))(a), clip_grad(a) * 2


# === likelihoods with special functions ==============================================
@prog(rng.integers(0, 8, (B, 5)).astype(float), np.abs(r(B, 5)) + 0.5, np.array(2.5),
      in_axes=(0, 0, None))
def negative_binomial_loglik_gammaln_xlogy(k, mu, alpha, x, T):
    sp = T.special
    return x.sum(sp.gammaln(k + alpha) - sp.gammaln(alpha) - sp.gammaln(k + 1)
                 + sp.xlogy(alpha, alpha / (alpha + mu)) + sp.xlogy(k, mu / (alpha + mu)))


@prog(rng.random((B, 5)) * 0.9 + 0.05, np.abs(r(B, 2)) + 0.5, in_axes=(0, 0))
def beta_logpdf_betaln_digamma_grad(p, ab, x, T):
    sp = T.special
    a, b = ab[0], ab[1]
    lp = x.sum((a - 1) * x.log(p) + (b - 1) * x.log1p(-p)) - 5 * sp.betaln(a, b)
    return lp, sp.digamma(a) - sp.digamma(a + b)


@prog(r(B, 6), (rng.random((B, 6)) > 0.5).astype(float), in_axes=(0, 0))
def probit_loglik_log_ndtr_and_expit(z, y, x, T):
    sp = T.special
    return (x.sum(y * sp.log_ndtr(z) + (1 - y) * sp.log_ndtr(-z)),
            sp.expit(z), sp.logit(sp.expit(0.5 * z)), sp.erf(z / x.sqrt(2.0)))


@prog(r(B, 8), r(B, 8) ** 2, in_axes=(0, 0))
def histogram_range_weights_density(a, w, x, T):
    h, e = x.histogram(a, bins=4, range=(-2.0, 2.0), weights=w)
    d, _ = x.histogram(a, bins=4, range=(-2.0, 2.0), weights=w, density=True)
    return h, d, e


# === shared matrices, batched right-hand sides; one jit inside and outside ==========
@prog(spd(3, 3), r(B, 3), r(3, 2, B), in_axes=(None, 0, -1))
def shared_matrix_batched_vector_and_matrix_rhs(A, b, Bm, x, T):
    L = x.linalg.cholesky(0.5 * (A + A.T))     # symmetric: one gradient convention
    return (x.linalg.solve(A, b), x.linalg.solve(A, Bm), x.linalg.inv(A) @ b,
            T.linalg.solve_triangular(L, b, lower=True))


@prog(r(B, 3).astype(np.float32), spd(3, 3), in_axes=(0, None))
def float32_rhs_float64_matrix_solve_eigh(b, A, x, T):
    w, V = x.linalg.eigh(0.5 * (A + A.T))      # symmetric: one gradient convention
    return x.linalg.solve(A, b), V.T @ b / w, x.linalg.norm(b)


@prog(r(B, 3), r(3), r(3, 3), in_axes=(0, None, None))
def one_jit_called_on_batched_and_shared(a, a0, W, x, T):
    g = T.jit(lambda v, W: x.tanh(W @ v) * x.sum(v ** 2))
    return g(a, W) + g(a0, W), g(a0, W)


@prog(r(B, 4, 3).astype(np.float32), (rng.random((B, 4)) > 0.4), in_axes=(0, 0))
def float32_attention_finfo_min_mask_and_eps_clip(h, keep, x, T):
    keep = x.where(x.arange(4) == 0, True, keep)
    s = (h @ h.T) / x.sqrt(x.asarray(3.0, dtype=h.dtype))
    s = x.where(keep[None, :], s, x.finfo(h.dtype).min)
    p = x.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    eps = x.finfo(p.dtype).eps
    return p @ h, -x.sum(p * x.log(x.clip(p, eps, 1 - eps)), axis=-1)


# === more of the same families, written other ways ====================================
@prog(np.abs(r(B, 2)) + 0.2, np.array([1.0, 0.0]), in_axes=(0, None))
def rk4_stack_rhs_per_example_param_grad(p, y0, x, T):
    def simulate(p):
        def f(y):
            return x.stack([y[1], -p[0] * x.sin(y[0]) - p[1] * y[1]])
        y, dt = y0, 0.1
        for _ in range(10):
            k1 = f(y)
            k2 = f(y + dt / 2 * k1)
            k3 = f(y + dt / 2 * k2)
            k4 = f(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return y
    return simulate(p), T.jacfwd(simulate)(p), T.grad(lambda q: simulate(q)[0])(p)


@prog(r(B, 5), {"q": np.abs(r(B)) * 0.1 + 0.05, "r": np.abs(r(B)) + 0.2},
      in_axes=(0, {"q": 0, "r": 0}))
def kalman_local_level_dict_noise_loglik(z, nz, x, T):
    m, P, ll = 0.0, 10.0, 0.0
    for t in range(5):
        P = P + nz["q"]
        S = P + nz["r"]
        ll = ll - 0.5 * (x.log(2 * x.pi * S) + (z[t] - m) ** 2 / S)
        K = P / S
        m, P = m + K * (z[t] - m), (1 - K) * P
    return ll, m


@prog(r(B, 5, 1), r(B, 5), r(4, 1), r(4, 3), in_axes=(0, 0, None, None))
def gp_posterior_samples_cholesky(X, y, Xs, eps, x, T):
    def k(a, b):
        return x.exp(-0.5 * (a - b.T) ** 2)
    K = k(X, X) + 0.05 * x.eye(5)
    L = x.linalg.cholesky(K)
    Ks = k(Xs, X)
    A = x.linalg.solve(L, Ks.T)
    mu = A.T @ x.linalg.solve(L, y)
    C = k(Xs, Xs) - A.T @ A + 1e-6 * x.eye(4)
    return mu[:, None] + x.linalg.cholesky(C) @ eps


@prog(r(B, 3, 5), rng.random((B, 3, 5)) > 0.4, in_axes=(0, 0))
def lse_rows_with_neg_inf_entries(a, m, x, T):
    m = m | (x.arange(5) == 4)
    v = x.where(m, a, -x.inf)
    mx = x.max(v, axis=-1, keepdims=True)
    out = mx[..., 0] + x.log(x.sum(x.exp(v - mx), axis=-1))
    return out, x.exp(v - out[:, None])


@prog(rng.dirichlet(np.ones(5), size=(B, 3)), rng.integers(0, 5, (B, 3)), in_axes=(0, 0))
def xent_from_probabilities_take_along_axis(p, y, x, T):
    picked = x.take_along_axis(p, y[:, None], axis=1)[:, 0]
    return -x.mean(x.log(picked)), -x.sum(p * x.log(p), axis=1)


@prog(r(B, 6), in_axes=0)
def cumulative_sum_include_initial_and_flip(a, x, T):
    return (x.cumulative_sum(a, include_initial=True), x.flip(x.cumsum(x.flip(a))),
            x.cumulative_prod(1 + 0.1 * a))


@prog(r(B, 3, 6), in_axes=0)
def topk_mean_rows_take_along_axis(a, x, T):
    idx = x.argsort(-a, axis=-1)[:, :2]
    top = x.take_along_axis(a, idx, axis=-1)
    return top.mean(axis=-1), idx


@prog(np.abs(r(B)) * 3, in_axes=0)
def lr_schedule_interp_closure_knots(t, x, T):
    knots, vals = x.asarray([0.0, 1.0, 4.0]), x.asarray([0.0, 1.0, 0.1])
    lr = x.interp(t, knots, vals)
    return lr, lr * x.cos(t)


@prog(r(B, 2, 3, 4), r(B, 2, 3, 4), in_axes=(0, 0))
def einsum_heads_inside_item(q, k, x, T):
    s = x.einsum("hqd,hkd->hqk", q, k) / 2.0
    p = x.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    return x.einsum("hqk,hkd->qhd", p, k).reshape(3, 8)


@prog([r(3), r(3, 3)], axis_size=3, in_axes=([None, None],), out_axes=0)
def axis_size_with_list_of_none_and_constant_output(wl, x, T):
    w, M = wl
    return M @ w, x.sum(w)


@prog(r(B, 3, 6), rng.integers(2, 7, B), in_axes=(0, 0))
def masked_layernorm_var_std_where(h, n, x, T):
    m = (x.arange(6) < n)[None, :] & x.ones((3, 1), dtype=bool)
    mu = x.mean(h, axis=-1, keepdims=True, where=m)
    sd = x.std(h, axis=-1, keepdims=True, where=m)
    return x.where(m, (h - mu) / (sd + 1e-5), 0.0), x.var(h, where=m, ddof=1)
