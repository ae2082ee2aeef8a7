"""``import tapestry.numpy as tnp``: NumPy, explicitly, plus tapestry helpers.

Every NumPy name is re-exported unchanged -- ``tnp.sin``, ``tnp.sum``,
``tnp.linalg.solve`` are NumPy's own functions, which dispatch to tapestry's
rules when given traced arrays and run as plain NumPy otherwise.  So plain
``np`` code and ``tnp`` code differentiate the same way; ``tnp`` adds the
functions NumPy lacks (``logsumexp``, ``softmax``, ``log_softmax``) and
keeps code that wants one namespace tidy.
"""
from __future__ import annotations

import numpy as _np
from numpy import *  # noqa: F401,F403

from .core.api import stop_gradient  # noqa: F401
from .ops.reductions import logsumexp  # noqa: F401

linalg = _np.linalg
fft = _np.fft
random = _np.random


def softmax(x, axis=-1):
    """``exp(x) / sum(exp(x), axis)``, computed stably."""
    return exp(x - logsumexp(x, axis=axis, keepdims=True))  # noqa: F405


def log_softmax(x, axis=-1):
    """``x - logsumexp(x, axis)``."""
    return x - logsumexp(x, axis=axis, keepdims=True)


def __getattr__(name):
    """Anything not star-exported (``newaxis`` aliases, private helpers)."""
    return getattr(_np, name)
