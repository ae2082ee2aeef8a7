"""The seventh round of realistic vmapped programs (tests/programs/vmap_progs7.py)
under ``tp.vmap``: values against a Python loop over the items of the
unmapped function, the gradient of a scalar of the outputs through the vmap
against the same gradient through the loop, and (a subset) values and
gradients against ``jax.vmap``, run in a child process
(``TAPESTRY_VMAP_JAX=all`` compares every program JAX can run).  The
programs that must be refused are refused with an error naming the
operation; REFUSED_GRAD lists those whose gradients are."""
import importlib.util
import os
import sys
import warnings

import numpy as np
import pytest

if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
from programs.vmap_progs7 import PROGRAMS  # noqa: E402
from test_user_programs_vmap import (_float_argnums, _is_float, _same_dtype,  # noqa: E402
                                     _TapestryT)
from test_user_programs_vmap import _theirs as _save_theirs  # noqa: E402
from test_user_programs_vmap import loop_of, ours_of  # noqa: E402
from test_user_programs_vmap import run_program as _run_program  # noqa: E402

#: Programs whose values are refused: none in this round.
REFUSED = {
}

#: Programs whose values map (item by item, as NumPy writes into a plain
#: array) but whose gradients are refused by name, by tapestry as without
#: vmap: NumPy writes the traced value into a plain array itself.
REFUSED_GRAD = {
    "gcn_layer_add_at_scatter": r"np\.add\.at writes a traced value",
    "graph_attention_segment_softmax": r"np\.add\.at writes a traced value",
    "segment_sum_per_item_ids_add_at": r"np\.add\.at writes a traced value",
    "np_full_batched_fill_in_loss": r"np\.full\(shape, v\) with a traced fill value",
}

#: Programs whose results differ from JAX's by a documented convention, not
#: by vmap: never compared with JAX (the loop comparison covers them).
CONVENTIONS = {}

#: Compared with JAX by default: one or two programs of each kind.
SUBSET = (
    "gp_periodic_kernel_nll", "gp_loglik_grad_wrt_lengthscales", "spectral_mixture_kernel_1d",
    "sir_epidemic_rk4_params", "lotka_volterra_rk4_trajectory_grad",
    "implicit_euler_linear_solve_steps", "kalman_constant_velocity_2d_joseph", "rts_smoother_1d",
    "unscented_transform_sigma_points", "kalman_loglik_grad_wrt_shared_params",
    "pre_ln_transformer_block_two_heads", "cross_attention_memory_key_padding",
    "gmm_full_cov_cholesky_batched_components", "hmm_forward_log_space_logaddexp",
    "cox_partial_likelihood_reverse_logcumsumexp", "piecewise_constant_hazard_searchsorted",
    "tukey_biweight_cauchy_geman_mcclure", "lennard_jones_energy_forces_via_grad",
    "coulomb_minimum_image_periodic_box", "black_scholes_greeks_nested_grad",
    "crr_binomial_tree_american_put", "implied_vol_newton_fixed_iterations",
    "edge_weighted_aggregation_bincount_weights", "segment_mean_and_max_shared_ids",
    "conv2d_valid_sliding_window_view", "sobel_edges_pad_reflect",
    "fft2_lowpass_and_power_spectrum", "cvar_via_sort_top_fraction", "quantile_methods_and_iqr",
    "median_absolute_deviation_rows", "logcumsumexp_vs_naive",
    "lstsq_residuals_and_qr_solve", "eigh_matrix_functions_sqrt_log",
    "svd_low_rank_and_nuclear_norm", "pinv_projection_and_matrix_rank",
    "welch_like_psd_hann_windows", "spectral_derivative_periodic",
    "dict_tuple_in_axes_negative_out_dict", "list_and_dict_in_axes_list_out_axes",
    "in_axes2_out_axes_minus3_matrix_output", "triple_nested_vmap_outer_products",
    "inner_vmap_axis_size_and_none", "vmap_of_hessian_via_jacfwd_jacrev",
    "vmap_of_jvp_hvp_forward_over_reverse", "custom_vjp_safe_norm_inside_vmap",
    "custom_jvp_log1pexp_inside_vmap", "von_mises_loglik_bessel_i0e",
    "maml_second_order_inner_step", "float32_attention_block_grad", "auc_pairwise_sigmoid_and_hard",
    "value_at_risk_per_item_level_quantile_and_percentile",
    "heaviside_step_per_item_value_at_zero",
)


