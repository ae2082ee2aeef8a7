"""Composite NumPy functions: entry points built from differentiable
primitives (so every order of derivative comes for free), plus a few small
primitives whose forward is NumPy's own and whose rule is short.

- statistics: cov, corrcoef;
- gathers whose positions NumPy itself decides: block, choose, compress,
  delete, extract, insert, resize, unstack, trim_zeros (NumPy's function
  runs on integer *labels* of the inputs' elements; the result is one
  ``np.take`` of the labelled elements, so its cotangent is a scatter-add);
- scans and casts: astype, cumulative_sum, cumulative_prod;
- two-output ufuncs and friends: divmod, modf, frexp, ldexp (the integer or
  integral parts are piecewise constant: plain arrays), i0 (with SciPy);
- polynomials: polyadd, polysub, polyder, polyint, polymul, polydiv, vander,
  polyfit, roots, poly;
- unwrap (the result is ``p`` plus multiples of ``period``);
- sets: intersect1d, union1d, setdiff1d, setxor1d (sorted gathers; at ties,
  the cotangent is split equally, as np.maximum does; see :func:`_set_op`).
"""
from __future__ import annotations

import importlib.util
import warnings

import numpy as np

from ..core.primitive import Primitive, implements, shape_of, unbroadcast
from ..core.var import Var, astype as _var_astype, reject_out, unwrap_all


try:
    from numpy.lib.array_utils import normalize_axis_tuple
except ImportError:  # NumPy < 2
    from numpy.core.numeric import normalize_axis_tuple


def _implements_if(name):
    """``implements(np.<name>)``, skipped where this NumPy lacks the function
    (astype, cumulative_sum/prod and unstack are NumPy 2 functions)."""
    fun = getattr(np, name, None)
    return implements(fun) if fun is not None else (lambda impl: impl)


def _dtype(x):
    return np.result_type(unwrap_all(x))


def _probe(shape, dtype=bool):
    """A zero-cost array of ``shape``: NumPy's own checks run on it."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def _labels(sources):
    """Integer labels numbering the elements of ``sources`` one after the other."""
    out, start = [], 0
    for s in sources:
        shape = shape_of(s)
        n = int(np.prod(shape, dtype=np.int64))
        out.append(np.arange(start, start + n, dtype=np.intp).reshape(shape))
        start += n
    return out


def _gather_by_labels(call, *sources):
    """``call`` (a NumPy function of the sources) run on their labels, then
    one gather of the sources' elements at the labels it returns."""
    index = call(*_labels(sources))
    flat = [np.ravel(s) for s in sources]
    flat = flat[0] if len(flat) == 1 else np.concatenate(flat)
    return np.take(flat, index)


# --- statistics ------------------------------------------------------------------------
def _cov_rows(m, y, rowvar, dtype):
    """The variables as rows of one 2-D array, in ``dtype`` (NumPy's layout)."""
    for a, name in ((m, "m"), (y, "y")):
        if a is not None and np.ndim(unwrap_all(a)) > 2:
            raise ValueError(f"{name} has more than 2 dimensions")
    X = np.atleast_2d(m)
    if not rowvar and shape_of(X)[0] != 1:
        X = np.transpose(X)
    if y is not None:
        Y = np.atleast_2d(y)
        if not rowvar and shape_of(Y)[0] != 1:
            Y = np.transpose(Y)
        X = np.concatenate([X, Y], axis=0)
    return X if _dtype(X) == dtype else _var_astype(X, dtype)


