"""The traced array, and how NumPy calls on it reach the rule registries.

A ``Var`` is an ``np.ndarray`` value plus its position on a tape.  It
implements Python's operators, ``__getitem__`` and NumPy's dispatch
protocols (NEP 13 ``__array_ufunc__``, NEP 18 ``__array_function__``), so
plain NumPy code -- ``np.sin(x)``, ``x @ W``, ``np.concatenate([x, y])`` --
runs unchanged on traced inputs: each call is looked up in
:mod:`tapestry.core.registry` and handed to the primitive found there.  What
would silently drop a gradient (``np.asarray(v)``, ``float(v)``) raises
instead, and so does a function without a rule.
"""
from __future__ import annotations

import dis
import operator
import sys
import weakref

import numpy as np

from .registry import FAST_UFUNCS, FUNCTIONS, NONDIFF, UFUNCS, run_loaders
from .tape import LEAF, refused_float

def _called_by_numpy_full(frame):
    """Whether ``frame`` (the one converting a traced value) is NumPy's
    ``np.full``, which converts its fill value without dispatching: its
    refusal names np.full, not the np.asarray the user never wrote."""
    return frame is not None and frame.f_code.co_name == "full" and \
        frame.f_globals.get("__name__", "").startswith("numpy")


def _called_by_numpy_vectorize(frame):
    """Whether the conversion of a traced value is ``np.vectorize``'s (its
    call converts every input before its loop): its refusal names it and
    ``tnp.vectorize``."""
    for _ in range(4):
        if frame is None:
            return False
        if frame.f_code.co_name in ("_vectorize_call", "_vectorize_call_with_signature") and \
                frame.f_globals.get("__name__", "").startswith("numpy"):
            return True
        frame = frame.f_back
    return False


def _vectorize_refusal(message):
    """The refusal of ``np.vectorize``'s conversion, marked: ``tnp.vectorize``
    with plain inputs runs NumPy's own and meets it where ``f`` returns a
    traced value (a closure over one); it then runs its own loop."""
    err = TypeError(message)
    err.vectorize_refusal = True
    return err


#: The opcodes of ``y[key] = v`` (STORE_SLICE: ``y[a:b] = v`` from Python 3.12).
_ITEM_WRITES = frozenset(dis.opmap[n] for n in ("STORE_SUBSCR", "STORE_SLICE") if n in dis.opmap)


def _called_by_item_write(frame):
    """Whether ``frame`` is running ``y[key] = v``: NumPy's ndarray.__setitem__
    converting a traced ``v`` to write it into a plain ``y``.  The refusal
    then names the write, not the np.asarray the user never wrote."""
    if frame is None:
        return False
    code, i = frame.f_code.co_code, frame.f_lasti
    return 0 <= i < len(code) and code[i] in _ITEM_WRITES


#: Libraries whose functions convert their inputs with np.asarray (NEP 18
#: reaches NumPy's own functions only), and what tapestry offers instead.
_CONVERTING_LIBRARIES = {
    "scipy.stats": "tapestry.scipy.stats (norm, t, gamma, beta, chi2, poisson, dirichlet, "
                   "multivariate_normal: SciPy's signatures, logpdf, pdf, cdf, ...), or "
                   "write the density with NumPy",
    "scipy.special": "tapestry.scipy.special (polygamma, multigammaln, logsumexp, softmax, "
                     "log_softmax, spherical_jn) or tapestry.numpy (tnp.logsumexp); "
                     "scipy.special's ufuncs (gammaln, expit, erf, ...) need nothing",
    "scipy.linalg": "tapestry.scipy.linalg (solve_triangular, cho_factor, cho_solve, expm, "
                    "solve_sylvester, sqrtm, solve_banded) or numpy.linalg",
    "scipy": "numpy's own functions, or tapestry.custom_vjp with the rule",
    "sklearn": "numpy's own functions, or tapestry.custom_vjp with the rule",
    "pandas": "numpy arrays and numpy's own functions",
    "numpy.polynomial": "np.polyval (coefficients highest degree first; differentiable in "
                        "the coefficients and in x), or the series written out (Chebyshev: "
                        "the recurrence T_k+1 = 2 x T_k - T_k-1)",
}


#: Names of decorators' inner functions: not the function the user called.
_WRAPPER_NAMES = frozenset({"wrapper", "wrapped", "inner", "decorated", "_wrapper", "func",
                            "wrapper_func", "new_func"})


def _converting_library_call(frame):
    """``(name, advice)`` for the library function the user called that
    converts a traced value (``scipy.stats.norm.logpdf``), or ``None``:
    the outermost frame of the library, walking out from the conversion,
    that is no decorator's wrapper (``solve_triangular`` under SciPy's
    batching decorator)."""
    frames = []
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        lib = next((k for k in _CONVERTING_LIBRARIES
                    if module == k or module.startswith(k + ".")), None)
        if lib is None:
            if frames or not module.startswith("numpy"):
                break
        else:
            frames.append((frame, lib))
        frame = frame.f_back
    if not frames:
        return None
    frame, lib = frames[-1]
    name = frame.f_code.co_name
    if name in _WRAPPER_NAMES:  # the function it wraps, held in its closure
        inner = next((v for v in frame.f_locals.values()
                      if callable(v) and getattr(v, "__name__", "") not in _WRAPPER_NAMES
                      and str(getattr(v, "__module__", "")).startswith(lib.split(".")[0])),
                     None)
        if inner is not None:
            name = inner.__name__
            module = inner.__module__
            lib = next((k for k in _CONVERTING_LIBRARIES
                        if module == k or module.startswith(k + ".")), lib)
    owner = frame.f_locals.get("self")
    dist = getattr(owner, "name", None) if lib == "scipy.stats" else None
    public = f"{lib}.{dist}.{name}" if isinstance(dist, str) else f"{lib}'s {name}"
    return public, _CONVERTING_LIBRARIES[lib]


_HELP_CONVERT = (
    "Converting it to a plain array would silently drop its gradient. "
    "Use tapestry.stop_gradient(x) if a constant is what you want.")

#: Why masked arrays are refused, and what to do instead (shared by the
#: input check of the transformations and by primitives that meet one as a
#: constant beside a traced array).
MASKED_HELP = (
    "is a NumPy masked array (np.ma.MaskedArray): its values skip the masked "
    "entries but a derivative would not (the gradient of np.mean over [1, --, 3] "
    "would give the masked entry a share), so masked arrays are refused. Pass "
    "plain data: m.filled(0) or m.compressed(), and express the mask as weights "
    "(np.sum(np.where(mask, 0, x)) / np.sum(~mask), np.average(x, weights=~mask)).")


def refuse_masked(x, opname):
    """Raise if ``x`` is a masked array (a constant met by ``opname``)."""
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"tapestry: {opname} got an argument that {MASKED_HELP}")


def _refuse_setting(name, value, fix):
    """``y.shape = s``, ``y.dtype = d``, ``y.real = v``, ``y.imag = v`` on a
    traced or batched array: NumPy changes the array in place, which these
    values (a node of a tape, a batch) cannot do.  Refused naming the
    attribute and the assignment that rebinds ``y`` instead (it was
    Python's bare "property 'shape' of 'Var' object has no setter")."""
    raise TypeError(f"tapestry: y.{name} = {value} changes a traced array in place, which "
                    f"tapestry does not do; write {fix} instead (a new array bound to y).")


def refusing_setter(name, fix):
    """The setter of ``y.shape`` / ``y.dtype``: refused by name, the
    assigned shape or dtype shown in the message and the fix."""
    def setter(self, v):
        shown = repr(v) if name == "shape" else str(np.dtype(v)) if name == "dtype" else "v"
        _refuse_setting(name, shown, fix.format(v=shown))
    return setter


#: ndarray methods that read a traced array's memory (its bytes, a field of
#: them): the values would leave differentiation, so each is refused by name.
_MEMORY_METHODS = {
    "tobytes": "tapestry.stop_gradient(y).tobytes()",
    "tofile": "tapestry.stop_gradient(y).tofile(...)",
    "dump": "tapestry.stop_gradient(y).dump(...)",
    "dumps": "tapestry.stop_gradient(y).dumps()",
    "getfield": "y.astype(dtype) for a cast, or tapestry.stop_gradient(y).getfield(...)",
    "byteswap": "y.astype(y.dtype.newbyteorder()) (the same values, the other byte order)",
}


