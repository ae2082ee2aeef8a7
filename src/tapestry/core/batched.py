"""Batched values: what ``tapestry.vmap`` passes to the function it maps.

A :class:`Batched` holds one array whose leading axis is the batch, and
behaves, to the code it is given to, like one item of it: ``shape``,
``ndim``, ``len`` and every NumPy call see an item.  NumPy calls reach the
same registries as traced arrays do; a primitive on batched arguments runs
its batching rule (``Primitive.batch``: one NumPy call on the whole batch)
or, where it has none, loops over the batch (correct, counted in
:data:`FALLBACKS`, warned once per operation).

Batched values and traced arrays (``Var``) nest in either order
(``vmap(grad(f))``, ``grad(vmap(f))``): each carries a level from the one
counter tapes use, and an operation is handled by the highest level among
its arguments, which unwraps only its own values.  A value of a lower level
is a constant at that level, exactly as for nested tapes.

Python reading a batched value (``if``, ``float()``, ``int()``) has no
single answer, so it raises and says to use ``np.where``; so does
converting it with ``np.asarray``.
"""
from __future__ import annotations

import copy
import operator
import threading
import warnings
from collections import Counter

import numpy as np

from .batching import PerItemParameter, elementwise, expand_item, flat_items, shift_axes
from .registry import FAST_UFUNCS, FUNCTIONS, NONDIFF, UFUNCS, run_loaders
from .staged import HIGHER, Staged
from .var import (ArrayMethods, BatchedConversionError, Var, dispatch_function, dispatch_ufunc,
                  ufunc_call_keywords, einsum_operand_first, mark_einsum_view,
                  VIEW_FUNCTIONS, mark_function_views, mark_item_view, mark_view,
                  assign_item, in_place, plain_view, refusing_setter,
                  unwrap_all, values_of)

#: Operation name -> number of calls that looped over the batch because the
#: operation has no batching rule (or none for that combination of batched
#: arguments).  Read it to find what makes a vmapped function slow.
FALLBACKS: Counter = Counter()
_WARNED: set = set()

_HELP_CONTROL = ("Inside tapestry.vmap each item has its own value, so Python cannot "
                 "branch on it or convert it: write the choice with np.where(cond, a, b) "
                 "(both branches are computed), or move the loop over items out of vmap.")

#: ndarray's methods that change the array in place, with what to write instead.
_IN_PLACE = {"resize": "y = np.resize(x, shape)", "itemset": "np.where or np.concatenate",
             "setfield": "np.where or np.concatenate", "setflags": "a copy (x + 0)",
             "byteswap": "y = x.astype(x.dtype.newbyteorder())"}


class BatchTrace:
    """One ``vmap`` call: its level, batch size and whether it is running
    (a batched value used after its ``vmap`` returned raises)."""

    __slots__ = ("level", "size", "open", "refused")

    def __init__(self, level, size):
        self.level, self.size, self.open = level, size, True
        #: The last refusal to read one of this vmap's values that no
        #: tapestry code has handled yet (see :func:`refusing`): set when
        #: the mapped function returns, its code caught the refusal.
        self.refused = None


def refusing(trace, err):
    """``err``, a refusal to read a value of ``trace`` in Python or NumPy
    (a conversion, a branch, a write into a plain array), remembered on the
    trace until the code that catches it handles it (:func:`handled`).  A
    mapped function that catches it itself (``try: v = table[i] except
    Exception: v = default``) would take its ``except`` branch for every
    item, which a loop over the items does not: vmap then runs it once per
    item instead."""
    if trace is not None:
        trace.refused = err
        err.refused_by = trace
    return err


def handled(err):
    """``err`` (or the refusal it was chained from) caught and handled by
    tapestry's own code (a rule run per item, an operation run per item):
    no longer a refusal the mapped function swallowed."""
    seen = 0
    while err is not None and seen < 8:
        trace = getattr(err, "refused_by", None)
        if trace is not None and trace.refused is err:
            trace.refused = None
        err, seen = err.__cause__ or err.__context__, seen + 1


def _getitem(base, key):
    return FUNCTIONS[operator.getitem](base, key)


def _view_function(base, func, rest, kwargs):
    """``func(base, *rest, **kwargs)`` for a batched ``base``, unmarked."""
    if func is einsum_operand_first:
        return base._array_function(np.einsum, rest[:1] + (base,) + rest[1:], kwargs)
    return base._array_function(func, (base,) + rest, kwargs)


def _reshape(base, shape, kwargs):
    return base._array_function(np.reshape, (base, shape), kwargs)


class EscapedBatchError(RuntimeError):
    """A batched value was used after the ``vmap`` call that made it returned."""


