"""NumPy dispatch for ``AxisSparse``: the rules that keep a cotangent sparse.

The elementwise VJPs (``g * y``, ``-g``, ``g / y``) and the layout VJPs
(``np.transpose(g)``, ``g.sum(axis)``) are written for dense arrays; when
``g`` is an ``AxisSparse`` NumPy hands the call to the functions here
(NEP 13 / NEP 18), which compute on the stored slices whenever the result
is zero outside them:

* ``sparse * dense`` / ``sparse / dense`` (same shape or broadcast to the
  sparse shape): the dense operand is gathered at the stored slices.
  (Zero times inf/nan outside the slices is taken as 0, like a zero
  cotangent.)
* ``-sparse``, ``scalar * sparse``, ``f(sparse)`` for ``f(0) == 0``
  (after coalescing when ``f`` is nonlinear).
* ``sparse @ dense`` (row-sparse on the left) and ``dense @ sparse``
  (column-sparse on the right), 2-D.
* ``dense += sparse`` / ``dense -= sparse`` in place: a scatter.
* ``sparse + sparse``: concatenation; ``sparse + dense``: scatter into a copy.

Everything else densifies, counted by :func:`tapestry.debug.densify_counts`.
"""
from __future__ import annotations

import numpy as np

from ..core.batched import NESTED
from ..core.staged import Staged
from ..debug import record_densify

_LINEAR_UNARY = {np.negative, np.positive, np.conjugate}
# f(0) == 0, so the result is zero outside the stored slices.
_ZERO_PRESERVING = {np.absolute, np.fabs, np.square, np.sqrt, np.cbrt, np.sin, np.tan,
                    np.tanh, np.arcsin, np.arctan, np.sinh, np.arcsinh, np.arctanh,
                    np.expm1, np.log1p, np.sign, np.rint, np.trunc, np.deg2rad,
                    np.rad2deg, np.radians, np.degrees}


def array_ufunc(Sp, ufunc, method, inputs, kwargs):
    """``AxisSparse.__array_ufunc__`` (``Sp`` is the AxisSparse class, passed
    in so that this module does not import the one that imports it)."""
    for x in inputs:
        if x.__class__ in NESTED:
            return NotImplemented  # let the traced operand record the operation
    # (a staged operand, inside jit, is an array here: NumPy calls on it are recorded)
    out = kwargs.get("out")
    if out is not None:
        return _inplace(ufunc, method, inputs, kwargs, Sp)
    if method == "__call__" and not kwargs:
        if len(inputs) == 1:
            (x,) = inputs
            if ufunc in _LINEAR_UNARY:
                return x._with(ufunc(x.values))
            if ufunc in _ZERO_PRESERVING:
                c = x.coalesce()
                return c._with(ufunc(c.values))
        elif len(inputs) == 2:
            res = _binary(ufunc, inputs[0], inputs[1], Sp)
            if res is not NotImplemented:
                return res
    dense = [densify(x, f"np.{ufunc.__name__}") for x in inputs]
    return getattr(ufunc, method)(*dense, **kwargs)


def _binary(ufunc, a, b, Sp):
    sa, sb = isinstance(a, Sp), isinstance(b, Sp)
    if ufunc is np.multiply and sa != sb:
        sp, other = (a, b) if sa else (b, a)
        return _scale(sp, other, np.multiply)
    if ufunc is np.true_divide and sa and not sb:
        return _scale(a, b, np.true_divide)
    if ufunc in (np.add, np.subtract):
        if ufunc is np.subtract:
            b = -b
        if (sa and sb) or np.shape(b if sa else a) == (a if sa else b).shape:
            return a + b if sa else b.__radd__(a)
    if ufunc is np.matmul:
        return _matmul(a, b, sa, sb)
    return NotImplemented


def _scale(sp, other, op):
    """``op(sp, other)`` on the stored slices, when the result has sp's shape."""
    if other.__class__ is not Staged:
        other = np.asarray(other)
    if other.ndim == 0:
        return sp._with(op(sp.values, other))
    if np.broadcast_shapes(sp.shape, other.shape) != sp.shape:
        return NotImplemented
    o = other.reshape((1,) * (sp.ndim - other.ndim) + other.shape)
    if o.shape[sp.axis] != 1:
        o = np.take(o, sp.indices, axis=sp.axis)
    return sp._with(op(sp.values, o))


