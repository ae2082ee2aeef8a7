"""``tapestry.jit``: a training loop traced once and replayed after.

A small regression MLP trained with Adam.  ``tp.jit(tp.value_and_grad(loss))``
traces the forward and the reverse sweep on the first step and replays the
recorded NumPy program on every later one; the demo checks each step's
value and gradient against the uncompiled call (bit for bit while the replay
is NumPy calls; within a few ulp once a hot program's elementwise runs are
fused into numba loops), times both, shows the program's size, and shows a
data-dependent branch becoming a guard.
Run: ``tapestry demo jit``.
"""
from __future__ import annotations

import time

import numpy as np

import tapestry as tp


def loss(params, x, y):
    """Mean squared error of a 1-16-16-1 tanh MLP on (x, y)."""
    h = x[:, None]
    for layer in params[:-1]:
        h = np.tanh(h @ layer["W"] + layer["b"])
    pred = (h @ params[-1]["W"] + params[-1]["b"])[:, 0]
    return np.mean((pred - y) ** 2)


def init(rng, sizes):
    return [{"W": rng.standard_normal((m, n)) / np.sqrt(m), "b": np.zeros(n)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def _median_ms(f, args, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main(quick=False, seed=0):
    rng = np.random.default_rng(seed)
    x = np.linspace(-3, 3, 64)
    y = np.sin(x) + 0.1 * rng.standard_normal(64)
    params = init(rng, [1, 16, 16, 1])
    eager = tp.value_and_grad(loss)
    step = tp.jit(eager)
    print("tapestry demo jit: a 1-16-16-1 MLP trained with jit(value_and_grad(loss))")

    t0 = time.perf_counter()
    step(params, x, y)
    t_first = 1e3 * (time.perf_counter() - t0)
    repeats = 20 if quick else 100
    t_eager = _median_ms(eager, (params, x, y), repeats)
    t_jit = _median_ms(step, (params, x, y), repeats)
    print(f"  first call (trace + lowering) {t_first:.1f} ms; then the replay: "
          f"{t_jit:.3f} ms per step against {t_eager:.3f} ms uncompiled "
          f"({t_eager / t_jit:.1f}x)")
    info = step.cache_info()
    if info["fused_loops"]:  # once hot, elementwise runs became numba loops
        t_fused = _median_ms(step, (params, x, y), repeats)
        print(f"  hot: {info['fused_loops']} runs fused into loops, {info['numpy_calls']} "
              f"calls per step: {t_fused:.3f} ms ({t_eager / t_fused:.1f}x)")

    opt = tp.optim.Adam(lr=0.02)
    steps = 150 if quick else 600
    for k in range(steps + 1):
        value, g = step(params, x, y)
        if k % (steps // 4) == 0:
            v2, g2 = eager(params, x, y)
            diff = max(float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
                       for a, b in zip([value, *tp.tree_leaves(g)], [v2, *tp.tree_leaves(g2)]))
            if diff > 1e-12:
                raise AssertionError(f"jit's replay differs from the uncompiled call ({diff})")
            loops = step.cache_info()["fused_loops"]
            print(f"  step {k:4d}   loss {value:.4f}   difference from the uncompiled "
                  f"call (relative to each leaf's largest) {diff:.1e}" + (f" ({loops} fused loops)" if loops else ""))
        opt.update(params, g)
    print(f"  traces: {step.cache_info()['traces']} for {step.cache_info()['calls']} calls")

    clipped = tp.jit(lambda v: v * 2 if np.max(np.abs(v)) < 1 else v / np.max(np.abs(v)))
    for v in (np.array([0.5, -0.2]), np.array([3.0, 1.0]), np.array([0.1, 0.1])):
        clipped(v)
    print(f"  a branch on data is a guard: 3 calls, {clipped.cache_info()['traces']} traces "
          "(one program per branch)")
    return float(value)


if __name__ == "__main__":
    main()