class Batched(ArrayMethods):
    """An array with a leading batch axis, seen by user code as one item."""

    __slots__ = ("_value", "_trace", "_root", "_views", "_derive", "_input", "__weakref__")
    __array_priority__ = 100.0
    _state = ("_value", "_trace")  # what a view updated by rebind() takes

    def __init__(self, value, trace):
        self._value = value
        self._trace = trace

    def __reduce__(self):
        """Refused: unpickled elsewhere, the value would lose its batch trace
        and come back as a stale batch (an object array, wrong values)."""
        raise TypeError(
            "tapestry.vmap: a batched value (a value inside the function given to vmap, "
            "or one computed from it) cannot be pickled: sent to another process it loses "
            "its batch. A parallel_sum or parallel_map on processes or Dask takes batched "
            "and differentiated values as items or shared arguments; its f read one from a "
            "closure or a global: pass it as a shared argument, parallel_map(f, items, "
            "value) calls f(item, value).")

    def __copy__(self):
        return Batched(self._value, self._trace)

    def __deepcopy__(self, memo):
        return Batched(copy.deepcopy(self._value, memo), self._trace)

    # --- one item's view ---------------------------------------------------
    shape = property(lambda self: tuple(self._value.shape[1:]),
                     refusing_setter("shape", "y = y.reshape({v})"))
    dtype = property(lambda self: self._value.dtype,
                     refusing_setter("dtype", "y = y.astype({v}) for a cast"))
    ndim = property(lambda self: self._value.ndim - 1)
    size = property(lambda self: int(np.prod(self._value.shape[1:], dtype=np.int64)))
    itemsize = property(lambda self: self._value.dtype.itemsize)
    nbytes = property(lambda self: self.size * self._value.dtype.itemsize)

    def __len__(self):
        if self.ndim == 0:
            err = TypeError("len() of an unsized object (one item of a vmap batch is 0-d)")
            # a loop's item is a NumPy scalar, which a library may take where it
            # asks len() of anything else (np.random.default_rng([seed, 7])):
            # vmap runs f item by item, where a len() the loop makes raises too
            err.batch_trace = self._trace
            raise refusing(self._trace, err)
        return self._value.shape[1]

    def __repr__(self):
        return (f"Batched(batch of {self._trace.size}, item shape {self.shape}, "
                f"dtype {self.dtype}, level={self._trace.level})")

    def __hash__(self):
        """Refused, like an array's: an item that is a NumPy scalar hashes by
        its value, so a dict or set keyed by a batched value (a cache, a
        memo) would need one hash per item."""
        raise TypeError("tapestry.vmap: hash() of a batched value (a dict key, a set "
                        "member, a cache): each item has its own value, so the batch has no "
                        "one hash. Key by something shared by every item (an index, a "
                        "shape), or compute the choice with np.where. " + _HELP_CONTROL)

    # --- one item's view, continued: ndarray's attributes -------------------
    itemsize = property(lambda self: self._value.itemsize)
    nbytes = property(lambda self: self.size * self._value.itemsize)

    def view(self, *a, **k):
        """``x.view()``: a view of the item (var.plain_view); as another dtype
        or class it would reinterpret the batch's memory: refused."""
        return plain_view(self, a, k)

    fill, put = Var.fill, Var.put  # item assignment, as for a traced array
    sort, partition = Var.sort, Var.partition  # y[...] = np.sort(y), as for a traced array
    flat = Var.flat  # var.FlatIter: reads copy, writes are item assignment

    def __getattr__(self, name):
        """ndarray attributes that a batched value lacks: an error naming
        the method and the NumPy function to call instead (only reached
        when normal lookup fails)."""
        if name.startswith("_") or not hasattr(np.ndarray, name):
            raise AttributeError(f"'Batched' object has no attribute {name!r}")
        if name in _IN_PLACE:
            raise AttributeError(
                f"tapestry.vmap: x.{name}() changes a batched value in place, which it cannot "
                f"do; build a new array: {_IN_PLACE[name]}.")
        alt = f"; call np.{name}(x, ...) instead" if callable(getattr(np, name, None)) else ""
        raise AttributeError(f"tapestry.vmap: ndarray.{name} is not available on a batched "
                             f"value (one item of a vmap batch){alt}.")

    # --- Python reading the value: no single answer -------------------------
    def __array__(self, dtype=None, copy=None):
        raise _conversion_of(self, BatchedConversionError(
            "tapestry.vmap: cannot convert a batched value to a NumPy array (np.asarray / "
            "np.array / a list holding batched values given to a NumPy function, "
            "np.sum([a, b]): build it with np.stack([a, b]) or tapestry.numpy's "
            "tnp.array([[a, b], [c, 1.0]]); a library that converts its inputs; a plain "
            "array written with a batched value, out[i] = x: build the array with "
            "np.stack or np.where instead; or a plain NumPy array indexed "
            "with a batched index, W[i]: NumPy does not hand indexing to tapestry when the "
            "array is a plain one read from a closure or a global: pass W to the mapped "
            "function as an argument (in_axes=None), or select with a one-hot product, "
            "(np.arange(n) == i) @ W, or np.where). " + _HELP_CONTROL))

    def __bool__(self):
        raise refusing(self._trace, BatchedConversionError(
            "tapestry.vmap: the truth value of a batched value (an if, while, and/or on "
            "it). " + _HELP_CONTROL))

    def _convert(self, what):
        err = BatchedConversionError(f"tapestry.vmap: {what} of a batched value. " + _HELP_CONTROL)
        # read by vmap only where NumPy chained its own error to this one
        # (out[i] = x with a 0-d x calls float()): then it runs item by item
        err.item_trace = self._trace
        raise refusing(self._trace, err)

    __float__ = lambda self: self._convert("float()")  # noqa: E731
    __int__ = lambda self: self._convert("int()")  # noqa: E731
    __index__ = lambda self: self._convert(  # noqa: E731
        "use as an index (operator.index: a slice x[i:i + k], range(i), a list index) "
        "with a per-item i; for a slice use np.take(x, i + np.arange(k), axis=...)")
    __complex__ = lambda self: self._convert("complex()")  # noqa: E731
    item = lambda self, *a: self._convert(".item()")  # noqa: E731
    tolist = lambda self: self._convert(".tolist()")  # noqa: E731

    def __format__(self, spec):
        if not spec:
            return repr(self)
        return self._convert(f"format({spec!r})")

    def __contains__(self, v):
        raise BatchedConversionError("tapestry.vmap: `v in x` of a batched value (each item "
                                     "has its own answer); write np.any(x == v). "
                                     + _HELP_CONTROL)

    def __round__(self, ndigits=None):
        """``round(x)`` of a 0-d item: each rounded as ``round`` rounds a NumPy
        scalar in a loop (half to even; an integer without ``ndigits``)."""
        if self.ndim:
            raise TypeError("tapestry.vmap: round() of an array item (NumPy arrays do not "
                            "define it either); use np.round(x, decimals).")
        out = np.round(self, ndigits or 0)
        if ndigits is None and self.dtype.kind in "fb":
            return out.astype(np.int64)
        return out

    def __setitem__(self, key, value):
        # as for a traced array (var.assign_item): the object takes the new
        # values, and so do its views and the array it views
        assign_item(self, key, value)

    # --- NumPy dispatch -----------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and len(inputs) == 1 and not kwargs and inputs[0] is self:
            # np.exp(x): what the general path below ends in, without its steps
            prim, trace = FAST_UFUNCS.get(ufunc), self._trace
            if prim is not None and prim.batch is elementwise and trace.open and trace.size:
                return Batched(prim._call1(self._value), trace)
        if _var_on_top(inputs, kwargs):
            return dispatch_ufunc(ufunc, method, inputs, kwargs)
        if kwargs.get("out") is not None:
            err = TypeError(f"tapestry.vmap: np.{ufunc.__name__}(..., out=...) with a batched "
                            "value: the result has one value per item, which neither a plain "
                            "array (one value) nor a batched one (it cannot change in place) "
                            "can take. Drop out= and use the result (for a += b, write "
                            "a = a + b).")
            outs = kwargs["out"] if isinstance(kwargs["out"], tuple) else (kwargs["out"],)
            if all(o is None or o.__class__ is np.ndarray for o in outs):
                raise item_by_item(err, inputs)  # into plain arrays: each item its own
            raise err
        if method == "__call__":
            prim = UFUNCS.get(ufunc)
            if prim is None and ufunc not in NONDIFF:
                run_loaders()
                prim = UFUNCS.get(ufunc)
            if prim is not None:
                if kwargs:  # dtype= applied, axes= / keepdims= refused: never dropped
                    inputs, kwargs = ufunc_call_keywords(ufunc, inputs, kwargs)
                if _is_primitive(prim):
                    return prim(*inputs, **kwargs)  # Primitive._call* find the batch
                return _entry(ufunc, prim, inputs, kwargs)
            return batched_call(_Plain(ufunc), inputs, kwargs)
        plain = _Plain(getattr(ufunc, method), f"{ufunc.__name__}.{method}")
        impl = FUNCTIONS.get("ufunc." + method)
        if impl is not None and ufunc not in NONDIFF and UFUNCS.get(ufunc) is not None:
            return _entry((ufunc, method), lambda *a, **k: impl(ufunc, a, k), inputs, kwargs,
                          plain)
        return batched_call(plain, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        out = self._array_function(func, args, kwargs)
        if func in VIEW_FUNCTIONS and args:
            return mark_function_views(out, func, args, kwargs, _view_function)
        if func is np.einsum:
            return mark_einsum_view(out, args, kwargs, _view_function)
        return out

    def _array_function(self, func, args, kwargs):
        if not kwargs and len(args) == 1 and args[0] is self:
            # np.sum(x) of one batched value: its batching rule at once (the
            # entry point's argument handling and dispatch, ~10 us, skipped)
            direct = DIRECT.get(func)
            trace = self._trace
            if direct is not None and trace.open and trace.size:
                return Batched(direct(self._value), trace)
        if _var_on_top(args, kwargs):
            return dispatch_function(func, args, kwargs)
        if func in _WRITES_FIRST:
            return _write_into(func, args, kwargs)
        query = _QUERIES.get(func) or _REDUCTIONS.get(func)
        if query is not None:
            return query(func, args, kwargs)
        impl = FUNCTIONS.get(func)
        if impl is not None and not _is_primitive(impl):
            return _entry(func, impl, args, kwargs)
        if impl is not None:
            return impl(*args, **kwargs)
        # A constant function, or one without a rule: item by item.
        return batched_call(_Plain(func), args, kwargs)

    # --- operators ------------------------------------------------------------
    def __add__(self, o): return _binary(np.add, self, o)
    def __radd__(self, o): return _binary(np.add, o, self)
    def __sub__(self, o): return _binary(np.subtract, self, o)
    def __rsub__(self, o): return _binary(np.subtract, o, self)
    def __mul__(self, o): return _binary(np.multiply, self, o)
    def __rmul__(self, o): return _binary(np.multiply, o, self)
    def __truediv__(self, o): return _binary(np.true_divide, self, o)
    def __rtruediv__(self, o): return _binary(np.true_divide, o, self)
    def __pow__(self, o):
        v = self._value
        if v.__class__ is np.ndarray and v.dtype.kind == "b" and v.ndim > 1 and \
                o.__class__ in _SCALARS and self._trace.open:
            # an array item's bool ** 2 is np.square's int8 (a 0-d item's, a
            # NumPy bool's, np.power's int64)
            return Batched(v ** o, self._trace)
        return _binary(np.power, self, o)
    def __rpow__(self, o): return _binary(np.power, o, self)
    def __matmul__(self, o): return FAST_UFUNCS[np.matmul](self, o)
    def __rmatmul__(self, o): return FAST_UFUNCS[np.matmul](o, self)
    def __neg__(self): return FAST_UFUNCS[np.negative](self)
    def __pos__(self): return self
    def __abs__(self): return FAST_UFUNCS[np.absolute](self)
    # NumPy's bitwise ufuncs, as ndarray's operators: on booleans they are
    # the logical ones, and a boolean with an integer gives an integer
    def __and__(self, o): return np.bitwise_and(self, o)
    def __rand__(self, o): return np.bitwise_and(o, self)
    def __or__(self, o): return np.bitwise_or(self, o)
    def __ror__(self, o): return np.bitwise_or(o, self)
    def __xor__(self, o): return np.bitwise_xor(self, o)
    def __rxor__(self, o): return np.bitwise_xor(o, self)
    def __lshift__(self, o): return np.left_shift(self, o)
    def __rlshift__(self, o): return np.left_shift(o, self)
    def __rshift__(self, o): return np.right_shift(self, o)
    def __rrshift__(self, o): return np.right_shift(o, self)
    def __invert__(self): return np.invert(self)

    # As for traced arrays, augmented assignment rebinds, keeps an array's
    # shape and dtype, and updates its live views; into a view of a live
    # batched array it writes through into that array (var.in_place).
    __iadd__ = lambda self, o: in_place(self, self.__add__(o), "+=")  # noqa: E731
    __isub__ = lambda self, o: in_place(self, self.__sub__(o), "-=")  # noqa: E731
    __imul__ = lambda self, o: in_place(self, self.__mul__(o), "*=")  # noqa: E731
    __itruediv__ = lambda self, o: in_place(self, self.__truediv__(o), "/=")  # noqa: E731
    __ipow__ = lambda self, o: in_place(self, self.__pow__(o), "**=")  # noqa: E731
    __imatmul__ = lambda self, o: in_place(self, self.__matmul__(o), "@=")  # noqa: E731
    # (without these Python ran ``y = y // v``: the views kept the old values)
    __ifloordiv__ = lambda self, o: in_place(  # noqa: E731
        self, ArrayMethods.__floordiv__(self, o), "//=")
    __imod__ = lambda self, o: in_place(self, ArrayMethods.__mod__(self, o), "%=")  # noqa: E731
    __iand__ = lambda self, o: in_place(self, self.__and__(o), "&=")  # noqa: E731
    __ior__ = lambda self, o: in_place(self, self.__or__(o), "|=")  # noqa: E731
    __ixor__ = lambda self, o: in_place(self, self.__xor__(o), "^=")  # noqa: E731
    __ilshift__ = lambda self, o: in_place(self, self.__lshift__(o), "<<=")  # noqa: E731
    __irshift__ = lambda self, o: in_place(self, self.__rshift__(o), ">>=")  # noqa: E731

    def __getitem__(self, key):
        return mark_item_view(FUNCTIONS[operator.getitem](self, key), self, key, _getitem)

    def astype(self, dtype, *a, **k):
        dtype = np.dtype(dtype)
        if dtype.kind in "fc":
            return FUNCTIONS["astype"](self, dtype)
        return Batched(self._value.astype(dtype), self._trace)

    def copy(self, order="K"):
        """An object of its own on the same values (``order``, a memory
        layout, changes no value): no view of anything and no other name of
        ``self``, so an update of ``self`` leaves the copy and its views
        alone, and ``v = y[0].copy(); v += 1`` rebinds, as NumPy's copy is
        updated."""
        from .var import copy_of_0d
        return copy_of_0d(self, Batched(self._value, self._trace))

    def reshape(self, *shape, **k):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray)):
            shape = shape[0]
        return mark_view(_reshape(self, shape, k), self, _reshape, (shape, k))




