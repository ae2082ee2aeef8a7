"""Elementwise ufuncs and their VJPs.

Each entry is the ufunc and one rule per argument, ``rule(g, ans, x, ...)``.
Binary rules are wrapped by :func:`unbroadcast`, so they are written as if
no broadcasting happened.

Complex values follow one convention (docs/complex.md): a cotangent ``c``
pairs with a tangent ``t`` by ``Re(c * t)``, so holomorphic rules are
``g * f'(z)``, never conjugated, and the real rules below hold unchanged.
The cotangent of a *real* value may then carry an imaginary part that means
nothing (``1j * x`` hands ``x`` the cotangent ``1j * g``); only its real part
counts.  So every rule from complex to real (abs, angle, real, imag,
var/std, a cast) reads ``Re(g)``, and a real leaf's gradient is the real
part of its cotangent.  Ufuncs NumPy refuses for complex (cbrt, fabs,
arctan2, hypot, logaddexp, copysign, fmod, ...) raise NumPy's TypeError,
named by tapestry, on complex inputs.
"""
from __future__ import annotations

import importlib.util
import math

import numpy as np

from ..core import batching
from ..core.primitive import (KEEP_ALL, KEEP_ANS, KEEP_MIN_SIZE, KEEP_OTHER, KEEP_SHAPES,
                              declares_rules,
                              Primitive, implements, negate_cotangent, scale_cotangent,
                              shape_of, unbroadcast)
from ..core.var import astype as _var_astype, reject_out, unwrap_all
from ..core.batched import NESTED, all_items
from .common import implements_if, near_point, plain_dtype, series


def is_complex(x):
    """Whether ``x`` (array, traced array, NumPy or Python scalar) is complex."""
    dt = getattr(x, "dtype", None)
    return isinstance(x, complex) if dt is None else dt.kind == "c"


def _where_nonzero(num, den):
    """``num / den`` where ``den != 0`` and 0 where it is (real ``den``)."""
    zero = den == 0
    return np.where(zero, 0.0, num / np.where(zero, 1.0, den))


def _nan_at_zero(den, coefficient):
    """``coefficient(safe den)``, NaN where ``den == 0``: the derivative of a
    subgradient choice at the origin, which does not exist.  ``hypot(x, y)**2``
    has second derivative 2 at 0, but hypot's gradient x / hypot has no
    derivative there, and the cotangent reaching it (2 hypot = 0) would hide
    the 0 * inf: NaN whatever the cotangent, not a silent 0.  The rules
    multiply ``g`` by it, so forward mode's transposition keeps the NaN."""
    bad = unwrap_all(den) == 0
    if not np.any(all_items(bad)):  # every item's values: no branch per item
        return coefficient(den)
    return np.where(bad, np.nan, coefficient(np.where(bad, 1.0, den)))


def _ratio_num_rule(g, ans, num, den):
    return unbroadcast(g * _nan_at_zero(den, lambda d: 1 / d), shape_of(num))


def _ratio_den_rule(g, ans, num, den):
    return unbroadcast(-g * _nan_at_zero(den, lambda d: num / (d * d)), shape_of(den))


#: ``num / den``, 0 where ``den == 0`` (real ``den``): the least-norm subgradient
#: of abs, angle, hypot and the norms at the origin.  A primitive so that its own
#: derivative there is NaN (see ``_undefined_at_zero``) rather than the 0 of
#: ``np.where``'s constant branch.
_over_nonzero = Primitive(_where_nonzero, "gradient of a norm-like function",
                          vjps=(_ratio_num_rule, _ratio_den_rule), batch=batching.elementwise)


def unbroadcasting(rule, i):
    """``rule`` with its cotangent summed back to argument ``i``'s shape."""
    def rule_unbroadcast(g, ans, *args, **kw):
        c = rule(g, ans, *args, **kw)
        return None if c is None else unbroadcast(c, args[i].shape)
    return rule_unbroadcast


def _zero_cotangent(g, ans, *args):
    """The rule of an argument the result is piecewise constant in."""
    return None


