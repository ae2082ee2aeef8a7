"""Gradient checking against central finite differences.

``check_grads(f, args)`` picks a random direction ``v`` for the inputs and a
random cotangent ``u`` for the output and compares the reverse-mode number
``<vjp(u), v>`` with the finite difference of ``<u, f(x + t v)>``, computed
in float64 whatever the inputs' dtype.  One random direction tests every
entry of the gradient at once (a wrong entry changes the product with
probability 1), which keeps the check cheap on large inputs.
"""
from __future__ import annotations

import numpy as np

from .core.api import vjp
from .core.pytree import tree_flatten

__all__ = ["check_grads"]


def _as_float64(x):
    a = np.asarray(x)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _dense(x):
    return np.asarray(x.todense() if hasattr(x, "todense") else x)


def check_grads(f, args, argnums=None, eps=1e-6, rtol=1e-5, atol=1e-6,
                order=1, seed=0, n_directions=2):
    """Check ``f``'s reverse-mode derivatives at ``args`` (a tuple).

    ``argnums`` defaults to every float argument.  ``order=2`` also checks
    the derivative of the gradient (reverse over reverse).  Tolerances are
    loosened automatically for float32 inputs.  Raises ``AssertionError``
    with the measured numbers on mismatch.
    """
    args = tuple(args)
    if argnums is None:
        argnums = tuple(i for i, a in enumerate(args)
                        if all(np.result_type(l).kind == "f" for l in tree_flatten(a)[0])
                        and tree_flatten(a)[0])
    elif isinstance(argnums, int):
        argnums = (argnums,)
    rng = np.random.default_rng(seed)
    low_precision = any(np.result_type(l) == np.float32
                        for a in argnums for l in tree_flatten(args[a])[0])
    if low_precision:
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
        u_leaves = [rng.standard_normal(np.shape(l)).astype(np.result_type(l))
                    for l in y_leaves]
        cts = pullback(y_td.unflatten(u_leaves))
        v_trees, analytic = [], 0.0
        for p, ct in zip(primals, cts):
            p_leaves, p_td = tree_flatten(p)
            c_leaves = tree_flatten(ct)[0]
            v_leaves = []
            for pl, cl in zip(p_leaves, c_leaves):
                if np.shape(cl) != np.shape(pl):
                    raise AssertionError(f"gradient shape {np.shape(cl)} != input shape {np.shape(pl)}")
                if np.result_type(_dense(cl)) != np.result_type(pl):
                    raise AssertionError(f"gradient dtype {np.result_type(_dense(cl))} != "
                                         f"input dtype {np.result_type(pl)}")
                v = rng.standard_normal(np.shape(pl))
                v_leaves.append(v)
                analytic += float(np.sum(_dense(cl).astype(np.float64) * v))
            v_trees.append((p_td, p_leaves, v_leaves))

        def shifted(t):
            sel = [td.unflatten([_as_float64(pl) + t * v for pl, v in zip(pls, vs)])
                   for td, pls, vs in v_trees]
            out = tree_flatten(f_sel(*sel))[0]
            return sum(float(np.sum(np.asarray(o, dtype=np.float64) * u))
                       for o, u in zip(out, u_leaves))

        numeric = (shifted(eps) - shifted(-eps)) / (2 * eps)
        if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
            raise AssertionError(
                f"check_grads: reverse-mode {analytic!r} != finite differences "
                f"{numeric!r} (rtol={rtol}, atol={atol}, eps={eps})")
    if order >= 2:
        from .core.api import grad
        for a in argnums:
            def g_dir(*xs, _a=a):
                return vjp(f_sel, *xs)[1](y_td.unflatten(
                    [np.ones(np.shape(l), np.result_type(l)) for l in y_leaves]))[argnums.index(_a)]
            check_grads(lambda *xs: g_dir(*xs), primals, eps=eps, rtol=rtol * 10,
                        atol=atol * 10, order=order - 1, seed=seed + 1)
