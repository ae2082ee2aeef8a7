"""The cache-hit path of a jitted call: the one-walk key of the arguments
(``jit/order.py``: ``call_key``, ``input_order``), the environment's checks
as one function (``Environment.compiled_check``) and the outputs rebuilt by
a generated function (``slots.output_builder``).

Each is a faster way to do what the general path does, so each is checked
against it: the call key tells two calls apart exactly when the general key
(tree structure, leaf signature, dict key order) does; replays through it
give the plain call's bits, dicts in any key order; the compiled check
fails exactly where ``Environment.changed`` names a change; the builder
gives ``TreeDef.unflatten``'s tree.
"""
from __future__ import annotations

import array
import sys
import types
import weakref
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import tapestry as tp
from jit_checks import same
from tapestry.core.pytree import tree_flatten
from tapestry.jit import api
from tapestry.jit.env import Environment
from tapestry.jit.order import aux_key, call_key
from tapestry.jit.slots import output_builder

Pair = namedtuple("Pair", "a b")
Twin = namedtuple("Twin", "a b")  # (the same fields: another structure)
Fields = [namedtuple(f"Fields{n}", [f"f{i}" for i in range(n)]) for n in range(4)]


def general_key(args, kwargs=None):
    """The key the general path of ``jit.__call__`` makes."""
    leaves, treedef = tree_flatten((args, kwargs or {}))
    return (treedef, api._signature(leaves)[0], (), aux_key(treedef))


def _argument_lists():
    a, b = np.ones(3), np.zeros(3)
    return [
        (a,), (a, b), (b, a), ((a, b),), ([a, b],), ((a,), b), (a, (b,)),
        ({"x": a, "y": b},), ({"y": b, "x": a},), ({"x": a},), ({"x": a, "y": None},),
        ({"x": a, "y": True},), ({"x": a, "y": False},), ({"x": a, "y": 1},),
        ({"x": a, "y": 1.0},), ({"x": a, "y": 1j},), ({"x": a, "y": "s"},),
        ({"x": a, "y": "t"},), ({"x": a, "y": b"s"},), ({1: a, 2: b},), ({2: b, 1: a},),
        ({1: a, "b": b},), ({"b": b, 1: a},), ({"x": {"y": a, "z": b}},),
        ({"x": {"z": b, "y": a}},), ({"x": [a, {"q": b, "p": 2}]},),
        ({"x": [a, {"p": 2, "q": b}]},), (a.astype(np.float32),), (np.ones(4),),
        (np.ones((3, 1)),), (np.float64(1.0),), (np.float32(1.0),), (np.int64(1),),
        (1.0,), (1,), (1j,), (True,), (None,), ((),), ([],), ({},), ((None,),),
        ([[a]],), ([(a,)],), (a, None), (None, a), ("s", a), (a, "s"),
        (Pair(a, b),), (Pair(b, a),), (Twin(a, b),), ((a, b),), (Pair(a, 1.0),),
        (Pair(a, None),), ({"p": Pair(a, [b])},), (Pair({"y": b, "x": a}, 2),),
        (Pair({"x": a, "y": b}, 2),),
    ]


def _calls():
    """``(args, kwargs)`` pairs: the argument lists, and keyword arguments."""
    a, b = np.ones(3), np.zeros(3)
    return [(c, {}) for c in _argument_lists()] + [
        ((a,), {"y": b}), ((a,), {"z": b}), ((a, b), {}), ((a, {"y": b}), {}),
        ((a,), {"y": b, "z": 1.0}), ((a,), {"z": 1.0, "y": b}), ((), {"x": a, "y": b}),
        ((), {"y": b, "x": a}), ((a,), {"y": [b, None]}), ((a,), {"y": True}),
        ((a,), {"y": "s"}), ((a,), {"y": {"p": b}}),
    ]


def test_call_key_tells_calls_apart_exactly_as_the_general_key():
    """Two calls share a call key if and only if they share the general
    key: a shared one would replay a program traced for another structure,
    key order or static value (the worst case: inputs in the wrong slots)."""
    cases = _calls()
    keys = [(call_key(*c), general_key(*c)) for c in cases]
    assert all(ck is not None for ck, _ in keys)
    for i, (ck1, gk1) in enumerate(keys):
        for j, (ck2, gk2) in enumerate(keys):
            assert (ck1[0] == ck2[0]) == (gk1 == gk2), (cases[i], cases[j])


