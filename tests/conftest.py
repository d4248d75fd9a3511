"""Shared test configuration: Hypothesis profiles.

`ci` is the profile of `make check` on every machine, with or without the CI variable:
derandomized (each test's examples follow from its own source), 50 examples where a test does
not set its own (half Hypothesis's default: `make fuzz` is where breadth is), no deadline, and no example
database (a saved failure would change what runs where it was saved), so a fresh clone on a
newcomer's laptop runs exactly the examples CI runs. Random exploration is `make fuzz`
(tests/fuzz.py): the `fuzz` profile, a fresh seed each round, printed with the command that
replays it. HYPOTHESIS_PROFILE selects a profile by hand.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, database=None,
                          max_examples=50, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz", derandomize=False, deadline=None, print_blob=True,
                          database=None, max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")),
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# tests/fixtures/real/ holds real projects' own suites, run by the judge, never by this one
collect_ignore = ["fixtures"]

# No test leaves a process behind (tests/support/leftover_processes.py: counted after every test).
pytest_plugins = ["tests.support.leftover_processes"]

# The tests load specs directly, as a library user would: every shipped node kind first
# (engine/kinds.py; the `loopproof` command does the same).
from loopproof.engine.kinds import register_builtin  # noqa: E402

register_builtin()