class ArrayMethods:
    """What a value standing for an array (a traced ``Var``, a vmap
    ``Batched``) offers beyond its own dispatch: ndarray's methods,
    properties and the operators without a fast path, each routed through
    the NumPy function of the same name (which dispatches back)."""

    __slots__ = ()

    T = property(lambda self: np.transpose(self))
    mT = property(lambda self: np.swapaxes(self, -1, -2))
    real = property(lambda self: np.real(self),
                    lambda self, v: _refuse_setting("real", "v", "y = v + 1j * y.imag"))
    imag = property(lambda self: np.imag(self),
                    lambda self, v: _refuse_setting("imag", "v", "y = y.real + 1j * v"))

    def __floordiv__(self, o): return np.floor_divide(self, o)
    def __rfloordiv__(self, o): return np.floor_divide(o, self)
    def __mod__(self, o): return np.remainder(self, o)
    def __rmod__(self, o): return np.remainder(o, self)
    def __divmod__(self, o): return np.divmod(self, o)
    def __rdivmod__(self, o): return np.divmod(o, self)
    def __lt__(self, o): return np.less(self, o)
    def __le__(self, o): return np.less_equal(self, o)
    def __gt__(self, o): return np.greater(self, o)
    def __ge__(self, o): return np.greater_equal(self, o)
    def __eq__(self, o): return np.equal(self, o)
    def __ne__(self, o): return np.not_equal(self, o)

    def __iter__(self):
        # rows of a view of self (y.view()), which follows every later
        # ``y += ...``: NumPy's iterator reads the array it was given, so
        # ``for r in y: y += 1`` sees each row updated; rows taken from the
        # object y was bound to at the start kept the old values after the
        # first update rebound y
        src = self.view() if hasattr(type(self), "_root") and self.shape else self
        for i in range(len(src)):
            yield src[i]

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
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list, np.ndarray))):
            axes = axes[0]
        return np.transpose(self, None if axes is None or len(axes) == 0 else axes)
    def ravel(self, *a, **k): return np.ravel(self, *a, **k)
    def flatten(self, order="C"):
        # (a copy, as ndarray.flatten: np.ravel alone may be a view, which under
        # jit would hand the caller a view of its argument)
        return np.copy(np.ravel(self, order=order))
    def squeeze(self, *a, **k): return np.squeeze(self, *a, **k)
    def swapaxes(self, a, b): return np.swapaxes(self, a, b)
    def diagonal(self, *a, **k): return np.diagonal(self, *a, **k)
    def trace(self, *a, **k): return np.trace(self, *a, **k)
    def take(self, *a, **k): return np.take(self, *a, **k)
    def conj(self):
        # (ndarray.conj of a real array is the array itself, not a new one:
        # a view here, so that ``c = y.conj(); y += 1`` shows c the update)
        if np.iscomplexobj(self):
            return np.conjugate(self)
        return self.view() if hasattr(type(self), "_root") and self.shape else self
    conjugate = conj
    def round(self, *a, **k): return np.round(self, *a, **k)
    def argmax(self, *a, **k): return np.argmax(self, *a, **k)
    def argmin(self, *a, **k): return np.argmin(self, *a, **k)
    def argsort(self, *a, **k): return np.argsort(self, *a, **k)
    def nonzero(self): return np.nonzero(self)
    def all(self, *a, **k): return np.all(self, *a, **k)
    def any(self, *a, **k): return np.any(self, *a, **k)


