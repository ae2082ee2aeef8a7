"""Edge cases of the transformation API: tree structures where two trees
meet (tangents, cotangents, tree_map), argnums, aliasing of the caller's
arrays by kept traces, dtypes under nesting, Hessian blocks, and errors that
name the transform the user called."""
import dataclasses

import numpy as np
import pytest

import tapestry as tp
import tapestry.tree_util as tu

rng = np.random.default_rng(7)


# --- tree_map and register_dataclass ------------------------------------------------
def test_tree_map_mismatch_names_the_path_and_both_structures():
    with pytest.raises(ValueError, match=r"tree 2 .* differ at \['y'\]: a tuple of length 2 "
                                         r"in the first tree, a tuple of length 1 in tree 2"):
        tp.tree_map(lambda a, b: a, {"x": 1.0, "y": (1.0, 2.0)}, {"x": 1.0, "y": (1.0,)})
    with pytest.raises(ValueError, match=r"keys \['x'\] in the first tree, a dict with keys "
                                         r"\['z'\] in tree 3.*TreeDef\(\{'z': \*\}\)"):
        tp.tree_map(lambda a, b, c: a, {"x": 1.0}, {"x": 2.0}, {"z": 1.0})
    with pytest.raises(ValueError, match=r"at \[1\]\['a'\]: a leaf|at \[1\]: a dict"):
        tp.tree_map(lambda a, b: a, (1.0, {"a": 1.0}), (1.0, [1.0]))


def test_flatten_up_to_names_the_path():
    td = tp.tree_structure({"p": (1.0, 2.0)})
    with pytest.raises(ValueError, match=r"at \['p'\]: a tuple of length 2 expected, a "
                                         r"tuple of length 3 given"):
        tu.flatten_up_to(td, {"p": (1.0, 2.0, 3.0)})


@dataclasses.dataclass
class _Two:
    a: float
    b: float


def test_register_dataclass_checks_its_fields_at_registration():
    with pytest.raises(ValueError, match=r"Missing: \['b'\]"):
        tu.register_dataclass(_Two, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match=r"Not init fields of _Two: \['c'\]"):
        tu.register_dataclass(_Two, data_fields=["a", "b", "c"], meta_fields=[])
    with pytest.raises(ValueError, match=r"\['a'\] listed more than once"):
        tu.register_dataclass(_Two, data_fields=["a", "b"], meta_fields=["a"])
    with pytest.raises(TypeError, match="must be strings"):
        tu.register_dataclass(_Two, data_fields=["a", 1], meta_fields=["b"])
    # nothing was registered by the refused calls: _Two still flattens by field
    assert tp.tree_leaves(_Two(1.0, 2.0)) == [1.0, 2.0]


class _Plain:
    def __init__(self, w, b, scale=1.0):
        self.w, self.b, self.scale = w, b, scale


def test_register_dataclass_checks_a_plain_class_against_its_init():
    # flatten silently dropped b, and the first tree_map failed in cls(**fields)
    with pytest.raises(ValueError, match=r"_Plain\(\*\*fields\).*Missing: \['b'\]"):
        tu.register_dataclass(_Plain, data_fields=["w"], meta_fields=[])
    with pytest.raises(ValueError, match=r"Not parameters of _Plain: \['c'\]"):
        tu.register_dataclass(_Plain, data_fields=["w", "b", "c"], meta_fields=[])
    with pytest.raises(ValueError, match=r"tapestry.tree_util.register_pytree_node: int is a "
                                         r"leaf type"):
        tu.register_dataclass(int, data_fields=[], meta_fields=[])  # ints would vanish
    with pytest.raises(ValueError, match=r"float64 is a leaf type"):
        tu.register_pytree_node(np.float64, lambda x: ((), None), lambda a, c: 0.0)
    assert tp.tree_leaves({"n": 3, "x": np.float64(1.0)}) == [3, 1.0]


# --- tangents matched to primals by structure (jvp, linearize, hvp) --------------------
def _wx(d):
    return d["w"] * 2.0 + d["x"] * 3.0


