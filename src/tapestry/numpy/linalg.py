"""``tapestry.numpy.linalg``: NumPy's ``numpy.linalg``, the same function objects
(``norm`` also accepts a list holding traced values).

They dispatch to tapestry's rules when given traced arrays (NEP 18), so
``from tapestry.numpy.linalg import ...`` gives functions tapestry
differentiates; nothing here replaces or reloads ``numpy.linalg``.
"""
from __future__ import annotations

import numpy.linalg as _np_linalg
from numpy.linalg import *  # noqa: F401,F403

from ._lists import wrapped as _wrapped

_wrapped(globals(), _np_linalg, "linalg.")  # norm of a list holding traced values


def __getattr__(name):
    """Names ``import *`` leaves out (private helpers, aliases)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_np_linalg, name)


def __dir__():
    return sorted(set(globals()) | {n for n in dir(_np_linalg) if not n.startswith("_")})
