"""Set routines: unique and the two-array set operations (intersect1d,
union1d, setdiff1d, setxor1d).

Their values are sorted input values, so each is a gather whose cotangent
is a scatter; where several input elements share a value (ties) the
cotangent is split equally among them, as np.maximum splits it.  Integer
by-products (indices, inverse, counts) are piecewise constant: plain arrays.
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive, declares_rules, implements, shape_of
from ..core.var import unwrap_all
from .common import plain_dtype


# --- sets: sorted gathers with ties split ---------------------------------------------------
def _set_positions(out, x):
    """For each element of ``x`` (flattened), its position in the sorted
    ``out`` and whether it is there (NaN matches NaN, as np.unique merges them)."""
    if out.size == 0:
        return np.zeros(x.shape, np.intp), np.zeros(x.shape, bool)
    k = np.minimum(np.searchsorted(out, x), out.size - 1)
    found = (out[k] == x) | (np.isnan(out[k]) & np.isnan(x) if out.dtype.kind in "fc"
                             else False)
    return k, found


def _set_rule(i):
    """Cotangent of input ``i``: each result value's cotangent split equally
    among all the input elements (of both inputs) equal to it."""
    def set_pullback(g, ans, ar1, ar2, *options):
        out = unwrap_all(ans)
        flats = [np.ravel(unwrap_all(a)) for a in (ar1, ar2)]
        hits = [_set_positions(out, f) for f in flats]
        count = sum(np.bincount(k[f], minlength=out.size) for k, f in hits)
        k, found = hits[i]
        if not found.any():
            return None
        weight = np.where(found, 1.0 / np.maximum(count[k], 1), 0.0).astype(plain_dtype(g))
        return np.reshape(np.take(g, k) * weight, shape_of((ar1, ar2)[i]))
    return set_pullback


@declares_rules
def _set_op(np_fun, name, ar2_rule=True):
    """A set function of two arrays whose values are sorted, unique input
    values.  Its derivative: each value moves with the input elements equal to
    it.  Generic inputs have no ties across elements and the rule is exact;
    where several elements share a value (duplicates, or a value in both
    inputs, as every value of intersect1d is) the cotangent is split equally
    among them, as np.maximum splits it at ties: moving all of them together
    moves the value by as much."""
    prim = Primitive(lambda ar1, ar2, *options: np_fun(ar1, ar2, *options), name,
                     vjps=(_set_rule(0), _set_rule(1) if ar2_rule else
                           (lambda g, ans, *args: None)))
    return prim


_intersect1d = _set_op(lambda a, b, u: np.intersect1d(a, b, u), "intersect1d")
_union1d = _set_op(np.union1d, "union1d")
_setdiff1d = _set_op(np.setdiff1d, "setdiff1d", ar2_rule=False)  # ar2 only removes values
_setxor1d = _set_op(np.setxor1d, "setxor1d")


@implements(np.intersect1d)
def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    values = _intersect1d(ar1, ar2, bool(assume_unique))
    if not return_indices:
        return values
    _, i1, i2 = np.intersect1d(unwrap_all(ar1), unwrap_all(ar2), assume_unique, True)
    return values, i1, i2


implements(np.union1d)(lambda ar1, ar2: _union1d(ar1, ar2))
implements(np.setdiff1d)(lambda ar1, ar2, assume_unique=False:
                         _setdiff1d(ar1, ar2, bool(assume_unique)))
implements(np.setxor1d)(lambda ar1, ar2, assume_unique=False:
                        _setxor1d(ar1, ar2, bool(assume_unique)))


# --- unique ---------------------------------------------------------------------------
def _tie_split_rule(g, ans, x, first, inverse, counts, axis):
    """Each occurrence of a repeated value gets an equal share of that
    value's cotangent (as np.maximum splits ties): moving all copies
    together moves the value one for one, so the shares sum to 1."""
    share = np.take(g, inverse, axis=axis)
    scale = np.reshape(1.0 / counts[inverse], (-1,) + (1,) * (np.ndim(share) - axis - 1))
    return share * scale.astype(np.result_type(ans), copy=False)


#: ``np.unique``'s values: the first occurrences (NumPy's exact values),
#: with ties' cotangent split evenly over the copies.
_unique_values = Primitive(
    lambda x, first, inverse, counts, axis: np.take(x, first, axis=axis), "unique",
    vjps=(_tie_split_rule,))


def _unique_values_of(ar, axis, equal_nan=True):
    """Traced unique values of ``ar`` (flattened when ``axis`` is None)."""
    p = np.asarray(unwrap_all(ar))
    flat = axis is None
    _, first, inverse, counts = np.unique(np.ravel(p) if flat else p, True, True, True,
                                          axis=None if flat else axis, equal_nan=equal_nan)
    x = np.ravel(ar) if flat else ar
    return _unique_values(x, first, np.ravel(inverse), counts, 0 if flat else axis % p.ndim)


@implements(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           **kw):
    """The values are the first occurrences of each distinct entry (a
    gather, differentiable; repeated entries share the cotangent evenly);
    indices, inverse and counts are constants."""
    p = np.asarray(unwrap_all(ar))
    res = np.unique(p, True, return_inverse, return_counts, axis, **kw)
    values = _unique_values_of(ar, axis, kw.get("equal_nan", True))
    out = (values,) + ((res[1],) if return_index else ()) + tuple(res[2:])
    return out if len(out) > 1 else values


def _array_api_unique(np_fun):
    def unique_fn(x):
        p = np.asarray(unwrap_all(x))
        res = np_fun(p)
        vals = res if isinstance(res, np.ndarray) else res.values
        # the array API's unique_* keep every NaN (equal_nan=False)
        traced_vals = np.reshape(_unique_values_of(x, None, equal_nan=False), np.shape(vals))
        return traced_vals if isinstance(res, np.ndarray) else res._replace(values=traced_vals)
    unique_fn.__name__ = np_fun.__name__
    return unique_fn


for _f in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
    if hasattr(np, _f):
        implements(getattr(np, _f))(_array_api_unique(getattr(np, _f)))
