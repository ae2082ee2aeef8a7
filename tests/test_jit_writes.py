"""NumPy functions that write into an argument (``out=``, ``copy=False``)
are writes under jit, never pure calls a replay may drop: every call of a
jitted function leaves the same arrays as the plain call (an argument
written into, a view of it, a buffer made inside)."""
import warnings

import numpy as np
import pytest

import tapestry as tp

CASES = {
    "nan_to_num_copy_false": lambda x: (np.nan_to_num(x, copy=False), x.sum())[1],
    "nan_to_num_copy_false_positional": lambda x: (np.nan_to_num(x, False), x.sum())[1],
    "clip_out": lambda x: (np.clip(x, 0, 1, out=x), x.sum())[1],
    "method_clip_out": lambda x: (x.clip(0, 1, out=x), x.sum())[1],
    "cumsum_out": lambda x: (np.cumsum(x, out=x), x.sum())[1],
    "sum_out_into_a_view": lambda x: (np.sum(x.reshape(2, 2), axis=0, out=x[:2]), x.sum())[1],
    "mean_out_buffer": lambda x: (lambda y: (np.mean(x.reshape(2, 2), axis=1, out=y), y * 2)[1])(
        np.zeros(2) + x[:2]),
    "around_out": lambda x: (np.around(x, 1, out=x), x.sum())[1],
    "take_out": lambda x: (lambda y: (np.take(x, [3, 0], out=y), y + x[:2])[1])(x[:2] * 1.0),
    "dot_out": lambda x: (lambda y: (np.dot(x.reshape(2, 2), x[:2], out=y), y.sum())[1])(
        x[2:] * 1.0),
}


def _fresh(name):
    x = np.array([1.5, -0.2, 0.3, 2.0])
    if name.startswith("nan_to_num"):
        x[1] = np.nan
    return x


@pytest.mark.parametrize("name", sorted(CASES))
def test_writes_into_arguments_and_buffers_replay_as_the_plain_call(name):
    f = CASES[name]
    jf = tp.jit(f)
    for k in range(4):
        xa, xb = _fresh(name) * (1 + k), _fresh(name) * (1 + k)
        want = f(xa)
        got = jf(xb)
        assert np.array_equal(np.asarray(got), np.asarray(want), equal_nan=True), (k, got, want)
        assert np.array_equal(xa, xb, equal_nan=True), (k, xa, xb)


def test_out_into_a_plain_array_runs_uncompiled():
    buf = np.zeros(2)

    def f(x):
        np.sum(x.reshape(2, 2), axis=0, out=buf)
        return buf * 1.0

    jf = tp.jit(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(3):
            x = np.arange(4.0) + k
            got = jf(x)
            assert np.array_equal(got, np.sum(x.reshape(2, 2), axis=0))
    assert any("out=" in str(w.message) or "in place" in str(w.message) for w in caught)


def test_nan_to_num_copy_false_on_a_differentiated_value_is_refused():
    x = np.array([1.0, np.nan])
    with pytest.raises(TypeError, match="copy=False"):
        tp.grad(lambda x: (np.nan_to_num(x, copy=False), np.sum(x))[1])(x)
    np.testing.assert_array_equal(tp.grad(lambda x: np.sum(np.nan_to_num(x)))(x), [1.0, 0.0])
