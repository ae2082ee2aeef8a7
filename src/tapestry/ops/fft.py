"""numpy.fft: the discrete Fourier transforms and their adjoints.

Every transform is linear, so its VJP is its transpose (under the pairing
``Re(c * t)`` of docs/complex.md: a transpose, never a conjugate
transpose).  Three primitives carry everything:

- ``_c2c`` (fft, ifft, fftn, ifftn, fft2, ifft2): the DFT matrix is
  symmetric, so the VJP of a transform is *the same* transform (same
  ``norm``) of ``g``, cropped or zero-padded back to the input's length
  (the transpose of zero-padding is cropping and vice versa).
- ``_r2c`` (rfft, rfftn, rfft2): the half spectrum is the full one
  cropped to ``n//2 + 1`` bins, so ``x̄ = Re(fftn(pad(g)))``: ``g``
  zero-padded to the full length along the last axis, then the full
  complex transform.  It is not ``irfft(g)``: irfft doubles the bins
  ``1..n//2-1`` (which stand for two bins each) and drops imaginary parts.
- ``_c2r`` (irfft, irfftn, irfft2): ``y = irfft(z)`` reads ``Re`` and the
  mirror image ``conj`` of the bins, so its VJP is
  ``z̄ = w * ifftn(g)[..., :n//2 + 1]`` with ``w = 2`` on the bins that
  stand for two (``1 .. (n-1)//2``) and ``1`` on bin 0 and, for even
  ``n``, on bin ``n/2``.

``hfft``/``ihfft`` are irfft/rfft of the conjugate (as NumPy defines
them); ``fftshift``/``ifftshift`` are ``np.roll``.  ``n``/``s`` crop or
zero-pad the input as in NumPy; ``norm`` is ``"backward"`` (default),
``"ortho"`` or ``"forward"``; ``out=`` is refused.  Real inputs get real
gradients (the real part of the complex cotangent, which is exact).
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive, implements
from ..core.var import reject_out
from .complex import match_input, real_cotangent
from .common import axis_index, axis_tuple

_FFT = np.fft


def _fit(x, axes, sizes):
    """``x`` cropped or zero-padded (at the end) to ``sizes`` along ``axes``."""
    for ax, n in zip(axes, sizes):
        m = np.shape(x)[ax]
        if m > n:
            x = x[(slice(None),) * (ax % np.ndim(x)) + (slice(0, n),)]
        elif m < n:
            pad = [(0, 0)] * np.ndim(x)
            pad[ax] = (0, n - m)
            x = np.pad(x, pad)
    return x


def _in_sizes(x, axes):
    return tuple(np.shape(x)[a] for a in axes)


# --- complex to complex ------------------------------------------------------------
def _c2c_fwd(x, s, axes, norm, inverse):
    return (_FFT.ifftn if inverse else _FFT.fftn)(x, s, axes, norm)


def _c2c_vjp(g, ans, x, s, axes, norm, inverse):
    ct = _c2c(g, None, axes, norm, inverse)
    return match_input(_fit(ct, axes, _in_sizes(x, axes)), x)


def _batch_fft(prim, args, batched, kwargs):
    """Every transform takes ``(x, s, axes, ...)`` with ``axes`` already
    non-negative: one further right on a batched ``x``."""
    if any(batched[1:]):
        return NotImplemented
    x, s, axes, *rest = args
    return prim(x, s, tuple(a + 1 for a in axes), *rest)


_c2c = Primitive(_c2c_fwd, "fft", vjps=(_c2c_vjp,), batch=_batch_fft)


# --- real to half spectrum -----------------------------------------------------------
def _r2c_fwd(x, s, axes, norm):
    return _FFT.rfftn(x, s, axes, norm)


def _r2c_vjp(g, ans, x, s, axes, norm):
    full = _fit(g, axes[-1:], (s[-1],))  # zero-pad the half spectrum to n
    ct = _c2c(full, None, axes, norm, False)
    return match_input(_fit(ct, axes, _in_sizes(x, axes)), x)


_r2c = Primitive(_r2c_fwd, "rfft", vjps=(_r2c_vjp,), batch=_batch_fft)


# --- half spectrum to real -----------------------------------------------------------
def _c2r_fwd(z, s, axes, norm):
    return _FFT.irfftn(z, s, axes, norm)


def _c2r_weights(n, ndim, axis, dtype):
    """2 on the bins that stand for a mirrored pair, 1 on bin 0 and bin n/2."""
    w = np.full(n // 2 + 1, 2.0, dtype)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    shape = [1] * ndim
    shape[axis] = n // 2 + 1
    return w.reshape(shape)


def _c2r_vjp(g, ans, z, s, axes, norm):
    g = real_cotangent(g)
    n = s[-1]
    spec = _c2c(g, None, axes, norm, True)
    half = _fit(spec, axes[-1:], (n // 2 + 1,))
    half = half * _c2r_weights(n, np.ndim(z), axes[-1] % np.ndim(z),
                               np.finfo(np.result_type(half)).dtype)
    return match_input(_fit(half, axes, _in_sizes(z, axes)), z)


_c2r = Primitive(_c2r_fwd, "irfft", vjps=(_c2r_vjp,), batch=_batch_fft)


# --- NumPy's signatures -----------------------------------------------------------------
def _check_norm(norm):
    if norm not in (None, "backward", "ortho", "forward"):
        raise ValueError(f"tapestry: invalid norm {norm!r} for np.fft; use "
                         "'backward', 'ortho' or 'forward'.")
    return norm or "backward"


def _axes_sizes(x, s, axes, default_axes):
    """NumPy's (s, axes) resolution: both given, one given, or neither."""
    nd = np.ndim(x)
    if axes is None:
        axes = tuple(range(nd - len(s), nd)) if s is not None else default_axes(nd)
    axes = axis_tuple(tuple(int(a) for a in axes), nd) if len(set(axes)) == len(axes) else \
        tuple(axis_index(int(a), nd) for a in axes)  # (fftn allows an axis twice)
    if s is not None and len(s) != len(axes):
        raise ValueError("tapestry: np.fft: s and axes must have the same length.")
    return axes, (None if s is None else tuple(int(n) for n in s))


