"""NumPy functions whose results carry no derivative: shape queries,
comparisons, index-valued functions, rounding, constructors from shape.
On traced inputs they run on the plain values and return plain arrays.

Only functions whose derivative is zero almost everywhere belong here.
Functions with a float result that moves with a float argument -- even
one such as ``full_like``'s fill value, ``bincount``'s and ``histogram``'s
weights, ``unique``'s values or ``sort_complex``'s permutation -- have rules
(ops/creation.py, ops/statistics.py, ops/setops.py, ops/sorting.py) or are
refused by name (tapestry.coverage.refused), never listed here.

This module is the one list of constants: the registry refuses a function
declared constant twice, or declared constant and given a rule."""
from __future__ import annotations

import numpy as np

from ..core.primitive import def_nondiff

def_nondiff(
    np.shape, np.ndim, np.size, np.result_type, np.can_cast, np.iscomplexobj,
    np.isrealobj, np.shares_memory, np.may_share_memory,
    np.argmax, np.argmin, np.argsort, np.argpartition, np.argwhere, np.nonzero,
    np.flatnonzero, np.count_nonzero, np.searchsorted, np.digitize, np.lexsort,
    np.isclose, np.allclose, np.array_equal, np.array_equiv, np.all, np.any,
    np.round, np.around, np.fix, np.isreal, np.iscomplex, np.isneginf, np.isposinf,
    np.array2string, np.array_repr, np.array_str,
    np.nanargmax, np.nanargmin, np.in1d if hasattr(np, "in1d") else np.isin,
    np.isin, np.unravel_index, np.ravel_multi_index, np.tril_indices_from,
    np.triu_indices_from, np.diag_indices_from,
)


def_nondiff(
    np.floor, np.ceil, np.trunc, np.rint, np.isnan, np.isinf, np.isfinite,
    np.signbit, np.equal, np.not_equal, np.less, np.less_equal, np.greater,
    np.greater_equal, np.logical_and, np.logical_or, np.logical_not, np.logical_xor,
    np.floor_divide, np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert,
    np.left_shift, np.right_shift, np.spacing, np.isnat,
)


#: Piecewise constant results (integers, bools, types, dates, files) of
#: functions some NumPy versions lack: declared by name, skipped when absent.
NUMPY_BY_NAME = (
    "bitwise_count", "gcd", "lcm", "packbits", "unpackbits",
    "busday_count", "busday_offset", "is_busday", "datetime_as_string",
    "common_type", "min_scalar_type", "einsum_path", "linalg.matrix_rank",
    "save", "savez", "savez_compressed", "savetxt",
)

#: scipy.special ufuncs whose results are piecewise constant.
SPECIAL = ("round", "gammasgn")


def _resolve(module, dotted):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def_nondiff(*[f for f in (_resolve(np, n) for n in NUMPY_BY_NAME) if f is not None])


def load_special_constants():
    """Loader (after scipy.special's rules): its piecewise-constant ufuncs."""
    try:
        import scipy.special as sp
    except ImportError:
        return
    def_nondiff(*[f for f in (getattr(sp, n, None) for n in SPECIAL) if f is not None])
