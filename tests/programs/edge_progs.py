"""Edge cases inside otherwise ordinary programs: zeros reaching products
and determinants, accumulators that are plain NumPy arrays, traced clip
bounds, non-contiguous inputs, size-1 outputs, SciPy functions that are not
ufuncs, and second derivatives through sort, max, solve and indexing."""
import numpy as np
import scipy.special as sp
import scipy.stats as st

from . import program, rng


@program(args=lambda: (np.array([0.5, -1.0, 2.0, 1.5]),))
def prod_after_relu_has_zero(x):
    return np.prod(np.maximum(x, 0.0) + np.array([0.0, 0.0, 0.0, 0.0])) + np.prod(x)


@program(args=lambda: (np.array([1.5, 0.0, 2.0, -0.5]),))
def prod_of_input_with_exact_zero(x):
    return np.prod(x) + np.prod(x[1:] * 2)


@program(args=lambda: (np.array([1.5, 0.0, 2.0, -0.5]),))
def cumprod_with_exact_zero(x):
    return np.sum(np.cumprod(x))


@program(args=lambda: (np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, -1.0, 2.0]]),))
def det_of_singular_matrix(A):
    return np.linalg.det(A)


@program(args=lambda: (rng(700).standard_normal(3),))
def numpy_zeros_accumulator_iadd(w):
    acc = np.zeros(3)
    for k in range(1, 4):
        acc += w * k
    return np.sum(acc ** 2)


@program(args=lambda: (rng(701).standard_normal(3),))
def numpy_scalar_accumulator(w):
    total = np.float64(0.0)
    for k in range(3):
        total += np.sum(w ** k)
    return total


@program(args=lambda: (rng(702).standard_normal(8), np.array([0.6])))
def clip_with_traced_bounds(x, c):
    return np.sum(np.clip(x, -c[0], c[0]) ** 2)


@program(args=lambda: (np.asfortranarray(rng(703).standard_normal((4, 3))), rng(704).standard_normal((3, 5)).T))
def fortran_and_transposed_inputs(A, B):
    return np.sum(np.tanh(A @ B.T) ** 2) + np.sum(A[::-1, ::2] ** 3)


@program(args=lambda: (rng(705).standard_normal(4),))
def sum_keepdims_size_one_output(x):
    return np.sum(x ** 2, keepdims=True)


@program(args=lambda: (rng(706).standard_normal(5), np.array([0.1, 0.7])), argnums=(0, 1))
def scipy_stats_norm_logpdf(x, params):
    return -np.sum(st.norm.logpdf(x, loc=params[0], scale=np.exp(params[1])))


@program(args=lambda: (rng(707).standard_normal((3, 4)),))
def scipy_special_softmax(z):
    return np.sum(sp.softmax(z, axis=1) ** 2)


@program(args=lambda: (rng(708).standard_normal(6),), mode="hessian")
def hessian_through_sort(x):
    s = np.sort(x)
    return np.sum(s ** 3 * np.arange(6.0))


@program(args=lambda: (rng(709).standard_normal(5),), mode="hessian")
def hessian_through_max_and_where(x):
    return np.max(x ** 3) + np.sum(np.where(x > 0, x ** 2, np.sin(x)) * x)


@program(args=lambda: (rng(710).standard_normal(3),), mode="hessian")
def hessian_through_solve_inv(x):
    A = np.array([[3.0, 0.5, 0.1], [0.5, 2.0, 0.3], [0.1, 0.3, 1.5]]) + np.diag(x ** 2)
    return np.sum(np.linalg.solve(A, x)) + np.trace(np.linalg.inv(A)) + np.log(np.linalg.det(A))


@program(args=lambda: (rng(711).standard_normal(3),), mode="hessian")
def hessian_through_cholesky_slogdet(x):
    A = np.outer(x, x) + 2 * np.eye(3)
    L = np.linalg.cholesky(A)
    return np.sum(L ** 3) + np.linalg.slogdet(A)[1]


@program(args=lambda: (rng(712).standard_normal(4),), mode="hessian")
def hessian_through_repeated_gather(x):
    idx = np.array([0, 0, 2, 3, 3, 3])
    return np.sum(x[idx] ** 3) + np.sum(np.take(x, idx) * x[idx])


@program(args=lambda: (rng(713).standard_normal(4),), mode="hessian")
def hessian_through_cumsum_einsum(x):
    c = np.cumsum(x)
    return np.einsum("i,i,i->", c, c, x) + np.sum(np.linalg.norm(x) ** 3)


@program(args=lambda: (rng(714).standard_normal(4),), mode="hessian")
def hessian_through_logsumexp_tnp(x):
    import tapestry.numpy as tnp
    return tnp.logsumexp(x * 2) + np.sum(tnp.softmax(x) ** 2)


@program(args=lambda: (np.array([0.3, -0.2]), rng(715).standard_normal(6)), mode="hessian")
def hessian_gaussian_nll_0d_params(theta, x):
    mu, log_s = theta[0], theta[1]
    return np.sum(0.5 * ((x - mu) / np.exp(log_s)) ** 2 + log_s)


