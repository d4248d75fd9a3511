"""The crash experiment: a smoke run with real SIGKILLs, its notebook, and the checks it rests on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.crash import cases, observables
from experiments.crash import graph as crashgraph
from experiments.crash import sites as crash_sites
from experiments.crash import study as crash
from tests.support.notebooks import execute_notebook


def test_smoke_run_recovers_every_outcome_and_counts_repeats(tmp_path: Path, capsys) -> None:
    # in process: the SIGKILLs are dealt to the study's own children, not to this one
    out = tmp_path / "crash"
    assert crash.main(["--scale", "smoke", "--seed", "0", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cases"] == 3
    assert summary["outcome_recovered"] == 3
    assert summary["budget_violations"] == 0 and summary["lost_verdicts"] == 0
    # A crash between the passing worker call and its record is re-run (repeated, counted) and
    # leaves an `abandon` in the trace; the torn final write is cut and leaves the trace intact.
    assert summary["repeated_calls"] == 2
    assert summary["trace_identical"] == 1
    rows = {r["case"]: r for r in crash.load_results(out)["rows"]}
    torn = next(r for c, r in rows.items() if "torn_write" in c)
    assert torn["trace_identical"] == 1 and torn["repeated_calls"] == 0
    killed_resume = next(r for c, r in rows.items() if r["resume_site"])
    assert killed_resume["resumes"] == 2 and killed_resume["outcome_recovered"] == 1
    text = (out / "cases.csv").read_text() + (out / "summary.json").read_text()
    assert "seconds" not in text and str(tmp_path) not in text

    execute_notebook("crash", tmp_path)
    figure = out / "crash.png"
    assert figure.is_file() and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_case_plan_reaches_the_paper_sizes() -> None:
    # occurrence counts as the uncrashed crash graph reaches them (43 records, 8 attempts, 1 repair)
    counts = {"ledger.before_append": 43, "ledger.torn_write": 43, "ledger.after_append": 43,
              "meter.after_reserve": 8, "meter.before_settle": 8, "runner.before_begin": 8,
              "runner.before_worker": 8, "runner.after_worker": 8, "runner.before_verdict": 8,
              "runner.after_verdict": 8, "runner.repair": 1}
    sites = crash_sites.engine_sites()
    assert set(sites) == set(counts), "a new engine crash site needs an occurrence count here"

    def total(scale: str) -> int:
        sc = crash_sites.SCALES[scale]
        return sum(len(cases.plan(cases.Baseline(s, counts, 8, 0, {}, []), sc, sc.sites or sites))
                   for s in range(sc.seeds))

    assert total("default") >= 48
    assert total("paper") >= 240
    assert 1 <= total("smoke") <= 5


def test_spread_covers_first_and_last_occurrence() -> None:
    assert cases.spread(43, 2) == [1, 43]
    assert cases.spread(8, 3) == [1, 5, 8]  # round-half-even puts the middle at 5
    assert cases.spread(1, 2) == [1]
    assert cases.spread(8, 1) == [8]
    assert cases.spread(0, 2) == []


def _run_record(budget: float) -> dict:
    return {"type": "run", "graph": {"spend_budget": budget}}


def test_prefix_check_finds_an_overspent_prefix() -> None:
    ok = [_run_record(10.0), {"type": "reserve", "amount": 6.0},
          {"type": "settle", "amount": 2.0, "reserved": 6.0},
          {"type": "reserve", "amount": 8.0}, {"type": "abandon", "charged": 8.0}]
    assert observables.prefix_excess(ok) <= 0
    # the final total is within budget, but one prefix was not: reserved on top of settled
    bad = [_run_record(10.0), {"type": "reserve", "amount": 6.0},
           {"type": "settle", "amount": 5.0, "reserved": 6.0},
           {"type": "reserve", "amount": 6.0}, {"type": "settle", "amount": 1.0, "reserved": 6.0}]
    assert observables.prefix_excess(bad) == pytest.approx(1.0)


def test_normalized_trace_drops_only_volatile_fields_and_bookkeeping() -> None:
    root = "/tmp/case-7"
    a = [{"type": "begin", "node": "x", "attempt": 1, "seq": 1, "hash": "aa", "prev": "00"},
         {"type": "settle", "what": "wall_clock", "amount": 0.021, "reserved": 10.0,
          "seconds": 0.021},
         {"type": "claim", "claims": {"argv": [f"{root}/calls.txt"], "seconds": 0.02}},
         {"type": "finish", "settled": 0.3}]
    b = [{"type": "begin", "node": "x", "attempt": 1, "seq": 1, "hash": "bb", "prev": "11"},
         {"type": "resumed", "resume": 1},
         {"type": "settle", "what": "wall_clock", "amount": 0.5, "reserved": 10.0,
          "seconds": 0.5},
         {"type": "claim", "claims": {"argv": ["/tmp/case-9/calls.txt"], "seconds": 0.4}},
         {"type": "finish", "settled": 0.9}]
    assert observables.normalized_trace(a, root) == observables.normalized_trace(b, "/tmp/case-9")
    # a decision that differs (the attempt number, a charged price, an abandon) is kept
    c = [dict(a[0], attempt=2), *a[1:]]
    assert observables.normalized_trace(c, root) != observables.normalized_trace(a, root)
    d = [a[0], dict(a[1], what="price"), *a[2:]]
    assert observables.normalized_trace(d, root) != observables.normalized_trace(a, root)
    e = [a[0], {"type": "abandon", "node": "x"}, *a[1:]]
    assert observables.normalized_trace(e, root) != observables.normalized_trace(a, root)


def test_crash_graph_workers_are_deterministic_and_count_calls(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    ws = tmp_path / "ws"
    ws.mkdir()
    outs = []
    for _ in range(2):
        env = {"LOOPPROOF_ACTIVATION": "1", "LOOPPROOF_ATTEMPT": "1", "PATH": "/usr/bin:/bin"}
        subprocess.run([sys.executable, "-S", str(crashgraph.WORKER), "5", "check", "1:1",
                        str(calls)], cwd=ws, env=env, check=True)
        outs.append((ws / "check.txt").read_text())
        gate = subprocess.run([sys.executable, "-S", str(crashgraph.GATE), "5", "check"], cwd=ws)
        assert gate.returncode == 0
    assert outs[0] == outs[1]
    assert calls.read_text().splitlines() == ["check 1 1", "check 1 1"]
    env = {"LOOPPROOF_ACTIVATION": "0", "LOOPPROOF_ATTEMPT": "3", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-S", str(crashgraph.WORKER), "5", "check", "1:1",
                    str(calls)], cwd=ws, env=env, check=True)
    assert subprocess.run([sys.executable, "-S", str(crashgraph.GATE), "5", "check"],
                          cwd=ws).returncode == 1


def test_a_sigkill_with_two_attempts_in_flight_recovers_both(tmp_path: Path) -> None:
    """The wide crash graph (two builds in flight at once): the baseline sees both in flight at
    a worker's return, and a real SIGKILL there leaves two attempts open; resume gives back each
    (two abandons), re-runs both, and ends as the uncrashed run did, within B at every prefix."""
    base = cases.run_baseline(0, tmp_path, 2)
    assert max(base.flying["runner.after_worker"]) == 2, base.flying
    planned = {c.site: c for c in cases.plan(base, crash_sites.SCALES["default"],
                                             crash_sites.engine_sites())}
    assert set(planned) == set(crash_sites.engine_sites()), (planned, base.flying)
    row = cases.run_case(planned["runner.after_worker"], tmp_path, base)
    assert row.crashed and row.in_flight == 2 and row.abandoned == 2, row
    assert row.outcome_recovered and row.budget_ok and row.lost_verdicts == 0, row
    assert row.repeated_calls == 2, row  # both had called: both re-run, counted