@declares_rules
def defunary(ufunc, rule, keep=KEEP_ALL):
    """Declare ``ufunc`` with the VJP ``rule(g, ans, x)`` and register it."""
    return implements(ufunc)(Primitive(ufunc, vjps=(rule,), keep=keep))


@declares_rules
def defbinary(ufunc, rule_x, rule_y, keep=KEEP_ALL):
    """Declare binary ``ufunc`` with rules written as if no broadcasting
    happened (``None``: not differentiable in that argument)."""
    vjps = (rule_x and unbroadcasting(rule_x, 0), rule_y and unbroadcasting(rule_y, 1))
    return implements(ufunc)(Primitive(ufunc, vjps=vjps, keep=keep))


# --- arithmetic --------------------------------------------------------------
# add and multiply, the hottest rules, check shapes inline instead of
# wrapping with ``unbroadcasting`` (one call less per node).
implements(np.add)(Primitive(np.add, keep=KEEP_SHAPES, vjps=(
    lambda g, ans, x, y: g if g.shape == x.shape else unbroadcast(g, x.shape),
    lambda g, ans, x, y: g if g.shape == y.shape else unbroadcast(g, y.shape))))
defbinary(np.subtract, lambda g, ans, x, y: g, lambda g, ans, x, y: negate_cotangent(g),
          keep=KEEP_SHAPES)
def _times_x(g, ans, x, y):
    """d(x*y)/dx: ``g * y`` summed back to ``x``'s shape (no pass for a sum's 1s)."""
    c = scale_cotangent(g, y) if type(g) is np.ndarray and g.size >= KEEP_MIN_SIZE else g * y
    return c if c.shape == x.shape else unbroadcast(c, x.shape)


def _times_y(g, ans, x, y):
    c = scale_cotangent(g, x) if type(g) is np.ndarray and g.size >= KEEP_MIN_SIZE else g * x
    return c if c.shape == y.shape else unbroadcast(c, y.shape)


implements(np.multiply)(Primitive(np.multiply, keep=KEEP_OTHER, vjps=(_times_x, _times_y)))
defbinary(np.true_divide, lambda g, ans, x, y: g / y, lambda g, ans, x, y: -g * ans / y)
defunary(np.negative, lambda g, ans, x: negate_cotangent(g), keep=KEEP_SHAPES)
defunary(np.positive, lambda g, ans, x: g)
defunary(np.reciprocal, lambda g, ans, x: -g * ans * ans)
defunary(np.square, lambda g, ans, x: g * 2 * x)
defunary(np.conjugate, lambda g, ans, x: np.conjugate(g))


def _pow_x(g, ans, x, y):
    """d/dx x**y = y x**(y-1); 0 for y == 0 at x == 0 (not 0 * inf).  Only
    that point is guarded: elsewhere y x**(y-1) stays an expression in y, so
    the mixed derivative d/dy (y x**(y-1)) = 1/x at y = 0 is right (a guard
    on y == 0 alone made the exponent a constant there and gave x).

    Scalar exponents are written so that NumPy reuses the temporaries
    (``g * x * 2`` allocates one array; ``x**2`` is the common case).
    A staged exponent (inside ``jit``) takes the plain path too: the replay
    is the plain call's bits (its tests ``y == 2`` are guards on a bool,
    which a new exponent other than 2, 1, 0 passes)."""
    if y.__class__ not in NESTED and np.ndim(y) == 0:
        if y == 2:
            return g * x * 2
        if y == 1:
            return g
        if y == 0:
            return g * 0.0
        return g * x ** (y - 1) * y
    return g * y * x ** np.where((y == 0) & (x == 0), 1, y - 1)


def _pow_y(g, ans, x, y):
    # d/dy x**y = log(x) x**y; 0 where x == 0 (the limit from the right).
    # A complex result from a real base (x < 0 allowed): log of x as complex.
    safe = np.where(x == 0, 1.0, x)
    if is_complex(ans) and not is_complex(safe):
        safe = safe * (1 + 0j)
    return g * np.where(x == 0, 0.0, ans * np.log(safe))


