"""Realistic vmapped programs (tests/programs/vmap_progs.py) under
``tp.vmap`` against ``jax.vmap`` (values, dtypes and the gradient through
the vmap), and against a Python loop over the items of the unmapped
function.  JAX runs in a child process (tests/jax_child.py); the JAX
comparison is skipped without JAX, the loop comparison always runs."""
import importlib.util
import os
import sys
import warnings

import numpy as np
import pytest

if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
from programs.vmap_progs import PROGRAMS  # noqa: E402


def _is_float(a):
    dtype = getattr(a, "dtype", None)
    return np.issubdtype(np.asarray(a).dtype if dtype is None else dtype, np.floating)


def _leaves(tree):
    import tapestry as tp
    return tp.tree_leaves(tree)


def _float_argnums(args, leaves):
    return tuple(i for i, a in enumerate(args) if all(_is_float(v) for v in leaves(a)))


def run_program(name, x, T, leaves, tree_map, programs=None):
    """``{"value": [...], "grad": [...]}``: the vmapped program's output
    leaves and the gradient leaves of a scalar of them with respect to
    the float arguments; an error string where a transform raised."""
    p = (PROGRAMS if programs is None else programs)[name]
    g = lambda *a, **k: p.f(*a, x=x, T=T, **k)  # noqa: E731
    args, kw = tree_map(x.asarray, p.args), tree_map(x.asarray, p.kwargs)
    vm = T.vmap(g, in_axes=p.in_axes, out_axes=p.out_axes, axis_size=p.axis_size)

    def loss(*a):
        return sum(x.sum(x.sin(v) + 0.5 * v ** 2) for v in leaves(vm(*a, **kw)) if _is_float(v))
    out = {}
    runs = {"value": lambda: vm(*args, **kw)}
    argnums = _float_argnums(args, leaves)
    if p.grad and argnums:
        runs["grad"] = lambda: T.grad(loss, argnums=argnums)(*args)
    for mode, run in runs.items():
        try:
            out[mode] = [np.asarray(v) for v in leaves(run())]
        except Exception as e:  # noqa: BLE001 -- recorded and judged by the test
            out[mode] = f"{type(e).__name__}: {e}"
    return out


# --- the reference without JAX: the unmapped function item by item ------------------
def _item(spec, a, i, tree_map):
    if spec is None:
        return a
    if isinstance(spec, int):
        return tree_map(lambda v: np.take(v, i, axis=spec), a)
    if isinstance(spec, dict):
        return {k: _item(spec[k], a[k], i, tree_map) for k in a}
    return type(a)(_item(s, v, i, tree_map) for s, v in zip(spec, a))


def _size(spec, a, leaves):
    """The batch length ``spec`` (an in_axes entry) finds in ``a``, or None."""
    if spec is None:
        return None
    if isinstance(spec, int):
        return np.shape(leaves(a)[0])[spec]
    pairs = [(spec[k], a[k]) for k in a] if isinstance(spec, dict) else zip(spec, a)
    return next((n for n in (_size(s, v, leaves) for s, v in pairs) if n is not None), None)


def _stack(spec, outs, tree_map):
    if spec is None:
        return outs[0]
    if isinstance(spec, int):
        return tree_map(lambda *vs: np.stack([np.asarray(v) if np.isscalar(v) else v for v in vs],
                                             axis=spec), *outs)
    if isinstance(spec, dict):
        return {k: _stack(spec[k], [o[k] for o in outs], tree_map) for k in outs[0]}
    return type(outs[0])(_stack(s, [o[j] for o in outs], tree_map) for j, s in enumerate(spec))


