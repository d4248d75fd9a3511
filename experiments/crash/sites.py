"""Where the crash study kills a run: the engine's commit boundaries, and how many cases each
scale takes at them.
"""

from __future__ import annotations

from dataclasses import dataclass

LEDGER_SITES = ("ledger.before_append", "ledger.torn_write", "ledger.after_append")
# Sites a resume reaches early; a "during a resume" case kills the first resume at one of them.
RESUME_SITES = ("runner.resume", "ledger.before_append", "ledger.torn_write",
                "ledger.after_append")
# Sites inside an attempt (after its Begin is recorded, before its verdict is).
INSIDE_ATTEMPT = ("runner.after_worker", "meter.before_settle", "runner.before_worker",
                  "meter.after_reserve", "runner.before_verdict")


@dataclass(frozen=True)
class Scale:
    """How many seeds; which sites, at how many occurrence indices; which resume crashes."""

    seeds: int
    per_site: int                       # occurrence indices n per site, spread over the run
    sites: tuple[str, ...] | None = None  # None: every engine site
    resume_sites: tuple[str, ...] = RESUME_SITES
    resume_cases: int = 1               # primary crashes per resume site whose resume is killed
    widths: tuple[int, ...] = ()        # crash graphs with that many builds in flight at once


SCALES: dict[str, Scale] = {
    # a torn ledger write, a crash between a worker's call and its record, and a killed
    # resume, each at the last occurrence: small enough for the test suite
    "smoke": Scale(seeds=1, per_site=1, sites=("ledger.torn_write", "runner.after_worker"),
                   resume_sites=("runner.resume",)),
    # and every site once more with 2 and with 4 attempts in flight (experiments/crash/cases.py)
    "default": Scale(seeds=2, per_site=2, widths=(2, 4)),
    "paper": Scale(seeds=10, per_site=2, widths=(2, 4)),
}


def engine_sites() -> tuple[str, ...]:
    """The engine's commit boundaries, read from the modules that own them."""
    from loopproof.engine.run import meter, runner
    sites = LEDGER_SITES + tuple(meter.METER_SITES) + tuple(runner.CRASH_SITES)
    return tuple(dict.fromkeys(s for s in sites if s != "runner.resume"))  # once each, in order
