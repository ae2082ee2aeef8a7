"""``tapestry demo parallel``: gradient of a sum over 64 small models with
parallel_sum on each executor, checking that every executor gives the same
bits as the serial one."""
from __future__ import annotations

import time

import numpy as np


def _mlp(m, x):
    h = np.tanh(m["W1"] @ x + m["b1"].reshape(-1, 1))
    return np.sum(m["W2"] @ h + m["b2"].reshape(-1, 1))


def main(quick=False):
    import tapestry as tp
    rng = np.random.default_rng(0)
    M = 16 if quick else 64
    models = [{"W1": 0.1 * rng.standard_normal((64, 32)), "b1": rng.standard_normal(64),
               "W2": 0.1 * rng.standard_normal((1, 64)), "b2": rng.standard_normal(1)}
              for _ in range(M)]
    x = rng.standard_normal((32, 256))
    ref = None
    for ex in ("serial", "threads", "processes"):
        loss = lambda ms: tp.parallel_sum(_mlp, ms, x, executor=ex)  # noqa: E731
        t0 = time.perf_counter()
        value, g = tp.value_and_grad(loss)(models)
        dt = time.perf_counter() - t0
        flat = tp.tree_flatten(g)[0]
        same = ref is None or all(np.array_equal(a, b) for a, b in zip(flat, ref))
        ref = ref or flat
        print(f"parallel_sum over {M} models, {ex:>9}: value {value:.6f}, "
              f"{dt * 1e3:7.1f} ms (first call), bit-identical to serial: {same}")
