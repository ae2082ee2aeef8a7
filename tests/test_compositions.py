"""Compositions of transformations that each work alone: vmap, grad,
parallel_sum / parallel_map on every executor, custom rules, kernels,
sparse gradients and optimizers.  Every result is compared with a
reference computed another way (a Python loop over items, or finite
differences)."""
import numpy as np
import pytest

import tapestry as tp

EXECUTORS = ["serial", "threads", "processes"]


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((12, 3)), rng.standard_normal((4, 3))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("vectorize", [False, True])
def test_vmap_of_parallel_map_matches_loop(executor, vectorize):
    """A parallel call inside vmap gets batched shared arguments; on
    processes they were pickled away from their batch trace and came back
    as an object array of stale batched values."""
    X, U = _data()
    F = lambda u: tp.parallel_map(lambda x, u: np.tanh(x * u), X, u, chunk_size=5,
                                  executor=executor, vectorize=vectorize)
    out = tp.vmap(F)(U)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, np.stack([np.tanh(X * u) for u in U]))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_vmap_of_grad_of_parallel_sum_matches_loop(executor):
    X, U = _data()
    F = lambda u: tp.parallel_sum(lambda x, u: np.sum(np.tanh(x * u) ** 2), X, u,
                                  chunk_size=5, executor=executor)
    out = tp.vmap(tp.value_and_grad(F))(U)
    ref_v = np.array([np.sum(np.tanh(X * u) ** 2) for u in U])
    ref_g = np.stack([tp.grad(lambda u: np.sum(np.tanh(X * u) ** 2))(u) for u in U])
    np.testing.assert_allclose(out[0], ref_v)
    np.testing.assert_allclose(out[1], ref_g)


def _pmap(executor):
    X, _ = _data()
    return X, lambda u: tp.parallel_map(lambda x, u: np.tanh(x * u), X, u, chunk_size=5,
                                        executor=executor)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_vmap_over_jvp_tangents_of_parallel_map(executor):
    """Batched tangents reach the map's tangent rule, which ran them on
    the executor: on processes they lost their batch trace."""
    X, F = _pmap(executor)
    u, T = _data()[1][0], np.random.default_rng(1).standard_normal((4, 3))
    out = tp.vmap(lambda t: tp.jvp(F, (u,), (t,))[1])(T)
    np.testing.assert_allclose(out, np.stack([(1 - np.tanh(X * u) ** 2) * X * t for t in T]))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_vmap_over_vjp_cotangents_of_parallel_map(executor):
    X, F = _pmap(executor)
    u = _data()[1][0]
    G = np.random.default_rng(2).standard_normal((4,) + X.shape)
    _, pull = tp.vjp(F, u)
    out = tp.vmap(lambda g: pull(g)[0])(G)
    d = (1 - np.tanh(X * u) ** 2) * X
    np.testing.assert_allclose(out, np.stack([np.sum(g * d, 0) for g in G]))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("vectorize", [False, True])
def test_grad_of_vmap_over_items_of_parallel_sum(executor, vectorize):
    """Items batched by a vmap inside grad, the differentiated value
    shared: the sum's tape node was given the batched value and the vmap's
    result escaped it (EscapedBatchError)."""
    X, u = _data()[0], _data()[1][0]
    Xs = np.stack([X, 2 * X, -X])
    F = lambda u: np.sum(tp.vmap(lambda X: tp.parallel_sum(
        lambda x, u: np.sum(np.sin(x * u)), X, u, chunk_size=5, executor=executor,
        vectorize=vectorize))(Xs) * np.arange(1.0, 4.0))
    v, g = tp.value_and_grad(F)(u)
    np.testing.assert_allclose(v, sum(k * np.sum(np.sin(A * u)) for k, A in zip((1, 2, 3), Xs)))
    np.testing.assert_allclose(g, sum(k * np.sum(np.cos(A * u) * A, 0)
                                      for k, A in zip((1, 2, 3), Xs)))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_grad_of_vmap_over_items_of_parallel_map(executor):
    X, u = _data()[0], _data()[1][0]
    Xs = np.stack([X, 2 * X])
    F = lambda u: np.sum(tp.vmap(lambda X: tp.parallel_map(
        lambda x, u: np.sin(x * u), X, u, chunk_size=5, executor=executor))(Xs) ** 2)
    g = tp.grad(F)(u)
    np.testing.assert_allclose(g, sum(np.sum(2 * np.sin(A * u) * np.cos(A * u) * A, 0)
                                      for A in Xs))