def _c2c_entry(name, inverse, default_axes):
    def entry(a, s=None, axes=None, norm=None, out=None):
        reject_out(f"fft.{name}", out)
        axes, s = _axes_sizes(a, s, axes, default_axes)
        s = s or _in_sizes(a, axes)
        return _c2c(a, s, axes, _check_norm(norm), inverse)
    entry.__name__ = name
    return entry


def _one_d(entry):
    def one(a, n=None, axis=-1, norm=None, out=None):
        return entry(a, None if n is None else (n,), (axis,), norm, out)
    return one


def _all_axes(nd):
    return tuple(range(nd))


def _last_two(nd):
    return (nd - 2, nd - 1)


fftn = implements(_FFT.fftn)(_c2c_entry("fftn", False, _all_axes))
ifftn = implements(_FFT.ifftn)(_c2c_entry("ifftn", True, _all_axes))
fft2 = implements(_FFT.fft2)(_c2c_entry("fft2", False, _last_two))
ifft2 = implements(_FFT.ifft2)(_c2c_entry("ifft2", True, _last_two))
fft = implements(_FFT.fft)(_one_d(fftn))
ifft = implements(_FFT.ifft)(_one_d(ifftn))


def _rfft_entry(name, default_axes):
    def entry(a, s=None, axes=None, norm=None, out=None):
        reject_out(f"fft.{name}", out)
        if np.iscomplexobj(a):
            raise TypeError(f"tapestry: np.fft.{name} takes a real array (NumPy "
                            "drops the imaginary part); use np.fft.fftn for complex input.")
        axes, s = _axes_sizes(a, s, axes, default_axes)
        return _r2c(a, s or _in_sizes(a, axes), axes, _check_norm(norm))
    entry.__name__ = name
    return entry


def _irfft_entry(name, default_axes):
    def entry(a, s=None, axes=None, norm=None, out=None):
        reject_out(f"fft.{name}", out)
        axes, s = _axes_sizes(a, s, axes, default_axes)
        if s is None:
            s = _in_sizes(a, axes[:-1]) + (2 * (np.shape(a)[axes[-1]] - 1),)
        return _c2r(a, s, axes, _check_norm(norm))
    entry.__name__ = name
    return entry


rfftn = implements(_FFT.rfftn)(_rfft_entry("rfftn", _all_axes))
rfft2 = implements(_FFT.rfft2)(_rfft_entry("rfft2", _last_two))
irfftn = implements(_FFT.irfftn)(_irfft_entry("irfftn", _all_axes))
irfft2 = implements(_FFT.irfft2)(_irfft_entry("irfft2", _last_two))
rfft = implements(_FFT.rfft)(_one_d(rfftn))
irfft = implements(_FFT.irfft)(_one_d(irfftn))

_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


@implements(_FFT.hfft)
def hfft(a, n=None, axis=-1, norm=None, out=None):
    """The real spectrum of a Hermitian signal: irfft of the conjugate."""
    reject_out("fft.hfft", out)
    return irfft(np.conjugate(a), n, axis, _SWAP[_check_norm(norm)])


@implements(_FFT.ihfft)
def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """The inverse of hfft: the conjugate of rfft."""
    reject_out("fft.ihfft", out)
    return np.conjugate(rfft(a, n, axis, _SWAP[_check_norm(norm)]))


def _shift(x, axes, sign):
    if axes is None:
        axes = tuple(range(np.ndim(x)))
    elif np.ndim(axes) == 0:
        axes = (axes,)
    shape = np.shape(x)
    shift = [sign * (shape[a] // 2) for a in axes]
    return np.roll(x, shift, tuple(axes))


implements(_FFT.fftshift)(lambda x, axes=None: _shift(x, axes, 1))
implements(_FFT.ifftshift)(lambda x, axes=None: _shift(x, axes, -1))
