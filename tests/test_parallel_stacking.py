"""Items given as a list, stacked column by column (parallel/stacking.py):
the same arrays as a ``tree_map`` of ``np.stack`` over the items wherever
it applies, and a decline (the caller's general stacking) elsewhere."""
from collections import namedtuple

import numpy as np
import pytest

import tapestry as tp
from tapestry.core.pytree import tree_flatten, tree_map
from tapestry.parallel.stacking import columns, stacked


def _by_np_stack(items):
    return tree_map(lambda *xs: np.stack(xs), *items)


def _same(a, b):
    la, ta = tree_flatten(a)
    lb, tb = tree_flatten(b)
    assert ta == tb
    if isinstance(a, dict):
        assert list(a) == list(b)  # the item's own key order
    for x, y in zip(la, lb):
        assert type(x) is type(y) and x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


rng = np.random.default_rng(0)
CASES = {
    "arrays": [rng.normal(size=3) for _ in range(5)],
    "0-d arrays": [np.asarray(rng.normal()) for _ in range(4)],
    "float32 matrices": [rng.normal(size=(2, 3)).astype(np.float32) for _ in range(3)],
    "dicts, keys unsorted": [{"z": rng.normal(size=2), "a": i, "m": float(i) / 3}
                             for i in range(6)],
    "tuples": [(rng.normal(size=4), i) for i in range(3)],
    "lists": [[np.arange(3) + i, 2.5 * i] for i in range(4)],
    "one item": [{"x": rng.normal(size=2)}],
    "empty arrays": [np.zeros((0, 2)) for _ in range(3)],
    "transposed and strided views": [np.arange(6.0).reshape(2, 3).T, np.ones((3, 2)),
                                     np.arange(12.0).reshape(3, 4)[:, ::2]],
    "rows of one matrix": list(rng.normal(size=(5, 4))),
    "ints": [np.arange(3) * i for i in range(3)],
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_same_arrays_as_np_stack(name):
    items = CASES[name]
    got = stacked(items)
    assert got is not None
    _same(got, _by_np_stack(items))


DECLINED = {
    "shapes differ": [np.zeros(2), np.zeros(3)],
    "lengths that add up": [np.zeros(19), np.zeros(21)],  # (40 elements: two rows of 20)
    "trailing axes differ": [np.zeros((2, 3)), np.zeros((2, 4))],
    "one axis more": [np.zeros((2, 3)), np.zeros((2, 3, 1))],
    "byte orders differ": [np.zeros(2), np.zeros(2, ">f8")],
    "int and float arrays": [np.arange(2), np.arange(2.0)],
    "0-d dtypes differ": [np.asarray(1.0), np.asarray(1.0, np.float32)],
    "dtypes differ": [np.zeros(2), np.zeros(2, np.float32)],
    "int and float in one leaf": [{"a": 1}, {"a": 2.0}],
    "key orders differ": [{"a": np.zeros(1), "b": 1.0}, {"b": 2.0, "a": np.zeros(1)}],
    "namedtuples": [namedtuple("P", "x y")(np.zeros(1), 1.0)] * 2,
    "bools": [(True, np.zeros(1)), (False, np.zeros(1))],
    "numpy scalars": [np.float32(1.0), np.float32(2.0)],
    "an int too large": [{"n": 2 ** 70}, {"n": 1}],
    "an array subclass": [np.zeros(2).view(np.matrix), np.zeros(2).view(np.matrix)],
    "no items": [],
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_declines_what_np_stack_does_otherwise(name):
    assert columns(DECLINED[name]) is None


def group_logp(g, u, alpha, beta):
    uj = u[g["j"]]
    eta = alpha + beta * g["x"] + uj
    return np.sum(g["y"] * eta - np.exp(eta)) - 0.5 * uj * uj


@pytest.mark.parametrize("ex", ["serial", "threads"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vectorize_over_a_list_has_the_bits_of_stacked_items(ex, dtype):
    r = np.random.default_rng(1)
    n, m = 37, 6
    st = {"x": r.normal(size=(n, m)).astype(dtype),
          "y": r.poisson(2.0, size=(n, m)).astype(dtype), "j": np.arange(n) % 5}
    listed = [{"x": st["x"][i], "y": st["y"][i], "j": int(st["j"][i])} for i in range(n)]
    u = r.normal(size=5).astype(dtype)

    def vg(items):
        return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
            group_logp, items, u, a, b, chunk_size=10, vectorize=True, executor=ex),
            argnums=(0, 1, 2))(u, 0.3, -0.2)
    got, want = vg(listed), vg(st)
    for x, y in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()
    before = [dict(g) for g in listed]

    def writes_its_item(g, u):
        g["x"] = g["x"] * 0.0  # (on the stacked copy: the caller's items are untouched)
        return np.sum(g["x"] * u[0])
    tp.grad(lambda u: tp.parallel_sum(writes_its_item, listed, u, vectorize=True,
                                      chunk_size=10))(u)
    for g, b in zip(listed, before):
        assert g.keys() == b.keys() and all(g[k] is b[k] for k in g)
