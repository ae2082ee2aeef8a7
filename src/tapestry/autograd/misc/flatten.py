"""``flatten``: any pytree of arrays as one 1-d vector, and the inverse.

Written with differentiable NumPy (``ravel``, ``concatenate``, slicing), so
it traces: ``grad(lambda v: loss(unflatten(v)))`` works."""
from __future__ import annotations

import numpy as np

from tapestry.core.var import unwrap_all
from tapestry.core.pytree import tree_flatten

__all__ = ["flatten", "flatten_func"]


def flatten(value):
    """``(vector, unflatten)`` for a pytree (dict, list, tuple of arrays and
    scalars); ``unflatten(vector)`` rebuilds the tree's structure."""
    leaves, td = tree_flatten(value)
    shapes = [np.shape(x) for x in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    if leaves:
        dtype = np.result_type(*[unwrap_all(x) for x in leaves])
        vec = np.concatenate([np.ravel(x) for x in leaves]) if any(sizes) else np.zeros(0, dtype)
    else:
        vec = np.zeros(0)

    def unflatten(v):
        out, start = [], 0
        for shape, size in zip(shapes, sizes):
            out.append(np.reshape(v[start:start + size], shape))
            start += size
        return td.unflatten(out)
    return vec, unflatten


def flatten_func(func, example):
    """``func`` of a pytree as a function of a flat vector: ``(flat_func,
    unflatten, flat_example)``."""
    flat_example, unflatten = flatten(example)

    def flat_func(x, *args, **kwargs):
        return flatten(func(unflatten(x), *args, **kwargs))[0]
    return flat_func, unflatten, flat_example