def _per_item(name, mode):
    """The program's function for one item in ``mode``: ``value`` (itself),
    ``vgrad`` (the gradient of a scalar of its outputs in its float
    arguments) or ``vjvp`` (its derivative along a fixed tangent); and the
    out_axes of the mapped result."""
    import tapestry as tp
    p = PROGRAMS[name]
    f = lambda *a, **k: p.f(*a, x=np, T=_TapestryT(), **k)  # noqa: E731
    if mode == "value":
        return f, p.out_axes
    argnums = _float_argnums(p.args, tp.tree_leaves)

    def loss(*a, **k):
        return sum(np.sum(np.sin(v) + 0.5 * v ** 2) for v in tp.tree_leaves(f(*a, **k))
                   if _is_float(v))
    if mode == "vgrad":
        return lambda *a, **k: tp.grad(lambda *b: loss(*b, **k), argnums=argnums)(*a), 0

    def along(*a, **k):
        tangents = tuple(tp.tree_map(lambda v: 0.3 + 0 * v, a[i]) for i in argnums)
        g = lambda *b: f(*[b[argnums.index(i)] if i in argnums else a[i]  # noqa: E731
                           for i in range(len(a))], **k)
        return tp.jvp(g, tuple(a[i] for i in argnums), tangents)[1]
    return along, p.out_axes


LOOP_MODES = ("value", "vgrad", "vjvp", "gradv")


def _outer_grad(name, run):
    """``gradv``: the gradient, in the float arguments, of a scalar of what
    ``run(*args)`` (the vmap, or the loop) returns."""
    import tapestry as tp
    p = PROGRAMS[name]

    def loss(*a):
        return sum(np.sum(np.sin(v) + 0.5 * v ** 2) for v in tp.tree_leaves(run(*a))
                   if _is_float(v))
    return tp.grad(loss, argnums=_float_argnums(p.args, tp.tree_leaves))(*p.args)


def mapped_program(name, mode):
    import tapestry as tp
    p = PROGRAMS[name]
    f, out_axes = _per_item(name, "value" if mode == "gradv" else mode)
    vm = tp.vmap(f, in_axes=p.in_axes, out_axes=out_axes, axis_size=p.axis_size)
    out = _outer_grad(name, lambda *a: vm(*a, **p.kwargs)) if mode == "gradv" else \
        vm(*p.args, **p.kwargs)
    return [np.asarray(v) for v in tp.tree_leaves(out)]


def _loop(name, f, out_axes, args):
    import tapestry as tp
    p = PROGRAMS[name]
    spec = p.in_axes if isinstance(p.in_axes, (tuple, list)) else (p.in_axes,) * len(args)
    sizes = [_size(s, a, tp.tree_leaves) for s, a in zip(spec, args)]
    n = next((k for k in sizes if k is not None), p.axis_size)
    if n == 0:
        return None
    outs = [f(*[_item(s, a, i, tp.tree_map) for s, a in zip(spec, args)],
              **_item(0, p.kwargs, i, tp.tree_map)) for i in range(n)]
    return _stack(out_axes, outs, tp.tree_map)


def loop_program(name, mode="value"):
    """The program run on each item by the unmapped function, stacked."""
    import tapestry as tp
    p = PROGRAMS[name]
    f, out_axes = _per_item(name, "value" if mode == "gradv" else mode)
    if mode == "gradv":
        if _loop(name, f, out_axes, p.args) is None:
            return None
        out = _outer_grad(name, lambda *a: _loop(name, f, out_axes, a))
    else:
        out = _loop(name, f, out_axes, p.args)
        if out is None:
            return None
    return [np.asarray(v) for v in tp.tree_leaves(out)]


class _JaxT:
    """JAX's transforms under tapestry's names (the programs' ``T``)."""

    def __init__(self, jax):
        for n in ("vmap", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "jvp",
                  "vjp", "custom_vjp", "custom_jvp", "checkpoint", "jit"):
            setattr(self, n, getattr(jax, n))
        self.stop_gradient = jax.lax.stop_gradient
        import jax.scipy.linalg
        import jax.scipy.special
        self.special, self.linalg = jax.scipy.special, jax.scipy.linalg


