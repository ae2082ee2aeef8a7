"""Elementwise ufuncs and their VJPs.

Each entry is the ufunc and one rule per argument, ``rule(g, ans, x, ...)``.
Binary rules are wrapped by :func:`unbroadcast`, so they are written as if
no broadcasting happened.
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import (KEEP_ANS, KEEP_OTHER, KEEP_SHAPES, def_nondiff, defvjp,
                              primitive, scale_cotangent, unbroadcast)


def _ub(rule, i):
    """Undo broadcasting of ``rule``'s cotangent for argument ``i``."""
    def rule_unbroadcast(g, ans, *args, **kw):
        return unbroadcast(rule(g, ans, *args, **kw), args[i].shape)
    return rule_unbroadcast


def defunary(ufunc, rule, keep=0):
    defvjp(primitive(ufunc, keep=keep), rule)


def defbinary(ufunc, rule_x, rule_y, keep=0):
    defvjp(primitive(ufunc, keep=keep), _ub(rule_x, 0) if rule_x else None,
           _ub(rule_y, 1) if rule_y else None)


# --- arithmetic --------------------------------------------------------------
# The three hottest rules check shapes inline instead of going through _ub.
def _same_or_unbroadcast(c, x):
    return c if c.shape == x.shape else unbroadcast(c, x.shape)


defvjp(primitive(np.add, keep=KEEP_SHAPES),
       lambda g, ans, x, y: g if g.shape == x.shape else unbroadcast(g, x.shape),
       lambda g, ans, x, y: g if g.shape == y.shape else unbroadcast(g, y.shape))
defbinary(np.subtract, lambda g, ans, x, y: g, lambda g, ans, x, y: -g, keep=KEEP_SHAPES)
defvjp(primitive(np.multiply, keep=KEEP_OTHER),
       lambda g, ans, x, y: _same_or_unbroadcast(scale_cotangent(g, y), x),
       lambda g, ans, x, y: _same_or_unbroadcast(scale_cotangent(g, x), y))
defbinary(np.true_divide, lambda g, ans, x, y: g / y, lambda g, ans, x, y: -g * ans / y)
defunary(np.negative, lambda g, ans, x: -g, keep=KEEP_SHAPES)
defunary(np.positive, lambda g, ans, x: g)
defunary(np.reciprocal, lambda g, ans, x: -g * ans * ans)
defunary(np.square, lambda g, ans, x: g * 2 * x)
defunary(np.conjugate, lambda g, ans, x: np.conjugate(g))


def _pow_x(g, ans, x, y):
    # d/dx x**y = y x**(y-1); the y == 0 case is 0 (not 0 * inf at x == 0).
    if isinstance(y, (int, float)):
        return g * y * x ** (y - 1) if y != 0 else g * 0.0
    return g * y * x ** np.where(y == 0, 1, y - 1)


def _pow_y(g, ans, x, y):
    # d/dy x**y = log(x) x**y; 0 where x == 0 (the limit from the right).
    safe = np.where(x == 0, 1.0, x)
    return g * np.where(x == 0, 0.0, ans * np.log(safe))


defbinary(np.power, _pow_x, _pow_y)
defbinary(np.float_power, _pow_x, _pow_y)

# --- exp / log family ----------------------------------------------------------
defvjp(primitive(np.exp, keep=KEEP_ANS), lambda g, ans, x: scale_cotangent(g, ans))
defunary(np.exp2, lambda g, ans, x: g * ans * np.log(2.0))
defunary(np.expm1, lambda g, ans, x: g * (ans + 1))
defunary(np.log, lambda g, ans, x: g / x)
defunary(np.log2, lambda g, ans, x: g / (x * np.log(2.0)))
defunary(np.log10, lambda g, ans, x: g / (x * np.log(10.0)))
defunary(np.log1p, lambda g, ans, x: g / (x + 1))
defunary(np.sqrt, lambda g, ans, x: g * 0.5 / ans, keep=KEEP_ANS)
defunary(np.cbrt, lambda g, ans, x: g / (3 * ans * ans))
defbinary(np.logaddexp,
          lambda g, ans, x, y: g * np.exp(x - ans),
          lambda g, ans, x, y: g * np.exp(y - ans))
defbinary(np.logaddexp2,
          lambda g, ans, x, y: g * np.exp2(x - ans),
          lambda g, ans, x, y: g * np.exp2(y - ans))

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
defunary(np.arccosh, lambda g, ans, x: g / np.sqrt(x * x - 1))
defunary(np.arctanh, lambda g, ans, x: g / (1 - x * x))
defunary(np.deg2rad, lambda g, ans, x: g * (np.pi / 180))
defunary(np.rad2deg, lambda g, ans, x: g * (180 / np.pi))
defunary(np.radians, lambda g, ans, x: g * (np.pi / 180))
defunary(np.degrees, lambda g, ans, x: g * (180 / np.pi))
defbinary(np.arctan2,
          lambda g, ans, y, x: g * x / (x * x + y * y),
          lambda g, ans, y, x: -g * y / (x * x + y * y))
defbinary(np.hypot,
          lambda g, ans, x, y: g * x / ans,
          lambda g, ans, x, y: g * y / ans)

# --- piecewise -----------------------------------------------------------------
# abs'(0) = 0 (the subgradient of least norm); sign is piecewise constant.
defunary(np.absolute, lambda g, ans, x: g * np.sign(x))
defunary(np.fabs, lambda g, ans, x: g * np.sign(x))
# Ties in maximum/minimum split the cotangent evenly (a symmetric choice that
# keeps max(x, x) == x exact in derivative).
defbinary(np.maximum,
          lambda g, ans, x, y: g * _tie_weight(x, y, ans),
          lambda g, ans, x, y: g * _tie_weight(y, x, ans))
defbinary(np.minimum,
          lambda g, ans, x, y: g * _tie_weight(x, y, ans),
          lambda g, ans, x, y: g * _tie_weight(y, x, ans))
defbinary(np.fmax,
          lambda g, ans, x, y: g * _tie_weight(x, y, ans),
          lambda g, ans, x, y: g * _tie_weight(y, x, ans))
defbinary(np.fmin,
          lambda g, ans, x, y: g * _tie_weight(x, y, ans),
          lambda g, ans, x, y: g * _tie_weight(y, x, ans))
defbinary(np.copysign,
          lambda g, ans, x, y: g * np.sign(x) * np.sign(ans), None)
defbinary(np.fmod, lambda g, ans, x, y: g, lambda g, ans, x, y: -g * np.trunc(x / y))
defbinary(np.remainder, lambda g, ans, x, y: g, lambda g, ans, x, y: -g * np.floor(x / y))


def _tie_weight(a, b, ans):
    """1 where ``a`` alone produced ``ans``, 0.5 on ties, 0 elsewhere."""
    return (a == ans) * np.where(a == b, 0.5, 1.0)


def_nondiff(
    np.sign, np.floor, np.ceil, np.trunc, np.rint, np.isnan, np.isinf, np.isfinite,
    np.signbit, np.equal, np.not_equal, np.less, np.less_equal, np.greater,
    np.greater_equal, np.logical_and, np.logical_or, np.logical_not, np.logical_xor,
    np.floor_divide, np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert,
    np.left_shift, np.right_shift, np.spacing, np.heaviside, np.isnat,
)
