"""Evidence conditions: what the coder is shown before each forced revision.

Every piece of evidence is an `engine.admission.evidence.Evidence` envelope (state hash, suite hash,
execution id, payload), so the guarded arm can check whether it binds to the current state.

- current_binary: the visible suite's verdict on the current state, nothing else;
- current_trace: the visible suite on the current state, pytest -x style: the first failing
  assertion with expected and actual, or, when all pass, every assertion with its expected value;
- stale_trace: the same trace taken on the *previous* state of the trajectory (an older state);
- unavailable: no evidence at all;
- nonactionable: text of exactly the current trace's length that carries no information;
- current_trace_full: the current trace over visible and challenge together (the sixth condition:
  the paper's notes do not name it; see docs/transition.md for why this one).
"""

from __future__ import annotations

from typing import Any

from experiments.transition.tasks import Suite, Task, code_hash, evaluate
from loopproof.engine.admission.evidence import Evidence
from loopproof.engine.system.canonical import digest

CONDITIONS: tuple[str, ...] = ("current_binary", "current_trace", "stale_trace", "unavailable",
                               "nonactionable", "current_trace_full")
FILLER = "evidence withheld for this revision. "


def _combined_hash(suites: tuple[Suite, ...]) -> str:
    return suites[0].hash if len(suites) == 1 else digest([s.hash for s in suites])


def trace(task: Task, source: str, full: bool = False) -> Evidence:
    """A trace of the visible suite (and the challenge suite when `full`) on `source`."""
    suites = (task.visible, task.challenge) if full else (task.visible,)
    results = evaluate(task, source)
    cases = [(c, results[s.name].rows[i]) for s in suites for i, c in enumerate(s.cases)]
    name = "+".join(s.name for s in suites)
    failed = [(c, actual) for c, (ok, actual) in cases if not ok]
    payload: dict[str, Any] = {"check": name, "verdict": "fail" if failed else "pass"}
    if failed:
        c, actual = failed[0]
        payload["failed"] = [{"args": c.args, "expected": c.expected, "actual": actual}]
        text = (f"{name}: FAIL\nassert {c.call_text(task.entry)} == {c.expected}\n"
                f"  actual: {actual}")
    else:
        payload["passed"] = [{"args": c.args, "expected": c.expected} for c, _ in cases]
        lines = [f"assert {c.call_text(task.entry)} == {c.expected}  # passed" for c, _ in cases]
        text = f"{name}: PASS ({len(cases)} assertions)\n" + "\n".join(lines)
    payload["text"] = text
    h = code_hash(source)
    return Evidence(h, _combined_hash(suites), f"{name}@{h[:12]}", payload)


def binary(task: Task, source: str) -> Evidence:
    ok = evaluate(task, source)["visible"].passed
    h = code_hash(source)
    text = f"visible: {'PASS' if ok else 'FAIL'}"
    return Evidence(h, task.visible.hash, f"visible@{h[:12]}",
                    {"check": "visible", "verdict": "pass" if ok else "fail", "text": text})


def nonactionable(task: Task, source: str) -> Evidence:
    """Same length as the current trace, no information (the matched control)."""
    n = len(str(trace(task, source).payload["text"]))
    text = (FILLER * (n // len(FILLER) + 1))[:n]
    h = code_hash(source)
    return Evidence(h, task.visible.hash, f"none@{h[:12]}",
                    {"check": "none", "verdict": "none", "text": text})


def evidence_for(condition: str, task: Task, current: str, previous: str) -> Evidence | None:
    """The evidence shown before revising `current` under `condition` (`previous` is the state
    before it, used only by stale_trace)."""
    if condition == "current_binary":
        return binary(task, current)
    if condition == "current_trace":
        return trace(task, current)
    if condition == "stale_trace":
        return trace(task, previous)
    if condition == "unavailable":
        return None
    if condition == "nonactionable":
        return nonactionable(task, current)
    if condition == "current_trace_full":
        return trace(task, current, full=True)
    raise ValueError(f"unknown evidence condition {condition!r}; known: {', '.join(CONDITIONS)}")