def _conversion_of(x, err):
    """``err`` marked as NumPy converting the batched ``x`` (``np.asarray``,
    a plain array indexed with it, ``np.array([a, b])``): the ``vmap`` that
    made ``x`` then runs its function once per item instead
    (:func:`~tapestry.core.api_vmap.vmap`), which NumPy's own code can do."""
    err.batch_trace = x._trace
    return refusing(x._trace, err)


#: NumPy functions that write into their first argument.
_WRITES_FIRST = frozenset({np.put, np.putmask, np.place, np.put_along_axis, np.fill_diagonal})


def _write_into(func, args, kwargs):
    """``np.put(x, i, v)`` and its kin, with a batched value among the
    arguments: into a batched ``x``, item assignment at NumPy's positions
    (ops/indexing.py); into a plain ``x``, the mapped function runs once per
    item (one plain array cannot take every item's write at once)."""
    target = args[0] if args else kwargs.get("a", kwargs.get("arr"))
    name = f"np.{func.__name__}"
    if target.__class__ is Batched:  # item assignment at NumPy's positions (ops/indexing.py)
        return FUNCTIONS[func](*args, **kwargs)
    raise item_by_item(TypeError(f"tapestry.vmap: {name} writes a per-item value or "
                                 "position into a plain array"), (args, kwargs))


