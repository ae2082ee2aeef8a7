"""Call sequences built to break a trace-once compiler: each jitted call is
compared with the plain call of the same function (values, shapes, types)."""
import numpy as np
import pytest

import tapestry as tp
from jit_checks import quiet, same


@pytest.mark.parametrize("k_type", [int, np.int64, np.int32])
def test_sequence_repeated_by_an_int_argument(k_type):
    # ``[x] * k``: Python repeats the list, reading ``k``; the replay must not
    # keep the trace's length
    def f(x, k):
        return np.concatenate([x] * k), np.stack(k * (x,)), len([0] * k), [x] * k

    jf = tp.jit(f)
    x = np.arange(6.0).reshape(2, 3)
    for k in [1, 2, 3, 2, 1]:
        same(quiet(jf, x, k_type(k)), f(x, k_type(k)))


def test_sequence_repeated_by_a_computed_int():
    def f(x, k):
        return np.stack([x] * (k + 1)).sum(axis=0)

    jf = tp.jit(f)
    g = tp.jit(tp.grad(lambda x, k: np.sum(f(x, k) ** 2)))
    x = np.arange(3.0)
    for k in [0, 2, 1, 2]:
        same(quiet(jf, x, k), f(x, k))
        same(quiet(g, x, k), tp.grad(lambda x, k: np.sum(f(x, k) ** 2))(x, k))


def test_int_power_of_an_int_argument_changes_type():
    # ``2 ** k`` is an int for k >= 0 and a float for k < 0: code reading the
    # dtype (or casting into it) must see the call's own type
    def f(x, k):
        y = np.arange(3) * (2 ** k)
        z = np.zeros(3, dtype=y.dtype)
        z[0] = 0.75
        return z + y * x, str(y.dtype)

    jf = tp.jit(f)
    x = np.ones(3)
    for k in [1, -1, 2, -2, 1]:
        same(quiet(jf, x, k), f(x, k))


@pytest.mark.parametrize("which", ["base", "exponent"])
def test_float_power_of_a_float_argument_may_be_complex(which):
    # ``(-4.0) ** 0.5`` is a complex in Python
    def f(x, s):
        p = s ** 0.5 if which == "base" else (-2.0) ** s
        return x * abs(p), np.result_type(p).kind

    jf = tp.jit(f)
    x = np.ones(2)
    vals = [4.0, -4.0, 9.0, -1.0] if which == "base" else [2.0, 0.5, 3.0, 1.5]
    for s in vals:
        same(quiet(jf, x, s), f(x, s))
