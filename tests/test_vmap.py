"""tapestry.vmap: JAX's semantics (in_axes / out_axes / axis_size over
pytrees, nesting), every composition with the differentiation transforms in
both orders checked against a loop over the items, and the refusals
(Python reading a batched value, mismatched batch sizes, escaped values).

Every op of the sweep tables is checked under vmap as well
(tests/sweep.py ``check_vmap``)."""
import warnings

import numpy as np
import pytest

import tapestry as tp
from vmap_checks import loop
from tapestry.core.batched import FALLBACKS, EscapedBatchError, VmapFallbackWarning

rng = np.random.default_rng(7)


def close(a, b, tol=1e-10):
    la, ta = tp.tree_flatten(a)
    lb, tb = tp.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        assert np.shape(x) == np.shape(y), (np.shape(x), np.shape(y))
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def mlp(params, x):
    h = np.tanh(params["W1"] @ x + params["b1"])
    return np.sum((params["W2"] @ h) ** 2) + 0.1 * np.sum(np.log1p(np.exp(h)))


PARAMS = {"W1": rng.standard_normal((5, 3)), "b1": rng.standard_normal(5),
          "W2": rng.standard_normal((2, 5))}
X = rng.standard_normal((4, 3))


# --- semantics -----------------------------------------------------------------------
@pytest.mark.parametrize("in_axes", [0, 1, -1, -2])
def test_in_axes_anywhere(in_axes):
    a = rng.standard_normal((3, 4, 2))[..., 0] if in_axes in (0, -2) else rng.standard_normal((3, 4))
    f = lambda x: np.sin(x) * np.sum(x)  # noqa: E731
    close(tp.vmap(f, in_axes=in_axes)(a), loop(f, (in_axes,), (a,)))


def test_pytree_in_axes_and_none():
    f = lambda p, x: mlp(p, x)  # noqa: E731
    close(tp.vmap(f, in_axes=(None, 0))(PARAMS, X), loop(f, (None, 0), (PARAMS, X)))
    stacked = tp.tree_map(lambda a: np.stack([a, 2 * a]), PARAMS)
    got = tp.vmap(f, in_axes=({"W1": 0, "b1": 0, "W2": 0}, None))(stacked, X[0])
    want = np.stack([mlp(PARAMS, X[0]), mlp(tp.tree_map(lambda a: 2 * a, PARAMS), X[0])])
    close(got, want)


def test_out_axes_and_unbatched_outputs():
    A = rng.standard_normal((3, 4))
    f = lambda x: (np.outer(x, x), np.float64(2.0))  # noqa: E731
    got = tp.vmap(f, out_axes=(2, 0))(A)
    close(got[0], np.moveaxis(np.stack([np.outer(a, a) for a in A]), 0, 2))
    close(got[1], np.full(3, 2.0))
    assert got[1].flags.writeable
    with pytest.raises(ValueError, match="out_axes is None"):
        tp.vmap(lambda x: np.sum(x), out_axes=None)(A)
    close(tp.vmap(lambda x: (np.sum(x), 1.0), out_axes=(0, None))(A)[1], 1.0)


def test_nested_vmap_composes_batch_dimensions():
    B = rng.standard_normal((2, 3, 4))
    f = lambda x, w: np.tanh(x * w).sum()  # noqa: E731
    w = rng.standard_normal(4)
    got = tp.vmap(tp.vmap(f, in_axes=(0, None)), in_axes=(0, None))(B, w)
    close(got, np.array([[f(x, w) for x in b] for b in B]))
    got = tp.vmap(tp.vmap(f, in_axes=(1, None)), in_axes=(0, None))(B, w[:3])
    close(got, np.array([[f(B[i, :, j], w[:3]) for j in range(4)] for i in range(2)]))