def item_by_item(err, args):
    """``err`` (a refusal of NumPy writing a batched value into a plain
    array: ``np.full(shape, x)``, ``np.add.at(out, i, x)``) as a
    :class:`BatchedConversionError` that makes the ``vmap`` of the
    highest-level batched value among ``args`` run its function once per
    item, where the write is NumPy's own; unchanged where a value being
    differentiated is on top (the write is refused then, as without vmap)."""
    trace = top_batch(args)
    if trace is None:
        return err
    out = PerItemWrite(str(err))
    out.batch_trace = trace
    return refusing(trace, out)


class PerItemWrite(TypeError):
    """NumPy would write a batched value into a plain array (see
    :func:`item_by_item`).  Not a :class:`BatchedConversionError`: running
    only the one operation per item (what :func:`_entry` does for a
    conversion) would write every item into the same array."""


def _is_primitive(impl):
    """A :class:`~tapestry.core.primitive.Primitive` (which finds batched
    arguments itself), as opposed to an entry point function."""
    return hasattr(impl, "_rule_sets")


_ACTIVE = threading.local()


def _entry(func, impl, args, kwargs, plain=None):
    """Run a rule's entry point (NumPy's arguments in, primitives called)
    on batched arguments.  Two cases loop over the batch instead: an entry
    point that hands the batched value back to NumPy's own function (it
    treats what it does not know as a constant; NumPy would dispatch the
    same call here again), and one that reads the value in Python (a
    conversion, a branch) -- each item then runs it on its own values."""
    trace = top_batch(args, kwargs)
    key = (func, trace)
    active = getattr(_ACTIVE, "calls", None)
    if active is None:
        active = _ACTIVE.calls = set()
    plain = plain or _Plain(func)
    if key in active or (func in _FLOAT_ENTRIES and _integer_items(args, kwargs)):
        return batched_call(plain, args, kwargs, trace)
    active.add(key)
    try:
        return impl(*args, **kwargs)
    except BatchedConversionError as e:
        handled(e)
        return batched_call(plain, args, kwargs, trace)
    except NotImplementedError:
        # tapestry cannot differentiate this call (np.quantile(method="nearest"),
        # np.var(where=...)): with nothing differentiated among the arguments,
        # NumPy's own function on each item is the answer, as it is without vmap
        if _differentiated((args, kwargs)):
            raise
        return batched_call(plain, args, kwargs, trace)
    finally:
        active.discard(key)


#: NumPy functions whose entry point is written for float values: on an
#: integer or bool item its arithmetic differs from NumPy's (np.median of
#: ints is a float mean of the middle two; np.gradient of uint8 leaves the
#: type to avoid wrapping; np.nansum of ints stays an int; np.convolve of
#: bools is a bool).  With nothing differentiated, such an item runs
#: NumPy's own function (see :func:`_entry`).
_FLOAT_ENTRIES = frozenset(f for f in (
    np.median, np.percentile, np.quantile, np.nanmedian, np.nanpercentile, np.nanquantile,
    np.nansum, np.nanprod, np.nancumsum, np.nancumprod, np.gradient, np.convolve,
    np.correlate, np.polyval, np.polymul, np.select, np.diff, np.linalg.norm, np.linspace,
    np.logspace))


def _integer_items(args, kwargs):
    """Whether a batched value among the arguments holds integers or bools
    and none is being differentiated."""
    found = []

    def walk(x):
        c = x.__class__
        if c is Var:
            return False
        if c is Batched:
            v = x._value
            while v.__class__ is Batched:
                v = v._value
            if v.__class__ is Var:
                return False
            found.append(np.result_type(v).kind in "biu")
            return True
        if c in (list, tuple):
            return all(walk(v) for v in x)
        if c is dict:
            return all(walk(v) for v in x.values())
        return True

    return walk(args) and walk(kwargs) and any(found)


def _differentiated(x):
    """Whether ``x`` (arguments, containers, batched values) holds a value
    being differentiated (a ``Var``, possibly inside batched values)."""
    c = x.__class__
    if c is Var:
        return True
    if c is Batched or c is Unbatched:
        return _differentiated(x._value)
    if c in (list, tuple):
        return any(_differentiated(v) for v in x)
    if c is dict:
        return any(_differentiated(v) for v in x.values())
    return False


_SCALARS = (float, int, np.float64, np.float32)

#: NumPy function -> ``fn(value)``: the batched result's value of ``func(x)``
#: for one batched ``x`` and no other argument, where ``fn`` is exactly what
#: the function's entry point and batching rule would compute (``np.sum``;
#: filled by the rule modules).  Such a call skips the general dispatch.
DIRECT: dict = {}


