"""``import tapestry.numpy as tnp``: NumPy, explicitly, plus tapestry helpers.

Every NumPy name is re-exported unchanged -- ``tnp.sin``, ``tnp.sum``,
``tnp.linalg.solve`` are NumPy's own functions, which dispatch to tapestry's
rules when given traced arrays (NEP 13/18) and run as plain NumPy otherwise.
So plain ``np`` code and ``tnp`` code differentiate the same way.

Two kinds of names differ from NumPy's:

* the constructors that take *values* (``array``, ``asarray``, ``full``,
  ``full_like``, ``stack``/``concatenate``/``hstack``/``vstack`` of nested
  lists): NumPy does not route them through NEP 18 when the traced values
  sit inside a list, so these versions build the array from the traced
  pieces (``np.stack`` / ``reshape``) and stay differentiable
  (:mod:`tapestry.numpy._construct`);
* functions taking one array-like (``mean``, ``std``, ``linalg.norm``, ...;
  :mod:`tapestry.numpy._lists`) also accept a list holding traced values
  (``tnp.mean([x, x + 2])``), ``r_`` / ``c_`` accept traced items, and
  ``einsum`` accepts the interleaved form (:mod:`tapestry.numpy._einsum`);
* functions NumPy lacks: ``logsumexp``, ``softmax``, ``log_softmax``,
  ``stop_gradient``, and autograd's ``make_diagonal``.

``tnp.linalg``, ``tnp.fft`` and ``tnp.random`` are real submodules, so
``import tapestry.numpy.linalg`` and ``from tapestry.numpy.linalg import
solve`` work and give NumPy's own (dispatching) functions.
"""
from __future__ import annotations

import importlib as _importlib

import numpy as _np
from numpy import *  # noqa: F401,F403

from ..core.api import stop_gradient  # noqa: F401
from ..ops import reductions as _reductions
from ..ops.reductions import logsumexp  # noqa: F401

# Real submodules.  ``from numpy import *`` bound these names to NumPy's own
# modules, which would make ``from . import linalg`` a no-op: import explicitly.
linalg = _importlib.import_module(".linalg", __name__)
fft = _importlib.import_module(".fft", __name__)
random = _importlib.import_module(".random", __name__)

from ._construct import (append, array, asanyarray, asarray, c_,  # noqa: F401
                         column_stack, concatenate, dstack, full, full_like, hstack,
                         make_diagonal, r_, stack, vstack)
from ._einsum import einsum  # noqa: F401
from ._vectorize import vectorize  # noqa: F401
from ._lists import ARRAYLIKE as _ARRAYLIKE
from ._lists import wrapped as _wrapped

_wrapped(globals(), _np)

#: ``from tapestry.numpy import *``: NumPy's own star names (some of them the
#: replacements above) and tapestry's additions; not this module's helpers.
__all__ = [*_np.__all__, "stop_gradient", "logsumexp", "softmax", "log_softmax",
           "make_diagonal"]

#: Names whose tapestry version is not NumPy's own object (see the docstring).
REPLACED = ("array", "asarray", "asanyarray", "full", "full_like", "stack",
            "concatenate", "hstack", "vstack", "dstack", "column_stack", "append",
            "r_", "c_", "einsum", "vectorize", "linalg", "fft", "random",
            *_ARRAYLIKE)


def softmax(x, axis=-1):
    """``exp(x) / sum(exp(x), axis)``, computed stably.  The default axis is
    the last one, as ``jax.nn.softmax``'s (a softmax over classes);
    ``tnp.logsumexp`` and ``tapestry.scipy.special.softmax`` follow SciPy and
    reduce over every element by default (``axis=None``)."""
    return _reductions.softmax(x, axis)


def log_softmax(x, axis=-1):
    """``x - logsumexp(x, axis)``; the last axis by default, as :func:`softmax`."""
    return _reductions.log_softmax(x, axis)


def __getattr__(name):
    """NumPy's names that ``import *`` leaves out (``newaxis`` aliases, the
    other submodules such as ``tnp.polynomial``).  ``__path__`` is this
    package's own, so ``import tapestry.numpy.X`` never loads a copy of
    ``numpy.X``."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_np, name)


def __dir__():
    return sorted(set(globals()) | {n for n in dir(_np) if not n.startswith("_")})
