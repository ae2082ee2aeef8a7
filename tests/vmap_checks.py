"""The reference a vmap test compares against: the function on each item,
results stacked (shared by the vmap test files)."""
import numpy as np

import tapestry as tp


def loop(f, in_axes, args):
    """The reference: ``f`` per item, results stacked on axis 0."""
    n = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)])
            for i in range(n)]
    return tp.tree_map(lambda *xs: np.stack(xs), *outs)