def _binary(ufunc, a, b):
    """An arithmetic operator on a batched value: with a Python scalar, or
    with a value of the same batch, the arrays broadcast as the items do
    once the item with fewer axes gets 1-axes after its batch axis (what
    the elementwise batching rule does), so the primitive runs on them
    directly (the general path costs ~5 us more per operation)."""
    prim = FAST_UFUNCS[ufunc]
    ca, cb = a.__class__, b.__class__
    if ca is Batched:
        trace = a._trace
        if trace.open:
            if cb in _SCALARS:
                return Batched(prim._call2(a._value, b), trace)
            if cb is Batched and b._trace is trace:
                x, y = a._value, b._value
                nx, ny = x.ndim, y.ndim
                if nx == ny:
                    return Batched(prim._call2(x, y), trace)
                if trace.size and prim.batch is elementwise:
                    if nx < ny:
                        x = expand_item(x, ny - 1)
                    else:
                        y = expand_item(y, nx - 1)
                    return Batched(prim._call2(x, y), trace)
    elif cb is Batched and ca in _SCALARS and b._trace.open:
        return Batched(prim._call2(a, b._value), b._trace)
    return prim(a, b)


class _Plain:
    """A NumPy callable without a rule (a constant function, a ufunc method)
    in the place of a primitive: it has no batching rule, so it loops."""

    __slots__ = ("fun", "name", "n_outputs")
    batch = None

    def __init__(self, fun, name=None):
        self.fun = fun
        self.name = name or getattr(fun, "__name__", repr(fun))
        self.n_outputs = None

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)


# --- finding the level that handles a call -------------------------------------------
def _top(x, best):
    """``best`` (``(level, value)`` or None) updated with the traced or
    batched values in ``x`` (looking inside lists, tuples and dicts)."""
    c = x.__class__
    if c is Batched:
        level = x._trace.level
    elif c is Var:
        level = x._tape.level
    elif c is list or c is tuple:
        for v in x:
            best = _top(v, best)
        return best
    elif c is dict:
        for v in x.values():
            best = _top(v, best)
        return best
    else:
        return best
    return (level, x) if best is None or level > best[0] else best


def top_batch(args, kwargs=None):
    """The :class:`BatchTrace` that must handle a call on ``args``: the
    highest-level batched argument's, unless a traced array (``Var``) has a
    higher level still (``None`` then, and when nothing is batched)."""
    best = _top(args, None)
    if kwargs:
        best = _top(kwargs, best)
    if best is None or best[1].__class__ is not Batched:
        return None
    return best[1]._trace


def _var_on_top(args, kwargs):
    best = _top(kwargs, _top(args, None)) if kwargs else _top(args, None)
    return best is not None and best[1].__class__ is Var


# --- one operation on batched arguments -------------------------------------------------
def batched_call(prim, args, kwargs, trace=None):
    """``prim(*args, **kwargs)`` where some arguments are batched at the
    highest level: its batching rule, or a loop over the batch."""
    trace = trace or top_batch(args, kwargs)
    if not trace.open:
        raise EscapedBatchError(
            f"tapestry.vmap: a batched value reached {prim.name} after the vmap call that "
            "made it had returned (it escaped through a global, a closure or an "
            "attribute). Return it from the mapped function instead.")
    if trace.size == 0:
        try:
            return _batched_call(prim, args, kwargs, trace)
        except Exception as e:  # noqa: BLE001 (re-raised if one item fails too)
            return _empty_from_one_item(prim, args, kwargs, trace, e)
    return _batched_call(prim, args, kwargs, trace)


def _batched_call(prim, args, kwargs, trace):
    raw, flags, nested = [], [], False
    for a in args:
        if a.__class__ is Batched and a._trace is trace:
            raw.append(a._value)
            flags.append(True)
        else:
            if a.__class__ in (list, tuple, dict) and _holds(a, trace):
                nested = True
            raw.append(a)
            flags.append(False)
    rule = prim.batch
    if rule is elementwise and not kwargs and not nested and _aligned(raw, flags):
        out = prim(*raw)  # items already align from the right
        # (a ufunc of several outputs, scipy.special.fresnel's (S, C): one
        # batched value per output, not a Batched holding the tuple)
        return Batched(out, trace) if out.__class__ is not tuple else _wrap(out, trace, prim)
    if nested and getattr(rule, "takes_batched_keys", False):
        nested = False  # the rule finds batched values inside its key itself
        flags = [f or _holds(a, trace) for f, a in zip(flags, args)]
    if rule is not None and not nested and not _holds(kwargs, trace):
        try:
            out = rule(prim, raw, flags, kwargs)
        except PerItemParameter:  # an axis (a parameter) that differs per item
            out = NotImplemented
        if out is not NotImplemented:
            return _wrap(out, trace, prim)
    if isinstance(prim, _Plain) and prim.batch is None:
        if getattr(prim.fun, "signature", 0) is None and not nested \
                and not _holds(kwargs, trace) and kwargs.get("where") is None:
            # an elementwise ufunc without a rule (a comparison, floor) broadcasts
            return _wrap(elementwise(prim.fun, raw, flags, kwargs), trace, prim)
    return _loop(prim, args, kwargs, trace)


def _empty_from_one_item(prim, args, kwargs, trace, error):
    """An operation on an empty batch that cannot run on the empty arrays (a
    rule's reshape to ``(0, -1)``, a loop with no item to learn the result's
    shape from): run on one item of zeros, keep none of it -- the result's
    item shape and dtype, as a loop's results would have.  If one item
    fails too, the first error is raised."""
    one = BatchTrace(trace.level, 1)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", VmapFallbackWarning)
            out = batched_call(prim, _swap_trace(args, trace, one),
                               _swap_trace(kwargs, trace, one), one)
    except Exception:  # noqa: BLE001
        raise error from None
    return _emptied(out, one, trace)


def _swap_trace(x, trace, one):
    """``x`` with each value batched by ``trace`` replaced by one item of zeros batched by ``one``."""
    c = x.__class__
    if c is Batched and x._trace is trace:
        return Batched(np.zeros((1,) + x.shape, x.dtype), one)
    if c in (list, tuple):
        return c(_swap_trace(v, trace, one) for v in x)
    if c is dict:
        return {k: _swap_trace(v, trace, one) for k, v in x.items()}
    return x


def _emptied(out, one, trace):
    c = out.__class__
    if c is Batched and out._trace is one:
        return Batched(out._value[:0], trace)
    if c in (list, tuple):
        return c(_emptied(v, one, trace) for v in out)
    return out


def _aligned(raw, flags):
    """Whether broadcasting the arrays as they are is broadcasting the items:
    every batched item has the most axes (no unbatched argument has more)."""
    nd = -1
    for a, b in zip(raw, flags):
        if b:
            k = len(a.shape) - 1
            if nd not in (-1, k):
                return False
            nd = k
    for a, b in zip(raw, flags):
        if not b and a.__class__ not in _SCALARS:
            shape = getattr(a, "shape", None)
            if (np.ndim(a) if shape is None else len(shape)) > nd:  # lists: np.ndim
                return False
    return True


