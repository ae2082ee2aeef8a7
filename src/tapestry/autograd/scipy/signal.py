"""``autograd.scipy.signal.convolve``: SciPy's N-d convolution.

On plain arrays it is SciPy's.  With traced operands it is written with
differentiable NumPy -- zero-pad one operand, gather its shifted copies
with one integer index per axis, contract with ``einsum`` -- so both
operands get gradients at every order.  The gathered array has
``prod(out_len * len_a)`` entries per axis pair: meant for the modest
sizes autograd programs convolve.  autograd's own ``axes=`` / ``dot_axes=``
extension is not provided.
"""
from __future__ import annotations

import string

import numpy as np
import scipy.signal as _sig

from tapestry.core.pytree import tree_flatten
from tapestry.core.var import Var


def _shifted_index(na, nb):
    """``idx[k, i] = k - i + na - 1``: where ``b[k - i]`` sits in ``b``
    padded by ``na - 1`` zeros on both sides, for the full output ``k``."""
    k = np.arange(na + nb - 1)[:, None]
    i = np.arange(na)[None, :]
    return k - i + na - 1


def _full(a, b):
    nd = np.ndim(a)
    padded = np.pad(b, [(n - 1, n - 1) for n in np.shape(a)])
    index = []
    for d, (na, nb) in enumerate(zip(np.shape(a), np.shape(b))):
        idx = _shifted_index(na, nb)
        shape = [1] * (2 * nd)
        shape[2 * d], shape[2 * d + 1] = idx.shape
        index.append(idx.reshape(shape))
    windows = padded[tuple(index)]  # (k1, i1, k2, i2, ...)
    ks, iis = string.ascii_lowercase[:nd], string.ascii_uppercase[:nd]
    spec = "".join(k + i for k, i in zip(ks, iis)) + "," + iis + "->" + ks
    return np.einsum(spec, windows, a)


def _crop(full, sa, sb, mode):
    if mode == "full":
        return full
    if mode == "valid":
        if not (all(x >= y for x, y in zip(sa, sb)) or all(y >= x for x, y in zip(sa, sb))):
            raise ValueError("convolve: in 'valid' mode one input must be at least as "
                             "large as the other in every dimension.")
        lens = [abs(x - y) + 1 for x, y in zip(sa, sb)]
    elif mode == "same":
        lens = list(sa)
    else:
        raise ValueError(f"convolve: mode must be 'full', 'valid' or 'same', got {mode!r}.")
    starts = [(f - n) // 2 for f, n in zip(np.shape(full), lens)]
    return full[tuple(slice(s, s + n) for s, n in zip(starts, lens))]


def convolve(in1, in2, mode="full", method="auto", axes=None, dot_axes=None):
    """``scipy.signal.convolve(in1, in2, mode)``, differentiable in both."""
    if axes is not None or dot_axes is not None:
        raise NotImplementedError(
            "tapestry.autograd.scipy.signal.convolve: autograd's axes=/dot_axes= "
            "extension is not provided; move the axes with np.moveaxis and loop, or "
            "use np.einsum.")
    if not any(x.__class__ is Var for x in tree_flatten([in1, in2])[0]):
        return _sig.convolve(in1, in2, mode=mode, method=method)
    if np.ndim(in1) != np.ndim(in2):
        raise ValueError("convolve: in1 and in2 should have the same dimensionality.")
    return _crop(_full(in1, in2), np.shape(in1), np.shape(in2), mode)
