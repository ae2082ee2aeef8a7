"""``vectorize=True``: per-item code run as one ``vmap`` call per chunk.

``parallel_sum(f, items, ..., vectorize=True)`` keeps ``f`` written for one
item and gives each chunk's items to ``tapestry.vmap(f)`` at once, so a
chunk costs one batched NumPy call per operation instead of one call per
item -- the speed of ``batched=True`` without rewriting ``f``.  Chunking,
executors and bit-identity across executors and worker counts are those of
``batched=True`` (the chunk's items are summed by ``np.sum`` of the mapped
values, so the bits differ from ``vectorize=False``'s item-by-item sum).
"""
from __future__ import annotations

import numpy as np

from ..core.api_vmap import vmap
from ..core.pytree import tree_map
from .faults import BadValue
from .stacking import stacked


class Vectorized:
    """``f`` as a function of a chunk: ``f`` mapped over the chunk's items
    (a list of item pytrees is stacked first), the shared arguments passed
    to every item; summed for ``parallel_sum``.  A class (not a closure) so
    that it pickles by reference for process workers."""

    def __init__(self, f, n_shared, reduce):
        self.f, self.n_shared, self.reduce = f, n_shared, reduce
        self._mapped = None

    def __getstate__(self):  # the mapped function is rebuilt where it is called
        return {"f": self.f, "n_shared": self.n_shared, "reduce": self.reduce}

    def __setstate__(self, state):
        self.__dict__.update(state, _mapped=None)

    def __call__(self, chunk, *shared):
        out = self.values(chunk, *shared)
        return np.sum(out) if self.reduce else out

    def values(self, chunk, *shared):
        """``f``'s value for every item of the chunk (one ``vmap`` call);
        for a sum, checked to be one number each.  ``__call__`` sums them;
        a chunk's reverse sweep may start here instead (work.sum_chunk)."""
        if isinstance(chunk, list):  # a list of item pytrees: one array per leaf
            chunk = _stacked(chunk)
        mapped = self._mapped
        if mapped is None or len(shared) != self.n_shared:
            # one vmap for every chunk: its in_axes are read once
            mapped = vmap(self.f, in_axes=(0,) + (None,) * len(shared))
            if len(shared) == self.n_shared:
                self._mapped = mapped
        out = mapped(chunk, *shared)
        if self.reduce:
            _one_number_each(out)
        return out


def _one_number_each(out):
    """Refuse mapped values that are not one number per item, as
    ``parallel_sum`` item by item does: ``np.sum`` of them would add up
    every item's array (or count booleans, or add a tuple's parts) and
    return a number, silently not the sum of ``f``'s values."""
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape is not None and len(shape) == 1 and dtype is not None and dtype.kind in "iufc":
        return
    if shape is None or dtype is None:
        what, hint = f"a {type(out).__name__}", _PYTREE_HINT
    else:
        item = tuple(shape[1:])
        what = f"an array of shape {item} and dtype {dtype}" if item else f"a {dtype} value"
        hint = _BOOL_HINT if dtype.kind == "b" else _PYTREE_HINT if item else ""
    raise BadValue(f"f returned {what} for each item; parallel_sum adds f's values, so f "
                   f"must return one number (a Python or NumPy int, float or complex, or a "
                   f"0-d numeric array){hint}.")


_BOOL_HINT = ("; convert booleans with float(...) or .astype(float) (NumPy adds booleans "
              "as a logical or)")
_PYTREE_HINT = "; use parallel_map for array or pytree outputs, or np.sum(...) inside f"


def _stacked(items):
    """One array per leaf of a list of item pytrees; items that cannot be
    stacked are refused saying so (numpy's error alone, reported as f's,
    blamed f).  Plain items are stacked column by column (stacking.py)."""
    fast = stacked(items)
    if fast is not None:
        return fast
    try:
        return tree_map(lambda *xs: np.stack(xs), *items)
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"vectorize=True stacks a chunk's items into one array per leaf, and these "
            f"items differ in shape or structure ({e}); give items of one shape and "
            "structure, or pass vectorize=False to call f item by item.") from None


def vectorized(f, shared, batched, opname, reduce):
    """``(f, batched)`` for a call with ``vectorize=True``."""
    if batched:
        raise ValueError(f"tapestry.{opname}: vectorize=True maps a per-item f over each "
                         "chunk; batched=True says f already takes a chunk. Pass one of "
                         "them.")
    return Vectorized(f, len(shared), reduce), True
