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


# Programs as people port them from JAX, each run as vmap (value), grad of a
# function that calls vmap ("gradv") and vmap of grad ("vgrad"), plus other
# orders where named.  ``f(*args, x, T)``: x is numpy or jax.numpy, T is
# tapestry or the JAX transforms.  Leaves of outputs and gradients compared.
X = rng.standard_normal((B, 3))
S3 = rng.standard_normal((B, 3, 3))
PAR = {"W1": rng.standard_normal((5, 3)), "b1": rng.standard_normal(5),
       "W2": rng.standard_normal((2, 5))}
ENS = {k: np.stack([v, 0.5 * v, -v]) for k, v in PAR.items()}


def _mlp_loss(p, xi, yi, x, T):
    h = x.tanh(p["W1"] @ xi + p["b1"])
    return x.sum((p["W2"] @ h - yi) ** 2)


def _rnn(xs, h0, wh, wx, x, T):
    h, hs = h0, []
    for t in range(xs.shape[0]):
        h = x.tanh(wh @ h + wx @ xs[t])
        hs.append(h)
    return x.stack(hs)


def _rk4(y, k, x, T):
    f = lambda y: -k * y + x.sin(y[::-1])  # noqa: E731
    for _ in range(3):
        k1 = f(y); k2 = f(y + 0.05 * k1); k3 = f(y + 0.05 * k2); k4 = f(y + 0.1 * k3)  # noqa: E702
        y = y + 0.1 / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def _attention(q, x, T):
    s = q @ q.T / x.sqrt(q.shape[-1])
    s = x.where(x.tril(x.ones((q.shape[0], q.shape[0]), dtype=bool)), s, -1e9)
    p = x.exp(s - x.max(s, axis=-1, keepdims=True))
    return (p / x.sum(p, axis=-1, keepdims=True)) @ q


def _gauss(xi, mu, m, x, T):
    L = x.linalg.cholesky(m @ m.T + x.eye(3))
    z = x.linalg.solve(L, xi - mu)
    return -0.5 * z @ z - x.sum(x.log(x.diag(L)))


def _custom_vjp(v, s, x, T):
    def f(u, c):
        return x.sin(u) * c
    f = T.custom_vjp(f)
    f.defvjp(lambda u, c: (x.sin(u) * c, (u, c)),
             lambda r, g: (3 * g * x.cos(r[0]) * r[1], x.sum(g * x.sin(r[0]))))
    return f(v, s)


def _custom_jvp(v, x, T):
    f = T.custom_jvp(lambda u: x.sin(u) * 2)
    f.defjvp(lambda p, t: (x.sin(p[0]) * 2, 3 * x.cos(p[0]) * t[0]))
    return f(v)