@pytest.mark.parametrize("args", [
    (OrderedDict(a=np.ones(2)),), ({1.5: np.ones(2)},), ({True: np.ones(2)},),
    ({"a": np.ma.masked_array([1.0])},), ({"a": object()},),
    ([np.ones(2), {"a": Pair(1.0, object())}],), (np.ma.masked_array([1.0]),),
], ids=["OrderedDict", "float key", "bool key", "array subclass", "object",
        "deep object", "top-level subclass"])
def test_call_key_leaves_other_arguments_to_the_general_path(args):
    assert call_key(args) is None


def test_an_array_passed_twice_takes_the_general_path():
    """``f(x, x)`` is one input seen twice (``x is y`` in the function): the
    general key says where, so the call key leaves it there; a number
    passed twice is two inputs, as the general key has it."""
    a, b = np.ones(2), np.zeros(2)
    for args in [(a, a), ((a, a),), ({"x": a, "y": a},), (a, [b, a]), (a, {"k": (a,)})]:
        assert call_key(args) is None
    k = 1.5
    assert call_key((k, k))[0] == call_key((1.5, 2.5))[0]
    assert general_key((k, k)) == general_key((1.5, 2.5))

    def f(x, p):
        return x * 2.0 if x is p["y"] else x + p["y"]
    jf = tp.jit(f)
    for x, y in [(a, b), (a, a), (b, a), (b, b)]:
        same(jf(x, {"y": y}), f(x, {"y": y}))


def _weighted(tree):
    """A sum that depends on every leaf and on the order the function meets
    them in (dict values in the dict's own order)."""
    total, k = 0.0, 1.0
    stack = [tree]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif x is None or isinstance(x, (bool, str)):
            total = total + (7.0 if x is True else 0.0)
        else:
            total = total + k * np.sum(x)
            k += 1.0
    return total


def _random_tree(rng, depth=0):
    r = rng.integers(0, 10 if depth < 3 else 5)
    if r == 0:
        return rng.normal(size=int(rng.integers(1, 4)))
    if r == 1:
        return float(rng.normal())
    if r == 2:
        return np.float32(rng.normal())
    if r == 3:
        return [None, True, False, "s"][int(rng.integers(0, 4))]
    if r == 4:
        return rng.normal(size=())
    n = int(rng.integers(0, 4))
    kids = [_random_tree(rng, depth + 1) for _ in range(n)]
    if r in (5, 6):
        names = [str(s) for s in rng.permutation(["a", "b", "c", "d", "e"])[:n]]
        return dict(zip(names, kids))
    if r == 7:
        return dict(zip([int(v) for v in rng.permutation(9)[:n]], kids))
    if r == 8:
        return tuple(kids) if rng.integers(0, 2) else Fields[n](*kids)
    return kids


