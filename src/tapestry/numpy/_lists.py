"""NumPy functions that take an array-like, for lists holding traced values.

``np.mean([x, x + 2])`` cannot dispatch: NumPy looks for ``__array_function__``
on the list, not inside it, and then converts the list with ``np.asarray``.
Wrapped here, a list or tuple argument holding traced values is first built
into one traced array (:func:`tapestry.numpy.array`); any other call goes
straight to NumPy's function.  Functions whose list argument is a *sequence
of arrays* (``concatenate``, ``stack``, ``einsum``) are not wrapped here.
"""
from __future__ import annotations

import functools

import numpy as _np

from ._construct import _traced, array

_SEQ = (list, tuple)

#: name -> positions of array-like arguments.
ARRAYLIKE = {
    "sum": (0,), "mean": (0,), "std": (0,), "var": (0,), "prod": (0,), "max": (0,),
    "min": (0,), "amax": (0,), "amin": (0,), "average": (0,), "cumsum": (0,),
    "cumprod": (0,), "ravel": (0,), "reshape": (0,), "transpose": (0,),
    "squeeze": (0,), "expand_dims": (0,), "diag": (0,), "trace": (0,), "sort": (0,),
    "clip": (0,), "where": (1, 2), "dot": (0, 1), "outer": (0, 1), "inner": (0, 1),
    "tensordot": (0, 1), "kron": (0, 1), "cross": (0, 1), "repeat": (0,), "tile": (0,),
    "flip": (0,), "roll": (0,), "real": (0,), "imag": (0,), "linalg.norm": (0,),
}


def accept_lists(fun, positions):
    """``fun`` with list/tuple arguments at ``positions`` holding traced
    values turned into traced arrays first."""
    if positions == (0,):  # the common case, kept cheap (~0.2 us per call)
        @functools.wraps(fun)
        def f(*args, **kwargs):
            if args and args[0].__class__ in _SEQ and _traced(args[0]):
                args = (array(args[0]),) + args[1:]
            return fun(*args, **kwargs)
    else:
        @functools.wraps(fun)
        def f(*args, **kwargs):
            if any(i < len(args) and args[i].__class__ in _SEQ and _traced(args[i])
                   for i in positions):
                args = tuple(array(a) if i in positions and a.__class__ in _SEQ
                             and _traced(a) else a for i, a in enumerate(args))
            return fun(*args, **kwargs)
    f.__wrapped_numpy__ = fun
    return f


def where(condition, x=None, y=None):
    """``np.where``; also with keyword arguments (autograd's accepts them)
    and with lists holding traced values as ``x`` or ``y``."""
    if x is None and y is None:
        return _np.where(condition)
    return _np.where(condition, *[array(v) if isinstance(v, (list, tuple)) and _traced(v)
                                  else v for v in (x, y)])


def wrapped(namespace, module, prefix=""):
    """Fill ``namespace`` with the wrapped versions of ``module``'s names."""
    for full, positions in ARRAYLIKE.items():
        if full.startswith(prefix) and "." not in full[len(prefix):]:
            name = full[len(prefix):]
            namespace[name] = accept_lists(getattr(module, name), positions)
    if not prefix:
        where.__wrapped_numpy__ = _np.where
        namespace["where"] = where
