"""Keep freed large buffers for reuse instead of returning them to the OS.

Reverse mode allocates and frees many large temporaries (cotangents,
intermediates) of the same sizes on every step.  glibc's malloc serves
blocks above a threshold (128 KiB, adapting up to 32 MiB) with fresh
``mmap`` pages and trims freed heap memory eagerly, so each step pays a
page fault per 4 KiB touched -- about 1 ms per MiB here, often more than
the arithmetic (W2's Dist kernel: 21 ms -> 11 ms per value+gradient).
Raising the mmap and trim thresholds makes freed blocks reusable, which
is what the caching allocators of PyTorch (CUDA) and XLA do.

Applied once at ``import tapestry`` on glibc systems; it affects the
whole process.  Set ``TAPESTRY_TUNE_MALLOC=0`` to leave malloc alone.
"""
from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Blocks up to this size come from the reusable heap (glibc's maximum).
MMAP_THRESHOLD = 32 * 2**20
#: Freed memory kept by the process before trimming.
TRIM_THRESHOLD = 256 * 2**20

_applied = None


def tune_malloc():
    """Apply the thresholds once; return whether they are in force."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get("TAPESTRY_TUNE_MALLOC", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _applied