def _fresh_values(tree, rng):
    """``tree`` with new values in every array and float (same signature)."""
    if isinstance(tree, dict):
        return {k: _fresh_values(v, rng) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        kids = [_fresh_values(v, rng) for v in tree]
        return type(tree)(*kids) if hasattr(tree, "_fields") else type(tree)(kids)
    if isinstance(tree, np.ndarray):
        return rng.normal(size=tree.shape).astype(tree.dtype)
    if isinstance(tree, (float, np.floating)) and not isinstance(tree, bool):
        return type(tree)(rng.normal())
    return tree


def test_replays_put_every_leaf_in_its_slot_for_random_trees():
    """Random trees (dicts in shuffled key order, str and int keys, nested
    lists, tuples and namedtuples, static values): each traced once, then replayed on
    new values, interleaved with the others; every result is the plain
    call's (the tree passed positionally, and by keyword), and the call
    key agrees with the general key on each pair."""
    rng = np.random.default_rng(0)
    trees = [_random_tree(rng) for _ in range(60)]
    jf = tp.jit(_weighted, cache_size=1000)
    for rounds in range(3):
        for k, t in enumerate(trees):
            args = (_fresh_values(t, rng) if rounds else t,)
            same(jf(*args), _weighted(*args))
            if k % 2:  # and as a keyword argument
                same(jf(tree=args[0]), _weighted(*args))
    assert tree_flatten({"e": None})[1].num_leaves == 0  # None is still no leaf
    for t1 in trees[:30]:
        for t2 in trees[:30]:
            c1, c2 = call_key((t1,)), call_key((t2,))
            assert (c1[0] == c2[0]) == (general_key((t1,)) == general_key((t2,)))


def test_dict_items_in_the_callers_order_reach_their_slots():
    """W7's item: a dict in unsorted key order with an int index among the
    arrays; the same keys in another order is another signature."""
    def f(g, u, alpha):
        return np.sum(g["y"] * (alpha + g["x"] + u[g["j"]]) - g["c"]), list(g)
    jf = tp.jit(f)
    rng = np.random.default_rng(1)
    u = rng.normal(size=5)
    for j in range(5):
        g = {"x": rng.normal(size=4), "y": rng.normal(size=4), "c": rng.normal(size=4), "j": j}
        same(jf(g, u, 0.5), f(g, u, 0.5))
        g2 = {"j": j, "c": g["c"], "y": g["y"], "x": g["x"]}
        same(jf(g2, u, 0.5), f(g2, u, 0.5))
    assert jf.n_traces == 2


def test_keyword_arguments_reach_their_slots():
    """Keyword arguments in either order, a dict among them, after
    positional ones: each order is its own signature, each replay the plain
    call's."""
    def f(x, *, w, p, scale=1.0):
        return scale * (x * w + p["b"] - 2.0 * p["a"]), list(p)
    jf = tp.jit(f)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x, w, a, b = (rng.normal(size=3) for _ in range(4))
        for kw in ({"w": w, "p": {"b": b, "a": a}}, {"p": {"a": a, "b": b}, "w": w},
                   {"w": w, "p": {"b": b, "a": a}, "scale": 3.0}):
            same(jf(x, **kw), f(x, **kw))
    assert jf.n_traces == 3


def test_dict_keys_equal_to_str_or_int_keys_take_the_general_path():
    """``np.uint8(1) == 1``, but a dict with keys ``"a"`` and ``1`` flattens
    in the order ``1, "a"`` and one with ``"a"`` and ``np.uint8(1)`` in the
    order ``"a", np.uint8(1)`` (keys that do not compare are ordered by type
    name): the general key tells them apart, and so does the call key,
    which takes only str and int keys."""
    def f(d):
        return d["a"] - 2.0 * d[1]
    jf = tp.jit(f)
    a, b = np.ones(2), np.full(2, 5.0)
    same(jf({"a": a, 1: b}), f({"a": a, 1: b}))
    d = {"a": a, np.uint8(1): b}
    same(jf(d), f(d))
    assert call_key((d,)) is None and jf.n_traces == 2


def test_traced_arguments_still_run_inline():
    """A traced value inside a dict (grad of a jitted function of a dict) is
    not a plain leaf: the general path sees it and runs the call inline."""
    jf = tp.jit(lambda p: np.sum(p["w"] * p["x"]))
    p = {"x": np.arange(3.0), "w": np.ones(3)}
    g = tp.grad(lambda w: jf({"x": p["x"], "w": w}))(p["w"])
    np.testing.assert_array_equal(g, p["x"])


# --- the environment's checks as one function ----------------------------------------
class _Obj:
    pass


class _Slotted:
    __slots__ = ("w",)


def _environment():
    """An environment with a binding of every kind, and the values behind it."""
    env = Environment()
    cell = types.CellType(1.5)
    d = {"k": "v"}
    obj, slotted, target = _Obj(), _Slotted(), _Obj()
    obj.w = "w"
    slotted.w = 2.5
    ref = weakref.ref(target)
    buf = array.array("d", [1.0, 2.0])
    lst = [1, "a"]
    mapping = {"HOME": "/h"}
    env.bindings += [("copy", mapping, None, dict(mapping), "copy")]
    env.bindings += [("cell", cell, None, 1.5, "cell"), ("dict", d, "k", "v", "dict"),
                     ("attr", obj, "w", "w", "attr"), ("eq", slotted, "w", 2.5, "eq"),
                     ("ref", ref, None, target, "ref"), ("bytes", buf, None, buf.tobytes(),
                                                         "bytes"),
                     ("len", d, None, 1, "len"), ("attrs", obj.__dict__, None, 1, "attrs"),
                     ("seq", lst, None, list(lst), "seq")]
    arr = np.arange(3.0)
    env.add_arrays([arr], "array")
    return env, dict(cell=cell, d=d, obj=obj, slotted=slotted, target=target, buf=buf,
                     lst=lst, arr=arr, mapping=mapping)


def _changes(v):
    """(what it changes, change, undo) for every kind of binding."""
    return [
        ("cell", lambda: setattr(v["cell"], "cell_contents", 2.5),
         lambda: setattr(v["cell"], "cell_contents", 1.5)),
        ("deleted cell", lambda: delattr(v["cell"], "cell_contents"),
         lambda: setattr(v["cell"], "cell_contents", 1.5)),
        ("dict", lambda: v["d"].__setitem__("k", "w"), lambda: v["d"].__setitem__("k", "v")),
        ("len", lambda: v["d"].__setitem__("k2", 0), lambda: v["d"].pop("k2")),
        ("attr", lambda: setattr(v["obj"], "w", "x"), lambda: setattr(v["obj"], "w", "w")),
        ("attrs", lambda: setattr(v["obj"], "z", 0), lambda: delattr(v["obj"], "z")),
        ("eq", lambda: setattr(v["slotted"], "w", 3.5),
         lambda: setattr(v["slotted"], "w", 2.5)),
        ("eq type", lambda: setattr(v["slotted"], "w", 2),
         lambda: setattr(v["slotted"], "w", 2.5)),
        ("bytes", lambda: v["buf"].__setitem__(0, 9.0), lambda: v["buf"].__setitem__(0, 1.0)),
        ("seq", lambda: v["lst"].__setitem__(1, "b"), lambda: v["lst"].__setitem__(1, "a")),
        ("array", lambda: v["arr"].__setitem__(0, -0.0), lambda: v["arr"].__setitem__(0, 0.0)),
        ("copy", lambda: v["mapping"].__setitem__("HOME", "/x"),
         lambda: v["mapping"].__setitem__("HOME", "/h")),
    ]


def test_compiled_check_fails_exactly_where_changed_names_a_change():
    env, v = _environment()
    check = env.compiled_check()
    assert check() is True and env.changed() is None
    for what, change, undo in _changes(v):
        change()
        assert check() is False, what
        assert env.changed() is not None, what
        undo()
        assert check() is True and env.changed() is None, what
    unknown = Environment()  # a kind the compiled check does not know: changed() decides
    unknown.bindings.append(("new kind", [1], None, [1], "new"))
    assert unknown.compiled_check()() is False and unknown.changed() is None
    other = Environment()  # a weak reference now reaching another object
    other.bindings.append(("ref", weakref.ref(v["obj"]), None, v["target"], "ref"))
    assert other.compiled_check()() is False and other.changed() is not None


def test_a_large_environment_is_checked_by_changed(monkeypatch):
    env, v = _environment()
    monkeypatch.setattr(sys.modules["tapestry.jit.env"], "COMPILED_CHECKS", len(env) - 1)
    check = env.compiled_check()
    assert check() is True
    for what, change, undo in _changes(v):
        change()
        assert check() is False, what
        undo()


def test_a_changed_closure_traces_again_through_the_compiled_check():
    scale = [2.0]

    def f(x):
        return x * scale[0]
    jf = tp.jit(f)
    x = np.ones(2)
    same(jf(x), f(x))
    scale[0] = 3.0
    same(jf(x), f(x))
    assert jf.n_traces == 2 and "modified" in jf.explain_cache_misses()[-1]


# --- outputs rebuilt by a generated function ------------------------------------------
@pytest.mark.parametrize("tree", [
    1.0, (1.0,), [1.0, 2.0], (1.0, (2.0, [3.0])), {"b": 1.0, "a": 2.0},
    {"a": (1.0, None), "c": [2.0]}, None, (), [], {}, ({3: 1.0, 1: 2.0}, 5.0),
    Pair(1.0, 2.0), [OrderedDict(b=1.0, a=2.0)], {"x": Pair(1.0, [2.0])},
])
def test_output_builder_gives_unflattens_tree(tree):
    leaves, td = tree_flatten(tree)
    build = output_builder(td)
    got, want = build(tuple(leaves)), td.unflatten(leaves)
    assert repr(got) == repr(want) and type(got) is type(want)
    assert tree_flatten(got)[1] == td
    with pytest.raises(ValueError):
        build(tuple(leaves) + (0.0,))
