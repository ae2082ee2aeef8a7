"""The traced array: an ``np.ndarray`` value plus its position on a tape.

``Var`` implements Python's operators, ``__getitem__`` and NumPy's dispatch
protocols (NEP 13 ``__array_ufunc__``, NEP 18 ``__array_function__``), so
plain NumPy code -- ``np.sin(x)``, ``x @ W``, ``np.concatenate([x, y])`` --
runs unchanged on traced inputs.  What would silently drop a gradient
(``np.asarray(v)``, ``float(v)``, ``v[i] = ...``) raises instead.
"""
from __future__ import annotations

import numpy as np

from .registry import FUNCTIONS as _F
from .registry import UFUNCS as _U

_HELP_CONVERT = (
    "Converting it to a plain array would silently drop its gradient. "
    "Use tapestry.stop_gradient(x) if a constant is what you want.")


class Var:
    """A traced array.  ``_value`` may itself be a ``Var`` of an outer tape
    (nested differentiation); ``_tape``/``_index`` locate its node."""

    __slots__ = ("_value", "_tape", "_index", "__weakref__")
    __array_priority__ = 100.0

    def __init__(self, value, tape, index):
        self._value = value
        self._tape = tape
        self._index = index

    # --- array-like attributes -------------------------------------------
    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)
    T = property(lambda self: np.transpose(self))
    mT = property(lambda self: np.swapaxes(self, -1, -2))
    real = property(lambda self: np.real(self))
    imag = property(lambda self: np.imag(self))

    def __len__(self):
        return len(self._value)

    def __repr__(self):
        return f"Var({self._value!r}, level={self._tape.level})"

    def __hash__(self):
        return id(self)

    # --- conversions that would lose the gradient -------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"tapestry: cannot convert a traced array to a NumPy "
                        f"array (np.asarray / np.array). {_HELP_CONVERT} "
                        "Library code that converts its inputs (e.g. "
                        "scipy.special.logsumexp) cannot be traced: use "
                        "tapestry.numpy (tnp.logsumexp), or tapestry.custom_vjp. "
                        "To build an array from traced values use np.stack "
                        "(np.stack([a, b])) or tapestry.numpy's constructors "
                        "(tnp.array([[a, b], [b, a]]), tnp.asarray, tnp.full), "
                        "which NumPy's own np.array cannot dispatch to.")

    def __float__(self):
        raise TypeError(f"tapestry: float() of a traced array. {_HELP_CONVERT}")

    def __int__(self):
        raise TypeError(f"tapestry: int() of a traced array. {_HELP_CONVERT}")

    def __complex__(self):
        raise TypeError(f"tapestry: complex() of a traced array. {_HELP_CONVERT}")

    def item(self, *args):
        raise TypeError(f"tapestry: .item() of a traced array. {_HELP_CONVERT}")

    def tolist(self):
        raise TypeError(f"tapestry: .tolist() of a traced array. {_HELP_CONVERT}")

    def __bool__(self):
        # Control flow on a value is fine: it takes no derivative.
        return bool(_unwrap_all(self))

    def __setitem__(self, key, value):
        raise TypeError(
            "tapestry: in-place assignment into a traced array (x[...] = v) is "
            "not differentiable. Build a new array instead, e.g. with "
            "np.where(mask, v, x), np.concatenate, or x + np.pad(...).")


    # --- NumPy dispatch ----------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs:  # hot path: np.sin(x), x * W
            prim = _U.get(ufunc)
            if prim.__class__ is _Primitive and prim.n_outputs == 1:
                if len(inputs) == 1:
                    return prim._call1(inputs[0])
                if len(inputs) == 2:
                    return prim._call2(inputs[0], inputs[1])
        return _dispatch.dispatch_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _dispatch.dispatch_function(func, args, kwargs)

    # --- operators (straight to the primitive: no NumPy dispatch) --------
    def __add__(self, o): return _U[np.add]._call2(self, o)
    def __radd__(self, o): return _U[np.add]._call2(o, self)
    def __sub__(self, o): return _U[np.subtract]._call2(self, o)
    def __rsub__(self, o): return _U[np.subtract]._call2(o, self)
    def __mul__(self, o): return _U[np.multiply]._call2(self, o)
    def __rmul__(self, o): return _U[np.multiply]._call2(o, self)
    def __truediv__(self, o): return _U[np.true_divide]._call2(self, o)
    def __rtruediv__(self, o): return _U[np.true_divide]._call2(o, self)
    def __pow__(self, o): return _U[np.power]._call2(self, o)
    def __rpow__(self, o): return _U[np.power]._call2(o, self)
    def __matmul__(self, o): return _U[np.matmul]._call2(self, o)
    def __rmatmul__(self, o): return _U[np.matmul]._call2(o, self)
    def __neg__(self): return _U[np.negative]._call1(self)
    def __pos__(self): return self
    def __abs__(self): return _U[np.absolute](self)
    def __floordiv__(self, o): return np.floor_divide(self, o)
    def __rfloordiv__(self, o): return np.floor_divide(o, self)
    def __mod__(self, o): return np.remainder(self, o)
    def __rmod__(self, o): return np.remainder(o, self)
    def __lt__(self, o): return np.less(self, o)
    def __le__(self, o): return np.less_equal(self, o)
    def __gt__(self, o): return np.greater(self, o)
    def __ge__(self, o): return np.greater_equal(self, o)
    def __eq__(self, o): return np.equal(self, o)
    def __ne__(self, o): return np.not_equal(self, o)

    # Augmented assignment rebinds (``x += y`` is ``x = x + y``), as in HIPS
    # autograd and JAX: a traced value is never written in place, so another
    # name bound to the same array does not see the change (docs/guide.md).
    __iadd__, __isub__, __imul__, __itruediv__ = __add__, __sub__, __mul__, __truediv__
    __ipow__, __imatmul__ = __pow__, __matmul__
    __ifloordiv__, __imod__ = __floordiv__, __mod__

    def __getitem__(self, key):
        return _dispatch.getitem(self, key)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # --- methods, routed through the NumPy functions ----------------------
    def sum(self, *a, **k): return np.sum(self, *a, **k)
    def mean(self, *a, **k): return np.mean(self, *a, **k)
    def prod(self, *a, **k): return np.prod(self, *a, **k)
    def max(self, *a, **k): return np.max(self, *a, **k)
    def min(self, *a, **k): return np.min(self, *a, **k)
    def var(self, *a, **k): return np.var(self, *a, **k)
    def std(self, *a, **k): return np.std(self, *a, **k)
    def cumsum(self, *a, **k): return np.cumsum(self, *a, **k)
    def cumprod(self, *a, **k): return np.cumprod(self, *a, **k)
    def dot(self, o): return np.dot(self, o)
    def clip(self, *a, **k): return np.clip(self, *a, **k)
    def repeat(self, *a, **k): return np.repeat(self, *a, **k)
    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return np.transpose(self, axes or None)
    def reshape(self, *shape, **k):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _F[np.reshape](self, shape, **k)  # tapestry's np.reshape, without NumPy's dispatch
    def ravel(self, *a, **k): return np.ravel(self, *a, **k)
    def flatten(self): return np.ravel(self)
    def squeeze(self, *a, **k): return np.squeeze(self, *a, **k)
    def swapaxes(self, a, b): return np.swapaxes(self, a, b)
    def diagonal(self, *a, **k): return np.diagonal(self, *a, **k)
    def trace(self, *a, **k): return np.trace(self, *a, **k)
    def take(self, *a, **k): return np.take(self, *a, **k)
    def conj(self): return np.conjugate(self)
    conjugate = conj
    def round(self, *a, **k): return np.round(self, *a, **k)
    def argmax(self, *a, **k): return np.argmax(self, *a, **k)
    def argmin(self, *a, **k): return np.argmin(self, *a, **k)
    def argsort(self, *a, **k): return np.argsort(self, *a, **k)
    def nonzero(self): return np.nonzero(self)
    def all(self, *a, **k): return np.all(self, *a, **k)
    def any(self, *a, **k): return np.any(self, *a, **k)
    def copy(self): return self
    def astype(self, dtype, *a, **k):
        return _dispatch.astype(self, dtype)


def _unwrap_all(x):
    while x.__class__ is Var:
        x = x._value
    return x


from . import dispatch as _dispatch  # noqa: E402  (dispatch needs Var defined)

#: Set by tapestry.core.primitive once Primitive exists (it imports this module).
_Primitive = None
