"""Pytrees as in JAX: containers, sorted dict keys, registration, static
dataclass fields, tree_map over several trees, ravel_pytree, pickling."""
import dataclasses
import pickle
from collections import OrderedDict, defaultdict, namedtuple

import numpy as np
import pytest

import tapestry as tp
from tapestry import tree_util as tu

Point = namedtuple("Point", "x y")


class Box:
    """A user class registered as a container (children: lo, hi; aux: name)."""

    def __init__(self, lo, hi, name):
        self.lo, self.hi, self.name = lo, hi, name


tu.register_pytree_node(Box, lambda b: ((b.lo, b.hi), b.name),
                        lambda name, ch: Box(ch[0], ch[1], name))


@dataclasses.dataclass
class Layer:
    W: np.ndarray
    n_units: int
    name: str
    scale: float = dataclasses.field(default=1.0, metadata={"static": True})


@tu.register_dataclass
@dataclasses.dataclass(frozen=True)
class Frozen:
    a: np.ndarray
    tag: str = dataclasses.field(default="t", metadata={"static": True})


def test_dict_keys_flatten_sorted_so_equal_dicts_have_equal_structures():
    a = {"b": 1.0, "a": 2.0}
    b = {"a": 2.0, "b": 1.0}
    assert tp.tree_leaves(a) == [2.0, 1.0] == tp.tree_leaves(b)
    assert tp.tree_structure(a) == tp.tree_structure(b)
    assert tp.tree_map(lambda x: x, a) == a


def test_mixed_key_types_flatten_deterministically():
    a, b = {1: 1.0, "x": 2.0}, {"x": 2.0, 1: 1.0}
    assert tp.tree_leaves(a) == tp.tree_leaves(b)


def test_ordered_dict_keeps_insertion_order_and_type():
    d = OrderedDict([("b", 1.0), ("a", 2.0)])
    leaves, td = tp.tree_flatten(d)
    assert leaves == [1.0, 2.0]
    back = td.unflatten(leaves)
    assert type(back) is OrderedDict and list(back) == ["b", "a"]
    assert td != tp.tree_structure(OrderedDict([("a", 2.0), ("b", 1.0)]))


def test_defaultdict_flattens_and_keeps_its_factory():
    d = defaultdict(list, {"b": np.ones(2), "a": np.zeros(1)})
    leaves, td = tp.tree_flatten(d)
    assert [x.shape for x in leaves] == [(1,), (2,)]
    back = td.unflatten(leaves)
    assert type(back) is defaultdict and back.default_factory is list
    assert back["new"] == []


def test_namedtuple_and_none():
    t = Point(np.ones(2), None)
    leaves, td = tp.tree_flatten(t)
    assert len(leaves) == 1
    back = td.unflatten([np.zeros(2)])
    assert isinstance(back, Point) and back.y is None


def test_sets_are_leaves():
    leaves = tp.tree_leaves({"s": {"b", "a"}})
    assert leaves == [{"a", "b"}]


def test_registered_class_flattens_rebuilds_and_differentiates():
    b = Box(np.array([1.0, 2.0]), np.array(3.0), "box")
    leaves, td = tp.tree_flatten(b)
    assert len(leaves) == 2
    back = td.unflatten(leaves)
    assert isinstance(back, Box) and back.name == "box"
    g = tp.grad(lambda b: np.sum(b.lo ** 2) * b.hi)(b)
    assert isinstance(g, Box) and g.name == "box"
    assert np.allclose(g.lo, 2 * b.lo * 3.0) and np.allclose(g.hi, 5.0)
    assert td != tp.tree_structure(Box(b.lo, b.hi, "other"))


def test_registering_a_builtin_container_is_refused():
    with pytest.raises(ValueError, match="already a pytree container"):
        tu.register_pytree_node(dict, None, None)


def test_dataclass_int_str_and_marked_fields_are_static():
    layer = Layer(np.ones((2, 2)), 2, "dense", 0.5)
    leaves, td = tp.tree_flatten(layer)
    assert len(leaves) == 1  # only W; n_units, name are int/str; scale is marked
    g = tp.grad(lambda L: np.sum(L.W * L.scale) * L.n_units)(layer)
    assert isinstance(g, Layer) and g.n_units == 2 and g.name == "dense"
    assert np.allclose(g.W, 1.0)
    assert td != tp.tree_structure(Layer(np.ones((2, 2)), 3, "dense", 0.5))


def test_register_dataclass_follows_jax():
    f = Frozen(np.arange(3.0), "z")
    leaves, td = tp.tree_flatten(f)
    assert len(leaves) == 1 and td.unflatten(leaves) == f
    back = td.unflatten([np.ones(3)])
    assert isinstance(back, Frozen) and back.tag == "z"
    g = tp.grad(lambda f: np.sum(f.a ** 2))(f)
    assert np.allclose(g.a, 2 * f.a) and g.tag == "z"


