"""``tapestry.numpy.linalg``: NumPy's ``numpy.linalg``, the same function objects
(``norm`` also accepts a list holding traced values).

They dispatch to tapestry's rules when given traced arrays (NEP 18), so
``from tapestry.numpy.linalg import ...`` gives functions tapestry
differentiates; nothing here replaces or reloads ``numpy.linalg``.
"""
from __future__ import annotations

import numpy.linalg as _np_linalg
from numpy.linalg import *  # noqa: F401,F403

from ._proxy import forwarding as _forwarding

from ._lists import wrapped as _wrapped

_wrapped(globals(), _np_linalg, "linalg.")  # norm of a list holding traced values

#: ``from tapestry.numpy.linalg import *`` gives what ``numpy.linalg``'s does.
__all__ = list(_np_linalg.__all__)

__getattr__, _dir = _forwarding(_np_linalg)


def __dir__():
    return _dir(globals())