defbinary(np.power, _pow_x, _pow_y)
defbinary(np.float_power, _pow_x, _pow_y)

# --- exp / log family ----------------------------------------------------------
implements(np.exp)(Primitive(np.exp, keep=KEEP_ANS,
                             vjps=(lambda g, ans, x: scale_cotangent(g, ans),)))
defunary(np.exp2, lambda g, ans, x: g * ans * np.log(2.0))
defunary(np.expm1, lambda g, ans, x: g * (ans + 1))
defunary(np.log, lambda g, ans, x: g / x)
defunary(np.log2, lambda g, ans, x: g / (x * np.log(2.0)))
defunary(np.log10, lambda g, ans, x: g / (x * np.log(10.0)))
defunary(np.log1p, lambda g, ans, x: g / (x + 1))
defunary(np.sqrt, lambda g, ans, x: g * 0.5 / ans, keep=KEEP_ANS)
defunary(np.cbrt, lambda g, ans, x: g / (3 * ans * ans))


def _share(exp):
    """d logaddexp(x, y)/dx = exp(x - ans): the argument's share of the sum.
    Where the argument is the infinite result itself (x = +inf, y finite)
    ``x - ans`` is inf - inf = nan; the limit there is 1 (and 0 for the
    other, finite argument, which ``exp(y - inf)`` already gives)."""
    def rule(g, ans, x, y):
        with np.errstate(invalid="ignore"):
            w = exp(x - ans)
        if np.isinf(all_items(ans)).any():  # any item's: the where is exact for all
            w = np.where(np.isinf(ans) & (x == ans), 1.0, w)
        return g * w
    return rule


def _swap(rule):
    return lambda g, ans, x, y: rule(g, ans, y, x)


defbinary(np.logaddexp, _share(np.exp), _swap(_share(np.exp)))
defbinary(np.logaddexp2, _share(np.exp2), _swap(_share(np.exp2)))

# --- trigonometric and hyperbolic --------------------------------------------
defunary(np.sin, lambda g, ans, x: g * np.cos(x))
defunary(np.cos, lambda g, ans, x: -g * np.sin(x))
defunary(np.tan, lambda g, ans, x: g * (1 + ans * ans))
defunary(np.arcsin, lambda g, ans, x: g / np.sqrt(1 - x * x))
defunary(np.arccos, lambda g, ans, x: -g / np.sqrt(1 - x * x))
defunary(np.arctan, lambda g, ans, x: g / (1 + x * x))
defunary(np.sinh, lambda g, ans, x: g * np.cosh(x))
defunary(np.cosh, lambda g, ans, x: g * np.sinh(x))
defunary(np.tanh, lambda g, ans, x: g * (1 - ans * ans), keep=KEEP_ANS)
defunary(np.arcsinh, lambda g, ans, x: g / np.sqrt(x * x + 1))
# sqrt(x - 1) sqrt(x + 1), not sqrt(x*x - 1): the same for real x > 1, and
# the principal branch of arccosh' for complex x (whose cut is (-inf, 1]).
defunary(np.arccosh, lambda g, ans, x: g / (np.sqrt(x - 1) * np.sqrt(x + 1)))
defunary(np.arctanh, lambda g, ans, x: g / (1 - x * x))
defunary(np.deg2rad, lambda g, ans, x: g * (np.pi / 180))
defunary(np.rad2deg, lambda g, ans, x: g * (180 / np.pi))
defunary(np.radians, lambda g, ans, x: g * (np.pi / 180))
defunary(np.degrees, lambda g, ans, x: g * (180 / np.pi))
defbinary(np.arctan2,
          lambda g, ans, y, x: g * x / (x * x + y * y),
          lambda g, ans, y, x: -g * y / (x * x + y * y))
# hypot(x, y) = ||(x, y)||: gradient (x, y) / hypot, and 0 at (0, 0), the
# subgradient of least norm (as np.linalg.norm and abs; docs/ops.md).
defbinary(np.hypot,
          lambda g, ans, x, y: g * _over_nonzero(x, ans),
          lambda g, ans, x, y: g * _over_nonzero(y, ans))