def run_program(name, x, T, leaves, tree_map):
    return _run_program(name, x, T, leaves, tree_map, PROGRAMS)


def _jax_names():
    want = os.environ.get("TAPESTRY_VMAP_JAX", "")
    if want == "all":
        return [n for n in PROGRAMS if n not in REFUSED and n not in CONVENTIONS]
    return want.split(",") if want else list(SUBSET)


def _theirs(out):
    _save_theirs(out, _jax_names(), PROGRAMS)


def _ours(name):
    return ours_of(name, PROGRAMS)


# --- the reference: the unmapped function item by item ---------------------------------
def _loop(name, *args):
    return loop_of(name, PROGRAMS, *args)


def _gradient(name, run):
    """The gradient, in the float arguments, of the scalar
    tests/test_user_programs_vmap.run_program takes of ``run``'s outputs."""
    import tapestry as tp
    p = PROGRAMS[name]

    def loss(*a):
        return sum(np.sum(np.sin(v) + 0.5 * v ** 2) for v in tp.tree_leaves(run(*a))
                   if _is_float(v))
    return tp.grad(loss, argnums=_float_argnums(p.args, tp.tree_leaves))(*p.args)


def _close(got, want, name):
    import tapestry as tp
    low = any(getattr(v, "dtype", None) == np.float32 for v in tp.tree_leaves(PROGRAMS[name].args))
    tol = 2e-5 if low else 1e-9
    got, want = tp.tree_leaves(got), tp.tree_leaves(want)
    assert len(got) == len(want)
    for k, (v, w) in enumerate(zip(got, want)):
        v, w = np.asarray(v), np.asarray(w)
        assert v.shape == w.shape and v.dtype == w.dtype, (k, v.shape, w.shape, v.dtype, w.dtype)
        np.testing.assert_allclose(v, w, rtol=tol, atol=tol, err_msg=f"leaf {k}")


if __name__ == "__main__":
    _theirs(sys.argv[1])