class _TapestryT:
    """tapestry's transforms, and its SciPy namespaces as ``T.special`` and
    ``T.linalg`` (JAX's are jax.scipy's)."""

    def __getattr__(self, name):
        import tapestry as tp
        return getattr(tp, name)

    @property
    def special(self):
        import tapestry.scipy.special
        return tapestry.scipy.special

    @property
    def linalg(self):
        import tapestry.scipy.linalg
        return tapestry.scipy.linalg


def ours_of(name, programs=None):
    """tapestry's outputs (values, gradients) of a program of ``programs``
    (this module's by default), warnings quiet: what each program file
    compares with JAX's."""
    import tapestry as tp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_program(name, np, _TapestryT(), tp.tree_leaves, tp.tree_map, programs)


#: The programs compared with JAX by default (JAX runs them op by op at about
#: a second each): every semantic feature (in_axes / out_axes forms,
#: keywords, axis_size, empty batches, dtypes, transforms inside and
#: outside) and a sample of the numerics.  TAPESTRY_VMAP_JAX=all compares
#: every program (about five minutes on a 2-core machine); the loop
#: comparison always runs them all.
SUBSET = (
    "pe_grad_dict", "pe_value_and_grad", "pe_logistic_argnums", "pe_vg_has_aux", "pe_hessian",
    "grad_of_vmapped_loss", "ens_none_leaf", "ens_tuple_none_leaf", "ens_list_in_axes",
    "multihead_attention", "causal_attention", "pairwise_nested_vmap", "gp_log_marginal",
    "knn_indices", "hierarchical_group_means", "gmm_loglik", "solve_rhs_batched",
    "slogdet_both", "eigh_values_and_projector", "lstsq", "embedding_lookup", "gather_2d_pair",
    "take_rows_axis0", "one_hot_eye", "argsort_ranks", "diff_and_quantile", "searchsorted_bins",
    "argmax_argmin_ints", "einsum_forms", "pads", "splits", "lowpass_irfft",
    "interp_batched_points", "nested_inner_out_axes1", "in_axes_minus2", "out_axes_pytree",
    "axis_size_out_axes", "zero_d_output", "empty_batch_matmul", "empty_batch_shapes",
    "bool_and_int_outputs", "integer_arithmetic", "custom_vjp_with_residuals",
    "hvp_forward_over_reverse", "f32_per_example_grad", "f32_with_f64_param", "f32_solve",
    "kwarg_mapped", "kwarg_pytree_with_in_axes", "ridge_path_newton", "nearest_codebook_vq",
    "python_scalar_and_constant_outputs", "in_axes1_out_axes_minus1_pairs", "jit_inside_vmap",
    "complex_input_ops", "nested_pytree_in_axes", "out_axes_dict_and_none", "f32_grad_inside",
    "int_input_float_output", "gp_cholesky_solve_triangular", "special_softmax_logsumexp",
    "raw_factorizations", "lr_sweep_gradient_descent", "namedtuple_results", "select_where_chain",
)


def _jax_names():
    want = os.environ.get("TAPESTRY_VMAP_JAX", "")
    if want == "all":
        return list(PROGRAMS)
    return want.split(",") if want else list(SUBSET)


def _theirs(out, names=None, programs=None):
    """JAX's results of the programs ``names`` (default: :func:`_jax_names`)
    of ``programs`` (default: this file's), saved to ``out`` (.npz)."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    T, arrays = _JaxT(jax), {}
    for name in (_jax_names() if names is None else names):
        for mode, vals in run_program(name, jnp, T, jax.tree_util.tree_leaves,
                                      jax.tree_util.tree_map, programs).items():
            if isinstance(vals, str):
                arrays[f"{name}/{mode}/error"] = np.asarray(vals)
                continue
            arrays[f"{name}/{mode}/n"] = np.asarray(len(vals))
            for k, v in enumerate(vals):
                arrays[f"{name}/{mode}/{k}"] = v
    np.savez(out, **arrays)


def _tol(dtype, name=None):
    """float32 results, and float64 ones computed from float32 inputs, to
    float32's precision; float64 to 1e-9."""
    low = name is not None and any(getattr(v, "dtype", None) == np.float32
                                   for v in _leaves((PROGRAMS[name].args, PROGRAMS[name].kwargs)))
    return 2e-5 if dtype == np.float32 or low else 1e-9