def test_axis_size_and_mismatched_sizes():
    out = tp.vmap(lambda c: c * 2.0, in_axes=None, axis_size=3)(np.float64(1.5))
    close(out, np.full(3, 3.0))
    with pytest.raises(ValueError, match="axis_size="):
        tp.vmap(lambda c: c, in_axes=None)(1.0)
    with pytest.raises(ValueError, match=r"argument 0: 3, argument 1: 4"):
        tp.vmap(lambda a, b: a + b)(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="in_axes has 1 entries"):
        tp.vmap(lambda a, b: a + b, in_axes=(0,))(np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="no such axis"):
        tp.vmap(lambda a: a, in_axes=2)(np.zeros((3, 3)))


# --- refusals ----------------------------------------------------------------------
@pytest.mark.parametrize("read", [lambda x: 1.0 if np.sum(x) > 0 else 2.0,
                                  lambda x: float(np.sum(x)),
                                  lambda x: int(x[0]),
                                  lambda x: range(10)[np.argmax(x)]])
def test_python_reading_a_batched_value_raises(read):
    with pytest.raises(TypeError, match="tapestry.vmap.*np.where"):
        tp.vmap(read)(X)


def test_np_where_is_the_way():
    f = lambda x: np.where(np.sum(x) > 0, x, -x)  # noqa: E731
    close(tp.vmap(f)(X), loop(f, (0,), (X,)))


def test_a_batched_value_that_escapes_raises():
    kept = []
    tp.vmap(lambda x: kept.append(x) or np.sum(x))(X)
    with pytest.raises(EscapedBatchError, match="escaped"):
        np.sin(kept[0])


def test_fallback_loops_are_counted_and_warned_once():
    f = lambda x: np.polyfit(np.arange(3.0), x, 1)  # noqa: E731  (lstsq has no rule: loops)
    before = sum(FALLBACKS.values())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tp.vmap(f)(X)
    close(got, loop(f, (0,), (X,)))
    assert sum(FALLBACKS.values()) > before
    assert all(issubclass(w.category, VmapFallbackWarning) for w in caught)


# --- composition with every transform, both orders ------------------------------------
def test_per_example_gradients():
    g = tp.grad(mlp)
    close(tp.vmap(g, in_axes=(None, 0))(PARAMS, X), loop(g, (None, 0), (PARAMS, X)))


def test_grad_of_vmap():
    f = lambda p: np.sum(tp.vmap(mlp, in_axes=(None, 0))(p, X))  # noqa: E731
    want = tp.tree_map(lambda *gs: sum(gs), *[tp.grad(mlp)(PARAMS, x) for x in X])
    close(tp.grad(f)(PARAMS), want)
    close(tp.grad(lambda x: np.sum(tp.vmap(np.sin)(x) ** 2))(X), 2 * np.sin(X) * np.cos(X))


@pytest.mark.parametrize("jac", [tp.jacfwd, tp.jacrev, tp.hessian])
def test_jacobians_inside_and_outside(jac):
    f = lambda w, x: np.sin(x * w) * np.sum(w ** 2)  # noqa: E731
    if jac is tp.hessian:
        f = lambda w, x: np.sum(np.sin(x * w) ** 2) * np.sum(w)  # noqa: E731
    w = rng.standard_normal(3)
    inside = tp.vmap(jac(f), in_axes=(None, 0))(w, X)
    close(inside, loop(jac(f), (None, 0), (w, X)))
    outside = jac(lambda w: tp.vmap(f, in_axes=(None, 0))(w, X))(w)
    close(outside, jac(lambda w: np.stack([f(w, x) for x in X]))(w))


def test_jvp_and_vjp_both_orders():
    f = lambda x: np.tanh(x) * np.sum(x ** 2)  # noqa: E731
    T = rng.standard_normal(X.shape)
    inside = tp.vmap(lambda x, t: tp.jvp(f, (x,), (t,)))(X, T)
    close(inside, loop(lambda x, t: tp.jvp(f, (x,), (t,)), (0, 0), (X, T)))
    outside = tp.jvp(tp.vmap(f), (X,), (T,))
    close(outside, inside)
    ct = rng.standard_normal(X.shape)
    pb_in = tp.vmap(lambda x, c: tp.vjp(f, x)[1](c))(X, ct)
    close(pb_in, loop(lambda x, c: tp.vjp(f, x)[1](c), (0, 0), (X, ct)))
    close(tp.vjp(tp.vmap(f), X)[1](ct), pb_in)