else:
    MAPPED = sorted(n for n in PROGRAMS if n not in REFUSED)

    @pytest.mark.parametrize("name", MAPPED)
    def test_program_matches_loop(name):
        import tapestry as tp
        p = PROGRAMS[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = tp.vmap(lambda *a, **k: p.f(*a, x=np, T=_TapestryT(), **k), in_axes=p.in_axes,
                          out_axes=p.out_axes, axis_size=p.axis_size)(*p.args, **p.kwargs)
            want = _loop(name, *p.args)
            if want is not None:
                _close(got, want, name)

    @pytest.mark.parametrize("name", [n for n in MAPPED if PROGRAMS[n].grad])
    def test_gradient_through_the_vmap_matches_the_loop(name):
        """Where the loop's gradient is refused (a write into a plain array,
        knots of np.interp), the vmap's is refused too, by tapestry."""
        import tapestry as tp
        p = PROGRAMS[name]
        if not _float_argnums(p.args, tp.tree_leaves):
            pytest.skip("no float argument")
        if _loop(name, *p.args) is None:
            pytest.skip("an empty batch: compared with JAX only")
        vm = tp.vmap(lambda *a, **k: p.f(*a, x=np, T=_TapestryT(), **k), in_axes=p.in_axes,
                     out_axes=p.out_axes, axis_size=p.axis_size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                want = _gradient(name, lambda *a: _loop(name, *a))
            except (TypeError, ValueError, NotImplementedError) as e:
                with pytest.raises(type(e), match="tapestry"):
                    _gradient(name, lambda *a: vm(*a, **p.kwargs))
                return
            _close(_gradient(name, lambda *a: vm(*a, **p.kwargs)), want, name)

    @pytest.mark.parametrize("name", sorted(REFUSED_GRAD))
    def test_gradient_refused_by_name(name):
        """The gradient through the vmap of a program that NumPy writes a
        traced value into a plain array for is refused, naming the call."""
        import tapestry as tp
        p = PROGRAMS[name]
        vm = tp.vmap(lambda *a, **k: p.f(*a, x=np, T=_TapestryT(), **k), in_axes=p.in_axes,
                     out_axes=p.out_axes, axis_size=p.axis_size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(TypeError, match=REFUSED_GRAD[name]):
                _gradient(name, lambda *a: vm(*a, **p.kwargs))

    @pytest.mark.parametrize("name", sorted(REFUSED))
    def test_refused_by_name(name):
        import tapestry as tp
        p = PROGRAMS[name]
        with pytest.raises(TypeError, match=REFUSED[name]):
            tp.vmap(lambda *a: p.f(*a, x=np, T=_TapestryT()), in_axes=p.in_axes)(*p.args)

    @pytest.fixture(scope="module")
    def jax_results(tmp_path_factory):
        if importlib.util.find_spec("jax") is None:
            pytest.skip("JAX not installed")
        from jax_child import results_from_child
        return results_from_child(__file__, tmp_path_factory, timeout=900)

    @pytest.mark.parametrize("name", MAPPED)
    def test_program_matches_jax(name, jax_results):
        if name not in _jax_names():
            pytest.skip("not in the default JAX subset (TAPESTRY_VMAP_JAX=all compares it)")
        if f"{name}/value/error" in jax_results:
            pytest.skip("JAX cannot run the program text")
        for mode, vals in _ours(name).items():
            if f"{name}/{mode}/error" in jax_results:
                continue  # JAX cannot differentiate this program text
            if isinstance(vals, str):  # the NumPy text refused under grad, by name
                assert mode == "grad" and "tapestry" in vals, f"{mode}: {vals}"
                continue
            assert len(vals) == jax_results[f"{name}/{mode}/n"], mode
            for k, v in enumerate(vals):
                want = jax_results[f"{name}/{mode}/{k}"]
                assert v.shape == want.shape, (mode, k, v.shape, want.shape)
                assert _same_dtype(v, want), (mode, k, v.dtype, want.dtype)
                tol = 2e-5 if want.dtype == np.float32 or v.dtype == np.float32 else 1e-9
                np.testing.assert_allclose(v, want, rtol=tol, atol=tol,
                                           err_msg=f"{mode} leaf {k}")

    # --- regressions found by the programs above (no JAX needed) --------------------------
    _BINCOUNTS = {  # (f, in_axes): per-item indices and / or weights
        "indices": (lambda i, w: np.bincount(i, minlength=6), (0, None)),
        "indices_shared_weights": (lambda i, w: np.bincount(i, w[0], minlength=6), (0, None)),
        "shared_indices_weights": (lambda i, w: np.bincount(i[1], w, minlength=6), (None, 0)),
        "both": (lambda i, w: np.bincount(i, w, minlength=6), (0, 0)),
        "both_no_minlength": (lambda i, w: np.bincount(i, w), (0, 0)),
        "float32_weights": (lambda i, w: np.bincount(i, w.astype(np.float32), minlength=6), (0, 0)),
    }

    @pytest.mark.parametrize("name", sorted(_BINCOUNTS))
    def test_bincount_batches_per_item_indices_and_weights(name):
        """np.bincount with per-item indices or weights is one bincount (was:
        one call per item), with a loop's values and gradients: grad of the
        vmap, vmap of grad."""
        import tapestry as tp
        from tapestry.core.batched import FALLBACKS
        f, in_axes = _BINCOUNTS[name]
        rng = np.random.default_rng(71)
        idx = rng.integers(0, 6, (4, 5))
        idx[:, 0] = 5                                  # every item's counts have 6 bins
        w = rng.standard_normal((4, 5))

        def item(k):
            return [idx[k] if in_axes[0] == 0 else idx, w[k] if in_axes[1] == 0 else w]
        FALLBACKS.clear()
        got = tp.vmap(f, in_axes=in_axes)(idx, w)
        assert not FALLBACKS, dict(FALLBACKS)
        want = np.stack([f(*item(k)) for k in range(4)])
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12)
        if got.dtype.kind != "f":
            return
        loss = lambda o: np.sum(np.sin(o) * np.arange(o.size).reshape(o.shape))  # noqa: E731
        gv = tp.grad(lambda w: loss(tp.vmap(f, in_axes=in_axes)(idx, w)))(w)
        gl = tp.grad(lambda w: loss(np.stack([f(*item(k)[:1], w[k] if in_axes[1] == 0 else w)
                                              for k in range(4)])))(w)
        np.testing.assert_allclose(gv, gl, rtol=1e-12)
        if in_axes[1] == 0:
            vg = tp.vmap(tp.grad(lambda i, w: loss(f(i, w)), argnums=1), in_axes=in_axes)(idx, w)
            np.testing.assert_allclose(vg, np.stack([tp.grad(lambda v: loss(f(item(k)[0], v)))(w[k])
                                                     for k in range(4)]), rtol=1e-12)

    def test_bincount_items_of_different_lengths_and_empty_batches():
        """Counts whose length differs per item cannot stack (as a loop's);
        an empty batch has the item's length where the indices are shared."""
        import tapestry as tp
        with pytest.raises(ValueError, match="bincount"):
            tp.vmap(np.bincount)(np.array([[0, 1], [5, 1]]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert tp.vmap(lambda w: np.bincount(np.array([0, 2]), w))(np.zeros((0, 2))).shape \
                == (0, 3)
            assert tp.vmap(lambda i: np.bincount(i, minlength=3))(np.zeros((0, 4), int)).shape \
                == (0, 3)

    def test_np_full_with_a_traced_fill_is_refused_naming_np_full():
        """NumPy's np.full converts its fill value itself (no dispatch): the
        refusal names np.full and its differentiable spellings, not the
        np.asarray the user never wrote."""
        import tapestry as tp
        for run in (lambda: tp.grad(lambda s: np.sum(np.full(3, s) ** 2))(1.5),
                    lambda: tp.vmap(tp.grad(lambda s: np.sum(np.full((2, 3), s))))(np.ones(2)),
                    lambda: tp.grad(lambda s: np.sum(tp.vmap(lambda v: np.full(3, v))(s)))(
                        np.ones(2))):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(TypeError, match=r"np\.full\(shape, v\).*np\.broadcast_to"):
                    run()
        g = tp.grad(lambda s: np.sum(np.broadcast_to(s, (3,)) ** 2))(1.5)
        assert g == 9.0

    @pytest.mark.parametrize("ufunc", [np.maximum, np.minimum, np.logaddexp, np.subtract,
                                       np.fmax], ids=lambda u: u.__name__)
    def test_ufunc_accumulate_batches(ufunc):
        """A running maximum, a log-cumsum-exp (drawdowns, Cox risk sets):
        ``ufunc.accumulate`` of a batched value folds the whole batch at once
        (was: one call per item), with a loop's values and gradients."""
        import tapestry as tp
        from tapestry.core.batched import FALLBACKS
        X = np.random.default_rng(74).standard_normal((3, 5, 2))
        for axis in (0, -1):
            f = lambda a: ufunc.accumulate(a, axis=axis)  # noqa: E731
            loss = lambda a: np.sum(np.sin(f(a)))  # noqa: E731
            FALLBACKS.clear()
            np.testing.assert_array_equal(tp.vmap(f)(X), np.stack([f(x) for x in X]))
            want = tp.grad(lambda X: sum(loss(x) for x in X))(X)
            np.testing.assert_allclose(tp.grad(lambda X: np.sum(tp.vmap(loss)(X)))(X), want,
                                       rtol=1e-12)
            np.testing.assert_allclose(tp.vmap(tp.grad(loss))(X), want, rtol=1e-12)
            assert not FALLBACKS, dict(FALLBACKS)
