"""Linear-algebra programs: PCA/SVD losses, eigendecompositions, least
squares, Procrustes, determinants and matrix functions as users write them."""
import numpy as np

from . import program, rng


@program(args=lambda: (rng(400).standard_normal((10, 3)) @ np.diag([3.0, 1.0, 0.3]),))
def pca_svd_explained_variance(X):
    Xc = X - X.mean(axis=0)
    U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    return s[0] ** 2 / np.sum(s ** 2)


@program(args=lambda: (rng(401).standard_normal((8, 3)) @ np.diag([3.0, 1.0, 0.3]),))
def pca_reconstruction_svd(X):
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    X1 = s[0] * np.outer(U[:, 0], Vt[0])
    return np.sum((X - X1) ** 2)


@program(args=lambda: (rng(402).standard_normal((4, 4)),))
def nuclear_norm(A):
    return np.linalg.norm(A, "nuc") + np.sum(np.linalg.svd(A, compute_uv=False) ** 2)


@program(args=lambda: (rng(403).standard_normal((4, 4)),))
def spectral_norm_ord2(A):
    return np.linalg.norm(A, 2)


@program(args=lambda: (rng(404).standard_normal((10, 3)) @ np.diag([3.0, 1.0, 0.3]),))
def pca_covariance_eigh(X):
    C = (X - X.mean(0)).T @ (X - X.mean(0)) / len(X)
    w, V = np.linalg.eigh(C)
    return w[-1] + np.sum(V[:, -1] ** 4)


@program(args=lambda: (rng(405).standard_normal((3, 3)) + 3 * np.eye(3),))
def eigvals_nonsymmetric_spectral_radius(A):
    ev = np.linalg.eigvals(A)
    return np.max(np.abs(ev)) + np.sum(np.real(ev))


@program(args=lambda: (rng(406).standard_normal((3, 3)),))
def eigvalsh_sym_sum_squares(A):
    S = A + A.T
    return np.sum(np.linalg.eigvalsh(S) ** 2)


@program(args=lambda: (rng(407).standard_normal(3), rng(408).standard_normal((12, 3)), rng(409).standard_normal(12)),
         argnums=(0, 1))
def least_squares_lstsq(w_true_shift, X, y):
    beta, *_ = np.linalg.lstsq(X, y + X @ w_true_shift, rcond=None)
    return np.sum(beta ** 2)


@program(args=lambda: (np.array([0.5]), rng(410).standard_normal((12, 4)), rng(411).standard_normal(12)), argnums=(0, 1))
def ridge_normal_equations(log_lam, X, y):
    lam = np.exp(log_lam[0])
    w = np.linalg.solve(X.T @ X + lam * np.eye(4), X.T @ y)
    return np.sum((X @ w - y) ** 2) + lam * w @ w


@program(args=lambda: (rng(412).standard_normal((6, 3)),))
def pinv_projection(A):
    P = A @ np.linalg.pinv(A)
    return np.sum(P * np.arange(36.0).reshape(6, 6))


@program(args=lambda: (rng(413).standard_normal((5, 3)),))
def qr_orthogonal_factor(A):
    Q, R = np.linalg.qr(A)
    return np.sum(Q[:, 0] * np.arange(5.0)) + np.sum(np.abs(np.diag(R)))


@program(args=lambda: (rng(414).standard_normal((3, 3)) + 2 * np.eye(3),))
def det_inv_logdet(A):
    return np.log(np.abs(np.linalg.det(A))) + np.sum(np.linalg.inv(A) ** 2)


@program(args=lambda: (rng(415).standard_normal((3, 3)) * 0.5,))
def matrix_power_and_multi_dot(A):
    return np.sum(np.linalg.matrix_power(A, 3)) + np.sum(np.linalg.multi_dot([A, A.T, A]))


@program(args=lambda: (rng(416).standard_normal((4, 2)), rng(417).standard_normal((4, 2))))
def orthogonal_procrustes(X, Y):
    U, _, Vt = np.linalg.svd(X.T @ Y)
    R = U @ Vt
    return np.sum((X @ R - Y) ** 2)


@program(args=lambda: (rng(418).standard_normal((3, 3)) * 0.3,))
def matrix_exponential_taylor(A):
    E = np.eye(3)
    term = np.eye(3)
    for k in range(1, 12):
        term = term @ A / k
        E = E + term
    return np.trace(E) + np.sum(E[0])


@program(args=lambda: (rng(419).standard_normal((2, 3, 3)) + 3 * np.eye(3),))
def batched_solve_det(A):
    b = np.ones((2, 3, 1))
    x = np.linalg.solve(A, b)
    return np.sum(x ** 2) + np.sum(np.linalg.det(A))


@program(args=lambda: (rng(420).standard_normal((3, 3)),))
def cholesky_whitening(A):
    S = A @ A.T + np.eye(3)
    L = np.linalg.cholesky(S)
    Linv = np.linalg.inv(L)
    return np.sum(Linv ** 2) + 2 * np.sum(np.log(np.diag(L)))


@program(args=lambda: (rng(421).standard_normal((5, 2)) * 0.3, rng(422).standard_normal((2, 5)) * 0.3,
                       rng(423).standard_normal((5, 5)), rng(424).random((5, 5)) > 0.4), argnums=(0, 1))
def matrix_factorisation_masked(U, V, R, observed):
    E = (U @ V - R) * observed
    return np.sum(E ** 2) + 0.1 * (np.sum(U ** 2) + np.sum(V ** 2))


@program(args=lambda: (rng(425).standard_normal((4, 4)),))
def frobenius_norms_and_cond(A):
    return np.linalg.norm(A, "fro") + np.linalg.norm(A[0], 1) + np.linalg.norm(A[1], np.inf) + np.linalg.cond(A + 4 * np.eye(4))


@program(args=lambda: (rng(426).standard_normal((2, 2)), rng(427).standard_normal((3, 3)), rng(428).standard_normal((2, 3))))
def vec_operator_fortran_order(A, B, X):
    vec = lambda M: M.flatten("F")                  # column-major vec(), as in the matrix cookbook
    lhs = np.kron(B.T, A) @ vec(X)
    rhs = vec(A @ X @ B)
    return np.sum(lhs ** 2) + np.sum(rhs * np.arange(6.0))
