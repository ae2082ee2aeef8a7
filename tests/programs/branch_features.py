"""Programs that lean on the capabilities being added now (complex values,
np.fft, the rest of np.linalg, the numerics family, tapestry.numpy array
construction), written with the options real code passes: n= and axis=,
norm=, modes, traced weights, prepend=, endpoint=False, batched stacks,
and second derivatives through them."""
import numpy as np

from . import program, rng


# --- FFT ------------------------------------------------------------------------
@program(args=lambda: (rng(800).standard_normal((3, 8)),))
def fft_axis0_zero_padded(x):
    X = np.fft.fft(x, n=6, axis=0)
    return np.sum(np.abs(X) ** 2) + np.sum(np.real(X[1]) * np.arange(8.0))


@program(args=lambda: (rng(801).standard_normal(10),))
def rfft_truncated_norm_forward(x):
    X = np.fft.rfft(x, n=8, norm="forward")
    return np.sum(X.real ** 3) - np.sum(X.imag ** 2)


@program(args=lambda: (rng(802).standard_normal(9),))
def irfft_odd_length_roundtrip(x):
    X = np.fft.rfft(x)
    y = np.fft.irfft(X * np.linspace(1, 0.2, len(X)), n=9)
    return np.sum(y ** 2 * np.arange(9.0))


@program(args=lambda: (rng(803).standard_normal((4, 6)),))
def rfft2_irfft2_image_filter(img):
    F = np.fft.rfft2(img)
    H = np.exp(-np.arange(F.shape[1]) / 2.0)
    out = np.fft.irfft2(F * H, s=img.shape)
    return np.sum((out - img) ** 2)


@program(args=lambda: (rng(804).standard_normal((2, 3, 4)),))
def fftn_ifftn_axes_ortho(x):
    F = np.fft.fftn(x, axes=(1, 2), norm="ortho")
    y = np.fft.ifftn(F * F.conj(), axes=(1, 2), norm="ortho")
    return np.sum(np.real(y)) + np.sum(np.abs(np.fft.ifftshift(F, axes=2)[:, 0]))


@program(args=lambda: (rng(805).standard_normal(8), rng(806).standard_normal(8)))
def fft_cross_correlation_lag(a, b):
    c = np.fft.ifft(np.fft.fft(a) * np.conj(np.fft.fft(b)))
    return np.sum(np.real(c) * np.cos(np.arange(8.0))) + np.sum(np.imag(c) ** 2)


@program(args=lambda: (rng(807).standard_normal(16),))
def spectrogram_frames_rfft(x):
    frames = np.stack([x[i:i + 8] * np.hanning(8) for i in range(0, 9, 4)])
    S = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    return np.sum(np.log(S + 1e-3))


@program(args=lambda: (rng(808).standard_normal(8),))
def fft_of_real_then_ifft_real_part(x):
    y = np.fft.ifft(np.fft.fft(x) * np.exp(-1j * np.pi * np.arange(8) / 8))
    return np.sum(np.real(y) ** 2 + np.imag(y))


# --- complex -----------------------------------------------------------------------
@program(args=lambda: (rng(809).standard_normal(4), rng(810).standard_normal(4)))
def complex_division_log_sqrt(a, b):
    z = (a + 2.0) + 1j * b
    w = 1.0 / z + np.log(z) + np.sqrt(z) + z ** 2
    return np.sum(np.abs(w)) + np.sum(np.angle(w))


@program(args=lambda: (rng(811).uniform(0.1, 3.0, 6),))
def unwrap_phase_of_rotating_phasor(theta):
    z = np.exp(1j * np.cumsum(theta))
    ph = np.unwrap(np.angle(z))
    return np.sum(ph ** 2) / 10


@program(args=lambda: (rng(812).standard_normal((2, 2)), rng(813).standard_normal((2, 2)), rng(814).standard_normal(2)))
def complex_linear_solve(A, B, b):
    M = A + 1j * B + 3 * np.eye(2)
    z = np.linalg.solve(M, b + 0j)
    return np.sum(np.abs(z) ** 2) + np.real(np.linalg.det(M))


@program(args=lambda: (rng(815).standard_normal(3), rng(816).standard_normal(3)))
def complex_vdot_norm_einsum(a, b):
    z = a + 1j * b
    return (np.real(np.vdot(z, z)) + np.linalg.norm(z) + np.abs(np.einsum("i,i->", z, z))
            + np.sum(np.abs(np.outer(z, z.conj()))))


