"""Numerical routines built on the differentiable primitives: finite
differences (diff, gradient, trapezoid), cross products, interpolation,
convolution, grids (linspace, meshgrid, sliding windows), selection
(select, piecewise).

Most are *composites*: their entry point rewrites the NumPy call into
operations that already have rules (slicing, arithmetic, ``np.where``,
``np.concatenate``), so they are differentiable in every float argument and
at every order without a rule of their own.  The one new primitive here is
the full 1-D convolution, whose rules are correlations.

The sibling modules that complete the family (imported with it by
``tapestry.ops``): :mod:`.data` (bincount, histogram, unique, full_like),
:mod:`.nanreduce` (the ``nan*`` reductions), :mod:`.polynomial`,
:mod:`.statistics` (average, ptp, cov, corrcoef) and :mod:`.ufunc_methods`
(``reduce``/``accumulate``/``outer``/``at``/``reduceat``).
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive, implements
from ..core.var import Var, unwrap_all


def traced(*xs):
    """Whether any of ``xs`` (or an element of a list/tuple among them) is traced."""
    for x in xs:
        if x.__class__ is Var:
            return True
        if type(x) in (list, tuple) and traced(*x):
            return True
    return False


def _arr(x):
    """A traced array as is; anything else (lists, scalars) as an ndarray."""
    return x if x.__class__ is Var else np.asarray(x)


def _along(v, axis, ndim):
    """Reshape 1-D ``v`` so it broadcasts along ``axis`` of an ``ndim`` array."""
    shape = [1] * ndim
    shape[axis] = -1
    return np.reshape(v, shape)


def _slice(ndim, axis, s):
    key = [slice(None)] * ndim
    key[axis] = s
    return tuple(key)


# --- diff ----------------------------------------------------------------------------
def _edge(value, a, axis):
    """``prepend``/``append`` as NumPy takes them: a scalar is broadcast to a
    slab of length 1 along ``axis``."""
    if np.ndim(value) == 0:
        shape = list(np.shape(a))
        shape[axis] = 1
        return np.broadcast_to(value, tuple(shape))
    return value


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """``n``-th forward difference along ``axis``: ``n`` subtractions of
    shifted slices, so differentiable in ``a``, ``prepend`` and ``append``."""
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    if n == 0:
        return a  # NumPy ignores prepend/append then
    a = _arr(a)
    nd = np.ndim(a)
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = axis % nd
    parts = [a]
    if prepend is not np._NoValue:
        parts.insert(0, _edge(prepend, a, axis))
    if append is not np._NoValue:
        parts.append(_edge(append, a, axis))
    if len(parts) > 1:
        a = np.concatenate(parts, axis=axis)
    for _ in range(n):
        a = a[_slice(nd, axis, slice(1, None))] - a[_slice(nd, axis, slice(None, -1))]
    return a


@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened array, with optional ends."""
    parts = [diff(np.ravel(ary))]
    dtype = np.result_type(unwrap_all(ary))  # NumPy keeps ary's dtype
    for end, at in ((to_begin, 0), (to_end, len(parts) + 1)):
        if end is not None:
            end = np.ravel(end) if end.__class__ is Var else np.ravel(np.asarray(end, dtype))
            parts.insert(at, end if np.result_type(unwrap_all(end)) == dtype
                         else end.astype(dtype))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


# --- gradient ---------------------------------------------------------------------------
def _spacings(varargs, f, axes):
    """One spacing per axis: a scalar step or a coordinate array (NumPy's rules)."""
    n = len(axes)
    if len(varargs) == 0:
        return [1.0] * n
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return [varargs[0]] * n
    if len(varargs) != n:
        raise TypeError("invalid number of arguments")
    out = []
    for h, ax in zip(varargs, axes):
        if np.ndim(h) not in (0, 1):
            raise ValueError("distances must be either scalars or 1d")
        if np.ndim(h) == 1 and len(h) != np.shape(f)[ax]:
            raise ValueError("when 1d, distances must match the length of the "
                             "corresponding dimension")
        out.append(h if np.ndim(h) == 0 else _arr(h))
    return out


