"""autograd's ``builtins``: containers and type checks that see through
tracing.  tapestry traces values inside plain lists, tuples and dicts
(pytrees), so the container constructors are Python's own."""
from __future__ import annotations

import builtins as _b

from ..core.var import Var

__all__ = ["list", "tuple", "dict", "isinstance", "type"]

list = _b.list  # noqa: A001
tuple = _b.tuple  # noqa: A001
dict = _b.dict  # noqa: A001


def _value(x):
    while x.__class__ is Var:
        x = x._value
    return x


def isinstance(obj, classinfo):  # noqa: A001
    """``isinstance`` of the traced value's value (a traced ndarray is an
    ``np.ndarray``, a traced float a float)."""
    return _b.isinstance(_value(obj), classinfo)


def type(obj):  # noqa: A001
    """The type of the traced value's value."""
    return _b.type(_value(obj))
