"""``AxisSparse``: an array that is zero except on some slices along one axis.

A gather ``W[S]`` (or ``W[:, S]``, ``np.take(W, S, axis=a)``) reads only the
slices ``S`` of ``W`` along one axis, so its cotangent is zero elsewhere.
Storing it as ``(axis, indices, values, shape)`` keeps the backward pass and
the optimizer update O(|S|) instead of O(len(W)).

Invariants
----------
* ``values.shape == shape[:axis] + (len(indices),) + shape[axis+1:]``.
* ``indices`` may repeat: the dense meaning is the *sum* of the slices with
  the same index.  :meth:`coalesce` merges them (sorted, deterministic).

It behaves like an array: ``np.asarray(g)``, ``g.todense()``, ``g + h``,
``2 * g``, ``g * dense``, ``g.shape``, ``g.dtype``, ``g.T``, ``g.sum(axis)``.
Operations that keep it sparse are computed on the stored slices only;
every other ndarray method and operator (``g.ravel()``, ``g.tolist()``,
``g > 0``, ``g.max()``, ``float(g)``, iteration) densifies through
:func:`densify`, which is counted by :func:`tapestry.debug.densify_counts`.

When a gradient is returned sparse
----------------------------------
``grad`` returns an ``AxisSparse`` only where it pays (:meth:`AxisSparse.worth_keeping`):
the dense gradient would be large (at least :data:`KEEP_SPARSE_MIN_SIZE`
elements) and the stored slices cover at most :data:`KEEP_SPARSE_MAX_FRACTION`
of the sparse axis (SLIDE, W1, embeddings).  Otherwise -- ``t[0]``, ``t[1]``
of a small vector, a loop ``for row in x`` -- it is densified there, once.
``grad(..., sparse=True)`` always keeps it, ``sparse=False`` never does.
"""
from __future__ import annotations

import numpy as np

from ..core.batched import NESTED
from ..core.staged import Staged, staged_recorder
from ..debug import record_densify
from .ufuncs import array_function, array_ufunc, densify

#: A sparse gradient is returned as such only if its dense form would have
#: at least this many elements (below, a dense array costs microseconds) ...
KEEP_SPARSE_MIN_SIZE = 1 << 15
#: ... and its slices cover at most this fraction of the sparse axis
#: (counting repeats: an upper bound on the distinct slices).
KEEP_SPARSE_MAX_FRACTION = 0.25




