"""Forward mode against the issue's four targets, in one run (ratios).

1. ``jvp`` of W3's loss (benchmarks/README.md: sum(exp(w1 @ x + b1[:, None])),
   bs 4096, f 256, h 512, float64), tangents in all three arguments, against the plain
   NumPy forward.  Target: at most 3x.
2. A forward-over-reverse Hessian-vector product of the same loss w.r.t.
   (w1, b1) against its gradient.  Target: at most 4x.
3. ``jacfwd`` against ``jacrev`` for a 10 -> 1,000 function.  Target: faster.
4. ``hessian`` (forward over reverse) of a 50-parameter function against the
   reverse-over-reverse Hessian tapestry had before (``jacrev(grad(f))``,
   one reverse sweep per row).  Target: faster.

Each case and its baseline are timed in turns (``interleaved_times``), and
each case twice: with the fast paths of ``tapestry.core.forward``
(elementwise ufuncs and linear primitives) and with every node transposed
(``USE_FAST_RULES = False``), which is what decided which to keep.
"""
from __future__ import annotations

import numpy as np

from benchmarks._harness import interleaved_times, median_time, optional, row
from benchmarks.w3_unneeded_gradients import loss, make


def _f10(A, B):
    def f(x):
        h = np.tanh(A @ x)
        return h * np.sin(B @ x) + h ** 2
    return f


def _f50(W, c):
    def f(x):
        r = np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
        return r + np.sum(np.log1p(np.exp(W @ x))) + c @ np.tanh(x)
    return f


def _old_hvp(f, argnums):
    """Reverse over reverse (tapestry's hessian_vector_product before)."""
    import tapestry as tp

    def hvp(*args):
        *args, v = args

        def inner(*a):
            g = tp.grad(f, argnums)(*a)
            return sum(np.sum(gi * vi) for gi, vi in zip(g, v))
        return tp.grad(inner, argnums)(*args)
    return hvp


def cases(quick=False):
    """``[(target, name, fn, baseline_name, baseline_fn)]``."""
    import tapestry as tp
    rng = np.random.default_rng(0)
    w1, b1, x = make(quick)
    tw, tb, tx = (0.01 * rng.standard_normal(a.shape) for a in (w1, b1, x))
    jv = lambda: tp.jvp(loss, (w1, b1, x), (tw, tb, tx))  # noqa: E731
    fwd = lambda: loss(w1, b1, x)  # noqa: E731
    hvp = tp.hessian_vector_product(loss, argnums=(0, 1))
    gr = tp.grad(loss, argnums=(0, 1))
    A, B = rng.standard_normal((1000, 10)), rng.standard_normal((1000, 10))
    f10, x10 = _f10(A, B), rng.standard_normal(10)
    W, c, x50 = 0.3 * rng.standard_normal((20, 50)), rng.standard_normal(50), \
        rng.uniform(-1, 1, 50)
    f50 = _f50(W, c)
    old_hess = tp.jacrev(tp.grad(f50))
    return [
        ("jvp <= 3x forward (W3)", "jvp", jv, "forward", fwd),
        ("jvp <= 3x forward (W3)", "jvp, tangents in (w1, b1) only",
         lambda: tp.jvp(lambda w1, b1: loss(w1, b1, x), (w1, b1), (tw, tb)), "forward", fwd),
        ("HVP <= 4x grad (W3, w.r.t. w1, b1)", "hvp fwd-over-rev",
         lambda: hvp(w1, b1, x, (tw, tb)), "grad", lambda: gr(w1, b1, x)),
        ("jacfwd beats jacrev (10 -> 1000)", "jacfwd", lambda: tp.jacfwd(f10)(x10),
         "jacrev", lambda: tp.jacrev(f10)(x10)),
        ("hessian beats rev-over-rev (50 params)", "hessian fwd-over-rev",
         lambda: tp.hessian(f50)(x50), "jacrev(grad) (before)", lambda: old_hess(x50)),
    ], (_old_hvp(loss, (0, 1)), w1, b1, x, tw, tb)


