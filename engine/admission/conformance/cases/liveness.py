"""Conformance cases, liveness: candidate and wall budgets, repeated rejections."""

from __future__ import annotations

import time
from pathlib import Path

from loopproof.engine.admission.broker import (
    Disposition,
)
from loopproof.engine.admission.conformance.cases.registry import case
from loopproof.engine.admission.conformance.lab import BROKEN, CORRECT, Lab, reply_patch


@case("CF013", "candidate budget exhausted",
      obligation="liveness: the candidate budget bounds evaluations; the checkpoint survives",
      fault="a worker keeps proposing different failing patches past candidate_budget = 2",
      expected="the third patch is not evaluated (outcome exhausted); completion recertifies "
               "the checkpoint; the receipt says exhausted")
def cf013(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker(candidate_budget=2)
    ev = b.start()
    for i in range(2):
        d = b.submit(reply_patch({"calc.py": BROKEN + f"# {i}\n"}), based_on=ev)
        assert d.outcome is Disposition.REJECTED
    d = b.submit(reply_patch({"calc.py": BROKEN + "# 3\n"}), based_on=ev)
    assert d.outcome is Disposition.EXHAUSTED and b.closed
    assert b.counts["evaluated"] == 2
    c = b.complete()
    assert c.completed and c.receipt["liveness"]["ended"] == "exhausted"
    assert lab.program() == CORRECT


class _StartedClock:
    """A monotonic clock that reads 0 until `go()`, then the seconds since."""

    def __init__(self) -> None:
        self.origin: float | None = None

    def go(self) -> None:
        self.origin = time.monotonic()

    def __call__(self) -> float:
        return 0.0 if self.origin is None else time.monotonic() - self.origin


@case("CF031", "wall budget exhausted, checkpoint recovered",
      obligation="liveness: the wall budget stops revisions; the checkpoint is recovered and "
                 "completed",
      fault="wall budget 1.5 s; a proposal makes the gate sleep; the worker also scribbles "
            "on the workspace",
      expected="the slow check is cut at the wall budget (error, rejected); the next patch is "
               "'exhausted'; completion restores and recertifies the checkpoint")
def cf031(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    clock = _StartedClock()
    b = lab.broker(wall_budget_s=1.5, clock=clock)
    ev = b.start()
    clock.go()  # the wall budget counts from here, however long start() took on a busy machine
    ckpt = b.checkpoint
    t = time.monotonic()
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v2\n", "SLOW": ""}), based_on=ev)
    assert d.outcome is Disposition.REJECTED and time.monotonic() - t < 20
    (lab.ws / "calc.py").write_text(BROKEN)
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v3\n"}), based_on=ev)
    assert d.outcome is Disposition.EXHAUSTED and "wall budget" in d.reason
    c = b.complete()
    assert c.completed and c.receipt["checkpoint"]["tree_hash"] == ckpt
    assert c.receipt["liveness"]["ended"] == "exhausted" and lab.program() == CORRECT


@case("CF032", "a repeated identical rejected state escalates",
      obligation="liveness: the same rejected tree is not evaluated again and again",
      fault="the worker proposes the same failing patch twice (default repeat_limit = 1)",
      expected="the second proposal escalates without evaluation; one evaluation spent of 10")
def cf032(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker(candidate_budget=10)
    ev = b.start()
    assert b.submit(reply_patch({"calc.py": BROKEN}), based_on=ev).outcome is Disposition.REJECTED
    d = b.submit(reply_patch({"calc.py": BROKEN}), based_on=ev)
    assert d.outcome is Disposition.ESCALATED and "already rejected" in d.reason
    assert b.counts["evaluated"] == 1 and b.closed
