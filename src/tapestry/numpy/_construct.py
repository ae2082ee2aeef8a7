"""Array constructors that take values, for traced values.

``np.array([a, b * 2, 3.0])`` cannot be traced: NumPy converts the list's
items with ``__array__`` and never offers the call to NEP 18.  These
versions look for traced values inside nested lists and tuples and, when
they find some, build the array from the pieces with ``np.stack`` (one
differentiable node per nesting level).  The dtype is the one NumPy would
pick for the same values, and ragged input gets NumPy's own error.  Without
traced values every function is NumPy's, called with the same arguments.
"""
from __future__ import annotations

import numpy as _np

from ..core.batched import Batched as _Batched
from ..core.batched import _probe as _one_item
from ..core.var import unwrap_all as _unwrap_all
from ..core.var import Var as _Var
from ..core.staged import Staged as _Staged

#: Values that stand for an array NumPy cannot convert: a traced one, and,
#: inside tapestry.vmap, a batched one (one item of the batch).
_PIECES = (_Var, _Batched)


def _traced(obj):
    """Does ``obj`` hold a traced or batched value (itself, or inside lists/tuples)?"""
    if obj.__class__ in _PIECES:
        return True
    if isinstance(obj, (list, tuple)):
        return any(_traced(o) for o in obj)
    return False


def _stack_pieces(obj, dtype):
    """``obj`` (a traced value, or a list/tuple holding some) as one array."""
    if obj.__class__ in _PIECES:
        return obj
    if isinstance(obj, (list, tuple)) and _traced(obj):
        return _np.stack([_stack_pieces(o, dtype) for o in obj])
    return _np.asarray(obj, dtype=dtype)


def _cast(x, dtype):
    return x if _np.result_type(_unwrap_all(x)) == dtype else x.astype(dtype)


def _build(obj, dtype=None, ndmin=0):
    # NumPy decides dtype and shape (and raises on ragged input) from the
    # values; a batched value stands in as one item of its batch
    plain = _np.array(_one_item(_unwrap_all(obj)), dtype=dtype)
    out = _cast(_stack_pieces(obj, plain.dtype), plain.dtype)
    if out.ndim < ndmin:
        out = _np.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


def array(object, dtype=None, *args, ndmin=0, **kwargs):  # noqa: A002  (NumPy's name)
    """``np.array`` that also builds arrays from nested traced values:
    ``tnp.array([[x[0], x[1]], [x[1], x[0]]])`` is differentiable."""
    if _traced(object):
        return _build(object, dtype, ndmin)
    if object.__class__ is _Staged and not args and not ndmin and set(kwargs) <= {"copy"}:
        # inside jit: a recorded copy (NumPy's conversion would read the value)
        if kwargs.get("copy", True) is not True:
            return asarray(object, dtype)
        return _np.copy(object) if dtype is None else object.astype(dtype)
    return _np.array(object, dtype, *args, ndmin=ndmin, **kwargs)


def asarray(a, dtype=None, *args, **kwargs):
    """``np.asarray``; a traced value is returned as it is (cast to
    ``dtype`` if given), nested traced values are stacked."""
    if _traced(a):
        return _build(a, dtype) if dtype is not None or a.__class__ not in _PIECES \
            else a
    if a.__class__ is _Staged and not args and not kwargs:
        # inside jit: the staged value (NumPy's conversion would read it, a
        # guard that traces again for every new value)
        return a if dtype is None else a.astype(dtype, copy=False)
    return _np.asarray(a, dtype, *args, **kwargs)


def asanyarray(a, dtype=None, *args, **kwargs):
    """``np.asanyarray``, with traced values handled as :func:`asarray`."""
    if _traced(a) or a.__class__ is _Staged:
        return asarray(a, dtype, *args, **kwargs)
    return _np.asanyarray(a, dtype, *args, **kwargs)