def batched_above(key, level):
    """Whether the tuple ``key`` holds a batched value of a level above
    ``level`` (an index array batched by a vmap inside that tape's trace)."""
    for k in key:
        if k.__class__ is Batched and k._trace.level > level:
            return True
    return False


def rule_per_item(rule, g, ans, args, kwargs):
    """A differentiation rule that read a batched value in Python (a branch
    on NaNs, a conversion), run once per item of the highest batch among
    its inputs, results stacked: rules need not be written for vmap."""
    kwargs = kwargs or {}  # a tape node without keyword arguments stores None
    trace = top_batch((g, ans, args), kwargs)
    if trace is None:
        raise
    per = [rule(*_item((g, ans) + tuple(args), i, trace), **_item(kwargs, i, trace))
           for i in range(trace.size)]
    name = getattr(rule, "__qualname__", "a rule")
    return _combine(per, trace, f"the rule {name}")


def _holds(x, trace):
    """Whether ``x`` (an argument, a container, kwargs) holds a value batched by ``trace``."""
    c = x.__class__
    if c is Batched:
        return x._trace is trace
    if c in (list, tuple):
        return any(_holds(v, trace) for v in x)
    if c is dict:
        return any(_holds(v, trace) for v in x.values())
    return False


def _item(x, i, trace):
    c = x.__class__
    if c is Batched and x._trace is trace:
        return x._value[i]
    if c in (list, tuple):
        return c(_item(v, i, trace) for v in x)
    if c is dict:
        return {k: _item(v, i, trace) for k, v in x.items()}
    return x


def _loop(prim, args, kwargs, trace):
    """The fallback: ``prim`` on each item, results stacked."""
    name = prim.name
    FALLBACKS[name] += 1
    if name not in _WARNED and not isinstance(prim, _Plain):
        _WARNED.add(name)
        warnings.warn(f"tapestry.vmap: {name} has no batching rule for these arguments; "
                      "it runs once per item (correct, slower). "
                      "tapestry.core.batched.FALLBACKS counts such calls.",
                      VmapFallbackWarning, stacklevel=4)
    if trace.size == 0:
        return _empty_result(prim, args, kwargs, trace)
    outs = [prim(*_item(args, i, trace), **_item(kwargs, i, trace)) for i in range(trace.size)]
    return _combine(outs, trace, name)


def _empty_result(prim, args, kwargs, trace):
    """The result of ``prim`` for a batch of no items: its shape and dtype
    from one made-up item (zeros, else ones), as JAX takes them from the
    abstract one; refused, naming the operation, when neither runs."""
    def probe(x, fill):
        c = x.__class__
        if c is Batched and x._trace is trace:
            return np.full(x.shape, fill, x.dtype)
        if c in (list, tuple):
            return c(probe(v, fill) for v in x)
        if c is dict:
            return {k: probe(v, fill) for k, v in x.items()}
        return x

    def empty(y):
        if isinstance(y, (tuple, list)):
            return type(y)(empty(v) for v in y)
        if isinstance(y, (np.ndarray, np.generic, Var, Batched)):
            return Batched(np.empty((0,) + tuple(np.shape(y)), y.dtype), trace)
        return y
    for fill in (0, 1):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return empty(prim(*probe(args, fill), **probe(kwargs, fill)))
        except Exception:  # noqa: BLE001 (the made-up item is not a valid input: next)
            continue
    raise ValueError(f"tapestry.vmap: {prim.name} has no batching rule and the batch is "
                     "empty, so the shape of its result is unknown.")


def _combine(results, trace, name):
    """Per-item results as one batched value; Python objects (a shape, a
    dtype, a flag) must agree across items and are returned as they are."""
    first = results[0]
    if hasattr(first, "todense") and all(hasattr(r, "todense") for r in results):
        # sparse cotangents (a gather's rule run per item): their positions
        # differ between items, so the batch is dense
        results = [r.todense() for r in results]
        first = results[0]
    if isinstance(first, (tuple, list)) and all(type(r) is type(first) and len(r) == len(first)
                                                for r in results):
        parts = [_combine([r[k] for r in results], trace, name) for k in range(len(first))]
        return type(first)(*parts) if hasattr(first, "_fields") else type(first)(parts)
    if isinstance(first, (np.ndarray, np.generic, Var, Batched)):
        shapes = {tuple(np.shape(r)) for r in results}
        if len(shapes) > 1:
            raise ValueError(f"tapestry.vmap: {name} gives results of different shapes for "
                             f"different items ({sorted(shapes)[:3]}...); a batch needs one "
                             "shape. A boolean mask (x[mask]) or np.nonzero selects a "
                             "different number of elements per item: keep the shape with "
                             "np.where(mask, x, 0) (and a masked sum, np.sum(x, where=mask)). "
                             "Otherwise pad to a fixed size, or loop over the items outside "
                             "vmap.")
        return Batched(np.stack(results), trace)
    if any(not _same(r, first) for r in results[1:]):
        if all(r.__class__ in _NUMBERS for r in results):
            # a number per item (np.array_equal, np.allclose): a batched array,
            # which Python code then cannot branch on without the usual error
            return Batched(np.array(results), trace)
        raise TypeError(f"tapestry.vmap: {name} returns {type(first).__name__} values that "
                        "differ between items (a Python value cannot be batched). "
                        + _HELP_CONTROL)
    return first


_NUMBERS = (bool, int, float, complex)


def _same(a, b):
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (an object without a truth value is not a shared one)
        return False


def _wrap(out, trace, prim):
    if isinstance(out, tuple):
        return tuple(_wrap(o, trace, prim) for o in out)
    n = np.shape(out)[:1] if not isinstance(out, (Var, Batched)) else out.shape[:1]
    if n != (trace.size,):
        raise AssertionError(f"tapestry.vmap: the batching rule of {prim.name} returned a "
                             f"result of shape {np.shape(out)} for a batch of {trace.size} "
                             "(a bug in the rule; please report it).")
    return Batched(out, trace)


class VmapFallbackWarning(UserWarning):
    """An operation ran once per item under ``tapestry.vmap``."""


# --- shape and dtype queries: answered for one item -------------------------------------
def _probe(x):
    if x.__class__ is Batched:
        return np.broadcast_to(np.zeros((), x.dtype), x.shape)
    if x.__class__ in (list, tuple):
        return x.__class__(_probe(v) for v in x)
    return x


def _query(func, args, kwargs):
    return func(*[_probe(a) for a in args], **{k: _probe(v) for k, v in kwargs.items()})


