"""Every public module says what it exports (``__all__``): each name exists,
and none is a helper picked up by an import (``np``, ``functools``,
``annotations`` from ``from __future__ import annotations``, ...)."""
import __future__
import importlib
import types

import numpy
import pytest

PUBLIC = [
    "tapestry", "tapestry.testing", "tapestry.debug", "tapestry.tree_util", "tapestry.optim",
    "tapestry.optimize", "tapestry.parallel", "tapestry.sparse", "tapestry.kernels",
    "tapestry.progress", "tapestry.console", "tapestry.cli",
    "tapestry.numpy", "tapestry.numpy.linalg", "tapestry.numpy.fft", "tapestry.numpy.random",
    "tapestry.scipy.linalg", "tapestry.scipy.special",
    "tapestry.autograd", "tapestry.autograd.builtins", "tapestry.autograd.core",
    "tapestry.autograd.differential_operators", "tapestry.autograd.extend",
    "tapestry.autograd.test_util", "tapestry.autograd.tracer", "tapestry.autograd.util",
    "tapestry.autograd.wrap_util", "tapestry.autograd.misc", "tapestry.autograd.misc.flatten",
    "tapestry.autograd.misc.optimizers", "tapestry.autograd.misc.tracers",
    "tapestry.autograd.misc.fixed_points",
]
#: Modules that mirror a NumPy namespace: their __all__ is NumPy's own
#: (its submodules included) plus tapestry's additions.
MIRRORS = {"tapestry.numpy": numpy, "tapestry.numpy.linalg": numpy.linalg,
           "tapestry.numpy.fft": numpy.fft, "tapestry.numpy.random": numpy.random}


def _import(name):
    if name in ("tapestry.optimize", "tapestry.scipy.linalg", "tapestry.scipy.special"):
        pytest.importorskip("scipy")
    return importlib.import_module(name)


@pytest.mark.parametrize("name", PUBLIC)
def test_all_names_exist_and_are_not_imported_helpers(name):
    mod = _import(name)
    assert hasattr(mod, "__all__"), f"{name} has no __all__"
    exported = list(mod.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    missing = [n for n in exported if n not in vars(mod)]
    assert not missing, f"{name}.__all__ names what {name} does not define: {missing}"
    numpy_own = set(getattr(MIRRORS.get(name), "__all__", ()))
    for n in exported:
        obj = vars(mod)[n]
        assert not isinstance(obj, __future__._Feature), f"{name}.__all__ has {n}"
        if isinstance(obj, types.ModuleType) and n not in numpy_own:
            # only the package's own submodules (tp.optim, tp.testing, ...)
            assert obj.__name__ == f"{name}.{n}", f"{name}.__all__ exports module {n}"


@pytest.mark.parametrize("name", ["tapestry.testing", "tapestry.autograd.test_util",
                                  "tapestry.autograd.differential_operators"])
def test_star_import_brings_no_helpers(name):
    ns = {}
    exec(f"from {name} import *", ns)  # noqa: S102
    for helper in ("np", "annotations", "vjp", "tree_flatten", "functools", "itertools"):
        assert helper not in ns or helper in _import(name).__all__, (name, helper)


@pytest.mark.parametrize("name, np_mod", list(MIRRORS.items()))
def test_numpy_mirror_star_import_is_numpys_plus_additions(name, np_mod):
    mod = _import(name)
    ns = {}
    exec(f"from {name} import *", ns)  # noqa: S102
    del ns["__builtins__"]
    assert set(np_mod.__all__) <= set(ns)
    extra = set(ns) - set(np_mod.__all__)
    assert extra == ({"stop_gradient", "logsumexp", "softmax", "log_softmax", "make_diagonal"}
                     if name == "tapestry.numpy" else set())
    assert all(ns[n] is getattr(mod, n) for n in ns)