def full(shape, fill_value, dtype=None, *args, **kwargs):
    """``np.full``; a traced ``fill_value`` gives a differentiable array."""
    if not _traced(fill_value):
        return _np.full(shape, fill_value, dtype, *args, **kwargs)
    fill = asarray(fill_value)
    dtype = _np.result_type(_unwrap_all(fill)) if dtype is None else _np.dtype(dtype)
    return _cast(fill + _np.zeros(shape, dtype), dtype)


def full_like(a, fill_value, dtype=None, *args, shape=None, **kwargs):
    """``np.full_like``; a traced ``fill_value`` gives a differentiable
    array (NumPy's own returns a constant: it dispatches on ``a`` only)."""
    if not _traced(fill_value):
        return _np.full_like(a, fill_value, dtype, *args, shape=shape, **kwargs)
    like = a if a.__class__ is _Batched else _np.asarray(_unwrap_all(a))
    return full(like.shape if shape is None else shape, fill_value,
                like.dtype if dtype is None else dtype)


def _items(seq):
    """The items of a sequence argument, nested traced lists made arrays."""
    if isinstance(seq, (list, tuple)):
        return [array(x) if x.__class__ not in _PIECES and _traced(x) else x for x in seq]
    return seq


def _joining(np_fun):
    """``np_fun`` (a join of a sequence of arrays), also of nested lists
    holding traced values."""
    def join(arrays, *args, **kwargs):
        return np_fun(_items(arrays), *args, **kwargs)
    join.__name__ = join.__qualname__ = np_fun.__name__
    join.__doc__ = f"``np.{np_fun.__name__}``, also of nested lists holding traced values."
    return join


stack, concatenate = _joining(_np.stack), _joining(_np.concatenate)
hstack, vstack, dstack = _joining(_np.hstack), _joining(_np.vstack), _joining(_np.dstack)
column_stack = _joining(_np.column_stack)


def append(arr, values, axis=None):
    """``np.append``, also of nested lists holding traced values."""
    return _np.append(_one(arr), _one(values), axis=axis)


def _one(x):
    return array(x) if x.__class__ not in _PIECES and _traced(x) else x


class _Concatenator:
    """``tnp.r_`` / ``tnp.c_``: NumPy's index tricks, which convert their
    items with ``np.array``; with traced items the pieces are joined with
    ``np.concatenate`` instead (slices become ``np.arange`` ranges, as in
    NumPy; string directives are refused with traced items)."""

    def __init__(self, np_version, columns):
        self._np = np_version
        self._columns = columns

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if not any(_traced(k) for k in items):
            return self._np[key]
        pieces = []
        for k in items:
            if isinstance(k, str):
                raise NotImplementedError(
                    f"tapestry.numpy: {'c_' if self._columns else 'r_'}[...] with a "
                    "string directive and traced items is not supported; use "
                    "tnp.concatenate or tnp.stack with an explicit axis.")
            piece = _np.r_[k] if isinstance(k, slice) else _np.atleast_1d(_one(k))
            if self._columns and _np.ndim(piece) == 1:
                piece = _np.reshape(piece, (-1, 1))
            pieces.append(piece)
        return _np.concatenate(pieces, axis=-1 if self._columns else 0)

    def __len__(self):
        return 0


r_ = _Concatenator(_np.r_, columns=False)
c_ = _Concatenator(_np.c_, columns=True)


def make_diagonal(D, offset=0, axis1=0, axis2=1):
    """autograd's ``make_diagonal``: an array whose ``(axis1, axis2)``
    diagonals are ``D``'s last axis (``offset=0`` only); differentiable."""
    if offset != 0:
        raise NotImplementedError("tapestry.numpy.make_diagonal: offset must be 0.")
    n = _np.shape(D)[-1]
    out = _np.expand_dims(D, -1) * _np.eye(n)
    nd = _np.ndim(out)
    return _np.moveaxis(out, (nd - 2, nd - 1), (axis1 % nd, axis2 % nd))
