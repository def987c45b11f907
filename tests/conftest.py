"""Shared test configuration.

- The end-to-end fixtures (a bare remote of the sample repository, the emulator on loopback).
- The user's cache (``XDG_CACHE_HOME``: git mirrors, checked documents) is a directory of this session,
  never the account's ``~/.cache``; a test that needs its own sets ``RECONCILER_CACHE_DIR`` or a cache dir.
- Hypothesis: under CI (``CI=true``) examples are derandomized, so a run is repeatable and a failure
  is one that any re-run shows; locally the search stays random to find new counterexamples.
"""

import os
import tempfile

from hypothesis import HealthCheck, settings

os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="reconciler-test-cache-")

pytest_plugins = ["tests._e2e_support", "tests._release_support", "tests._ci_repo_support"]

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_sessionfinish(session: object, exitstatus: object) -> None:
    """The session's cache directory goes with the session (each xdist worker has its own)."""
    import shutil

    shutil.rmtree(os.environ["XDG_CACHE_HOME"], ignore_errors=True)
