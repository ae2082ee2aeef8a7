"""The autograd-style example: it trains, it names tapestry only in its import
lines, and (when HIPS autograd is installed) the same source with autograd's
imports gives the same objective and gradients."""
import inspect
import sys
import types

import numpy as np
import pytest

from tapestry.examples import autograd_port


def test_example_trains():
    first, last, params = autograd_port.main(num_iters=60, quiet=True)
    assert last < first - 10.0
    assert set(params) == {"log_amp", "log_len", "log_noise", "mean"}


def test_only_import_lines_name_tapestry():
    src = inspect.getsource(autograd_port)
    body = src.split('"""', 2)[2]  # after the module docstring
    for line in body.splitlines():
        if "tapestry" in line:
            assert line.startswith(("import ", "from ")), line


def _autograd_version():
    """The example's source with autograd's import lines, as a module."""
    src = inspect.getsource(autograd_port).replace("tapestry.autograd", "autograd")
    mod = types.ModuleType("autograd_port_under_autograd")
    exec(compile(src, "autograd_port[autograd]", "exec"), mod.__dict__)  # noqa: S102
    return mod


def test_same_gradients_as_hips_autograd():
    ag = pytest.importorskip("autograd")
    if ag.__name__ != "autograd" or "tapestry" in getattr(ag, "__file__", ""):
        pytest.skip("autograd resolves to tapestry's shim here")
    theirs = _autograd_version()
    data = autograd_port.make_data()
    params = {"log_amp": 0.3, "log_len": -0.2, "log_noise": -1.5, "mean": 0.1}
    v1, g1 = autograd_port.value_and_grad(autograd_port.make_objective(data))(params, 0)
    v2, g2 = theirs.value_and_grad(theirs.make_objective(data))(params, 0)
    assert np.isclose(v1, v2, rtol=1e-12)
    for k in params:
        assert np.isclose(g1[k], g2[k], rtol=1e-9, atol=1e-12), k
    assert sys.modules["autograd"] is ag
