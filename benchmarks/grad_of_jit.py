"""``grad(jit(f))``: value and gradient through a jitted function, against
the same function uncompiled, on W7's per-item function (``parallel_sum``
of ``jit(group_logp)`` over 1,000 groups, serial) and on a 3-layer MLP
loss whose layers are one jitted function.

Prints the median of repeats of each and the ratio jit / eager.  Run it on
two checkouts (``PYTHONPATH=src python -m benchmarks.grad_of_jit``) to
compare them: only ratios taken in one run mean something on a shared
machine.
"""
from __future__ import annotations

import numpy as np

import tapestry as tp
from benchmarks._harness import median_time
from benchmarks.w7_small_items import group_logp, make_items


def w7_systems():
    groups, _, u, a, b = make_items()
    jitem = tp.jit(group_logp, fuse=False)

    def run(f):
        return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
            f, groups, u, a, b, executor="serial"), argnums=(0, 1, 2))
    return run(group_logp), run(jitem), (u, a, b)


def mlp(p, x):
    h = np.tanh(x @ p["W1"] + p["b1"])
    h = np.tanh(h @ p["W2"] + p["b2"])
    return h @ p["W3"] + p["b3"]


def mlp_systems(batch=32, width=64):
    r = np.random.default_rng(0)
    p = {"W1": r.normal(size=(8, width)) / 3, "b1": np.zeros(width),
         "W2": r.normal(size=(width, width)) / 8, "b2": np.zeros(width),
         "W3": r.normal(size=(width, 1)) / 8, "b3": np.zeros(1)}
    x, y = r.normal(size=(batch, 8)), r.normal(size=(batch, 1))
    jmlp = tp.jit(mlp, fuse=False)

    def loss(f):
        return tp.value_and_grad(lambda p: np.mean((f(p, x) - y) ** 2))
    return loss(mlp), loss(jmlp), (p,)


def main():
    for name, (eager, jitted, args) in (("W7 parallel_sum(jit(group_logp))", w7_systems()),
                                        ("3-layer MLP, value_and_grad(jit(mlp))",
                                         mlp_systems())):
        ve, ge = eager(*args)
        vj, gj = jitted(*args)
        assert ve == vj and all(np.array_equal(a, b) for a, b in zip(
            tp.tree_flatten(ge)[0], tp.tree_flatten(gj)[0])), name
        te = median_time(lambda: eager(*args), repeats=11)
        tj = median_time(lambda: jitted(*args), repeats=11)
        print(f"{name}: eager {te * 1e3:.3f} ms, jit {tj * 1e3:.3f} ms, "
              f"jit/eager {tj / te:.3f}")


if __name__ == "__main__":
    main()
