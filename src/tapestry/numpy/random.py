"""``tapestry.numpy.random``: NumPy's ``numpy.random``, the same objects.

Random draws are constants (they take shapes, not traced values), so the
namespace only has to exist: ``import tapestry.numpy.random as npr``, the
one autograd programs use, gives NumPy's generator functions and global
state; nothing here replaces or reloads ``numpy.random``.
"""
from __future__ import annotations

import numpy.random as _np_random
from numpy.random import *  # noqa: F401,F403

from ._proxy import forwarding as _forwarding

#: ``from tapestry.numpy.random import *`` gives what ``numpy.random``'s does.
__all__ = list(_np_random.__all__)

__getattr__, _dir = _forwarding(_np_random)


def __dir__():
    return _dir(globals())