class Var(ArrayMethods):
    """A traced array.  ``_value`` may itself be a ``Var`` of an outer tape
    (nested differentiation); ``_tape``/``_index`` locate its node."""

    __slots__ = ("_value", "_tape", "_index", "_root", "_views", "_derive", "_input",
                 "__weakref__")
    __array_priority__ = 100.0
    _state = ("_value", "_tape", "_index")  # what a view updated by rebind() takes

    def __init__(self, value, tape, index):
        self._value = value
        self._tape = tape
        self._index = index

    # --- array-like attributes -------------------------------------------
    shape = property(lambda self: self._value.shape, refusing_setter("shape", "y = y.reshape({v})"))
    dtype = property(lambda self: self._value.dtype,
                     refusing_setter("dtype", "y = y.astype({v}) for a cast"))
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)

    def __len__(self):
        return len(self._value)

    def __repr__(self):
        return f"Var({self._value!r}, level={self._tape.level})"

    def __hash__(self):
        return id(self)

    # --- conversions that would lose the gradient -------------------------
    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype).kind in "iub":
            # np.int64(x), np.asarray(x, dtype=int): a cast to integers or
            # booleans, whose derivative is zero wherever it exists; the
            # plain value, as x.astype(int) gives
            return np.asarray(unwrap_all(self), dtype=dtype)
        if _called_by_numpy_full(sys._getframe(1)):
            raise TypeError(
                "tapestry: np.full(shape, v) with a traced fill value v: NumPy's np.full "
                "converts v to a plain array itself (it does not hand the call to "
                "tapestry), which would drop its gradient. Write np.broadcast_to(v, shape) "
                "(differentiable; a read-only view, np.copy of it if you write into it) or "
                "tnp.full(shape, v) (import tapestry.numpy as tnp).")
        if _called_by_numpy_vectorize(sys._getframe(1)):
            raise _vectorize_refusal(
                "tapestry: np.vectorize converts its inputs to plain NumPy arrays (its loop "
                "calls the function on Python scalars; it does not hand the call to "
                "tapestry), which would drop the gradient. Use tnp.vectorize (import "
                "tapestry.numpy as tnp): NumPy's signature, its loop written with "
                "tapestry.vmap, so the function sees traced elements.")
        if _called_by_item_write(sys._getframe(1)):
            raise TypeError(
                "tapestry: y[...] = v writes a traced array v into y, a plain NumPy array "
                "(made by np.zeros / np.empty / np.full, or a constant argument), which cannot "
                "hold a traced value: NumPy converts v with np.asarray, which would drop its "
                "gradient. Make y like a traced value (y = np.zeros_like(x), np.empty_like(x), "
                "x.copy()): writes into a traced y are item assignment and differentiate; or "
                "build the array from its pieces with np.stack / np.concatenate / np.where. "
                "A field of a structured array (rec['f'] = v) cannot hold one either: keep "
                "the fields as separate arrays (a dict or dataclass of arrays).")
        lib = _converting_library_call(sys._getframe(1))
        if lib is not None:
            raise TypeError(
                f"tapestry: {lib[0]} converts its inputs to plain NumPy arrays "
                "(np.asarray), which would silently drop the gradient of a traced "
                f"argument. Use {lib[1]}. Arguments that are constants can be passed "
                "through tapestry.stop_gradient.")
        raise TypeError(f"tapestry: cannot convert a traced array to a NumPy "
                        f"array (np.asarray / np.array). {_HELP_CONVERT} "
                        "To build an array from traced values use np.stack "
                        "(np.stack([a, b])) or tapestry.numpy's constructors "
                        "(tnp.array([[a, b], [c, 1.0]]), tnp.asarray, tnp.full), which "
                        "NumPy's own np.array cannot dispatch to. Library code that converts "
                        "its inputs (e.g. scipy.special.logsumexp) cannot be traced: "
                        "use tapestry.numpy (tnp.logsumexp), tapestry.scipy.linalg "
                        "(for scipy.linalg), tapestry.scipy.special (polygamma, "
                        "multigammaln, logsumexp, softmax, spherical_jn) or "
                        "tapestry.custom_vjp. np.ma's functions (masked arrays) "
                        "convert their inputs too: compute on plain data and "
                        "express the mask as weights, e.g. np.where(mask, 0, x). So do "
                        "random draws with traced parameters (rng.normal(mu, sigma)): "
                        "draw the noise and transform it, mu + sigma * "
                        "rng.standard_normal(shape) (scale * rng.standard_exponential(shape)).")

    def __format__(self, spec):
        if not spec:
            return repr(self)
        v = self._value
        while v.__class__ is Var:
            v = v._value
        if v.__class__ is np.ndarray or isinstance(v, np.generic):
            # f"{loss:.4f}" inside f: a rounded text of the value, piecewise
            # constant in it (derivative zero almost everywhere, as round())
            return format(v[()] if v.__class__ is np.ndarray else v, spec)
        if getattr(v, "_rec", None) is not None:
            return format(v, spec)  # a jit-staged value: read as a guard
        raise TypeError(
            f"tapestry: formatting a traced array with {spec!r}. Under jit or vmap "
            "it has no one number yet (a staged or per-item value); print "
            "tapestry.stop_gradient(x) (a plain array), or return the value as an "
            "aux output (grad(..., has_aux=True)) or use value_and_grad.")

    def __float__(self):
        err = TypeError(f"tapestry: float() of a traced array. {_HELP_CONVERT}")
        err.traced_float = True  # NumPy's own write of it: see tape.written_into_plain
        refused_float.err = err  # (out.flat[i] = v drops it: tape.written_into_plain)
        raise err

    def __int__(self):
        raise TypeError(f"tapestry: int() of a traced array. {_HELP_CONVERT}")

    def __complex__(self):
        raise TypeError(f"tapestry: complex() of a traced array. {_HELP_CONVERT}")

    def item(self, *args):
        raise TypeError(f"tapestry: .item() of a traced array. {_HELP_CONVERT}")

    def tolist(self):
        raise TypeError(f"tapestry: .tolist() of a traced array. {_HELP_CONVERT}")

    def __bool__(self):
        # Control flow on a value is fine: it takes no derivative (but not on
        # forward mode's placeholder cotangent: refuse_seed_read)
        refuse_seed_read("bool()", (self,))
        return bool(unwrap_all(self))

    def __setitem__(self, key, value):
        # NumPy's write into y's memory, seen from the values: y's object
        # takes the new array (so z = y sees it too), and so do its views
        # and, through a view, the array it views (:func:`assign_item`)
        assign_item(self, key, value)


    # --- NumPy dispatch ----------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs:  # hot path: np.sin(x), x * W
            prim = FAST_UFUNCS.get(ufunc)
            if prim is not None:
                if len(inputs) == 1:
                    return prim._call1(inputs[0])
                if len(inputs) == 2:
                    return prim._call2(inputs[0], inputs[1])
        return dispatch_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        out = dispatch_function(func, args, kwargs)
        if func in VIEW_FUNCTIONS and args:
            return mark_function_views(out, func, args, kwargs, _view_function)
        if func is np.einsum:
            return mark_einsum_view(out, args, kwargs, _view_function)
        return out

    # --- operators (straight to the primitive: no NumPy dispatch) --------
    def __add__(self, o): return FAST_UFUNCS[np.add]._call2(self, o)
    def __radd__(self, o): return FAST_UFUNCS[np.add]._call2(o, self)
    def __sub__(self, o): return FAST_UFUNCS[np.subtract]._call2(self, o)
    def __rsub__(self, o): return FAST_UFUNCS[np.subtract]._call2(o, self)
    def __mul__(self, o): return FAST_UFUNCS[np.multiply]._call2(self, o)
    def __rmul__(self, o): return FAST_UFUNCS[np.multiply]._call2(o, self)
    def __truediv__(self, o): return FAST_UFUNCS[np.true_divide]._call2(self, o)
    def __rtruediv__(self, o): return FAST_UFUNCS[np.true_divide]._call2(o, self)
    def __pow__(self, o): return FAST_UFUNCS[np.power]._call2(self, o)
    def __rpow__(self, o): return FAST_UFUNCS[np.power]._call2(o, self)
    def __matmul__(self, o): return FAST_UFUNCS[np.matmul]._call2(self, o)
    def __rmatmul__(self, o): return FAST_UFUNCS[np.matmul]._call2(o, self)
    def __neg__(self): return FAST_UFUNCS[np.negative]._call1(self)
    def __pos__(self): return self
    def __abs__(self): return FAST_UFUNCS[np.absolute]._call1(self)

    def __round__(self, ndigits=None):
        # Piecewise constant (derivative 0 almost everywhere): a plain value,
        # as np.round of a traced array.
        x = unwrap_all(self)
        return round(x) if ndigits is None else round(x, ndigits)

    # Augmented assignment (``y += v``) works as NumPy's in-place operator
    # would, seen from the values: ``y`` is rebound to the new array, in the
    # dtype and shape NumPy keeps, and every live view taken from ``y``
    # (``head = y[:3]``, ``y.T``, ``y.reshape``) now shows the new values
    # (:func:`rebind`). Another *name* bound to the same array object
    # (``z = y``) keeps the old value, as in HIPS autograd and JAX
    # (docs/guide.md). Into a view of a live array it writes through into
    # that array, as NumPy's shared memory does (:func:`in_place`).
    __iadd__ = lambda self, o: in_place(self, self.__add__(o), "+=")
    __isub__ = lambda self, o: in_place(self, self.__sub__(o), "-=")
    __imul__ = lambda self, o: in_place(self, self.__mul__(o), "*=")
    __itruediv__ = lambda self, o: in_place(self, self.__truediv__(o), "/=")
    __ipow__ = lambda self, o: in_place(self, self.__pow__(o), "**=")
    __imatmul__ = lambda self, o: in_place(self, self.__matmul__(o), "@=")
    __ifloordiv__ = lambda self, o: in_place(self, ArrayMethods.__floordiv__(self, o), "//=")
    __imod__ = lambda self, o: in_place(self, ArrayMethods.__mod__(self, o), "%=")

    def __getitem__(self, key):
        return mark_item_view(getitem(self, key), self, key, getitem)

    # --- methods: those of ArrayMethods, and these -------------------------
    def reshape(self, *shape, **k):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray)):
            shape = shape[0]
        # skips NumPy's dispatch
        return mark_view(FUNCTIONS[np.reshape](self, shape, **k), self, _reshape, (shape, k))
    def copy(self, order="C"):
        # an object of its own on the same node: no view of anything, and no
        # name of ``self`` either, so that ``c = y.copy(); h = c[:2]; y += 1``
        # leaves ``h`` alone and ``v = y[::2].copy(); v += 1`` rebinds, as
        # NumPy's copy would (returning ``self`` made ``h`` a view of ``y``:
        # it silently followed ``y``'s update); its value laid out as NumPy's
        # copy in ``order`` (ndarray.copy's default is "C"), which decides
        # whether a later reshape of it is a view
        return copy_of_0d(self, Var(_laid_out(self._value, order), self._tape, self._index))
    def astype(self, dtype, *a, **k):
        return astype(self, dtype)

    def view(self, *a, **k):
        return plain_view(self, a, k)

    # in-place writes, as item assignment (:func:`assign_item`; Batched's too)
    def fill(self, value):
        if getattr(value, "shape", ()) != ():
            raise ValueError("tapestry: y.fill(v) takes one value (NumPy converts v to a "
                             "scalar); write y[...] = v to write an array.")
        self[...] = value

    def put(self, indices, values, mode="raise"):
        np.put(self, indices, values, mode=mode)

    # copy.copy / copy.deepcopy (params inside f): the same as .copy();
    # deep-copying the tape gave a value on a tape nobody sweeps
    __copy__ = copy
    __deepcopy__ = lambda self, memo: self.copy()  # noqa: E731


#: ndarray methods that change the array in place, with the functional form
#: to write instead: a traced or batched array refuses them by name (they
#: were an AttributeError that named no fix).
_IN_PLACE_METHODS = {
    "resize": "y = np.resize(y, shape) (repeats the values) or np.pad",
    "setfield": "a new array",
    "setflags": "nothing (a traced array has no flags to set)",
}


_IN_PLACE = "changes the traced array y in place, which cannot be differentiated"
_READS_MEMORY = "reads the memory of a traced array, which has no derivative"


def _refusing_method(name, why, fix):
    """A method ``name`` that refuses, saying ``why`` and the ``fix``."""
    def method(self, *args, **kwargs):
        raise TypeError(f"tapestry: y.{name}(...) {why}; write {fix} instead.")
    method.__name__ = name
    return method


class FlatIter:
    """``y.flat`` of a traced or batched array ``y`` (ndarray.flat was an
    AttributeError): NumPy's row-major 1-D index into ``y``.  Reading gives
    a copy, as NumPy's ``y.flat[key]`` does (``y.reshape(-1)[key]`` alone
    could be a view that a later ``+=`` writes through); writing is item
    assignment at the flat positions with ``np.put``'s repetition of a short
    value, so ``K.flat[::n + 1] += jitter`` adds to the diagonal of ``K``."""

    __slots__ = ("base",)

    def __init__(self, base):
        self.base = base

    def _row(self):
        return np.reshape(self.base, (-1,))

    def __getitem__(self, key):
        return self._row()[key].copy()

    def __setitem__(self, key, value):
        pos = np.arange(int(np.prod(self.base.shape, dtype=np.int64)))[key]
        np.put(self.base, np.ravel(pos), value)

    def __iter__(self):
        return iter(self._row())

    def __len__(self):
        return int(np.prod(self.base.shape, dtype=np.int64))

    def copy(self):
        return self._row().copy()

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.base)  # the traced value's own refusal


def _set_flat(self, value):
    FlatIter(self)[...] = value


#: ``y.flat`` (a property of Var and Batched): see :class:`FlatIter`.
flat_property = property(FlatIter, _set_flat)


def _sort_in_place(self, axis=-1, kind=None, order=None):
    """``y.sort()``: ``y[...] = np.sort(y)``, item assignment (``y``'s object
    and its views take the sorted values, as in NumPy's in-place sort; a
    batched value's own ``__setitem__`` under vmap)."""
    self[...] = np.sort(self, axis=axis, kind=kind, order=order)