def test_jvp_refuses_a_tangent_with_other_keys_instead_of_matching_by_position():
    primal = {"w": 1.0, "x": 1.0}
    with pytest.raises(ValueError, match=r"tapestry\.jvp: the tangent of argument 0 .* "
                                         r"keys \['w', 'x'\] in the primal, a dict with "
                                         r"keys \['x', 'y'\] in the tangent"):
        tp.jvp(_wx, (primal,), ({"x": 1.0, "y": 0.0},))
    # the same keys in another insertion order are the same tree: matched by key
    _, t = tp.jvp(_wx, (primal,), ({"x": 1.0, "w": 0.0},))
    assert t == 3.0


def test_tangent_leaf_errors_name_argument_path_and_both_shapes_or_dtypes():
    p = (np.ones(2), {"a": np.ones(3)})
    f = lambda x, d: np.sum(x) * np.sum(d["a"])  # noqa: E731
    with pytest.raises(ValueError, match=r"tangent shape \(2,\) does not match primal "
                                         r"shape \(3,\) \(the tangent of argument 1 at \['a'\]\)"):
        tp.jvp(f, p, (np.ones(2), {"a": np.ones(2)}))
    with pytest.raises(TypeError, match=r"argument 1 at \['a'\] has dtype int64, its primal "
                                        "float64"):
        tp.jvp(f, p, (np.ones(2), {"a": np.ones(3, np.int64)}))
    with pytest.raises(TypeError, match="complex128, its primal float64.*imaginary"):
        tp.jvp(f, p, (np.ones(2) * 1j, {"a": np.ones(3)}))
    with pytest.raises(TypeError, match="float64, its primal complex128.*must be a complex"):
        # a complex primal takes a complex tangent (refused before forward mode's
        # complex refusal, which would otherwise hide the mistake)
        tp.jvp(np.sum, (np.ones(2) + 0j,), (np.ones(2),))


def test_tangents_of_another_float_precision_are_cast_to_the_primal():
    x32 = np.ones(3, np.float32)
    y, t = tp.jvp(np.sin, (x32,), (np.ones(3),))
    assert y.dtype == t.dtype == np.float32
    y, t = tp.jvp(np.sin, (x32,), ([1.0, 2.0, 3.0],))  # an array-like for an array
    assert t.dtype == np.float32
    np.testing.assert_allclose(t, np.cos(1.0) * np.array([1, 2, 3]), rtol=1e-6)


def test_linearize_checks_tangent_structure_and_shape():
    p = {"w": np.ones(2), "x": np.ones(3)}
    _, f_jvp = tp.linearize(lambda d: np.sum(d["w"]) * np.sum(d["x"]), p)
    with pytest.raises(ValueError, match=r"tapestry\.linearize: the tangent of argument 0 "
                                         r".*keys \['w', 'x'\] in the primal"):
        f_jvp({"x": np.ones(3), "y": np.ones(2)})
    with pytest.raises(ValueError, match=r"primal shape \(2,\).*at \['w'\]"):
        f_jvp({"w": np.ones(3), "x": np.ones(3)})
    assert f_jvp({"w": np.ones(2), "x": np.zeros(3)}) == 6.0


def test_hvp_checks_v_against_the_differentiated_arguments():
    f = lambda a, d: np.sum(a ** 2) * np.sum(d["p"] ** 2)  # noqa: E731
    a, d = np.ones(2), {"p": np.ones(3)}
    hvp = tp.hessian_vector_product(f, argnums=(0, 1))
    with pytest.raises(ValueError, match=r"hessian_vector_product: v \(for argument 1\) .*"
                                         r"keys \['p'\] in the primal, a dict with keys "
                                         r"\['q'\]"):
        hvp(a, d, (np.ones(2), {"q": np.ones(3)}))
    with pytest.raises(ValueError, match=r"v must be a tuple of 2 vectors"):
        hvp(a, d, np.ones(2))
    with pytest.raises(ValueError, match=r"shape \(2,\).*v \(for argument 0\)"):
        tp.hessian_vector_product(f)(a, d, np.ones(3))


