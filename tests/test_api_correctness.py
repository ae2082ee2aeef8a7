"""API correctness (issue 9, item 6): outputs grad cannot differentiate are
refused by name, repeated argnums, array-like cotangents, size-1 outputs;
and the pytree structure of Jacobians and Hessians (issue 10)."""
import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

rng = np.random.default_rng(1)


# --- outputs that are not numbers ----------------------------------------------------
@pytest.mark.parametrize("bad,typename", [(None, "NoneType"), ("loss", "str"), ([1.0], "list"),
                                          ({"a": 1.0}, "dict")])
@pytest.mark.parametrize("op", ["grad", "value_and_grad"])
def test_non_numeric_output_is_refused_by_name(bad, typename, op):
    f = getattr(tp, op)(lambda x: (np.sum(x), bad)[1])
    with pytest.raises(TypeError, match=rf"tapestry\.{op}.*{typename}"):
        f(np.ones(3))


def test_forgotten_return_says_so():
    def loss(x):
        np.sum(x ** 2)  # no return
    with pytest.raises(TypeError, match="missing `return`"):
        tp.grad(loss)(np.ones(2))
    with pytest.raises(TypeError, match=r"tapestry\.grad: .*NoneType"):
        tp.grad(lambda x: (None, 1), has_aux=True)(np.ones(2))


def test_integer_output_is_refused():
    with pytest.raises(TypeError, match="float scalar, got dtype int"):
        tp.grad(lambda x: np.int64(3))(np.ones(2))


# --- repeated argnums ---------------------------------------------------------------------
def test_repeated_argnums_give_the_same_gradient_everywhere():
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    f = lambda x, y: np.sum(np.sin(x) * y)  # noqa: E731
    g0, g1, g2 = tp.grad(f, argnums=(0, 0, 1))(x, y)
    np.testing.assert_allclose(g0, np.cos(x) * y)
    np.testing.assert_array_equal(g0, g1)
    np.testing.assert_allclose(g2, np.sin(x))
    J = tp.jacrev(lambda x, y: np.sin(x) * y, argnums=(1, 1))(x, y)
    np.testing.assert_array_equal(J[0], J[1])
    Jf = tp.jacfwd(lambda x, y: np.sin(x) * y, argnums=(1, 1))(x, y)
    np.testing.assert_allclose(Jf[0], np.diag(np.sin(x)))
    np.testing.assert_array_equal(Jf[0], Jf[1])


# --- vjp cotangents ---------------------------------------------------------------------
@pytest.mark.parametrize("ct", [2.0, 2, np.float32(2.0), np.array(2.0), [2.0]], ids=repr)
def test_pullback_accepts_array_likes_for_a_scalar(ct):
    x = rng.standard_normal(3)
    shape = (1,) if isinstance(ct, list) else ()
    y, pullback = tp.vjp(lambda x: np.reshape(np.sum(x ** 2), shape), x)
    (g,) = pullback(ct)
    np.testing.assert_allclose(g, 4 * x)
    assert g.dtype == np.float64


def test_pullback_accepts_lists_and_casts_to_the_output_dtype():
    x = rng.standard_normal(3).astype(np.float32)
    y, pullback = tp.vjp(lambda x: x * 2, x)
    (g,) = pullback([1, 2, 3])
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [2.0, 4.0, 6.0])
    y, pullback = tp.vjp(lambda x: {"a": x, "b": (x[0], x * 3)}, x)
    (g,) = pullback({"a": [1.0, 0, 0], "b": (1.0, [0, 0, 1])})
    np.testing.assert_allclose(g, [2.0, 0.0, 3.0])


def test_pullback_wrong_shape_names_both_shapes():
    _, pullback = tp.vjp(lambda x: x * 2, np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 3\)"):
        pullback(np.ones(3))
    _, pullback = tp.vjp(lambda x: {"a": x}, np.ones(2))
    with pytest.raises(ValueError, match="structure"):
        pullback({"b": np.ones(2)})


# --- size-1 outputs --------------------------------------------------------------------------
def test_grad_accepts_size_one_outputs_of_any_shape():
    x, w = rng.standard_normal((1, 4)), rng.standard_normal((4, 1))
    g = tp.grad(lambda w: x @ w)(w)
    np.testing.assert_allclose(g, x.T)
    v, g = tp.value_and_grad(lambda w: np.tanh(x @ w))(w)
    assert np.shape(v) == (1, 1)
    check_grads(lambda w: np.tanh(x @ w), (w,))
    with pytest.raises(TypeError, match=r"shape \(2,\)"):
        tp.grad(lambda w: np.ones(2) * np.sum(w))(w)


