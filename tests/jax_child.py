"""Comparisons with JAX run JAX in a child process: imported into the test
process, JAX starts threads, and the fork-based parallel tests that run
later would then fork a multi-threaded process.  A test module computes its
JAX results when run as a script (``python test_x.py OUT.npz``); its
fixture calls :func:`results_from_child`."""
from __future__ import annotations

import subprocess
import sys

import numpy as np


def results_from_child(module_file, tmp_path_factory, timeout=300):
    """Run ``module_file`` as a script writing an ``.npz``; return its arrays."""
    out = tmp_path_factory.mktemp("jax") / "results.npz"
    run = subprocess.run([sys.executable, module_file, str(out)], capture_output=True,
                         text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return dict(np.load(out))