def _same_dtype(a, want):
    if a.dtype.kind in "iu" and want.dtype.kind in "iu":
        return True  # JAX's integer widths follow its own rules
    return a.dtype == want.dtype


if __name__ == "__main__":
    _theirs(sys.argv[1])
else:
    @pytest.fixture(scope="module")
    def jax_results(tmp_path_factory):
        if importlib.util.find_spec("jax") is None:
            pytest.skip("JAX not installed")
        from jax_child import results_from_child
        return results_from_child(__file__, tmp_path_factory, timeout=900)

    @pytest.mark.parametrize("name", sorted(PROGRAMS))
    def test_program_matches_jax(name, jax_results):
        if name not in _jax_names():
            pytest.skip("not in the default JAX subset (TAPESTRY_VMAP_JAX=all compares it)")
        ours = ours_of(name)
        for mode, vals in ours.items():
            if f"{name}/{mode}/error" in jax_results:
                continue  # JAX cannot run this program text
            assert not isinstance(vals, str), f"{mode}: {vals}"
            assert len(vals) == jax_results[f"{name}/{mode}/n"], mode
            for k, v in enumerate(vals):
                want = jax_results[f"{name}/{mode}/{k}"]
                assert v.shape == want.shape, (mode, k, v.shape, want.shape)
                assert _same_dtype(v, want), (mode, k, v.dtype, want.dtype)
                tol = _tol(want.dtype, name)
                np.testing.assert_allclose(v, want, rtol=tol, atol=tol,
                                           err_msg=f"{mode} leaf {k}")

    _LOOP_CASES = [(n, m) for n in sorted(PROGRAMS) for m in LOOP_MODES
                   if m == "value" or (PROGRAMS[n].grad and _float_argnums(PROGRAMS[n].args,
                                                                           _leaves))]

    @pytest.mark.parametrize("name,mode", _LOOP_CASES)
    def test_program_matches_loop(name, mode):
        """vmap gives what the unmapped function gives item by item: the
        program, its gradient inside the vmap, its jvp inside the vmap."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                want = loop_program(name, mode)
            except (NotImplementedError, TypeError, ValueError) as e:
                # refused item by item (forward mode on complex values): so under vmap
                with pytest.raises(type(e)):
                    mapped_program(name, mode)
                return
            ours = mapped_program(name, mode)
        if want is None:
            return  # an empty batch: no item to run; JAX is the reference
        assert len(ours) == len(want)
        for k, (v, w) in enumerate(zip(ours, want)):
            assert v.shape == w.shape, (k, v.shape, w.shape)
            assert v.dtype == w.dtype, (k, v.dtype, w.dtype)
            tol = 1e-5 if w.dtype == np.float32 else 1e-10
            np.testing.assert_allclose(v, w, rtol=tol, atol=tol, err_msg=f"leaf {k}")


# --- regressions found by the programs above (no JAX needed) ----------------------------
def _loss(o):
    return np.sum(np.sin(o) * np.arange(o.size).reshape(o.shape))


_SHARED_KEYS = {
    "rows": lambda m, g, h: m[g],
    "columns": lambda m, g, h: m[:, h],
    "pair": lambda m, g, h: m[g, h],
    "tuple_key": lambda m, g, h: m[(g, slice(None))],
    "ellipsis": lambda m, g, h: m[..., h],
    "apart": lambda m, g, h: m[h, :, h] if m.ndim == 3 else m[h][:, h],
    "take": lambda m, g, h: np.take(m, g, axis=0),
}


@pytest.mark.parametrize("key", sorted(_SHARED_KEYS))
def test_shared_index_arrays_in_gradients(key):
    """An index array handed to vmap unbatched (in_axes=None, e.g. the group
    of each observation) with repeats: its gather's gradient adds the
    repeats up, under grad(vmap) and vmap(grad), like a loop over items."""
    import tapestry as tp
    rng = np.random.default_rng(3)
    M = rng.standard_normal((4, 5, 3))
    g, h = np.array([0, 2, 2, 4, 0]), np.array([1, 1, 0, 2, 1])
    f = _SHARED_KEYS[key]
    want = tp.grad(lambda m: _loss(np.stack([f(m[i], g, h) for i in range(4)])))(M)
    gradv = tp.grad(lambda m: _loss(tp.vmap(f, in_axes=(0, None, None))(m, g, h)))(M)
    np.testing.assert_allclose(gradv, want, rtol=1e-12)
    vgrad = tp.vmap(tp.grad(lambda m, g, h: _loss(f(m, g, h))), in_axes=(0, None, None))(M, g, h)
    np.testing.assert_allclose(vgrad, np.stack([tp.grad(lambda m: _loss(f(m, g, h)))(M[i])
                                                for i in range(4)]), rtol=1e-12)
    shared = tp.vmap(lambda k, g, h: tp.grad(lambda m: k * _loss(f(m, g, h)))(M[0]),
                     in_axes=(0, None, None))(np.arange(1.0, 5.0), g, h)
    one = tp.grad(lambda m: _loss(f(m, g, h)))(M[0])
    np.testing.assert_allclose(shared, np.arange(1.0, 5.0)[:, None, None] * one, rtol=1e-12)


_TAKES = {
    "take_axis0": lambda t, i, j: np.take(t, i, axis=0),
    "take_flat": lambda t, i, j: np.take(t, i),
    "take_axis1": lambda t, i, j: np.take(t, i % 3, axis=1),
    "take_along_axis": lambda t, i, j: np.take_along_axis(t, j, axis=1),
}


@pytest.mark.parametrize("name", sorted(_TAKES))
def test_take_per_item_indices_into_shared_table(name):
    """np.take(W, i) with W shared (in_axes=None, or differentiated outside
    the vmap) and i per item: NumPy's dispatcher does not look at i, so the
    shared array's proxy must hand the call on; the value and grad(vmap)
    equal a loop."""
    import tapestry as tp
    rng = np.random.default_rng(4)
    t = rng.standard_normal((6, 3))
    idx, idx3 = rng.integers(0, 6, (4, 2)), rng.integers(0, 3, (4, 6, 1))
    f = _TAKES[name]
    loop = lambda t: np.stack([f(t, idx[k], idx3[k]) for k in range(4)])  # noqa: E731
    np.testing.assert_array_equal(tp.vmap(f, in_axes=(None, 0, 0))(t, idx, idx3), loop(t))
    got = tp.grad(lambda t: _loss(tp.vmap(f, in_axes=(None, 0, 0))(t, idx, idx3)))(t)
    np.testing.assert_allclose(got, tp.grad(lambda t: _loss(loop(t)))(t), rtol=1e-12)


_EMPTY = {
    "reshape_minus1": lambda a: a.reshape(-1),
    "reshape_mid": lambda a: np.reshape(a, (2, -1)),
    "ravel_T": lambda a: a.T.ravel(),
    "roll_flat": lambda a: np.roll(a, 1),
    "cumsum_flat": lambda a: np.cumsum(a),
    "argmax_flat": lambda a: np.argmax(a),
}


@pytest.mark.parametrize("name", sorted(_EMPTY))
def test_empty_batch_flattening_ops(name):
    """A batch of zero items: ``-1`` in a shape resolves against the item
    (NumPy cannot resolve it on an empty array), as jax.vmap does."""
    import tapestry as tp
    f = _EMPTY[name]
    out = tp.vmap(f)(np.zeros((0, 2, 3)))
    assert out.shape == (0,) + np.shape(f(np.zeros((2, 3))))
    g = tp.grad(lambda a: np.sum(tp.vmap(f)(a)))(np.zeros((0, 2, 3))) if name != "argmax_flat" \
        else np.zeros((0, 2, 3))
    assert g.shape == (0, 2, 3)


def test_forward_rule_branching_on_batched_value_runs_per_item():
    """logaddexp's rule checks for infinities in Python; under vmap(jvp) the
    fast forward path must fall back to the per-item path, not refuse."""
    import tapestry as tp
    v = np.random.default_rng(5).standard_normal((4, 3))
    f = lambda u: np.logaddexp(u[0], np.logaddexp(u[1], u[2]))  # noqa: E731
    jv = lambda u: tp.jvp(f, (u,), (np.ones(3),))[1]  # noqa: E731
    np.testing.assert_allclose(tp.vmap(jv)(v), [jv(u) for u in v], rtol=1e-12)
    np.testing.assert_allclose(tp.vmap(tp.jacfwd(f))(v), [tp.jacfwd(f)(u) for u in v], rtol=1e-12)


def test_second_order_gather_with_per_item_index():
    """vmap(grad(grad-of-loss)) through logits[label], label per item: the
    inner gather's scatter runs on the batch of labels."""
    import tapestry as tp
    rng = np.random.default_rng(6)
    W, X, lab = rng.standard_normal((3, 3)), rng.standard_normal((5, 3)), np.array([0, 2, 1, 1, 0])

    def per(W, xi, yi):
        inner = tp.grad(lambda W: np.log(np.sum(np.exp(W @ xi))) - (W @ xi)[yi])
        return tp.grad(lambda W: np.sum(np.sin(inner(W))))(W)
    got = tp.vmap(per, in_axes=(None, 0, 0))(W, X, lab)
    np.testing.assert_allclose(got, [per(W, X[i], lab[i]) for i in range(5)], rtol=1e-12)


