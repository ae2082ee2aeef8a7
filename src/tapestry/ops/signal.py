"""One-dimensional signals: interpolation (interp), convolution and
correlation (convolve, correlate).

interp is a composite (a gather of the neighbours and a linear blend); the
full 1-D convolution is a primitive whose rules are correlations, and the
other modes and correlate are slices of it.
"""
from __future__ import annotations

import operator

import numpy as np

from ..core.batching import batch_size, shape_of
from ..core.primitive import Primitive, implements
from ..core.registry import FUNCTIONS
from ..core.var import unwrap_all
from ..core.batched import NESTED, TRACED, constant_values
from ..core.staged import Staged


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
    return v.astype(want) if v.__class__ in TRACED else np.asarray(v, dtype=want)


def _as_knots(xp):
    """``xp`` as float64 knots; a staged ``xp`` stays staged (``np.asarray``
    would pin its value: a re-trace for every new value)."""
    if xp.__class__ is Staged:
        return xp if xp.dtype == np.float64 else xp.astype(np.float64)
    return np.asarray(xp, dtype=float)


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation, differentiable in ``x``, ``fp``,
    ``left``, ``right`` and the knots ``xp`` (between knots the blend is a
    smooth function of its two knots; where ``x`` sits on a knot, as where
    it crosses one, the result has a kink)."""
    # traced knots stay traced (the blend below is differentiable in them);
    # staged knots (inside jit) are constants: as plain
    xp = _as_double(xp) if xp.__class__ in NESTED else _as_knots(xp)
    x, fp = _as_double(x), _as_double(fp)  # NumPy computes in double precision
    if period is not None:
        x, xp, fp = _periodic(x, xp, fp, unwrap_all(period))
        left = right = None
    if np.ndim(xp) != 1 or np.ndim(fp) != 1 or len(xp) != len(fp):
        raise ValueError("fp and xp are not of the same length.")
    if len(xp) == 0:
        raise ValueError("array of sample points is empty")
    xv = constant_values(x, float)
    if len(xp) == 1:
        y = np.broadcast_to(fp[0], xv.shape) + 0.0 * x
    else:
        j = np.clip(np.searchsorted(constant_values(xp, float), xv, side="right") - 1,
                    0, len(xp) - 2)
        # the knots are a plain array: NumPy would index them itself, which it
        # cannot do with per-item positions j (x batched by a vmap)
        at = FUNCTIONS[operator.getitem]
        x0, x1, f0, f1 = at(xp, j), at(xp, j + 1), at(fp, j), at(fp, j + 1)
        dxp = x1 - x0
        slope = (f1 - f0) / np.where(dxp == 0, 1.0, dxp)
        y = np.where(xv == x1, f1, f0 + slope * (x - x0))
    xpv = constant_values(xp, float)
    y = np.where(xv < xpv[0], fp[0] if left is None else left, y)
    return np.where(xv > xpv[-1], fp[-1] if right is None else right, y)


# --- convolve / correlate ------------------------------------------------------------------
def _transpose_of(v):
    """``v`` as the transpose (not adjoint) needs it: conjugation undone."""
    return np.conjugate(v) if np.iscomplexobj(unwrap_all(v)) else v


def _batch_conv_full(prim, args, batched, kwargs):
    """Full convolutions of a batch: one shifted product per entry of the
    shorter operand, summed (each a NumPy call on the whole batch).  When
    that operand is longer than the batch, looping over items is cheaper."""
    a, v = args
    ba, bv = batched
    if shape_of(v)[-1] > shape_of(a)[-1]:
        a, v, ba, bv = v, a, bv, ba  # convolution commutes
    la, lv = shape_of(a)[-1], shape_of(v)[-1]
    n = batch_size(args, batched)
    if lv > max(n, 8) or la == 0 or lv == 0:
        return NotImplemented
    a2 = a if ba else np.reshape(a, (1, la))
    out = 0
    for j in range(lv):
        vj = v[:, j:j + 1] if bv else v[j]
        out = out + np.pad(a2 * vj, ((0, 0), (j, lv - 1 - j)))
    return out if ba else np.broadcast_to(out, (n, la + lv - 1))


_conv_full = Primitive(lambda a, v: np.convolve(a, v, "full"), "convolve",
                       batch=_batch_conv_full, vjps=(
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