def test_custom_vjp_and_checkpoint_under_vmap():
    @tp.custom_vjp
    def softplus(x):
        return np.log1p(np.exp(x))

    def fwd(x):
        return softplus(x), x

    def bwd(x, g):
        return (g / (1 + np.exp(-x)),)

    softplus.defvjp(fwd, bwd)
    f = lambda x: np.sum(softplus(x) ** 2)  # noqa: E731
    close(tp.vmap(f)(X), loop(f, (0,), (X,)))
    close(tp.vmap(tp.grad(f))(X), loop(tp.grad(f), (0,), (X,)))
    close(tp.grad(lambda x: np.sum(tp.vmap(f)(x)))(X), loop(tp.grad(f), (0,), (X,)))
    c = lambda x: np.sum(tp.checkpoint(lambda y: np.sin(y) ** 2)(x))  # noqa: E731
    close(tp.vmap(tp.grad(c))(X), loop(tp.grad(c), (0,), (X,)))


def test_float32_stays_float32():
    x32 = X.astype(np.float32)
    out = tp.vmap(tp.grad(lambda x: np.sum(np.sin(x) * 2.0)))(x32)
    assert out.dtype == np.float32


def test_custom_jvp_and_linearize_both_orders():
    @tp.custom_jvp
    def logcosh(x):
        return np.log(np.cosh(x))

    @logcosh.defjvp
    def logcosh_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return logcosh(x), np.tanh(x) * t

    f = lambda x: np.sum(logcosh(x) * x)  # noqa: E731
    close(tp.vmap(tp.grad(f))(X), loop(tp.grad(f), (0,), (X,)))
    close(tp.grad(lambda x: np.sum(tp.vmap(f)(x)))(X), loop(tp.grad(f), (0,), (X,)))
    T = rng.standard_normal(X.shape)
    lin = lambda x, t: tp.linearize(f, x)[1](t)  # noqa: E731
    close(tp.vmap(lin)(X, T), loop(lin, (0, 0), (X, T)))


def test_sparse_gathers_under_vmap_both_orders():
    W = rng.standard_normal((50, 3))
    idx = np.array([[1, 4], [4, 7], [0, 1], [9, 9]])
    f = lambda W, i: np.sum(np.tanh(W[i]) ** 2)  # noqa: E731
    per_item = tp.vmap(tp.grad(f), in_axes=(None, 0))(W, idx)
    close(per_item, loop(tp.grad(f), (None, 0), (W, idx)))
    total = tp.grad(lambda W: np.sum(tp.vmap(f, in_axes=(None, 0))(W, idx)))(W)
    dense = total.todense() if hasattr(total, "todense") else total
    close(dense, sum(loop(tp.grad(f), (None, 0), (W, idx))))


def test_vmap_of_a_function_with_static_python_branches_on_shape():
    def f(x):
        if x.ndim == 1 and len(x) > 2:  # shapes are the same for every item
            return np.sum(x[:2])
        return np.sum(x)
    close(tp.vmap(f)(X), X[:, :2].sum(axis=1))


