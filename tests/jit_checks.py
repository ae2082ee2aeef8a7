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


def quiet(fn, *a, **k):
    """``fn(*a, **k)`` with tapestry.JitWarning (a give-up) silenced."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tp.JitWarning)
        return fn(*a, **k)


def same_object(got, want):
    """One type; for arrays also one dtype, shape, layout (strides) and
    values; otherwise equal."""
    assert type(got) is type(want)
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.strides == want.strides  # the plain call's layout
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want