_VG = ("value", "gradv", "vgrad")
_ALL = _VG + ("vjacfwd", "vjacrev", "jacrevv", "jacfwdv")
PROGRAMS = {  # name: (f, args, in_axes, out_axes, modes)
    "per_example_grad": (lambda p, xi, yi, x, T: T.grad(lambda q: _mlp_loss(q, xi, yi, x, T))(p),
                         (PAR, X, V[:, :2]), (None, 0, 0), 0, _VG),
    "ensemble": (_mlp_loss, (ENS, X[0], V[0, :2]), (0, None, None), 0, _VG),
    "rnn": (_rnn, (rng.standard_normal((B, 5, 3)), np.zeros(2), rng.standard_normal((2, 2)),
                   rng.standard_normal((2, 3))), (0, None, None, None), 0, _VG),
    "rk4": (_rk4, (X, np.abs(X[:, 0]) + 0.5), (0, 0), 0, _VG),
    "attention": (_attention, (S3,), (0,), 0, _VG),
    "gauss_logpdf": (_gauss, (X, X[0], S3), (0, None, 0), 0, _VG),
    "cross_entropy": (lambda lg, lab, x, T: x.log(x.sum(x.exp(lg))) - lg[lab],
                      (X, I[:, 0]), (0, 0), 0, _VG),
    # (value mode would index a plain constant with a batched index: the known NumPy limit)
    "gather_shared_table": (lambda t, i, x, T: x.sum(t[i] ** 2), (W, I), (None, 0), 0, ("gradv", "vgrad")),
    "gather_sum_of_rows": (lambda t, i, x, T: t[i].sum(), (S3, I), (0, 0), 0, _VG),
    "take_per_item": (lambda v, i, x, T: x.take(v, i), (V, I), (0, 0), 0, _VG),
    "take_along": (lambda m, i, x, T: x.take_along_axis(m, i, axis=1),
                   (S3, np.broadcast_to(I[:, :1, None], (B, 3, 1)).copy()), (0, 0), 0, _VG),
    "sort_axis0": (lambda m, x, T: x.sort(m, axis=0), (S3,), (0,), 0, _VG),
    "median": (lambda v, x, T: x.median(v), (V,), (0,), 0, _VG),
    "cumprod": (lambda v, x, T: x.cumprod(v), (V,), (0,), 0, _VG),
    "dot_both_batched": (lambda m, v, x, T: x.dot(m, v), (S3, V), (0, 0), 0, _VG),
    "multi_dot": (lambda m, x, T: x.linalg.multi_dot([m, m.T, m]), (S3,), (0,), 0, _VG),
    "average_weights": (lambda v, w, x, T: x.average(v, weights=w), (V, np.abs(V) + 0.1), (0, 0), 0, _VG),
    "nanmean_mask": (lambda v, x, T: x.nanmean(x.where(v > -0.5, v, x.nan)), (V,), (0,), 0, _VG),
    "sum_where": (lambda v, x, T: x.sum(v ** 2, where=v > 0), (V,), (0,), 0, _VG),
    "max_keepdims": (lambda m, x, T: m - x.max(m, axis=1, keepdims=True), (S3,), (0,), 0, _VG),
    "std_ddof": (lambda m, x, T: x.std(m, axis=0, ddof=1), (S3,), (0,), 0, _VG),
    "eigh_inside": (lambda m, x, T: x.linalg.eigh(m @ m.T + x.eye(3))[0], (S3,), (0,), 0, _ALL),
    "swap_moveaxis": (lambda a, x, T: x.moveaxis(x.swapaxes(a, 0, 2), -1, 0), (rng.standard_normal((B, 2, 3, 4)),), (0,), 0, _VG),
    "split_concat": (lambda m, x, T: x.concatenate(x.split(m, [1], axis=1)[::-1], axis=1), (S3,), (0,), 0, _VG),
    "nested_in_axes": (lambda a, b, x, T: T.vmap(lambda u, v: x.dot(u, v), in_axes=(0, 1))(a, b), (S3, np.moveaxis(S3, 0, 1).copy()), (0, 1), 0, _VG),
    "nested_kernel": (lambda a, b, x, T: T.vmap(T.vmap(lambda u, v: x.exp(-x.sum((u - v) ** 2)), (None, 0)), (0, None))(a, b),
                      (S3, S3[0]), (0, None), 0, _VG),
    "in_axes_neg": (lambda m, x, T: m @ m.T, (np.moveaxis(S3, 0, -1).copy(),), (-1,), 0, _VG),
    "out_axes_tuple": (lambda m, x, T: (m.sum(0), m), (S3,), (0,), (0, 2), ("value", "gradv")),
    "out_axes_none": (lambda m, w, x, T: (m.sum(), w * 2), (S3, W), (0, None), (0, None), ("value", "gradv")),
    "pytree_in_none": (lambda d, x, T: d["a"] * d["b"].sum(), ({"a": V, "b": W},), ({"a": 0, "b": None},), 0, _VG),
    "pytree_out_dict": (lambda v, x, T: {"s": v.sum(), "t": (v, v * 2)}, (V,), (0,), {"s": 0, "t": (1, 0)}, ("value", "gradv")),
    "scalar_items": (lambda s, x, T: x.sin(s) * s ** 2 + x.where(s > 0, s, 0.0), (V[:, 0].copy(),), (0,), 0, _ALL),
    "float32": (lambda v, w, x, T: x.tanh(v @ w), (V.astype(np.float32), W.astype(np.float32)), (0, None), 0, _VG),
    "empty_batch": (lambda v, x, T: x.tanh(v @ W).sum(), (V[:0],), (0,), 0, ("value", "gradv")),
    "axis_size": (lambda w, x, T: x.sin(w) @ W, (V[0],), None, 0, ("value", "gradv")),
    "int_bool": (lambda v, m, x, T: v * m + (m * 1), (V, V > 0), (0, 0), 0, _VG),
    "stop_gradient": (lambda v, x, T: x.sum(v * T.stop_gradient(v)), (V,), (0,), 0, _VG),
    "custom_vjp": (_custom_vjp, (V, V[:, 0] + 2.0), (0, 0), 0, _VG),
    "custom_vjp_shared": (_custom_vjp, (V, 2.0 + V[0, 0]), (0, None), 0, _VG),
    "custom_jvp": (_custom_jvp, (V,), (0,), 0, _ALL),
    "checkpoint": (lambda v, x, T: T.checkpoint(lambda u: x.tanh(u @ S3[0]) @ S3[1])(v), (V,), (0,), 0, _ALL),
    "hessian_inside": (lambda v, x, T: T.hessian(lambda u: x.sum(x.sin(u) * u[::-1]))(v), (V,), (0,), 0, _VG),
    "jvp_inside": (lambda v, t, x, T: T.jvp(lambda u: x.sin(u) * u.sum(), (v,), (t,))[1], (V, V[::-1].copy()), (0, 0), 0, _VG),
    "vjp_inside": (lambda v, c, x, T: T.vjp(lambda u: x.sin(u) * u.sum(), v)[1](c)[0], (V, V[::-1].copy()), (0, 0), 0, _VG),
}


