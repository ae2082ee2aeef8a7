"""Test configuration: hypothesis runs derandomized (reproducible in CI);
set HYPOTHESIS_PROFILE=explore locally for fresh random examples."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


import re  # noqa: E402

import pytest  # noqa: E402

#: tapestry's own error for a missing optional extra ("... needs loky; pip
#: install 'tapestry[processes]'."): `make test` installs every extra, so
#: this only shows where a test runs in a partial environment.
_MISSING_EXTRA = re.compile(r"needs ([\w.]+); pip install 'tapestry\[(\w+)\]'")


def _missing_extra(exc):
    while exc is not None:
        if isinstance(exc, ImportError):
            m = _MISSING_EXTRA.search(str(exc))
            if m:
                return m
        exc = exc.__cause__ or exc.__context__
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test that reaches an optional extra which is not installed is
    skipped, naming the extra, instead of failing."""
    try:
        return (yield)
    except Exception as e:
        m = _missing_extra(e)
        if m is None:
            raise
        pytest.skip(f"needs the optional extra tapestry[{m.group(2)}] ({m.group(1)})")


@pytest.fixture(autouse=True)
def _numpy_error_mode_restored():
    """Every test starts with the error mode the last one started with: a
    test that calls ``np.seterr`` must not silence warnings that later
    tests (jit's floating-point replay) check for."""
    import numpy as np
    old = np.geterr()
    yield
    np.seterr(**old)
