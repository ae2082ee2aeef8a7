"""NumPy functions whose results carry no derivative: shape queries,
comparisons, index-valued functions, rounding, constructors from shape.
On traced inputs they run on the plain values and return plain arrays.

Only functions whose derivative is zero almost everywhere belong here.
Functions with a float result that moves with a float argument -- even
one such as ``full_like``'s fill value, ``bincount``'s and ``histogram``'s
weights, ``unique``'s values or ``sort_complex``'s permutation -- have rules
(ops/data.py) or are refused by name, never listed here."""
from __future__ import annotations

import numpy as np

from ..core.primitive import def_nondiff

def_nondiff(
    np.shape, np.ndim, np.size, np.result_type, np.can_cast, np.iscomplexobj,
    np.isrealobj, np.shares_memory, np.may_share_memory,
    np.zeros_like, np.ones_like, np.empty_like,
    np.argmax, np.argmin, np.argsort, np.argpartition, np.argwhere, np.nonzero,
    np.flatnonzero, np.count_nonzero, np.searchsorted, np.digitize, np.lexsort,
    np.isclose, np.allclose, np.array_equal, np.array_equiv, np.all, np.any,
    np.round, np.around, np.fix, np.isreal, np.iscomplex, np.isneginf, np.isposinf,
    np.array2string, np.array_repr, np.array_str,
    np.nanargmax, np.nanargmin, np.in1d if hasattr(np, "in1d") else np.isin,
    np.isin, np.unravel_index, np.ravel_multi_index, np.tril_indices_from,
    np.triu_indices_from, np.diag_indices_from,
)
