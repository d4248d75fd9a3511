"""When a judge kind's case results make a PASS: the rule the engine asks (engine/run/judge/).

A judge kind (`calls`, `program`, `pytest`) runs the judged code where the verdict is not
decided and gets back, per case, either a plain JSON value the code returned (`Returned`) or
nothing usable (`NoResult`: it raised, the process died, the line was not strict JSON, the case
was never reported). The engine, never the judged code, compares them with the expectations.

The rule:
- a **canary** (a case the engine planted with a known outcome, e.g. a test that must fail)
  reported with another outcome means the channel the results came on was forged: the ruling is
  `forged`, which the engine records as an error, never a PASS;
- otherwise it is a PASS iff every expected case is present, is a `Returned`, and its value is
  equal to the expectation **by type and value** (`same_value`: `1`, `1.0` and `True` are three
  different values; a list is not a tuple; only JSON's types are values at all), and no case was
  reported that was not asked for;
- and, where the judged code is named (`CodeLoads`: the `pytest` kind's `code`), the run must
  have imported it from where it lies in the judged tree: a run in which a judged package was
  never imported, or was imported from anywhere else (an installed copy, a shadow copy), or in
  which any module came from an installed copy of the judged code (an `__init__.py` that points
  the package's `__path__` there), is `vacuous`, an error, never a PASS ("the tests did not import the judged code"): the cases
  passed, but not on the judged code. A run that failed its cases without saying what it
  imported (it died) stays a failure.

Why a model rule: the verdict's integrity is then a property of this pure function over plain
data, which `tests/model/test_judging_rule.py` ties to the engine, instead of a property of whatever
`==` the judged code's objects define.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

PASSED, FAILED, FORGED, VACUOUS = "passed", "failed", "forged", "vacuous"


@dataclass(frozen=True)
class Tolerance:
    """How close two floats must be under `compare = "approx"` (math.isclose's meaning)."""

    rel: float = 1e-9
    abs: float = 1e-12


@dataclass(frozen=True)
class Returned:
    """A case's result: the plain JSON value the judged code produced."""

    value: Any


@dataclass(frozen=True)
class NoResult:
    """A case with no usable result, and why (raised, died, not strict JSON, never reported)."""

    why: str


CaseReport = Returned | NoResult


@dataclass(frozen=True)
class CodeLoads:
    """Where the judged code must come from, and where the run says it came from.

    `expected` maps each judged import name to the file (a package's `__init__.py`, a module, or
    a namespace package's folder) it must be loaded from; `loaded` maps it to the file the run
    reported (None: never imported), or is None when no report came back; `each`: every name
    must have been imported (names declared one by one), else at least one (names found in the
    tree by default, where a top-level module the tests never import is no sign of vacuity).
    No expected name (`code = []`: the tests run the judged code as a program) asks nothing.
    `strays` maps each module the run loaded from an installed copy of the judged code (where
    the import system finds a judged name without the tree) to its file: any makes the run
    vacuous. (A module of another package aliased under a judged name is no stray.)"""

    expected: Mapping[str, str]
    loaded: Mapping[str, str | None] | None
    each: bool = True
    strays: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CaseRuling:
    """The rule's answer: `PASSED`, `FAILED`, `FORGED` or `VACUOUS`, the cases that did not
    match (in the order they were expected), the canaries reported otherwise than planted, and
    why a run is vacuous."""

    ruling: str
    failing: tuple[Hashable, ...] = ()
    forged: tuple[Hashable, ...] = ()
    unasked: tuple[Hashable, ...] = ()
    vacuous: str = ""

    @property
    def passed(self) -> bool:
        return self.ruling == PASSED


def is_json_value(v: Any, depth: int = 0) -> bool:
    """Is `v` a plain JSON value: None, bool, int, a finite float, str, a list or a dict with
    str keys of such values, each of exactly that type (no subclass, no tuple)?"""
    if depth > 200:
        return False
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return True
    if t is float:
        return math.isfinite(v)
    if t is list:
        return all(is_json_value(x, depth + 1) for x in v)
    if t is dict:
        return all(type(k) is str and is_json_value(x, depth + 1) for k, x in v.items())
    return False


def same_value(expected: Any, got: Any, tolerance: Tolerance | None = None) -> bool:
    """Equal by type and value, over JSON values only (anything else is equal to nothing);
    floats within `tolerance` when one is given, else exactly."""
    te, tg = type(expected), type(got)
    if te is not tg:
        return False
    if expected is None or te is bool or te is int or te is str:
        return bool(expected == got)  # exact types: the built-in ==, never an object's own
    if te is float:
        if not (math.isfinite(expected) and math.isfinite(got)):
            return False
        if tolerance is None:
            return bool(expected == got)
        return math.isclose(expected, got, rel_tol=tolerance.rel, abs_tol=tolerance.abs)
    if te is list:
        return len(expected) == len(got) and all(
            same_value(e, g, tolerance) for e, g in zip(expected, got, strict=True))
    if te is dict:
        return (all(type(k) is str for k in got) and expected.keys() == got.keys()
                and all(same_value(expected[k], got[k], tolerance) for k in expected))
    return False


def not_imported(code: CodeLoads) -> str:
    """Why the run did not judge the code `code` names ('' when it did): a name loaded from
    another file than its own, a name never imported (or, by default, none imported), or no
    report at all."""
    if not code.expected:
        return ""
    if code.loaded is None:
        return "no report of what the tests imported came back"
    for name, want in code.expected.items():
        got = code.loaded.get(name)
        if got is not None and got != want:
            return f"{name} was imported from {got}, not from the judged tree's {want}"
    for module, got in sorted(code.strays.items()):
        return f"{module} was imported from {got}, an installed copy of the judged code"
    never = [name for name in code.expected if code.loaded.get(name) is None]
    if code.each and never:
        return f"{never[0]} was never imported"
    if len(never) == len(code.expected):
        return f"none of {', '.join(code.expected)} was imported"
    return ""


def rule_on_cases(expected: Mapping[Hashable, Any], reports: Mapping[Hashable, CaseReport],
                  tolerance: Tolerance | None = None,
                  canaries: Mapping[Hashable, Any] | None = None,
                  code: CodeLoads | None = None) -> CaseRuling:
    """The ruling on one judged tree: `expected` maps each case to its expected value,
    `canaries` each planted case to the outcome it was planted with, `reports` whatever came
    back (a case missing from it had no result), `code` where the judged code had to come
    from (None: the kind does not name it)."""
    canaries = canaries or {}
    forged = tuple(k for k, planted in canaries.items()
                   if isinstance(reports.get(k), Returned)
                   and not same_value(planted, reports[k].value))  # type: ignore[union-attr]  # Returned, checked above
    if forged:
        return CaseRuling(FORGED, forged=forged)
    failing = tuple(k for k, want in expected.items()
                    if not isinstance(got := reports.get(k), Returned)
                    or not same_value(want, got.value, tolerance))
    missing_canary = tuple(k for k in canaries if not isinstance(reports.get(k), Returned))
    unasked = tuple(k for k in reports if k not in expected and k not in canaries)
    failed = bool(failing or missing_canary or unasked)
    why = not_imported(code) if code is not None else ""
    # a run that failed and said nothing of its imports (it died) is a failure; one that says
    # it judged other code than the tree's is vacuous whatever its cases did
    if why and not (failed and code is not None and code.loaded is None):
        return CaseRuling(VACUOUS, vacuous=why)
    if failed:
        return CaseRuling(FAILED, failing=failing + missing_canary, unasked=unasked)
    return CaseRuling(PASSED)