def _partition_in_place(self, kth, axis=-1, kind="introselect", order=None):
    """``y.partition(kth)``: ``y[...] = np.partition(y, kth)``, as
    :func:`_sort_in_place`."""
    self[...] = np.partition(self, kth, axis=axis, kind=kind, order=order)


def refuse_in_place_methods(cls):
    """Give ``cls`` (Var; Batched names them in its __getattr__) the
    in-place ndarray methods -- ``sort`` and ``partition`` as item
    assignment, the others refusing by name -- and a few queries."""
    cls.flat = flat_property
    for name, fix in _IN_PLACE_METHODS.items():
        setattr(cls, name, _refusing_method(name, _IN_PLACE, fix))
    for name, fix in _MEMORY_METHODS.items():
        setattr(cls, name, _refusing_method(name, _READS_MEMORY, fix))
    cls.sort = _sort_in_place
    cls.partition = _partition_in_place
    cls.argpartition = lambda self, *a, **k: np.argpartition(self, *a, **k)
    cls.searchsorted = lambda self, v, *a, **k: np.searchsorted(self, v, *a, **k)
    cls.compress = lambda self, cond, axis=None: np.compress(cond, self, axis)
    cls.itemsize = property(lambda self: self.dtype.itemsize)
    cls.nbytes = property(lambda self: self.size * self.dtype.itemsize)
    return cls


#: NumPy functions that return a view of their first argument when they can
#: (``y.T``, ``np.ravel``, ``np.squeeze``...): augmented assignment into their
#: result writes through into the argument (:func:`mark_view`).
VIEW_FUNCTIONS = frozenset(
    getattr(np, n) for n in ("transpose", "swapaxes", "moveaxis", "rollaxis", "ravel",
                             "squeeze", "expand_dims", "reshape", "atleast_1d", "atleast_2d",
                             "atleast_3d", "permute_dims", "matrix_transpose", "diagonal",
                             "diag", "flip", "fliplr", "flipud", "rot90", "broadcast_to",
                             "real", "imag", "split", "array_split", "hsplit", "vsplit",
                             "dsplit", "unstack")
    if hasattr(np, n)) | {np.lib.stride_tricks.sliding_window_view}


def mark_function_views(out, func, args, kwargs, view_function):
    """:func:`mark_view` for ``out = func(base, *rest)`` of ``VIEW_FUNCTIONS``;
    a list of views (``np.split``) marks each. ``np.atleast_1d(y)`` of a
    vector is ``y`` itself, in NumPy too: another name, no view."""
    if out is args[0] and func in _SAME_OBJECT:
        return out
    always = func in ALWAYS_VIEWS
    if out.__class__ is list or out.__class__ is tuple:
        return out.__class__(
            mark_view(o, args[0], _item_of, (view_function, i, func, args[1:], kwargs), always)
            for i, o in enumerate(out))
    return mark_view(out, args[0], view_function, (func, args[1:], kwargs), always)


#: Of ``VIEW_FUNCTIONS``, those whose NumPy result is always a view, even
#: where tapestry's rule computes a copy (``sliding_window_view`` gathers):
#: no look at the result's memory decides it.
ALWAYS_VIEWS = frozenset(
    getattr(np, n) for n in ("transpose", "swapaxes", "moveaxis", "rollaxis", "squeeze",
                             "expand_dims", "permute_dims", "matrix_transpose", "diagonal",
                             "flip", "fliplr", "flipud", "rot90", "broadcast_to", "split",
                             "array_split", "hsplit", "vsplit", "dsplit", "unstack")
    if hasattr(np, n)) | {np.lib.stride_tricks.sliding_window_view}


_SAME_OBJECT = frozenset(getattr(np, n) for n in ("atleast_1d", "atleast_2d", "atleast_3d"))


def einsum_operand_first(operand, subscripts, **kwargs):
    """``np.einsum(subscripts, operand)`` with the operand first, the way the
    view machinery takes a view (``func(base, *rest)``)."""
    if operand.__class__ is np.ndarray or not hasattr(operand, "_value"):
        return np.einsum(subscripts, operand, **kwargs)
    return dispatch_function(np.einsum, (subscripts, operand), kwargs)  # unmarked


einsum_operand_first.__name__ = "einsum"


def _einsum_is_view(subscripts):
    """Whether NumPy's einsum of one operand with these subscripts is a view
    of it: nothing is summed, every label (and the ellipsis) of the input is
    in the output (a transpose, a diagonal: 'ij->ji', 'ii->i', '...ii->...i')."""
    spec = subscripts.replace(" ", "")
    if "," in spec:
        return False
    if "->" in spec:
        lhs, rhs = spec.split("->")
    else:  # implicit output: the labels seen once, in order (and the ellipsis first)
        lhs = spec
        letters = lhs.replace(".", "")
        rhs = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    if ("..." in lhs) != ("..." in rhs):
        return False
    return set(lhs.replace(".", "")) <= set(rhs.replace(".", ""))


def mark_einsum_view(out, args, kwargs, view_function):
    """np.einsum of one operand that sums nothing returns a writable view of
    it in NumPy (``d = np.einsum('ii->i', A); d += 1`` changes A's diagonal):
    marked as one, so writes go through as NumPy's do (it was a silent copy)."""
    if len(args) in (2, 3) and isinstance(args[1], (list, tuple)) and \
            (len(args) == 2 or isinstance(args[2], (list, tuple))):
        # the interleaved form np.einsum(A, [0, 0], [0]): its subscripts
        def letters(sub):
            return "".join("..." if k is Ellipsis else "abcdefghijklmnopqrstuvwxyz"
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[k] for k in sub)
        try:
            spec = letters(args[1]) + ("->" + letters(args[2]) if len(args) == 3 else "")
        except (TypeError, IndexError):
            return out
        args = (spec, args[0])
    if len(args) != 2 or not isinstance(args[0], str) or \
            any(k != "optimize" for k in kwargs) or not _einsum_is_view(args[0]):
        return out
    return mark_view(out, args[1], view_function,
                     (einsum_operand_first, (args[0],), {}), always=True)


def _item_of(base, view_function, i, func, rest, kwargs):
    return view_function(base, func, rest, kwargs)[i]


def _innermost(x):
    """The plain value under every wrapper (traced, batched, staged) of ``x``."""
    while not isinstance(x, np.ndarray) and hasattr(x, "_value"):
        x = x._value
    return x


def mark_view(out, base, derive=None, args=(), always=False):
    """Remember on ``out`` (a traced or batched value) that it is a NumPy
    view of ``base``: weakly, the root of its chain of views, so that a
    write into ``out`` goes through into that array while it lives
    (:func:`assign_item`); and ``derive(base, *args)``, how it was taken, so
    that augmented assignment into ``base`` shows ``out`` the new values, as
    NumPy's shared memory would (:func:`rebind`)."""
    if out.__class__ is not base.__class__ or not hasattr(type(out), "_root"):
        return out
    b = base._value
    if b.__class__ is not np.ndarray:
        b = _innermost(b)
    if base.shape == ():
        if not isinstance(b, np.ndarray):
            return out  # of a NumPy scalar (y = np.sum(x)): a copy, as NumPy's
        if b.ndim and getattr(base, "_derive", None) is None:
            # one 0-d value per item (vmap): NumPy's view of a 0-d array but
            # its copy of a scalar (the usual 0-d value): the batch cannot
            # tell, unless the value is itself a view (an array, then)
            return _mark_unknown(out if out is not base else _twin(base), base)
    if out is base:  # y.real of a real y, np.squeeze(y) with nothing to squeeze
        out = _twin(base)
    a = out._value
    if a.__class__ is not np.ndarray:
        a = _innermost(a)
    owner = getattr(a, "base", None)  # NumPy points a view at the memory's owner
    lead = getattr(b, "ndim", 0) - len(base.shape)
    ravel = derive is _view_function and args and args[0] is np.ravel
    if not always and (ravel or getattr(derive, "__name__", "") == "_reshape" or (
            derive is _view_function and args and args[0] is np.reshape)):
        # whether NumPy's reshape (ravel) copies depends on the layout of
        # the value: inside jit (a staged value) that layout is guarded,
        # as the trace's decision is replayed
        _guard_layout(base._value)
    if not always and lead > 0 and derive is not None and 0 not in b.shape[:lead]:
        # per item (vmap): the batch's layout is not the item's, so ask
        # NumPy about one item (y.T.ravel(order="F") is a view of y, while
        # the batch's ravel copies)
        seen = _item_is_view(b[(0,) * lead], derive, args)
        if seen is not None:
            always, owner, a = seen, None, None
            if not seen:
                return out
    elif not always and ravel and lead == 0:
        # tapestry's ravel is a reshape, which views a 1-d array of any
        # stride (y[::-1]); NumPy's ravel copies what is not contiguous
        seen = _item_is_view(b, derive, args)
        if seen is not None:
            always, owner, a = seen, None, None
            if not seen:
                return out
    if always or a is b or (owner is not None and
                            (owner is b or owner is getattr(b, "base", None))):
        _link(out, base, derive, args)
    return out


