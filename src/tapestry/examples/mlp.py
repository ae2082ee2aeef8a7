"""Train a small MLP on a synthetic two-spirals problem with tapestry.

Plain NumPy model code, ``tapestry.value_and_grad`` for gradients and
``tapestry.optim.Adam`` for the update.  Run: ``tapestry demo mlp``.
"""
from __future__ import annotations

import time

import numpy as np

import tapestry as tp


def two_spirals(n, rng, noise=0.6):
    """``n`` points per class on two interleaved spirals; labels 0 / 1."""
    t = np.sqrt(rng.uniform(0.05, 1.0, n)) * 3 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (3 * np.pi)
    x = np.concatenate([arm, -arm]) + noise * rng.standard_normal((2 * n, 2)) / 3
    y = np.concatenate([np.zeros(n), np.ones(n)])
    return x, y


def init_params(rng, sizes):
    return [{"W": rng.standard_normal((m, n)) * np.sqrt(2.0 / m), "b": np.zeros(n)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    h = x
    for layer in params[:-1]:
        h = np.tanh(h @ layer["W"] + layer["b"])
    last = params[-1]
    return (h @ last["W"] + last["b"])[:, 0]


def loss(params, x, y):
    """Mean binary cross-entropy, from logits, written stably."""
    z = predict(params, x)
    return np.mean(np.logaddexp(0.0, z) - y * z)


def main(quick=False, steps=None, seed=0):
    rng = np.random.default_rng(seed)
    x, y = two_spirals(200 if quick else 500, rng)
    params = init_params(rng, [2, 32, 32, 1])
    opt = tp.optim.Adam(lr=0.01)
    step = tp.value_and_grad(loss)
    steps = steps or (200 if quick else 800)
    print(f"tapestry demo mlp: 2-32-32-1 MLP, {len(x)} points, Adam, {steps} steps")
    t0 = time.perf_counter()
    first = last = None
    for i in range(steps + 1):
        value, grads = step(params, x, y)
        opt.update(params, grads)
        first = value if first is None else first
        last = value
        if i % (steps // 10) == 0:
            acc = np.mean((predict(params, x) > 0) == y)
            print(f"  step {i:5d}   loss {value:.4f}   accuracy {acc:.3f}")
    dt = time.perf_counter() - t0
    print(f"  loss {first:.4f} -> {last:.4f} in {dt:.1f} s "
          f"({1e3 * dt / (steps + 1):.2f} ms per step: forward, gradient, update)")
    return first, last


if __name__ == "__main__":
    main()