def test_interp_and_searchsorted_batched():
    """np.interp with per-item points gathers its (shared) knots with the
    batch of positions: no loop, and vmap(grad) works; searchsorted and
    digitize with per-item values are one call."""
    import tapestry as tp
    from tapestry.core.batched import FALLBACKS
    xp, fp = np.array([0.0, 1.0, 2.5]), np.array([0.0, 1.0, -2.0])
    q = np.random.default_rng(7).uniform(-0.5, 3.0, (6, 4))
    FALLBACKS.clear()
    np.testing.assert_array_equal(tp.vmap(lambda u: np.interp(u, xp, fp))(q), np.interp(q, xp, fp))
    np.testing.assert_array_equal(tp.vmap(lambda u: np.searchsorted(xp, u, side="right"))(q),
                                  np.searchsorted(xp, q, side="right"))
    np.testing.assert_array_equal(tp.vmap(lambda u: np.digitize(u, xp))(q), np.digitize(q, xp))
    assert not FALLBACKS, dict(FALLBACKS)
    g = lambda u: tp.grad(lambda u: np.sum(np.interp(u, xp, fp) ** 2))(u)  # noqa: E731
    np.testing.assert_allclose(tp.vmap(g)(q), [g(u) for u in q], rtol=1e-12)
    assert tp.vmap(lambda u: np.searchsorted(xp, u))(q[:0]).shape == (0, 4)