def _gradient_uniform(f, h, ax, nd, edge_order):
    s = lambda a, b=None: f[_slice(nd, ax, slice(a, b))]  # noqa: E731
    interior = (s(2) - s(None, -2)) / (2.0 * h)
    if edge_order == 1:
        first = (s(1, 2) - s(0, 1)) / h
        last = (s(-1) - s(-2, -1)) / h
    else:
        first = (-1.5 * s(0, 1) + 2.0 * s(1, 2) - 0.5 * s(2, 3)) / h
        last = (0.5 * s(-3, -2) - 2.0 * s(-2, -1) + 1.5 * s(-1)) / h
    return np.concatenate([first, interior, last], axis=ax)


def _gradient_coords(f, x, ax, nd, edge_order):
    """Second-order differences on an uneven grid ``x`` (NumPy's formulas)."""
    s = lambda a, b=None: f[_slice(nd, ax, slice(a, b))]  # noqa: E731
    dx = diff(x)
    d1, d2 = _along(dx[:-1], ax, nd), _along(dx[1:], ax, nd)
    interior = (-d2 / (d1 * (d1 + d2)) * s(None, -2) + (d2 - d1) / (d1 * d2) * s(1, -1)
                + d1 / (d2 * (d1 + d2)) * s(2))
    if edge_order == 1:
        first = (s(1, 2) - s(0, 1)) / dx[0]
        last = (s(-1) - s(-2, -1)) / dx[-1]
    else:
        h1, h2 = dx[0], dx[1]
        first = (-(2.0 * h1 + h2) / (h1 * (h1 + h2)) * s(0, 1)
                 + (h1 + h2) / (h1 * h2) * s(1, 2) - h1 / (h2 * (h1 + h2)) * s(2, 3))
        h1, h2 = dx[-2], dx[-1]
        last = (h2 / (h1 * (h1 + h2)) * s(-3, -2) - (h2 + h1) / (h1 * h2) * s(-2, -1)
                + (2.0 * h2 + h1) / (h2 * (h1 + h2)) * s(-1))
    return np.concatenate([first, interior, last], axis=ax)


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """Central differences inside, one-sided ones at the edges; a linear map
    of ``f`` whose coefficients are smooth in the spacings, so differentiable
    in both."""
    nd = np.ndim(f)
    axes = tuple(range(nd)) if axis is None else _norm_axes(axis, nd)
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    hs = _spacings(varargs, f, axes)
    outs = []
    for h, ax in zip(hs, axes):
        if np.shape(f)[ax] < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical "
                             "gradient, at least (edge_order + 1) elements are required.")
        if np.ndim(h) == 0:
            outs.append(_gradient_uniform(f, h, ax, nd, edge_order))
        else:
            outs.append(_gradient_coords(f, h, ax, nd, edge_order))
    otype = np.result_type(unwrap_all(f))  # NumPy writes into an array of f's type
    otype = otype if otype.kind in "fc" else np.dtype(np.float64)
    outs = [o if np.result_type(unwrap_all(o)) == otype else o.astype(otype) for o in outs]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _norm_axes(axis, nd):
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    out = tuple(int(a) % nd for a in axes)
    if len(set(out)) != len(out):
        raise ValueError("repeated axis")
    return out


# --- cross -------------------------------------------------------------------------------
@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3- (or 2-) vectors, written with products of
    components."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = np.moveaxis(a, axisa, -1)
    b = np.moveaxis(b, axisb, -1)
    na, nb = np.shape(a)[-1], np.shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return z
    a2 = a[..., 2] if na == 3 else None
    b2 = b[..., 2] if nb == 3 else None
    x = (a1 * b2 if b2 is not None else 0 * a1 * b0) - (a2 * b1 if a2 is not None else 0 * a0 * b1)
    y = (a2 * b0 if a2 is not None else 0 * a0 * b0) - (a0 * b2 if b2 is not None else 0 * a0 * b0)
    c = np.stack(np.broadcast_arrays(x, y, z), axis=-1)
    return np.moveaxis(c, -1, axisc)


