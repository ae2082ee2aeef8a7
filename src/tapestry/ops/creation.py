"""Array creation from values that may be traced: evenly spaced values
(linspace, logspace, geomspace), grids (meshgrid), full_like with a
traced fill value, and zeros_like / ones_like / empty_like of a traced
array (traced constants, so writes into them differentiate).  The results move with their float arguments, so these
are composites of differentiable operations, not constants.
"""
from __future__ import annotations

import functools

import numpy as np

from ..core.primitive import KEEP_SHAPES, Primitive, implements
from ..core.var import Var, unwrap_all
from ..core.batched import TRACED


# --- evenly spaced values ------------------------------------------------------------------
def _spaced(start, stop, num, endpoint, axis):
    """``start + t (stop - start)`` for ``t`` in [0, 1] with the endpoints exact;
    returns the values (the new axis at ``axis``) and the step."""
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    num = int(num)
    div = (num - 1) if endpoint else num
    shape = np.broadcast_shapes(np.shape(start), np.shape(stop))
    t = np.arange(num, dtype=float).reshape((-1,) + (1,) * len(shape))
    delta = stop - start
    step = delta / div if div > 0 else np.nan * delta
    y = start + t * step if div > 0 else start + 0.0 * t * delta
    if endpoint and num > 1:
        y = np.where((np.arange(num) == num - 1).reshape(np.shape(t)), stop, y)
    y = np.broadcast_to(y, (num,) + shape)
    return np.moveaxis(y, 0, axis), step


def _cast_out(y, dtype, plain):
    """Cast to NumPy's output dtype; an integer dtype floors the values
    (piecewise constant), so it returns the plain result."""
    want = np.dtype(dtype) if dtype is not None else np.result_type(plain)
    if want.kind not in "fc":
        return plain
    return y if np.result_type(unwrap_all(y)) == want else y.astype(want)


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """Evenly spaced values, differentiable in ``start`` and ``stop``."""
    plain = np.linspace(unwrap_all(start), unwrap_all(stop), num, endpoint, retstep, dtype,
                        axis)
    y, step = _spaced(start, stop, num, endpoint, axis)
    y = _cast_out(y, dtype, plain[0] if retstep else plain)
    return (y, step) if retstep else y


@implements(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``base ** linspace(start, stop)``; differentiable in the base too."""
    plain = np.logspace(unwrap_all(start), unwrap_all(stop), num, endpoint,
                        unwrap_all(base), dtype, axis)
    y, _ = _spaced(start, stop, num, endpoint, axis)
    if np.ndim(base) > 0:
        base = np.expand_dims(base, axis)
    return _cast_out(np.power(base, y), dtype, plain)


@implements(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """``start * (stop / start) ** t``, endpoints exact; real inputs only."""
    plain = np.geomspace(unwrap_all(start), unwrap_all(stop), num, endpoint, dtype, axis)
    if np.iscomplexobj(plain):
        raise NotImplementedError("tapestry: np.geomspace with complex values has no "
                                  "gradient rule; use np.exp(np.linspace(log a, log b)).")
    t, _ = _spaced(np.zeros(()), np.ones(()), num, endpoint, 0)
    shape = np.broadcast_shapes(np.shape(start), np.shape(stop))
    t = np.reshape(t, (-1,) + (1,) * len(shape))
    y = start * np.power(stop / start, t)
    first = (np.arange(num) == 0).reshape(np.shape(t))
    y = np.where(first, start, y)
    if endpoint and num > 1:
        y = np.where((np.arange(num) == num - 1).reshape(np.shape(t)), stop, y)
    y = np.moveaxis(np.broadcast_to(y, (num,) + shape), 0, axis)
    return _cast_out(y, dtype, plain)


# --- grids and windows ---------------------------------------------------------------------
@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays: each input reshaped along its own axis and broadcast."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    outs = []
    for i, x in enumerate(xi):
        shape = [1] * nd
        shape[i] = -1
        if indexing == "xy" and nd > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        outs.append(np.reshape(x, shape))
    if not sparse:
        outs = list(np.broadcast_arrays(*outs))
    return tuple(outs)


# --- zeros_like, ones_like, empty_like: traced constants --------------------------------
def _like(a, which, dtype, order, subok, shape):
    """``which(a, ...)``: at an inner tracing level ``a`` is traced again,
    and this dispatches again (each level's result is traced)."""
    return which(a, dtype=dtype, order=order, subok=subok, shape=shape)


#: The created array, on ``a``'s tape with no derivative (its rule gives
#: nothing to ``a``): writes of traced values into it are item assignment.
_created_like = Primitive(
    _like, "created_like", keep=KEEP_SHAPES, vjps=(lambda g, ans, a, *rest: None,),
    # a batch of items: made like the batch (unless shape= sets another)
    batch=lambda prim, args, batched, kw: prim(*args) if args[5] is None and not kw
    and not any(batched[1:]) else NotImplemented)


def _traced_like(which):
    def entry(a, dtype=None, order="K", subok=True, shape=None):
        """A float array made like a traced ``a`` is traced too (a constant
        of its tape), so the NumPy idiom ``dy = np.zeros_like(y); dy[0] =
        f(y)`` is item assignment that differentiates, as writes into a
        copy of ``y`` are; an integer or bool one is plain, as before."""
        kind = (np.dtype(dtype) if dtype is not None else np.result_type(unwrap_all(a))).kind
        if a.__class__ is not Var or kind not in "fc":
            return which(unwrap_all(a), dtype=dtype, order=order, subok=subok, shape=shape)
        return _created_like(a, which, dtype, order, subok, shape)
    entry.__name__ = entry.__qualname__ = which.__name__
    return entry


for _which in (np.zeros_like, np.ones_like, np.empty_like):
    implements(_which)(_traced_like(_which))


# --- full_like ----------------------------------------------------------
@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    """Constant in ``a`` (traced like a traced ``a``, as ``zeros_like``); a
    traced ``fill_value`` is broadcast (its gradient is the sum of the
    output's).  ``np.full`` itself does not dispatch to
    tapestry (NumPy gives it no array argument to dispatch on)."""
    plain = np.full_like(unwrap_all(a), unwrap_all(fill_value), dtype, order, subok, shape,
                         **kw)
    if plain.dtype.kind not in "fc":
        return plain
    if fill_value.__class__ in TRACED:
        return full(plain.shape, fill_value, plain.dtype)
    if a.__class__ is Var and not kw:  # traced like a, as zeros_like (writes into it differentiate)
        return _created_like(a, functools.partial(np.full_like, fill_value=fill_value), dtype,
                             order, subok, shape)
    return plain


def full(shape, fill_value, dtype=None):
    """``np.full`` that keeps a traced ``fill_value`` traced."""
    if fill_value.__class__ not in TRACED:
        return np.full(shape, fill_value, dtype)
    out = np.broadcast_to(fill_value, shape)
    dtype = np.result_type(unwrap_all(fill_value)) if dtype is None else np.dtype(dtype)
    if dtype.kind not in "fc":
        return np.full(shape, unwrap_all(fill_value), dtype)
    return out if np.result_type(unwrap_all(out)) == dtype else out.astype(dtype)
