"""Complex numbers: real, imag, angle, real_if_close, and the real part,
imaginary part and modulus as primitives that the FFT and linear-algebra
rules call.

The convention (docs/complex.md, JAX's and HIPS autograd's): a cotangent
``c`` pairs with a tangent ``t`` by ``Re(c * t)``.  So

- ``Re(z)``: ``z̄ = g`` as a complex number;
- ``Im(z)``: ``z̄ = -1j * g``;
- ``|z|``: ``z̄ = Re(g) * conj(z) / |z|`` (0 at ``z = 0``);
- a real value cast to complex: its cotangent is ``Re(c)``.

``np.real`` and ``np.imag`` are these primitives; ``np.abs`` is ``modulus``.
``real_cotangent(g)`` is what a rule
applies to the cotangent of a *real-valued* output (``|z|``, singular
values, ``log|det|``): only ``Re(g)`` pairs with a real tangent.
``match_input(ct, x)`` makes the cotangent of a real input real.
"""
from __future__ import annotations

import numpy as np

from ..core import batching
from ..core.primitive import Primitive, implements
from ..core.var import unwrap_all
from .elementwise import _over_nonzero, absolute, is_complex


def _as_complex_fwd(x, dtype):
    return x.astype(dtype)


def _real_vjp(g, ans, z):
    return as_complex(real_cotangent(g), np.result_type(z))


def _as_complex_vjp(g, ans, x, dtype):
    return real_part(g) if np.iscomplexobj(g) else g


real_part = Primitive(np.real, "real", vjps=(_real_vjp,), batch=batching.elementwise)
imag_part = Primitive(np.imag, "imag", batch=batching.elementwise,
                      vjps=(lambda g, ans, z: as_complex(real_cotangent(g), np.result_type(z)) * -1j,))
as_complex = Primitive(_as_complex_fwd, "astype(complex)", vjps=(_as_complex_vjp,),
                       batch=batching.elementwise)


#: |z|: np.absolute's primitive (ops/elementwise.py), whose rule is
#: ``Re(g) conj(z) / |z|`` for complex z (0 at 0).
modulus = absolute


def real_cotangent(g):
    """The cotangent of a real-valued output: its real part."""
    return real_part(g) if np.iscomplexobj(g) else g


def match_input(ct, x):
    """The cotangent of input ``x``: real when ``x`` is real."""
    if ct is None or np.iscomplexobj(x) or not np.iscomplexobj(ct):
        return ct
    return real_part(ct)


@implements(np.real)
def real(val):
    """The real part; a real array is its own real part."""
    return real_part(val) if is_complex(val) else val


@implements(np.imag)
def imag(val):
    """The imaginary part; that of a real array is a constant zero."""
    if is_complex(val):
        return imag_part(val)
    return np.zeros(np.shape(val), np.result_type(unwrap_all(val)))


def _angle_rule(g, ans, z, deg):
    """angle(z) = atan2(Im z, Re z): d angle = Im(conj(z) dz) / |z|^2, so the
    cotangent is ``-1j Re(g) conj(z) / |z|^2`` (0 at 0)."""
    c = -1j * np.real(g) * _over_nonzero(np.conjugate(z), np.real(z * np.conjugate(z)))
    return c * (180 / np.pi) if deg else c


_angle = Primitive(lambda z, deg: np.angle(z, deg), "angle", vjps=(_angle_rule,),
                   batch=batching.elementwise)


@implements(np.angle)
def angle(z, deg=False):
    """The argument of complex ``z``; of a real array it is 0 or pi, a
    piecewise constant (a plain array)."""
    if not is_complex(z):
        return np.angle(unwrap_all(z), deg)
    return _angle(z, deg)


@implements(np.real_if_close)
def real_if_close(a, tol=100):
    """``np.real(a)`` when NumPy would drop the imaginary part, else ``a``."""
    plain = unwrap_all(a)
    if is_complex(plain) and not is_complex(np.real_if_close(plain, tol)):
        return np.real(a)
    return a