def test_vmap_of_autograd_grad_and_hessian():
    """The autograd layer read its output with isinstance/np.asarray checks
    that a batched value fails: grad refused a scalar function ("got
    Batched"), jacobian and hessian raised BatchedConversionError."""
    import tapestry.autograd as autograd
    import tapestry.autograd.numpy as anp
    X = np.random.default_rng(3).standard_normal((5, 3))
    f = lambda x: anp.sum(anp.sin(x) ** 3)
    g = tp.vmap(autograd.grad(f))(X)
    np.testing.assert_allclose(g, 3 * np.sin(X) ** 2 * np.cos(X))
    v, g2 = tp.vmap(autograd.value_and_grad(f))(X)
    np.testing.assert_allclose(v, np.sum(np.sin(X) ** 3, 1))
    np.testing.assert_allclose(g2, g)
    J = tp.vmap(autograd.jacobian(lambda x: anp.sin(x) * x[0]))(X)
    np.testing.assert_allclose(J, np.stack([tp.jacrev(lambda x: np.sin(x) * x[0])(x) for x in X]))
    H = tp.vmap(autograd.hessian(f))(X)
    np.testing.assert_allclose(H, np.stack([np.diag(6 * np.sin(x) * np.cos(x) ** 2
                                                     - 3 * np.sin(x) ** 3) for x in X]))
    J32 = tp.vmap(autograd.jacobian(lambda x: anp.tanh(x)))(X.astype(np.float32))
    assert J32.dtype == np.float32


@tp.custom_jvp
def _sin_times(x, y):
    return np.sin(x) * y


@_sin_times.defjvp
def _sin_times_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _sin_times(x, y), np.cos(x) * y * tx + np.sin(x) * ty


@pytest.mark.parametrize("in_axes", [0, (0, None)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vmap_of_hessian_through_custom_jvp_with_undifferentiated_arg(in_axes, dtype):
    """The rule's tangent for ``y`` (not differentiated) must be zeros;
    a batched ``y`` (or vmap's proxy for a shared one) was taken for a
    static leaf and handed to the rule as None."""
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((5, 3)).astype(dtype), rng.standard_normal((5, 3)).astype(dtype)
    if in_axes != 0:
        Y = Y[0]
    loss = lambda x, y: np.sum(_sin_times(x, y) ** 2)
    H = tp.vmap(tp.hessian(loss), in_axes=in_axes)(X, Y)
    Ys = Y if in_axes == 0 else [Y] * len(X)
    ref = np.stack([tp.hessian(lambda x: np.sum((np.sin(x) * y) ** 2))(x) for x, y in zip(X, Ys)])
    assert H.dtype == dtype
    np.testing.assert_allclose(H, ref, rtol=1e-5 if dtype == np.float32 else 1e-7)
    J = tp.vmap(tp.jacfwd(tp.grad(loss)), in_axes=in_axes)(X, Y)
    np.testing.assert_allclose(J, ref, rtol=1e-5 if dtype == np.float32 else 1e-7)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("vectorize", [False, True])
def test_vmap_of_grad_with_batched_items(executor, vectorize):
    """Items batched by an outer vmap, the shared argument differentiated
    inside it: on processes the batched items were pickled to the workers
    (EscapedTracerError)."""
    rng = np.random.default_rng(5)
    Xs, u = rng.standard_normal((3, 12, 3)), rng.standard_normal(3)
    F = lambda X, u: tp.parallel_sum(lambda x, u: np.sum(np.sin(x * u)), X, u, chunk_size=5,
                                     executor=executor, vectorize=vectorize)
    g = tp.vmap(tp.grad(F, argnums=1), in_axes=(0, None))(Xs, u)
    np.testing.assert_allclose(g, np.stack([np.sum(np.cos(X * u) * X, 0) for X in Xs]))


@pytest.mark.parametrize("vectorize", [False, True])
def test_batched_value_in_closure_of_process_task_is_refused(vectorize):
    """f reading a vmap-batched value from a closure, on processes: the
    value was pickled to the workers and came back as a stale batch
    (parallel_map returned wrong values, silently)."""
    X, U = _data()
    with pytest.raises(TypeError, match="shared argument"):
        tp.vmap(lambda u: tp.parallel_map(lambda x: np.tanh(x * u), X, executor="processes",
                                          chunk_size=5, vectorize=vectorize))(U)
    with pytest.raises(TypeError, match="shared argument"):
        tp.vmap(lambda u: tp.parallel_sum(lambda x: np.sum(x * u), X, executor="processes",
                                          chunk_size=5, vectorize=vectorize))(U)


@pytest.mark.parametrize("executor", ["serial", "threads"])
def test_batched_value_in_closure_in_process_still_works(executor):
    X, U = _data()
    out = tp.vmap(lambda u: tp.parallel_map(lambda x: np.tanh(x * u), X, executor=executor,
                                            chunk_size=5))(U)
    np.testing.assert_allclose(out, np.stack([np.tanh(X * u) for u in U]))


def test_batched_value_copies():
    import copy
    out = tp.vmap(lambda x: copy.deepcopy(x) * 2 + copy.copy(x))(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(out, 3 * np.arange(6.0).reshape(2, 3))
