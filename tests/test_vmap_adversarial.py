"""Adversarial vmap programs compared with the per-item Python loop they
stand for (values, the caller's arrays afterwards)."""
import warnings

import numpy as np
import pytest

import tapestry as tp


def _plain_write(out, x):
    """A per-item value written into a plain array: vmap runs f per item."""
    out[0] = x.sum()


# f writes into its in_axes=None argument ``w``, then does something that
# makes vmap run f once per item: the whole batch's first run must not leave
# its writes behind (a loop writes once per item, and each item sees them).
WRITES = {
    "setitem": lambda w: w.__setitem__(0, w[0] + 1.0),
    "fill": lambda w: w.fill(w[0] + 1.0),
    "ufunc_out": lambda w: np.add(w, 1.0, out=w),
    "ufunc_at": lambda w: np.add.at(w, [0, 0], 1.0),
    "copyto": lambda w: np.copyto(w, w + 1.0),
    "put": lambda w: np.put(w, [0], w[0] + 1.0),
    "method_put": lambda w: w.put([1], w[1] + 1.0),
    "flat": lambda w: w.flat.__setitem__(0, w[0] + 1.0),
    "sort": lambda w: (w.__setitem__(1, -w[1] - 1.0), w.sort()),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_write_into_unbatched_arg_then_per_item_run_matches_loop(name):
    write = WRITES[name]

    def f(w, x):
        write(w)
        out = np.zeros(2)
        _plain_write(out, x)  # per item from here on
        return out + w

    X = np.arange(6.0).reshape(3, 2)
    w_loop = np.array([0.5, 2.0])
    want = np.stack([f(w_loop, x) for x in X])
    w_vmap = np.array([0.5, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(f, in_axes=(None, 0))(w_vmap, X)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(w_vmap, w_loop)



def test_write_into_unbatched_arg_on_empty_batch_per_item_run_writes_nothing():
    def f(w, x):
        w[0] += 1.0
        out = np.zeros(2)
        _plain_write(out, x)
        return out + w

    w = np.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(f, in_axes=(None, 0))(w, np.zeros((0, 2)))
    assert got.shape == (0, 2)
    np.testing.assert_array_equal(w, np.zeros(2))  # a loop over no items writes nothing


def _writes_then_needs_items(w, x):
    w[0] += 1.0
    out = np.zeros(2)
    _plain_write(out, x)
    return out + w


def _loop_of_writes(w, X):
    return np.stack([_writes_then_needs_items(w, x) for x in X])


@pytest.mark.parametrize("order", ["jit_of_vmap", "vmap_of_jit"])
def test_write_into_unbatched_jit_arg_then_per_item_run_is_not_silently_off(order):
    # inside jit the whole batch's write into the staged argument cannot be
    # undone: a loop's results, or a refusal naming it -- never one write more
    X = np.arange(6.0).reshape(3, 2)
    fn = (tp.jit(tp.vmap(_writes_then_needs_items, in_axes=(None, 0))) if order == "jit_of_vmap"
          else tp.vmap(tp.jit(_writes_then_needs_items), in_axes=(None, 0)))
    w_loop = np.zeros(2)
    want = _loop_of_writes(w_loop, X)
    for _ in range(2):
        w = np.zeros(2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got = fn(w, X)
            except TypeError as e:
                assert "in_axes=None" in str(e)
                continue
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(w, w_loop)


def test_write_into_unbatched_value_made_inside_jit_then_per_item_run_matches_loop():
    def g(w, X):
        v = w * 1.0
        return tp.vmap(_writes_then_needs_items, in_axes=(None, 0))(v, X), v

    X = np.arange(6.0).reshape(3, 2)
    h = tp.jit(g)
    for k in range(3):
        v_loop = np.zeros(2)
        want = _loop_of_writes(v_loop, X + k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got, v = h(np.zeros(2), X + k)
            except TypeError as e:
                assert "in_axes=None" in str(e)
                continue
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(v, v_loop)