# --- cotangents matched to outputs (vjp pullbacks) -------------------------------------
def _two(d):
    return {"a": d["x"] * 2.0, "b": np.sin(d["x"])}


@pytest.mark.parametrize("ct,where", [
    ({"a": np.ones(2), "b": np.ones(2), "c": 1.0}, r"keys \['a', 'b', 'c'\]"),
    ({"a": np.ones(2)}, r"keys \['a'\] in the cotangent"),
    ({"a": np.ones(2), "c": np.ones(2)}, r"keys \['a', 'c'\]"),
    ((np.ones(2), np.ones(2)), "a tuple"),
])
def test_pullback_refuses_missing_extra_or_renamed_keys(ct, where):
    _, pb = tp.vjp(_two, {"x": np.ones(2)})
    with pytest.raises(ValueError, match=rf"tapestry\.vjp: the cotangent does not have the "
                                         rf"output's tree structure.*{where}"):
        pb(ct)


def test_pullback_names_the_output_leaf_of_a_wrong_shape():
    _, pb = tp.vjp(lambda x: (x, {"s": np.sum(x)}), np.ones(2))
    with pytest.raises(ValueError, match=r"shape \(2,\) does not match output shape \(\) "
                                         r"\(output leaf \[1\]\['s'\]\)"):
        pb((np.ones(2), {"s": np.ones(2)}))
    g, = pb([np.ones(2), {"s": 1.0}])  # a list for the tuple, as before
    np.testing.assert_allclose(g, 2.0)


def test_pullback_of_a_dataclass_output():
    @dataclasses.dataclass
    class Out:
        u: np.ndarray
        v: np.ndarray
    _, pb = tp.vjp(lambda x: Out(np.sin(x), x * 3.0), np.array([0.5, 1.0]))
    g, = pb(Out(np.ones(2), np.ones(2)))
    np.testing.assert_allclose(g, np.cos([0.5, 1.0]) + 3.0)
    with pytest.raises(ValueError, match="does not have the output's tree structure"):
        pb({"u": np.ones(2), "v": np.ones(2)})


# --- kept traces keep their point when the caller updates arrays in place --------------
def test_linearize_keeps_its_point_after_an_in_place_update():
    x = np.array([0.5, 1.0])
    y, f_jvp = tp.linearize(np.sin, x)
    x += 1.0  # what an optimizer step does to a parameter
    np.testing.assert_allclose(f_jvp(np.ones(2)), np.cos([0.5, 1.0]))
    np.testing.assert_allclose(y, np.sin([0.5, 1.0]))


def test_vjp_pullback_keeps_its_point_after_an_in_place_update():
    p = {"w": np.array([0.5, 1.0]), "b": np.array(0.25)}
    y, pb = tp.vjp(lambda p: np.sin(p["w"]) * p["b"], p)
    p["w"] -= 0.1
    p["b"] *= 3.0
    g, = pb(np.ones(2))
    np.testing.assert_allclose(g["w"], np.cos([0.5, 1.0]) * 0.25)
    np.testing.assert_allclose(g["b"], np.sum(np.sin([0.5, 1.0])))


def test_mutating_the_returned_output_does_not_change_the_derivative():
    x = np.array([0.5, 1.0])
    y, pb = tp.vjp(np.exp, x)  # exp's rule reads its result
    y *= 100.0
    np.testing.assert_allclose(pb(np.ones(2))[0], np.exp(x))
    y, f_jvp = tp.linearize(np.tanh, x)  # so does tanh's
    y[:] = 0.0
    np.testing.assert_allclose(f_jvp(np.ones(2)), 1 - np.tanh(x) ** 2)
    y, pb = tp.vjp(lambda x: x, x)  # the identity returns a fresh array, not x
    assert y is not x and np.shares_memory(y, x) is False