@program(args=lambda: (np.array(0.7),))
def complex_from_0d_angle(theta):
    z = np.exp(1j * theta) * (1 + 0.5j)
    return np.real(z) ** 2 + np.imag(z)


@program(args=lambda: (rng(817).standard_normal(3),))
def astype_complex_then_abs(x):
    z = x.astype(np.complex128) * np.exp(0.3j)
    return np.sum(np.abs(z + 1j) ** 3)


@program(args=lambda: (np.array([1.0, 0.5]),))
def complex_from_unpacked_params(params):
    omega, gamma = params
    t = np.linspace(0, 1, 5)
    return np.sum(np.abs(np.exp((1j * omega - gamma) * t) - 0.5))


# --- linear algebra ----------------------------------------------------------------
@program(args=lambda: (rng(818).standard_normal((3, 3)),))
def eigh_of_unsymmetrised_parameter(S):
    w, V = np.linalg.eigh(S + 3 * np.eye(3))
    return np.sum(w ** 2) + np.sum(V[:, 0] ** 4)


@program(args=lambda: (rng(819).standard_normal((3, 3)),))
def cholesky_of_unsymmetrised_parameter(S):
    L = np.linalg.cholesky(S @ S.T * 0 + np.triu(S) * 0.1 + S * 0.1 + 3 * np.eye(3))
    return np.sum(L ** 2)


@program(args=lambda: (rng(820).standard_normal((3, 3)) + np.diag([3.0, 1.0, -2.0]),))
def eig_vectors_nonsymmetric(A):
    w, V = np.linalg.eig(A)
    v = V[:, np.argmax(np.real(w))]
    v = v / v[0]
    return np.sum(np.real(w) ** 2) + np.sum(np.abs(v) ** 2)


@program(args=lambda: (np.array([[0.0, 1.0], [-1.0, 0.0]]) + 0.1 * rng(821).standard_normal((2, 2)),))
def eigvals_complex_pair(A):
    ev = np.linalg.eigvals(A)
    return np.sum(np.abs(ev)) + np.sum(np.imag(ev) ** 2)


@program(args=lambda: (rng(822).standard_normal((5, 3)),))
def svd_full_matrices_U_columns(A):
    U, s, Vt = np.linalg.svd(A, full_matrices=True)
    return np.sum(s) + np.sum((U[:, :3] * s) @ Vt * A)


@program(args=lambda: (rng(823).standard_normal((2, 4, 3)),))
def batched_svd_values_and_det(A):
    s = np.linalg.svd(A, compute_uv=False)
    G = np.swapaxes(A, -1, -2) @ A
    return np.sum(s ** 3) + np.sum(np.linalg.slogdet(G)[1]) + np.sum(np.linalg.inv(G + np.eye(3)))


@program(args=lambda: (rng(824).standard_normal((6, 3)), rng(825).standard_normal(6)))
def lstsq_residuals_output(X, y):
    beta, res, rank, sv = np.linalg.lstsq(X, y, rcond=None)
    return np.sum(res) + np.sum(beta * np.arange(3.0))


@program(args=lambda: (rng(826).standard_normal((3, 3)) + 3 * np.eye(3),))
def matrix_power_negative(A):
    return np.sum(np.linalg.matrix_power(A, -2)) + np.trace(np.linalg.matrix_power(A, 0) @ A)


@program(args=lambda: (rng(827).standard_normal(3), rng(828).standard_normal((3, 4)), rng(829).standard_normal(4)))
def multi_dot_vector_ends(a, B, c):
    return np.linalg.multi_dot([a, B, B.T, B, c])


@program(args=lambda: (rng(830).standard_normal((5, 3)),))
def qr_complete_and_r_mode(A):
    Q, R = np.linalg.qr(A, mode="complete")
    r = np.linalg.qr(A, mode="r")
    return np.sum(Q[:, :3] ** 2 * np.arange(3.0)) + np.sum(np.abs(r))


@program(args=lambda: (rng(831).standard_normal(3),), mode="hessian")
def hessian_through_svd_values(x):
    A = np.array([[2.0, 0.1, 0.0], [0.3, 1.0, 0.2], [0.0, 0.4, 0.5]]) + np.outer(x, x) * 0.3
    return np.sum(np.linalg.svd(A, compute_uv=False) ** 2) + np.linalg.norm(A, "nuc")


@program(args=lambda: (rng(832).standard_normal(3),), mode="hessian")
def hessian_through_eigh(x):
    A = np.diag([3.0, 1.0, -1.0]) + np.outer(x, x) * 0.2
    w, V = np.linalg.eigh(A)
    return np.sum(w ** 3) + np.sum(V[:, -1] ** 4)