def _cov_weights(fweights, aweights, n):
    """NumPy's weight checks, then the combined weights fweights * aweights
    (or None).  Either may be traced (aweights are floats)."""
    w = None
    for weights, name in ((fweights, "fweights"), (aweights, "aweights")):
        if weights is None:
            continue
        if isinstance(weights, (list, tuple)):
            weights = np.asarray(weights)
        wv = unwrap_all(weights)
        np.cov(np.zeros((1, n)), **{name: wv})  # NumPy's own checks and messages
        w = weights if w is None else w * weights
    return w


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """The covariance as NumPy computes it, with differentiable operations
    (``(X - mean) (X - mean)^H / fact``); traced weights are differentiable too."""
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if dtype is None:
        dtype = np.result_type(_dtype(m), np.float64) if y is None else \
            np.result_type(_dtype(m), _dtype(y), np.float64)
    X = _cov_rows(m, y, rowvar, np.dtype(dtype))
    rows, n = shape_of(X)
    if rows == 0:
        return np.cov(np.zeros((0, n), dtype)).astype(dtype)
    ddof = (0 if bias else 1) if ddof is None else ddof
    w = _cov_weights(fweights, aweights, n)
    if w is None:
        avg, w_sum, fact = np.mean(X, axis=1), n, n - ddof
    else:
        w_sum = np.sum(w)
        avg = np.sum(X * w, axis=1) / w_sum
        fact = w_sum if ddof == 0 else (w_sum - ddof if aweights is None
                                        else w_sum - ddof * np.sum(w * aweights) / w_sum)
    if np.all(unwrap_all(fact) <= 0):
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    Xc = X - avg[:, None]
    XT = np.transpose(Xc if w is None else Xc * w)
    return np.squeeze(np.dot(Xc, np.conjugate(XT)) / fact)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """cov / (sd_i sd_j), the real and imaginary parts clipped to [-1, 1] as
    NumPy does (the clip passes the gradient at the bounds; on the diagonal,
    where the value is 1, the true derivative is 0 up to rounding)."""
    c = cov(x, y, rowvar, dtype=dtype)
    if np.ndim(unwrap_all(c)) == 0:
        return c / c
    sd = np.sqrt(np.real(np.diagonal(c)))
    c = c / sd[:, None] / sd[None, :]
    if np.iscomplexobj(unwrap_all(c)):
        return np.clip(np.real(c), -1, 1) + 1j * np.clip(np.imag(c), -1, 1)
    return np.clip(c, -1, 1)


# --- casts and scans --------------------------------------------------------------------
@_implements_if("astype")
def astype(x, dtype, /, *, copy=True, device=None):
    """Float and complex targets are differentiable (the cotangent is cast
    back); integer and boolean targets are piecewise constant: a plain array."""
    if device not in (None, "cpu"):
        raise ValueError(f"tapestry: np.astype device={device!r}; only 'cpu' is supported.")
    return _var_astype(x, dtype)


