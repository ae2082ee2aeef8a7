"""Real part, imaginary part and modulus as primitives for the rules of
the FFT and linear-algebra modules.

The convention (docs/complex.md, JAX's and HIPS autograd's): a cotangent
``c`` pairs with a tangent ``t`` by ``Re(c * t)``.  So

- ``Re(z)``: ``z̄ = g`` as a complex number;
- ``Im(z)``: ``z̄ = -1j * g``;
- ``|z|``: ``z̄ = Re(g) * conj(z) / |z|`` (0 at ``z = 0``);
- a real value cast to complex: its cotangent is ``Re(c)``.

Rules of FFT and linalg call these (not ``np.real`` / ``np.abs``) so that
they stay differentiable at higher orders whatever the elementwise rules
of the day do with complex values.  ``real_cotangent(g)`` is what a rule
applies to the cotangent of a *real-valued* output (``|z|``, singular
values, ``log|det|``): only ``Re(g)`` pairs with a real tangent.
``match_input(ct, x)`` makes the cotangent of a real input real.
"""
from __future__ import annotations

import numpy as np

from ..core.primitive import Primitive
from ..core.var import Var


def _nested(prim, plain):
    """The forward of ``prim``: NumPy's ``plain`` on arrays, ``prim`` itself on
    a value traced by an enclosing level (nested differentiation), so that
    level records this rule too and not NumPy's elementwise one."""
    return lambda z: prim(z) if z.__class__ is Var else plain(z)


def _as_complex_fwd(x, dtype):
    return x.astype(dtype)


def _real_vjp(g, ans, z):
    return as_complex(real_cotangent(g), np.result_type(z))


def _as_complex_vjp(g, ans, x, dtype):
    return real_part(g) if np.iscomplexobj(g) else g


real_part = Primitive(None, "real", vjps=(_real_vjp,))
imag_part = Primitive(None, "imag",
                      vjps=(lambda g, ans, z: as_complex(real_cotangent(g), np.result_type(z)) * -1j,))
as_complex = Primitive(_as_complex_fwd, "astype(complex)", vjps=(_as_complex_vjp,))


def _abs_vjp(g, ans, z):
    """Re(g) conj(z)/|z|, and 0 where z == 0 (the subgradient of least norm)."""
    zero = ans == 0
    safe = np.where(zero, 1.0, ans)
    return np.where(zero, 0.0, real_cotangent(g) * np.conjugate(z) / safe)


modulus = Primitive(None, "abs", vjps=(_abs_vjp,))
for _p, _plain in ((real_part, np.real), (imag_part, np.imag), (modulus, np.abs)):
    _p.fun = _p.call_positional = _nested(_p, _plain)


def real_cotangent(g):
    """The cotangent of a real-valued output: its real part."""
    return real_part(g) if np.iscomplexobj(g) else g


def match_input(ct, x):
    """The cotangent of input ``x``: real when ``x`` is real."""
    if ct is None or np.iscomplexobj(x) or not np.iscomplexobj(ct):
        return ct
    return real_part(ct)
