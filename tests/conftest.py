"""Test configuration: hypothesis runs derandomized (reproducible in CI);
set HYPOTHESIS_PROFILE=explore locally for fresh random examples."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