def _matmul(a, b, sa, sb):
    """Row-sparse @ dense stays row-sparse; dense @ column-sparse stays
    column-sparse (2-D operands)."""
    if sa and not sb and a.ndim == 2 and a.axis == 0 and np.ndim(b) == 2:
        v = a.values @ b
        make = type(a)._trusted if a.staged() or v.__class__ is Staged else type(a)
        return make(0, a.indices, v, (a.shape[0], v.shape[1]), a.coalesced)
    if sb and not sa and b.ndim == 2 and b.axis == 1 and np.ndim(a) == 2:
        v = a @ b.values
        make = type(b)._trusted if b.staged() or v.__class__ is Staged else type(b)
        return make(1, b.indices, v, (v.shape[0], b.shape[1]), b.coalesced)
    return NotImplemented


def _inplace(ufunc, method, inputs, kwargs, Sp):
    """``dense += sparse`` and ``dense -= sparse``: scatter into ``dense``."""
    out = kwargs["out"]
    out = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if (method == "__call__" and ufunc in (np.add, np.subtract) and len(kwargs) == 1
            and len(inputs) == 2 and inputs[0] is out and isinstance(inputs[1], Sp)
            and type(out) is np.ndarray and out.shape == inputs[1].shape):
        return inputs[1].scatter_add_into(out, subtract=ufunc is np.subtract)
    dense = [densify(x, f"np.{ufunc.__name__}(out=...)") for x in inputs]
    return getattr(ufunc, method)(*dense, **kwargs)


def densify(x, where):
    """Dense version of ``x`` if it is sparse (anything with ``todense``),
    counted under ``where`` (:func:`tapestry.debug.densify_counts`)."""
    if hasattr(x, "todense") and hasattr(x, "scatter_add_into"):
        record_densify(where, x.shape)
        return x.todense()
    return x


# --- NEP 18 --------------------------------------------------------------------
def _transpose(a, axes=None):
    return a.transpose(axes)


def _moveaxis(a, source, destination):
    src = [s % a.ndim for s in np.atleast_1d(source)]
    dst = [d % a.ndim for d in np.atleast_1d(destination)]
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return a.transpose(order)


def _sum(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return a.sum(axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)


def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        return np.reshape(densify(a, "np.reshape(order=...)"), shape, order=order)
    return a.reshape(shape if shape is not None else newshape)


def _functions():
    return {
        np.transpose: _transpose,
        np.swapaxes: lambda a, axis1, axis2: a.swapaxes(axis1, axis2),
        np.moveaxis: _moveaxis,
        np.sum: _sum,
        np.reshape: _reshape,
        np.shape: lambda a: a.shape,
        np.ndim: lambda a: a.ndim,
        np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
        np.result_type: lambda *xs: np.result_type(*[getattr(x, "dtype", x) for x in xs]),
        np.zeros_like: lambda a, dtype=None, **k: np.zeros(a.shape, dtype or a.dtype),
        np.copy: lambda a, **k: a.copy(),
        np.conjugate: lambda a, *r, **k: a._with(np.conjugate(a.values)),
        np.real: lambda a: a._with(np.real(a.values)),
    }


_FUNCS = _functions()


def array_function(Sp, func, args, kwargs):
    """``AxisSparse.__array_function__``: the layout functions above, else
    densify every sparse argument (counted) and call NumPy."""
    impl = _FUNCS.get(func)
    if impl is not None and args and isinstance(args[0], Sp):
        return impl(*args, **kwargs)
    name = f"np.{getattr(func, '__name__', func)}"
    args = _densify_tree(args, name, Sp)
    kwargs = {k: _densify_tree(v, name, Sp) for k, v in kwargs.items()}
    return func(*args, **kwargs)


def _densify_tree(x, where, Sp):
    if isinstance(x, Sp):
        return densify(x, where)
    if type(x) in (list, tuple):
        return type(x)(_densify_tree(v, where, Sp) for v in x)
    return x
