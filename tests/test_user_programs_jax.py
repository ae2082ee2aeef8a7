"""Cross-check: tapestry's gradients of the program battery against
``jax.grad`` of the same program text run under ``jax.numpy``
(tests/programs/jaxcopy.py).  Finite differences (test_user_programs.py) are
the referee for every program; JAX is a second, exact one where it runs, and
catches errors below the finite-difference tolerance.  Skipped without JAX.

JAX runs these small programs op by op at about a second each, so the suite
checks :data:`SUBSET`; ``TAPESTRY_PROGRAMS_JAX=all`` checks every program
(about five minutes on a 2-core machine)."""
import os

import numpy as np
import pytest

import tapestry as tp
from programs import load
from programs.runner import float_argnums

jax = pytest.importorskip("jax")

from programs.jaxcopy import jax_functions  # noqa: E402

PROGRAMS = load()

#: Programs where JAX and tapestry may rightly differ (finite differences
#: side with tapestry on both).
JAX_DIFFERS = {
    "eigh_of_unsymmetrised_parameter": "np.linalg.eigh reads one triangle: tapestry's gradient "
                                       "is NumPy's (that triangle only), JAX symmetrises it",
    "mvn_logpdf": "np.linalg.cholesky reads the lower triangle: tapestry's gradient has zeros "
                  "above the diagonal (NumPy's function), JAX symmetrises it",
    "unique_values": "JAX's jnp.unique gives the values a zero gradient; finite differences side "
                     "with tapestry",
}

#: Checked by default (about 15 s): a few cheap programs across families; the
#: full run (TAPESTRY_PROGRAMS_JAX=all) is the real cross-check.
SUBSET = ("mlp_cross_entropy", "nbody_potential_broadcast", "rosenbrock_for_row_in_x",
          "det_inv_logdet", "wasserstein_sorted", "hessian_quartic", "fancy_index_repeated_rows",
          "float32_scalar_and_vector")


def _grads(fn, args, argnums, has_aux, grad):
    g = grad(fn, argnums=argnums, has_aux=has_aux)(*args)
    return g[0] if has_aux else g


def _compare(name, prog, jfn):
    """'' when both agree or either cannot run the program, else a reason;
    None when JAX cannot run it."""
    args = prog.make_args()
    argnums = prog.argnums if prog.argnums is not None else float_argnums(args)
    try:
        ours = _grads(prog.fn, args, argnums, prog.mode == "aux", tp.grad)
    except (NotImplementedError, TypeError, ValueError, AttributeError, np.linalg.LinAlgError):
        return None                               # judged by test_user_programs.py
    try:
        theirs = _grads(jfn, prog.make_args(), argnums, prog.mode == "aux", jax.grad)
    except Exception:  # noqa: BLE001 -- JAX cannot run this program text: not our concern
        return None
    a, b = tp.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    if len(a) != len(b):
        return f"{len(a)} gradient leaves, JAX {len(b)}"
    for x, y in zip(a, b):
        x = np.asarray(x.todense() if hasattr(x, "todense") else x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        low = any(np.result_type(leaf) == np.float32 for i in argnums
                  for leaf in tp.tree_leaves(args[i]))
        rtol = 2e-3 if low else 1e-7
        if x.shape != y.shape or not np.allclose(x, y, rtol=rtol, atol=rtol * (1 + np.abs(y).max(initial=0))):
            i = int(np.argmax(np.abs(x - y))) if x.shape == y.shape else 0
            return f"tapestry {x.ravel()[i]:.8g} != JAX {y.ravel()[i]:.8g} at flat index {i}"
    return ""


@pytest.fixture(scope="module")
def comparisons():
    jfns = jax_functions()
    names = list(PROGRAMS) if os.environ.get("TAPESTRY_PROGRAMS_JAX") == "all" else SUBSET
    return {n: _compare(n, PROGRAMS[n], jfns[n]) for n in names if PROGRAMS[n].jax}


def test_jax_runs_the_programs(comparisons):
    ran = [n for n, r in comparisons.items() if r is not None]
    assert len(ran) >= 0.8 * len(comparisons), f"JAX compared only {len(ran)} programs"


def test_tapestry_matches_jax(comparisons):
    from test_user_programs import EXPECTED_BROKEN
    bad = [f"{n}: {r}" for n, r in sorted(comparisons.items())
           if r and n not in EXPECTED_BROKEN and n not in JAX_DIFFERS]
    assert not bad, "tapestry and JAX disagree:\n" + "\n".join(bad)
