"""From case reports to a gate verdict, by asking the model's rule (model/judging.py).

Why one place: every judge kind ends the same way. The engine holds the expectations (they never
left it), the reports are plain data parsed strictly (engine/run/judge/wire.py), and the ruling
is `rule_on_cases`'s: PASSED is `accept`, FORGED is `error` ("report forged": a planted canary
came back otherwise than planted), VACUOUS is `error` ("the tests did not import the judged
code": they passed on other code than the judged tree's), anything else `reject`. No exit
status enters it.

The detail names the failing cases by their line in the case file (or their test ID) and what
came back, never the expected value: the ledger is the engine's, but a detail may be shown to a
revision worker as a diagnostic, and an expectation there would be an answer key. (A test's
outcome is no answer key: `shown` prints it, "failed", "timeout".)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from loopproof.engine.run.gate import ACCEPT, ERROR, REJECT
from loopproof.model.judging import (
    FORGED,
    VACUOUS,
    CaseReport,
    CodeLoads,
    NoResult,
    Returned,
    Tolerance,
    rule_on_cases,
)

SHOWN = 5  # failing cases named in a detail
KEPT = 50  # failing cases kept in the verdict record


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def decide(kind: str, expected: Mapping[Hashable, Any], reports: Mapping[Hashable, CaseReport],
           labels: Mapping[Hashable, str], *, tolerance: Tolerance | None = None,
           canaries: Mapping[Hashable, Any] | None = None, note: str = "",
           facts: dict[str, Any] | None = None, code: CodeLoads | None = None,
           shown: bool = False) -> tuple[str, str, dict[str, Any]]:
    """(verdict, detail, facts) for the gate protocol. `labels` names each case for people
    (e.g. "line 4"); `note` says what else went wrong (a timeout, a garbled stream); `code`
    where the judged code had to come from; `shown`: a failing case's value may be printed (a
    test's outcome, not an answer)."""
    ruling = rule_on_cases(expected, reports, tolerance, canaries, code)
    out = dict(facts or {})
    out.update(judge=kind, cases=len(expected))
    tail = f"; {note}" if note else ""
    if ruling.ruling == FORGED:
        named = ", ".join(str(labels.get(k, k)) for k in ruling.forged)
        out.update(error="report forged", forged=[str(labels.get(k, k)) for k in ruling.forged])
        return ERROR, (f"{kind}: report forged: {named} came back otherwise than planted, so "
                       f"no outcome on that channel can be believed{tail}"), out
    if ruling.ruling == VACUOUS:
        out.update(error="vacuous")
        return ERROR, (f"{kind}: the tests did not import the judged code: {ruling.vacuous}; "
                       f"no outcome of theirs says anything of it{tail}"), out
    if ruling.passed:
        return ACCEPT, f"{kind}: all {len(expected)} cases match{tail}", out

    def why(k: Hashable) -> str:
        got = reports.get(k)
        if isinstance(got, Returned):
            if shown and type(got.value) is str:
                return f"{labels.get(k, k)} ({got.value[:40]})"
            return f"{labels.get(k, k)} (returned a different {_kind(got.value)})"
        return f"{labels.get(k, k)} ({got.why if isinstance(got, NoResult) else 'no result'})"

    failing = list(ruling.failing)
    words = ", ".join(why(k) for k in failing[:SHOWN])
    more = f" and {len(failing) - SHOWN} more" if len(failing) > SHOWN else ""
    unasked = f"; {len(ruling.unasked)} results for cases never asked" if ruling.unasked else ""
    out["failing"] = [str(labels.get(k, k)) for k in failing[:KEPT]]
    count = sum(1 for k in failing if k in expected)
    return REJECT, (f"{kind}: {count} of {len(expected)} cases fail: {words}{more}"
                    f"{unasked}{tail}"), out