def test_hvp_elementwise_grad_and_parallel_sum_under_vmap():
    g = lambda x: tp.hessian_vector_product(lambda x: np.sum(np.sin(x) ** 3))(x, np.ones(3))  # noqa: E731
    close(tp.vmap(g)(X), loop(g, (0,), (X,)))
    e = tp.elementwise_grad(lambda x: np.tanh(x) * x)
    close(tp.vmap(e)(X), loop(e, (0,), (X,)))
    items = [1.0, 2.0, 3.0]
    s = lambda x: tp.parallel_sum(lambda a, x: np.sum(np.sin(a * x)), items, x)  # noqa: E731
    close(tp.vmap(s)(X), loop(s, (0,), (X,)))
    close(tp.vmap(tp.grad(s))(X), loop(tp.grad(s), (0,), (X,)))


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
def test_parallel_vectorize_maps_each_chunk(executor):
    """parallel_sum / parallel_map with vectorize=True: f per item, each
    chunk one vmap call; values and gradients as the item-by-item call,
    items as a list of pytrees or as stacked arrays."""
    items = [{"x": rng.standard_normal(3), "j": j % 3} for j in range(10)]
    u = rng.standard_normal(3)

    def f(item, u, a):
        return np.sum(np.sin(item["x"] * a) + u[item["j"]] ** 2)

    want = tp.value_and_grad(lambda u, a: tp.parallel_sum(f, items, u, a, chunk_size=3),
                             argnums=(0, 1))(u, 0.7)
    got = tp.value_and_grad(lambda u, a: tp.parallel_sum(
        f, items, u, a, chunk_size=3, executor=executor, vectorize=True), argnums=(0, 1))(u, 0.7)
    close(got, want)
    stacked = {"x": np.stack([i["x"] for i in items]), "j": np.array([i["j"] for i in items])}
    # (u[j] with a plain u and a batched j cannot reach tapestry: NumPy indexes
    # plain arrays itself; with u differentiated it can, as in parallel_sum above)
    g = lambda item, u, a: np.sin(item["x"] * a) * np.sum(u ** 2)  # noqa: E731
    mapped = tp.parallel_map(g, stacked, u, 0.7, chunk_size=4, executor=executor, vectorize=True)
    close(mapped, np.array([g(i, u, 0.7) for i in items]))
    close(tp.grad(lambda u: np.sum(tp.parallel_map(g, stacked, u, 0.7, chunk_size=4,
                                                   executor=executor, vectorize=True)))(u),
          tp.grad(lambda u: sum(np.sum(g(i, u, 0.7)) for i in items))(u))
    with pytest.raises(ValueError, match="vectorize=True"):
        tp.parallel_sum(f, items, u, 0.7, batched=True, vectorize=True)


def test_unbatched_array_arguments_index_with_per_item_indices():
    """An array passed with in_axes=None reaches f as a proxy that NumPy
    hands back to tapestry when indexed by a batched index (a plain array
    would index itself and fail); everything else sees the array itself."""
    table = rng.standard_normal((6, 3))
    idx = np.array([[0, 5], [2, 2], [4, 1]])

    def f(i, t):
        return np.sum(t[i] ** 2) + np.sum(t[:, 0])

    def seen(i, t):
        # the caller's own array (NumPy's view of it: the proxy is an ndarray subclass)
        assert np.asarray(t).base is table and t.shape == (6, 3) and isinstance(t, np.ndarray)
        return f(i, t) + float(t[0, 0]) * 0.0

    close(tp.vmap(seen, in_axes=(0, None))(idx, table), loop(f, (0, None), (idx, table)))
    g = tp.vmap(tp.grad(f, argnums=1), in_axes=(0, None))(idx, table)
    close(g, loop(tp.grad(f, argnums=1), (0, None), (idx, table)))
    close(tp.vmap(tp.jacfwd(lambda t, i: t[i] * t[0]), in_axes=(None, 0))(table, idx[:, 0]),
          loop(tp.jacfwd(lambda t, i: t[i] * t[0]), (None, 0), (table, idx[:, 0])))
    with pytest.warns(UserWarning, match="runs once per item"):  # a closure: item by item
        close(tp.vmap(lambda i: table[i].sum())(idx), np.array([table[i].sum() for i in idx]))


def test_outer_linearize_checkpoint_and_custom_vjp_over_vmap():
    f = lambda x: np.tanh(x) * np.sum(x ** 2)  # noqa: E731
    T = rng.standard_normal(X.shape)
    y, f_jvp = tp.linearize(tp.vmap(f), X)
    close(f_jvp(T), loop(lambda x, t: tp.jvp(f, (x,), (t,))[1], (0, 0), (X, T)))
    c = tp.checkpoint(tp.vmap(f))
    close(tp.grad(lambda x: np.sum(c(x)))(X), tp.grad(lambda x: np.sum(tp.vmap(f)(x)))(X))

    @tp.custom_vjp
    def mapped(x):
        return tp.vmap(f)(x)

    mapped.defvjp(lambda x: (mapped(x), x),
                  lambda x, g: (tp.vjp(tp.vmap(f), x)[1](g)[0],))
    close(tp.grad(lambda x: np.sum(mapped(x) ** 2))(X),
          tp.grad(lambda x: np.sum(tp.vmap(f)(x) ** 2))(X))


