"""The `calls` judge kind: call a function of the judged tree on every case, in one sandboxed
run of the pinned harness (engine/run/judge/calls_harness.py), and compare in the engine.

What the judged code's process gets: the harness (standard library only, passed as `-c`), the
scratch copy of the tree, and the cases' arguments on stdin. Not the expectations, not the case
file, not the spec (hidden, engine/run/judge/scratch.py), not the engine's memory (its own PID
namespace under bwrap). What comes back: strict JSON lines on a channel of their own; the exit
status is never read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.run.gate import ERROR, GateResult, TimedGate, judge_snapshot
from loopproof.engine.run.judge.cases import Case
from loopproof.engine.run.judge.decide import decide
from loopproof.engine.run.judge.scratch import candidate_box, run_judged, scratch_copy
from loopproof.engine.run.judge.wire import Stream, read_stream
from loopproof.engine.system.sandbox import Confinement
from loopproof.model.judging import NoResult, Tolerance

HARNESS = Path(__file__).with_name("calls_harness.py").read_text(encoding="utf-8")
HARNESS_SHA256 = hashlib.sha256(HARNESS.encode()).hexdigest()


def stream_facts(res: Any) -> dict[str, Any]:
    """What the verdict record keeps of a run of judged code: its exit and its stderr."""
    return {"exit": res.returncode, "output": {"stderr": res.stream("stderr").record()}}


@dataclass(frozen=True)
class CallsGate(TimedGate):
    """`kind = "calls"`: `module.function(*args, **kwargs)` per case, in one harness run."""

    python: str  # absolute, resolved at load like a program
    module: str
    function: str
    cases_file: Path
    cases: tuple[Case, ...] = field(repr=False)
    tolerance: Tolerance | None = None
    timeout_s: float = 60.0

    @property
    def argv(self) -> tuple[str, ...]:
        """The program the judge runs (its installation is made readable to the judged code)."""
        return (self.python,)

    def hidden_files(self) -> tuple[Path, ...]:
        """What the judged code must never see: the case file."""
        return (self.cases_file,)

    def pinned_files(self) -> tuple[Path, ...]:
        """The case file and the interpreter: a change of either stops the run (exit 5)."""
        return (self.cases_file, Path(self.python))

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        return judge_snapshot(workspace, self.timeout_s,
                              lambda snap, t: self.run(snap, t, confine))

    def run(self, snapshot: Path, timeout_s: float, confine: Confinement | None
            ) -> tuple[str, str, dict[str, Any]]:
        """Judge one snapshot: one harness run for every case."""
        job = json.dumps({"module": self.module, "function": self.function,
                          "calls": [c.given for c in self.cases]}).encode("utf-8")
        with scratch_copy(snapshot) as tree:
            box = candidate_box(confine, self.hidden_files(), tree)
            ran = run_judged((self.python, "-I", "-c", HARNESS), tree, timeout_s, box, job)
        facts: dict[str, Any] = {"harness": HARNESS_SHA256[:16]}
        if ran.result is None:
            return ERROR, f"calls: the harness could not start: {ran.problem}", {
                **facts, "error": "cannot start"}
        res = ran.result
        facts.update(stream_facts(res))
        n = len(self.cases)
        stream = read_stream(res.stdout, range(n))
        notes = []
        if res.output_truncated:
            stream = Stream({}, "more output than the limit")
        if stream.garbled:
            notes.append(f"results refused whole: {stream.garbled}")
        if res.timed_out or res.killed:
            notes.append(f"the harness was killed ({res.killed}) after {timeout_s:g} s")
        reports = {i: stream.reports.get(i, NoResult("no result")) for i in range(n)}
        return decide("calls", {i: c.expect for i, c in enumerate(self.cases)}, reports,
                      {i: f"line {c.line}" for i, c in enumerate(self.cases)},
                      tolerance=self.tolerance, note="; ".join(notes), facts=facts)
