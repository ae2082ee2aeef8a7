"""NumPy's sums, products and differences beyond the reductions: diff,
ediff1d, gradient, cross, trapezoid.

Composites: each entry point rewrites the call into slicing and arithmetic,
which have rules, so every float argument is differentiable at every order.
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import implements
from ..core.var import unwrap_all
from ..core.batched import TRACED
from .common import along, as_array, axis_slice, axis_index, axis_tuple


# --- diff ----------------------------------------------------------------------------
def _edge(value, a, axis):
    """``prepend``/``append`` as NumPy takes them: a scalar is broadcast to a
    slab of length 1 along ``axis``."""
    if np.ndim(value) == 0:
        shape = list(np.shape(a))
        shape[axis] = 1
        return np.broadcast_to(value, tuple(shape))
    return value


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """``n``-th forward difference along ``axis``: ``n`` subtractions of
    shifted slices, so differentiable in ``a``, ``prepend`` and ``append``."""
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    if n == 0:
        return a  # NumPy ignores prepend/append then
    a = as_array(a)
    nd = np.ndim(a)
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = axis_index(axis, nd)
    parts = [a]
    if prepend is not np._NoValue:
        parts.insert(0, _edge(prepend, a, axis))
    if append is not np._NoValue:
        parts.append(_edge(append, a, axis))
    if len(parts) > 1:
        a = np.concatenate(parts, axis=axis)
    for _ in range(n):
        a = a[axis_slice(nd, axis, slice(1, None))] - a[axis_slice(nd, axis, slice(None, -1))]
    return a


@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened array, with optional ends."""
    parts = [diff(np.ravel(ary))]
    dtype = np.result_type(unwrap_all(ary))  # NumPy keeps ary's dtype
    for end, at in ((to_begin, 0), (to_end, len(parts) + 1)):
        if end is not None:
            end = np.ravel(end) if end.__class__ in TRACED else np.ravel(np.asarray(end, dtype))
            parts.insert(at, end if np.result_type(unwrap_all(end)) == dtype
                         else end.astype(dtype))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


# --- gradient ---------------------------------------------------------------------------
def _spacings(varargs, f, axes):
    """One spacing per axis: a scalar step or a coordinate array (NumPy's rules)."""
    n = len(axes)
    if len(varargs) == 0:
        return [1.0] * n
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return [varargs[0]] * n
    if len(varargs) != n:
        raise TypeError("invalid number of arguments")
    out = []
    for h, ax in zip(varargs, axes):
        if np.ndim(h) not in (0, 1):
            raise ValueError("distances must be either scalars or 1d")
        if np.ndim(h) == 1 and len(h) != np.shape(f)[ax]:
            raise ValueError("when 1d, distances must match the length of the "
                             "corresponding dimension")
        out.append(h if np.ndim(h) == 0 else as_array(h))
    return out


def _gradient_uniform(f, h, ax, nd, edge_order):
    s = lambda a, b=None: f[axis_slice(nd, ax, slice(a, b))]  # noqa: E731
    interior = (s(2) - s(None, -2)) / (2.0 * h)
    if edge_order == 1:
        first = (s(1, 2) - s(0, 1)) / h
        last = (s(-1) - s(-2, -1)) / h
    else:
        first = (-1.5 * s(0, 1) + 2.0 * s(1, 2) - 0.5 * s(2, 3)) / h
        last = (0.5 * s(-3, -2) - 2.0 * s(-2, -1) + 1.5 * s(-1)) / h
    return np.concatenate([first, interior, last], axis=ax)