# --- per-item gradients through rules that read values or take per-item indices -----
PER_ITEM_GRADS = {
    # cumprod's VJP branches on zeros (runs per item); its tape node has no kwargs
    "cumprod": (lambda v: np.sum(np.sin(np.cumprod(v))), (X,), (0,)),
    # sort / median: the VJP inverts a permutation that is batched here
    "sort": (lambda v: np.sum(np.sort(v) * np.arange(3.0)), (X,), (0,)),
    "sort_axis0": (lambda m: np.sum(np.sort(m, axis=0) ** 3), (rng.standard_normal((4, 3, 2)),), (0,)),
    "median": (lambda v: np.median(v) ** 2, (X,), (0,)),
    # np.take / take_along_axis with a per-item index, differentiated per item
    "take": (lambda v, i: np.sum(np.take(v, i) ** 2), (X, rng.integers(0, 3, (4, 2))), (0, 0)),
    "take_axis": (lambda m, i: np.sum(np.take(m, i, axis=1) ** 2),
                  (rng.standard_normal((4, 2, 3)), rng.integers(0, 3, 4)), (0, 0)),
    "take_along_axis": (lambda m, i: np.sum(np.take_along_axis(m, i, axis=1) ** 2),
                        (rng.standard_normal((4, 2, 3)), rng.integers(0, 3, (4, 2, 1))), (0, 0)),
    # a gather whose cotangent is the same for every item: the rule runs per
    # item (its index is batched) and gives sparse cotangents at different places
    "gather_sum": (lambda v, i: v[i].sum(), (X, rng.integers(0, 3, (4, 2))), (0, 0)),
    # masks and checks computed from a batched value (a constant per item)
    "nanstd": (lambda v: np.nanstd(np.where(v > -0.5, v, np.nan)), (X,), (0,)),
    "nanmean": (lambda v: np.nanmean(np.where(v > -0.5, v, np.nan)), (X,), (0,)),
    "average_weights": (lambda v, w: np.average(v, weights=w), (X, np.abs(X) + 0.1), (0, 0)),
    "sum_where": (lambda v: np.sum(v ** 2, where=v > 0), (X,), (0,)),
    "max_where": (lambda v: np.max(v, where=v > 0, initial=-5.0), (X,), (0,)),
    "select": (lambda v: np.sum(np.select([v > 0, v < -1], [v, v ** 2], 0.0)), (X,), (0,)),
}


@pytest.mark.parametrize("name", sorted(PER_ITEM_GRADS))
def test_per_item_gradients_through_value_reading_rules(name):
    f, args, axes = PER_ITEM_GRADS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VmapFallbackWarning)
        close(tp.vmap(tp.grad(f), in_axes=axes)(*args), loop(tp.grad(f), axes, args))
        close(tp.grad(lambda *a: np.sum(tp.vmap(f, in_axes=axes)(*a)))(*args),
              loop(tp.grad(f), axes, args))  # argument 0 is batched on axis 0


# --- custom rules and stop_gradient inside a vmap inside the differentiation ---------
def _scaled_sin():
    """sin with a derivative deliberately 3x the true one, so that a rule
    that is bypassed (the primal differentiated instead) shows."""
    @tp.custom_vjp
    def f(u, s, k):
        return np.sin(u) * s + k
    f.defvjp(lambda u, s, k: (np.sin(u) * s + k, (u, s)),
             lambda r, g: (3 * g * np.cos(r[0]) * r[1], np.sum(g * np.sin(r[0])), np.sum(g)))
    return f


def _scaled_sin_jvp():
    @tp.custom_jvp
    def f(u, s):
        return np.sin(u) * s
    f.defjvp(lambda p, t: (np.sin(p[0]) * p[1],
                           3 * np.cos(p[0]) * p[1] * t[0] + np.sin(p[0]) * t[1]))
    return f


