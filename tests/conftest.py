"""Shared test configuration: Hypothesis profiles, selected once by the CI variable."""

import os

from hypothesis import HealthCheck, settings

# `ci`: derandomized and without deadlines, so a clean clone on a loaded 2-core machine gives the
# same verdict every time. `dev`: random exploration, for finding new counterexamples locally.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# No test leaves a process behind (tests/leftover_processes.py: counted after every test).
pytest_plugins = ["leftover_processes"]
