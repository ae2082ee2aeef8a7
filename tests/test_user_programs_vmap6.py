"""The sixth round of realistic vmapped programs (tests/programs/vmap_progs6.py)
under ``tp.vmap``: values against a Python loop over the items of the
unmapped function, the gradient of a scalar of the outputs through the vmap
against the same gradient through the loop, and (a subset) values and
gradients against ``jax.vmap``, run in a child process
(``TAPESTRY_VMAP_JAX=all`` compares every program JAX can run).  The
programs that must be refused are refused with an error naming the
operation."""
import importlib.util
import os
import sys
import warnings

import numpy as np
import pytest

if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
from programs.vmap_progs6 import PROGRAMS  # noqa: E402
from test_user_programs_vmap import (_float_argnums, _is_float, _same_dtype,  # noqa: E402
                                     _TapestryT)
from test_user_programs_vmap import _theirs as _save_theirs  # noqa: E402
from test_user_programs_vmap import loop_of, ours_of  # noqa: E402
from test_user_programs_vmap import run_program as _run_program  # noqa: E402

#: Refused by name (docs/vmap.md): none now (a write into a copy of a
#: batched value, triu_indices_gather_and_with_row, was refused before item
#: assignment was supported).
REFUSED: dict = {}

#: Programs whose results differ from JAX's by a documented convention, not
#: by vmap: never compared with JAX (the loop comparison covers them).
CONVENTIONS = {}

#: Compared with JAX by default: one or two programs of each kind.
SUBSET = (
    "lse_over_axis_tuple_keepdims", "xent_rows_take_along_axis_keepdims",
    "softmax_masked_neg_inf", "special_logsumexp_weighted_sign",
    "multihead_shared_keys_length_mask", "layernorm_axis_tuple_and_groupnorm",
    "gp_nll_ard_hyperparameters", "batch_axis_last_matrix_inv_det",
    "batch_axis_middle_solve_matrix_rhs", "rk4_van_der_pol_tuple_state",
    "kalman_filter_2d_loglik", "polyfit_degree2_then_eval", "cumprod_axis0_diff_axis0_keep",
    "take_along_axis_sorted_axis0_and_none", "median_percentile_axis",
    "clip_batched_array_bounds_and_method", "einsum_same_operand_twice", "interp_periodic",
    "histogram_binning_searchsorted_bincount", "ix_grid_gather", "patchify_reshape_transpose",
    "reductions_axis_tuples_keepdims", "nested_tuple_dict_in_axes_negative",
    "out_axes_mixed_none_and_negative", "vmap_jacobian_of_softmax",
    "jit_of_inner_vmap_with_static_argnums", "jit_vmap_jit_rows", "iterate_rows_unpack_pairs",
    "float32_layer_grad_and_norm", "empty_batch_softmax_and_solve",
    "scipy_cho_solve_and_solve_triangular", "stacked_linalg_inside_item",
    "reductions_where_and_initial", "shared_array_batched_ints_separated",
    "ensemble_grad_of_inner_vmap_mse", "kwargs_two_mapped_leaves",
    "histogram_range_weights_density", "rk4_stack_rhs_per_example_param_grad",
    "gp_posterior_samples_cholesky", "lse_rows_with_neg_inf_entries",
    "shared_matrix_batched_vector_and_matrix_rhs", "vmap_of_vjp_pullback_over_cotangents",
    "one_jit_called_on_batched_and_shared", "negative_binomial_loglik_gammaln_xlogy",
    "masked_layernorm_var_std_where",
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
