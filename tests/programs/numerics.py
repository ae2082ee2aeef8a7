"""Numerical programs: optimisation test functions, polynomial fits,
interpolation, cumulative and sorting-based losses, masks, fancy indexing and
array manipulation (concatenate, stack, reshape, tril/triu, kron, ...)."""
import numpy as np

from . import program, rng


@program(args=lambda: (np.array([-1.2, 1.0]),), mode="hessian")
def rosenbrock_indexing(t):
    return (1 - t[0]) ** 2 + 100 * (t[1] - t[0] ** 2) ** 2


@program(args=lambda: (rng(300).standard_normal(6),))
def rosenbrock_vectorised(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@program(args=lambda: (rng(301).standard_normal((4, 2)),))
def rosenbrock_for_row_in_x(x):
    total = 0.0
    for row in x:
        total += (1 - row[0]) ** 2 + 100 * (row[1] - row[0] ** 2) ** 2
    return total


@program(args=lambda: (rng(302).uniform(-2, 2, 5),))
def rastrigin(x):
    return 10 * len(x) + np.sum(x ** 2 - 10 * np.cos(2 * np.pi * x))


@program(args=lambda: (rng(303).uniform(-2, 2, 4),))
def ackley(x):
    n = x.size
    return (-20 * np.exp(-0.2 * np.sqrt(np.sum(x ** 2) / n))
            - np.exp(np.sum(np.cos(2 * np.pi * x)) / n) + 20 + np.e)


@program(args=lambda: (1.3, 0.4))
def beale_python_floats(x, y):
    return ((1.5 - x + x * y) ** 2 + (2.25 - x + x * y ** 2) ** 2 + (2.625 - x + x * y ** 3) ** 2)


@program(args=lambda: (np.array(1.1), np.array(-0.7)), mode="hessian")
def himmelblau_0d(x, y):
    return (x ** 2 + y - 11) ** 2 + (x + y ** 2 - 7) ** 2


@program(args=lambda: (rng(304).standard_normal(4), np.linspace(-1, 1, 10)), argnums=(0,))
def polyfit_np_polyval(coeffs, x):
    y = np.sin(2 * x)
    return np.sum((np.polyval(coeffs, x) - y) ** 2)


@program(args=lambda: (rng(305).standard_normal(4), np.linspace(-1, 1, 10)), argnums=(0,))
def polyfit_vander(coeffs, x):
    V = np.vander(x, 4)
    return np.sum((V @ coeffs - np.exp(x)) ** 2)


@program(args=lambda: (rng(306).standard_normal(4), np.linspace(-1, 1, 10)), argnums=(0,))
def polyval_horner_loop(coeffs, x):
    y = np.zeros_like(x)
    for c in coeffs:
        y = y * x + c
    return np.sum((y - np.cos(x)) ** 2)


@program(args=lambda: (np.linspace(0, 1, 6) ** 2,))
def interp_fp_values(fp):
    xp = np.linspace(0, 1, 6)
    x = np.array([0.05, 0.33, 0.5, 0.71, 0.95])
    return np.sum(np.interp(x, xp, fp) ** 2)


@program(args=lambda: (np.array([0.12, 0.37, 0.52, 0.81]),))
def interp_query_points(x):
    xp = np.linspace(0, 1, 6)
    fp = np.sin(3 * xp)
    return np.sum(np.interp(x, xp, fp))


@program(args=lambda: (rng(307).standard_normal(8),))
def cumsum_running_max_drawdown(returns):
    wealth = np.cumsum(0.1 * returns)
    return np.sum(wealth ** 2) - wealth[-1]


@program(args=lambda: (rng(308).standard_normal(7),))
def cumprod_survival(hazard_logits):
    h = 1 / (1 + np.exp(-hazard_logits))
    surv = np.cumprod(1 - h)
    return -np.sum(np.log(surv[:-1] * h[1:]))


@program(args=lambda: (rng(309).standard_normal(10), np.sort(rng(310).standard_normal(10))), argnums=(0,))
def wasserstein_sorted(x, y_sorted):
    return np.mean((np.sort(x) - y_sorted) ** 2)


@program(args=lambda: (rng(311).standard_normal(8),))
def topk_sum_argsort(x):
    idx = np.argsort(x)[-3:]
    return np.sum(x[idx] ** 2)


@program(args=lambda: (rng(312).standard_normal((3, 5)),))
def sort_axis_rows(x):
    s = np.sort(x, axis=1)
    return np.sum(s * np.arange(5.0))


@program(args=lambda: (rng(313).standard_normal(9),))
def max_min_ptp(x):
    return np.max(x) ** 2 - np.min(x) + np.ptp(x * 2)


@program(args=lambda: (rng(314).standard_normal(10),))
def boolean_mask_positive_part(x):
    pos = x[x > 0]
    return np.sum(pos ** 2) + np.sum(x[~(x > 0)])


@program(args=lambda: (rng(315).standard_normal(10),))
def masked_assignment_copy(x):
    y = x.copy()
    y = np.where(y < 0, 0.1 * y, y)
    return np.sum(y ** 3)


@program(args=lambda: (rng(316).standard_normal((5, 3)), np.array([0, 2, 2, 4, 0, 0])), argnums=(0,))
def fancy_index_repeated_rows(W, idx):
    return np.sum(W[idx] ** 2) + np.sum(W[idx, 1] * W[idx, 2])


@program(args=lambda: (rng(317).standard_normal((4, 4)),))
def fancy_index_2d_pairs(A):
    rows, cols = np.array([0, 1, 1, 3]), np.array([2, 0, 0, 3])
    return np.sum(A[rows, cols] ** 2) + np.sum(A[[0, 2]][:, [1, 3]])


@program(args=lambda: (rng(318).standard_normal((3, 4)), rng(319).standard_normal((2, 4))))
def concatenate_stack_vstack(a, b):
    c = np.concatenate([a, b], axis=0)
    s = np.stack([a[0], b[0]], axis=1)
    v = np.vstack([a, b * 2])
    h = np.hstack([a[:, :2], a[:, 2:]])
    return np.sum(c ** 2) + np.sum(s) + np.sum(v * c) + np.sum(h ** 3)


@program(args=lambda: (rng(320).standard_normal((2, 3, 4)),))
def reshape_transpose_swapaxes(x):
    y = x.reshape(6, 4).T.reshape(2, 2, 6)
    z = np.swapaxes(x, 0, 2)
    w = np.moveaxis(x, 0, -1)
    return np.sum(y[:, 0] ** 2) + np.sum(z[1] ** 2) + np.sum(w[..., 0] * x[0])


@program(args=lambda: (rng(321).standard_normal((4, 4)),))
def tril_triu_trace_diag(A):
    L = np.tril(A)
    U = np.triu(A, 1)
    return np.trace(L @ U) + np.sum(np.diag(A) ** 2) + np.sum(np.diag(np.diag(A)) @ A)


@program(args=lambda: (rng(322).standard_normal((2, 2)), rng(323).standard_normal((2, 3))))
def kron_outer_products(A, B):
    K = np.kron(A, B)
    O = np.outer(A.ravel(), B[0])
    return np.sum(K ** 2) + np.sum(O * O[::-1])


@program(args=lambda: (rng(324).standard_normal(6),))
def unique_values(x):
    vals = np.unique(np.round(x * 0, 3) + x)
    return np.sum(vals ** 2 * np.arange(1, len(vals) + 1))


@program(args=lambda: (np.array([0.5, 2.0]),))
def linspace_traced_endpoints(ab):
    grid = np.linspace(ab[0], ab[1], 7)
    return np.sum(np.sin(grid))


@program(args=lambda: (rng(325).standard_normal(10),))
def select_piecewise(x):
    y = np.select([x < -0.5, x > 0.5], [x ** 2, 2 * x], default=np.sin(x))
    return np.sum(y)


@program(args=lambda: (rng(326).standard_normal((3, 4)),))
def reductions_mixed_axes(x):
    return (np.sum(x, axis=0) @ np.mean(x, axis=1).repeat(4)[:4] + np.prod(x[0] + 2)
            + np.std(x) + np.var(x, axis=1, ddof=1).sum() + np.linalg.norm(x))


@program(args=lambda: (rng(327).standard_normal(5),))
def abs_sign_l1(x):
    return np.sum(np.abs(x)) + np.sum(np.sign(x) * x ** 2)


@program(args=lambda: (rng(328).standard_normal((3, 3)), np.array([2, 0, 1])), argnums=(0,))
def take_along_axis_gather(x, idx):
    return np.sum(np.take_along_axis(x, idx[:, None], axis=1) ** 2) + np.sum(np.take(x, [0, 4, 4, 8]))


@program(args=lambda: (rng(329).standard_normal((3, 3)),))
def tile_repeat_broadcast_to(x):
    t = np.tile(x[0], 2)
    r = np.repeat(x[:, :1], 3, axis=1)
    b = np.broadcast_to(x[1], (4, 3))
    return np.sum(t ** 2) + np.sum(r * x) + np.sum(b ** 3)


@program(args=lambda: (rng(330).standard_normal((2, 3)),))
def flip_roll_pad(x):
    y = np.flip(x, axis=1) + np.roll(x, 1, axis=0)
    z = np.pad(y, 1, mode="constant")
    return np.sum(z * np.arange(z.size).reshape(z.shape))


@program(args=lambda: (np.zeros(0), rng(331).standard_normal(3)))
def empty_array_terms(empty, x):
    return np.sum(empty ** 2) + np.sum(x ** 2) + np.sum(x[:0])


@program(args=lambda: (np.zeros(0),))
def max_initial_on_empty(x):
    return np.max(x, initial=0.0) + np.sum(x)


@program(args=lambda: (rng(332).standard_normal(5),))
def where_safe_log(x):
    safe = np.where(x > 0, x, 1.0)
    return np.sum(np.where(x > 0, np.log(safe), 0.0))


@program(args=lambda: (rng(333).standard_normal(6),))
def split_and_dot(x):
    a, b, c = np.split(x, 3)
    p, q = np.array_split(x, 2)
    return a @ b + np.sum(c ** 2) + p @ q


@program(args=lambda: (rng(334).standard_normal((3, 3)),))
def einsum_variety(A):
    return (np.einsum("ii", A) + np.einsum("ij,ij->", A, A) + np.einsum("ij,jk,ki->", A, A, A)
            + np.sum(np.einsum("i,j->ij", A[0], A[1])))


@program(args=lambda: (rng(335).standard_normal((3, 3)),))
def ufunc_methods_reduce_accumulate(A):
    return np.add.reduce(A, axis=0) @ np.multiply.accumulate(A[0] + 2) + np.sum(np.multiply.outer(A[0], A[1]))


@program(args=lambda: (rng(336).uniform(0.5, 2, 6),))
def power_log_exp_misc(x):
    return np.sum(x ** x) + np.sum(np.log2(x) + np.log10(x) + np.expm1(x) + np.log1p(x) + np.cbrt(x)
                                   + np.hypot(x, 1.0) + np.arctan2(x, 2.0) + np.sinh(x) / np.cosh(x))


@program(args=lambda: (rng(337).standard_normal((4, 3)),))
def minimum_maximum_pairs(x):
    return np.sum(np.minimum(x[:2], x[2:]) ** 2) + np.sum(np.fmax(x, 0.2)) + np.sum(np.amax(x, axis=1))


@program(args=lambda: (rng(338).standard_normal((2, 3)),))
def atleast_expand_squeeze(x):
    y = np.expand_dims(x, 0)
    z = np.squeeze(y[:, :1], axis=(0, 1))
    return np.sum(np.atleast_2d(z) ** 2) + np.sum(x.flatten()[::2]) + np.sum(np.ravel(x.T) * np.arange(6))