def test_mutating_the_returned_aux_does_not_change_the_derivative():
    x = np.array([0.5, 1.0])

    def f(x):
        e, t = np.exp(x), np.tanh(x)  # both rules read their results
        return np.sum(e) + np.sum(t), {"e": e, "t": [t]}
    _, pb, aux = tp.vjp(f, x, has_aux=True)
    _, f_jvp, aux2 = tp.linearize(f, x, has_aux=True)
    for a in (aux, aux2):
        a["e"] *= 100.0
        a["t"][0][:] = 0.0
    ref = np.exp(x) + 1 - np.tanh(x) ** 2
    np.testing.assert_allclose(pb(1.0)[0], ref)
    np.testing.assert_allclose([f_jvp(e) for e in np.eye(2)], ref)


def test_optimizer_steps_between_vjp_and_pullback():
    w = {"w": np.array([1.0, -2.0])}
    _, pb = tp.vjp(lambda p: np.sum(p["w"] ** 3), w)
    opt = tp.optim.SGD(lr=0.5)
    opt.update(w, {"w": np.array([1.0, 1.0])})
    np.testing.assert_allclose(w["w"], [0.5, -2.5])  # the step happened in place
    np.testing.assert_allclose(pb(1.0)[0]["w"], 3 * np.array([1.0, -2.0]) ** 2)


def test_grad_sanity_with_in_place_updates_between_calls():
    x = np.array([0.5, 1.0])
    g = tp.grad(lambda x: np.sum(np.sin(x)))
    first = g(x)
    x += 1.0
    np.testing.assert_allclose(first, np.cos([0.5, 1.0]))
    np.testing.assert_allclose(g(x), np.cos([1.5, 2.0]))


def test_read_only_inputs_are_not_copied():
    x = np.array([0.5, 1.0])
    x.flags.writeable = False
    from tapestry.core.tracing import own_input
    assert own_input(x) is x
    view = np.arange(4.0)[1:3]
    assert own_input(view) is not view  # a view of writeable memory is copied


# --- dtypes follow the input under nesting ---------------------------------------------
_C64 = np.float64(1.5)  # a float64 constant meets float32 inputs


def _f(x):
    return np.sum(np.sin(x) * _C64 * np.arange(1.0, 4.0)) + _C64 * np.sum(x ** 3)


def _nested(name, x):
    v = np.ones_like(x)
    if name == "grad":
        return [tp.grad(_f)(x)]
    if name == "jacrev":
        return [tp.jacrev(_f)(x)]
    if name == "hessian":
        return [tp.hessian(_f)(x)]
    if name == "hvp":
        return [tp.hessian_vector_product(_f)(x, v)]
    if name == "jacfwd(grad)":
        return [tp.jacfwd(tp.grad(_f))(x)]
    if name == "jacrev(grad)":
        return [tp.jacrev(tp.grad(_f))(x)]
    if name == "jvp(grad)":
        return list(tp.jvp(tp.grad(_f), (x,), (v,)))
    if name == "linearize(grad)":
        y, f_jvp = tp.linearize(tp.grad(_f), x)
        return [y, f_jvp(v)]
    if name == "grad(grad)":
        return [tp.grad(lambda x: np.sum(tp.grad(_f)(x) * _C64))(x)]
    if name == "vjp(grad)":
        y, pb = tp.vjp(tp.grad(_f), x)
        return [y, pb(np.ones(3))[0]]
    raise AssertionError(name)


