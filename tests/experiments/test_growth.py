"""The growth loop (experiments/growth): its guards, its accounting and its studies' checks, each
tested the way an adversary would try to slip past it, and each planted fault shown caught."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.growth import audit, calibration, catalogue, guards, matrices, sim, utility
from experiments.growth.folder import EVALUATION, LEDGER, prepare, read_records
from experiments.growth.loop import GrowthLoop, run_to_end
from experiments.growth.progress import Arm
from experiments.results import csv_text
from tests.support.paths import REPO


def full_run(tmp_path: Path, seed: int = 0, budget: float = 160.0, **kw) -> list[dict]:
    code = run_to_end(tmp_path / "run", seed=seed, budget=budget, **kw)
    assert code in (0, 3)
    return read_records(tmp_path / "run")


# ---- the simulator ----------------------------------------------------------------------------

def test_evaluation_is_deterministic_and_has_the_papers_shape() -> None:
    config = catalogue.CATALOG.defaults()
    a = sim.evaluate(3, 2, config, 40.0)
    assert a == sim.evaluate(3, 2, config, 40.0)
    assert a.episodes == 1000 and len(a.successes) == 5
    assert a != sim.evaluate(3, 3, config, 40.0)  # another evaluation draws other episodes


def test_calibration_round_growth_reaches_the_target_at_the_sixth_or_seventh_evaluation() -> None:
    t = calibration.table()
    assert t[4]["p_meets_target"] < 0.01                 # fifth evaluation: well below
    assert 0.3 < t[5]["p_meets_target"] < 0.95           # sixth: just above the target
    assert t[6]["p_meets_target"] > 0.999                # seventh: well above
    assert max(r["expected_rate_no_growth"] for r in t) < sim.TARGET - 0.2  # never without


# ---- the loop's guards ------------------------------------------------------------------------

def test_every_unit_of_work_is_reserved_before_it_runs_and_no_prefix_overspends(tmp_path) -> None:
    records = full_run(tmp_path)
    acc = audit.accounting(records)
    assert audit.within_policy(acc), acc
    kinds = [r["type"] for r in records]
    for i, r in enumerate(records):
        if r["type"] in ("tick", "evaluation"):
            last = max(j for j in range(i) if kinds[j] in ("reserve", "settle"))
            assert kinds[last] == "reserve", (i, r)


def test_training_cannot_eat_the_evaluation_reserve(tmp_path, monkeypatch) -> None:
    """A loop that plans training as if the evaluation were free: the meter, holding the
    evaluation's cost back from every training reservation, refuses the stage before it runs
    (a `worker_ceiling` record), so no evaluation is ever left unpaid (no `overrun`)."""
    def greedy(self):
        return (self.budget - self.state.settled) / self.view.resources.price

    monkeypatch.setattr(GrowthLoop, "_affordable_work", greedy)
    code = run_to_end(tmp_path / "run", seed=0, budget=16.0)  # a full round leaves no 0.2
    records = read_records(tmp_path / "run")
    kinds = [r["type"] for r in records]
    assert code == 7 and "worker_ceiling" in kinds and "overrun" not in kinds
    assert audit.accounting(records)["max_prefix_excess"] <= audit.TOLERANCE


def test_round_changes_commit_in_one_record_and_idle_in_one(tmp_path) -> None:
    records = full_run(tmp_path)
    rounds = [r for r in records if r["type"] == "stage_done"]
    idles = [r for r in records if r["type"] == "idle_finished"]
    assert rounds and all(len(r["applied"]) <= 2 for r in rounds)
    assert len(idles) == 1 and len(idles[0]["applied"]) <= 1
    assert len({r["round"] for r in rounds}) == len(rounds)  # one commit per round


def test_agent_proposals_are_inert_records(tmp_path) -> None:
    def planner(context):
        reply = catalogue.plan(context)
        reply["agents"] = [{"id": "grasp_specialist", "rationale": "try it"}]
        return reply

    records = full_run(tmp_path, planner=planner)
    props = [r for r in records if r["type"] == "agent_proposal"]
    assert props and all(p["executable"] is False and p["status"] == "pending" for p in props)
    assert {r["type"] for r in records} <= {"run", "begin", "round", "reserve", "tick", "settle",
                                            "evaluation", "planner_call", "agent_proposal",
                                            "stage_done", "idle_finished", "verdict", "finish",
                                            "fail", "evolution_rejected"}


def test_the_pinned_evaluation_is_checked_before_every_stage(tmp_path) -> None:
    folder = tmp_path / "run"
    prepare(folder, 20.0)

    def tamper(loop, where):
        if loop.boundaries == 4:  # a worker (or the planner) edits the evaluation's target
            p = folder / EVALUATION
            p.write_text(p.read_text().replace('"target": 0.8', '"target": 0.1'))

    code = GrowthLoop.start(folder, seed=0, on_boundary=tamper).run()
    records = read_records(folder)
    assert code == 5 and records[-1]["type"] == "pin_changed"
    assert "gate.files" in records[-1]["error"]
    # nothing ran after the change was seen: the record before it is the third stage's settle
    assert records[-2]["type"] == "settle"


def test_a_stop_request_is_honoured_at_the_boundary_and_resume_continues(tmp_path) -> None:
    rows = guards.kill_switch(tmp_path, [0])
    assert rows and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]
    assert {r["where"] for r in rows} >= {"round", "train", "evaluation", "plan", "idle", "end"}


def test_resume_refuses_a_ledger_of_another_catalogue(tmp_path) -> None:
    """A whole, correctly chained ledger written under another catalogue (its digest differs):
    resume must refuse it rather than replay features whose effects it does not know."""
    from loopproof.engine.record.ledger import CHAIN_FIELDS, Ledger
    folder = tmp_path / "run"
    prepare(folder, 20.0)
    GrowthLoop.start(folder, seed=0).ledger.close()  # record 0 only
    records = read_records(folder)
    first = {k: v for k, v in records[0].items() if k not in CHAIN_FIELDS}
    first["growth"] = dict(first["growth"], catalogue="0" * 64)
    (folder / LEDGER).unlink()
    Ledger.create(folder / LEDGER, first).close()
    proc = subprocess.run([sys.executable, "-m", "experiments.growth.child", "resume",
                           str(folder)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 5 and "not a growth run of this catalogue" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_resume_of_a_missing_run_is_one_line_exit_2(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "experiments.growth.child", "resume",
                           str(tmp_path / "nothing")], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "file not found" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


# ---- the independent audit --------------------------------------------------------------------

def test_the_prefix_check_sees_an_overspending_prefix_the_total_hides(tmp_path) -> None:
    records = full_run(tmp_path, budget=20.0)
    assert audit.accounting(records)["max_prefix_excess"] <= audit.TOLERANCE
    forged = [dict(r) for r in records]
    i = next(i for i, r in enumerate(forged) if r["type"] == "reserve")
    forged[i]["amount"] = 25.0  # held more than B for a moment; every settlement unchanged
    acc = audit.accounting(forged)
    assert acc["max_prefix_excess"] > 1 and acc["terminal"] <= 20.0
    assert not audit.within_policy(acc)


def test_a_settlement_that_does_not_match_its_ticks_is_unreconciled(tmp_path) -> None:
    forged = [dict(r) for r in full_run(tmp_path, budget=20.0)]
    i = next(i for i, r in enumerate(forged) if r["type"] == "tick")
    forged[i]["charge"] = forged[i]["charge"] + 1e-6
    assert audit.accounting(forged)["reconciliation_error"] > audit.TOLERANCE


# ---- the studies' numbers ---------------------------------------------------------------------

def test_growth_contrasts_on_a_few_seeds(tmp_path) -> None:
    rows = utility.growth_study([0, 1, 2, 3], tmp_path)
    c = utility.contrasts(rows, 0)
    assert c["round_attainment"]["difference"] == 1.0
    assert c["round_to_target"]["difference"] < -40
    lo, hi = c["round_to_target"]["ci95"]
    assert lo <= c["round_to_target"]["difference"] <= hi
    for name in ("idle_attainment", "idle_to_target", "interaction_attainment",
                 "interaction_to_target"):
        assert c[name]["difference"] == 0.0, name
    assert all(r["within_policy"] for r in rows)


def test_same_seed_same_bytes_in_process_parts(tmp_path) -> None:
    def once(sub: str) -> list[str]:
        root = tmp_path / sub
        arms = utility.growth_study([5, 6], root)
        guard = guards.output_guard(root, [5], names=("over_limit", "policy_budget"))
        return [csv_text(arms, list(arms[0])), csv_text(guard, list(guard[0])),
                json.dumps(utility.contrasts(arms, 5), sort_keys=True)]
    assert once("a") == once("b")


def test_output_guard_rejects_and_records_every_hostile_reply(tmp_path) -> None:
    rows = guards.output_guard(tmp_path, [1])
    assert {r["hostile"] for r in rows} == set(guards.HOSTILE)
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]


@pytest.fixture(scope="module")
def base_seed0(tmp_path_factory: pytest.TempPathFactory) -> matrices.Baseline:
    """The uncrashed run of seed 0 the crash cases compare with (a frozen record of it: the
    cases below read it, each in its own folder)."""
    return matrices.baseline(tmp_path_factory.mktemp("growth-baseline"), 0)


def test_crash_matrix_separates_outcome_trace_and_repeated_calls(tmp_path, base_seed0) -> None:
    base = base_seed0
    pre = matrices.crash_case(tmp_path, base, "growth.after_plan", 1, "")
    mid = matrices.crash_case(tmp_path, base, "meter.before_settle", 1, "")
    between = matrices.crash_case(tmp_path, base, "growth.before_round", 2, "")
    assert all(r["outcome_recovered"] and r["within_policy"] for r in (pre, mid, between))
    assert pre["repeated_planner_calls"] == 1 and not pre["trace_identical"]
    assert mid["repeated_planner_calls"] == 0 and not mid["trace_identical"]
    assert between["trace_identical"] and between["repeated_planner_calls"] == 0


# ---- a planted fault per matrix is reported, never hidden ---------------------------------------

def test_planted_unreserved_stage_is_reported(tmp_path) -> None:
    clean = utility.one_run(tmp_path, 0, Arm(), 160.0)
    bad = utility.one_run(tmp_path, 0, Arm(), 160.0, faults=("unreserved_stage",))
    assert clean["within_policy"] and clean["unreserved_units"] == 0
    assert not bad["within_policy"] and bad["unreserved_units"] > 0
    assert bad["reconciliation_error"] > audit.TOLERANCE


def test_planted_policy_write_is_reported(tmp_path) -> None:
    clean = guards.guard_case(tmp_path, 0, "policy_budget", "round")
    bad = guards.guard_case(tmp_path, 0, "policy_budget", "round", faults=("policy_write",))
    assert clean["ok"] and clean["policy_unchanged"]
    assert not bad["ok"] and not bad["policy_unchanged"] and bad["exit_code"] == 5


def test_planted_skip_repricing_is_reported(tmp_path) -> None:
    clean = matrices.drift_run(tmp_path, 0, "price")
    bad = matrices.drift_run(tmp_path, 0, "price", faults=("skip_repricing",))
    assert clean["ok"] and clean["repriced"] and clean["mispriced_ticks"] == 0
    assert not bad["ok"] and bad["mispriced_ticks"] > 0


def test_planted_config_amnesia_is_reported_by_the_crash_matrix(tmp_path, base_seed0) -> None:
    base = base_seed0
    clean = matrices.crash_case(tmp_path, base, "growth.after_commit", 1, "")
    bad = matrices.crash_case(tmp_path, base, "growth.after_commit", 1, "",
                              faults=("no_config_replay",))
    assert clean["outcome_recovered"]
    assert not bad["outcome_recovered"] and "config" in bad["mismatch"]


def test_planted_ignored_stop_is_reported(tmp_path) -> None:
    rows = guards.kill_switch(tmp_path, [0], faults=("ignore_stop",))
    assert any(not r["stopped_at_request"] for r in rows)


def test_unknown_fault_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        run_to_end(tmp_path / "run", seed=0, budget=20.0, faults=("typo",))
