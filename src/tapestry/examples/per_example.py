"""Per-example gradients with ``tapestry.vmap``: differentially private SGD.

DP-SGD clips each example's gradient to a norm bound before averaging and
adds noise, so it needs every example's gradient, not their sum.  The loss
is written for ONE example; ``tp.vmap(tp.grad(loss), in_axes=(None, 0, 0))``
gives all of them in one batched computation, checked here against a loop
of ``grad`` calls.  Run: ``tapestry demo vmap``.
"""
from __future__ import annotations

import time

import numpy as np

import tapestry as tp
from tapestry.examples.mlp import init_params


def blobs(n, rng):
    """Two Gaussian clouds in the plane, labels 0 / 1."""
    y = rng.integers(0, 2, n).astype(float)
    x = rng.standard_normal((n, 2)) + np.where(y[:, None] > 0, 1.0, -1.0)
    return x, y


def loss(params, x, y):
    """Binary cross-entropy of one example ``x`` (2,) with label ``y``."""
    h = x
    for layer in params[:-1]:
        h = np.tanh(h @ layer["W"] + layer["b"])
    z = (h @ params[-1]["W"] + params[-1]["b"])[0]
    return np.logaddexp(0.0, z) - y * z


def clipped_mean(per_example, bound):
    """Each example's gradient scaled to norm <= ``bound``, then averaged."""
    leaves = tp.tree_leaves(per_example)
    n = leaves[0].shape[0]
    norms = np.sqrt(sum(np.sum(g.reshape(n, -1) ** 2, axis=1) for g in leaves))
    scale = np.minimum(1.0, bound / np.maximum(norms, 1e-12))
    return tp.tree_map(lambda g: np.tensordot(scale, g, axes=1) / n, per_example), norms


def main(quick=False, seed=0):
    rng = np.random.default_rng(seed)
    x, y = blobs(256 if quick else 512, rng)
    params = init_params(rng, [2, 32, 32, 1])
    per_example = tp.vmap(tp.grad(loss), in_axes=(None, 0, 0))
    print(f"tapestry demo vmap: per-example gradients of a 2-32-32-1 MLP, batch {len(x)}")

    t0 = time.perf_counter()
    grads = per_example(params, x, y)
    t_vmap = time.perf_counter() - t0
    t0 = time.perf_counter()
    looped = [tp.grad(loss)(params, x[i], y[i]) for i in range(len(x))]
    t_loop = time.perf_counter() - t0
    err = max(np.max(np.abs(grads[k][key][i] - looped[i][k][key]))
              for i in range(len(x)) for k in range(len(params)) for key in ("W", "b"))
    print(f"  vmap(grad): {1e3 * t_vmap:.1f} ms; a loop of grad: {1e3 * t_loop:.1f} ms; "
          f"largest difference {err:.1e}")

    bound, lr, sigma = 1.0, 0.5, 0.5
    steps = 40 if quick else 150
    for step in range(steps + 1):
        grads = per_example(params, x, y)
        mean, norms = clipped_mean(grads, bound)
        noisy = tp.tree_map(lambda g: g + sigma * bound / len(x) * rng.standard_normal(g.shape),
                            mean)
        params = tp.tree_map(lambda p, g: p - lr * g, params, noisy)
        if step % (steps // 5) == 0:
            value = np.mean(tp.vmap(loss, in_axes=(None, 0, 0))(params, x, y))
            print(f"  DP-SGD step {step:4d}   loss {value:.4f}   "
                  f"clipped {np.mean(norms > bound):.0%} of the examples")
    if err > 1e-12:
        raise AssertionError(f"vmap(grad) differs from a loop of grad by {err:.1e}")
    return float(value)


if __name__ == "__main__":
    main()