class _Gone:
    pass


#: The ``_root`` of a 0-d array that views nothing (a copy): a reference to
#: nothing alive, which marks the value as an array, not a NumPy scalar, so
#: that ``y += 1`` changes it in place (:func:`_updates_in_place`).
NO_ROOT = weakref.ref(_Gone())


def copy_of_0d(x, c, array=False):
    """``c``, the copy of ``x``, marked as a 0-d array where NumPy's copy is
    one: ``np.copy`` of any 0-d value (``array``), ``x.copy()`` of a 0-d
    array (a NumPy scalar's copy is a scalar)."""
    if c.shape == () and (array or getattr(x, "_root", None) is not None):
        c._root = NO_ROOT
    return c


def _laid_out(v, order):
    """``v``, or where it is not laid out as NumPy's copy in ``order`` lays
    it out (a transposed or strided value), such a copy."""
    p = _innermost(v)
    if not isinstance(p, np.ndarray) or p.ndim == 0:
        return v
    _guard_layout(v)
    f = p.flags
    same = f.c_contiguous if order == "C" else f.f_contiguous if order == "F" else \
        (f.c_contiguous or f.f_contiguous)
    return v if same else np.copy(v, order=order)


def _guard_layout(v):
    """Inside a jit trace, a guard on the layout of the staged value under
    the wrappers of ``v`` (nothing outside one)."""
    while not isinstance(v, np.ndarray) and hasattr(v, "_value"):
        if hasattr(v, "_rec"):  # a staged value (core/staged.py imports this module)
            v.guard_layout()
            return
        v = v._value


def _link(out, base, derive, args):
    """Make ``out`` a view of ``base``: its root (weakly), how it was taken
    (``derive(base, *args)``; none: only the refusal of ``out op= v``), and
    its place in ``base``'s list of views. A view of a view holds its base
    (np.split(y.reshape(3, 2), 3): the reshaped array lives on in NumPy as
    the parts' memory), so an update of y reaches the parts; a root is held
    weakly."""
    ref = getattr(base, "_root", None)
    root = ref() if ref is not None else None
    out._root = weakref.ref(base if root is None else root)
    if derive is not None:
        out._derive = (derive, args, base if root is not None else None)
        _register_view(base, out)
    return out


def _item_is_view(item, derive, args):
    """Whether NumPy's ``derive`` of the plain array ``item`` is a view of it
    (``None`` where ``derive`` is not a NumPy function or reshape)."""
    name = getattr(derive, "__name__", "")
    try:
        if name == "_reshape":
            shape, kwargs = args
            r = item.reshape(shape, **kwargs)
        elif name == "_view_function":
            func, rest, kwargs = args
            r = func(item, *rest, **kwargs)
        else:
            return None
    except Exception:  # (an argument NumPy cannot take plainly: the batch decides)
        return None
    return r.__class__ is np.ndarray and np.may_share_memory(r, item)


def _unknown_0d(base):
    """The ``derive`` of a view of a per-item 0-d value: never called
    (:func:`_refresh` makes the view refuse to be used instead)."""
    raise AssertionError("a view of a per-item 0-d value is not derived")


def _mark_unknown(out, base):
    """Mark ``out``, taken from the per-item 0-d ``base``, so that an update
    of ``base`` makes it refuse to be used (a copy would keep the old value,
    a view show the new one) and ``out op= v`` refuses as into a view."""
    return _link(out, base, _unknown_0d, ())


def _twin(x):
    """A new object holding ``x``'s value (a view's own identity)."""
    t = x.__class__.__new__(x.__class__)
    _take_value(t, x)
    return t


def _take_value(obj, new):
    """``obj``'s own object takes ``new``'s value (its node on the tape, or
    its batch), as NumPy's write into an array's memory changes what every
    name bound to it reads."""
    for slot in obj._state:
        setattr(obj, slot, getattr(new, slot))


def mark_item_view(out, base, key, derive):
    """:func:`mark_view` for ``out = base[key]``: an item picked by integers
    alone (``y[0]`` of a vector) is a NumPy scalar, a copy, not a view."""
    if out.__class__ is not base.__class__ or (out.shape == () and not _has_ellipsis(key)):
        return out
    return mark_view(out, base, derive, (key,))


def _has_ellipsis(key):
    return key is Ellipsis or (key.__class__ is tuple and any(k is Ellipsis for k in key))


def plain_view(x, a, k):
    """``x.view()``: another array object on ``x``'s memory, so an update of
    ``x`` shows in it (and ``v += 1`` into it refuses while ``x`` lives). A
    view as another dtype or class reinterprets memory: refused."""
    if a or k:
        raise TypeError("tapestry: x.view(dtype) of a traced or batched value reinterprets "
                        "its memory, which has no derivative; use x.astype(dtype), or "
                        "stop_gradient(x).view(dtype) for the bits of a constant.")
    return mark_view(_twin(x), x, _twin)


def _register_view(base, view):
    """Add ``view`` to ``base``'s weak list of views, dropping dead entries
    whenever the list doubles (a loop of ``y[i]`` stays O(live views))."""
    views = getattr(base, "_views", None)
    if views is None:
        base._views = [weakref.ref(view)]
        return
    views.append(weakref.ref(view))
    n = len(views)
    if n >= 16 and not n & (n - 1):
        views[:] = [r for r in views if r() is not None]


def _view_function(base, func, rest, kwargs):
    """``func(base, *rest, **kwargs)`` for a traced ``base``, unmarked."""
    if func is einsum_operand_first:
        return func(base, *rest, **kwargs)
    return dispatch_function(func, (base,) + rest, kwargs)


def _reshape(base, shape, kwargs):
    return FUNCTIONS[np.reshape](base, shape, **kwargs)


def rebind(old, new, op):
    """``new`` for ``old op= v`` on a traced or batched array, made to read
    as NumPy's in-place operator: an array (not a scalar) keeps its shape and
    dtype, and every live view of ``old`` is updated in place to show the
    new values, as NumPy's shared memory would (``head = y[:3]; y += 1``
    leaves ``head`` equal to ``y[:3]``). Without this, ``head`` silently
    kept the old values."""
    views = getattr(old, "_views", None)
    if old.shape or views:
        new = _same_shape_dtype(old, new, op)
    if views:
        if old.__class__ is Var and new.__class__ is not Var:
            new = _traced_constant(new, old)
        old._views = None
        _refresh(views, new, op)
    return new


def _same_shape_dtype(old, new, op):
    """``new`` for ``old op= v`` in ``old``'s shape and dtype, as NumPy's
    in-place operator writes it; refused where NumPy refuses."""
    shape, new_shape = old.shape, getattr(new, "shape", ())
    if new_shape != shape:
        raise ValueError(
            f"tapestry: y {op} v: non-broadcastable output operand with shape {shape} "
            f"doesn't match the broadcast shape {new_shape}. NumPy refuses this in-place "
            f"update too; write y = y {op[:-1]} v for the broadcast array.")
    return _same_dtype(old, new, op)


def in_place(x, new, op):
    """The object ``x op= v`` binds, ``new`` being ``x op v``: ``new`` made
    to read as NumPy's in-place result (:func:`rebind`), or, where ``x`` is
    a view of a live array (``y[1:] *= 2``, ``v = y[::2]; v += 1``), ``x``
    itself with the values written through into that array, as NumPy
    writes through the view's memory (:func:`assign_item`)."""
    ref = getattr(x, "_root", None)
    if ref is None or ref() is None:
        if not _updates_in_place(x, new):
            return rebind(x, new, op)
        if not getattr(x, "_views", None):  # nothing views x: its object takes it
            _take_value(x, _same_shape_dtype(x, new, op))
            return x
    assign_item(x, Ellipsis, _same_shape_dtype(x, new, op))
    return x


def _updates_in_place(x, new):
    """Whether ``x op= v`` changes ``x``'s own object, as NumPy's in-place
    operator changes the array (``z = y; y += 1`` shows in ``z``): for a
    traced array of one or more dimensions whose result is of its own
    level. Rebound instead (a new object, the old one unchanged): a 0-d
    value that is not a view (it stands for NumPy's scalars, ``s =
    np.sum(x)``, which ``s += 1`` rebinds; a 0-d view, ``y =
    t.reshape(())``, ``np.squeeze(t)``, ``t[0, ...]``, is a 0-d array in
    NumPy, which ``y += 1`` changes in place: ``z = y`` sees it, even once
    ``t`` is gone), an argument of the transformed function (writing
    into it would change the caller's array in NumPy; ``x += 1`` has always
    rebound it here, documented), and a result of an inner differentiation
    or vmap (``x``'s object cannot hold it)."""
    c = x.__class__
    if new.__class__ is not c or getattr(x, "_input", False) or \
            (x.shape == () and getattr(x, "_root", None) is None):
        return False
    if c is Var:
        return new._tape is x._tape
    return c.__name__ == "Batched" and new._trace is x._trace