def _axis_reduction(func, args, kwargs):
    """A constant reduction (``np.any``, ``np.argmax``, ...) of one batched
    array: its ``axis`` shifted past the batch axis, one call.  Without an
    axis it reduces the whole item (``argmax``: the flat index in it)."""
    a, rest = args[0], args[1:]
    if a.__class__ is not Batched or rest or set(kwargs) - {"axis", "keepdims", "kind", "stable"} \
            or _holds(kwargs, a._trace) or top_batch(args, kwargs) is not a._trace:
        return batched_call(_Plain(func), args, kwargs)
    v, nd = a._value, a.ndim
    axis = kwargs.get("axis", -1 if func is np.argsort else None)
    kw = dict(kwargs)
    if axis is None:
        if func in (np.argmax, np.argmin, np.argsort):
            if kw.pop("keepdims", False):  # a flat index kept in the item's shape
                return batched_call(_Plain(func), args, kwargs)
            v = flat_items(v)  # (n, item size): an empty batch has no -1 to infer
            kw["axis"] = 1
        else:
            kw["axis"] = tuple(range(1, nd + 1))
    else:
        kw["axis"] = shift_axes(axis, nd)
    return Batched(func(v, **kw), a._trace)


def _like(func, args, kwargs):
    """``np.zeros_like`` and its kin on one batched array: the batch of
    constants is one call (``shape=`` or a batched fill value: item by item)."""
    a = args[0]
    fill = args[1:2] if func is np.full_like else ()
    rest = args[1 + len(fill):]
    if a.__class__ is not Batched or top_batch(args, kwargs) is not a._trace or rest \
            or kwargs.get("shape") is not None or _holds(list(fill) + list(kwargs.values()), a._trace):
        return batched_call(_Plain(func), args, kwargs)
    return Batched(func(a._value, *fill, **kwargs), a._trace)


def _lookup(func, args, kwargs):
    """``np.searchsorted(a, v)`` / ``np.digitize(v, bins)`` with only the
    values ``v`` batched: elementwise in them, one call on the batch."""
    table, v = (args[0], args[1]) if func is np.searchsorted else (args[1], args[0])
    if v.__class__ is not Batched or len(args) != 2 or top_batch(args, kwargs) is not v._trace \
            or _holds((table, kwargs), v._trace):
        return batched_call(_Plain(func), args, kwargs)
    table = _plain(table)
    out = func(table, v._value, **kwargs) if func is np.searchsorted else \
        func(v._value, table, **kwargs)
    return Batched(out, v._trace)


_REDUCTIONS = {f: _axis_reduction for f in (np.any, np.all, np.argmax, np.argmin,
                                            np.argsort, np.count_nonzero)}

_QUERIES = {f: _like for f in (np.zeros_like, np.ones_like, np.empty_like, np.full_like)}
_QUERIES.update({np.searchsorted: _lookup, np.digitize: _lookup})
_QUERIES.update({f: _query for f in (np.shape, np.ndim, np.size, np.result_type,
                                np.iscomplexobj, np.isrealobj, np.min_scalar_type)
                 if f is not None})


def constant_values(x, dtype=None):
    """``x`` with its differentiation levels stripped, as an array to compute
    masks, indices or positions from: a plain ndarray, or -- where a vmap
    runs outside the differentiation (``vmap(grad(f))``) -- a batched one,
    each item its own constant (``np.asarray`` on it would raise); or,
    inside ``jit``, a staged one (``np.asarray`` would pin its value: a
    re-trace for every new value)."""
    v = unwrap_all(x)
    if v.__class__ is Batched or v.__class__ is Staged:
        return v if dtype is None or v.dtype == dtype else v.astype(dtype)
    return np.asarray(v, dtype=dtype)


def all_items(x):
    """Every value of ``x``, of every item of every batch, as one plain
    array: for checks that raise if any item would (``np.any(w == 0)``)."""
    while x.__class__ in (Var, Batched):
        x = x._value
    return np.asarray(x)


# --- arrays shared by every item (in_axes=None) ------------------------------------------
def _plain(x):
    """``x`` with every :class:`Unbatched` proxy replaced by its array."""
    return values_of(x, Unbatched)


def _binary_plain(op):
    return (lambda self, o: op(self._value, _plain(o)),
            lambda self, o: op(_plain(o), self._value))