_GUARDED = {  # rules that skip a correction when no entry needs it (a branch on values)
    "logaddexp": lambda u: np.logaddexp(u[0], np.logaddexp(u[1], u[2])),
    "cumprod": lambda u: np.sum(np.cumprod(u * u[::-1])),
    "hypot": lambda u: np.hypot(u[0], u[1] * u[2]) ** 2,
    "norm": lambda u: np.linalg.norm(u) * np.sum(u),
}


@pytest.mark.parametrize("name", sorted(_GUARDED))
def test_value_guards_in_rules_under_nested_transforms_in_vmap(name):
    """A rule that branches on its values to skip a correction (``if
    np.isinf(ans).any()``) decides on every item's values at once: under
    hessian / jacfwd inside vmap, where the values are batched below the
    derivative's own tapes, the branch cannot run per item."""
    import tapestry as tp
    f = _GUARDED[name]
    v = np.random.default_rng(8).standard_normal((4, 3))
    for transform in (tp.hessian, lambda h: tp.jacfwd(tp.grad(h)), lambda h: tp.jacrev(tp.grad(h))):
        got = tp.vmap(transform(f))(v)
        np.testing.assert_allclose(got, [transform(f)(u) for u in v], rtol=1e-10, atol=1e-12)


_TABLE = np.arange(12.0).reshape(4, 3)
_ITEM_BY_ITEM = {  # NumPy converting a batched value: the function runs once per item
    "closure_table_batched_index": (lambda i: _TABLE[i], np.array([0, 2])),
    "eye_one_hot": (lambda i: np.eye(3)[i], np.array([0, 2])),
    "full_batched_fill": (lambda a: np.full((3,), a), np.arange(2.0)),
    "full_like_plain_batched_fill": (lambda a: np.full_like(np.ones(2), a), np.arange(2.0)),
    "piecewise_vmap_of_grad": (
        lambda v: __import__("tapestry").grad(lambda v: np.sum(np.piecewise(
            v, [v < 0], [lambda u: -u, lambda u: u ** 2])))(v), np.linspace(-1, 1, 6).reshape(2, 3)),
}


