"""``tapestry.numpy.linalg``: NumPy's ``numpy.linalg``, the same function objects
(``norm`` also accepts a list holding traced values).

They dispatch to tapestry's rules when given traced arrays (NEP 18), so
``from tapestry.numpy.linalg import ...`` gives functions tapestry
differentiates; nothing here replaces or reloads ``numpy.linalg``.
"""
from __future__ import annotations

import numpy as _np
import numpy.linalg as _np_linalg
from numpy.linalg import *  # noqa: F401,F403

from ._proxy import forwarding as _forwarding

from ._lists import wrapped as _wrapped

_wrapped(globals(), _np_linalg, "linalg.")  # norm of a list holding traced values

#: ``from tapestry.numpy.linalg import *`` gives what ``numpy.linalg``'s does.
__all__ = list(_np_linalg.__all__)

__getattr__, _dir = _forwarding(_np_linalg)


# HIPS autograd's helpers, which programs written for it (and its own tests)
# reach as ``np.linalg.T`` / ``np.linalg._dot`` (tapestry.autograd.numpy is
# this package); not in ``__all__``.
def T(x):
    """``x`` with its last two axes swapped (autograd.numpy.linalg.T)."""
    return _np.swapaxes(x, -1, -2)


def _dot(a, b):
    """Stacked matrix product over the last two axes (autograd.numpy.linalg._dot)."""
    return _np.einsum("...ij,...jk->...ik", a, b)


def __dir__():
    return _dir(globals())
