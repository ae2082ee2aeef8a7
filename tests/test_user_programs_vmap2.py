"""More realistic vmapped programs (tests/programs/vmap_progs2.py: the
idioms ported JAX code uses) under ``tp.vmap`` against ``jax.vmap`` --
values, dtypes, and the gradient of a scalar of the outputs through the
vmap -- and against a Python loop over the items of the unmapped function.
JAX runs in a child process (tests/jax_child.py); without JAX only the loop
comparison runs.  By default JAX checks the programs of ``SUBSET``;
``TAPESTRY_VMAP_JAX=all`` checks every one (about three minutes on two cores)."""
import importlib.util
import os
import sys
import warnings

import numpy as np
import pytest

if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
from programs.vmap_progs2 import PROGRAMS  # noqa: E402
from test_user_programs_vmap import (_item, _same_dtype, _size, _stack,  # noqa: E402
                                     _TapestryT)
from test_user_programs_vmap import _theirs as _save_theirs  # noqa: E402
from test_user_programs_vmap import ours_of  # noqa: E402
from test_user_programs_vmap import run_program as _run_program  # noqa: E402


def run_program(name, x, T, leaves, tree_map):
    """test_user_programs_vmap's run_program on this file's programs."""
    return _run_program(name, x, T, leaves, tree_map, PROGRAMS)


#: Checked against JAX by default: one or two of each kind (the loop
#: comparison runs every program).
SUBSET = (
    "softmax_xent_eye_one_hot", "dp_clipped_grads", "gmm_full_cov_loglik", "gp_nll_per_lengthscale",
    "ensemble_nested_dict_value_and_grad", "ensemble_dict_in_axes_with_none",
    "in_axes_nested_dict_negative", "out_axes_tuple_negative", "axis_size_no_batched_input",
    "jacfwd_of_inner_vmap", "vmap_jvp_both_batched", "custom_vjp_straight_through_round",
    "sparsemax_projection", "cholesky_two_triangular_solves", "maml_inner_adaptation",
    "closure_columns_picked", "hmm_sequence_logprob_closure", "returns_list_of_mixed",
)

def _jax_names():
    want = os.environ.get("TAPESTRY_VMAP_JAX", "")
    if want == "all":
        return list(PROGRAMS)
    return want.split(",") if want else list(SUBSET)


def _theirs(out):
    _save_theirs(out, _jax_names(), PROGRAMS)


def _ours(name):
    return ours_of(name, PROGRAMS)


# --- the reference without JAX: the unmapped function item by item ------------------
def loop_values(name):
    """The unmapped program on each item, stacked as ``out_axes`` says."""
    import tapestry as tp
    p = PROGRAMS[name]
    f = lambda *a, **k: p.f(*a, x=np, T=_TapestryT(), **k)  # noqa: E731
    spec = p.in_axes if isinstance(p.in_axes, (tuple, list)) else (p.in_axes,) * len(p.args)
    sizes = [_size(s, a, tp.tree_leaves) for s, a in zip(spec, p.args)]
    n = next((k for k in sizes if k is not None), p.axis_size)
    outs = [f(*[_item(s, a, i, tp.tree_map) for s, a in zip(spec, p.args)],
              **_item(0, p.kwargs, i, tp.tree_map)) for i in range(n)]
    return [np.asarray(v) for v in tp.tree_leaves(_stack(p.out_axes, outs, tp.tree_map))]


def _low_precision(name):
    import tapestry as tp
    return any(getattr(v, "dtype", None) == np.float32
               for v in tp.tree_leaves((PROGRAMS[name].args, PROGRAMS[name].kwargs)))


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
        ours = _ours(name)
        assert f"{name}/value/error" not in jax_results, \
            f"JAX cannot run the program text: {jax_results[f'{name}/value/error']}"
        for mode, vals in ours.items():
            if f"{name}/{mode}/error" in jax_results:
                continue  # JAX cannot differentiate this program text
            assert not isinstance(vals, str), f"{mode}: {vals}"
            assert len(vals) == jax_results[f"{name}/{mode}/n"], mode
            for k, v in enumerate(vals):
                want = jax_results[f"{name}/{mode}/{k}"]
                assert v.shape == want.shape, (mode, k, v.shape, want.shape)
                assert _same_dtype(v, want), (mode, k, v.dtype, want.dtype)
                tol = 2e-5 if want.dtype == np.float32 or _low_precision(name) else 1e-9
                np.testing.assert_allclose(v, want, rtol=tol, atol=tol,
                                           err_msg=f"{mode} leaf {k}")

    @pytest.mark.parametrize("name", sorted(PROGRAMS))
    def test_program_matches_loop(name):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = loop_values(name)
            ours = _ours(name)["value"]
        assert not isinstance(ours, str), ours
        assert len(ours) == len(want)
        for k, (v, w) in enumerate(zip(ours, want)):
            assert v.shape == w.shape, (k, v.shape, w.shape)
            assert v.dtype == w.dtype, (k, v.dtype, w.dtype)
            np.testing.assert_allclose(v, w, rtol=1e-10, atol=1e-10, err_msg=f"leaf {k}")