# --- numerics ----------------------------------------------------------------------
@program(args=lambda: (rng(833).standard_normal(6), np.array([0.3])))
def diff_with_traced_prepend(x, x0):
    return np.sum(np.diff(x, prepend=x0) ** 2) + np.sum(np.diff(x, n=3) ** 2)


@program(args=lambda: (np.linspace(0, 2, 7) ** 2, np.cumsum(rng(834).uniform(0.2, 0.6, 7))))
def gradient_with_coordinates_edge_order2(f, xs):
    d = np.gradient(f, xs, edge_order=2)
    return np.sum(d ** 2)


@program(args=lambda: (rng(835).standard_normal((4, 5)),))
def gradient_2d_both_axes(field):
    gy, gx = np.gradient(field, 0.5, 0.25)
    return np.sum(gx ** 2 + gy ** 2)


@program(args=lambda: (np.linspace(0, 1, 8) ** 2, np.cumsum(rng(836).uniform(0.1, 0.3, 8))))
def trapezoid_traced_x_and_y(y, x):
    return np.trapezoid(y * np.sin(x), x) + np.trapezoid(y, dx=0.1)


@program(args=lambda: (rng(837).standard_normal(5), rng(838).standard_normal(3)))
def convolve_full_both_traced(a, k):
    return np.sum(np.convolve(a, k) ** 2) + np.sum(np.convolve(k, a, mode="same")) + np.sum(np.correlate(a, k, "valid") ** 3)


@program(args=lambda: (np.array([0.1, 0.45, 0.5, 1.3, -0.2]), np.linspace(0, 1, 6) ** 1.5))
def interp_outside_range_left_right(x, fp):
    xp = np.linspace(0, 1, 6)
    return np.sum(np.interp(x, xp, fp, left=-1.0, right=2.0) ** 2) + np.sum(np.interp(x, xp, fp))


@program(args=lambda: (np.array([0.2, 0.9]),))
def linspace_endpoint_false_retstep(ab):
    g, step = np.linspace(ab[0], ab[1], 5, endpoint=False, retstep=True)
    return np.sum(g ** 2) + step * 10 + np.sum(np.geomspace(ab[0] + 1, ab[1] + 2, 4))


@program(args=lambda: (rng(839).standard_normal(6), rng(840).uniform(0.5, 2.0, 6)))
def average_traced_weights_returned(x, w):
    avg, wsum = np.average(x, weights=w, returned=True)
    return avg ** 2 + wsum + np.average(x.reshape(2, 3), axis=1, weights=w[:3]).sum()


@program(args=lambda: (rng(841).uniform(0.5, 1.5, 20), rng(842).uniform(-2, 2, 20)), argnums=(0,))
def histogram_weights_density(w, data):
    h, _ = np.histogram(data, bins=4, range=(-2, 2), weights=w, density=True)
    return np.sum(h * np.arange(4.0))


@program(args=lambda: (rng(843).uniform(0.5, 1.5, 8), np.array([0, 0, 2, 5, 5, 5, 1, 0])), argnums=(0,))
def bincount_minlength_empty_bins(w, idx):
    c = np.bincount(idx, weights=w, minlength=8)
    return np.sum(c ** 2 * np.arange(8.0))


@program(args=lambda: (np.array([0.5, -1.2, 0.5, 2.0, -1.2, 3.0]),))
def unique_with_counts_duplicates(x):
    vals, counts = np.unique(x, return_counts=True)
    return np.sum(vals ** 2 * counts)


@program(args=lambda: (rng(844).standard_normal(8) + 3,))
def nan_statistics_family(x):
    y = np.where(np.arange(8) % 3 == 0, np.nan, x)
    return (np.nanstd(y) + np.nanvar(y) + np.nanmedian(y) + np.nanprod(y[:4] / 3)
            + np.nanpercentile(y, 30) + np.nansum(np.nancumsum(y)) / 10)


@program(args=lambda: (rng(845).standard_normal(4), rng(846).standard_normal(5)))
def polyval_traced_x_and_coeffs(p, x):
    return np.sum(np.polyval(p, x) ** 2) + np.sum(np.poly(p[:3]) ** 2)


@program(args=lambda: (rng(847).standard_normal(10),))
def sliding_window_moving_average(x):
    w = np.lib.stride_tricks.sliding_window_view(x, 3)
    ma = w.mean(axis=-1)
    return np.sum((ma - x[1:-1]) ** 2) + np.max(w, axis=1).sum()


