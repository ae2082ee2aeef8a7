"""Gradient checking against central finite differences.

``check_grads(f, args)`` picks a random direction ``v`` for the inputs and a
random cotangent ``u`` for the output and compares the reverse-mode number
``<vjp(u), v>`` with the finite difference of ``<u, f(x + t v)>``, computed
in float64 (complex128) whatever the inputs' dtype.  One random direction
tests every entry of the gradient at once (a wrong entry changes the product
with probability 1), which keeps the check cheap on large inputs.

Complex values use the pairing of docs/complex.md, ``<c, t> = Re(sum(c * t))``
(no conjugation): a complex input gets a complex direction (so the real and
the imaginary directions are both tested) and a complex output a complex
cotangent.
"""
from __future__ import annotations

import numpy as np

from .core.api import vjp
from .core.pytree import tree_flatten
from .core.tracing import normalize_argnums

__all__ = ["check_grads"]


def _as_wide(x):
    """``x`` in float64 or complex128 (other dtypes unchanged)."""
    a = np.asarray(x)
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    return a.astype(np.complex128) if a.dtype.kind == "c" else a


def _laid_out_as(p, a):
    """``a`` (values at a shifted point) in an array laid out as the primal
    ``p`` (an F-ordered ``p`` stays F-ordered): a function whose value
    depends on the layout (``np.ravel(x, order="K")``) is differenced at
    the layout it is differentiated at."""
    if not isinstance(p, np.ndarray) or np.ndim(a) == 0 or a.shape != p.shape:
        return a
    out = np.empty_like(p, dtype=a.dtype)  # (order "K": p's axis order)
    out[...] = a
    return out


def _dense(x):
    return np.asarray(x.todense() if hasattr(x, "todense") else x)


def _pair(c, t):
    """``Re(sum(c * t))`` in double precision: how a cotangent meets a tangent."""
    return float(np.sum(np.real(_as_wide(c) * t)))


def _random_like(rng, leaf, dtype=None):
    """A standard normal array of ``leaf``'s shape; complex for a complex
    ``leaf`` (real and imaginary parts both drawn), cast to ``dtype``."""
    shape, kind = np.shape(leaf), np.result_type(leaf).kind
    v = rng.standard_normal(shape)
    if kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v if dtype is None else v.astype(dtype)


def _differentiable(a):
    leaves = tree_flatten(a)[0]
    return bool(leaves) and all(np.result_type(l).kind in "fc" for l in leaves)


def _low_precision(leaves):
    return any(np.result_type(l) in (np.float32, np.complex64) for l in leaves)


def _analytic(rng, primals, cts):
    """``<vjp(u), v>`` for random directions ``v``; returns it and the ``v``s."""
    v_trees, analytic = [], 0.0
    for p, ct in zip(primals, cts):
        p_leaves, p_td = tree_flatten(p)
        v_leaves = []
        for pl, cl in zip(p_leaves, tree_flatten(ct)[0]):
            cl = _dense(cl)
            if np.shape(cl) != np.shape(pl):
                raise AssertionError(f"gradient shape {np.shape(cl)} != input shape {np.shape(pl)}")
            if np.result_type(cl) != np.result_type(pl):
                raise AssertionError(f"gradient dtype {np.result_type(cl)} != "
                                     f"input dtype {np.result_type(pl)}")
            v = _random_like(rng, pl)
            v_leaves.append(v)
            analytic += _pair(cl, v)
        v_trees.append((p_td, p_leaves, v_leaves))
    return analytic, v_trees


def _numeric(f_sel, v_trees, u_leaves, eps):
    """Central difference of ``<u, f(x + t v)>`` at ``t = 0``."""
    def shifted(t):
        sel = [td.unflatten([_laid_out_as(pl, _as_wide(pl) + t * v) for pl, v in zip(pls, vs)])
               for td, pls, vs in v_trees]
        out = tree_flatten(f_sel(*sel))[0]
        return sum(_pair(u, np.asarray(o) if np.result_type(o).kind in "fc"
                         else np.asarray(o, np.float64)) for o, u in zip(out, u_leaves))
    return (shifted(eps) - shifted(-eps)) / (2 * eps)


def check_grads(f, args, argnums=None, eps=1e-6, rtol=1e-5, atol=1e-6,
                order=1, seed=0, n_directions=2):
    """Check ``f``'s reverse-mode derivatives at ``args`` (a tuple).

    ``argnums`` defaults to every float or complex argument.  ``order=2``
    also checks the derivative of the gradient (reverse over reverse).
    Tolerances are loosened automatically for float32/complex64 inputs.
    Raises ``AssertionError`` with the measured numbers on mismatch.
    """
    args = tuple(args)
    if argnums is None:
        argnums = tuple(i for i, a in enumerate(args) if _differentiable(a))
    else:
        argnums = normalize_argnums(argnums, len(args), "testing.check_grads")[1]
    rng = np.random.default_rng(seed)
    if _low_precision([l for a in argnums for l in tree_flatten(args[a])[0]]):
        rtol, atol = max(rtol, 2e-3), max(atol, 2e-3)

    def f_sel(*sel):
        full = list(args)
        for a, s in zip(argnums, sel):
            full[a] = s
        return f(*full)

    primals = [args[a] for a in argnums]
    y, pullback = vjp(f_sel, *primals)
    y_leaves, y_td = tree_flatten(y)
    for _ in range(n_directions):
        u_leaves = [_random_like(rng, l, np.result_type(l)) for l in y_leaves]
        analytic, v_trees = _analytic(rng, primals, pullback(y_td.unflatten(u_leaves)))
        numeric = _numeric(f_sel, v_trees, u_leaves, eps)
        if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
            raise AssertionError(
                f"check_grads: reverse-mode {analytic!r} != finite differences "
                f"{numeric!r} (rtol={rtol}, atol={atol}, eps={eps})")
    if order >= 2:
        _check_gradient_of_gradient(f_sel, primals, argnums, y_leaves, y_td,
                                    dict(eps=eps, rtol=rtol * 10, atol=atol * 10,
                                         order=order - 1, seed=seed + 1))


def _check_gradient_of_gradient(f_sel, primals, argnums, y_leaves, y_td, kw):
    """check_grads on ``x -> vjp(f, x)(u)[a]`` for each argument ``a``: a
    fixed cotangent ``u``, all ones for a real output, ``1 + 1j`` for a
    complex one (so both its parts reach the second derivative)."""
    u = y_td.unflatten([np.full(np.shape(l), 1 + 1j if np.result_type(l).kind == "c" else 1,
                                np.result_type(l)) for l in y_leaves])
    for k in range(len(argnums)):
        def g_dir(*xs, _k=k):
            return vjp(f_sel, *xs)[1](u)[_k]
        check_grads(g_dir, primals, **kw)
