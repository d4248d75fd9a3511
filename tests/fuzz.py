"""`make fuzz`: the Hypothesis tests with random examples, round after round, for a time budget.

Why apart from `make check`: `make check` must run the same examples on every machine (the `ci`
profile, tests/conftest.py); new counterexamples come from random exploration, which belongs
here. Each round draws a fresh seed, prints it, and runs the tests marked `hypothesis` (or
FUZZ_TESTS) under the `fuzz` profile (FUZZ_EXAMPLES examples each) with that seed; a failure stops
the run and prints the command that replays it exactly. Turn what it finds into a fixed test
(an `@example` or a plain test) so `make check` holds it from then on.

    make fuzz                        # FUZZ_SECONDS=300 by default
    make fuzz FUZZ_SECONDS=60 FUZZ_TESTS=tests/engine/record/test_ledger.py
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
import time


def main() -> int:
    budget = float(os.environ.get("FUZZ_SECONDS", "300"))
    tests = shlex.split(os.environ.get("FUZZ_TESTS", "tests"))
    seed_given = os.environ.get("FUZZ_SEED")
    env = dict(os.environ, HYPOTHESIS_PROFILE="fuzz")
    end = time.monotonic() + budget
    rounds = 0
    while time.monotonic() < end:
        seed = int(seed_given) if seed_given else secrets.randbelow(2**32)
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "hypothesis",
                "-x", f"--hypothesis-seed={seed}", *tests]
        replay = (f"HYPOTHESIS_PROFILE=fuzz FUZZ_EXAMPLES={env.get('FUZZ_EXAMPLES', '300')} "
                  f"{shlex.join(['.venv/bin/python', *args[1:]])}")
        print(f"make fuzz: round {rounds + 1}, seed {seed}; replay: {replay}", flush=True)
        try:
            proc = subprocess.run(args, env=env, timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"make fuzz: time budget of {budget:g} s reached inside round {rounds + 1} "
                  f"(seed {seed}); nothing failed", flush=True)
            return 0
        rounds += 1
        if proc.returncode not in (0, 5):  # 5: no test collected for this selection
            print(f"make fuzz: FAILED with seed {seed}; replay: {replay}", flush=True)
            return 1
        if seed_given:
            break
    print(f"make fuzz: {rounds} round(s) in {budget:g} s, nothing failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