@implements(np.linalg.cross)
def linalg_cross(x1, x2, /, *, axis=-1):
    """``np.linalg.cross``: the array-API form of :func:`cross` (3-vectors only)."""
    if np.shape(x1)[axis] != 3 or np.shape(x2)[axis] != 3:
        raise ValueError("tapestry: np.linalg.cross needs 3-vectors along axis "
                         f"{axis}; got shapes {np.shape(x1)} and {np.shape(x2)}.")
    return cross(x1, x2, axis=axis)


# --- trapezoid ---------------------------------------------------------------------------
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoid rule: ``sum(d * (y[1:] + y[:-1]) / 2)``."""
    nd = np.ndim(y)
    axis = axis % nd
    if x is None:
        d = dx
    else:
        x = _arr(x)
        d = diff(x) if np.ndim(x) == 1 else diff(x, axis=axis)
        if np.ndim(x) == 1:
            d = _along(d, axis, nd)
    lo = y[_slice(nd, axis, slice(None, -1))]
    hi = y[_slice(nd, axis, slice(1, None))]
    return np.sum(d * (lo + hi) / 2.0, axis=axis)


implements(*[f for f in (getattr(np, "trapezoid", None), getattr(np, "trapz", None))
             if f is not None])(trapezoid)


# --- interp ------------------------------------------------------------------------------
def _periodic(x, xp, fp, period):
    """NumPy's reduction of a periodic problem to an ordinary one."""
    if period == 0:
        raise ValueError("period must be a non-zero value")
    period = abs(period)
    x = np.remainder(x, period)
    xp = np.remainder(xp, period)
    order = np.argsort(xp)
    xp = xp[order]
    fp = fp[order]
    xp = np.concatenate([xp[-1:] - period, xp, xp[0:1] + period])
    fp = np.concatenate([fp[-1:], fp, fp[0:1]])
    return x, xp, fp