def _cumulative(scan, initial, name):
    def cumulative(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        reject_out(name, out)
        shape = shape_of(x)
        # NumPy's checks (they depend on the number of axes only): a tiny probe.
        getattr(np, name)(np.zeros(tuple(min(n, 1) for n in shape)), axis=axis)
        if dtype is not None:
            x = _var_astype(x, dtype)
            if np.dtype(dtype).kind not in "fc":
                return getattr(np, name)(x, axis=axis, include_initial=include_initial)
        axis = 0 if axis is None else axis % len(shape)
        y = scan(x, axis=axis)
        if not include_initial:
            return y
        first = list(shape)
        first[axis] = 1
        return np.concatenate([np.full(first, initial, _dtype(y)), y], axis=axis)
    cumulative.__name__ = name
    return cumulative


_implements_if("cumulative_sum")(_cumulative(np.cumsum, 0, "cumulative_sum"))
_implements_if("cumulative_prod")(_cumulative(np.cumprod, 1, "cumulative_prod"))


# --- two-output ufuncs, ldexp, i0 --------------------------------------------------------
def _no_ufunc_kwargs(name, kwargs):
    if kwargs:
        raise NotImplementedError(f"tapestry: np.{name}(..., {', '.join(kwargs)}=...) on traced "
                                  "arrays is not supported; drop the keywords.")


@implements(np.divmod)
def divmod_(x1, x2, **kwargs):
    """(floor_divide, remainder): the quotient is piecewise constant (a plain
    array), the remainder differentiable (np.remainder's rule)."""
    _no_ufunc_kwargs("divmod", kwargs)
    quotient = np.divmod(unwrap_all(x1), unwrap_all(x2))[0]  # NumPy's errors name divmod
    return quotient, np.remainder(x1, x2)


# d frac(x) / dx = 1 away from the integers' jumps (modf's fractional part).
_modf_frac = Primitive(lambda x: np.modf(x)[0], "modf", vjps=(lambda g, ans, x: g,))


@implements(np.modf)
def modf(x, **kwargs):
    """(fractional part, integral part): the first moves with x (derivative
    1), the second is piecewise constant (a plain array)."""
    _no_ufunc_kwargs("modf", kwargs)
    return _modf_frac(x), np.modf(unwrap_all(x))[1]


def _pow2(e, dtype):
    """2**e exactly, in ``dtype``."""
    return np.ldexp(np.ones((), dtype), unwrap_all(e))


# mantissa = x / 2**e with the integer exponent e piecewise constant.
_frexp_mantissa = Primitive(lambda x: np.frexp(x)[0], "frexp", vjps=(
    lambda g, ans, x: g * _pow2(-np.frexp(unwrap_all(x))[1], _dtype(g)),))


@implements(np.frexp)
def frexp(x, **kwargs):
    """(mantissa, exponent): the mantissa ``x / 2**e`` is differentiable
    (derivative ``2**-e``), the integer exponent piecewise constant."""
    _no_ufunc_kwargs("frexp", kwargs)
    return _frexp_mantissa(x), np.frexp(unwrap_all(x))[1]


_ldexp = Primitive(lambda x1, x2: np.ldexp(x1, x2), "ldexp", vjps=(
    lambda g, ans, x1, x2: unbroadcast(g * _pow2(x2, _dtype(g)), shape_of(x1)),
    lambda g, ans, x1, x2: None))  # the integer exponent: zero cotangent


@implements(np.ldexp)
def ldexp(x1, x2, **kwargs):
    """x1 * 2**x2: derivative 2**x2 in x1; the integer x2 is a constant."""
    _no_ufunc_kwargs("ldexp", kwargs)
    return _ldexp(x1, x2)


def _i1_rule(g, ans, x):
    """i1'(x) = i0(x) - i1(x) / x, which is 1/2 at 0."""
    safe = np.where(unwrap_all(x) == 0, 1.0, x)
    d = np.where(unwrap_all(x) == 0, 0.5, np.i0(x) - ans / safe)
    return g * d


def _i1_forward(x):
    import scipy.special  # present: checked when the rule was registered
    return scipy.special.i1(x)


_i1 = Primitive(_i1_forward, "i1", vjps=(_i1_rule,))
# d i0(x) / dx = i1(x), itself a primitive whose rule calls np.i0: every order.
_i0 = Primitive(np.i0, "i0", vjps=(lambda g, ans, x: g * _i1(x),))
if importlib.util.find_spec("scipy") is not None:
    implements(np.i0)(_i0)


# --- polynomials -----------------------------------------------------------------------
def _pad_front(a, k):
    if k <= 0:
        return a
    return np.concatenate([np.zeros(k, _dtype(a)), a])


def _poly_combine(op):
    def combine(a1, a2):
        a1, a2 = np.atleast_1d(a1), np.atleast_1d(a2)
        n1, n2 = len(unwrap_all(a1)), len(unwrap_all(a2))
        return op(_pad_front(a1, n2 - n1), _pad_front(a2, n1 - n2))
    combine.__name__ = "poly" + op.__name__[:3]
    return combine


implements(np.polyadd)(_poly_combine(np.add))
implements(np.polysub)(_poly_combine(np.subtract))


@implements(np.polyder)
def polyder(p, m=1):
    """Coefficients times their powers, ``m`` times."""
    m = int(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = np.atleast_1d(p)
    for _ in range(m):
        n = len(unwrap_all(p)) - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


@implements(np.polyint)
def polyint(p, m=1, k=None):
    """Coefficients divided by their new powers, with the integration
    constants ``k`` (traced or not) appended, ``m`` times."""
    m = int(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = np.zeros(m, float) if k is None else np.atleast_1d(k)
    if len(unwrap_all(k)) == 1 and m > 1:
        k = k[0] * np.ones(m, float)
    if len(unwrap_all(k)) < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):
        p = np.concatenate([p / np.arange(len(unwrap_all(p)), 0, -1), np.reshape(k[i], (1,))])
    return p


@implements(np.polydiv)
def polydiv(u, v):
    """Long division in NumPy's steps, without writing in place: q and r are
    rational functions of the coefficients (differentiable while v[0] != 0).
    The leading remainder entries NumPy drops as zero (np.allclose) are
    dropped here too; the entries it cancels are identically zero."""
    u, v = np.atleast_1d(u) + 0.0, np.atleast_1d(v) + 0.0
    dtype = np.result_type(_dtype(u), _dtype(v))
    u, v = _float_source(u, dtype), _float_source(v, dtype)
    m, n = shape_of(u)[0] - 1, shape_of(v)[0] - 1
    scale = 1.0 / v[0]
    r, quotient = u, []
    for k in range(m - n + 1):
        d = scale * r[k]
        quotient.append(d)
        r = np.concatenate([r[:k], r[k:k + n + 1] - d * v, r[k + n + 1:]])
    q = np.stack(quotient) if quotient else np.zeros((1,), dtype)
    rv, start = unwrap_all(r), 0
    while np.allclose(rv[start], 0, rtol=1e-14) and len(rv) - start > 1:
        start += 1
    return q, r[start:]


def _full_convolution(a, b):
    """sum_{i+j=k} a_i b_j: the outer product, each row i shifted right by i
    (pad with n zero columns, flatten, cut, reshape), summed over rows."""
    n, m = len(unwrap_all(a)), len(unwrap_all(b))
    outer = np.outer(a, b)
    padded = np.concatenate([outer, np.zeros((n, n), _dtype(outer))], axis=1)
    skewed = np.reshape(np.ravel(padded)[:n * (n + m - 1)], (n, n + m - 1))
    return np.sum(skewed, axis=0)


@implements(np.polymul)
def polymul(a1, a2):
    """The product's coefficients: the full convolution of a1 and a2."""
    a1, a2 = np.atleast_1d(a1), np.atleast_1d(a2)
    if 0 in (np.size(unwrap_all(a1)), np.size(unwrap_all(a2))):
        return np.polymul(unwrap_all(a1), unwrap_all(a2))  # NumPy's error
    return _full_convolution(a1, a2)


def _vander_increasing(x, n):
    return np.vander(x, n, increasing=True)


def _vander_rule(g, ans, x, n):
    """d/dx_i sum_k g_ik x_i^k = sum_{k>=1} g_ik k x_i^(k-1) (exact at 0)."""
    if n <= 1:
        return np.zeros(shape_of(x), _dtype(g))
    k = np.arange(1, n, dtype=_dtype(g))
    return np.sum(g[:, 1:] * k * _vander(x, n - 1), axis=1)


_vander = Primitive(_vander_increasing, "vander", vjps=(_vander_rule, None))


@implements(np.vander)
def vander(x, N=None, increasing=False):
    """Powers of x: column k of the increasing form is x**k."""
    if np.ndim(unwrap_all(x)) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = len(unwrap_all(x)) if N is None else int(N)
    v = _vander(x, n)
    return v if increasing else v[:, ::-1]


@implements(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least squares as NumPy solves it (scaled Vandermonde columns,
    np.linalg.lstsq), differentiable in x, y and w while the rank is full."""
    if cov:
        raise NotImplementedError(
            "tapestry: np.polyfit(..., cov=True) is refused on traced arrays (the covariance "
            "estimate has no rule); fit with cov=False and form it from np.linalg.inv.")
    xv, yv, wv = unwrap_all(x), unwrap_all(y), unwrap_all(w)
    np.polyfit(xv, yv, deg, rcond, full, wv)  # NumPy's checks and RankWarning (a small solve)
    order = int(deg) + 1
    x, y = x + 0.0, y + 0.0
    if rcond is None:
        rcond = len(xv) * np.finfo(_dtype(x)).eps
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = w + 0.0
        lhs = lhs * w[:, None]
        rhs = rhs * (w if np.ndim(yv) == 1 else w[:, None])
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    c, resids, rank, s = np.linalg.lstsq(lhs / scale, rhs, rcond)
    c = np.transpose(np.transpose(c) / scale)
    return (c, resids, rank, s, rcond) if full else c


@implements(np.roots)
def roots(p):
    """Eigenvalues of the companion matrix (np.linalg.eigvals' rule); leading
    and trailing zero coefficients are trimmed / give zero roots, as in NumPy."""
    p = np.atleast_1d(p)
    pv = unwrap_all(p)
    if pv.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    nz = np.nonzero(pv)[0]
    if len(nz) == 0:
        return np.array([])
    trailing = len(pv) - int(nz[-1]) - 1
    p = p[int(nz[0]):int(nz[-1]) + 1]
    n = int(nz[-1]) - int(nz[0]) + 1
    if n > 1:
        below = np.diag(np.ones((n - 2,), _dtype(p)), -1)[1:]
        r = np.linalg.eigvals(np.concatenate([(-p[1:] / p[0])[None, :], below], axis=0))
    else:
        r = np.array([])
    return np.concatenate([r, np.zeros(trailing, _dtype(r))]) if trailing else r


@implements(np.poly)
def poly(seq_of_zeros):
    """The monic polynomial with these roots (or a square matrix's
    eigenvalues): a product of linear factors, one factor at a time."""
    z = np.atleast_1d(seq_of_zeros)
    sh = shape_of(z)
    if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
        z = np.linalg.eigvals(z)
    elif len(sh) == 1:
        z = _var_astype(z, np.mintypecode(_dtype(z).char))
    else:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if shape_of(z)[0] == 0:
        return 1.0
    a = np.ones((1,), _dtype(z))
    zero = np.zeros((1,), _dtype(z))
    for i in range(shape_of(z)[0]):
        a = np.concatenate([a, zero]) - z[i] * np.concatenate([zero, a])
    if np.iscomplexobj(unwrap_all(a)):
        r = np.asarray(unwrap_all(z), complex)
        if np.all(np.sort(r) == np.sort(r.conjugate())):
            a = np.real(a)
    return a


# --- gathers NumPy positions: labels in, one np.take out ---------------------------------
def _float_source(s, dtype):
    """A source of a gather in the result's ``dtype`` (NumPy casts too)."""
    return s if _dtype(s) == dtype else _var_astype(s, dtype)


@implements(np.choose)
def choose(a, choices, out=None, mode="raise"):
    """An elementwise pick among the broadcast choices; ``a`` is an index."""
    reject_out("choose", out)
    a = unwrap_all(a)
    if isinstance(choices, (list, tuple)):
        return _gather_by_labels(lambda *ls: np.choose(a, ls, mode=mode), *choices)
    return _gather_by_labels(lambda ls: np.choose(a, ls, mode=mode), choices)


@implements(np.compress)
def compress(condition, a, axis=None, out=None):
    reject_out("compress", out)
    cond = unwrap_all(condition)
    return _gather_by_labels(lambda ls: np.compress(cond, ls, axis), a)


@implements(np.delete)
def delete(arr, obj, axis=None):
    obj = unwrap_all(obj)
    return _gather_by_labels(lambda ls: np.delete(ls, obj, axis), arr)


@implements(np.extract)
def extract(condition, arr):
    cond = unwrap_all(condition)
    return _gather_by_labels(lambda ls: np.extract(cond, ls), arr)


@implements(np.resize)
def resize(a, new_shape):
    """``a``'s elements repeated in order; an empty ``a`` gives zeros (a constant)."""
    if 0 in shape_of(a):
        return np.resize(unwrap_all(a), new_shape)
    return _gather_by_labels(lambda ls: np.resize(ls, new_shape), a)


@implements(np.insert)
def insert(arr, obj, values, axis=None):
    """``values`` (cast to ``arr``'s dtype) placed among ``arr``'s elements;
    both may be traced.  An integer ``arr`` gives a plain integer result."""
    obj, dtype = unwrap_all(obj), _dtype(arr)
    if dtype.kind not in "fc":
        return np.insert(unwrap_all(arr), obj, unwrap_all(values), axis)
    if not isinstance(values, Var):
        values = np.asarray(values)
    return _gather_by_labels(lambda A, V: np.insert(A, obj, V, axis), arr,
                             _float_source(values, dtype))


@_implements_if("unstack")
def unstack(x, /, *, axis=0):
    np.unstack(_probe(shape_of(x)), axis=axis)  # NumPy's checks
    moved = np.moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(shape_of(moved)[0]))


@implements(np.trim_zeros)
def trim_zeros(filt, trim="fb", axis=None):
    """A slice: the bounding box of the nonzero entries, found on the values.
    It moves only when an entry at its edge is exactly zero (a set of
    measure zero); the entries trimmed away are zeros and get no cotangent."""
    fv = unwrap_all(filt)
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"unexpected character(s) in `trim`: {trim!r}")
    axes = range(fv.ndim) if axis is None else normalize_axis_tuple(axis, fv.ndim, "axis")
    if not axes:
        return filt
    nz = np.argwhere(fv)
    start = nz.min(axis=0) if len(nz) else np.zeros(fv.ndim, int)
    stop = nz.max(axis=0) + 1 if len(nz) else np.zeros(fv.ndim, int)
    sl = tuple(slice(start[d] if "f" in trim else None, stop[d] if "b" in trim else None)
               if d in axes else slice(None) for d in range(fv.ndim))
    return filt[sl]


def _block_depth(arrays):
    return 1 + _block_depth(arrays[0]) if isinstance(arrays, list) and arrays else 0


def _block_probe(arrays):
    if isinstance(arrays, list):
        return [_block_probe(a) for a in arrays]
    return _probe(shape_of(arrays))


@implements(np.block)
def block(arrays):
    """Nested lists joined as NumPy does: the innermost lists along the last
    axis, each level out along one axis earlier (np.concatenate's rule)."""
    np.block(_block_probe(arrays))  # NumPy's checks of the nesting
    depth = _block_depth(arrays)
    ndim = max(depth, _max_ndim(arrays))

    def join(a, level):
        if not isinstance(a, list):
            shape = shape_of(a)
            return np.reshape(a, (1,) * (ndim - len(shape)) + tuple(shape))
        return np.concatenate([join(b, level + 1) for b in a], axis=level - depth)
    return join(arrays, 0)


def _max_ndim(arrays):
    if isinstance(arrays, list):
        return max(_max_ndim(a) for a in arrays)
    return len(shape_of(arrays))


# --- unwrap --------------------------------------------------------------------------------
def _unwrap_period_rule(g, ans, p, period, discont, axis):
    """The result is p + K * period with K integer (piecewise constant)."""
    K = np.rint((unwrap_all(ans) - unwrap_all(p)) / unwrap_all(period))
    return unbroadcast(g * K.astype(_dtype(g)), shape_of(period))


_unwrap = Primitive(
    lambda p, period, discont, axis: np.unwrap(p, discont, axis, period=period), "unwrap",
    vjps=(lambda g, ans, p, period, discont, axis: g if _dtype(g) == _dtype(p)
          else _var_astype(g, _dtype(p)), _unwrap_period_rule))


@implements(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """p plus multiples of ``period`` that change only at jumps: derivative 1
    in p; in ``period``, the number of periods added (``discont`` is a
    threshold: piecewise constant)."""
    return _unwrap(p, period, unwrap_all(discont), axis)


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
        weight = np.where(found, 1.0 / np.maximum(count[k], 1), 0.0).astype(_dtype(g))
        return np.reshape(np.take(g, k) * weight, shape_of((ar1, ar2)[i]))
    return set_pullback


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
