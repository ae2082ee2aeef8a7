"""glibc allocator settings that stop page-fault churn on ~1 MB temporaries.

glibc serves a request above its mmap threshold (128 KiB at start, raised
dynamically to the largest freed mapped chunk) with a fresh mapping, and
trims the heap top above twice that.  A NumPy loop that allocates and frees
arrays of about 1 MB (W4 with hidden width 512: (512, 256) float64) can then
fault fresh pages on every call: measured on this machine, a hand-written
NumPy gradient loop spent 66 of 260 ms in the kernel (32,767 minor faults
per pass) in a fresh process, and 0 after the settings below.  Worse,
whether the churn happens depends on the process's allocation history.

:func:`tune_allocator` fixes the thresholds (mapping only above 32 MiB,
trimming only above 256 MiB of free heap top), trading some retained memory
for no churn.  tapestry applies it in the worker processes it starts
(``executor="processes"``); the calling process is yours: call it there too
to give serial and thread runs the same allocator (the W4/W6 benchmarks do,
so every system is measured under the same settings).
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20  # glibc refuses more than 32 MiB on 64-bit
TRIM_THRESHOLD = 256 << 20
_done = []


def tune_allocator():
    """Apply the settings once per process; ``True`` if glibc took them
    (``False`` elsewhere, e.g. macOS or musl: nothing is changed)."""
    if _done:
        return _done[0]
    ok = False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        pass
    else:
        ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
            bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    _done.append(ok)
    return ok
