"""The fifth round of realistic vmapped programs (tests/programs/vmap_progs5.py)
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
from programs.vmap_progs5 import PROGRAMS  # noqa: E402
from test_user_programs_vmap import (_float_argnums, _is_float, _same_dtype,  # noqa: E402
                                     _TapestryT)
from test_user_programs_vmap import _theirs as _save_theirs  # noqa: E402
from test_user_programs_vmap import loop_of, ours_of  # noqa: E402
from test_user_programs_vmap import run_program as _run_program  # noqa: E402

#: Python branching on an item's value: refused by name, as by jax.vmap.
REFUSED = {
    "branch_on_item_value_refused": "truth value of a batched value",
    "python_min_builtin_refused": "truth value of a batched value",
    "dynamic_slice_with_argmax_refused": "use as an index",
}

#: Programs whose results differ from JAX's by a documented convention, not
#: by vmap: never compared with JAX (the loop comparison covers them).
CONVENTIONS = {
    "cholesky_slogdet_eigh": "cholesky / eigh gradients land on one triangle (docs/linalg.md)",
    "eigh_gradient_of_top_eigenvalue": "eigh's gradient lands on one triangle",
    "solve_triangular_via_cholesky": "cholesky's gradient lands on one triangle",
    "uint8_sums_promote": "JAX's cumsum of uint8 keeps uint8",
    "histogram_fixed_bins": "JAX's histogram counts are floats",
    "int8_sums_and_mean": "JAX's mean of int8 is computed in float32",
    "bool_sums_and_counts": "JAX's mean of bool is computed in float32",
    "nan_functions": "JAX's nanstd of one value has a nan gradient, tapestry's 0",
}

#: Compared with JAX by default: one or two programs of each kind.
SUBSET = (
    "namedtuple_grad_none_leaf", "mid_and_last_axes", "dict_list_in_axes_none_scalar",
    "out_axes_dict_then_none", "nested_pairwise_outer_inner_minus1", "vmap_inside_jit_inside_vmap",
    "vmap_jacrev_dict_params_output_vector", "value_and_grad_has_aux_argnums",
    "gather_rows_then_cols", "negative_batched_indices", "take_modes_clip_wrap",
    "scatter_add_repeated", "searchsorted_both_batched_sides", "interp_batched_fp_and_points",
    "solve_shared_rhs_inv_det", "matrix_norm_2_nuc", "einsum_ellipsis_and_batched",
    "shape_ops_negative_axes", "float32_item_with_float64_shared", "int_items_ops",
    "adv_indices_separated_by_slice", "shared_array_adv_middle_mixed",
    "pad_modes", "fft_axes_and_norm", "masked_attention_from_lengths", "lstm_per_example_grad",
    "cnn_conv_pool_per_example_grad", "inner_sgd_loop_history", "bilinear_sample_floor_ceil",
    "lennard_jones_masked_forces", "neural_ode_rk4_param_grad",
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
            _close(got, _loop(name, *p.args), name)

    @pytest.mark.parametrize("name", [n for n in MAPPED if PROGRAMS[n].grad])
    def test_gradient_through_the_vmap_matches_the_loop(name):
        """Where the loop's gradient is refused (a write into a plain array,
        knots of np.interp), the vmap's is refused too, by tapestry."""
        import tapestry as tp
        p = PROGRAMS[name]
        if not _float_argnums(p.args, tp.tree_leaves):
            pytest.skip("no float argument")
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
    def test_python_branching_on_an_item_is_refused_by_name(name):
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
