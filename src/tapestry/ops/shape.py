"""Shape and layout operations: reshape, transpose, broadcasting, joining,
splitting.  Their VJPs only move cotangents around."""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive, defvjp, primitive
from ..core.registry import FUNCTIONS
from ..core.primitive import unbroadcast

_reshape = Primitive(lambda a, shape: np.reshape(a, shape), "reshape")
defvjp(_reshape, lambda g, ans, a, shape: np.reshape(g, a.shape))
FUNCTIONS[np.reshape] = lambda a, shape=None, order="C", *, newshape=None, copy=None: \
    _reshape(a, shape if shape is not None else newshape)

_broadcast_to = Primitive(lambda a, shape: np.broadcast_to(a, shape), "broadcast_to")
defvjp(_broadcast_to, lambda g, ans, a, shape: unbroadcast(g, np.shape(a)))
FUNCTIONS[np.broadcast_to] = lambda array, shape, subok=False: _broadcast_to(array, tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape)

_transpose = Primitive(lambda a, axes: np.transpose(a, axes), "transpose")
defvjp(_transpose, lambda g, ans, a, axes:
       np.transpose(g, None if axes is None else tuple(np.argsort(axes))))
FUNCTIONS[np.transpose] = lambda a, axes=None: _transpose(a, None if axes is None else tuple(axes))

where = primitive(np.where)
defvjp(where, None,
       lambda g, ans, c, x, y: unbroadcast(np.where(c, g, 0.0 * g), np.shape(x)),
       lambda g, ans, c, x, y: unbroadcast(np.where(c, 0.0 * g, g), np.shape(y)))
