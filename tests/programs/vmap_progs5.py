"""Vmapped programs of the fifth red-team round, in the style of
tests/programs/vmap_progs2.py: the idioms of ported JAX code that earlier
rounds did not cover (pytrees of in_axes with None leaves on namedtuples,
negative axes everywhere, scatter-like writes, linalg on batched
matrices, sorting and searching with batched and shared operands, dtype
mixes, nested vmaps over different axes, jit on either side), each
written once against ``x`` (numpy or jax.numpy) and ``T`` and compared by
tests/test_user_programs_vmap5.py with jax.vmap and with a Python loop.

Only NumPy is imported here: the JAX child process imports this module too.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .vmap_progs import random_arrays, registry

rng = np.random.default_rng(20261128)
B = 4
PROGRAMS: dict = {}

Params = namedtuple("Params", ["w", "b"])


prog = registry(PROGRAMS)
r, spd = random_arrays(rng)


def scatter_add(x, base, idx, vals):
    """``base`` with ``vals`` added at ``idx`` (repeats accumulate)."""
    if x is np:
        out = np.array(base, dtype=np.result_type(base, vals))
        np.add.at(out, idx, vals)
        return out
    return base.at[idx].add(vals)


def scatter_set(x, base, idx, vals):
    if x is np:
        out = np.array(base, dtype=np.result_type(base, vals))
        out[idx] = vals
        return out
    return base.at[idx].set(vals)


X5 = r(B, 5)
Y5 = r(B, 5)
M33 = r(B, 3, 3)
SPD3 = spd(B, 3, 3)
IDX5 = rng.integers(0, 5, (B, 3))
IDXNEG = -rng.integers(1, 6, (B, 2))
SORTED = np.sort(r(B, 6), axis=1)
GRID = np.linspace(-2.0, 2.0, 7)
T3 = r(3, B, 2)                     # batch axis in the middle
T4 = r(2, 3, B)                     # batch axis last
PN = Params(np.stack([r(3) * (1 + j) for j in range(B)]), np.array(0.3))


# === pytrees of in_axes / out_axes ==================================================
@prog(PN, X5[:, :3], in_axes=(Params(0, None), 0))
def namedtuple_params_none_leaf(p, xi, x, T):
    return x.tanh(p.w @ xi + p.b)


@prog(PN, X5[:, :3], in_axes=(Params(0, None), 0))
def namedtuple_grad_none_leaf(p, xi, x, T):
    g = T.grad(lambda q: x.sum(x.tanh(q.w * xi + q.b) ** 2))(p)
    return g.w, g.b


@prog(T3, T4, in_axes=(-2, -1), out_axes=-1)
def mid_and_last_axes(a, b, x, T):
    return a @ b[:2, :2] + x.sum(b)


@prog({"a": T3, "b": [X5, 2.0]}, in_axes=({"a": 1, "b": [0, None]},))
def dict_list_in_axes_none_scalar(d, x, T):
    return d["a"].sum(axis=-1) * d["b"][1] + d["b"][0][:3]


@prog(X5, Y5, in_axes=(0, 0), out_axes=({"s": 0, "t": -1}, None))
def out_axes_dict_then_none(a, b, x, T):
    return {"s": a * b, "t": x.outer(a, b)[:, :2]}, x.ones(3)


@prog(X5, in_axes=-1, name="in_axes_minus1_of_2d_is_columns")
def in_axes_minus1_cols(a, x, T):
    return x.cumsum(a) * a[::-1]


@prog(X5, r(5), in_axes=(0, None), out_axes=1)
def out_axes_1_of_matrix(a, w, x, T):
    return x.outer(a, w)


@prog(r(B, 2, 3), in_axes=0, out_axes=-2)
def out_axes_minus2_3d(a, x, T):
    return x.stack([a, 2 * a, a ** 2])


@prog(axis_size=3, in_axes=(), out_axes=0)
def axis_size_constant_output(x, T):
    return x.arange(4.0)


@prog(X5[:, :3], axis_size=None, in_axes=(0,), kwargs={"scale": np.array([1.0, 2.0, 3.0, 4.0])})
def kwarg_scale_per_item(a, x, T, scale=1.0):
    return a * scale


# === nested vmap with different axes ================================================
@prog(r(3, B, 2), in_axes=1)
def nested_vmap_axes_1_then_1(a, x, T):
    return T.vmap(lambda row: x.sum(row ** 2), in_axes=0)(a)


@prog(r(B, 3, 4), r(4), in_axes=(0, None))
def nested_vmap_columns_inner(a, w, x, T):
    return T.vmap(lambda col, wi: x.dot(col, col) * wi, in_axes=(1, 0))(a, w)


@prog(r(B, 3), r(5, 3), in_axes=(0, None))
def nested_vmap_out_axes_1(a, c, x, T):
    return T.vmap(lambda ci: a * ci, out_axes=1)(c)


@prog(r(B, 3), r(B, 3), in_axes=(0, 0))
def nested_pairwise_outer_inner_minus1(a, b, x, T):
    A = x.stack([a, b, a - b], axis=-1)               # (3, 3)
    return T.vmap(T.vmap(lambda u, v: u * v + x.sin(u), in_axes=(0, None)),
                  in_axes=(None, -1))(a, A)


# === jit on either side =============================================================
@prog(r(B, 3), r(3, 3), in_axes=(0, None))
def jit_of_grad_inside_vmap(a, W, x, T):
    return T.jit(T.grad(lambda v: x.sum(x.tanh(W @ v) ** 2)))(a)


@prog(r(B, 3), r(3, 3), in_axes=(0, None))
def vmap_inside_jit_inside_vmap(a, W, x, T):
    f = T.jit(lambda M, v: T.vmap(lambda row: x.dot(row, v), in_axes=0)(M))
    return f(W, a)


# === per-example derivatives ========================================================
@prog({"W": r(2, 3), "b": r(2)}, X5[:, :3], in_axes=(None, 0))
def vmap_jacrev_dict_params_output_vector(p, xi, x, T):
    J = T.jacrev(lambda q: x.tanh(q["W"] @ xi + q["b"]))(p)
    return J["W"], J["b"]


@prog(r(3), X5[:, :3], in_axes=(None, 0))
def vmap_hessian_wrt_params(w, xi, x, T):
    return T.hessian(lambda w: x.log1p(x.exp(xi @ w)) + 0.1 * x.sum(w ** 4))(w)


@prog(r(B, 3), in_axes=0)
def vmap_jacfwd_matrix_output(a, x, T):
    return T.jacfwd(lambda v: x.outer(v, x.sin(v)))(a)


@prog(r(3, 3) / 2, X5[:, :3], Y5[:, :3], in_axes=(None, 0, 0))
def value_and_grad_has_aux_argnums(W, xi, yi, x, T):
    def loss(W, xi):
        pred = W @ xi
        return x.sum((pred - yi) ** 2), pred
    (v, aux), (gW, gx) = T.value_and_grad(loss, argnums=(0, 1), has_aux=True)(W, xi)
    return v, aux, gW, gx


@prog(r(3), X5[:, :3], in_axes=(None, 0))
def grad_of_max_and_abs(w, xi, x, T):
    return T.grad(lambda w: x.max(x.abs(w * xi - 0.1)) + x.min(w * xi))(w)


# === indexing, gathers and scatters =================================================
@prog(r(5, 3), IDX5, in_axes=(None, 0))
def gather_rows_then_cols(E, i, x, T):
    rows = E[i]                                          # (3, 3)
    return rows[:, i[0] % 3], rows[x.arange(3), i % 3]


@prog(X5, IDXNEG, in_axes=(0, 0))
def negative_batched_indices(a, i, x, T):
    return a[i] * 2.0, x.take(a, i)


@prog(X5, IDX5, in_axes=(0, 0))
def take_modes_clip_wrap(a, i, x, T):
    return x.take(a, i + 3, mode="clip"), x.take(a, i - 7, mode="wrap")


@prog(r(B, 3, 5), rng.integers(0, 5, (B, 3, 2)), in_axes=(0, 0))
def take_along_axis_minus1(a, i, x, T):
    return x.take_along_axis(a, i, axis=-1)


@prog(X5, IDX5, in_axes=(0, 0))
def scatter_add_repeated(vals, i, x, T):
    return scatter_add(x, x.zeros(5), i, vals[:3])


@prog(X5, IDX5, in_axes=(0, 0))
def scatter_set_batched_into_batched(vals, i, x, T):
    return scatter_set(x, vals * 2, i[:1], vals[3:4])


@prog(X5, rng.integers(0, 5, B), in_axes=(0, 0))
def one_hot_update_where(a, i, x, T):
    return x.where(x.arange(5) == i, a * 10.0, a)


@prog(r(B, 4, 4), rng.integers(0, 4, (B, 2)), in_axes=(0, 0))
def gather_2d_both_batched_ellipsis(a, ij, x, T):
    return a[ij[0], ij[1]], a[..., ij[1]], a[ij[0], :][None, 1:]


@prog(r(4, 5), rng.integers(0, 4, B), rng.integers(0, 5, B), in_axes=(None, 0, 0))
def gather_shared_table_two_indices(W, i, j, x, T):
    return W[i, j] + W[i].sum() + W[:, j].sum()


@prog(r(B, 6), in_axes=0)
def static_slices_and_strides(a, x, T):
    return a[1:-1:2], a[::-2], a[-3:], a[None, :, None][..., 0]


# === sorting, searching, scans ======================================================
@prog(r(B, 6), in_axes=0)
def sort_argsort_descending(a, x, T):
    order = x.argsort(-a)
    return a[order], x.sort(a)[::-1], order


@prog(SORTED, r(B, 3), in_axes=(0, 0))
def searchsorted_both_batched_sides(s, v, x, T):
    return x.searchsorted(s, v), x.searchsorted(s, v, side="right")


@prog(np.sort(r(6)), r(B, 3), in_axes=(None, 0))
def searchsorted_shared_grid(s, v, x, T):
    k = x.searchsorted(s, v)
    return k, x.take(s, x.clip(k, 0, 5)) - v


@prog(r(B, 6), in_axes=0)
def cumsum_cummax_diff_prepend(a, x, T):
    return (x.cumsum(a[::-1])[::-1], x.diff(a, n=2), x.diff(a, prepend=0.0),
            x.cumprod(1 + 0.1 * a))


@prog(r(B, 3, 4), in_axes=0)
def cumsum_negative_axis_and_argmax_axis(a, x, T):
    return x.cumsum(a, axis=-2), x.argmax(a, axis=-1), x.argmin(a, axis=0), x.max(a, axis=(0, -1))


@prog(r(B, 8), r(3), in_axes=(0, None))
def convolve_modes(a, k, x, T):
    return x.convolve(a, k, mode="same"), x.convolve(a, k, mode="valid"), x.convolve(k, a)


@prog(GRID, r(B, 7), r(B, 5) * 1.5, in_axes=(None, 0, 0))
def interp_batched_fp_and_points(xp, fp, xq, x, T):
    return x.interp(xq, xp, fp), x.interp(xq, xp, fp, left=-1.0, right=1.0)


@prog(r(B, 6), in_axes=0)
def topk_by_argsort_static(a, x, T):
    idx = x.argsort(a)[-3:]
    return x.take(a, idx), x.sum(x.take(a, idx) ** 2)


# === linalg on batched matrices =====================================================
@prog(M33 + 3 * np.eye(3), r(B, 3, 2), in_axes=(0, 0))
def solve_matrix_rhs_2cols(A, Bm, x, T):
    return x.linalg.solve(A, Bm)


@prog(M33 + 3 * np.eye(3), r(3, 2), in_axes=(0, None))
def solve_shared_rhs_inv_det(A, Bm, x, T):
    return x.linalg.solve(A, Bm), x.linalg.inv(A), x.linalg.det(A)


@prog(SPD3, in_axes=0)
def cholesky_slogdet_eigh(A, x, T):
    L = x.linalg.cholesky(A)
    s, ld = x.linalg.slogdet(A)
    w, V = x.linalg.eigh(A)
    return L, s * ld, w, x.abs(V[:, -1])


@prog(M33, in_axes=0)
def matrix_norms(A, x, T):
    return (x.linalg.norm(A), x.linalg.norm(A, ord="fro"), x.linalg.norm(A, ord=1),
            x.linalg.norm(A, ord=np.inf), x.linalg.norm(A, axis=-1),
            x.linalg.norm(A[0], ord=1))


@prog(M33, in_axes=0)
def matrix_norm_2_nuc(A, x, T):
    return x.linalg.norm(A, ord=2), x.linalg.norm(A, ord="nuc")


@prog(SPD3, r(3, 3), in_axes=(0, None))
def eigh_gradient_of_top_eigenvalue(A, C, x, T):
    return T.grad(lambda A: x.linalg.eigh(A + C @ C.T)[0][-1])(A)


@prog(M33, in_axes=0)
def multi_dot_trace_kron(A, x, T):
    return (x.linalg.multi_dot([A, A.T, A]), x.trace(A, offset=1), x.kron(A[0], A[1]),
            x.diagonal(A, offset=-1))


@prog(SPD3, in_axes=0)
def solve_triangular_via_cholesky(A, x, T):
    L = x.linalg.cholesky(A)
    y = T.linalg.solve_triangular(L, x.ones(3), lower=True)
    return y, T.linalg.solve_triangular(L.T, y, lower=False)


@prog(r(B, 4, 3), in_axes=0)
def qr_and_svd_values(A, x, T):
    q, rr = x.linalg.qr(A)
    s = x.linalg.svd(A, compute_uv=False)
    return x.abs(x.diagonal(rr)), s, x.sum(s ** 2)


# === einsum =========================================================================
@prog(r(B, 3, 4), r(4, 2), r(B, 2), in_axes=(0, None, 0))
def einsum_ellipsis_and_batched(a, w, v, x, T):
    return (x.einsum("...ij,jk->...ik", a, w), x.einsum("ij,jk,k->i", a, w, v),
            x.einsum("ij->", a))


@prog(r(B, 3, 3), in_axes=0)
def einsum_repeated_index_diag(a, x, T):
    return x.einsum("ii->i", a), x.einsum("ii", a), x.einsum("ij,ij->i", a, a)


# === shapes =========================================================================
@prog(r(B, 2, 3, 4), in_axes=0)
def shape_ops_negative_axes(a, x, T):
    return (x.moveaxis(a, -1, 0), x.swapaxes(a, -1, -3), x.transpose(a, (2, 0, 1)),
            x.expand_dims(a, axis=(-1, 0)),
            x.squeeze(a[:, :1, :, None], axis=-1), x.reshape(a, (-1, 4)))


@prog(r(B, 2, 3), in_axes=0)
def reshape_order_f_and_ravel(a, x, T):
    return x.reshape(a, (3, 2), order="F"), x.ravel(a, order="F"), a.T.reshape(-1)


@prog(X5, r(5), in_axes=(0, None))
def stack_concat_mixed_negative(a, w, x, T):
    return (x.stack([a, w], axis=-1), x.concatenate([w, a, w[:2]], axis=-1),
            x.column_stack([a, w]), x.vstack([a, w]), x.append(a, w[:1]))


@prog(r(B, 2, 2), r(2, 2), in_axes=(0, None))
def block_and_dstack(a, w, x, T):
    return x.block([[a, w], [w, a]]), x.dstack([a, w])


# === dtypes =========================================================================
@prog(X5.astype(np.float32), r(5), in_axes=(0, None))
def float32_item_with_float64_shared(a, w, x, T):
    return a * 2.0, a + w, x.sum(a), x.mean(a.astype(x.float64))


@prog(rng.integers(-5, 5, (B, 5)), in_axes=0, grad=False)
def int_items_ops(a, x, T):
    return a // 2, a % 3, x.mean(a), x.sum(a > 0), x.cumsum(a), x.abs(a).max(), a / 2


@prog(rng.random((B, 5)) > 0.5, X5, in_axes=(0, 0))
def bool_items_mask_sum(m, a, x, T):
    return x.sum(m), x.where(m, a, 0.0), x.any(m), x.all(m), m & (a > 0), (~m).astype(x.float32)


@prog(X5.astype(np.float32), in_axes=0)
def float32_linalg_and_sort(a, x, T):
    A = x.outer(a[:3], a[:3]) + 3 * x.eye(3, dtype=x.float32)
    return x.linalg.inv(A), x.sort(a), x.linalg.norm(a)


# === in-place updates inside the function ===========================================
@prog(X5, in_axes=0)
def augmented_assign_batched(a, x, T):
    b = a
    b = b + 1.0
    b *= 2.0
    b -= a
    return b, a


@prog(X5, r(5), in_axes=(0, None))
def augmented_assign_on_copy_of_shared(a, w, x, T):
    v = w * 1.0
    v += a
    return v


# === where with batched and unbatched mixes =========================================
@prog(X5, r(5), in_axes=(0, None))
def where_mixed_and_scalars(a, w, x, T):
    return (x.where(a > w, a, w), x.where(w > 0, a, 0.0), x.where(a > 0, 1.0, -1.0),
            x.where(True, a, w))


@prog(X5, in_axes=0)
def where_safe_sqrt_grad(a, x, T):
    safe = x.where(a > 0, a, 1.0)
    return x.where(a > 0, x.sqrt(safe), 0.0)


# === realistic programs =============================================================
@prog(r(B, 5, 2), in_axes=0)
def pairwise_distance_matrix_min(pts, x, T):
    d = x.sqrt(x.sum((pts[:, None, :] - pts[None, :, :]) ** 2, axis=-1) + 1e-12)
    d = d + 1e3 * x.eye(5)
    return x.min(d, axis=1), x.argmin(d, axis=1)


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def histogram_like_with_digitize(a, w, x, T):
    bins = x.linspace(-2.0, 2.0, 5)
    k = x.searchsorted(bins, a, side="right")
    return k, x.sum(w * (k == 2))


@prog(r(B, 4), r(3, 4), in_axes=(0, None))
def softmax_attention_over_shared_keys(q, K, x, T):
    s = K @ q / 2.0
    p = x.exp(s - x.max(s))
    p = p / x.sum(p)
    return p @ K, T.grad(lambda q: x.log(x.sum(x.exp(K @ q))))(q)


@prog(r(B, 10), in_axes=0)
def moving_max_via_stack(a, x, T):
    win = x.stack([a[i:i + 3] for i in range(8)])
    return x.max(win, axis=1), x.mean(win, axis=-1)


@prog(r(B, 3), in_axes=0)
def fixed_point_loop_python_range(a, x, T):
    z = x.zeros(3)
    for _ in range(5):
        z = x.tanh(a + 0.5 * z)
    return z


@prog(r(B, 5), in_axes=0)
def logsumexp_special_and_softmax(a, x, T):
    return T.special.logsumexp(a), T.special.softmax(a), T.special.logsumexp(a, b=x.arange(5.0))


@prog(r(B, 5), r(5), in_axes=(0, None))
def clip_percentile_free_ops(a, w, x, T):
    return x.clip(a, -0.5, w), x.clip(a, None, 0.3), x.round(a, 2), x.sign(a) * x.abs(a) ** 1.5


@prog(r(B, 4), in_axes=0)
def prod_and_grad_with_zero(a, x, T):
    b = x.where(x.arange(4) == 1, 0.0, a)
    return x.prod(b), T.grad(lambda v: x.prod(v))(b)


@prog(r(B, 3), in_axes=0)
def maximum_accumulate_and_ufunc_outer(a, x, T):
    return x.maximum.accumulate(a), x.add.outer(a, a), x.multiply.reduce(a)


@prog(r(B, 4), in_axes=0)
def cov_corrcoef_of_item(a, x, T):
    M = x.stack([a, a ** 2, x.sin(a)])
    return x.cov(M), x.corrcoef(M)


@prog(r(B, 5), in_axes=0)
def var_std_ddof_nan_mean(a, x, T):
    return x.var(a, ddof=1), x.std(a), x.nanmean(x.where(a > 1.0, x.nan, a))


@prog(r(B, 5), in_axes=0)
def median_quantile_float(a, x, T):
    return x.median(a), x.quantile(a, 0.3), x.percentile(a, [25.0, 75.0])


@prog(rng.integers(0, 4, (B, 6)), in_axes=0, grad=False)
def bincount_minlength_and_unique_counts(a, x, T):
    return x.bincount(a, minlength=5), x.bincount(a, weights=a * 0.5, minlength=5)


# === advanced indexing layouts ======================================================
A345 = r(B, 3, 4, 5)
I3 = rng.integers(0, 3, B)
J5 = rng.integers(0, 5, B)


@prog(A345, I3, J5, in_axes=(0, 0, 0))
def adv_indices_separated_by_slice(a, i, j, x, T):
    return a[i, :, j], a[i, 1:3, j], a[:, 2, j], a[i, :, 2]


@prog(A345, I3, J5, in_axes=(0, 0, 0))
def adv_indices_adjacent_after_slice(a, i, j, x, T):
    return a[:, i % 4, j], a[..., i % 4, j], a[:, :, j]


@prog(A345, rng.integers(0, 4, (B, 2, 2)), in_axes=(0, 0))
def adv_index_2d_array_middle(a, k, x, T):
    return a[:, k], a[1, k, :2], a[:, k, 0]


@prog(r(3, 4, 5), I3, J5, in_axes=(None, 0, 0))
def shared_array_adv_separated(a, i, j, x, T):
    return a[i, :, j], a[i, 1:3, j], a[:, 2, j]


@prog(r(3, 4, 5), rng.integers(0, 4, (B, 2)), in_axes=(None, 0))
def shared_array_adv_middle_mixed(a, k, x, T):
    return a[:, k, 1], a[0, k], a[:, k][..., ::2], a[2, :, k[0]]


@prog(A345, rng.integers(0, 3, B), in_axes=(0, 0))
def adv_index_with_newaxis(a, i, x, T):
    return a[None, i, :, 0], a[i, None, 1], a[:, None, i % 4]


@prog(A345, in_axes=0)
def constant_adv_index_lists(a, x, T):
    return a[[0, 2], :, [1, 3]], a[:, [0, 1, 1]], a[[2, 0]][:, [3]], a[1:, [0, 2], 1:4]


@prog(A345, rng.random(5) > 0.5, in_axes=(0, None))
def bool_mask_shared_trailing(a, m, x, T):
    return a[..., m], a[0, :, m]


@prog(X5, rng.integers(0, 5, B), rng.integers(0, 5, B), in_axes=(0, 0, 0))
def index_with_list_of_batched_scalars(a, i, j, x, T):
    return a[x.stack([i, j])], a[x.array([i, j])] if x is not np else a[x.stack([i, j])]


# === reductions and dtypes ==========================================================
@prog(rng.integers(0, 255, (B, 20)).astype(np.uint8), in_axes=0, grad=False)
def uint8_sums_promote(a, x, T):
    return x.sum(a), x.sum(a, axis=0), x.cumsum(a)[-1], x.prod(a[:3].astype(x.int64)), a.sum()


@prog(rng.integers(-100, 100, (B, 12)).astype(np.int8), in_axes=0, grad=False)
def int8_sums_and_mean(a, x, T):
    return x.sum(a), x.mean(a), a.mean(), x.sum(a * a), x.max(a) - x.min(a)


@prog(rng.random((B, 12)) > 0.5, in_axes=0, grad=False)
def bool_sums_and_counts(m, x, T):
    return x.sum(m), m.sum(), x.count_nonzero(m), x.mean(m), x.cumsum(m)


@prog(X5.astype(np.float32), in_axes=0)
def float32_sum_dtype_float64(a, x, T):
    return x.sum(a, dtype=x.float64), x.mean(a), x.sum(a ** 2), a.astype(x.float64).sum()


@prog(X5, in_axes=0)
def sum_where_initial(a, x, T):
    return x.sum(a, where=a > 0), x.max(a, initial=0.0), x.sum(a, initial=1.5), x.prod(a, keepdims=True)


@prog(rng.integers(0, 5, (B, 12, 3)), in_axes=0, grad=False)
def int_matmul_and_dot(a, x, T):
    return a.T @ a, x.dot(a[:, 0], a[:, 1]), x.einsum("ij->j", a)


@prog(r(B, 12, 3).astype(np.float32), r(3).astype(np.float32), in_axes=(0, None))
def float32_rows_sum_mean_var(a, w, x, T):
    return x.sum(a * w, axis=-1), x.mean(a, axis=0), x.var(a, axis=1), x.linalg.norm(a, axis=-1)


# === control flow that reads shapes, or refuses ====================================
@prog(r(B, 3, 2), in_axes=0)
def python_loop_over_rows_and_zip(a, x, T):
    out = []
    for row, w in zip(a, [1.0, 2.0, 3.0]):
        out.append(row * w)
    first, *rest = a
    return x.stack(out), first + sum(rest)


@prog(X5, in_axes=0)
def branch_on_item_value_refused(a, x, T):
    if a.sum() > 0:
        return a
    return -a


@prog(X5, in_axes=0)
def python_min_builtin_refused(a, x, T):
    return min(a[0], a[1]) + a


@prog(X5, in_axes=0)
def dynamic_slice_with_argmax_refused(a, x, T):
    k = x.argmax(a)
    return a[:k].sum()


# === parallel_sum / parallel_map with vectorize inside and around vmap =============


# === less common NumPy functions on batched items ==================================
@prog(r(B, 6), in_axes=0)
def partition_and_argpartition(a, x, T):
    return x.partition(a, 2)[:2], x.sort(x.take(a, x.argpartition(a, 2)[:2]))


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def lexsort_and_ptp_average(a, b, x, T):
    return x.ptp(a), x.average(a, weights=x.exp(b)), x.average(a)


@prog(r(B, 6), in_axes=0)
def pad_modes(a, x, T):
    return (x.pad(a, (2, 1), mode="reflect"), x.pad(a, 2, mode="edge"),
            x.pad(a, (1, 2), mode="constant", constant_values=-1.0), x.pad(a, 2, mode="wrap"),
            x.pad(a, 1, mode="symmetric"))


@prog(r(B, 2, 6), in_axes=0)
def pad_2d_per_axis(a, x, T):
    return x.pad(a, ((1, 0), (0, 2)), mode="edge"), x.pad(a, ((0, 1), (2, 2)))


@prog(r(B, 6), rng.integers(0, 3, B), in_axes=(0, 0))
def roll_batched_shift(a, k, x, T):
    return x.roll(a, k), x.roll(a, 2)


@prog(r(B, 3, 3), in_axes=0)
def matrix_power_and_eigvals(a, x, T):
    return x.linalg.matrix_power(a, 3), x.linalg.matrix_power(a + 3 * x.eye(3), -1)


@prog(r(B, 5), r(B, 5), in_axes=(0, 0))
def cross_inner_vdot_outer(a, b, x, T):
    return x.cross(a[:3], b[:3]), x.inner(a, b), x.vdot(a, b), x.outer(a, b).trace()


@prog(r(B, 3, 4), r(B, 3, 4), in_axes=(0, 0))
def cross_axis0(a, b, x, T):
    return x.cross(a, b, axis=0), x.cross(a[:, :3], b[:, :3], axisa=0, axisb=0, axisc=0)


@prog(r(B, 7), in_axes=0)
def gradient_trapezoid_ediff(a, x, T):
    return x.gradient(a), x.gradient(a, 0.5), x.ediff1d(a), x.trapezoid(a) if hasattr(x, "trapezoid") else x.trapz(a)


@prog(r(B, 7) * 4, in_axes=0)
def unwrap_angles(a, x, T):
    return x.unwrap(a), x.unwrap(a, period=3.0)


@prog(r(B, 6), in_axes=0)
def select_piecewise_choose(a, x, T):
    return (x.select([a < -0.5, a > 0.5], [a ** 2, x.sin(a)], default=0.0),
            x.piecewise(a, [a < 0, a >= 0], [lambda v: -v, lambda v: v ** 2]),
            x.choose(x.clip((a + 1).astype(int), 0, 2), [a, 2 * a, 3 * a]))


@prog(rng.integers(0, 6, (B, 5)), in_axes=0, grad=False)
def isin_and_setops_fixed(a, x, T):
    return x.isin(a, x.array([1, 3])), x.searchsorted(x.array([0, 2, 4]), a)


@prog(r(B, 6), in_axes=0)
def add_reduceat_and_accumulate(a, x, T):
    return x.add.reduceat(a, [0, 2, 5]), x.logaddexp.accumulate(a), x.minimum.accumulate(a)


@prog(X5, IDX5, in_axes=(0, 0))
def ufunc_at_maximum_and_subtract(vals, i, x, T):
    if x is np:
        out = np.full(5, -10.0)
        np.maximum.at(out, i, vals[:3])
        out2 = np.ones(5)
        np.subtract.at(out2, i, vals[:3])
        return out, out2
    return (x.full(5, -10.0).at[i].max(vals[:3]), x.ones(5).at[i].add(-vals[:3]))


@prog(r(B, 4, 4), in_axes=0)
def fft_axes_and_norm(a, x, T):
    return (x.abs(x.fft.fft(a, axis=0)), x.fft.rfft(a, n=6, axis=-1).real,
            x.fft.ifft2(a, norm="ortho").imag, x.fft.fftshift(a, axes=-1))


@prog(r(B, 4), in_axes=0)
def apply_vectorized_lambda(a, x, T):
    return x.vectorize(lambda t: t ** 2 + 1.0)(a)


@prog(r(B, 4, 3), in_axes=0)
def apply_along_axis_sum(a, x, T):
    return x.apply_along_axis(lambda row: row[0] * row.sum(), -1, a)


@prog(rng.integers(0, 3, (B, 6)), in_axes=0, grad=False)
def unique_counts_fixed(a, x, T):
    return x.unique(x.concatenate([a, x.arange(3)]), return_counts=True)[1]


@prog(r(B, 3), r(B, 3), in_axes=(0, 0))
def meshgrid_and_tri(a, b, x, T):
    A, Bm = x.meshgrid(a, b, indexing="ij")
    iu = x.triu_indices(3, k=1)
    return A * Bm, (A - Bm)[iu], x.tril(A, k=-1), x.triu(Bm, 1)


@prog(r(B, 5) + 0j + 1j * r(B, 5), in_axes=0)
def complex_abs_angle_conj(z, x, T):
    return x.abs(z), x.angle(z), (z * x.conj(z)).real, x.real(x.sqrt(z)), x.imag(z ** 2)


@prog(r(B, 4), in_axes=0)
def nan_functions(a, x, T):
    b = x.where(a > 0.5, x.nan, a)
    return (x.nansum(b), x.nanmax(b), x.nanmin(b), x.nanstd(b), x.nan_to_num(b, nan=-2.0),
            x.isnan(b), x.nanargmax(b))


@prog(r(B, 5), in_axes=0)
def logical_and_comparisons(a, x, T):
    return (x.logical_and(a > 0, a < 1), x.logical_xor(a > 0, a > -0.5), x.isclose(a, 0.0, atol=0.5),
            x.allclose(a, a + 1e-12), x.array_equal(a, a), x.greater_equal(a, 0.0).astype(x.float64) * a)


@prog(r(B, 5), in_axes=0)
def heaviside_copysign_fmod(a, x, T):
    return x.heaviside(a, 0.5), x.copysign(a, -1.0), x.fmod(a * 3, 1.0), x.remainder(a * 3, 1.0), x.hypot(a, 2.0)


@prog(r(B, 5), in_axes=0)
def float_power_expm1_log2(a, x, T):
    return x.float_power(x.abs(a), 1.5), x.expm1(a), x.log2(x.abs(a) + 1), x.cbrt(a), x.sinc(a), x.arctan2(a, 1 - a)


@prog(r(B, 3, 2), in_axes=0)
def einsum_with_out_broadcast(a, x, T):
    return x.einsum("ij,ik->jk", a, a), x.einsum("ij,j->i", a, x.ones(2)), x.einsum("...j,...j->...", a, a)


@prog(r(B, 3, 4), r(4, 3), in_axes=(0, None))
def tensordot_variants(a, b, x, T):
    return x.tensordot(a, b, axes=1), x.tensordot(a, b, axes=([0, 1], [1, 0])), x.tensordot(a, a, axes=0).shape and x.tensordot(a, b.T, axes=2)


@prog(r(B, 6), in_axes=0)
def histogram_fixed_bins(a, x, T):
    h, e = x.histogram(a, bins=4, range=(-2.0, 2.0))
    return h, x.digitize(a, x.array([-1.0, 0.0, 1.0]))


# === flat indices, windows, index helpers ==========================================
@prog(r(B, 3, 4), in_axes=0)
def argmax_flat_unravel(a, x, T):
    k = x.argmax(a)
    i, j = x.unravel_index(k, a.shape)
    return k, a[i, j], x.take(a, k), x.ravel_multi_index((i, j), (3, 4))


@prog(r(B, 3, 4), rng.integers(0, 12, (B, 2)), in_axes=(0, 0))
def take_axis_none_batched_flat(a, k, x, T):
    return x.take(a, k), a.ravel()[k], a.flatten()[::-1][k]


@prog(r(B, 8), in_axes=0)
def sliding_window_view_mean(a, x, T):
    if x is np:
        w = np.lib.stride_tricks.sliding_window_view(a, 3)
    else:
        w = x.stack([a[i:i + 3] for i in range(6)])
    return x.mean(w, axis=-1), w[:, ::2]


@prog(r(B, 3, 4), in_axes=0)
def rot90_flip_none_resize(a, x, T):
    return x.rot90(a), x.rot90(a, k=-1, axes=(1, 0)), x.flip(a), x.flip(a, axis=-1)


@prog(r(B, 6), in_axes=0)
def delete_insert_split(a, x, T):
    return (x.delete(a, [1, 3]), x.insert(a, 2, -1.0), x.array_split(a, 4)[-1],
            x.split(a, [2, 5])[1])


@prog(r(B, 3, 4), rng.random(4) > 0.3, in_axes=(0, None))
def compress_shared_condition(a, m, x, T):
    return x.compress(m, a, axis=1), a[:, m], x.compress([True, False, True], a, axis=0)


@prog(r(B, 3), r(B, 4), in_axes=(0, 0))
def ix_outer_indexing(a, b, x, T):
    M = x.outer(a, b)
    return M[x.ix_(x.array([0, 2]), x.array([1, 3]))], M[x.array([[0], [2]]), x.array([1, 3])]


@prog(r(B, 1, 3), in_axes=0)
def squeeze_atleast_broadcast_arrays(a, x, T):
    b, c = x.broadcast_arrays(a, x.ones((2, 1)))
    return x.squeeze(a), x.atleast_2d(a[0, 0]), x.atleast_3d(a[0]), b + c, x.squeeze(a, 0)


@prog(r(B, 4), rng.integers(0, 4, B), in_axes=(0, 0))
def indices_eye_and_diag(a, k, x, T):
    D = x.diag(a)
    return D, x.diag(D), x.diag(a, k=1), D[x.diag_indices(4)], x.eye(4)[k] @ D


# === realistic compositions ==========================================================
LENS = np.array([2, 5, 3, 4])
SEQ5 = r(B, 5, 3)
LSTM = {"Wx": r(4 * 2, 3) / 2, "Wh": r(4 * 2, 2) / 2, "b": r(4 * 2) / 4}
IMG = r(B, 6, 6)
CONVK = r(2, 3, 3) / 3


@prog(SEQ5, LENS, r(3, 3) / 2, in_axes=(0, 0, None))
def masked_attention_from_lengths(s, n, W, x, T):
    def loss(W):
        q = s @ W
        scores = q @ s.T / 2.0
        valid = x.arange(5) < n
        scores = x.where(valid[None, :], scores, -1e9)
        p = x.exp(scores - x.max(scores, axis=-1, keepdims=True))
        p = p / x.sum(p, axis=-1, keepdims=True)
        out = p @ s
        return x.sum(x.where(valid[:, None], out ** 2, 0.0)) / n
    return loss(W), T.grad(loss)(W)


@prog(SEQ5, LENS, r(3), in_axes=(0, 0, None))
def padded_sequence_mean_loss(s, n, w, x, T):
    valid = (x.arange(5) < n).astype(s.dtype)
    per_tok = (s @ w) ** 2
    return x.sum(per_tok * valid) / x.sum(valid), T.grad(lambda w: x.sum(((s @ w) ** 2) * valid) / n)(w)


@prog(LSTM, SEQ5, in_axes=(None, 0))
def lstm_per_example_grad(p, s, x, T):
    def run(p):
        h, c = x.zeros(2), x.zeros(2)
        hs = []
        for t in range(5):
            z = p["Wx"] @ s[t] + p["Wh"] @ h + p["b"]
            i, f, o, g = z[0:2], z[2:4], z[4:6], z[6:8]
            sig = lambda v: 1 / (1 + x.exp(-v))  # noqa: E731
            c = sig(f) * c + sig(i) * x.tanh(g)
            h = sig(o) * x.tanh(c)
            hs.append(h)
        H = x.stack(hs)
        return x.sum(H ** 2), H
    (v, H), g = T.value_and_grad(run, has_aux=True)(p)
    return v, H, g["Wx"], g["b"]


@prog(CONVK, IMG, in_axes=(None, 0))
def cnn_conv_pool_per_example_grad(K, img, x, T):
    def conv(K):
        patches = x.stack([x.stack([img[i:i + 3, j:j + 3] for j in range(4)]) for i in range(4)])
        fm = x.einsum("ijab,kab->kij", patches, K)            # (2, 4, 4)
        fm = x.maximum(fm, 0.0)
        pooled = fm.reshape(2, 2, 2, 2, 2).max(axis=(2, 4))  # 2x2 max pool
        return x.sum(pooled ** 2)
    return conv(K), T.grad(conv)(K)


@prog(r(B, 3), r(B), {"w": r(3), "b": np.array(0.0)}, in_axes=(0, 0, None))
def inner_sgd_loop_history(xi, yi, p0, x, T):
    def loss(p):
        return (x.tanh(p["w"] @ xi + p["b"]) - yi) ** 2
    p, hist = p0, []
    for _ in range(3):
        v, g = T.value_and_grad(loss)(p)
        p = {k: p[k] - 0.5 * g[k] for k in p}
        hist.append(v)
    return x.stack(hist), p


@prog(r(B, 4), r(4, 4) / 3, in_axes=(0, None))
def hvp_by_jvp_of_grad(v, H0, x, T):
    def f(z):
        return x.sum(x.tanh(H0 @ z) ** 2) + 0.1 * x.sum(z ** 4)
    return T.jvp(T.grad(f), (v,), (x.ones(4),))[1]


@prog(r(B, 5, 2), r(B, 5) > 0, in_axes=(0, 0), grad=True)
def lennard_jones_masked_forces(pos, alive, x, T):
    def energy(pos):
        d = pos[:, None, :] - pos[None, :, :]
        r2 = x.sum(d ** 2, axis=-1) + x.eye(5)
        inv6 = (1.0 / r2) ** 3
        e = 4 * (inv6 ** 2 - inv6)
        m = alive[:, None] & alive[None, :] & ~x.eye(5, dtype=bool)
        return 0.5 * x.sum(x.where(m, e, 0.0))
    return energy(pos), -T.grad(energy)(pos)


@prog(r(B, 4, 4), rng.uniform(0.5, 2.5, (B, 2)), in_axes=(0, 0))
def bilinear_sample_floor_ceil(img, pt, x, T):
    i0 = x.floor(pt).astype(int)
    i1 = i0 + 1
    f = pt - i0
    v00 = img[i0[0], i0[1]]
    v01 = img[i0[0], i1[1]]
    v10 = img[i1[0], i0[1]]
    v11 = img[i1[0], i1[1]]
    return ((1 - f[0]) * ((1 - f[1]) * v00 + f[1] * v01) + f[0] * ((1 - f[1]) * v10 + f[1] * v11))


@prog(r(B, 5), rng.integers(0, 3, (B, 5)), in_axes=(0, 0))
def pairwise_ranking_loss_triu(s, rel, x, T):
    diff = s[:, None] - s[None, :]
    better = (rel[:, None] > rel[None, :]).astype(s.dtype)
    mask = x.triu(x.ones((5, 5)), k=1) + x.tril(x.ones((5, 5)), k=-1)
    return x.sum(mask * better * x.logaddexp(0.0, -diff))


@prog(r(B, 6), r(B, 6), in_axes=(0, 0))
def vae_elbo_reparam(mu_lv, eps, x, T):
    mu, lv = mu_lv[:3], mu_lv[3:]
    z = mu + x.exp(0.5 * lv) * eps[:3]
    rec = -0.5 * x.sum((z - eps[3:]) ** 2)
    kl = 0.5 * x.sum(x.exp(lv) + mu ** 2 - 1 - lv)
    return rec - kl


@prog(r(B, 3), rng.integers(0, 5, B), r(5, 3), in_axes=(0, 0, None))
def per_example_grad_wrt_shared_table_row(xi, k, E, x, T):
    g = T.grad(lambda E: x.sum(x.tanh(E[k] * xi)) + 0.01 * x.sum(E ** 2))(E)
    return g, g[k]


@prog(r(B, 4), in_axes=0)
def while_loop_fixed_count_newton(a, x, T):
    z = x.ones(4)
    i = 0
    while i < 6:
        z = z - (z ** 3 - x.exp(a)) / (3 * z ** 2)
        i += 1
    return z


@prog(r(B, 6), in_axes=0)
def argsort_take_along_topk_gumbel_free(a, x, T):
    idx = x.argsort(-a)[:3]
    w = x.exp(x.take_along_axis(a, idx, axis=0))
    return w / x.sum(w), idx


@prog(r(B, 3, 3), in_axes=0)
def power_iteration_python_loop(A, x, T):
    M = A @ A.T + x.eye(3)
    v = x.ones(3) / x.sqrt(3.0)
    for _ in range(20):
        v = M @ v
        v = v / x.linalg.norm(v)
    return v @ M @ v


@prog(r(B, 8), r(3), in_axes=(0, None))
def ar_model_loglik_via_convolve(y, phi, x, T):
    pred = x.convolve(y, phi, mode="full")[2:7]
    resid = y[3:] - pred
    return -0.5 * x.sum(resid ** 2)


@prog(r(B, 2), r(2, 2) / 2, in_axes=(0, None))
def neural_ode_rk4_param_grad(y0, A, x, T):
    def solve(A):
        y = y0
        h = 0.1
        for _ in range(5):
            k1 = x.tanh(A @ y)
            k2 = x.tanh(A @ (y + h / 2 * k1))
            k3 = x.tanh(A @ (y + h / 2 * k2))
            k4 = x.tanh(A @ (y + h * k3))
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return x.sum(y ** 2)
    return T.value_and_grad(solve)(A)