def _same_dtype(old, new, op):
    """``new`` cast to ``old``'s dtype, as NumPy's in-place operator casts
    (``float32 += float64`` stays float32); refused where NumPy refuses."""
    dt, nt = old.dtype, getattr(new, "dtype", None)
    if nt is None or nt == dt:
        return new
    if not np.can_cast(nt, dt, "same_kind"):
        raise TypeError(
            f"tapestry: y {op} v: cannot cast the result from {nt} to y's dtype {dt} "
            f"with casting rule 'same_kind', as NumPy refuses; write y = y {op[:-1]} v "
            "for a new array of the wider dtype.")
    return new.astype(dt)


class StaleView:
    """The value of a view whose array changed kind under it (see
    :func:`_refresh`): every use raises the message, none is silent."""

    __slots__ = ("message",)

    def __init__(self, message):
        self.message = message

    def _refuse(self, *args, **kwargs):
        raise TypeError(self.message)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise TypeError(self.message)

    __array__ = __array_ufunc__ = __array_function__ = _refuse
    __len__ = __iter__ = __getitem__ = __bool__ = __float__ = __int__ = __index__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = _refuse
    __neg__ = __abs__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse


def _refresh(views, new, op):
    """Give each live view in ``views`` the values it shows of ``new`` (the
    array its base became), in place, and the same for views of views."""
    for ref in views:
        v = ref()
        if v is None or getattr(v, "_derive", None) is None:
            continue
        derive, args, _ = v._derive
        if derive is _unknown_0d:
            _stale(v, f"tapestry: v, taken from the 0-d value y inside vmap (v = y[...], "
                      f"y.T, np.expand_dims(y, 0)...), was used after y {op} ...: NumPy's v "
                      f"is a copy that keeps the old value if y is a NumPy scalar (y = "
                      f"np.sum(x)), but a view that shows the new one if y is a 0-d array, "
                      f"which tapestry cannot tell apart per item. Write v = y[...].copy() "
                      f"for the old value, or take v after the update for the new one.")
            continue
        nv = derive(new, *args)
        if nv.__class__ is not v.__class__:
            # the view would have to change kind (a traced value made per-item
            # by vmap): it can no longer show y's values, so any use refuses
            _stale(v, f"tapestry: a view of y (v = y[...], y.T, y.reshape(...)) was used "
                      f"after y {op} ... made y a {type(new).__name__} value; NumPy would show "
                      f"the view the new values, which tapestry cannot do across kinds. Take "
                      "the view after the update, or copy it first (y[...].copy()) to keep "
                      "the old values.")
            continue
        _take_value(v, nv)
        children = getattr(v, "_views", None)
        v._views = None
        mark_view(v, new, derive, args)
        if children:
            _refresh(children, v, op)


def _traced_constant(c, v):
    """The plain values ``c`` (the traced ``v`` made a constant: ``y //=
    2``, whose derivative is zero) as a traced value with a zero derivative,
    so that ``v``'s views, traced, can show them (one cannot become a plain
    array in place) and follow its later updates (a plain ``y`` is updated
    by NumPy itself, out of their reach)."""
    return np.where(np.ones(c.shape, dtype=bool), c, v)


def _stale(v, message):
    """Make the view ``v``, and every live view taken from it, refuse any
    use with ``message`` (a view of a stale view would keep old values)."""
    v._value = StaleView(message)
    children = getattr(v, "_views", None)
    v._views = None
    for ref in children or ():
        c = ref()
        if c is not None and getattr(c, "_derive", None) is not None:
            _stale(c, message)


def assign_item(y, key, value):
    """``y[key] = value`` on a traced array ``y``, as NumPy's write into its
    memory looks from the values: ``y``'s own object takes the new array
    (another name bound to it sees the write, as in NumPy), every live view
    of it shows the new values (:func:`_refresh`), and where ``y`` is itself
    a view (``v = y[1:]; v[0] = 3``), the write goes through into the array
    it views, and from there to all of that array's views. Nothing recorded
    changes: the tape holds values and positions, never these objects, and
    the write makes a new node (``setitem``, ops/indexing.py)."""
    chain = _view_chain(y)
    top = chain[-1][1] if chain else y
    if getattr(top, "_input", False):
        _refuse_input_write(y is not top)
    new = FUNCTIONS["setitem"](y, key, value)
    _check_written(y, new)
    for view, base in chain:
        new = _write_back(view, base, new)
        _check_written(base, new)
    views = getattr(top, "_views", None)
    _take_value(top, new)
    if views:
        top._views = None
        _refresh(views, top, "[...] =")


def _view_chain(v):
    """``[(view, base), ...]`` from ``v`` up through the arrays it views
    (empty if ``v`` views none that is still alive)."""
    chain = []
    while True:
        ref = getattr(v, "_root", None)
        root = ref() if ref is not None else None
        d = getattr(v, "_derive", None)
        if d is not None and _view_func(getattr(d[0], "__name__", ""), d[1]) in _READ_ONLY_VIEWS:
            raise ValueError(
                f"tapestry: y[...] = v into a view made by {_view_name(d[0].__name__, d[1])}: "
                "assignment destination is read-only (NumPy refuses it too); write into "
                "a copy (np.copy(...)).")
        if d is None:
            if root is not None:
                raise TypeError(
                    "tapestry: y[...] = v into a view whose derivation is not known "
                    "(a view of a per-item value inside vmap): NumPy would write through "
                    "into the array it views. Write into that array itself, or copy the "
                    "view first (v = v.copy()).")
            return chain
        base = d[2] if d[2] is not None else root
        if base is None:  # the array it viewed is gone: the write stays in v
            return chain
        if d[0] is _unknown_0d:
            raise TypeError(
                "tapestry: v[...] = ... into v taken from the 0-d value y inside vmap (v = "
                "y[...], np.expand_dims(y, 0)...): NumPy's v is a copy if y is a NumPy scalar "
                "(y = np.sum(x)) but a view that writes into y if y is a 0-d array, which "
                "tapestry cannot tell apart per item. Write v = y[...].copy() for a copy, or "
                "write into y itself.")
        chain.append((v, base))
        v = base


def _refuse_input_write(through_view):
    how = "through a view of it (v = x[...], x.reshape(...)) " if through_view else ""
    raise TypeError(
        f"tapestry: item assignment (x[...] = v) {how}into an argument of the function "
        "being transformed (grad, jvp, vmap...): NumPy would change the caller's array, "
        "which tapestry does not do (the caller's array stays as it was). Copy it "
        "first: x = x.copy(), then write into the copy.")


def _check_written(y, new):
    """Refuse a write whose result ``y``'s object cannot take: a value of
    another kind (per item, inside vmap) or of an inner differentiation."""
    if new.__class__ is not y.__class__:
        raise TypeError(
            f"tapestry: y[...] = v made y a {type(new).__name__} value (v or the index "
            "depends on vmap's mapped input, y does not): y's object cannot change kind "
            "in place. Build y from the mapped input (y = x * 0 + y), or use "
            "np.where(mask, v, y) for a new array.")
    if getattr(new, "_tape", None) is not getattr(y, "_tape", None) or \
            getattr(new, "_trace", None) is not getattr(y, "_trace", None):
        raise TypeError(
            "tapestry: y[...] = v writes a value of an inner differentiation or vmap "
            "(grad or vmap inside another: v depends on the inner function's argument) "
            "into an array y of the enclosing one, which y's object cannot hold. Copy y "
            "inside the inner function first (y = y.copy()), or use np.where(mask, v, y).")


def _write_back(view, base, new):
    """``base`` with ``new`` (the view's values after a write into it) put
    back where the view reads them from: ``base[key] = new`` for ``y[key]``;
    for a reshape, transpose, flip, ravel... the positions in ``base`` of the
    view's elements, found by taking the same view of their numbers."""
    derive, args, _ = view._derive
    name = getattr(derive, "__name__", "")
    if name == "_twin":  # y.view(): the same elements
        return new
    if name in ("getitem", "_getitem"):
        return FUNCTIONS["setitem"](base, args[0], new)
    shape = tuple(base.shape)
    func = _view_func(name, args)
    if name not in ("_reshape", "_view_function", "_item_of") or \
            func in (np.real, np.imag) and (func is np.imag or base.dtype.kind == "c"):
        raise TypeError(
            f"tapestry: y[...] = v into a view made by {_view_name(name, args)}: writing "
            "through it into the array it views is not supported. Write into that array "
            "itself (y[...] = ..., np.where(mask, new, y)), or copy the view first "
            "(v = v.copy()).")
    pos = _positions(name, args, np.arange(_size(shape)).reshape(shape))
    if np.unique(pos).size != pos.size:  # (NumPy's views that repeat elements are read-only)
        raise ValueError(f"tapestry: y[...] = v into the view {_view_name(name, args)}: "
                         "assignment destination is read-only (NumPy refuses it too).")
    if not shape:
        return FUNCTIONS["setitem"](base, (), np.reshape(new, ()))
    return FUNCTIONS["setitem"](base, np.unravel_index(pos, shape), new)


