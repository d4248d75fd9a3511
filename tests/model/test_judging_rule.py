"""The judge's rule (model/judging.py) and the engine that asks it (engine/run/judge/).

The differential test draws expected JSON values and what the judged code returned for each case:
the value itself, look-alikes that Python's `==` takes for it (1.0 and True for 1, a tuple for
a list, subclasses, an object equal to everything, NaN), other values, a raise, no result; and,
sometimes, lines the judged code forged on the results channel. The engine's path (the harness's
encoder, the strict wire reader, the decision) must accept exactly when the rule, applied to
what really came back, says PASS. Each planted fault of that path is caught by the same test.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from loopproof.engine.run.judge import calls_harness as harness
from loopproof.engine.run.judge import decide as decide_mod
from loopproof.engine.run.judge import wire
from loopproof.engine.run.judge.decide import decide
from loopproof.engine.run.judge.wire import NotStrict, read_stream, strict_json
from loopproof.model import judging as mj
from loopproof.model.judging import NoResult, Returned, Tolerance, rule_on_cases, same_value

MISSING, RAISED = object(), object()


class IntSub(int):
    pass


class FloatSub(float):
    pass


class StrSub(str):
    pass


class ListSub(list):
    def __eq__(self, other: object) -> bool:
        return True


class DictSub(dict):
    pass


class AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


BASE = st.sampled_from([None, True, False, 0, 1, -2, 0.0, 0.5, 1.0, -1.5, 1e-13, "", "a", "ab"])
JSON = st.one_of(BASE, st.lists(BASE, max_size=2),
                 st.dictionaries(st.sampled_from(["a", "b"]), BASE, max_size=2))


def lookalikes(v: object) -> list[object]:
    """What the judged code might hand back for expected `v` that `==` would take for it."""
    out: list[object] = [AlwaysEqual(), MISSING, RAISED, math.nan]
    t = type(v)
    if t is bool:
        out += [int(v), float(v)]
    elif t is int:
        out += [float(v), IntSub(v)] + ([bool(v)] if v in (0, 1) else [])
    elif t is float:
        out += [FloatSub(v), v + 1e-13] + ([int(v)] if v.is_integer() else [])
    elif t is str:
        out += [StrSub(v)]
    elif t is list:
        out += [tuple(v), ListSub(v), ListSub()]
    elif t is dict:
        out += [DictSub(v), list(v.items())]
    return out


@st.composite
def judged(draw: st.DrawFn) -> tuple[list, list, bytes, Tolerance | None]:
    expected = draw(st.lists(JSON, min_size=1, max_size=3))
    got = list(expected)  # one case differs, or none: so look-alikes decide the verdict
    j = draw(st.integers(0, len(expected) - 1))
    got[j] = draw(st.sampled_from([got[j], *lookalikes(got[j])]) if draw(st.integers(0, 3))
                  else JSON)
    forged = b""
    if draw(st.integers(0, 5)) == 0:  # the judged code writes on the results channel
        i = draw(st.integers(0, len(expected) - 1))
        forged = draw(st.sampled_from([
            json.dumps({"case": i, "value": expected[i]}).encode(),  # a case twice
            json.dumps({"case": len(expected), "value": 1}).encode(),  # a case never asked
            b'{"case": 0, "value": NaN}', b'{"case": 0, "case": 0, "value": 1}', b"ok",
            b'{"case": 0, "value": 1, "extra": 2}', b"[0, 1]"])) + b"\n"
    tolerance = draw(st.sampled_from([None, Tolerance()]))
    return expected, got, forged, tolerance


def harness_bytes(got: list, forged: bytes, encode=harness.encode) -> bytes:
    """What the harness writes on its results channel for these returns (forged lines first,
    as the judged code would write them before the harness reports)."""
    out = [forged] if forged else []
    for i, r in enumerate(got):
        if r is RAISED:
            out.append(encode(i, raised="ValueError: planted"))
        elif r is not MISSING:
            out.append(encode(i, r))
    return b"".join(out)


def engine_accepts(expected: list, got: list, forged: bytes, tolerance: Tolerance | None, *,
                   encode=harness.encode, read=read_stream) -> bool:
    stream = read(harness_bytes(got, forged, encode), range(len(expected)))
    reports = {i: stream.reports.get(i, NoResult("no result")) for i in range(len(expected))}
    verdict, _, _ = decide("calls", dict(enumerate(expected)), reports,
                           {i: f"line {i + 1}" for i in range(len(expected))}, tolerance=tolerance)
    return verdict == "accept"


def rule_says(expected: list, got: list, forged: bytes, tolerance: Tolerance | None) -> bool:
    """The rule on what really came back: a forged line spoils the whole channel."""
    if forged:
        return False
    truth = {i: Returned(r) if mj.is_json_value(r) else NoResult("not plain")
             for i, r in enumerate(got) if r is not MISSING and r is not RAISED}
    return rule_on_cases(dict(enumerate(expected)), truth, tolerance).passed


def agree(case: tuple, **engine: object) -> None:
    expected, got, forged, tolerance = case
    assert engine_accepts(expected, got, forged, tolerance, **engine) == rule_says(*case), case


@settings(max_examples=200)
@given(judged())
def test_the_engine_accepts_exactly_what_the_rule_accepts(case) -> None:
    agree(case)


# ---- planted faults: each must make the differential test fail --------------------------------

def _lenient_encode(case, value=None, raised=None, dumps=json.dumps):
    """Fault: the harness sends whatever json.dumps makes of a value (a tuple as a list, an int
    subclass as an int)."""
    if raised is not None:
        return harness.encode(case, raised=raised)
    try:
        return (json.dumps({"case": case, "value": value}) + "\n").encode()
    except (TypeError, ValueError):
        return harness.encode(case, raised="planted")


def _last_wins(data: bytes, asked) -> wire.Stream:
    """Fault: a case reported twice keeps its last line."""
    reports = {}
    for line in data.splitlines():
        try:
            row = json.loads(line)
            reports[row["case"]] = Returned(row["value"]) if "value" in row else NoResult("r")
        except (ValueError, KeyError, TypeError):
            continue
    return wire.Stream({k: v for k, v in reports.items() if k in set(asked)})


def _rule_by_eq(expected, reports, tolerance=None, canaries=None, code=None):
    """Fault: the engine compares with Python's ==."""
    failing = tuple(k for k, want in expected.items()
                    if not isinstance(reports.get(k), Returned) or not reports[k].value == want)  # noqa: SIM201
    return mj.CaseRuling(mj.FAILED, failing=failing) if failing else mj.CaseRuling(mj.PASSED)