def _pair(fn, base, reps):
    """Medians of ``fn`` and its baseline timed in turns (the machine is
    shared: turns make both see the same load)."""
    t = interleaved_times([("fn", fn), ("base", base)], repeats=reps)
    return t["fn"], t["base"]


def main(quick=False, plot=False):
    from tapestry.core import forward
    reps = 5 if quick else 9
    rows = []
    items, (old_hvp, w1, b1, x, tw, tb) = cases(quick)
    for fast in (True, False):
        forward.USE_FAST_RULES = fast
        mode = "fast paths" if fast else "transposition only"
        try:
            for target, name, fn, base_name, base in items:
                t_fn, t_base = _pair(fn, base, reps)
                rows.append(row("forward", target, f"tapestry {name} ({mode})", t_fn, None,
                                f"{t_fn / t_base:.2f}x {base_name} ({t_base * 1e3:.2f} ms)"))
        finally:
            forward.USE_FAST_RULES = True
    t_old = median_time(lambda: old_hvp(w1, b1, x, (tw, tb)), reps)
    rows.append(row("forward", "HVP <= 4x grad (W3, w.r.t. w1, b1)",
                    "tapestry hvp rev-over-rev (before)", t_old, None, "reference"))
    rows.extend(_jax_rows(quick, reps))
    return rows


def _jax_rows(quick, reps):
    """The same four cases in JAX (eager, no jit), when it is installed."""
    jax = optional("jax")
    if jax is None:
        return []
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(0)
    w1, b1, x = (jnp.asarray(a) for a in make(quick))
    tw, tb, tx = (jnp.asarray(0.01 * rng.standard_normal(a.shape)) for a in (w1, b1, x))
    jl = lambda w1, b1, x: jnp.sum(jnp.exp(w1 @ x + b1[:, None]))  # noqa: E731
    A, B = (jnp.asarray(rng.standard_normal((1000, 10))) for _ in range(2))
    f10 = lambda x: jnp.tanh(A @ x) * jnp.sin(B @ x) + jnp.tanh(A @ x) ** 2  # noqa: E731
    W, c = jnp.asarray(0.3 * rng.standard_normal((20, 50))), jnp.asarray(rng.standard_normal(50))
    f50 = lambda x: (jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)  # noqa: E731
                     + jnp.sum(jnp.log1p(jnp.exp(W @ x))) + c @ jnp.tanh(x))
    x10, x50 = jnp.asarray(rng.standard_normal(10)), jnp.asarray(rng.uniform(-1, 1, 50))
    done = jax.block_until_ready
    g = jax.grad(jl, argnums=(0, 1))
    cases = [
        ("jvp <= 3x forward (W3)", "jvp", lambda: done(jax.jvp(jl, (w1, b1, x), (tw, tb, tx))),
         "forward", lambda: done(jl(w1, b1, x))),
        ("HVP <= 4x grad (W3, w.r.t. w1, b1)", "hvp fwd-over-rev",
         lambda: done(jax.jvp(lambda a, b: g(a, b, x), (w1, b1), (tw, tb))),
         "grad", lambda: done(g(w1, b1, x))),
        ("jacfwd beats jacrev (10 -> 1000)", "jacfwd", lambda: done(jax.jacfwd(f10)(x10)),
         "jacrev", lambda: done(jax.jacrev(f10)(x10))),
        ("hessian beats rev-over-rev (50 params)", "hessian", lambda: done(jax.hessian(f50)(x50)),
         "jacrev(grad)", lambda: done(jax.jacrev(jax.grad(f50))(x50))),
    ]
    rows = []
    for target, name, fn, base_name, base in cases:
        t_fn, t_base = _pair(fn, base, reps)
        rows.append(row("forward", target, f"jax eager {name}", t_fn, None,
                        f"{t_fn / t_base:.2f}x {base_name} ({t_base * 1e3:.2f} ms)"))
    return rows


if __name__ == "__main__":
    import sys
    for r in main(quick="--quick" in sys.argv):
        print(f"{r['case']:42s} {r['system']:52s} {r['time_s'] * 1e3:9.2f} ms  {r['note']}")
