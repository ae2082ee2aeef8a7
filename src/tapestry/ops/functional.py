"""NumPy's loops over a user's function: ``apply_along_axis`` and
``apply_over_axes``.

NumPy's own versions call the function on slices, then write the results
into a preallocated array (which would convert a traced result and drop
its gradient).  Written here as the same loop over differentiable slices
with the results stacked, they differentiate like the loop a user would
write, under every transformation (vmap maps the slices, jit of grad
records them), and give NumPy's values, shapes and dtypes.
"""
from __future__ import annotations

import operator

import numpy as np

from ..core.primitive import implements
from .common import plain_dtype


def _axis_index(axis, ndim):
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim, None)
    return axis % ndim


@implements(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` on every 1-d slice of ``arr`` along ``axis``; the result's
    own axes take ``axis``'s place (NumPy's layout).  As in NumPy, the
    dtype is the first result's (later results are cast to it)."""
    nd = np.ndim(arr)
    axis = _axis_index(operator.index(axis), nd)
    moved = np.moveaxis(arr, axis, -1)
    outer = np.shape(moved)[:-1]
    if any(d == 0 for d in outer):
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    results = [func1d(moved[ind], *args, **kwargs) for ind in np.ndindex(*outer)]
    first = plain_dtype(results[0])
    k = np.ndim(results[0])
    stacked = np.stack(results)
    if plain_dtype(stacked) != first:
        stacked = stacked.astype(first)
    stacked = np.reshape(stacked, tuple(outer) + np.shape(results[0]))
    if k == 0 or axis == nd - 1:
        return stacked
    return np.moveaxis(stacked, list(range(nd - 1, nd - 1 + k)), list(range(axis, axis + k)))


@implements(np.apply_over_axes)
def apply_over_axes(func, a, axes):
    """``func(a, axis)`` for each axis in turn, the reduced axis kept (as a
    length-1 axis) where ``func`` drops it: NumPy's loop."""
    val = a
    nd = np.ndim(a)
    for axis in ((axes,) if np.ndim(axes) == 0 else axes):
        ax = axis + nd if axis < 0 else axis
        res = func(val, ax)
        if np.ndim(res) == np.ndim(val):
            val = res
        else:
            res = np.expand_dims(res, ax)
            if np.ndim(res) != np.ndim(val):
                raise ValueError("function is not returning an array of the correct shape")
            val = res
    return val