# --- piecewise -----------------------------------------------------------------
# abs'(0) = 0 (the subgradient of least norm); sign is piecewise constant on
# reals.  |z| of a complex z: d|z| = Re(conj(z) dz) / |z|, so the cotangent
# is Re(g) conj(z) / |z| (0 at 0).
def _abs_rule(g, ans, x):
    if not is_complex(x):
        return g * np.sign(x)
    return np.real(g) * _over_nonzero(np.conjugate(x), ans)


absolute = defunary(np.absolute, _abs_rule)
defunary(np.fabs, lambda g, ans, x: g * np.sign(x))
# Ties in maximum/minimum split the cotangent evenly (a symmetric choice that
# keeps max(x, x) == x exact in derivative).
for _select in (np.maximum, np.minimum, np.fmax, np.fmin):
    defbinary(_select,
              lambda g, ans, x, y: _selected(g, _tie_weight(x, y, ans)),
              lambda g, ans, x, y: _selected(g, _tie_weight(y, x, ans)))
# copysign's sign argument is piecewise constant: a zero cotangent (None).
defbinary(np.copysign, lambda g, ans, x, y: g * np.sign(x) * np.sign(ans), _zero_cotangent)
defbinary(np.fmod, lambda g, ans, x, y: g, lambda g, ans, x, y: -g * np.trunc(x / y))
# heaviside(x, h) is h where x == 0 (0 or 1 elsewhere): piecewise constant in
# x, but the value itself in h at x's zeros (np.heaviside(k, 0.5) of exact data).
defbinary(np.heaviside, _zero_cotangent, lambda g, ans, x, y: _selected(g, x == 0))
defbinary(np.remainder, lambda g, ans, x, y: g, lambda g, ans, x, y: -g * np.floor(x / y))


def _selected(g, w):
    """``g * w`` where ``w`` is nonzero and an exact 0 elsewhere.  Forward
    mode transposes these rules, feeding the tangent as ``g``: an input
    fmax / fmin / nan_to_num / nanmax leaves out (a NaN beside a number) may
    carry a NaN or inf tangent (sqrt's at a negative), and NaN * 0 would make
    the whole jvp NaN although the value never read that entry."""
    return np.where(w != 0, g * w, 0)


def _tie_weight(a, b, ans):
    """1 where ``a`` alone produced ``ans``, 0.5 on ties, 0 elsewhere (in
    ``ans``'s dtype, so float32 cotangents stay float32)."""
    w = np.where(a == ans, np.where(a == b, 0.5, 1.0), 0.0)
    return w.astype(np.result_type(ans), copy=False)


# --- clip ----------------------------------------------------------------------
def _clip_masks(x, lo, hi, ans):
    """Where the output came from x, from lo and from hi.  x wins its closed
    interval [lo, hi] (PyTorch's convention: the gradient passes at the
    bounds); if lo > hi NumPy returns hi, and so does the rule."""
    inside = np.ones(np.shape(x), bool)
    if lo is not None:
        inside = inside & (x >= lo)
    if hi is not None:
        inside = inside & (x <= hi)
    at_hi = ~inside & (ans == hi) if hi is not None else np.zeros_like(inside)
    at_lo = ~inside & ~at_hi
    return inside, at_lo, at_hi


def _clip_rule(which):
    def clip_pullback(g, ans, x, lo, hi):
        mask = _clip_masks(x, lo, hi, ans)[which]
        return unbroadcast(_selected(g, mask), np.shape((x, lo, hi)[which]))
    return clip_pullback


_clip = Primitive(np.clip, "clip", vjps=(_clip_rule(0), _clip_rule(1), _clip_rule(2)),
                  batch=batching.elementwise)