def _gradient_coords(f, x, ax, nd, edge_order):
    """Second-order differences on an uneven grid ``x`` (NumPy's formulas)."""
    s = lambda a, b=None: f[axis_slice(nd, ax, slice(a, b))]  # noqa: E731
    dx = diff(x)
    d1, d2 = along(dx[:-1], ax, nd), along(dx[1:], ax, nd)
    interior = (-d2 / (d1 * (d1 + d2)) * s(None, -2) + (d2 - d1) / (d1 * d2) * s(1, -1)
                + d1 / (d2 * (d1 + d2)) * s(2))
    if edge_order == 1:
        first = (s(1, 2) - s(0, 1)) / dx[0]
        last = (s(-1) - s(-2, -1)) / dx[-1]
    else:
        h1, h2 = dx[0], dx[1]
        first = (-(2.0 * h1 + h2) / (h1 * (h1 + h2)) * s(0, 1)
                 + (h1 + h2) / (h1 * h2) * s(1, 2) - h1 / (h2 * (h1 + h2)) * s(2, 3))
        h1, h2 = dx[-2], dx[-1]
        last = (h2 / (h1 * (h1 + h2)) * s(-3, -2) - (h2 + h1) / (h1 * h2) * s(-2, -1)
                + (2.0 * h2 + h1) / (h2 * (h1 + h2)) * s(-1))
    return np.concatenate([first, interior, last], axis=ax)


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """Central differences inside, one-sided ones at the edges; a linear map
    of ``f`` whose coefficients are smooth in the spacings, so differentiable
    in both."""
    nd = np.ndim(f)
    axes = tuple(range(nd)) if axis is None else _norm_axes(axis, nd)
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    hs = _spacings(varargs, f, axes)
    outs = []
    for h, ax in zip(hs, axes):
        if np.shape(f)[ax] < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical "
                             "gradient, at least (edge_order + 1) elements are required.")
        if np.ndim(h) == 0:
            outs.append(_gradient_uniform(f, h, ax, nd, edge_order))
        else:
            outs.append(_gradient_coords(f, h, ax, nd, edge_order))
    otype = np.result_type(unwrap_all(f))  # NumPy writes into an array of f's type
    otype = otype if otype.kind in "fc" else np.dtype(np.float64)
    outs = [o if np.result_type(unwrap_all(o)) == otype else o.astype(otype) for o in outs]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _norm_axes(axis, nd):
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    out = axis_tuple(tuple(int(a) for a in axes), nd)
    if len(set(out)) != len(out):
        raise ValueError("repeated axis")
    return out


# --- cross -------------------------------------------------------------------------------
#: NumPy 2.5 removed 2-vectors from np.cross (deprecated since 2.0): traced
#: calls refuse them there too, as the same code on plain arrays does.
_NO_2D_CROSS = np.lib.NumpyVersion(np.__version__) >= "2.5.0"


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3- (or 2-) vectors, written with products of
    components."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = np.moveaxis(a, axisa, -1)
    b = np.moveaxis(b, axisb, -1)
    na, nb = np.shape(a)[-1], np.shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    if _NO_2D_CROSS and (na == 2 or nb == 2):
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they are {na} and {nb} dimensional instead.")
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return z
    a2 = a[..., 2] if na == 3 else None
    b2 = b[..., 2] if nb == 3 else None
    x = (a1 * b2 if b2 is not None else 0 * a1 * b0) - (a2 * b1 if a2 is not None else 0 * a0 * b1)
    y = (a2 * b0 if a2 is not None else 0 * a0 * b0) - (a0 * b2 if b2 is not None else 0 * a0 * b0)
    c = np.stack(np.broadcast_arrays(x, y, z), axis=-1)
    return np.moveaxis(c, -1, axisc)


@implements(np.linalg.cross)
def linalg_cross(x1, x2, /, *, axis=-1):
    """``np.linalg.cross``: the array-API form of :func:`cross` (3-vectors only)."""
    if np.shape(x1)[axis] != 3 or np.shape(x2)[axis] != 3:
        raise ValueError("tapestry: np.linalg.cross needs 3-vectors along axis "
                         f"{axis}; got shapes {np.shape(x1)} and {np.shape(x2)}.")
    return cross(x1, x2, axis=axis)


# --- trapezoid ---------------------------------------------------------------------------
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoid rule: ``sum(d * (y[1:] + y[:-1]) / 2)``."""
    nd = np.ndim(y)
    axis = axis_index(axis, nd)
    if x is None:
        d = dx
    else:
        x = as_array(x)
        d = diff(x) if np.ndim(x) == 1 else diff(x, axis=axis)
        if np.ndim(x) == 1:
            d = along(d, axis, nd)
    lo = y[axis_slice(nd, axis, slice(None, -1))]
    hi = y[axis_slice(nd, axis, slice(1, None))]
    return np.sum(d * (lo + hi) / 2.0, axis=axis)


implements(*[f for f in (getattr(np, "trapezoid", None), getattr(np, "trapz", None))
             if f is not None])(trapezoid)