def test_register_dataclass_explicit_fields():
    class P:
        def __init__(self, w, k):
            self.w, self.k = w, k
    tu.register_dataclass(P, data_fields=["w"], meta_fields=["k"])
    leaves, td = tp.tree_flatten(P(np.ones(2), 7))
    assert len(leaves) == 1 and td.unflatten(leaves).k == 7
    with pytest.raises(TypeError, match="both"):
        tu.register_dataclass(Point, data_fields=["x"])


def test_tree_map_over_several_trees_and_is_leaf():
    a = {"x": 1.0, "y": (2.0, 3.0)}
    b = {"x": 10.0, "y": (20.0, 30.0)}
    assert tp.tree_map(lambda u, v: u + v, a, b) == {"x": 11.0, "y": (22.0, 33.0)}
    # the second tree may hold whole subtrees where the first has leaves
    out = tp.tree_map(lambda u, sub: (u, sub), {"x": 1.0}, {"x": [1, 2]})
    assert out == {"x": (1.0, [1, 2])}
    n = tp.tree_map(lambda t: len(t), {"p": (1.0, 2.0), "q": (3.0,)},
                    is_leaf=lambda t: isinstance(t, tuple))
    assert n == {"p": 2, "q": 1}
    with pytest.raises(ValueError, match="differ at the root"):
        tp.tree_map(lambda u, v: u, {"x": 1.0}, {"z": 1.0})


def test_unflatten_checks_the_leaf_count():
    td = tp.tree_structure({"a": 1.0, "b": 2.0})
    with pytest.raises(ValueError, match="takes 2 leaves, got 1"):
        td.unflatten([1.0])


@pytest.mark.parametrize("tree", [
    {"b": np.ones(2, np.float32), "a": np.arange(6.0).reshape(2, 3)},
    [np.float64(2.0), (np.ones(1),)],
    {},
])
def test_ravel_pytree_round_trip_keeps_shapes_and_dtypes(tree):
    flat, unravel = tp.ravel_pytree(tree)
    leaves = tp.tree_leaves(tree)
    assert flat.ndim == 1 and flat.size == sum(np.size(x) for x in leaves)
    back = unravel(flat)
    assert tp.tree_structure(back) == tp.tree_structure(tree)
    for x, y in zip(tp.tree_leaves(back), leaves):
        assert np.shape(x) == np.shape(y) and np.result_type(x) == np.result_type(y)
        assert np.array_equal(x, y)
    with pytest.raises(ValueError, match="unravel expects"):
        unravel(np.zeros(flat.size + 1))


def test_ravel_pytree_is_differentiable():
    tree = {"a": np.array([1.0, 2.0]), "b": np.array(3.0)}
    flat, unravel = tp.ravel_pytree(tree)
    g = tp.grad(lambda v: np.sum(unravel(v)["a"] ** 2) * unravel(v)["b"])(flat)
    assert np.allclose(g, [6.0, 12.0, 5.0])
    g = tp.grad(lambda t: np.sum(tp.ravel_pytree(t)[0] ** 2))(tree)
    assert np.allclose(g["a"], 2 * tree["a"]) and np.allclose(g["b"], 6.0)


def test_treedef_pickles_with_registered_and_builtin_nodes():
    tree = {"d": defaultdict(float, {"k": 1.0}), "o": OrderedDict(z=2.0),
            "box": Box(1.0, 2.0, "n"), "layer": Layer(np.ones(1), 1, "l"),
            "p": Point(1.0, 2.0)}
    leaves, td = tp.tree_flatten(tree)
    td2 = pickle.loads(pickle.dumps(td))
    assert td2 == td
    back = td2.unflatten(leaves)
    assert back["box"].name == "n" and back["layer"].name == "l"
    assert "box" in repr(td)


def test_is_leaf_can_make_none_a_leaf():
    out = tp.tree_map(lambda v: 0.0 if v is None else v, {"a": None, "b": 1.0},
                      is_leaf=lambda v: v is None)
    assert out == {"a": 0.0, "b": 1.0}


@pytest.mark.parametrize("make", [
    lambda a, b: OrderedDict([("z", a), ("a", b)]),
    lambda a, b: defaultdict(float, {"z": b, "a": a}),   # sorted: a first
    lambda a, b: Point(a, b),
    lambda a, b: {"z": [b, None], "a": a},
])
def test_gradients_keep_the_container(make):
    a, b = np.array([1.0, 2.0]), np.array(3.0)
    tree = make(a, b)
    g = tp.grad(lambda t: np.sum(tp.tree_leaves(t)[0] ** 2) * tp.tree_leaves(t)[1])(tree)
    assert type(g) is type(tree)
    assert tp.tree_structure(g) == tp.tree_structure(tree)
    ga, gb = tp.tree_leaves(g)
    la, lb = tp.tree_leaves(tree)
    np.testing.assert_allclose(ga, 2 * la * lb)
    np.testing.assert_allclose(gb, np.sum(la ** 2))


