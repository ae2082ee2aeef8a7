"""``parallel_sum`` meets ``jit``: per-item code, compiled, on threads.

A hierarchical Poisson model written item by item (one group's log density
per call, as Stan's reduce_sum is first written), differentiated three ways:
the plain ``parallel_sum``; ``parallel_sum`` of the jitted item
(``tp.jit(group_logp)``: each chunk calls one compiled ``value_and_grad``
per item, no tape; with ``fuse=True`` one numba loop over the chunk's
items, without the GIL); and ``tp.jit`` of the whole gradient, whose
``parallel_sum`` on threads becomes one step of the program that runs its
chunks on the threads at every replay.  Each result is checked against
the plain call.
Run: ``tapestry demo jit_parallel``.
"""
from __future__ import annotations

import importlib.util
import time

import numpy as np

import tapestry as tp


def group_logp(g, u, alpha, beta):
    """One group's Poisson log density (up to a constant) plus its prior."""
    uj = u[g["j"]]
    eta = alpha + beta * g["x"] + uj
    return np.sum(g["y"] * eta - np.exp(eta)) - 0.5 * uj * uj


def make_groups(n_groups, n_obs=20, seed=0):
    rng = np.random.default_rng(seed)
    u = 0.3 * rng.standard_normal(n_groups)
    groups = []
    for j in range(n_groups):
        x = rng.standard_normal(n_obs)
        y = rng.poisson(np.exp(0.2 + 0.5 * x + u[j])).astype(float)
        groups.append({"x": x, "y": y, "j": j})
    return groups, np.zeros(n_groups), 0.0, 0.0


def _median_ms(f, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main(quick=False):
    groups, u, a, b = make_groups(200 if quick else 1000)

    def grad_of(item_fn, executor):
        return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
            item_fn, groups, u, a, b, executor=executor), argnums=(0, 1, 2))
    plain = grad_of(group_logp, "serial")
    want = plain(u, a, b)
    systems = {"plain parallel_sum, serial": plain}
    fuses = [False] + ([True] if importlib.util.find_spec("numba") else [])
    for fuse in fuses:
        item = tp.jit(group_logp, fuse=fuse)
        for ex in ("serial", "threads"):
            systems[f"parallel_sum(jit(group_logp{', fuse=True' if fuse else ''})), {ex}"] = \
                grad_of(item, ex)
    systems["jit(value_and_grad(parallel_sum(..., threads)))"] = tp.jit(
        grad_of(group_logp, "threads"))
    print(f"tapestry demo jit_parallel: {len(groups)} groups, value and gradient")
    repeats = 5 if quick else 20
    for name, fn in systems.items():
        got = fn(u, a, b)
        diff = max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))) /
                         max(float(np.max(np.abs(y))), 1e-300))
                   for x, y in zip(tp.tree_leaves(got), tp.tree_leaves(want)))
        if diff > 1e-10:
            raise AssertionError(f"{name} differs from the plain call ({diff:.1e})")
        ms = _median_ms(lambda fn=fn: fn(u, a, b), repeats)
        print(f"  {name:<58} {ms:8.2f} ms   (difference {diff:.0e})")
    return want


if __name__ == "__main__":
    import sys
    main(quick="--quick" in sys.argv)