@program(args=lambda: (rng(848).standard_normal(6),))
def reductions_initial_and_where(x):
    m = x > 0
    return (np.sum(x, where=m) + np.prod(x + 3, initial=2.0) + np.max(x, initial=10.0)
            + np.mean(x ** 2, where=~m) + np.min(x, where=m, initial=5.0))


@program(args=lambda: (rng(849).standard_normal((3, 4)),))
def ufunc_reduceat_accumulate_axis(x):
    return (np.sum(np.add.reduceat(x, [0, 2, 3], axis=1) ** 2) + np.sum(np.multiply.accumulate(x + 2, axis=1))
            + np.sum(np.maximum.reduce(x, axis=0)) + np.sum(np.add.outer(x[0], x[1]) ** 2))


@program(args=lambda: (rng(850).standard_normal((2, 3)), rng(851).standard_normal((3, 2))))
def einsum_interleaved_form(A, B):
    return np.sum(np.einsum(A, [0, 1], B, [1, 2], [0, 2]) ** 2) + np.einsum(A, [0, 1], A, [0, 1])


@program(args=lambda: (rng(852).standard_normal(5),))
def piecewise_and_select_traced(x):
    y = np.piecewise(x, [x < 0, x >= 0], [lambda v: v ** 2, lambda v: np.sin(v)])
    z = np.select([x < -0.5, x < 0.5], [x * 3, x ** 3], default=np.exp(x))
    return np.sum(y) + np.sum(z)


@program(args=lambda: (np.array([1.3, -0.4]),))
def meshgrid_ij_sparse(k):
    x = np.linspace(0, 1, 4)
    X, Y = np.meshgrid(x * k[0], x * k[1], indexing="ij", sparse=True)
    return np.sum(np.cos(X + Y) * (X - Y))


@program(args=lambda: (rng(853).standard_normal(3),))
def cross_product_axis_args(a):
    B = rng(854).standard_normal((4, 3))
    return np.sum(np.cross(a, B) ** 2) + np.sum(np.cross(B.T, a, axisa=0))


@program(args=lambda: (rng(855).standard_normal(5),), mode="hessian")
def hessian_through_diff_convolve_interp(x):
    return (np.sum(np.diff(x) ** 3) + np.sum(np.convolve(x, x) ** 2) / 10
            + np.sum(np.interp([0.3, 0.6], [0.0, 0.5, 1.0], x[:3]) ** 2))


@program(args=lambda: (rng(856).standard_normal(6),), mode="hessian")
def hessian_through_fft(x):
    X = np.fft.rfft(x)
    return np.sum(np.abs(X) ** 4) / 100 + np.sum(np.real(np.fft.ifft(np.fft.fft(x) ** 2)))


@program(args=lambda: (rng(857).standard_normal(6).astype(np.float32),))
def float32_fft_diff_interp(x):
    X = np.fft.rfft(x)
    return (np.sum(np.abs(X) ** 2) + np.sum(np.diff(x) ** 2)
            + np.sum(np.interp(np.array([0.2, 0.7], dtype=np.float32), np.linspace(0, 1, 6).astype(np.float32), x)))


@program(args=lambda: (rng(858).standard_normal(4),))
def tnp_array_nested_and_asarray(x):
    import tapestry.numpy as tnp
    R = tnp.array([[np.cos(x[0]), -np.sin(x[0])], [np.sin(x[0]), np.cos(x[0])]])
    v = tnp.asarray([x[1], x[2] ** 2])
    w = tnp.array([x[3], 1.0, 2.0])
    return np.sum((R @ v) ** 2 * np.array([1.0, 2.0])) + np.sum(w ** 3)


# --- Python lists where NumPy accepts array-likes -------------------------------------
@program(args=lambda: (rng(859).standard_normal(3),))
def numerics_with_list_arguments(x):
    return (np.sum(np.interp([0.3, 0.6], [0.0, 0.5, 1.0], x) ** 2)
            + np.sum(np.polyval(x, [0.5, 1.5]) ** 2)
            + np.trapezoid(x ** 2, [0.0, 0.1, 0.3])
            + np.sum(np.gradient(x, [0.0, 0.1, 0.3]) ** 2))


@program(args=lambda: (rng(860).standard_normal(4),))
def cov_with_list_aweights(x):
    return np.sum(np.cov(np.stack([x, x ** 2]), aweights=[1.0, 2.0, 1.0, 1.0]) ** 2)
