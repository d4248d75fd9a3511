"""Running candidates: the experiment's side of the runner program
(experiments/transition/candidate_runner.py), on the principle of the engine's `calls` judge
kind (engine/run/judge/, docs/gates.md).

The runner subprocess gets the candidates and the cases' arguments, never their expected values;
what comes back is strict JSON lines in the calls wire format (engine/run/judge/wire.py), each
returned value in a tagged form this process rebuilds from built-in types (`untag`), and this
process compares it with the expected value (`same`): the candidate's objects are never compared
in the process that ran them, and what a candidate prints or exits with decides nothing. A
candidate whose rows did not all come back (it ended the process, or wrote on the results
channel) is run again alone, and without rows then it "died", as before.
"""

from __future__ import annotations

import ast
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.transition.candidate_runner import RUNNER
from loopproof.engine.run.judge.wire import read_stream
from loopproof.engine.system.process import gate_environment, run_command
from loopproof.engine.system.sandbox import DEFAULT, Confinement, View, backend
from loopproof.model.judging import NoResult, Returned

CALL_TIMEOUT_S = 0.5      # CPU seconds per call of a candidate on one input (load-independent)
BATCH_TIMEOUT_S = 300.0   # the whole batch (the per-call alarm normally fires long before)


@dataclass(frozen=True)
class Case:
    """One assertion as data: call `entry(*args)` and compare with `expected` (both Python reprs)."""

    args: str
    expected: str
    approx: bool = False  # hidden cases compare floats with a tolerance; the dataset's use ==

    def call_text(self, entry: str) -> str:
        inner = self.args[1:-1].rstrip(",") if self.args.startswith("(") else self.args
        return f"{entry}({inner})"

    def to_json(self) -> list[Any]:
        return [self.args, self.expected, self.approx]



Row = tuple[bool, str, float]
FIRST_CHUNK = 8  # with `first`, candidates go in batches of 8, 16, 32, ... until one passes
MAX_OUTPUT = 64 << 20


class Opaque:
    """A returned value that was not built of built-in types: equal to nothing."""

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


def untag(v: Any) -> Any:
    """The value the runner sent in its tagged form (experiments/transition/candidate_runner.py),
    rebuilt here from built-in types; an unknown tag is Opaque."""
    tag, *rest = v if type(v) is list and v else ["x"]
    items = rest[0] if rest else None
    if tag == "n":
        return None
    if tag == "b" and type(items) is bool:
        return items
    if type(items) is str:
        try:
            decode = {"i": lambda x: int(x, 16), "f": float, "c": complex, "s": str,
                      "y": bytes.fromhex}.get(tag)
            if decode is not None:
                return decode(items)
        except ValueError:
            return Opaque()
    if type(items) is list:
        if tag == "l":
            return [untag(x) for x in items]
        if tag == "t":
            return tuple(untag(x) for x in items)
        try:
            if tag == "d":
                return {untag(k): untag(x) for k, x in items}
            if tag == "e":
                return {untag(x) for x in items}
            if tag == "z":
                return frozenset(untag(x) for x in items)
        except (TypeError, ValueError):
            return Opaque()
    return Opaque()


def same(a: Any, b: Any, approx: bool) -> bool:
    """Does the returned value `a` (rebuilt from the runner's tagged form) meet the expected `b`:
    Python's ==, floats within a tolerance in hidden cases. Asked in this process, on values
    this process built: never on the candidate's own objects."""
    if approx and isinstance(a, float) and isinstance(b, int | float) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if approx and isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(
            same(x, y, True) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _batch(entry: str, candidates: list[str], cases: list[Case], call_timeout: float
           ) -> list[list[Row] | None]:
    """One runner process for every candidate on every case; a candidate whose rows did not
    all come back (the process died, or the results channel was written on) is None."""
    job = {"entry": entry, "candidates": candidates, "args": [c.args for c in cases],
           "call_timeout": call_timeout}
    cwd = Path(__file__).resolve().parent
    exe = Path(sys.executable)
    box = Confinement(backend(DEFAULT), View(
        readable=(cwd, exe.parent.parent, Path(os.path.realpath(exe)).parent.parent),
        private_home=True))
    res = run_command([sys.executable, "-I", "-S", "-c", RUNNER], cwd, BATCH_TIMEOUT_S,
                      env=gate_environment(), stdin=json.dumps(job).encode(), confine=box,
                      max_output=MAX_OUTPUT)
    n = len(cases)
    stream = read_stream(b"" if res.output_truncated else res.stdout, range(len(candidates) * n))
    wants = [ast.literal_eval(c.expected) for c in cases]
    out: list[list[Row] | None] = []
    for i in range(len(candidates)):
        reports = [stream.reports.get(i * n + k) for k in range(n)]
        if any(r is None for r in reports):
            out.append(None)
            continue
        rows: list[Row] = []
        for case, want, r in zip(cases, wants, reports, strict=True):
            if isinstance(r, Returned) and type(r.value) is list and len(r.value) == 3:
                tagged, shown, used = r.value
                rows.append((same(untag(tagged), want, case.approx), str(shown), float(used)))
            else:
                why = r.why.removeprefix("raised ") if isinstance(r, NoResult) else "malformed"
                rows.append((False, why, call_timeout if why == "timeout" else 0.0))
        out.append(rows)
    return out


def _rows(entry: str, candidates: list[str], cases: list[Case], call_timeout: float
          ) -> list[list[Row]]:
    """Every candidate's rows; one that took its batch down runs alone (as it did before)."""
    got = _batch(entry, candidates, cases, call_timeout)
    out = []
    for c, rows in zip(candidates, got, strict=True):
        if rows is None and len(candidates) > 1:
            rows = _batch(entry, [c], cases, call_timeout)[0]
        out.append(rows if rows is not None else [(False, "process died", 0.0)] * len(cases))
    return out


def run_cases(entry: str, candidates: list[str], cases: list[Case], *, first: bool = False,
              call_timeout: float = CALL_TIMEOUT_S) -> list[list[Row]]:
    """Run every candidate on every case in a runner subprocess; per candidate, per case:
    (passed, short repr of the actual value or what went wrong, seconds). The runner never sees
    an expected value; this process compares (`same`). With `first`, stop after the first
    candidate that passes every case (later candidates get no row)."""
    if not candidates:
        return []
    if not first:
        return _rows(entry, candidates, cases, call_timeout)
    out: list[list[Row]] = []
    i, size = 0, FIRST_CHUNK
    while i < len(candidates):
        for rows in _rows(entry, candidates[i:i + size], cases, call_timeout):
            out.append(rows)
            if all(ok for ok, _, _ in rows):
                return out
        i, size = i + size, size * 2
    return out
