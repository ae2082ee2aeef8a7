"""``tapestry.numpy.fft``: NumPy's ``numpy.fft``, the same function objects.

They dispatch to tapestry's rules when given traced arrays (NEP 18), so
``from tapestry.numpy.fft import ...`` gives functions tapestry
differentiates; nothing here replaces or reloads ``numpy.fft``.
"""
from __future__ import annotations

import numpy.fft as _np_fft
from numpy.fft import *  # noqa: F401,F403


def __getattr__(name):
    """Names ``import *`` leaves out (private helpers, aliases)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_np_fft, name)


def __dir__():
    return sorted(set(globals()) | {n for n in dir(_np_fft) if not n.startswith("_")})
