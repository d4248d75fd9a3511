"""How many examples a Hypothesis test draws: a few fixed ones in `make check`, more in `make fuzz`.

Why: under the `ci` profile (tests/conftest.py) every example is the same on every machine, so
a test whose cases are random runs (the Coq differential test's drawn event sequences, the run
encoding's any-kind check) adds fixed breadth at a fixed cost on every `make check`; breadth is
what `make fuzz` draws, with a fresh seed each round. A test that sets its count with
`examples(check, fuzz)` draws `check` derandomized examples in `make check` and `fuzz` random
ones a round in `make fuzz` (None: the profile's own count, FUZZ_EXAMPLES).
"""

from __future__ import annotations

from hypothesis import settings


def examples(check: int, fuzz: int | None = None) -> int:
    """`check` under a derandomized profile (`ci`), else `fuzz` (None: the profile's count)."""
    if settings.default.derandomize:
        return check
    return settings.default.max_examples if fuzz is None else fuzz
