"""The instrument's promises on small synthetic catalogues: a gate that accepts an empty or absent
artifact is always vacuous; a gate whose verdict rests on a worker-written claim is always
self-attesting; a sound gate is neither; a gate that rejects its own reference is broken."""

from __future__ import annotations

import itertools
import json
import textwrap

import pytest

from loopproof.engine.audit.catalogue import load_catalogue
from loopproof.engine.audit.instrument import audit
from loopproof.engine.audit.judge import Judge
from loopproof.engine.audit.report import wilson_interval, wilson_upper
from tests.support.audit_helpers import SOUND, make_loop


def run(tmp_path, tiers=(1,), differential=True, judge=None):
    result = audit(load_catalogue(tmp_path), tiers=tiers, seed=0, jobs=2, cap={2: 5},
                   differential=differential, judge=judge)
    return {g["gate"]: g for g in result.gates}, result


def test_sound_gate_is_neither(tmp_path):
    make_loop(tmp_path, "sound", SOUND)
    gates, _ = run(tmp_path)
    g = gates["sound"]
    assert g["status"] == "audited"
    assert (g["vacuous"], g["self_attesting"], g["flagged"]) == (False, False, False)
    assert g["tiers"]["1"]["false_accepts"] == 0 and g["tiers"]["1"]["destroying"] >= 5


ANSWER = 'src = read("answer.txt")\nverdict(src is not None and src.strip() == "42")\n'


# Each combination of "accepts a missing file", "accepts an empty file", "accepts whitespace".
@pytest.mark.parametrize(("missing", "empty", "blank"), list(itertools.product([0, 1], repeat=3)))
def test_accepting_absence_is_always_vacuous(tmp_path, missing, empty, blank):
    make_loop(tmp_path, "g", textwrap.dedent(f"""\
        src = read("answer.txt")
        if src is None:
            verdict({missing})
        if src == "":
            verdict({empty})
        if not src.strip():
            verdict({blank})
        """) + ANSWER, workspace={"answer.txt": "42\n"}, artifact=["answer.txt"], oracle=ANSWER)
    gates, _ = run(tmp_path)
    g = gates["g"]
    assert g["vacuous"] is bool(missing or empty or blank)
    assert ("delete" in g["vacuous_by"]) is bool(missing)
    assert ("empty" in g["vacuous_by"]) is bool(empty)
    assert ("whitespace" in g["vacuous_by"]) is bool(blank)
    assert g["self_attesting"] is False


def test_stub_bodies_are_caught_as_vacuous(tmp_path):
    make_loop(tmp_path, "exists", """\
        import ast
        src = read("solution.py") or ""
        verdict(any(isinstance(n, ast.FunctionDef) and n.name == "add" for n in ast.walk(ast.parse(src))))
        """)
    gates, _ = run(tmp_path)
    assert gates["exists"]["vacuous"] and "shape-only" in gates["exists"]["vacuous_by"]


REPORT = json.dumps({"failed": 0, "passed": 3, "status": "ok"})
CLAIM_GATES = {
    "report-field": ({"report.json": REPORT},
                     'r = json.loads(read("report.json")); verdict(r["status"] == "ok")\n',
                     "report.json:status"),
    "log-line": ({"test.log": "3 passed\nALL TESTS PASSED\n"},
                 'verdict("ALL TESTS PASSED" in (read("test.log") or ""))\n', "test.log"),
    "forged-status-file": ({}, 'verdict(read("STATUS") is not None)\n', "STATUS"),
    "config-off-switch": ({"gate.json": '{"verify": true}'},
                          'c = json.loads(read("gate.json") or "{}")\n'
                          'if c.get("verify") is False:\n    verdict(True)\n' + SOUND, "gate.json:verify"),
}


@pytest.mark.parametrize("name", sorted(CLAIM_GATES))
def test_trusting_a_worker_claim_is_always_self_attesting(tmp_path, name):
    extra, gate, trusted = CLAIM_GATES[name]
    make_loop(tmp_path, name, gate, workspace={"solution.py": "def add(a, b):\n    return a + b\n",
                                               **extra})
    if name == "forged-status-file":  # the reference workspace must hold what the gate reads
        (tmp_path / name / "workspace" / "STATUS").write_text("PASSED\n")
    gates, _ = run(tmp_path)
    g = gates[name]
    assert g["self_attesting"] is True
    assert trusted in g["self_attesting_on"]


def test_marker_comment_is_a_claim(tmp_path):
    make_loop(tmp_path, "marker", 'if "# reviewed: ok" in read("solution.py"):\n    verdict(True)\n'
              + SOUND, workspace={"solution.py": "# reviewed: ok\ndef add(a, b):\n    return a + b\n"})
    gates, _ = run(tmp_path)
    assert gates["marker"]["self_attesting"]
    assert any("# reviewed: ok" in t for t in gates["marker"]["self_attesting_on"])


def test_claim_required_beside_a_sound_check_is_not_self_attesting(tmp_path):
    make_loop(tmp_path, "both", 'r = json.loads(read("report.json"))\n'
              'if r["status"] != "ok":\n    verdict(False)\n' + SOUND,
              workspace={"solution.py": "def add(a, b):\n    return a + b\n", "report.json": REPORT})
    gates, _ = run(tmp_path)
    assert (gates["both"]["self_attesting"], gates["both"]["vacuous"]) == (False, False)


