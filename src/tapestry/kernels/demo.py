"""``tapestry demo kernels``: a distance kernel and a non-polynomial kernel,
their plans, and a gradient step."""
from __future__ import annotations

import time

import numpy as np


def main(quick=False):
    import tapestry as tp
    k, i, j = (64, 128, 32) if quick else (784, 1024, 256)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((k, i)).astype(np.float32)
    x = rng.standard_normal((k, j)).astype(np.float32)
    dist = tp.kernel("y[i,j] := (w[k,i] - x[k,j])**2")
    lap = tp.kernel("y[i,j] := exp(-abs(w[k,i] - x[k,j]))")
    for kern in (dist, lap):
        print(kern.explain())
        loss = lambda w, x: np.mean(kern(w, x) ** 2)
        t0 = time.perf_counter()
        val, (gw, gx) = tp.value_and_grad(loss, argnums=(0, 1))(w, x)
        print(f"  loss {float(val):.4g}, |grad w| {np.linalg.norm(gw):.4g}, "
              f"|grad x| {np.linalg.norm(gx):.4g} in {time.perf_counter() - t0:.3f} s "
              "(first call includes compilation)\n")
