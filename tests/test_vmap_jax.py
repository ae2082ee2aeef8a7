"""tapestry.vmap against jax.vmap on typical mapped programs: values, and the
gradient of a function that calls vmap (both orders are in test_vmap.py).
JAX runs in a child process (tests/jax_child.py); skipped without JAX."""
import importlib.util
import sys
import warnings

import numpy as np
import pytest

rng = np.random.default_rng(0)
B = 4
M = rng.standard_normal((B, 3, 3)) + 3 * np.eye(3)
V = rng.standard_normal((B, 3))
W = rng.standard_normal((3, 5))
I = rng.integers(0, 3, (B, 2))  # noqa: E741

CASES = {
 "solve": (lambda m, v, x=np: x.linalg.solve(m, v), (M, V), (0, 0)),
 "inv": (lambda m, x=np: x.linalg.inv(m), (M,), (0,)),
 "det": (lambda m, x=np: x.linalg.det(m), (M,), (0,)),
 "slogdet": (lambda m, x=np: x.linalg.slogdet(m)[1], (M,), (0,)),
 "eigh": (lambda m, x=np: x.linalg.eigh(m @ m.T)[0], (M,), (0,)),
 "cholesky": (lambda m, x=np: x.linalg.cholesky(m @ m.T), (M,), (0,)),
 "norm": (lambda v, x=np: x.linalg.norm(v), (V,), (0,)),
 "softmax": (lambda v, x=np: x.exp(v - v.max()) / x.sum(x.exp(v - v.max())), (V,), (0,)),
 "where": (lambda v, x=np: x.where(v > 0, v, 0.1 * v), (V,), (0,)),
 "gather": (lambda v, i, x=np: v[i], (V, I), (0, 0)),
  "dot": (lambda v, x=np: x.dot(v, W), (V,), (0,)),
 "einsum": (lambda v, x=np: x.einsum("i,ij->j", v, W), (V,), (0,)),
 "outer": (lambda v, x=np: x.outer(v, v), (V,), (0,)),
 "cumsum": (lambda v, x=np: x.cumsum(v), (V,), (0,)),
 "sort": (lambda v, x=np: x.sort(v), (V,), (0,)),
 "concat": (lambda v, x=np: x.concatenate([v, v ** 2]), (V,), (0,)),
 "stack": (lambda v, x=np: x.stack([v, 2 * v], axis=1), (V,), (0,)),
 "reshape": (lambda m, x=np: m.reshape(-1), (M,), (0,)),
 "transpose": (lambda m, x=np: m.T @ m, (M,), (0,)),
 "take": (lambda v, x=np: x.take(v, x.array([2, 0])), (V,), (0,)),
 "onehot_argmax": (lambda v, x=np: (x.arange(3) == x.argmax(v)).astype(float) * v, (V,), (0,)),
 "clip": (lambda v, x=np: x.clip(v, -0.5, 0.5), (V,), (0,)),
 "maximum": (lambda v, x=np: x.maximum(v, 0.0), (V,), (0,)),
 "standardize": (lambda v, x=np: (v - v.mean()) / v.std(), (V,), (0,)),
 "pairwise": (lambda m, x=np: x.sum((m[:, None, :] - m[None, :, :]) ** 2, axis=-1), (M,), (0,)),
 "attention": (lambda m, x=np: (lambda s: x.exp(s) / x.exp(s).sum(-1, keepdims=True))(m @ m.T) @ m, (M,), (0,)),
 "convolve": (lambda v, x=np: x.convolve(v, x.array([1.0, -1.0])), (V,), (0,)),
 "kron": (lambda v, x=np: x.kron(v, x.array([1.0, 2.0])), (V,), (0,)),
 "trace_diag": (lambda m, x=np: x.trace(m) + x.diag(m).sum(), (M,), (0,)),
 "zeros_like": (lambda v, x=np: x.zeros_like(v) + v, (V,), (0,)),
 "ones_shape": (lambda v, x=np: x.ones(v.shape) * v, (V,), (0,)),
 "logsumexp": (lambda v, x=np: x.log(x.sum(x.exp(v))), (V,), (0,)),
 "polyval": (lambda v, x=np: x.polyval(v, 0.5), (V,), (0,)),
 "interp": (lambda v, x=np: x.interp(0.3, x.array([0.0, 0.5, 1.0]), v), (V,), (0,)),
 "in_axes1": (lambda v, x=np: v * 2, (V.T.copy(),), (1,)),
 "tril": (lambda m, x=np: x.tril(m), (M,), (0,)),
 "flip_roll": (lambda v, x=np: x.roll(x.flip(v), 1), (V,), (0,)),
 "pad": (lambda v, x=np: x.pad(v, (1, 2)), (V,), (0,)),
 "matrix_power": (lambda m, x=np: x.linalg.matrix_power(m, 3), (M,), (0,)),
 "qr": (lambda m, x=np: x.abs(x.linalg.qr(m)[1]), (M,), (0,)),
 "svdvals": (lambda m, x=np: x.linalg.svd(m, compute_uv=False), (M,), (0,)),
 "fft": (lambda v, x=np: x.abs(x.fft.fft(v)), (V,), (0,)),
 "prod": (lambda v, x=np: x.prod(v), (V,), (0,)),
 "var_axis": (lambda m, x=np: x.var(m, axis=0), (M,), (0,)),
 "tanh_mlp": (lambda v, x=np: x.tanh(v @ W).sum(), (V,), (0,)),
 "nested_index_set": (lambda v, x=np: x.where(x.arange(3) == 1, 0.0, v), (V,), (0,)),
}


def _ours(name):
    import tapestry as tp
    f, args, axes = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = tp.vmap(f, in_axes=axes)(*args)
        grad = tp.grad(lambda *a: np.sum(tp.vmap(f, in_axes=axes)(*a) ** 2))(*args)
    return np.asarray(value), np.asarray(grad)


def _theirs(out):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    arrays = {}
    for name, (f, args, axes) in CASES.items():
        g = lambda *b, f=f: f(*b, x=jnp)  # noqa: E731
        a = [jnp.asarray(x) for x in args]
        arrays[name + "/value"] = np.asarray(jax.vmap(g, in_axes=axes)(*a))
        arrays[name + "/grad"] = np.asarray(jax.grad(
            lambda *c: jnp.sum(jax.vmap(g, in_axes=axes)(*c) ** 2))(*a))
    np.savez(out, **arrays)


if __name__ == "__main__":
    _theirs(sys.argv[1])
else:
    pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                    reason="JAX not installed")

    @pytest.fixture(scope="module")
    def jax_results(tmp_path_factory):
        from jax_child import results_from_child
        return results_from_child(__file__, tmp_path_factory)

    @pytest.mark.parametrize("name", sorted(CASES))
    def test_vmap_matches_jax(name, jax_results):
        value, grad = _ours(name)
        np.testing.assert_allclose(value, jax_results[name + "/value"], rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(grad, jax_results[name + "/grad"], rtol=1e-8, atol=1e-9)