class AxisSparse:
    """Slices ``values`` placed at ``indices`` along ``axis`` of a zero array
    of ``shape`` (repeated indices add)."""

    __slots__ = ("axis", "indices", "values", "shape", "coalesced")
    __array_priority__ = 50.0  # below Var (100): a traced operand wins

    def __init__(self, axis, indices, values, shape, coalesced=False):
        shape = tuple(int(n) for n in shape)
        ndim = len(shape)
        if not -ndim <= axis < ndim:
            raise ValueError(f"tapestry.AxisSparse: axis {axis} out of range for "
                             f"shape {shape}.")
        axis = axis % ndim
        indices = _as_array(indices)
        if indices.ndim != 1 or indices.dtype.kind not in "iu":
            raise ValueError("tapestry.AxisSparse: indices must be a 1-D integer "
                             f"array, got shape {indices.shape} dtype {indices.dtype}.")
        values = _as_array(values)
        want = shape[:axis] + (len(indices),) + shape[axis + 1:]
        if values.shape != want:
            raise ValueError(f"tapestry.AxisSparse: values have shape {values.shape}; "
                             f"expected {want} for {len(indices)} indices along axis "
                             f"{axis} of shape {shape}.")
        self.axis = axis
        self.indices = indices
        self.values = values
        self.shape = shape
        self.coalesced = coalesced

    # --- array-like attributes -------------------------------------------
    dtype = property(lambda self: self.values.dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    T = property(lambda self: self.transpose())

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return (f"AxisSparse(axis={self.axis}, nnz_slices={len(self.indices)}, "
                f"shape={self.shape}, dtype={self.dtype})")

    @classmethod
    def _trusted(cls, axis, indices, values, shape, coalesced=False):
        """Construct without validation (internal callers keep the invariants)."""
        self = object.__new__(cls)
        self.axis, self.indices, self.values = axis, indices, values
        self.shape, self.coalesced = shape, coalesced
        return self

    def _with(self, values, indices=None, axis=None, shape=None, coalesced=None):
        return AxisSparse._trusted(self.axis if axis is None else axis,
                                   self.indices if indices is None else indices, values,
                                   self.shape if shape is None else shape,
                                   self.coalesced if coalesced is None else coalesced)

    def worth_keeping(self):
        """Whether ``grad`` returns this gradient sparse by default (see the
        module docstring): large dense form, few slices."""
        return (self.size >= KEEP_SPARSE_MIN_SIZE
                and len(self.indices) <= KEEP_SPARSE_MAX_FRACTION * self.shape[self.axis])

    # --- conversion ---------------------------------------------------------
    def todense(self, dtype=None):
        """The dense array (O(size): use it on purpose)."""
        if self.staged():  # inside jit: zeros the program makes, then one scatter
            # (made from whichever is staged: plain values -- a constant
            # cotangent -- at staged indices would write into a plain array,
            # which pins the indices: a trace for every new index array)
            like = self.values if self.values.__class__ is Staged else self.indices
            out = np.zeros_like(like, shape=self.shape, dtype=dtype or self.dtype)
            return self.scatter_add_into(out)
        out = np.zeros(self.shape, dtype=dtype or self.dtype)
        self.scatter_add_into(out)
        return out

    def staged(self):
        """Whether the values or indices are ``tapestry.jit``'s staged values
        (a gradient being traced by jit): then every operation is one a
        replay can record (no Python loop over the indices)."""
        return self.values.__class__ is Staged or self.indices.__class__ is Staged

    def __array__(self, dtype=None, copy=None):
        record_densify("np.asarray (__array__)", self.shape)
        return self.todense(dtype)

    def astype(self, dtype, copy=True):
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        return self._with(self.values.astype(dtype))

    def copy(self):
        return self._with(self.values.copy(), self.indices.copy())

    def key(self, indices=None):
        """The indexing key that selects the stored slices of a dense array."""
        return (slice(None),) * self.axis + (self.indices if indices is None else indices,)

    # --- coalescing and scatter -------------------------------------------
    def _rounds(self):
        """Positions of the 1st, 2nd, ... occurrences of each index, in order
        of appearance: within one round every index is unique, so a fancy
        ``+=`` is exact.  ``None`` when no index repeats."""
        idx = self.indices
        if self.coalesced or idx.size <= 1:
            return None
        if idx.size <= 48:  # small: a dict beats NumPy (measured: 64 -> even, 1000 -> 4.5x slower)
            lst = idx.tolist()
            seen = {}
            ranks = []
            for i in lst:
                r = seen.get(i, 0)
                ranks.append(r)
                seen[i] = r + 1
            if len(seen) == len(lst):
                return None
            rank = np.array(ranks)
        else:
            order = np.argsort(idx, kind="stable")
            sidx = idx[order]
            first = np.empty(sidx.size, dtype=bool)
            first[0] = True
            np.not_equal(sidx[1:], sidx[:-1], out=first[1:])
            if first.all():
                return None
            starts = np.flatnonzero(first)
            rank = np.empty(idx.size, dtype=np.intp)
            rank[order] = np.arange(sidx.size) - starts[np.cumsum(first) - 1]
        return [np.flatnonzero(rank == r) for r in range(int(rank.max()) + 1)]

    def coalesce(self):
        """Equal indices merged, then sorted ascending; the slices with the
        same index are added in order of appearance, so the result is
        deterministic.  Without repeats the stored arrays are reused."""
        rounds = self._rounds()
        if rounds is None:
            return self if self.coalesced else self._with(self.values, coalesced=True)
        first = rounds[0]
        uniq = self.indices[first]
        order = np.argsort(uniq)
        uniq = uniq[order]
        out = np.take(self.values, first[order], axis=self.axis)
        for pos in rounds[1:]:
            grp = np.searchsorted(uniq, self.indices[pos])
            out[self.key(grp)] += np.take(self.values, pos, axis=self.axis)
        return self._with(out, uniq, coalesced=True)

    def scatter_add_into(self, dense, subtract=False):
        """``dense += self`` (or ``-=``) in place, touching only the stored
        slices.  Repeated indices go in rounds of unique ones: a fancy-index
        ``+=`` is ~6x faster than ``np.add.at`` (64 rows of 512: ~43 us against
        ~280 us, measured for W1 of benchmarks/README.md) and rounds
        avoid copying the values to merge them first."""
        if dense.shape != self.shape:
            raise ValueError(f"tapestry.AxisSparse: cannot add shape {self.shape} into "
                             f"an array of shape {dense.shape}.")
        if dense.__class__ is Staged or self.staged():
            # np.add.at adds repeats in order of appearance, as the rounds do
            (np.subtract if subtract else np.add).at(dense, self.key(), self.values)
            return dense
        rounds = self._rounds()
        op = np.subtract if subtract else np.add
        if rounds is None:
            key, vals = self.key(), self.values
        else:
            first = rounds[0]
            key = self.key(self.indices[first])
            vals = np.take(self.values, first, axis=self.axis)
        rows = dense[key]
        op(rows, vals, out=rows)  # in place: no second fresh buffer
        dense[key] = rows
        if rounds is None:
            return dense
        pre = (slice(None),) * self.axis
        for pos in rounds[1:]:  # few repeats: one slice at a time, in order
            for j in pos.tolist():
                i = int(self.indices[j])
                view = dense[pre + (slice(i, i + 1),)]
                op(view, self.values[pre + (slice(j, j + 1),)], out=view)
        return dense

    # --- accumulation (called by the engine's backward sweep) --------------
    def __accumulate_into__(self, prev):
        """``prev + self`` for the backward sweep: sparse+sparse stays sparse
        (concatenated; coalesced when used), sparse+dense scatters into a copy
        of the dense total (the engine may not own ``prev``)."""
        return _add(prev, self)

    # --- arithmetic -----------------------------------------------------------
    def __add__(self, other):
        return _add(self, other)

    def __radd__(self, other):
        return _add(other, self)

    def __sub__(self, other):
        return _add(self, -other)

    def __rsub__(self, other):
        return _add(other, -self)

    def __neg__(self):
        return self._with(-self.values)

    def __pos__(self):
        return self

    def __mul__(self, other):
        if type(other) is float or type(other) is int:  # hot path: lr * g
            return self._with(self.values * other)
        return np.multiply(self, other)

    def __rmul__(self, other):
        if type(other) is float or type(other) is int:
            return self._with(other * self.values)
        return np.multiply(other, self)

    def __truediv__(self, other):
        return np.true_divide(self, other)

    def __rtruediv__(self, other):
        return np.true_divide(other, self)

    def __matmul__(self, other):
        return np.matmul(self, other)

    def __rmatmul__(self, other):
        return np.matmul(other, self)

    def __pow__(self, other):
        return np.power(self, other)

    def __getitem__(self, key):
        return densify(self, "getitem on AxisSparse")[key]

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_ufunc(AxisSparse, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return array_function(AxisSparse, func, args, kwargs)

    # --- everything else an ndarray offers: densify (counted) ----------------
    def __getattr__(self, name):
        """ndarray methods and attributes without a sparse version
        (``ravel``, ``tolist``, ``max``, ``flat``, ...) act on the dense
        array, so code written for dense gradients keeps working."""
        if name.startswith("_") or not hasattr(np.ndarray, name):
            raise AttributeError(
                f"'AxisSparse' object has no attribute {name!r} (a sparse gradient; "
                "g.todense() or np.asarray(g) gives the dense array, and "
                "tapestry.grad(..., sparse=False) returns dense gradients).")
        return getattr(densify(self, f".{name}"), name)

    def __iter__(self):
        return iter(densify(self, "iteration"))

    def __eq__(self, other):
        return np.equal(self, other)

    def __ne__(self, other):
        return np.not_equal(self, other)

    def __lt__(self, other):
        return np.less(self, other)

    def __le__(self, other):
        return np.less_equal(self, other)

    def __gt__(self, other):
        return np.greater(self, other)

    def __ge__(self, other):
        return np.greater_equal(self, other)

    __hash__ = None  # like ndarray: mutable, compared elementwise

    def __abs__(self):
        return np.absolute(self)

    def __bool__(self):
        return bool(densify(self, "bool()"))

    def __float__(self):
        return float(densify(self, "float()"))

    def __int__(self):
        return int(densify(self, "int()"))

    def __complex__(self):
        return complex(densify(self, "complex()"))

    def __format__(self, spec):
        return format(densify(self, "format()"), spec)

    # --- axis moves and reductions (kept sparse) -------------------------------
    def transpose(self, *axes):
        """Permuted axes: the stored slices are permuted the same way."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        axes = tuple(reversed(range(self.ndim))) if not axes else \
            tuple(a % self.ndim for a in axes)
        return AxisSparse(axes.index(self.axis), self.indices,
                          np.transpose(self.values, axes),
                          tuple(self.shape[a] for a in axes), self.coalesced)

    def swapaxes(self, a, b):
        perm = list(range(self.ndim))
        a, b = a % self.ndim, b % self.ndim
        perm[a], perm[b] = perm[b], perm[a]
        return self.transpose(perm)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        """Sum over ``axis``.  Summing over the sparse axis gives a dense
        result computed from the stored slices alone (the rest is zero);
        otherwise the result stays sparse.  Both cost O(nnz)."""
        if out is not None or kw:
            return np.sum(densify(self, "np.sum(out=/where=)"), axis=axis, dtype=dtype,
                          out=out, keepdims=keepdims, **kw)
        axes = tuple(range(self.ndim)) if axis is None else \
            tuple(sorted(a % self.ndim for a in np.atleast_1d(axis)))
        vals = self.values.sum(axis=axes, dtype=dtype, keepdims=keepdims)
        if self.axis in axes:
            return vals
        shape = tuple(1 if i in axes else n for i, n in enumerate(self.shape))
        new_axis = self.axis
        if not keepdims:
            shape = tuple(n for i, n in enumerate(self.shape) if i not in axes)
            new_axis -= sum(1 for a in axes if a < self.axis)
        return AxisSparse(new_axis, self.indices, vals, shape, self.coalesced)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return reshape(self, shape)


def reshape(sp, shape):
    """Reshape keeping sparsity when the axes up to the sparse one are kept
    (e.g. (N, 512) -> (N, 8, 64)); otherwise densify."""
    shape = tuple(int(n) for n in np.atleast_1d(shape)) if not isinstance(shape, int) \
        else (shape,)
    if -1 in shape:
        known = int(np.prod([n for n in shape if n != -1]))
        shape = tuple(sp.size // max(known, 1) if n == -1 else n for n in shape)
    a = sp.axis
    if shape[:a + 1] == sp.shape[:a + 1] and int(np.prod(shape)) == sp.size:
        k = len(sp.indices)
        vals = np.reshape(sp.values, shape[:a] + (k,) + shape[a + 1:])
        return AxisSparse(a, sp.indices, vals, shape, sp.coalesced)
    return np.reshape(densify(sp, "np.reshape"), shape)


def _add(a, b):
    """``a + b`` where at least one is an ``AxisSparse`` (order kept: the
    concatenation order decides the summation order when coalescing)."""
    sa, sb = isinstance(a, AxisSparse), isinstance(b, AxisSparse)
    if sa and sb:
        if a.shape == b.shape and a.axis == b.axis:
            va, vb = a.values, b.values
            if va.dtype != vb.dtype:
                dt = np.result_type(va.dtype, vb.dtype)
                va, vb = va.astype(dt, copy=False), vb.astype(dt, copy=False)
            parts = (a.axis, np.concatenate([a.indices, b.indices]),
                     np.concatenate([va, vb], axis=a.axis), a.shape)
            # two valid operands of one shape and axis: the parts keep the
            # invariants, so no second check (~3 us; each chunk of a
            # parallel_sum adds one gather's gradient this way)
            return AxisSparse._trusted(*parts)
        if a.shape != b.shape:
            raise ValueError(f"tapestry.AxisSparse: cannot add shapes {a.shape} and "
                             f"{b.shape}.")
        return _scatter_copy(densify(a, "add (different sparse axes)"), b)
    sp, other = (a, b) if sa else (b, a)
    if other is None:
        return sp
    if other.__class__ is Staged or sp.staged():  # inside jit: a dense sum, recorded
        if np.shape(other) == sp.shape:
            return _scatter_copy(other, sp)
        out = np.add(np.zeros_like(sp.values, shape=sp.shape,
                                   dtype=np.result_type(sp.dtype, other)), other)
        return sp.scatter_add_into(out)
    if other.__class__ in NESTED:
        return np.add(a, b)  # the traced operand records the addition
    other = np.asarray(other)
    if other.shape == sp.shape:
        return _scatter_copy(other, sp)
    if other.ndim == 0 and other == 0:
        return sp
    d = densify(sp, "add (broadcast dense operand)")
    return d + other if sa else other + d


def _as_array(x):
    """``x`` as an array; a staged one (inside ``jit``) as it is, since
    ``np.asarray`` would pin its value (a re-trace for every new value)."""
    return x if x.__class__ is Staged else np.asarray(x)


def _staged_copy(dense, sp, dtype):
    """A new array ``dense`` (plain or staged) of ``dtype``, made by a step
    of ``sp``'s jit trace, so that the scatter into it is recorded.  A copy,
    not ``zeros + dense``: that would turn ``-0.0`` into ``0.0``."""
    out = staged_recorder((dense, sp.values, sp.indices)).call(np.copy, (dense,), None)
    return out if out.dtype == dtype else out.astype(dtype)


def _scatter_copy(dense, sp):
    """A new array ``dense + sp`` (``dense`` is never modified)."""
    dtype = np.result_type(dense, sp.dtype)
    if dense.__class__ is Staged or sp.staged():  # inside jit: the copy is recorded too
        return sp.scatter_add_into(_staged_copy(dense, sp, dtype))
    out = np.array(dense, dtype=dtype, copy=True)
    return sp.scatter_add_into(out)