class Unbatched(ArrayMethods, np.ndarray):
    """A plain NumPy array handed to a vmapped function unbatched
    (``in_axes=None``).  NumPy indexes plain arrays itself, so ``W[i]`` with
    a per-item index ``i`` would never reach tapestry; through this proxy it
    does (one gather for the batch).  Everything else unwraps the array at
    once: NumPy calls, operators, conversions and Python reads all see the
    caller's own array, and their results are plain arrays.

    A view of that array of an ndarray subclass, so that the function's own
    ``isinstance(w, np.ndarray)`` holds, as in a loop (and in ``jax.vmap``,
    which hands a NumPy array with ``in_axes=None`` over as it is): a branch
    on it takes the loop's path.  ``type(w)`` is this class."""

    __array_priority__ = 50.0

    def __new__(cls, value):
        self = value.view(cls)
        self._value = value  # the caller's array itself: outputs hand it back
        return self

    def __array_finalize__(self, obj):
        # a view NumPy makes of the proxy (np.ndarray's own methods, copies):
        # a proxy of that view's plain array, whose writes are its root's
        self._value = self.view(np.ndarray)
        self._saved = None
        self._owner = obj._owner if isinstance(obj, Unbatched) else self

    def _before_write(self):
        """Keeps the caller's array as it was before ``f`` first wrote into
        it, so that a vmap that then runs ``f`` once per item (a loop's
        results) first puts it back: each write then happens once per item,
        as in a loop, not once more for the whole batch's first run."""
        root = self._owner
        if root._saved is None:
            root._saved = root._value.copy()

    def _restore(self):
        """The caller's array put back as it was before ``f`` wrote into it."""
        if self._saved is not None:
            np.copyto(self._value, self._saved)
            self._saved = None

    def fill(self, value):
        self._before_write()
        self._value.fill(_plain(value))

    def sort(self, *a, **k):
        self._before_write()
        self._value.sort(*a, **k)

    def partition(self, *a, **k):
        self._before_write()
        self._value.partition(*a, **k)

    def put(self, *a, **k):
        self._before_write()
        self._value.put(*_plain(a), **_plain(k))

    @property
    def flat(self):
        self._before_write()  # (its writes reach the caller's array unseen)
        return self._value.flat

    def __reduce__(self):
        """Pickled (sent to a worker process) as the plain array it stands for."""
        return self._value.__reduce__()

    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)
    flags = property(lambda self: self._value.flags)
    base = property(lambda self: self._value.base)  # the caller's array's, not the view's

    def __len__(self):
        return len(self._value)

    def __repr__(self):
        return repr(self._value)

    def __array__(self, dtype=None, copy=None):
        return self._value if dtype is None else self._value.astype(dtype)

    def __bool__(self):
        return bool(self._value)

    def __float__(self):
        return float(self._value)

    def __int__(self):
        return int(self._value)

    def __index__(self):
        return self._value.__index__()

    def __complex__(self):
        return complex(self._value)

    def __format__(self, spec):
        return format(self._value, spec)

    def item(self, *a):
        return self._value.item(*a)

    def tolist(self):
        return self._value.tolist()

    def astype(self, dtype, *a, **k):
        return self._value.astype(dtype, *a, **k)

    def copy(self, order="C"):
        return self._value.copy(order)

    def reshape(self, *shape, **k):
        return self._value.reshape(*shape, **k)

    def __getitem__(self, key):
        if _holds_batched(key):
            return FUNCTIONS[operator.getitem](self._value, _plain(key))
        return self._value[_plain(key)]

    def __setitem__(self, key, value):
        """Writes into the caller's array, as a loop over the items would;
        a per-item value or position is refused: the array is one for the
        whole batch, it cannot hold one value per item."""
        if _holds_any_batched(key) or _holds_any_batched(value):
            raise TypeError(
                "tapestry.vmap: writing into an array passed with in_axes=None (one array "
                "shared by every item) at a per-item position or with a per-item value "
                "(w[i] = x): it cannot hold one value per item. Build a new array instead: "
                "np.where(np.arange(len(w)) == i, x, w), or w + np.pad(...).")
        self._before_write()
        self._value[_plain(key)] = value

    def __getattr__(self, name):
        """Every other ndarray attribute (``view``, ``flat``, ``nbytes``,
        ``strides``, ...) is the caller's array's own."""
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._value, name)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        for o in kwargs.get("out", None) or ():
            if isinstance(o, Unbatched):
                o._before_write()
        if method == "at" and inputs and isinstance(inputs[0], Unbatched):
            inputs[0]._before_write()
        return getattr(ufunc, method)(*_plain(inputs), **_plain(kwargs))

    def __array_function__(self, func, types, args, kwargs):
        if func in _WRITERS and args and isinstance(args[0], Unbatched):
            args[0]._before_write()
        args, kwargs = _plain(args), _plain(kwargs)
        top = _top(kwargs, _top(args, None))
        if top is not None:
            # straight to the traced or batched value's dispatch: NumPy would
            # not hand it the call where its dispatcher skips that argument
            # (np.take(W, i) with a per-item index i)
            return top[1].__array_function__(func, (type(top[1]),), args, kwargs)
        return func(*args, **kwargs)

    __add__, __radd__ = _binary_plain(operator.add)
    __sub__, __rsub__ = _binary_plain(operator.sub)
    __mul__, __rmul__ = _binary_plain(operator.mul)
    __truediv__, __rtruediv__ = _binary_plain(operator.truediv)
    __pow__, __rpow__ = _binary_plain(operator.pow)
    __matmul__, __rmatmul__ = _binary_plain(operator.matmul)
    __and__, __rand__ = _binary_plain(operator.and_)
    __or__, __ror__ = _binary_plain(operator.or_)
    __xor__, __rxor__ = _binary_plain(operator.xor)
    __lshift__, __rlshift__ = _binary_plain(operator.lshift)
    __rshift__, __rrshift__ = _binary_plain(operator.rshift)
    __invert__ = lambda self: ~self._value  # noqa: E731
    __neg__ = lambda self: -self._value  # noqa: E731
    __pos__ = lambda self: +self._value  # noqa: E731
    __abs__ = lambda self: abs(self._value)  # noqa: E731
    __hash__ = None

    # ``w += x`` binds a new array, as it did before the proxy was an ndarray
    # (and as for JAX arrays): NumPy's in-place operator would write a
    # per-item ``x`` into the caller's array, which ``w[i] = x`` refuses
    __iadd__, __isub__, __imul__ = __add__, __sub__, __mul__
    __itruediv__, __ipow__, __imatmul__ = __truediv__, __pow__, __matmul__
    __iand__, __ior__, __ixor__ = __and__, __or__, __xor__
    __ilshift__, __irshift__ = __lshift__, __rshift__
    __ifloordiv__ = lambda self, o: np.floor_divide(self._value, _plain(o))  # noqa: E731
    __imod__ = lambda self, o: np.remainder(self._value, _plain(o))  # noqa: E731


#: NumPy functions that write into their first argument.
_WRITERS = frozenset((np.copyto, np.put, np.place, np.putmask, np.put_along_axis,
                      np.fill_diagonal))


def _a_batched(x):
    """A batched value (of any vmap) in ``x`` (looking inside lists, tuples
    and dicts), or None."""
    c = x.__class__
    if c is Batched:
        return x
    for v in (x if c in (list, tuple) else x.values() if c is dict else ()):
        b = _a_batched(v)
        if b is not None:
            return b
    return None


def _holds_any_batched(x):
    """Whether ``x`` is or holds (in lists, tuples, dicts) a batched value of any vmap."""
    c = x.__class__
    if c is Batched:
        return True
    if c in (list, tuple):
        return any(_holds_any_batched(v) for v in x)
    if c is dict:
        return any(_holds_any_batched(v) for v in x.values())
    return False


def _holds_batched(key):
    if key.__class__ is Batched:
        return True
    return key.__class__ is tuple and any(k.__class__ is Batched for k in key)


#: The classes whose values stand for arrays being transformed (traced for
#: differentiation, or batched): rule code that must not hand such a value
#: to NumPy as a constant tests ``x.__class__ in TRACED``.
#: ``Staged`` (inside ``jit``) counts: it too must reach NumPy's dispatch,
#: never ``np.asarray`` (which pins its value: a re-trace for every new
#: value), SciPy, or a write into a plain array.
TRACED = (Var, Batched, Staged)
#: The classes of values an enclosing differentiation or vmap transforms:
#: rule code that picks its *formula* by whether a value is traced (the
#: nested-differentiation path against the plain one) tests
#: ``x.__class__ in NESTED``.  ``Staged`` is left out on purpose: a staged
#: value behaves as a plain ndarray (its NumPy calls are recorded), so under
#: ``jit`` the rule takes the plain call's formula and the replay is bit for
#: bit the plain result.  Use ``TRACED`` where the question is only "may
#: this value be converted or written into a plain array?".
NESTED = (Var, Batched)
HIGHER.update({Batched, Unbatched})
