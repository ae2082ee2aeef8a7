"""Differential tests against JAX: the same functions (tests/forward_cases.py)
through tapestry's and JAX's jvp / linearize / jacfwd / jacrev / hessian and a
Hessian-vector product; pytree results compared leaf by leaf, structure
included (dict keys in JAX's sorted order).  JAX runs in a child process;
the tests are skipped when JAX is not installed."""
import importlib.util
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tapestry as tp
import tapestry.scipy.linalg
import tapestry.scipy.special
from forward_cases import cases, extra_cases, mlp

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="JAX not installed")

rng = np.random.default_rng(0)
INPUTS = {
    "p": {"W": rng.standard_normal((3, 4)), "b": rng.standard_normal(3)},
    "x": rng.standard_normal(4), "A": rng.standard_normal((3, 4)),
    "tp": {"W": rng.standard_normal((3, 4)), "b": rng.standard_normal(3)},
    "tx": rng.standard_normal(4), "a": rng.standard_normal(4),
    "b": rng.standard_normal((2, 4)),
    "v": {"W": rng.standard_normal((3, 4)), "b": rng.standard_normal(3)},
    "M": np.tril(rng.standard_normal((3, 3))) + 3 * np.eye(3), "bvec": rng.standard_normal(3),
    "y": rng.standard_normal(3), "s0": (rng.standard_normal(2), rng.standard_normal(2)),
    "S": (lambda a: a @ a.T + 3 * np.eye(3))(rng.standard_normal((3, 3))),
    "x6": rng.standard_normal(6), "a0": np.array(0.7), "c0": np.array(1.3),
    "T": rng.standard_normal((3, 3)),
}


@pytest.fixture(scope="module")
def theirs():
    script = Path(__file__).with_name("forward_cases.py")
    done = subprocess.run([sys.executable, str(script)], input=pickle.dumps(INPUTS),
                          capture_output=True, check=False, timeout=600)
    if done.returncode:
        raise AssertionError(done.stderr.decode()[-3000:])
    return pickle.loads(done.stdout)


@pytest.fixture(scope="module")
def ours():
    out = cases(np, tp, INPUTS)
    x, p, v = INPUTS["x"], INPUTS["p"], INPUTS["v"]
    out["hvp"] = tp.hessian_vector_product(lambda p: mlp(np, p, x))(p, v)
    out.update(extra_cases(np, tp, tapestry.scipy.linalg, tapestry.scipy.special, INPUTS))
    return out


def _same(a, b, where):
    """Same structure as JAX builds it, and the same leaves."""
    if isinstance(b, dict):
        assert isinstance(a, dict) and sorted(a) == sorted(b), where
        for k in b:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert np.shape(a) == np.shape(b), (where, np.shape(a), np.shape(b))
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-10, atol=1e-12, err_msg=where)


@pytest.mark.parametrize("name", ["jvp_mlp", "jvp_aux", "linearize", "jacfwd", "jacrev",
                                  "hess_p", "hess_ab", "hess_b", "hvp",
                                  "rk4_jacfwd", "rk4_jvp", "linalg_jvp", "linalg_jacfwd",
                                  "decomp_hess", "spd_hess", "expm_tri", "specials",
                                  "special_hess", "select", "zero_d_hess", "hess_argnums",
                                  "jvp_of_grad", "linearize_many"])
def test_against_jax(name, ours, theirs):
    _same(ours[name], theirs[name], name)