@pytest.mark.parametrize("in_axes", [(0, None, 0), (0, 0, None), (None, 0, 0)])
def test_custom_vjp_rule_used_in_grad_of_vmap(in_axes):
    f = _scaled_sin()
    args = (X, X[:, 0] + 2.0, rng.standard_normal(4))
    args = tuple(a if ax is not None else np.take(a, 0, axis=0) for a, ax in zip(args, in_axes))
    loss = lambda *a: np.sum(tp.vmap(f, in_axes=in_axes)(*a) ** 2)  # noqa: E731
    item_grads = loop(tp.grad(lambda *a: np.sum(f(*a) ** 2), argnums=(0, 1, 2)), in_axes, args)
    want = tuple(g if ax is not None else np.sum(g, axis=0) for g, ax in zip(item_grads, in_axes))
    close(tp.grad(loss, argnums=(0, 1, 2))(*args), want)


def test_custom_jvp_rule_used_in_grad_and_jacfwd_of_vmap():
    f = _scaled_sin_jvp()
    s = X[:, 0] + 2.0
    want = loop(tp.grad(lambda u, s: np.sum(f(u, s) ** 2), argnums=(0, 1)), (0, 0), (X, s))
    close(tp.grad(lambda u, s: np.sum(tp.vmap(f)(u, s) ** 2), argnums=(0, 1))(X, s), want)
    jac = tp.jacfwd(lambda u: tp.vmap(f)(u, s))(X)
    close(np.einsum("ijij->ij", jac), 3 * np.cos(X) * s[:, None])


def test_stop_gradient_inside_vmap_inside_grad():
    g = tp.grad(lambda v: np.sum(tp.vmap(lambda u: u * tp.stop_gradient(u))(v)))(X)
    close(g, X)
    from tapestry.autograd.tracer import getval
    g = tp.grad(lambda v: np.sum(tp.vmap(lambda u: u * getval(u))(v)))(X)
    close(g, X)


def test_vmap_of_jacfwd_through_a_rule_that_reads_values():
    """Forward mode transposes eigh's reverse rule, which checks for repeated
    eigenvalues in Python: under an outer vmap it runs per item."""
    m = rng.standard_normal((4, 3, 3))
    f = lambda a: np.linalg.eigh(a @ a.T + np.eye(3))[0]  # noqa: E731
    close(tp.vmap(tp.jacfwd(f))(m), loop(tp.jacfwd(f), (0,), (m,)))


def test_value_reading_rule_under_vmap_of_grad_is_named():
    # (np.interp, once the example here, gathers its knots batched now)
    f = lambda v: np.histogram(v, bins=2, weights=v)[0].sum()  # noqa: E731
    with pytest.raises(TypeError, match="np.histogram"):
        tp.vmap(tp.grad(f))(X)


def test_per_example_gradient_of_a_shared_table_read_at_per_item_indices():
    f = lambda v, i: v[i].sum() + np.sum(v[i[:1]] * 2)  # noqa: E731
    idx = rng.integers(0, 3, (4, 2))
    close(tp.vmap(tp.grad(f), in_axes=(None, 0))(X[0], idx), loop(tp.grad(f), (None, 0), (X[0], idx)))


# --- batching rules instead of loops ---------------------------------------------------
def _sum_loss(f):
    return lambda *a: np.sum(np.sin(f(*a)))