@program(args=lambda: (rng(716).standard_normal((3, 3)).astype(np.float32) + 3 * np.eye(3, dtype=np.float32),))
def float32_linalg_solve_slogdet(A):
    b = np.ones(3, dtype=np.float32)
    return np.sum(np.linalg.solve(A, b)) + np.linalg.slogdet(A)[1]


@program(args=lambda: (rng(717).standard_normal(7).astype(np.float32),))
def float32_sort_cumsum(x):
    return np.sum(np.sort(x)[-3:]) + np.sum(np.cumsum(x) ** 2) / 10


@program(args=lambda: (rng(718).standard_normal((2, 3)),))
def norms_with_ord_and_axis(X):
    return (np.sum(np.linalg.norm(X, ord=1, axis=1)) + np.linalg.norm(X, ord=np.inf)
            + np.linalg.norm(X.ravel(), ord=3) + np.sum(np.linalg.norm(X, axis=0, keepdims=True)))


@program(args=lambda: (rng(719).standard_normal((2, 3, 4)),))
def indexing_newaxis_ellipsis_steps(x):
    return (np.sum(x[..., None, 1] ** 2) + np.sum(x[:, np.newaxis, ::-1]) * 0.5
            + np.sum(x[1, 1:-1:2, ::3] ** 3) + np.sum(x[x > 0.5]))


@program(args=lambda: (rng(720).standard_normal((2, 3, 3)), rng(721).standard_normal((3, 2))))
def einsum_ellipsis_and_diagonal(A, B):
    return (np.sum(np.einsum("...ij,jk->...ik", A, B) ** 2) + np.sum(np.einsum("bii->bi", A))
            + np.einsum("bij,bij->", A, A))


@program(args=lambda: (rng(722).standard_normal(4), rng(723).standard_normal(4)))
def same_array_twice(a, b):
    return np.sum(a * b) + np.dot(a, a)


@program(args=lambda: (rng(724).uniform(0.5, 2.0, 5), rng(725).uniform(0.5, 2.0, 5)))
def power_traced_exponent(base, expo):
    return np.sum(np.power(base, expo)) + np.sum(base ** expo[::-1]) + np.sum(2.0 ** expo)


@program(args=lambda: (rng(726).standard_normal(5),))
def while_loop_normalise(x):
    y = x * 3
    while np.linalg.norm(y) > 1.0:
        y = y / 2
    return np.sum(y * np.arange(5.0))


@program(args=lambda: (rng(727).standard_normal(4), rng(728).standard_normal(4)))
def where_scalar_branches_broadcast(x, y):
    s = np.sum(y)
    return np.sum(np.where(x > 0, s, x ** 2)) + np.sum(np.where(x > 0.3, 1, y))


@program(args=lambda: (rng(729).standard_normal(4),))
def tensordot_axes_lists(x):
    A = np.outer(x, x[::-1])
    B = rng(730).standard_normal((4, 4, 2))
    return np.sum(np.tensordot(A, B, axes=([1], [0])) ** 2) + np.tensordot(x, A, axes=1) @ x


@program(args=lambda: (rng(731).standard_normal(6),))
def var_std_ddof_keepdims(x):
    X = x.reshape(2, 3)
    return (np.sum(np.var(X, axis=0, keepdims=True)) + np.std(x, ddof=1)
            + np.sum(np.mean(X, axis=-1, keepdims=True) * X))


@program(args=lambda: (rng(732).standard_normal(4),))
def logaddexp_reduce_and_log_sum(x):
    return np.logaddexp.reduce(x) + np.log(np.sum(np.exp(x))) + np.sum(np.logaddexp2(x, 0.5))


@program(args=lambda: (rng(733).standard_normal((3, 2)),))
def kron_identity_block(A):
    return np.sum(np.kron(np.eye(2), A) ** 2) + np.trace(np.kron(A.T @ A, np.ones((1, 1))))


@program(args=lambda: (rng(734).standard_normal(5),))
def sinc_heaviside_misc(x):
    return np.sum(np.sinc(x)) + np.sum(np.heaviside(x, 0.5) * x ** 2) + np.sum(np.round(x) * x)


@program(args=lambda: (rng(735).standard_normal((3, 3)),))
def triu_indices_fill_symmetric(v):
    i, j = np.triu_indices(3)
    return np.sum(v[i, j] ** 2) + np.sum(v[np.tril_indices(3, -1)])


@program(args=lambda: (rng(736).standard_normal(4),))
def nan_to_num_and_isfinite(x):
    y = np.log(np.abs(x)) * np.isfinite(x)
    return np.sum(np.nan_to_num(y ** 2))


@program(args=lambda: (rng(737).standard_normal(4),))
def matmul_with_python_list_operand(x):
    A = [[1.0, 2.0, 0.5, -1.0], [0.0, 1.0, 1.0, 2.0]]
    return np.sum(np.matmul(A, x) ** 2) + np.sum((A @ x) * 0.5)
