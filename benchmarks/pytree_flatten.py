"""Pytree flattening: on the path of every grad call and every parallel chunk.

``tree_flatten`` and ``TreeDef.unflatten`` of small trees (a dict of three
arrays, a nested list/tuple, a bare array), tapestry beside
``jax.tree_util`` where installed, in one process.  Run:
``python -m benchmarks.pytree_flatten``.
"""
from __future__ import annotations

import numpy as np

from benchmarks._harness import median_time, optional, row


def _trees():
    return {"dict of 3 arrays": {"W": np.ones((3, 3)), "b": np.ones(3), "c": np.ones(2)},
            "([a, a], a)": ([np.ones(2), np.ones(2)], np.ones(1)),
            "one array": np.ones(3)}


def main(quick=False, plot=False):
    from tapestry.core.pytree import tree_flatten
    repeats = 5 if quick else 15
    jtu = getattr(optional("jax"), "tree_util", None)
    rows = []
    for case, tree in _trees().items():
        leaves, td = tree_flatten(tree)
        rows.append(row("pytree", case, "tapestry flatten",
                        median_time(lambda: tree_flatten(tree), repeats=repeats)))
        rows.append(row("pytree", case, "tapestry unflatten",
                        median_time(lambda: td.unflatten(leaves), repeats=repeats)))
        if jtu is not None:
            jl, jtd = jtu.tree_flatten(tree)
            rows.append(row("pytree", case, "jax flatten",
                            median_time(lambda: jtu.tree_flatten(tree), repeats=repeats)))
            rows.append(row("pytree", case, "jax unflatten",
                            median_time(lambda: jtu.tree_unflatten(jtd, jl),
                                        repeats=repeats)))
    return rows


if __name__ == "__main__":
    for r in main():
        print(f"{r['case']:>18}  {r['system']:<20} {r['time_s'] * 1e9:8.0f} ns")