@pytest.mark.parametrize("name", sorted(_ITEM_BY_ITEM))
def test_numpy_conversions_found_by_the_programs_run_item_by_item(name):
    import tapestry as tp
    f, a = _ITEM_BY_ITEM[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(f)(a)
    want = np.stack([f(v) for v in a])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_apply_along_axis_differentiated_inside_vmap():
    """``np.apply_along_axis`` under grad inside vmap (refused until it got
    its loop of differentiable slices): each item's gradient, as a loop."""
    import tapestry as tp
    X = np.random.default_rng(7).normal(size=(2, 3, 2))
    g = tp.grad(lambda a: np.sum(np.apply_along_axis(lambda r: np.sin(r) * r.sum(), 0, a)))
    np.testing.assert_allclose(tp.vmap(g)(X), np.stack([g(x) for x in X]), rtol=1e-14)


def test_apply_along_axis_maps_item_by_item_when_nothing_is_differentiated():
    import tapestry as tp
    X = np.arange(12.0).reshape(2, 3, 2)
    f = lambda a: np.apply_along_axis(np.cumsum, 0, a)  # noqa: E731
    np.testing.assert_array_equal(tp.vmap(f)(X), np.stack([f(x) for x in X]))


def test_logical_and_bitwise_operators_on_batched_and_shared_values():
    """``~mask``, ``a ^ b``, ``True & m``, ``k << 1`` on a per-item value and
    on an array shared by the items (in_axes=None) work as on the items."""
    import tapestry as tp
    v = np.array([[1.0, -2, 3], [-1, 2, -3]])
    m, k = np.array([True, False, True]), np.array([1, 2, 3])

    def f(v, m, k):
        return ((v > 0) ^ m, True & (v > 0), (v > 0) | m, m & (v > 0), ~m, m ^ (v < 0),
                (k << 1) + (k >> 1), (k & 1) | 4, False | (v > 0), 1 ^ k, np.select([m, ~m], [v, -v]))
    got = tp.vmap(f, in_axes=(0, None, None))(v, m, k)
    for g, w in zip(got, zip(*[f(x, m, k) for x in v])):
        np.testing.assert_array_equal(g, np.stack(w))


_LOOPING_EMPTY = {  # operations without a batching rule (they loop), on a batch of no items
    "lstsq": ((lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0]),
              (np.ones((0, 3, 2)), np.ones((0, 3))), [(0, 2)]),
    "round_isclose": ((lambda v: (np.round(v, 1), np.isclose(v, 0.0))), (np.ones((0, 3)),),
                      [(0, 3), (0, 3)]),
    "linspace_batched_ends": ((lambda a: np.linspace(a, a + 1, 4)), (np.ones(0),), [(0, 4)]),
}


