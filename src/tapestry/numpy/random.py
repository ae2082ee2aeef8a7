"""``tapestry.numpy.random``: NumPy's ``numpy.random``, the same objects.

Random draws are constants (they take shapes, not traced values), so the
namespace only has to exist: ``import tapestry.numpy.random as npr``, the
one autograd programs use, gives NumPy's generator functions and global
state; nothing here replaces or reloads ``numpy.random``.
"""
from __future__ import annotations

import numpy.random as _np_random
from numpy.random import *  # noqa: F401,F403


def __getattr__(name):
    """Names ``import *`` leaves out (private helpers, aliases)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_np_random, name)


def __dir__():
    return sorted(set(globals()) | {n for n in dir(_np_random) if not n.startswith("_")})
