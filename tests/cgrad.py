"""Finite-difference checks for complex functions under the pairing
``Re(c * t)`` of docs/complex.md: directions along the real and the
imaginary axes of complex inputs, complex cotangents for complex outputs.

(A local helper until tapestry.testing.check_grads draws complex
directions itself.)
"""
from __future__ import annotations

import numpy as np

import tapestry as tp
from tapestry.core.pytree import tree_flatten


def _rand_like(rng, x):
    x = np.asarray(x)
    v = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        v = v + 1j * rng.standard_normal(x.shape)
    return v


def _pair(c, t):
    return float(np.sum(np.real(np.asarray(c, np.complex128) * np.asarray(t, np.complex128))))


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def check_cgrads(f, args, order=1, eps=1e-6, rtol=1e-5, atol=1e-6, seed=0, n_directions=2):
    """Check ``<vjp(u), v> == d/dt <u, f(x + t v)>`` (pairing Re(c*t)) for
    random complex ``v``, ``u``; ``order=2`` checks the gradient map too."""
    args = tuple(np.asarray(a) for a in args)
    rng = np.random.default_rng(seed)
    if any(a.dtype in (np.float32, np.complex64) for a in args):
        rtol, atol, eps = max(rtol, 3e-3), max(atol, 3e-3), max(eps, 1e-3)
    y, pullback = tp.vjp(f, *args)
    y_leaves, y_td = tree_flatten(y)
    for _ in range(n_directions):
        u = [_rand_like(rng, l).astype(np.result_type(l)) for l in y_leaves]
        cts = pullback(y_td.unflatten(u))
        cts = cts if isinstance(cts, tuple) else (cts,)
        vs = [_rand_like(rng, a) for a in args]
        for a, c in zip(args, cts):
            assert np.shape(c) == a.shape, (np.shape(c), a.shape)
            assert np.result_type(c) == a.dtype, (np.result_type(c), a.dtype)
        analytic = sum(_pair(c, v) for c, v in zip(cts, vs))

        def shifted(t):
            out = tree_flatten(f(*[_wide(a) + t * v for a, v in zip(args, vs)]))[0]
            return sum(_pair(uu, o) for uu, o in zip(u, out))

        numeric = (shifted(eps) - shifted(-eps)) / (2 * eps)
        assert np.isclose(analytic, numeric, rtol=rtol, atol=atol), (analytic, numeric)
    if order >= 2:
        u1 = [_rand_like(rng, l).astype(np.result_type(l)) for l in y_leaves]

        def grad_map(*xs):
            return tp.vjp(f, *xs)[1](y_td.unflatten(u1))
        check_cgrads(grad_map, args, order - 1, eps, rtol * 10, atol * 10, seed + 1)