def test_leaf_order_matches_jax():
    jtu = pytest.importorskip("jax.tree_util")
    tree = {"z": [1.0, (2.0, None)], "a": OrderedDict([("y", 3.0), ("b", 4.0)]),
            "m": Point(5.0, {"k": 6.0, "c": 7.0}), "d": defaultdict(int, {"q": 8.0, "e": 9.0})}
    assert tp.tree_leaves(tree) == jtu.tree_leaves(tree)
    assert tp.tree_map(lambda v: v * 2, tree) == jtu.tree_map(lambda v: v * 2, tree)
    f1, _ = tp.ravel_pytree(tree)
    import jax.flatten_util
    np.testing.assert_array_equal(f1, np.asarray(jax.flatten_util.ravel_pytree(tree)[0]))


def _random_tree(rng, depth=0):
    """A random nested tree of every container kind, leaves arrays and floats."""
    if depth > 3 or rng.uniform() < 0.3:
        u = rng.uniform()
        return (None if u < 0.1 else 1.5 if u < 0.3 else np.float32(2.0) if u < 0.4
                else np.arange(float(rng.integers(0, 4))))
    kids = [_random_tree(rng, depth + 1) for _ in range(int(rng.integers(0, 4)))]
    keys = [str(k) for k in rng.permutation(len(kids))]
    kind = int(rng.integers(0, 7))
    if kind == 0:
        return tuple(kids)
    if kind == 1:
        return kids
    if kind == 2:
        return dict(zip(keys, kids))
    if kind == 3:
        return OrderedDict(zip(keys, kids))
    if kind == 4:
        return defaultdict(list, zip(keys, kids))
    if kind == 5 and len(kids) >= 2:
        return Point(kids[0], kids[1])
    return Box(kids[0] if kids else 1.0, kids[1] if len(kids) > 1 else None, "b")


@pytest.mark.parametrize("seed", range(30))
def test_random_trees_round_trip_flatten_pickle_and_ravel(seed):
    rng = np.random.default_rng(seed)
    tree = _random_tree(rng)
    leaves, td = tp.tree_flatten(tree)
    again = td.unflatten(leaves)
    assert tp.tree_structure(again) == td
    assert all(a is b for a, b in zip(tp.tree_leaves(again), leaves))
    assert pickle.loads(pickle.dumps(td)) == td
    twice = tp.tree_map(lambda a, b: a + b, tree, again)
    for x, y in zip(tp.tree_leaves(twice), leaves):
        np.testing.assert_array_equal(x, 2 * np.asarray(y))
    flat, unravel = tp.ravel_pytree(tree)
    assert flat.size == sum(np.size(x) for x in leaves)
    for x, y in zip(tp.tree_leaves(unravel(flat)), leaves):
        assert np.shape(x) == np.shape(y) and np.result_type(x) == np.result_type(y)


# --- dicts keep their own key order through every transformation -------------------------
def _ordered_loss(p):
    # depends on the order of p.values(): plain code sees the caller's order
    v = np.concatenate(list(p.values()))
    return np.sum(v * np.arange(1.0, v.size + 1.0) ** 2)


def test_dicts_keep_the_callers_key_order_under_transformations():
    import tapestry as tp
    p = {"w2": np.array([1.0, 2.0]), "w1": np.array([3.0, 4.0]), "b": np.array([5.0])}
    want = _ordered_loss(p)
    seen = []

    def spy(q):
        seen.append(list(q))
        return _ordered_loss(q)

    v, g = tp.value_and_grad(spy)(p)
    assert v == want and list(g) == ["w2", "w1", "b"]
    np.testing.assert_allclose(g["w1"], [9.0, 16.0])  # positions 3 and 4 of the values
    assert all(order == ["w2", "w1", "b"] for order in seen)
    assert tp.jit(_ordered_loss)(p) == want
    stacked = {k: np.stack([a, 2 * a]) for k, a in p.items()}
    per = tp.vmap(_ordered_loss)(stacked)
    assert per[0] == want and list(tp.vmap(lambda q: q)(stacked)) == ["w2", "w1", "b"]
    t = tp.jvp(_ordered_loss, (p,), (tp.tree_map(np.ones_like, p),))[0]
    assert t == want
    assert list(tp.tree_map(lambda a: a, p)) == ["w2", "w1", "b"]


def test_key_order_is_not_part_of_the_structure_and_survives_pickling():
    import pickle
    from tapestry import tree_util as tu
    a = tu.tree_structure({"b": 1.0, "a": 2.0})
    b = tu.tree_structure({"a": 2.0, "b": 1.0})
    assert a == b and hash(a) == hash(b)
    c = pickle.loads(pickle.dumps(a))
    assert c == a and list(c.unflatten([1, 2])) == ["b", "a"]
    assert list(tu.tree_map(lambda x, y: x + y, {"b": 1.0, "a": 2.0}, {"a": 2.0, "b": 1.0})) \
        == ["b", "a"]
