"""The coverage spec: every registered rule is checked against finite
differences.

Each test module that sweeps rules with ``check_all`` / ``check_grads``
declares, at module level, ``SWEPT``: the registry keys (NumPy functions,
ufuncs, or internal keys such as ``"astype"``) whose rules its sweeps
check.  This test fails on a key of ``UFUNCS`` / ``FUNCTIONS`` (refusals
aside) that no module lists -- adding a rule means adding its sweep line --
and on a listed key that is no rule (a stale entry).
"""
import importlib
from pathlib import Path

import pytest

import tapestry  # noqa: F401  (fills the registries)
from tapestry.core.registry import FUNCTIONS, UFUNCS, run_loaders
from tapestry.coverage.refused import Refused

TESTS = Path(__file__).resolve().parent


def _declaring_modules():
    """Names of the test modules that declare ``SWEPT``."""
    return sorted(p.stem for p in TESTS.glob("test_*.py")
                  if p.stem != Path(__file__).stem and "\nSWEPT = " in p.read_text())


def swept():
    """key -> the test modules sweeping it (modules skipped for a missing
    optional dependency, such as SciPy, contribute nothing)."""
    out = {}
    for name in _declaring_modules():
        try:
            module = importlib.import_module(name)
        except pytest.skip.Exception:
            continue
        for key in module.SWEPT:
            out.setdefault(key, []).append(name)
    return out


def _label(key):
    if isinstance(key, str):
        return repr(key)
    return f"{getattr(key, '__module__', None) or 'numpy'}.{getattr(key, '__name__', key)}"


def _rules():
    run_loaders()  # scipy.special's rules, when SciPy is installed
    return {k for table in (UFUNCS, FUNCTIONS) for k, impl in table.items()
            if not isinstance(impl, Refused) and not getattr(impl, "refuses", False)}


def test_at_least_the_rule_modules_declare_what_they_sweep():
    declared = set(_declaring_modules())
    assert {"test_ops_elementwise", "test_ops_linalg", "test_ops_shape"} <= declared


def test_every_rule_is_in_a_finite_difference_sweep():
    missing = sorted(_label(k) for k in _rules() - set(swept()))
    assert not missing, (
        "rules that no finite-difference sweep checks: add a check_all line for each to a "
        "table in tests/test_ops_*.py and its key to that module's SWEPT:\n" + "\n".join(missing))


def test_swept_keys_are_rules():
    stale = sorted(f"{_label(k)} in {mods}" for k, mods in swept().items() if k not in _rules())
    assert not stale, f"SWEPT lists keys that have no rule: {stale}"
