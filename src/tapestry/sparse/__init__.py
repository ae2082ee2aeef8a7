"""Sparse cotangents: :class:`AxisSparse` and the rules that keep it sparse.

Gathers along one axis (``W[S]``, ``W[:, S]``, ``np.take``) produce an
``AxisSparse`` cotangent (see :mod:`tapestry.ops.indexing`); NumPy dispatch
on it (:mod:`.ufuncs`) keeps it sparse through scaling, elementwise products,
axis moves and sums, and densifies (counted in :mod:`tapestry.debug`)
everywhere else.
"""
from .axis_sparse import AxisSparse
from .ufuncs import densify

__all__ = ["AxisSparse", "densify"]