def _as_double(v):
    if isinstance(v, (list, tuple)):
        v = np.asarray(v)
    want = np.complex128 if np.iscomplexobj(unwrap_all(v)) else np.float64
    if np.result_type(unwrap_all(v)) == want:
        return v
    return v.astype(want) if v.__class__ is Var else np.asarray(v, dtype=want)


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation, differentiable in ``x``, ``fp``,
    ``left`` and ``right``; the knots ``xp`` must be constant (the result is
    not differentiable where ``x`` crosses a knot anyway, and moving knots
    is rarely what a model means)."""
    if xp.__class__ is Var:
        raise NotImplementedError(
            "tapestry: np.interp is not differentiable in xp (the knots); pass them "
            "as a constant (tapestry.stop_gradient(xp)) or write the interpolation "
            "with np.searchsorted and arithmetic.")
    xp = np.asarray(xp, dtype=float)
    x, fp = _as_double(x), _as_double(fp)  # NumPy computes in double precision
    if period is not None:
        x, xp, fp = _periodic(x, xp, fp, unwrap_all(period))
        left = right = None
    if np.ndim(xp) != 1 or np.ndim(fp) != 1 or len(xp) != len(fp):
        raise ValueError("fp and xp are not of the same length.")
    if len(xp) == 0:
        raise ValueError("array of sample points is empty")
    xv = np.asarray(unwrap_all(x), dtype=float)
    if len(xp) == 1:
        y = np.broadcast_to(fp[0], xv.shape) + 0.0 * x
    else:
        j = np.clip(np.searchsorted(xp, xv, side="right") - 1, 0, len(xp) - 2)
        x0, dxp = xp[j], xp[j + 1] - xp[j]
        f0, f1 = fp[j], fp[j + 1]
        slope = (f1 - f0) / np.where(dxp == 0, 1.0, dxp)
        y = np.where(xv == xp[j + 1], f1, f0 + slope * (x - x0))
    y = np.where(xv < xp[0], fp[0] if left is None else left, y)
    return np.where(xv > xp[-1], fp[-1] if right is None else right, y)


# --- convolve / correlate ------------------------------------------------------------------
def _transpose_of(v):
    """``v`` as the transpose (not adjoint) needs it: conjugation undone."""
    return np.conjugate(v) if np.iscomplexobj(unwrap_all(v)) else v


_conv_full = Primitive(lambda a, v: np.convolve(a, v, "full"), "convolve", vjps=(
    lambda g, ans, a, v: np.correlate(g, _transpose_of(v), "valid"),
    lambda g, ans, a, v: np.correlate(g, _transpose_of(a), "valid")))


def _mode_slice(n, m, mode):
    """The part of the full convolution (length n + m - 1) a mode keeps."""
    lo, hi = min(n, m), max(n, m)
    if mode in ("full", 2):
        return slice(None)
    if mode in ("same", 1):
        start = (lo - 1) // 2
        return slice(start, start + hi)
    if mode in ("valid", 0):
        return slice(lo - 1, hi)
    raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")


@implements(np.convolve)
def convolve(a, v, mode="full"):
    """Discrete linear convolution; its transposes are correlations."""
    a, v = np.ravel(a), np.ravel(v)
    n, m = np.shape(a)[0], np.shape(v)[0]
    if n == 0:
        raise ValueError("a cannot be empty")
    if m == 0:
        raise ValueError("v cannot be empty")
    return _conv_full(a, v)[_mode_slice(n, m, mode)]


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    """``correlate(a, v) = convolve(a, conj(v)[::-1])``, mode for mode."""
    a, v = np.ravel(a), np.ravel(v)
    if np.iscomplexobj(unwrap_all(v)):
        v = np.conjugate(v)
    n, m = np.shape(a)[0], np.shape(v)[0]
    if mode in ("same", 1) and m > n > 0:
        # NumPy swaps the operands and reverses the result: the window of
        # the full correlation is centred the other way round.
        start = (n - 1) - (n - 1) // 2
        return convolve(a, v[::-1], "full")[start:start + m]
    return convolve(a, v[::-1], mode)


# --- evenly spaced values ------------------------------------------------------------------
def _spaced(start, stop, num, endpoint, axis):
    """``start + t (stop - start)`` for ``t`` in [0, 1] with the endpoints exact;
    returns the values (the new axis at ``axis``) and the step."""
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    num = int(num)
    div = (num - 1) if endpoint else num
    shape = np.broadcast_shapes(np.shape(start), np.shape(stop))
    t = np.arange(num, dtype=float).reshape((-1,) + (1,) * len(shape))
    delta = stop - start
    step = delta / div if div > 0 else np.nan * delta
    y = start + t * step if div > 0 else start + 0.0 * t * delta
    if endpoint and num > 1:
        y = np.where((np.arange(num) == num - 1).reshape(np.shape(t)), stop, y)
    y = np.broadcast_to(y, (num,) + shape)
    return np.moveaxis(y, 0, axis), step


def _cast_out(y, dtype, plain):
    """Cast to NumPy's output dtype; an integer dtype floors the values
    (piecewise constant), so it returns the plain result."""
    want = np.dtype(dtype) if dtype is not None else np.result_type(plain)
    if want.kind not in "fc":
        return plain
    return y if np.result_type(unwrap_all(y)) == want else y.astype(want)


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """Evenly spaced values, differentiable in ``start`` and ``stop``."""
    plain = np.linspace(unwrap_all(start), unwrap_all(stop), num, endpoint, retstep, dtype,
                        axis)
    y, step = _spaced(start, stop, num, endpoint, axis)
    y = _cast_out(y, dtype, plain[0] if retstep else plain)
    return (y, step) if retstep else y


@implements(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``base ** linspace(start, stop)``; differentiable in the base too."""
    plain = np.logspace(unwrap_all(start), unwrap_all(stop), num, endpoint,
                        unwrap_all(base), dtype, axis)
    y, _ = _spaced(start, stop, num, endpoint, axis)
    if np.ndim(base) > 0:
        base = np.expand_dims(base, axis)
    return _cast_out(np.power(base, y), dtype, plain)