def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,
         max=np._NoValue, **kwargs):
    """np.clip with either spelling of the bounds; ``None`` means unbounded."""
    reject_out("clip", out)
    lo = None if a_min is np._NoValue else a_min
    hi = None if a_max is np._NoValue else a_max
    lo = lo if min is np._NoValue else min
    hi = hi if max is np._NoValue else max
    if lo is None and hi is None:
        return a
    return _clip(a, lo, hi)


implements(np.clip)(clip)


# --- nan_to_num, astype, sinc -------------------------------------------------
def _nan_to_num_rule(g, ans, x, *_):
    """Non-finite entries are replaced by constants: their derivative is 0.
    A complex entry's real and imaginary parts are replaced separately."""
    xv = unwrap_all(x)
    if not is_complex(xv):
        return _selected(g, np.isfinite(xv))
    return _selected(np.real(g), np.isfinite(xv.real)) + 1j * _selected(np.imag(g), np.isfinite(xv.imag))


_nan_to_num = Primitive(lambda x, nan, posinf,
                        neginf: np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf),
                        "nan_to_num", vjps=(_nan_to_num_rule,), batch=batching.elementwise)
@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    if not copy:
        # NumPy writes into x; a traced x cannot be written into, and
        # returning a new value while x keeps its nans would be silently wrong
        raise TypeError("tapestry: np.nan_to_num(x, copy=False) writes into x, which is "
                        "traced (a differentiated or batched value) and cannot be written "
                        "into; use the result instead: x = np.nan_to_num(x).")
    return _nan_to_num(x, nan, posinf, neginf)


def _astype_rule(g, ans, x, dtype):
    """A float/complex cast: the cotangent cast back to ``x``'s dtype.  When
    ``x`` or the result is real, only ``Re(g)`` counts (complex -> real drops
    the imaginary part, whose derivative is then 0)."""
    if is_complex(g) and not (is_complex(x) and is_complex(ans)):
        g = np.real(g)
    return g.astype(np.result_type(x))


_astype = Primitive(lambda x, dtype: x.astype(dtype), "astype", vjps=(_astype_rule,),
                    batch=batching.elementwise)
implements("astype")(_astype)


# sinc'(x) = sum_{k>=1} c_k x^(2k-1), c_k = (-1)^k 2k pi^(2k) / (2k+1)!: below
# |x| = 1/4 the 12th term is under 1e-30, so the series is exact in double.
_SINC_D1 = tuple((-1) ** k * 2 * k * math.pi ** (2 * k) / math.factorial(2 * k + 1)
                 for k in range(1, 13))


def _sinc_rule(g, ans, x):
    """sinc(x) = sin(pi x) / (pi x);  sinc'(x) = (cos(pi x) - sinc(x)) / x,
    a series near 0 (sinc''(0) = -pi^2/3, and every order after it)."""
    return g * near_point(x, 0.0, 0.25, lambda t: t * series(t * t, _SINC_D1),
                          lambda t: (np.cos(np.pi * t) - np.sinc(t)) / t)


_sinc = Primitive(np.sinc, "sinc", vjps=(_sinc_rule,), batch=batching.elementwise)
implements(np.sinc)(_sinc)


# --- complex-only functions: sign, angle, real_if_close, sort_complex --------------
@implements(np.sign)
def sign(x, **kwargs):
    """Piecewise constant on reals (a plain array); ``z / |z|`` on complex
    values (0 at 0), differentiated through abs and divide."""
    if not is_complex(x):
        return np.sign(unwrap_all(x), **kwargs)
    if kwargs:
        raise NotImplementedError(f"tapestry: np.sign(..., {', '.join(kwargs)}=...) of a "
                                  "complex traced array is not supported; drop the keywords.")
    return _where_nonzero(x, np.abs(x))