_IDX = rng.integers(-3, 3, (4, 2))
NO_LOOP = {  # name: (f, args, in_axes, mode); mode "value", "vgrad" or "gradv"
    # per-item gathers differentiated outside or inside the vmap
    "gather_vmap_grad": (lambda v, i: v[i] ** 2, (X, _IDX), (0, 0), "vgrad"),
    "gather_grad_vmap": (lambda v, i: v[i] ** 2, (X, _IDX), (0, 0), "gradv"),
    "gather_shared_g": (lambda v, i: v[i], (X[0], rng.integers(0, 3, (4, 2, 2))), (None, 0), "vgrad"),
    # tensordot / dot / inner with both operands batched: one einsum
    "dot_both": (np.dot, (rng.standard_normal((4, 3, 3)), X), (0, 0), "gradv"),
    "inner_both": (np.inner, (X, X[::-1]), (0, 0), "vgrad"),
    "tensordot_both": (lambda a, b: np.tensordot(a, b, axes=([0, 1], [1, 0])),
                       (rng.standard_normal((4, 2, 3, 2)), rng.standard_normal((4, 3, 2))), (0, 0), "gradv"),
    "multi_dot": (lambda a: np.linalg.multi_dot([a, a.T, a]), (rng.standard_normal((4, 3, 3)),), (0,), "gradv"),
    # reductions of 0-d items (max's rule sums over no axis)
    "max_0d": (np.max, (X[:, 0],), (0,), "vgrad"),
    # an LSTM cell's gates: np.split of a batched pre-activation
    "lstm_split": (lambda z, c: (lambda i, f, o, g: np.tanh(c * f + i * np.tanh(g)) * o)(
        *np.split(1 / (1 + np.exp(-z)), 4)), (rng.standard_normal((4, 8)), X[:, :2]), (0, 0), "gradv"),
    "array_split_vgrad": (lambda m: np.array_split(m, 2, axis=1)[1], (rng.standard_normal((4, 2, 3)),),
                          (0,), "vgrad"),
    # convolutions of a batch: shifted products over the shorter operand
    "convolve_kernel": (lambda a: np.convolve(a, np.array([0.25, 0.5, 0.25]), "same"),
                        (rng.standard_normal((4, 7)),), (0,), "vgrad"),
    "convolve_both": (lambda a, k: np.convolve(k, a, "valid"),
                      (rng.standard_normal((4, 7)), rng.standard_normal((4, 3))), (0, 0), "gradv"),
    # constants shaped like a batched value
    "like_gradv": (lambda v: np.zeros_like(v) + np.ones_like(v) * v + np.full_like(v, 2.0) * v
                   + np.zeros(np.empty_like(v).shape), (X,), (0,), "gradv"),
}


@pytest.mark.parametrize("name", sorted(NO_LOOP))
def test_common_programs_run_without_fallback_loops(name):
    f, args, axes, mode = NO_LOOP[name]
    loss = _sum_loss(f)
    FALLBACKS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", VmapFallbackWarning)
        if mode == "vgrad":
            got = tp.vmap(tp.grad(loss), in_axes=axes)(*args)
        elif mode == "gradv":
            got = tp.grad(lambda *a: np.sum(np.sin(tp.vmap(f, in_axes=axes)(*a))))(*args)
    assert not FALLBACKS, dict(FALLBACKS)
    want = loop(tp.grad(loss), axes, args)  # argument 0 batched: per-item gradients
    close(got, want)


def _tanh_layer(kind):
    """tanh(w @ v) as a custom_vjp, a custom_jvp (both with derivatives 3x
    the true ones, so that a bypassed rule shows) or a checkpoint."""
    if kind == "checkpoint":
        return tp.checkpoint(lambda w, v: np.tanh(w @ v))
    d = lambda w, v: 1 - np.tanh(w @ v) ** 2  # noqa: E731
    if kind == "custom_vjp":
        f = tp.custom_vjp(lambda w, v: np.tanh(w @ v))
        f.defvjp(lambda w, v: (np.tanh(w @ v), (w, v)),
                 lambda r, g: (3 * np.outer(g * d(*r), r[1]), 3 * r[0].T @ (g * d(*r))))
        return f
    f = tp.custom_jvp(lambda w, v: np.tanh(w @ v))
    f.defjvp(lambda p, t: (np.tanh(p[0] @ p[1]), 3 * d(*p) * (t[0] @ p[1] + p[0] @ t[1])))
    return f


@pytest.mark.parametrize("kind", ["custom_vjp", "custom_jvp", "checkpoint"])
def test_custom_rule_with_a_shared_differentiated_argument_in_grad_of_vmap(kind):
    """The parameter is differentiated and shared by the items, the data is
    batched and constant: the rule runs once for the batch, and the rerun
    (checkpoint) or bwd does not meet a batched value after its vmap ended."""
    f = _tanh_layer(kind)
    w = rng.standard_normal((3, 3))
    got = tp.grad(lambda w: np.sum(tp.vmap(f, in_axes=(None, 0))(w, X) ** 2))(w)
    want = sum(tp.grad(lambda w: np.sum(f(w, x) ** 2))(w) for x in X)
    close(got, want)


