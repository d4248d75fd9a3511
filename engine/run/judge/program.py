"""The `program` judge kind: the judged tree as a program, one sandboxed run per case, stdin in,
stdout out, the comparison in the engine.

Each run gets the case's input on stdin and nothing else of the case; its stdout (at most
`MAX_STDOUT` bytes) is the case's result, read by the engine: under `compare = "json"` parsed
strictly (engine/run/judge/wire.py), under "exact" as UTF-8 text, under "lines" as its lines
without trailing whitespace or trailing empty lines. A run that times out, is killed, ends by a
signal or with a nonzero exit, or prints more than the cap has no result for its case: an exit
status can lose a case, never win one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.run.gate import ERROR, GateResult, TimedGate, judge_snapshot
from loopproof.engine.run.judge.cases import Case
from loopproof.engine.run.judge.decide import decide
from loopproof.engine.run.judge.scratch import candidate_box, run_judged, scratch_copy
from loopproof.engine.run.judge.wire import NotStrict, strict_json
from loopproof.engine.system.sandbox import Confinement
from loopproof.model.judging import CaseReport, NoResult, Returned

COMPARES = ("json", "exact", "lines")
MAX_STDOUT = 1 << 20
# The judged program's own folder on sys.path, as `python3 solution.py` has it anywhere else:
# the gate environment's PYTHONSAFEPATH=1 keeps a gate's own script from importing the judged
# tree's modules, but here every module of the process is the judged code's, and with it a
# correct solution split over two modules (`from helper import f`) failed every case.
ENV = {"PYTHONSAFEPATH": ""}


def lines_of(text: str) -> list[str]:
    """What `compare = "lines"` compares: the lines, each without trailing whitespace, without
    trailing empty lines."""
    out = [line.rstrip() for line in text.split("\n")]
    while out and not out[-1]:
        out.pop()
    return out


def expected_of(compare: str, expect: Any) -> Any:
    return lines_of(expect) if compare == "lines" else expect


@dataclass(frozen=True)
class ProgramGate(TimedGate):
    """`kind = "program"`: `run` (its program resolved at load) once per case."""

    run: tuple[str, ...]
    cases_file: Path
    cases: tuple[Case, ...] = field(repr=False)
    compare: str = "json"
    timeout_s: float = 60.0

    @property
    def argv(self) -> tuple[str, ...]:
        return self.run

    def hidden_files(self) -> tuple[Path, ...]:
        """What the judged program must never see: the case file."""
        return (self.cases_file,)

    def pinned_files(self) -> tuple[Path, ...]:
        """The case file and the program `run` starts (an installed interpreter or tool)."""
        return (self.cases_file, Path(self.run[0]))

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        return judge_snapshot(workspace, self.timeout_s,
                              lambda snap, t: self.judge_runs(snap, t, confine))

    def report(self, stdout: bytes) -> CaseReport:
        """One run's stdout as the case's result."""
        try:
            text = stdout.decode("utf-8")
        except UnicodeDecodeError:
            return NoResult("stdout is not UTF-8")
        if self.compare == "json":
            try:
                return Returned(strict_json(stdout))
            except NotStrict as exc:
                return NoResult(f"stdout is not strict JSON: {exc}")
        return Returned(lines_of(text) if self.compare == "lines" else text)

    def judge_runs(self, snapshot: Path, timeout_s: float, confine: Confinement | None
                   ) -> tuple[str, str, dict[str, Any]]:
        """One run per case, in one scratch copy, within `timeout_s` in all."""
        deadline = time.monotonic() + timeout_s
        reports: dict[int, CaseReport] = {}
        note = ""
        with scratch_copy(snapshot) as tree:
            box = candidate_box(confine, self.hidden_files(), tree)
            for i, case in enumerate(self.cases):
                left = deadline - time.monotonic()
                if left <= 0:
                    note = f"out of time after {i} of {len(self.cases)} runs ({timeout_s:g} s)"
                    break
                stdin = (json.dumps(case.given).encode("utf-8") if self.compare == "json"
                         else case.given.encode("utf-8"))
                ran = run_judged(self.run, tree, left, box, stdin, ENV)
                if ran.result is None:
                    return ERROR, f"program: cannot start: {ran.problem}", {
                        "error": "cannot start"}
                res = ran.result
                if res.killed:
                    reports[i] = NoResult(f"killed ({res.killed})")
                elif res.returncode != 0:
                    reports[i] = NoResult(f"exit {res.returncode}")
                elif len(res.stdout) > MAX_STDOUT or res.output_truncated:
                    reports[i] = NoResult(f"stdout larger than {MAX_STDOUT} bytes")
                else:
                    reports[i] = self.report(res.stdout)
        return decide("program", {i: expected_of(self.compare, c.expect)
                                  for i, c in enumerate(self.cases)},
                      {i: reports.get(i, NoResult("not run")) for i in range(len(self.cases))},
                      {i: f"line {c.line}" for i, c in enumerate(self.cases)}, note=note)
