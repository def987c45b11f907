"""Shared test configuration.

- The end-to-end fixtures (a bare remote of the sample repository, the emulator on loopback).
- Hypothesis: under CI (``CI=true``) examples are derandomized, so a run is repeatable and a failure
  is one that any re-run shows; locally the search stays random to find new counterexamples.
"""

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["tests._e2e_support", "tests._release_support", "tests._ci_repo_support"]

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")