# --- gathers with per-item indices beside slices, integers and other index arrays ---------
_T3 = rng.standard_normal((4, 3, 4, 5))
_I = rng.integers(-3, 3, (4, 2))
_J = rng.integers(0, 4, (4, 2))
GATHER_KEYS = {  # name: f(t, i, j) on one item (t: (3, 4, 5))
    "col": lambda t, i, j: t[:, i],
    "two_arrays": lambda t, i, j: t[i, j],
    "int_then_array": lambda t, i, j: t[1, j],
    "array_then_int": lambda t, i, j: t[i, 2],
    "slice_then_array": lambda t, i, j: t[1:, j],
    "slices_then_two": lambda t, i, j: t[:, j, i[::-1] + 2],
    "plain_and_batched": lambda t, i, j: t[np.array([[0], [2]]), j],
    "scalar_index": lambda t, i, j: t[:, j[0]],
}


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("name", sorted(GATHER_KEYS))
def test_gathers_with_per_item_indices_batch_in_every_order(name, shared):
    f = GATHER_KEYS[name]
    t = _T3[0] if shared else _T3
    axes = (None if shared else 0, 0, 0)
    loss = lambda t, i, j: np.sum(np.sin(f(t, i, j)))  # noqa: E731
    FALLBACKS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", VmapFallbackWarning)
        per_item = tp.vmap(tp.grad(loss), in_axes=axes)(t, _I, _J)
        total = tp.grad(lambda t: np.sum(np.sin(tp.vmap(f, in_axes=axes)(t, _I, _J))))(t)
        if not shared:  # a plain constant indexed per item: the known NumPy limit
            close(tp.vmap(f, in_axes=axes)(t, _I, _J), loop(f, axes, (t, _I, _J)))
    assert not FALLBACKS, dict(FALLBACKS)
    want = loop(tp.grad(loss), axes, (t, _I, _J))
    close(per_item, want)
    close(total, np.sum(want, axis=0) if shared else want)


@pytest.mark.parametrize("kind", ["custom_vjp", "custom_jvp"])
def test_custom_function_without_rule_is_refused_in_grad_of_vmap(kind):
    f = getattr(tp, kind)(lambda u: np.sin(u))
    with pytest.raises(TypeError, match="has no rule"):
        tp.grad(lambda v: np.sum(tp.vmap(f)(v)))(X)
    with pytest.raises(TypeError, match="has no rule"):
        tp.vmap(tp.grad(lambda u: np.sum(f(u))))(X)


def test_out_axes_of_another_structure_names_the_outputs():
    with pytest.raises(ValueError, match="out_axes=.*structure of the outputs"):
        tp.vmap(lambda x: {"a": x, "b": x}, out_axes={"a": 0, "c": 0})(X)


def test_calls_tapestry_cannot_differentiate_still_map_when_nothing_is_differentiated():
    X = np.random.default_rng(12).random((4, 3, 5)) + 0.5
    for f in (lambda a: np.quantile(a, 0.4, axis=1, method="nearest"),
              lambda a: np.percentile(a, 30, method="lower"),
              lambda a: np.quantile(a, 0.4, method="inverted_cdf", weights=a),
              lambda a: np.pad(a, 1, mode="reflect", reflect_type="odd"),
              lambda a: np.sum(a, axis=0, where=a > 0.8)):
        got = tp.vmap(f)(X)
        np.testing.assert_array_equal(got, np.stack([f(x) for x in X]))
    with pytest.raises(NotImplementedError, match="quantile"):
        tp.grad(lambda X: np.sum(tp.vmap(lambda a: np.quantile(a, 0.4, weights=a,
                                                           method="inverted_cdf"))(X)))(X)
    with pytest.raises(NotImplementedError, match="quantile"):
        tp.vmap(tp.grad(lambda a: np.quantile(a, 0.4, weights=a, method="inverted_cdf")))(X)
