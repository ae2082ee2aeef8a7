"""numpy.fft rules against finite differences (real and complex inputs,
directions along both axes of complex ones, pairing Re(c*t)), at orders 1
and 2, with n/s cropping and padding, axes and every norm."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapestry as tp
from cgrad import check_cgrads
from sweep import SWEEP, check_all, rand, shapes
from tapestry.ops.complex import modulus, real_part


def _c(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


NORMS = [None, "ortho", "forward"]

C2C = {
    "fft": lambda a, norm: np.fft.fft(a, norm=norm),
    "fft_pad": lambda a, norm: np.fft.fft(a, n=7, axis=0, norm=norm),
    "fft_crop": lambda a, norm: np.fft.fft(a, n=2, norm=norm),
    "ifft": lambda a, norm: np.fft.ifft(a, n=6, norm=norm),
    "fft2": lambda a, norm: np.fft.fft2(a, s=(3, 2), norm=norm),
    "ifft2": lambda a, norm: np.fft.ifft2(a, norm=norm),
    "fftn": lambda a, norm: np.fft.fftn(a, s=(5, 3), axes=(0, 2), norm=norm),
    "ifftn": lambda a, norm: np.fft.ifftn(a, axes=(-1,), norm=norm),
    "hfft": lambda a, norm: np.fft.hfft(a, norm=norm),
    "hfft_n": lambda a, norm: np.fft.hfft(a, n=5, axis=1, norm=norm),
    "irfft": lambda a, norm: np.fft.irfft(a, norm=norm),
    "irfft_odd": lambda a, norm: np.fft.irfft(a, n=5, norm=norm),
    "irfft_pad": lambda a, norm: np.fft.irfft(a, n=12, axis=0, norm=norm),
    "irfft2": lambda a, norm: np.fft.irfft2(a, s=(4, 3), norm=norm),
    "irfftn": lambda a, norm: np.fft.irfftn(a, norm=norm),
}
R2C = {
    "rfft": lambda a, norm: np.fft.rfft(a, norm=norm),
    "rfft_odd_pad": lambda a, norm: np.fft.rfft(a, n=7, axis=0, norm=norm),
    "rfft_crop": lambda a, norm: np.fft.rfft(a, n=3, norm=norm),
    "rfft2": lambda a, norm: np.fft.rfft2(a, norm=norm),
    "rfftn": lambda a, norm: np.fft.rfftn(a, s=(3, 6), axes=(0, 2), norm=norm),
    "ihfft": lambda a, norm: np.fft.ihfft(a, norm=norm),
}
SHIFTS = {
    "fftshift": lambda a, norm: np.fft.fftshift(a),
    "fftshift_axis": lambda a, norm: np.fft.fftshift(a, axes=1),
    "ifftshift": lambda a, norm: np.fft.ifftshift(a, axes=(0, 2)),
}


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", list(C2C) + list(SHIFTS))
def test_complex_input(name, norm):
    f = {**C2C, **SHIFTS}[name]
    z = _c((4, 3, 4), 1)
    check_cgrads(lambda a: f(a, norm), (z,), order=2)
    check_cgrads(lambda a: f(a, norm), (z.astype(np.complex64),))
    np.testing.assert_allclose(tp.vjp(lambda a: f(a, norm), z)[0], f(z, norm), rtol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", list(C2C) + list(R2C) + list(SHIFTS))
def test_real_input(name, norm):
    """A real input gets a real gradient (the real part of the cotangent)."""
    f = {**C2C, **R2C, **SHIFTS}[name]
    x = rand((4, 3, 4), "normal", 2)
    check_cgrads(lambda a: f(a, norm), (x,), order=2)
    check_cgrads(lambda a: f(a, norm), (x.astype(np.float32),))


def _rfft_matrix(n, m):
    """rfft(x, n) for x of length m as an explicit matrix (crop/pad included)."""
    k, j = np.arange(n // 2 + 1)[:, None], np.arange(n)[None, :]
    return (np.exp(-2j * np.pi * k * j / n) @ np.eye(n, m))


@pytest.mark.parametrize("n,m", [(8, 8), (7, 7), (10, 6), (4, 6)])
def test_rfft_vjp_is_the_transpose_not_irfft(n, m):
    """x̄ = Re(Mᵀ ḡ) for the half-spectrum matrix M; irfft(ḡ) would halve the
    bins 1..n//2-1 that rfft keeps once for two, and drop Im of bin 0."""
    g = _c((n // 2 + 1,), 3)
    x = rand((m,), "normal", 4)
    got, = tp.vjp(lambda x: np.fft.rfft(x, n), x)[1](g)
    np.testing.assert_allclose(got, np.real(_rfft_matrix(n, m).T @ g), atol=1e-12)
    assert got.dtype == np.float64
    if n == m:
        assert not np.allclose(got, n * np.fft.irfft(g, n))


def test_real_pipelines_through_the_spectrum():
    """Real in, complex in the middle, real out: a plain check_grads
    (float64, float32, non-contiguous) on the real function."""
    x = rand((3, 8), "normal", 5)
    h = np.exp(-np.arange(5.0))
    check_all(lambda x: np.fft.irfft(np.fft.rfft(x) * h, n=8), x, order=2)
    check_all(lambda x: real_part(np.fft.ifft(np.fft.fft(x) * np.fft.fft(x[::-1], axis=-1))), x)
    check_all(lambda x: modulus(np.fft.fft2(x, norm="ortho")) ** 2, x, order=2)
    check_all(lambda x: np.fft.hfft(np.fft.ihfft(x) * 2.0, n=8), x)


def test_power_spectrum_gradient_is_exact():
    """sum |fft(x)|² = n sum x² (Parseval), so its gradient is 2 n x."""
    x = rand((6,), "normal", 6)
    g = tp.grad(lambda x: np.sum(modulus(np.fft.fft(x)) ** 2))(x)
    np.testing.assert_allclose(g, 2 * 6 * x, rtol=1e-12)


def _complex_abs_has_its_rule():
    try:
        return np.isclose(tp.grad(lambda z: np.abs(z))(3.0 + 4.0j), 0.6 - 0.8j)
    except NotImplementedError:
        return False


@pytest.mark.skipif(not _complex_abs_has_its_rule(),
                    reason="np.abs of complex traced values has no complex rule on this branch")
def test_power_spectrum_with_numpy_abs():
    x = rand((6,), "normal", 7)
    g = tp.grad(lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2))(x)
    np.testing.assert_allclose(g, 2 * 6 * x, rtol=1e-12)


def test_refusals():
    x = rand((4,), "normal", 8)
    with pytest.raises(ValueError, match="invalid norm"):
        tp.grad(lambda x: np.sum(np.fft.irfft(np.fft.rfft(x), norm="bogus")))(x)
    with pytest.raises(TypeError, match="out="):
        tp.grad(lambda x: np.sum(np.fft.irfft(np.fft.rfft(x), out=np.zeros(6))))(x)
    with pytest.raises(TypeError, match="rfft"):
        tp.vjp(lambda z: np.fft.rfft(z), _c((4,), 9))


@pytest.mark.parametrize("name", ["fft", "ifft2", "irfft", "fftshift"])
def test_empty_batch(name):
    f = {**C2C, **SHIFTS}[name]
    check_cgrads(lambda a: f(a, None), (_c((0, 3, 4), 10),))
    check_cgrads(lambda a: np.fft.rfft(a), (rand((0, 4), "normal", 11),))


@SWEEP
@given(shape=shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), data=st.data())
def test_random_shapes(shape, data):
    """Random shapes, axes, lengths and norms through every 1-D transform."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.one_of(st.none(), st.integers(1, 7)))
    norm = data.draw(st.sampled_from(NORMS))
    name = data.draw(st.sampled_from(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]))
    f = getattr(np.fft, name)
    real_only = name in ("rfft", "ihfft")
    x = rand(shape, "normal", 12) if real_only else _c(shape, 12)
    if name in ("irfft", "hfft") and n is None and shape[axis] == 1:
        n = 2  # NumPy's default n = 2 (m - 1) would be 0
    check_cgrads(lambda a: f(a, n=n, axis=axis, norm=norm), (x,), order=2)


#: Registry keys checked against finite differences here (tests/test_op_coverage.py).
SWEPT = {np.fft.fft, np.fft.fft2, np.fft.fftn, np.fft.fftshift, np.fft.hfft, np.fft.ifft,
         np.fft.ifft2, np.fft.ifftn, np.fft.ifftshift, np.fft.ihfft, np.fft.irfft,
         np.fft.irfft2, np.fft.irfftn, np.fft.rfft, np.fft.rfft2, np.fft.rfftn}
