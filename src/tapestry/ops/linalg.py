"""Linear algebra: matmul, dot and friends, and numpy.linalg."""
from __future__ import annotations

import numpy as np

from ..core.primitive import KEEP_OTHER, defvjp, primitive, unbroadcast


def _matmul_vjp_a(g, ans, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return g * b
    if b.ndim == 1:
        g = np.expand_dims(g, -1)
        b = np.reshape(b, (1, -1))
    else:
        b = np.swapaxes(b, -1, -2)
    if a.ndim == 1:
        g = np.expand_dims(g, -2)
        return unbroadcast(np.reshape(g @ b, g.shape[:-2] + (b.shape[-1],)), a.shape)
    return unbroadcast(g @ b, a.shape)


def _matmul_vjp_b(g, ans, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return g * a
    if a.ndim == 1:
        g = np.expand_dims(g, -2)
        a = np.reshape(a, (-1, 1))
    else:
        a = np.swapaxes(a, -1, -2)
    if b.ndim == 1:
        g = np.expand_dims(g, -1)
        return unbroadcast(np.reshape(a @ g, (a @ g).shape[:-1]), b.shape)
    return unbroadcast(a @ g, b.shape)


defvjp(primitive(np.matmul, keep=KEEP_OTHER), _matmul_vjp_a, _matmul_vjp_b)
