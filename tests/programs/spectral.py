"""Spectral and complex-valued programs: FFT convolution, power spectra,
phasors, DFT matrices and real losses of complex intermediates."""
import numpy as np

from . import program, rng


@program(args=lambda: (rng(500).standard_normal(8), rng(501).standard_normal(8)))
def fft_circular_convolution(x, k):
    y = np.real(np.fft.ifft(np.fft.fft(x) * np.fft.fft(k)))
    return np.sum(y ** 2)


@program(args=lambda: (rng(502).standard_normal(16),))
def rfft_power_spectrum_lowpass(x):
    X = np.fft.rfft(x)
    power = np.abs(X) ** 2
    return np.sum(power[:4]) / np.sum(power)


@program(args=lambda: (rng(503).standard_normal(16),))
def rfft_irfft_smoothing(x):
    X = np.fft.rfft(x)
    mask = np.arange(len(X)) < 4
    return np.sum((np.fft.irfft(X * mask, n=16) - x) ** 2)


@program(args=lambda: (rng(504).standard_normal((4, 4)),))
def fft2_image_highpass(img):
    F = np.fft.fftshift(np.fft.fft2(img))
    return np.sum(np.abs(F[1:3, 1:3]))


@program(args=lambda: (rng(505).uniform(0, 2 * np.pi, 5),))
def phasor_sum_magnitude(theta):
    z = np.exp(1j * theta)
    return np.abs(np.sum(z)) ** 2


@program(args=lambda: (rng(506).standard_normal(4),))
def abs_of_complex_product(x):
    return np.sum(np.abs(x * (1 + 1j)))


@program(args=lambda: (rng(507).standard_normal(4),))
def abs_squared_of_imaginary(x):
    return np.sum(np.abs(1j * x) ** 2)


@program(args=lambda: (rng(508).standard_normal(3), rng(509).standard_normal(3)))
def real_imag_of_complex(a, b):
    z = (a + 1j * b) ** 2
    return np.sum(np.real(z) * np.imag(z)) + np.sum(z.real) - np.sum(z.imag ** 2)


@program(args=lambda: (rng(510).standard_normal(3) + 2, rng(511).standard_normal(3)))
def angle_of_complex(a, b):
    z = a + 1j * b
    return np.sum(np.angle(z) ** 2) + np.sum(np.conj(z) * z).real


@program(args=lambda: (rng(512).standard_normal(8),))
def dft_matrix_by_hand(x):
    n = np.arange(8)
    W = np.exp(-2j * np.pi * np.outer(n, n) / 8)
    X = W @ x
    return np.sum(np.abs(X[:3]) ** 2)


@program(args=lambda: (np.array([1.0, 0.5]),))
def damped_complex_exponential(params):
    omega, gamma = params
    t = np.linspace(0, 2, 10)
    z = np.exp((-gamma + 1j * omega) * t)
    target = np.cos(1.2 * t) * np.exp(-0.4 * t)
    return np.sum((z.real - target) ** 2)


@program(args=lambda: (rng(513).standard_normal((2, 2)), rng(514).standard_normal((2, 2))))
def complex_matmul_unitary_loss(A, B):
    M = A + 1j * B
    G = M.conj().T @ M
    return np.real(np.trace(G)) + np.sum(np.abs(G - np.eye(2)) ** 2)


@program(args=lambda: (rng(515).standard_normal(8), rng(516).standard_normal(3)))
def np_correlate_matched_filter(x, template):
    c = np.correlate(x, template, mode="full")
    return np.max(c) ** 2 + np.sum(c ** 2)


@program(args=lambda: (rng(517).standard_normal(6),))
def convolve_same_smoothing(x):
    k = np.array([0.25, 0.5, 0.25])
    return np.sum((np.convolve(x, k, mode="same") - x) ** 2)


@program(args=lambda: (rng(518).standard_normal(12),))
def fft_frequency_weighted_loss(x):
    freqs = np.fft.rfftfreq(12, d=0.1)
    X = np.fft.rfft(x, norm="ortho")
    return np.sum(freqs * (X.real ** 2 + X.imag ** 2))


@program(args=lambda: (rng(519).standard_normal(4), rng(520).standard_normal(4)))
def energy_returned_as_complex_dtype(a, b):
    z = a + 1j * b
    return np.sum(z * np.conj(z))                  # real-valued, but complex128 with 0j