def _axis_size(args, in_axes):
    return 3 if in_axes is None else None


def _run_program(name, x, T, leaves, tree_map):
    """The program's results, one flat list of arrays per mode (an error
    string where the transform raised)."""
    f, args, in_axes, out_axes, modes = PROGRAMS[name]
    g = lambda *a: f(*a, x=x, T=T)  # noqa: E731
    args = tree_map(x.asarray, args)
    size = _axis_size(args, in_axes)
    fl = tuple(i for i, a in enumerate(args)
               if all(np.issubdtype(np.asarray(v).dtype, np.floating) for v in leaves(a)))

    def loss(o):
        return sum(x.sum(x.sin(v) + 0.5 * v ** 2) for v in leaves(o)
                   if np.issubdtype(v.dtype, np.floating))

    def vm(h, oa=out_axes):
        return T.vmap(h, in_axes=in_axes, out_axes=oa, axis_size=size)
    runs = {
        "value": lambda: vm(g)(*args),
        "gradv": lambda: T.grad(lambda *b: loss(vm(g)(*b)), argnums=fl)(*args),
        "vgrad": lambda: vm(T.grad(lambda *b: loss(g(*b)), argnums=fl), 0)(*args),
        "vjacfwd": lambda: vm(T.jacfwd(g, argnums=fl[0]), 0)(*args),
        "vjacrev": lambda: vm(T.jacrev(g, argnums=fl[0]), 0)(*args),
        "jacrevv": lambda: T.jacrev(vm(g), argnums=fl[0])(*args),
        "jacfwdv": lambda: T.jacfwd(vm(g), argnums=fl[0])(*args),
    }
    return {m: [np.asarray(v) for v in leaves(runs[m]())] for m in modes}


def _ours(name):
    import tapestry as tp
    f, args, axes = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = tp.vmap(f, in_axes=axes)(*args)
        grad = tp.grad(lambda *a: np.sum(tp.vmap(f, in_axes=axes)(*a) ** 2))(*args)
    return np.asarray(value), np.asarray(grad)


class _JaxT:
    """JAX's transforms under tapestry's names (the programs' ``T``)."""

    def __init__(self, jax):
        for n in ("vmap", "grad", "jacfwd", "jacrev", "hessian", "jvp", "vjp",
                  "custom_vjp", "custom_jvp", "checkpoint"):
            setattr(self, n, getattr(jax, n))
        self.stop_gradient = jax.lax.stop_gradient


def _theirs(out):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    arrays = {}
    T = _JaxT(jax)
    for name in PROGRAMS:
        for mode, vals in _run_program(name, jnp, T, jax.tree_util.tree_leaves,
                                       jax.tree_util.tree_map).items():
            arrays[f"P/{name}/{mode}/n"] = np.asarray(len(vals))
            for k, v in enumerate(vals):
                arrays[f"P/{name}/{mode}/{k}"] = v
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


    @pytest.mark.parametrize("name", sorted(PROGRAMS))
    def test_program_matches_jax(name, jax_results):
        import tapestry as tp
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = _run_program(name, np, tp, tp.tree_leaves, tp.tree_map)
        for mode, vals in ours.items():
            assert len(vals) == jax_results[f"P/{name}/{mode}/n"], mode
            for k, v in enumerate(vals):
                want = jax_results[f"P/{name}/{mode}/{k}"]
                assert v.shape == want.shape, (mode, k, v.shape, want.shape)
                tol = 1e-5 if want.dtype == np.float32 else 1e-8
                np.testing.assert_allclose(v, want, rtol=tol, atol=tol, err_msg=f"{mode} leaf {k}")
