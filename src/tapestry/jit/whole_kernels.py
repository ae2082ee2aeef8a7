"""Helpers the whole-program kernels of :mod:`tapestry.jit.whole` call
(numba): NumPy's own summation order, so a sum in a compiled program has
the bits of ``np.sum``.

NumPy adds a float64 reduction into the identity ``0.0`` with its pairwise
sum (``pairwise_sum_DOUBLE``: below 8 elements one after the other, up to
128 in eight interleaved partial sums, above that split in two halves cut
at a multiple of 8).  A C-contiguous array summed whole is one such run; a
row of a 2-d array summed along its last axis too; along axis 0 each
column is added row after row.  ``np.einsum("ab->a", x)`` (the row sums
tapestry's unbroadcasting takes for many short rows) adds each row with
einsum's own loop instead: two SIMD lanes (NumPy's x86-64 baseline is
128-bit), eight elements per step (:func:`einsum_row`).  The tests compare
the bits with NumPy's.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np
from numba import njit

#: NumPy's ``PW_BLOCKSIZE``: the longest run its pairwise sum adds in one block.
_BLOCK = 128


@njit(nogil=True, cache=True, error_model="numpy")
def _block(a, lo, n):
    """NumPy's sum of at most 128 elements ``a[lo:lo + n]``."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    m = n - n % 8
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(nogil=True, cache=True, error_model="numpy")
def pairwise(a, lo, n):
    """``a[lo] + ... + a[lo + n - 1]`` (``a`` 1-d, any stride) in NumPy's
    pairwise order (without the identity NumPy adds first).  NumPy recurses
    (left half + right half); this walks the same tree with a stack (numba's
    disk cache does not keep recursive functions)."""
    if n <= _BLOCK:
        return _block(a, lo, n)
    los = np.empty(64, np.int64)
    ns = np.empty(64, np.int64)
    state = np.zeros(64, np.int64)
    vals = np.empty(64, np.float64)
    los[0], ns[0], state[0] = lo, n, 0
    sp, vp = 1, 0
    while sp > 0:
        top = sp - 1
        lo_t, n_t = los[top], ns[top]
        if n_t <= _BLOCK:
            vals[vp] = _block(a, lo_t, n_t)
            vp += 1
            sp -= 1
            continue
        n2 = n_t // 2
        n2 -= n2 % 8
        if state[top] == 0:    # the left half next
            state[top] = 1
            los[sp], ns[sp], state[sp] = lo_t, n2, 0
            sp += 1
        elif state[top] == 1:  # then the right half
            state[top] = 2
            los[sp], ns[sp], state[sp] = lo_t + n2, n_t - n2, 0
            sp += 1
        else:                  # both done: left + right
            vals[vp - 2] = vals[vp - 2] + vals[vp - 1]
            vp -= 1
            sp -= 1
    return vals[0]


@njit(nogil=True, cache=True, error_model="numpy")
def sum_all(a):
    """``np.sum(a)`` of a 1-d array (any stride), bit for bit."""
    return 0.0 + pairwise(a, 0, a.shape[0])


@njit(nogil=True, cache=True, error_model="numpy")
def einsum_row(a, lo, n):
    """``np.einsum`` 's sum of ``a[lo:lo + n]`` (``a`` 1-d, contiguous), bit
    for bit: two lanes, eight elements per step added as ``(d0 + d2) + (d4 +
    d6)`` into lane 0 (``d1 ...`` into lane 1), then two at a time (the last
    one alone, a zero beside it), then lane 0 + lane 1, added into ``0.0``."""
    v0 = 0.0
    v1 = 0.0
    i = lo
    end = lo + n
    while end - i >= 8:
        v0 = ((a[i] + a[i + 2]) + (a[i + 4] + a[i + 6])) + v0
        v1 = ((a[i + 1] + a[i + 3]) + (a[i + 5] + a[i + 7])) + v1
        i += 8
    while i < end:
        v0 = a[i] + v0
        v1 = (a[i + 1] if i + 1 < end else 0.0) + v1
        i += 2
    return 0.0 + (v0 + v1)


@functools.lru_cache(maxsize=None)
def version():
    """A digest of this file and vmath's: the generated kernels name it in
    their source, so a changed helper never meets a stale disk cache."""
    from . import vmath
    text = Path(__file__).read_bytes() + vmath.version().encode()
    return hashlib.sha1(text).hexdigest()[:12]