def _positions(name, args, idx):
    """The view of the element numbers ``idx`` taken as the view was taken
    (plain NumPy: the numbers are constants)."""
    if name == "_reshape":
        shape, kwargs = args
        return idx.reshape(shape, **kwargs)
    if name == "_view_function":
        func, rest, kwargs = args
        return np.asarray(func(idx, *rest, **kwargs))
    _, i, func, rest, kwargs = args
    return np.asarray(func(idx, *rest, **kwargs)[i])


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


#: View functions whose views NumPy makes read-only: writing into them raises.
_READ_ONLY_VIEWS = frozenset(
    getattr(np, n) for n in ("diagonal", "diag", "broadcast_to") if hasattr(np, n)) | \
    {np.lib.stride_tricks.sliding_window_view}


def _view_func(name, args):
    """The NumPy function a view was taken with (``None`` for a reshape)."""
    if name == "_view_function":
        return args[0]
    if name == "_item_of":
        return args[2]
    return None


def _view_name(name, args):
    func = _view_func(name, args)
    if func is not None:
        return f"np.{getattr(func, '__name__', func)}"
    return "y.reshape(...)" if name == "_reshape" else name or "a view"


def unwrap_all(x):
    """Strip every tracing level from ``x`` (recursing into lists/tuples/dicts)."""
    if x.__class__ is Var:
        while x.__class__ is Var:
            x = x._value
        return x
    if type(x) in (list, tuple):
        return type(x)(unwrap_all(v) for v in x)
    if type(x) is dict:
        return {k: unwrap_all(v) for k, v in x.items()}
    return x


def values_of(x, cls):
    """``x`` with every instance of ``cls`` (a wrapper holding ``_value``)
    replaced by its value, recursing into lists, tuples and dicts: vmap's
    shared-array proxy and jit's staged values handed to NumPy as they are."""
    c = x.__class__
    if c is cls:
        return x._value
    if c is list or c is tuple:
        return c(values_of(v, cls) for v in x)
    if c is dict:
        return {k: values_of(v, cls) for k, v in x.items()}
    return x


def held(x):
    """``x`` as a recorded node may hold it: a value traced by an enclosing
    level (a constant at this one) as an object of its own, so that a later
    ``x[i] = v`` (which gives the caller's object another value,
    :func:`assign_item`) leaves what was recorded as it was."""
    return Var(x._value, x._tape, x._index) if x.__class__ is Var else x


def held_each(xs, top):
    """:func:`held` for each of ``xs`` not traced on ``top`` (a list), one
    object for each object (the function run on them sees ``a is b`` where
    its caller passed one array twice)."""
    memo = {}
    out = []
    for x in xs:
        if x.__class__ is Var and x._tape is not top:
            k = id(x)
            if k not in memo:
                memo[k] = held(x)
            x = memo[k]
        out.append(x)
    return out


def new_leaf(tape, value):
    """Append an input position to ``tape`` and return ``value`` traced
    there, marked as an input: ``x[i] = v`` into it refuses (NumPy would
    write into the caller's array, :func:`assign_item`)."""
    nodes = tape.nodes
    nodes.append(LEAF)
    v = Var(value, tape, len(nodes) - 1)
    v._input = True
    return v


def traced_from(xs, level, allowed=()):
    """The first of ``xs`` traced on a tape of ``level`` or higher (other
    than the ``allowed`` tapes), or ``None``.  Values of lower tapes are
    constants of an enclosing differentiation (nesting); inside a custom
    rule or a parallel ``f``, one of ``level`` or above did not come in
    through the arguments but from a closure, a global or an attribute."""
    for x in xs:
        if x.__class__ is Var and x._tape.level >= level and x._tape not in allowed:
            return x
    return None


def innermost_tape(xs):
    """The tape that records an operation on ``xs``: the one with the
    highest level among the traced values (``None`` if none is traced).
    Values of lower tapes are constants at that level; their own tapes
    record the arithmetic done on them (nested differentiation)."""
    top = None
    for x in xs:
        if x.__class__ is Var and (top is None or x._tape.level > top.level):
            top = x._tape
    return top


def reject_out(name, out):
    """Refuse ``out=``: writing into an array in place cannot be differentiated."""
    if out is not None:
        raise TypeError(f"tapestry: np.{name}(..., out=...) writes in place, which "
                        "cannot be differentiated; drop out= and use the result.")


# --- dispatch: NumPy calls on traced arrays -> registered rules ------------------
_HELP_RULE = ("Write it with differentiable NumPy operations, or supply the "
              "rule with @tapestry.custom_vjp (see docs/guide.md).")


def _traced(xs):
    return any(x.__class__ is Var for x in xs)


def _lookup_ufunc(ufunc):
    prim = UFUNCS.get(ufunc)
    if prim is None and ufunc not in NONDIFF:
        run_loaders()  # rules loaded on first use (scipy.special), then look again
        prim = UFUNCS.get(ufunc)
    return prim


#: Keywords of a gufunc's call that its implementation here takes itself.
_GUFUNC_OWN_KEYWORDS = {"vecdot": {"axis"}}


def _signature_dtype(ufunc, sig):
    """The one dtype a ``signature=`` names (``"ff->f"``, ``(np.float32,)*3``),
    or None when it names several (or none)."""
    if isinstance(sig, str):
        parts = [c for c in sig.replace("->", ",").replace(",", "") if c != " "]
    elif isinstance(sig, tuple):
        parts = [d for d in sig if d is not None]
    else:
        parts = [sig]
    kinds = {np.dtype(d) for d in parts}
    return kinds.pop() if len(kinds) == 1 else None


def ufunc_call_keywords(ufunc, inputs, kwargs):
    """``(inputs, kwargs)`` for ``np.<ufunc>(*inputs, **kwargs)`` on traced or
    batched inputs (out= and where= handled before).  The rules take the
    inputs alone, so a keyword is applied here or refused, never dropped
    (``np.matvec(A, v, axes=...)`` computed ``A @ v``, ``np.exp(x, dtype=...)``
    failed in the backward pass): ``dtype=`` (or a ``signature=`` of one
    dtype) casts the inputs to it, which is what the ufunc's loop does;
    ``casting=`` is checked as NumPy checks it; ``subok=`` and ``order="K"``
    change nothing.  Any other (a gufunc's ``axes=`` / ``keepdims=``,
    another ``order=``, an integer loop) raises naming it."""
    kwargs = dict(kwargs)
    kwargs.pop("subok", None)
    if kwargs.get("out", 0) is None:
        del kwargs["out"]
    if kwargs.get("where", False) is True:  # the default: every entry
        del kwargs["where"]
    if kwargs.get("order", "K") == "K":
        kwargs.pop("order", None)
    casting = kwargs.pop("casting", "same_kind")
    dtype = kwargs.pop("dtype", None)
    if kwargs.get("signature") is not None:
        dtype = _signature_dtype(ufunc, kwargs.pop("signature"))
        if dtype is None:
            raise NotImplementedError(
                f"tapestry: np.{ufunc.__name__}(..., signature=...) with several dtypes on a "
                "traced array has no rule; cast the inputs with .astype instead.")
    kwargs.pop("signature", None)
    own = _GUFUNC_OWN_KEYWORDS.get(ufunc.__name__, set()) if ufunc.signature else set()
    other = sorted(k for k in kwargs if k not in own)
    if other:
        raise NotImplementedError(
            f"tapestry: np.{ufunc.__name__}(..., {other[0]}=...) on a traced array has no "
            "rule (the rules take the inputs alone, and dropping the keyword would change "
            "the result). Write it without: move the axes with np.moveaxis / np.expand_dims, "
            "or compute on plain arrays and pass the result as a constant.")
    arrays = [x for x in inputs if hasattr(x, "dtype")]
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype.kind not in "fc":
            raise NotImplementedError(
                f"tapestry: np.{ufunc.__name__}(..., dtype={dtype.name}) on a traced array: an "
                "integer or boolean loop has no rule; cast the result with .astype instead.")
        for x in arrays:
            if not np.can_cast(x.dtype, dtype, casting):
                raise TypeError(f"Cannot cast ufunc {ufunc.__name__!r} input from "
                                f"{x.dtype!r} to {dtype!r} with casting rule {casting!r}")
        inputs = tuple(x.astype(dtype) if hasattr(x, "dtype") and x.dtype != dtype else x
                       for x in inputs)
    elif casting != "same_kind" and arrays:
        target = np.result_type(*[x.dtype for x in arrays])
        for x in arrays:
            if not np.can_cast(x.dtype, target, casting):
                raise TypeError(f"Cannot cast ufunc {ufunc.__name__!r} input from "
                                f"{x.dtype!r} to {target!r} with casting rule {casting!r}")
    return inputs, kwargs