def _missing_passes(expected, reports, tolerance=None, canaries=None, code=None):
    """Fault: a case with no result does not count against the tree."""
    kept = {k: v for k, v in reports.items() if isinstance(v, Returned)}
    return rule_on_cases({k: v for k, v in expected.items() if k in kept}, kept, tolerance,
                         canaries, code)


FAULTS = {
    "harness sends json.dumps of anything": dict(encode=_lenient_encode),
    "a case reported twice keeps its last line": dict(read=_last_wins),
    "the engine compares with ==": _rule_by_eq,
    "a case with no result is left out": _missing_passes,
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_planted_fault_is_caught(fault, monkeypatch) -> None:
    planted = FAULTS[fault]
    engine: dict = {}
    if callable(planted):  # a fault in the engine's ruling (the truth keeps the real rule)
        monkeypatch.setattr(decide_mod, "rule_on_cases", planted)
    else:
        engine = dict(planted)

    @settings(max_examples=200, database=None, phases=(Phase.generate,))
    @given(judged())
    def differential(case) -> None:
        agree(case, **engine)

    with pytest.raises(AssertionError):
        differential()


# ---- the rule itself ---------------------------------------------------------------------------

def test_same_value_is_by_type_and_value() -> None:
    assert same_value([1, {"a": 0.5}], [1, {"a": 0.5}])
    for a, b in [(1, 1.0), (1, True), (0, False), ([1], (1,)), ({"a": 1}, {"a": 1.0}),
                 ("a", StrSub("a")), (1, IntSub(1)), ([], ListSub()), (None, AlwaysEqual())]:
        assert not same_value(a, b) and not same_value(b, a), (a, b)
    assert not same_value(0.1 + 0.2, 0.3) and same_value(0.1 + 0.2, 0.3, Tolerance())
    assert not same_value(1, 1.0, Tolerance())  # a tolerance never lets a type differ
    assert not same_value(math.nan, math.nan, Tolerance())


def test_a_forged_canary_is_never_a_pass_and_everything_must_be_present() -> None:
    want = {"t1": "passed", "t2": "passed"}
    canaries = {"must-fail": "failed", "must-pass": "passed"}
    honest = {"t1": Returned("passed"), "t2": Returned("passed"),
              "must-fail": Returned("failed"), "must-pass": Returned("passed")}
    assert rule_on_cases(want, honest, canaries=canaries).passed
    forged = {**honest, "must-fail": Returned("passed")}
    assert rule_on_cases(want, forged, canaries=canaries).ruling == mj.FORGED
    for k in honest:
        lost = {j: v for j, v in honest.items() if j != k}
        assert rule_on_cases(want, lost, canaries=canaries).ruling == mj.FAILED, k
    extra = {**honest, "t3": Returned("passed")}
    assert rule_on_cases(want, extra, canaries=canaries).ruling == mj.FAILED
    skipped = {**honest, "t2": Returned("skipped")}
    assert rule_on_cases(want, skipped, canaries=canaries).failing == ("t2",)


def test_the_engine_asks_the_rule(monkeypatch) -> None:
    """decide's verdict is the rule's ruling: a planted rule changes the engine's verdict."""
    args = ({0: 1}, {0: Returned(2)}, {0: "line 1"})
    assert decide("calls", *args)[0] == "reject"
    monkeypatch.setattr(decide_mod, "rule_on_cases", lambda *a, **k: mj.CaseRuling(mj.PASSED))
    assert decide("calls", *args)[0] == "accept"
    monkeypatch.setattr(decide_mod, "rule_on_cases",
                        lambda *a, **k: mj.CaseRuling(mj.FORGED, forged=(0,)))
    verdict, detail, facts = decide("calls", *args)
    assert verdict == "error" and "report forged" in detail and facts["error"] == "report forged"


@pytest.mark.parametrize("line", [b'{"a": NaN}', b'{"a": Infinity}', b'{"a": -Infinity}',
                                  b'{"a": 1, "a": 2}', b"[" * 70 + b"]" * 70, b"\xff",
                                  b"1" * 5000, b" " * (wire.MAX_LINE + 1)])
def test_the_wire_refuses_what_is_not_strict_json(line: bytes) -> None:
    with pytest.raises(NotStrict):
        strict_json(line)