@pytest.mark.parametrize("name", sorted(_LOOPING_EMPTY))
def test_looping_operations_on_an_empty_batch(name):
    """An operation that loops over the items gives, for no items, an empty
    result of the shape and dtype one item would have (as jax.vmap does),
    also under grad(vmap) and vmap(grad)."""
    import tapestry as tp
    f, args, shapes = _LOOPING_EMPTY[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = tp.tree_leaves(tp.vmap(f)(*args))
        assert [o.shape for o in out] == shapes
        one = tp.tree_leaves(f(*[np.ones(a.shape[1:]) for a in args]))
        assert [o.dtype for o in out] == [np.asarray(o).dtype for o in one]
        loss = lambda *a: sum(np.sum(v) for v in tp.tree_leaves(f(*a))  # noqa: E731
                              if v.dtype.kind == "f")
        g = tp.grad(lambda *a: np.sum(tp.vmap(lambda *b: loss(*b))(*a)))(*args)
        assert np.shape(g) == args[0].shape
        assert tp.vmap(tp.grad(loss))(*args).shape == args[0].shape


def test_item_size_attributes():
    """``nbytes`` and ``itemsize`` of a batched value are one item's."""
    import tapestry as tp
    out = tp.vmap(lambda v: v * v.nbytes + v.itemsize)(np.ones((3, 2, 4), np.float32))
    np.testing.assert_array_equal(out, np.full((3, 2, 4), 32.0 + 4.0, np.float32))


# --- the reference of the later rounds (5, 6): the unmapped program item by item ------
# (negative axes and namedtuples taken apart; an empty batch has no reference)
def _item_of(spec, a, i):
    import tapestry as tp
    if spec is None:
        return a
    if isinstance(spec, int):
        return tp.tree_map(lambda v: v[(slice(None),) * (spec % np.ndim(v)) + (i,)], a)
    if isinstance(spec, dict):
        return {k: _item_of(spec[k], a[k], i) for k in a}
    vals = [_item_of(s, v, i) for s, v in zip(spec, a)]
    return type(a)(*vals) if hasattr(a, "_fields") else type(a)(vals)


def _stack_of(spec, outs):
    import tapestry as tp
    if spec is None:
        return outs[0]
    if isinstance(spec, int):
        return tp.tree_map(lambda *vs: np.stack(vs, axis=spec), *outs)
    if isinstance(spec, dict):
        return {k: _stack_of(spec[k], [o[k] for o in outs]) for k in outs[0]}
    return type(outs[0])(_stack_of(s, [o[j] for o in outs]) for j, s in enumerate(spec))


def _size_of(spec, a):
    import tapestry as tp
    if spec is None:
        return None
    if isinstance(spec, int):
        return np.shape(tp.tree_leaves(a)[0])[spec]
    pairs = [(spec[k], a[k]) for k in a] if isinstance(spec, dict) else zip(spec, a)
    return next((n for n in (_size_of(s, v) for s, v in pairs) if n is not None), None)


def loop_of(name, programs, *args):
    """The unmapped program run item by item and its outputs stacked as
    ``out_axes`` says (``None`` for an empty batch: no item to run)."""
    p = programs[name]
    f = lambda *a, **k: p.f(*a, x=np, T=_TapestryT(), **k)  # noqa: E731
    spec = p.in_axes if isinstance(p.in_axes, (tuple, list)) else (p.in_axes,) * len(args)
    n = next((k for k in (_size_of(s, a) for s, a in zip(spec, args)) if k is not None),
             p.axis_size)
    if n == 0:
        return None  # an empty batch: no item to run; JAX is the reference
    outs = [f(*[_item_of(s, a, i) for s, a in zip(spec, args)], **_item_of(0, p.kwargs, i))
            for i in range(n)]
    return _stack_of(p.out_axes, outs)