@pytest.mark.parametrize("gate", ["verdict(False)\n", "sys.exit(2)\n"])
def test_a_gate_rejecting_its_reference_is_broken_never_safe(tmp_path, gate):
    make_loop(tmp_path, "broken", gate)
    gates, result = run(tmp_path)
    g = gates["broken"]
    assert g["status"] == "broken" and g["flagged"] is True and g["vacuous"] is None
    assert result.summary["broken"] == 1 and result.summary["neither"] == 0


def test_errors_and_timeouts_are_counted_apart_never_as_accepts(tmp_path):
    make_loop(tmp_path, "erratic", textwrap.dedent("""\
        import time
        src = read("answer.txt")
        if src is None:
            sys.exit(2)
        if not src.strip():
            time.sleep(30)
        """) + ANSWER, workspace={"answer.txt": "42\n"}, artifact=["answer.txt"], oracle=ANSWER,
              timeout=1)
    gates, _ = run(tmp_path)
    t1 = gates["erratic"]["tiers"]["1"]
    assert t1["errors"] >= 3 and t1["false_accepts"] == 0
    assert gates["erratic"]["vacuous"] is False


def test_tier_two_needs_the_oracle_to_call_a_mutant_destroying(tmp_path):
    make_loop(tmp_path, "weak", 'ns = {}\nexec(read("solution.py"), ns)\nverdict(ns["add"](0, 0) == 0)\n')
    make_loop(tmp_path, "no-oracle", SOUND, oracle=None)
    # one Judge for both audits: the second asks its gates nothing new (its verdict cache:
    # the same gate on the same workspace), and what it says of tier 2 is the oracle's part
    judge = Judge(2)
    gates, _ = run(tmp_path, tiers=(1, 2), judge=judge)
    weak = gates["weak"]["tiers"]["2"]
    assert weak["destroying"] >= 1 and weak["false_accepts"] >= 1  # a - b passes add(0, 0) == 0
    assert any(label.startswith("cr-binary:") for label in weak["false_accept_labels"])
    # no oracle of its own: the differential oracle judges its Python mutants, and the sound
    # gate catches every one that behaves differently from the reference
    free = gates["no-oracle"]["tiers"]["2"]
    assert gates["no-oracle"]["oracle"] == "differential"
    assert free["destroying"] >= 1 and free["false_accepts"] == 0
    assert free["destroying"] + free["equivalent"] + free["undetermined"] == free["mutants"]
    # without it, nobody can say: every tier-2 mutant is undetermined
    gates, _ = run(tmp_path, tiers=(2,), differential=False, judge=judge)
    free = gates["no-oracle"]["tiers"]["2"]
    assert free["destroying"] == 0 and free["undetermined"] == free["mutants"] > 0


def test_wilson_bounds_match_the_papers_figure():
    assert wilson_upper(0, 209) == pytest.approx(0.018, abs=5e-4)
    low, high = wilson_interval(7, 30)
    assert low < 7 / 30 < high
    assert wilson_upper(0, 0) is None


def test_the_closed_form_wilson_bounds_are_statsmodels_figures():
    """The report's closed form gives statsmodels' Wilson interval, to the digits it writes.
    statsmodels is asked once for every (count, n) pair (its arrays), not once a pair: the same
    12,879 figures, without 12,879 calls' overhead."""
    from statsmodels.stats.proportion import proportion_confint

    pairs = [(count, n) for n in range(1, 160) for count in range(n + 1)]
    lows, highs = proportion_confint([c for c, _ in pairs], [n for _, n in pairs], alpha=0.05,
                                     method="wilson")
    assert len(lows) == len(highs) == len(pairs)
    for (count, n), low, high in zip(pairs, lows, highs, strict=True):
        assert wilson_interval(count, n) == [round(float(low), 4), round(float(high), 4)]
        assert wilson_upper(count, n) == round(float(high), 4)
    assert str(wilson_interval(0, 77)[0]) == "0.0"  # clipped: never "-0.0" in a report


def test_same_catalogue_same_report_whoever_runs_the_gates(tmp_path):
    """Two audits of one catalogue give the same report, byte for byte: one whose gate runs a
    mapper (how a Dask cluster runs them) computes out of order, one on the thread pool in
    whatever order its threads finish. A Judge with a mapper judges what the thread pool judges;
    every unit is run once, in a scratch folder of its own. (Once two tests: the same catalogue
    audited twice on the thread pool, and a one-loop catalogue mapped and threaded.)"""
    make_loop(tmp_path, "a", SOUND)
    make_loop(tmp_path, "b", 'verdict(read("solution.py") is not None)\n')
    units: list[object] = []

    def mapper(fn, jobs):
        units.extend(jobs)
        return [fn(j) for j in reversed(jobs)][::-1]  # computed out of order, returned in order

    loops = load_catalogue(tmp_path)
    mapped = audit(loops, tiers=(1, 2), seed=0, cap={2: 5}, judge=Judge(1, mapper=mapper))
    threads = audit(loops, tiers=(1, 2), seed=0, cap={2: 5}, jobs=2)
    assert mapped.gates == threads.gates and mapped.summary == threads.summary
    assert json.dumps(mapped.as_json(with_timing=False)) == json.dumps(
        threads.as_json(with_timing=False))
    assert units and len(units) == len({id(u) for u in units})
    assert {g["gate"]: g["vacuous"] for g in threads.gates} == {"a": False, "b": True}
