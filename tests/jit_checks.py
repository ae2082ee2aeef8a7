"""Bit-for-bit comparison of a jitted call's result with the plain call's
(shared by the jit test files)."""
import numpy as np

import tapestry as tp


def same(a, b):
    """``a`` and ``b`` have one tree structure and the same arrays: shapes,
    dtypes and bytes."""
    la, ta = tp.tree_flatten(a)
    lb, tb = tp.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for u, v in zip(la, lb):
        u, v = np.asarray(u), np.asarray(v)
        assert u.shape == v.shape and u.dtype == v.dtype, (u.shape, v.shape, u.dtype, v.dtype)
        assert u.tobytes() == v.tobytes(), (u, v)
