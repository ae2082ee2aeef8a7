"""Indexing: ``x[key]`` and friends.  The VJP scatters the cotangent back,
accumulating repeated indices."""
from __future__ import annotations

import operator

import numpy as np

from ..core.primitive import Primitive, defvjp
from ..core.registry import FUNCTIONS


def _getitem_vjp(g, ans, x, key):
    out = np.zeros(x.shape, dtype=np.result_type(g))
    np.add.at(out, key, g)
    return out


getitem = Primitive(operator.getitem, "getitem")
defvjp(getitem, _getitem_vjp)
FUNCTIONS[operator.getitem] = getitem