# --- casts and scans --------------------------------------------------------------------
@implements_if("astype")
def astype(x, dtype, /, *, copy=True, device=None):
    """Float and complex targets are differentiable (the cotangent is cast
    back); integer and boolean targets are piecewise constant: a plain array."""
    if device not in (None, "cpu"):
        raise ValueError(f"tapestry: np.astype device={device!r}; only 'cpu' is supported.")
    return _var_astype(x, dtype)


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
_modf_frac = Primitive(lambda x: np.modf(x)[0], "modf", vjps=(lambda g, ans, x: g,),
                       batch=batching.elementwise)


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
_frexp_mantissa = Primitive(lambda x: np.frexp(x)[0], "frexp", batch=batching.elementwise, vjps=(
    lambda g, ans, x: g * _pow2(-np.frexp(unwrap_all(x))[1], plain_dtype(g)),))


@implements(np.frexp)
def frexp(x, **kwargs):
    """(mantissa, exponent): the mantissa ``x / 2**e`` is differentiable
    (derivative ``2**-e``), the integer exponent piecewise constant."""
    _no_ufunc_kwargs("frexp", kwargs)
    return _frexp_mantissa(x), np.frexp(unwrap_all(x))[1]


_ldexp = Primitive(lambda x1, x2: np.ldexp(x1, x2), "ldexp", batch=batching.elementwise, vjps=(
    lambda g, ans, x1, x2: unbroadcast(g * _pow2(x2, plain_dtype(g)), shape_of(x1)),
    lambda g, ans, x1, x2: None))  # the integer exponent: zero cotangent


@implements(np.ldexp)
def ldexp(x1, x2, **kwargs):
    """x1 * 2**x2: derivative 2**x2 in x1; the integer x2 is a constant."""
    _no_ufunc_kwargs("ldexp", kwargs)
    return _ldexp(x1, x2)


# i1(x) / x = sum_k (x^2/4)^k / (2 k! (k+1)!): for |x| < 1/2 the 10th term is under 1e-30.
_I1_OVER_X = tuple(1 / (2 * math.factorial(k) * math.factorial(k + 1)) for k in range(10))


def _i1_rule(g, ans, x):
    """i1'(x) = i0(x) - i1(x) / x, with i1(x) / x a series near 0 (i1'(0) =
    1/2, and i1's higher derivatives there, i.e. np.i0's)."""
    return g * (np.i0(x) - near_point(x, 0.0, 0.5, lambda t: series(t * t / 4, _I1_OVER_X),
                                      lambda t: _i1(t) / t))


def _i1_forward(x):
    import scipy.special  # present: checked when the rule was registered
    return scipy.special.i1(x)


_i1 = Primitive(_i1_forward, "i1", vjps=(_i1_rule,), batch=batching.elementwise)
# d i0(x) / dx = i1(x), itself a primitive whose rule calls np.i0: every order.
_i0 = Primitive(np.i0, "i0", vjps=(lambda g, ans, x: g * _i1(x),), batch=batching.elementwise)
if importlib.util.find_spec("scipy") is not None:
    implements(np.i0)(_i0)


# --- unwrap --------------------------------------------------------------------------------
def _unwrap_period_rule(g, ans, p, period, discont, axis):
    """The result is p + K * period with K integer (piecewise constant)."""
    K = np.rint((unwrap_all(ans) - unwrap_all(p)) / unwrap_all(period))
    return unbroadcast(g * K.astype(plain_dtype(g)), shape_of(period))


def _batch_unwrap(prim, args, batched, kwargs):
    """unwrap along the item's axis of a batched phase (period and discont
    shared)."""
    p, period, discont, axis = args
    if any(batched[1:]):
        return NotImplemented
    return prim(p, period, discont, batching.shift_axis(axis, batching.item_ndim(p, True)))


_unwrap = Primitive(
    lambda p, period, discont, axis: np.unwrap(p, discont, axis, period=period), "unwrap",
    batch=_batch_unwrap,
    vjps=(lambda g, ans, p, period, discont, axis: g if plain_dtype(g) == plain_dtype(p)
          else _var_astype(g, plain_dtype(p)), _unwrap_period_rule))


@implements(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """p plus multiples of ``period`` that change only at jumps: derivative 1
    in p; in ``period``, the number of periods added (``discont`` is a
    threshold: piecewise constant)."""
    return _unwrap(p, period, unwrap_all(discont), axis)