_NESTINGS = ["grad", "jacrev", "hessian", "hvp", "jacfwd(grad)", "jacrev(grad)",
             "jvp(grad)", "linearize(grad)", "grad(grad)", "vjp(grad)"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", _NESTINGS)
def test_every_composition_returns_the_input_dtype(name, dtype):
    x = np.array([0.3, -0.7, 1.1], dtype)
    outs = _nested(name, x)
    assert [o.dtype for o in outs] == [np.dtype(dtype)] * len(outs)
    ref = _nested(name, x.astype(np.float64))  # the same numbers, to float32 precision
    for o, r in zip(outs, ref):
        np.testing.assert_allclose(o, r, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_hessian_of_float32_matches_finite_differences():
    x = np.array([0.3, -0.7, 1.1])
    H = tp.hessian(_f)(x.astype(np.float32))
    eps = 1e-5
    fd = np.stack([(tp.grad(_f)(x + eps * e) - tp.grad(_f)(x - eps * e)) / (2 * eps)
                   for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(H, fd, rtol=1e-4, atol=1e-5)


# --- Hessian blocks of several arguments -----------------------------------------------
def _h(a, B, c):
    return np.sum(np.tanh(a) ** 2) * np.sum(B ** 3) + np.sum(np.outer(a, c) * B[:, :3]) \
        + np.sin(c[0]) * np.sum(B)


def _fd_hessian_block(f, args, i, j, eps=1e-5):
    """d/dx_j of the gradient wrt x_i, by central differences on x_j."""
    xj = args[j]
    cols = []
    for k in range(xj.size):
        e = np.zeros(xj.size)
        e[k] = eps
        plus, minus = list(args), list(args)
        plus[j], minus[j] = xj + e.reshape(xj.shape), xj - e.reshape(xj.shape)
        cols.append((tp.grad(f, i)(*plus) - tp.grad(f, i)(*minus)) / (2 * eps))
    return np.moveaxis(np.stack(cols), 0, -1).reshape(args[i].shape + xj.shape)


@pytest.mark.parametrize("argnums", [(0, 1, 2), (2, 0), (1,)])
def test_hessian_of_arguments_of_different_sizes_is_nested_blocks(argnums):
    args = (rng.standard_normal(2), rng.standard_normal((2, 4)), rng.standard_normal(3))
    H = tp.hessian(_h, argnums=argnums)(*args)
    J = tp.jacfwd(tp.jacrev(_h, argnums=argnums), argnums=argnums)(*args)
    assert isinstance(H, tuple) and len(H) == len(argnums)
    for r, i in enumerate(argnums):
        assert isinstance(H[r], tuple) and len(H[r]) == len(argnums)
        for c, j in enumerate(argnums):
            assert H[r][c].shape == args[i].shape + args[j].shape
            np.testing.assert_allclose(H[r][c], J[r][c], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(H[r][c], _fd_hessian_block(_h, args, i, j),
                                       rtol=1e-5, atol=1e-6)
    # symmetric blocks: H[i][j] is H[j][i] transposed
    if len(argnums) > 1:
        a0, a1 = args[argnums[0]], args[argnums[1]]
        np.testing.assert_allclose(
            H[0][1].reshape(a0.size, a1.size), H[1][0].reshape(a1.size, a0.size).T,
            rtol=1e-12, atol=1e-12)


def test_hvp_of_several_arguments_matches_the_hessian_blocks():
    args = (rng.standard_normal(2), rng.standard_normal((2, 4)), rng.standard_normal(3))
    v = (rng.standard_normal(2), rng.standard_normal(3))
    H = tp.hessian(_h, argnums=(0, 2))(*args)
    hv = tp.hessian_vector_product(_h, argnums=(0, 2))(*args, v)
    for r in range(2):
        np.testing.assert_allclose(hv[r], H[r][0] @ v[0] + H[r][1] @ v[1], rtol=1e-12)


# --- argnums ---------------------------------------------------------------------------
_TRANSFORMS = ["grad", "value_and_grad", "jacrev", "jacfwd", "hessian", "elementwise_grad",
               "hessian_vector_product"]


def _call(name, argnums):
    f = lambda a, b: np.sum(a ** 2) * np.sum(b ** 3)  # noqa: E731
    a, b = np.ones(2), np.full(3, 0.5)
    t = getattr(tp, name)(f, argnums=argnums)
    if name == "hessian_vector_product":
        return t(a, b, np.ones(3) if np.ndim(argnums) == 0 else (np.ones(3),))
    return t(a, b)


@pytest.mark.parametrize("name", _TRANSFORMS)
def test_numpy_integer_argnums_are_accepted(name):
    ref = _call(name, 1)
    got = _call(name, np.int64(1))
    for r, g in zip(tp.tree_leaves(ref), tp.tree_leaves(got)):
        np.testing.assert_array_equal(r, g)
    got = _call(name, (np.int32(1),))
    assert tp.tree_structure(got) == tp.tree_structure(_call(name, (1,)))


@pytest.mark.parametrize("bad", [True, np.bool_(False), 1.0, None, (0, True)])
@pytest.mark.parametrize("name", _TRANSFORMS)
def test_bool_and_float_argnums_are_refused_when_the_transform_is_made(name, bad):
    f = lambda a, b: np.sum(a)  # noqa: E731
    with pytest.raises(TypeError, match=rf"tapestry\.{name}: argnums must be an int or a "
                                        r"tuple of ints"):
        getattr(tp, name)(f, argnums=bad)


def test_check_grads_and_autograd_take_numpy_integer_argnums():
    import tapestry.autograd as ag
    from tapestry.testing import check_grads
    f = lambda a, b: np.sum(np.sin(a) * b)  # noqa: E731
    a, b = np.ones(2), np.full(2, 0.5)
    check_grads(f, (a, b), argnums=np.int64(1))
    np.testing.assert_allclose(ag.grad(f, np.int64(1))(a, b), np.sin(a))
    with pytest.raises(TypeError, match="argnum must be an int"):
        ag.grad(f, True)


# --- errors name the transform the user called -----------------------------------------
@pytest.mark.parametrize("name", ["hessian", "hessian_vector_product"])
def test_errors_inside_hessian_name_it(name):
    t = getattr(tp, name)
    args = (np.ones(2), np.ones(2)) if name == "hessian_vector_product" else (np.ones(2),)
    with pytest.raises(ValueError, match=rf"tapestry\.{name}: argnums=5"):
        t(lambda x: np.sum(x), argnums=5)(*args)
    with pytest.raises(TypeError, match=rf"tapestry\.{name}: "):
        t(lambda x: "loss")(*args)
    with pytest.raises(TypeError, match=rf"tapestry\.{name}: argument 0 has dtype int"):
        t(lambda x: np.sum(x))(*[np.ones(2, int)] * len(args))


def test_pullback_results_do_not_alias_the_callers_cotangent():
    ct = np.ones(3)
    for f in (lambda x: x, lambda x: x + 0.5, lambda x: {"a": x}["a"][:]):
        _, pb = tp.vjp(f, np.arange(3.0))
        g, = pb(ct)
        assert not np.shares_memory(g, ct)
        g += 1.0  # an in-place update of the gradient leaves ct alone
        np.testing.assert_array_equal(ct, np.ones(3))


def test_register_pytree_node_refuses_non_functions_at_registration():
    class Box:
        pass
    with pytest.raises(TypeError, match=r"register_pytree_node\(Box\): unflatten must be a "
                                        "function"):
        tu.register_pytree_node(Box, lambda b: ((), None), None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hessian_blocks_through_the_reverse_over_reverse_fallback(dtype):
    """Complex intermediates (an FFT) send hessian to reverse over reverse:
    the blocks, their nesting and their dtype are the same as forward over reverse."""
    def h(a, b):
        z = np.fft.fft(np.concatenate([a, b]))
        return np.sum(np.abs(z) ** 2 * np.arange(5.0)) + np.sum(a) ** 2 * np.sum(b ** 3)
    a, b = rng.standard_normal(2).astype(dtype), rng.standard_normal(3).astype(dtype)
    H = tp.hessian(h, argnums=(0, 1))(a, b)
    args = (a.astype(np.float64), b.astype(np.float64))
    for i in range(2):
        for j in range(2):
            assert H[i][j].dtype == dtype and H[i][j].shape == args[i].shape + args[j].shape
            np.testing.assert_allclose(H[i][j], _fd_hessian_block(h, args, i, j),
                                       rtol=1e-4 if dtype == np.float32 else 1e-6, atol=1e-4)


def test_unravel_refuses_a_complex_vector_for_real_leaves():
    _, unravel = tp.ravel_pytree({"a": np.ones(2), "b": np.ones(1, np.float32)})
    assert unravel(np.arange(3.0))["b"].dtype == np.float32  # real: cast, as before
    with pytest.raises(TypeError, match="complex vector for a tree with real leaves"):
        unravel(np.ones(3) * 1j)


def test_autograd_operators_name_themselves_in_errors():
    import tapestry.autograd as ag
    with pytest.raises(TypeError, match=r"tapestry\.autograd\.grad: argument 0 has dtype int"):
        ag.grad(lambda x: np.sum(x))(np.ones(2, int))
    with pytest.raises(ValueError, match=r"tapestry\.autograd\.make_jvp: tangent shape"):
        ag.make_jvp(np.sin)(np.ones(2))(np.ones(3))
    vjp, _ = ag.make_vjp(lambda x: {"a": x})(np.ones(2))
    with pytest.raises(ValueError, match=r"tapestry\.autograd\.make_vjp: the cotangent does "
                                         r"not have the output's tree structure"):
        vjp({"b": np.ones(2)})


@pytest.mark.parametrize("how", ["grad", "value_and_grad", "vjp"])
def test_gradients_of_different_arguments_are_different_arrays(how):
    # x + y passes one cotangent to both: updating one gradient in place
    # (weight decay, clipping) must not change the other
    f = lambda p: np.sum(p["a"] + p["b"]) + np.sum(p["c"][0] - p["c"][1])
    p = {"a": np.ones(3), "b": np.ones(3), "c": [np.ones(2), np.ones(2)]}
    if how == "grad":
        g = tp.grad(f)(p)
    elif how == "value_and_grad":
        g = tp.value_and_grad(f)(p)[1]
    else:
        g = tp.vjp(f, p)[1](1.0)[0]
    g["a"] += 10.0
    g["c"][0] += 10.0
    np.testing.assert_array_equal(g["b"], np.ones(3))
    np.testing.assert_array_equal(g["c"][1], -np.ones(2))
    gx, gy = tp.grad(lambda x, y: np.sum(x + y), argnums=(0, 1))(np.ones(2), np.ones(2))
    gx *= 0.0
    np.testing.assert_array_equal(gy, np.ones(2))


def test_jacobian_blocks_are_different_arrays():
    x = np.arange(3.0)
    for jac in (tp.jacfwd, tp.jacrev):
        a, b = jac(lambda x: (x, x))(x)
        a += 1.0
        np.testing.assert_array_equal(b, np.eye(3))


def test_output_tangents_are_not_the_callers_tangent_or_each_other():
    x, t = np.arange(3.0), np.ones(3)
    for f in (lambda x: (x, x), lambda x: (x + 0.0, {"b": x})):
        _, (ta, tb) = tp.jvp(f, (x,), (t,))
        _, lin = tp.linearize(f, x)
        la, lb = lin(t)
        for a, b in ((ta, tb), (la, lb)):
            a += 1.0  # the caller's own update of one result
            b = b["b"] if isinstance(b, dict) else b
            np.testing.assert_array_equal(b, np.ones(3))
        np.testing.assert_array_equal(t, np.ones(3))


def test_kept_traces_keep_closed_over_arrays_updated_in_place():
    # vjp/linearize in the inputs while the weights are a closure: an optimizer
    # step on the weights between the trace and the pullback moved the point
    # (JAX's closed-over arrays are captured as they were)
    W0 = np.array([[1.0, 2.0], [3.0, 4.0]])
    base = np.arange(1.0, 5.0)
    x = np.array([0.3, -0.7])
    cases = [
        (lambda W, b: (lambda x: np.sum(np.sin(W @ x) * b[:2]))),
        (lambda W, b: (lambda x: np.sum(x / W[0]) + np.sum(b[1:3] * x))),  # a view
        (lambda W, b: (lambda x: np.sum(np.where(W[1] > 3.5, x, 0.0) * W[1]))),
    ]
    for make in cases:
        ref = tp.grad(make(W0, base))(x)
        W, b = W0.copy(), base.copy()
        _, pb = tp.vjp(make(W, b), x)
        _, f_jvp = tp.linearize(make(W, b), x)
        W *= 10.0
        b -= 1.0
        np.testing.assert_allclose(pb(1.0)[0], ref, rtol=1e-12)
        np.testing.assert_allclose([f_jvp(e) for e in np.eye(2)], ref, rtol=1e-12)
