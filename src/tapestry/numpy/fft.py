"""``tapestry.numpy.fft``: NumPy's ``numpy.fft``, the same function objects.

They dispatch to tapestry's rules when given traced arrays (NEP 18), so
``from tapestry.numpy.fft import ...`` gives functions tapestry
differentiates; nothing here replaces or reloads ``numpy.fft``.
"""
from __future__ import annotations

import numpy.fft as _np_fft
from numpy.fft import *  # noqa: F401,F403

from ._proxy import forwarding as _forwarding

#: ``from tapestry.numpy.fft import *`` gives what ``numpy.fft``'s does.
__all__ = list(_np_fft.__all__)

__getattr__, _dir = _forwarding(_np_fft)


def __dir__():
    return _dir(globals())