def dispatch_ufunc(ufunc, method, inputs, kwargs):
    if "where" in kwargs and method == "__call__" and _traced(inputs):
        if kwargs["where"] is not True:  # where=True is the default: every entry
            _refuse_where(ufunc.__name__, "out" in kwargs)
        kwargs = {k: v for k, v in kwargs.items() if k != "where"}
    out = kwargs.get("out")
    if out is not None:
        outs = out if isinstance(out, tuple) else (out,)
        if _traced(outs) or _traced(inputs):
            if len(outs) == 1 and type(outs[0]) is np.ndarray \
                    and any(x is outs[0] for x in inputs):
                _refuse_plain_in_place(ufunc.__name__)
            reject_out(ufunc.__name__, out)
    if method == "__call__":
        prim = _lookup_ufunc(ufunc)
        if prim is not None:
            if kwargs:
                inputs, kwargs = ufunc_call_keywords(ufunc, inputs, kwargs)
            return prim(*inputs, **kwargs)
        if ufunc in NONDIFF:
            refuse_seed_read(f"np.{ufunc.__name__}", inputs)
            return ufunc(*unwrap_all(inputs), **kwargs)
    elif ufunc in NONDIFF:
        refuse_seed_read(f"np.{ufunc.__name__}.{method}", inputs)
        return getattr(ufunc, method)(*unwrap_all(inputs), **kwargs)
    elif _lookup_ufunc(ufunc) is not None and "ufunc." + method in FUNCTIONS:
        # reduce / accumulate / outer / reduceat / at: ops/ufunc_methods.py
        return FUNCTIONS["ufunc." + method](ufunc, inputs, kwargs)
    owner = "np" if getattr(np, ufunc.__name__, None) is ufunc else "the ufunc"
    name = f"{owner}.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    raise NotImplementedError(f"tapestry: no gradient rule for {name}. {_HELP_RULE}")


#: ids of the tapes on which forward mode transposes a backward rule
#: (core.forward): their seed cotangents hold placeholder zeros.
TRANSPOSING: set = set()

#: Constant functions that read no values (shapes, dtypes, layout).
_VALUE_FREE = frozenset((np.shape, np.ndim, np.size, np.result_type, np.can_cast,
                         np.iscomplexobj, np.isrealobj, np.shares_memory, np.may_share_memory))


def refuse_seed_read(what, xs):
    """Raise if one of ``xs`` comes from a seed of forward mode's transposition:
    a backward rule that branches on its cotangent's values (``if np.any(g
    != 0)``, ``if g.sum():``) saw placeholder zeros there and silently
    dropped the terms it skips for an unused output (jvp gave 0)."""
    if TRANSPOSING and any(x.__class__ is Var and id(x._tape) in TRANSPOSING for x in xs):
        raise TypeError(
            f"tapestry forward mode (jvp / jacfwd / hessian): a backward rule read the values "
            f"of its cotangent ({what}). Forward mode differentiates the rule at a "
            "placeholder cotangent, so a branch on them (if np.any(g != 0): ...) would "
            "silently drop terms. Compute every term whatever the cotangent, or give the "
            "function a forward rule (tapestry.custom_jvp).")


def _refuse_plain_in_place(name):
    """``y += v`` (``y -= v``, ``y *= v``...) with ``y`` a plain NumPy array
    and ``v`` traced: NumPy calls ``np.add(y, v, out=y)``, which named an
    ``out=`` the user never wrote.  Say what was written and what works."""
    op = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "true_divide": "/",
          "floor_divide": "//", "remainder": "%", "power": "**", "matmul": "@"}.get(name, "op")
    raise TypeError(
        f"tapestry: y {op}= v (an in-place operator: np.{name}(y, v, out=y)) with y a plain "
        "NumPy array (np.zeros, np.ones, np.array of numbers) and v traced: NumPy writes "
        f"into y itself, which cannot hold a traced value. Write y = y {op} v (a new traced "
        "array; other names of the old y keep its values), or start from a traced "
        f"array (y = x * 0.0, a copy of a traced array), into which {op}= and y[i] = v write.")


def _refuse_where(name, with_out):
    """``np.<name>(x, where=m)`` leaves the entries where ``m`` is False
    uninitialized, or, with ``out=``, writes the others into ``out`` in
    place: the result is ``out`` itself, which a traced value cannot be."""
    what = ("writes into out= in place, and out stays a plain array"
            if with_out else "leaves the entries where the mask is False uninitialized")
    raise TypeError(
        f"tapestry: np.{name}(..., where=...) on a traced array {what}; it cannot be "
        f"differentiated. Write np.where(mask, np.{name}(np.where(mask, x, safe)), fill) "
        "instead (safe: any input where the function is finite, so that the masked "
        "entries' derivative stays 0).")


def dispatch_function(func, args, kwargs):
    impl = FUNCTIONS.get(func)
    if impl is not None:
        try:
            return impl(*args, **kwargs)
        except TypeError as e:
            _name_batched_reader(func, e)
            raise
    if func in NONDIFF:
        if func not in _VALUE_FREE:
            refuse_seed_read(f"np.{getattr(func, '__name__', func)}", args)
        return func(*unwrap_all(args), **unwrap_all(kwargs))
    mod = getattr(func, "__module__", "numpy") or "numpy"
    name = f"{mod}.{getattr(func, '__name__', func)}".replace("numpy", "np", 1)
    raise NotImplementedError(f"tapestry: no gradient rule for {name}. {_HELP_RULE}")


class BatchedConversionError(TypeError):
    """Python or a library read a batched value (``bool``, ``float``,
    ``np.asarray``): there is one value per item, not one."""


def _name_batched_reader(func, e):
    """A rule that read a batched value in Python (``vmap(grad(f))``: the
    vmap runs outside the tape, so the rule sees one value per item): raise
    the same error with the operation named, and what to do."""
    if type(e) is BatchedConversionError and not getattr(e, "named", False):
        name = f"np.{getattr(func, '__name__', func)}"
        err = BatchedConversionError(
            f"tapestry: {name} on a value traced inside vmap (vmap(grad(f)) and the like) "
            f"reads each item's values in Python, which its rule cannot do for a batch. "
            f"Differentiate outside the vmap (grad of a sum over vmap(f)), or write the "
            f"step without {name}. ({e})")
        err.named = True
        err.batch_trace = getattr(e, "batch_trace", None)  # (see api_vmap's item-by-item run)
        trace = getattr(e, "refused_by", None)
        if trace is not None and trace.refused is e:  # (see batched.refusing)
            trace.refused, err.refused_by = err, trace
        raise err from None


def getitem(x, key):
    if type(key) is tuple:
        key = tuple(unwrap_all(k) if k.__class__ is Var else k for k in key)
    elif key.__class__ is Var:
        key = unwrap_all(key)
    return FUNCTIONS[operator.getitem](x, key)


def astype(x, dtype):
    """Float and complex targets are differentiable; integer, boolean and
    date/time targets are piecewise constant (a plain array).  Any other
    target -- object, string, bytes, structured or subarray dtypes -- holds
    the values in a form whose derivative is lost, and converting it back
    (``x.astype(object)`` then arithmetic, ``x.astype(str).astype(float)``,
    ``x.astype([("a", "f8")])["a"]``) would silently give a zero gradient:
    refused by name."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc" and dtype.fields is None and dtype.subdtype is None:
        return FUNCTIONS["astype"](x, dtype)
    if dtype.kind not in "biumM":
        kind = ("a structured" if dtype.fields is not None else "a subarray"
                if dtype.subdtype is not None else "an object" if dtype.kind == "O"
                else "a raw-bytes (void)" if dtype.kind == "V" else "a string")
        raise TypeError(
            f"tapestry: x.astype({dtype!s}) of a traced value: {kind} dtype carries no "
            "derivative, and values converted back from it would silently lose their "
            "gradient. Keep a float array (x.astype(np.float64)); hold the fields of a "
            "structured array as separate arrays (a dict or dataclass of arrays); or cast "
            "tapestry.stop_gradient(x) if a constant is what you want.")
    return unwrap_all(x).astype(dtype)


refuse_in_place_methods(Var)