@implements(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """``start * (stop / start) ** t``, endpoints exact; real inputs only."""
    plain = np.geomspace(unwrap_all(start), unwrap_all(stop), num, endpoint, dtype, axis)
    if np.iscomplexobj(plain):
        raise NotImplementedError("tapestry: np.geomspace with complex values has no "
                                  "gradient rule; use np.exp(np.linspace(log a, log b)).")
    t, _ = _spaced(np.zeros(()), np.ones(()), num, endpoint, 0)
    shape = np.broadcast_shapes(np.shape(start), np.shape(stop))
    t = np.reshape(t, (-1,) + (1,) * len(shape))
    y = start * np.power(stop / start, t)
    first = (np.arange(num) == 0).reshape(np.shape(t))
    y = np.where(first, start, y)
    if endpoint and num > 1:
        y = np.where((np.arange(num) == num - 1).reshape(np.shape(t)), stop, y)
    y = np.moveaxis(np.broadcast_to(y, (num,) + shape), 0, axis)
    return _cast_out(y, dtype, plain)


# --- grids and windows ---------------------------------------------------------------------
@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays: each input reshaped along its own axis and broadcast."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    outs = []
    for i, x in enumerate(xi):
        shape = [1] * nd
        shape[i] = -1
        if indexing == "xy" and nd > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        outs.append(np.reshape(x, shape))
    if not sparse:
        outs = list(np.broadcast_arrays(*outs))
    return tuple(outs)


def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """Windows as a gather: the same NumPy call on an array of positions
    says which element each window entry reads (a copy, not a view)."""
    if writeable:
        raise TypeError("tapestry: sliding_window_view(..., writeable=True) would let "
                        "code write into a traced array; drop writeable=.")
    pos = np.arange(int(np.prod(np.shape(x), dtype=np.int64))).reshape(np.shape(x))
    idx = np.lib.stride_tricks.sliding_window_view(pos, window_shape, axis)
    return np.take(np.ravel(x), idx)


implements(np.lib.stride_tricks.sliding_window_view)(sliding_window_view)


# --- selection -----------------------------------------------------------------------------
@implements(np.select)
def select(condlist, choicelist, default=0):
    """The first choice whose condition holds, as a chain of ``np.where``."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(choicelist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    conds = [np.asarray(unwrap_all(c)) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != bool:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    shape = np.broadcast_shapes(*[np.shape(c) for c in conds],
                                *[np.shape(c) for c in choicelist], np.shape(default))
    out = np.broadcast_to(default, shape)
    for c, v in zip(reversed(conds), reversed(list(choicelist))):
        out = np.where(c, v, out)
    return out


def _piece_conditions(x, condlist, n_funcs):
    xv = unwrap_all(x)
    if np.isscalar(condlist) or (not isinstance(condlist[0], (list, np.ndarray))
                                 and np.ndim(xv) != 0):
        condlist = [condlist]
    conds = [np.asarray(unwrap_all(c), dtype=bool) for c in condlist]
    if n_funcs == len(conds) + 1:
        rest = ~np.any(np.stack([np.broadcast_to(c, np.shape(xv)) for c in conds]), axis=0) \
            if conds else np.ones(np.shape(xv), bool)
        conds.append(rest)
    elif n_funcs != len(conds):
        raise ValueError(f"with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected")
    return [np.broadcast_to(c, np.shape(xv)) for c in conds]


@implements(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """Each function is evaluated only where its condition holds (as NumPy
    does); its values are spread back with a gather and merged with
    ``np.where``, later conditions winning."""
    conds = _piece_conditions(x, condlist, len(funclist))
    shape = np.shape(x)
    y = np.zeros(shape, np.result_type(unwrap_all(x)))
    for c, fn in zip(conds, funclist):
        if not c.any():
            continue
        if not callable(fn):
            y = np.where(c, fn, y)
            continue
        vals = fn(np.ravel(x)[np.flatnonzero(c)], *args, **kw)
        if np.ndim(vals) == 0:
            y = np.where(c, vals, y)
            continue
        pos = np.clip(np.cumsum(c.ravel()) - 1, 0, None).reshape(shape)
        y = np.where(c, np.take(np.ravel(vals), pos), y)
    want = np.result_type(unwrap_all(x))  # NumPy fills an array of x's dtype
    return y if np.result_type(unwrap_all(y)) == want or want.kind not in "fc" \
        else y.astype(want)