# --- Jacobian and Hessian structures (what failed before) ----------------------------
def test_hessian_of_a_dict_is_a_dict_of_dicts():
    p = {"a": rng.standard_normal(2), "b": rng.standard_normal((2, 3))}
    f = lambda p: np.sum(np.tanh(p["b"].T @ p["a"]) ** 2)  # noqa: E731
    H = tp.hessian(f)(p)
    assert set(H) == {"a", "b"} and set(H["a"]) == {"a", "b"}
    assert H["a"]["b"].shape == (2, 2, 3) and H["b"]["b"].shape == (2, 3, 2, 3)
    np.testing.assert_allclose(H["a"]["b"], np.moveaxis(H["b"]["a"], (0, 1), (1, 2)), atol=1e-12)
    hv = tp.hessian_vector_product(f)(p, {"a": np.ones(2), "b": np.zeros((2, 3))})
    np.testing.assert_allclose(hv["b"], H["b"]["a"] @ np.ones(2), atol=1e-12)


def test_jacobian_of_dict_and_tuple_outputs():
    x = rng.standard_normal(3)
    J = tp.jacobian(lambda x: {"y": np.sin(x), "z": (np.sum(x), x[:2] * 2)})(x)
    np.testing.assert_allclose(J["y"], np.diag(np.cos(x)))
    np.testing.assert_allclose(J["z"][0], np.ones(3))
    np.testing.assert_allclose(J["z"][1], 2 * np.eye(3)[:2])


def test_hessian_with_argnums_tuple_is_a_tuple_of_tuples():
    a, b = rng.standard_normal(2), rng.standard_normal(3)
    f = lambda a, b: np.sum(a) ** 2 * np.sum(b ** 3)  # noqa: E731
    H = tp.hessian(f, argnums=(0, 1))(a, b)
    assert [[h.shape for h in row] for row in H] == [[(2, 2), (2, 3)], [(3, 2), (3, 3)]]
    np.testing.assert_allclose(H[0][1], 2 * np.sum(a) * np.tile(3 * b ** 2, (2, 1)))
    np.testing.assert_allclose(H[1][1], np.diag(6 * b) * np.sum(a) ** 2)


def test_jacobian_is_jacrev_and_elementwise_grad():
    assert tp.jacobian is tp.jacrev
    x = rng.standard_normal(4)
    np.testing.assert_allclose(tp.elementwise_grad(np.tanh)(x), 1 - np.tanh(x) ** 2)
    gx, gy = tp.elementwise_grad(lambda x, y: x * y, argnums=(0, 1))(x, 2 * x)
    np.testing.assert_allclose(gx, 2 * x)
    np.testing.assert_allclose(gy, x)


def test_jvp_argument_errors():
    with pytest.raises(TypeError, match="tuple"):
        tp.jvp(np.sin, np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=r"tangent shape \(3,\).*\(2,\)"):
        tp.jvp(np.sin, (np.ones(2),), (np.ones(3),))
    with pytest.raises(ValueError, match="one tangent per primal"):
        tp.jvp(np.sin, (np.ones(2),), ())


@pytest.mark.parametrize("op", ["vjp", "jvp", "linearize", "jacfwd", "jacrev", "hessian"])
def test_non_numeric_output_leaves_are_refused_by_name(op):
    f = lambda x: {"y": np.sum(x), "tag": "label"}  # noqa: E731
    x = np.ones(2)
    call = {"vjp": lambda: tp.vjp(f, x), "jvp": lambda: tp.jvp(f, (x,), (x,)),
            "linearize": lambda: tp.linearize(f, x), "jacfwd": lambda: tp.jacfwd(f)(x),
            "jacrev": lambda: tp.jacrev(f)(x), "hessian": lambda: tp.hessian(f)(x)}[op]
    with pytest.raises(TypeError, match=rf"tapestry\.(jacrev|{op}): .*type str"):
        call()


def test_vjp_of_several_outputs_is_one_sweep_and_exact():
    """Outputs that share nodes, one output an intermediate of another, the
    same output twice and an input returned as is: one sweep seeds them all,
    and the caller's cotangent arrays are never written into."""
    import tapestry as tp
    rng = np.random.default_rng(3)
    x = rng.standard_normal(5)

    def f(x):
        h = np.sin(x)
        y = h * h
        return h, y, y, x, np.sum(y)

    cts = tuple(rng.standard_normal(s) for s in [(5,), (5,), (5,), (5,), ()])
    kept = [c.copy() for c in cts]
    _, pullback = tp.vjp(f, x)
    (g,) = pullback(cts)
    expected = (cts[0] * np.cos(x) + (cts[1] + cts[2] + cts[4]) * 2 * np.sin(x) * np.cos(x)
                + cts[3])
    np.testing.assert_allclose(g, expected, rtol=1e-12)
    assert all(np.array_equal(a, b) for a, b in zip(cts, kept))
    (again,) = pullback(cts)  # reusable
    np.testing.assert_allclose(again, expected, rtol=1e-12)
