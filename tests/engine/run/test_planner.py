"""A run's `[planner]` may only name entries of the code-owned catalogue (engine/policy/evolution.py):
an unknown entry, an out-of-range knob and a policy field are rejected and recorded and change
nothing; an accepted change (a lower worker timeout) takes effect and survives a crash and
resume."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load
from loopproof.engine.system.errors import BadInput
from tests.support.engine_child import engine_run
from tests.support.oracles import records

# Every round the planner asks to halve b's timeout, names an entry that does not exist and
# tries to raise the budget. Round 0 (a DONE): the halving is accepted; round 1 (b DONE): a
# second halving would leave [timeout/2, timeout], so it is out of range.
PLANNER = """import json, sys
ctx = json.load(sys.stdin)
open("ctx.json", "w").write(json.dumps(ctx))  # its scratch folder, not a workspace
print(json.dumps({"features": [{"id": "tighten_timeout.b"}, {"id": "turbo"}],
                  "spend_budget": 1000}))
"""

GRAPH = """
[graph]
spend_budget = 100.0
{planner}

[node.a]
worker = ["sh", "-c", "echo x > out"]
gate = ["true"]
spend_ceiling = 20.0
timeout_s = 8

[node.b]
worker = ["sh", "-c", "cat inputs/a/out > got"]
gate = ["true"]
needs = ["a"]
spend_ceiling = 20.0
timeout_s = 8
"""


def write(tmp_path: Path, planner: bool = True) -> Path:
    (tmp_path / "plan.py").write_text(PLANNER)
    table = '[planner]\ncommand = ["python3", "plan.py"]\ntimeout_s = 20' if planner else ""
    spec = tmp_path / "graph.toml"
    spec.write_text(GRAPH.format(planner=table))
    return spec


def worker_reservations(recs: list[dict]) -> dict[str, float]:
    return {r["node"]: r["amount"] for r in recs
            if r["type"] == "reserve" and r["what"] == "wall_clock"}


def run(spec: Path, ledger: Path) -> int:
    runner = Runner.start(load(spec), ledger)
    code = runner.run()
    runner.close()
    return code


def test_rejections_are_recorded_and_change_nothing_an_accepted_change_applies(
        tmp_path: Path) -> None:
    ledger = tmp_path / "L.jsonl"
    assert run(write(tmp_path), ledger) == 0
    recs = records(ledger)
    stages = [r for r in recs if r["type"] == "stage_done"]
    assert [s["applied"] for s in stages] == [["tighten_timeout.b"], []]
    assert stages[-1]["config"] == {"timeout_s.a": 8.0, "timeout_s.b": 4.0}
    rejected = {(r["round"], r["reason"], r["entry"]) for r in recs
                if r["type"] == "evolution_rejected"}
    assert rejected == {(0, "unknown_entry", "turbo"), (0, "policy_field", "spend_budget"),
                        (1, "unknown_entry", "turbo"), (1, "policy_field", "spend_budget"),
                        (1, "out_of_range", "tighten_timeout.b")}
    # a's worker ran before any stage; b's worker ran at the halved timeout
    assert worker_reservations(recs) == {"a": 8.0, "b": 4.0}
    assert recs[-1]["type"] == "finish" and recs[0]["graph"]["spend_budget"] == 100.0
    # the outcome is the one a run without a planner reaches
    plain = tmp_path / "plain"
    plain.mkdir()
    assert run(write(plain, planner=False), plain / "L.jsonl") == 0
    strip = [(r["type"], r.get("node"), r.get("verdict")) for r in recs
             if r["type"] in ("begin", "verdict", "finish")]
    assert strip == [(r["type"], r.get("node"), r.get("verdict"))
                     for r in records(plain / "L.jsonl")
                     if r["type"] in ("begin", "verdict", "finish")]


@pytest.mark.parametrize("crash_at", ["runner.before_begin:2", "runner.after_verdict:1"])
def test_an_accepted_change_survives_a_crash_and_resume(tmp_path: Path, crash_at: str) -> None:
    """before_begin:2 dies after round 0 committed; after_verdict:1 dies before it ran, so
    resume runs the owed round first."""
    ledger = tmp_path / "L.jsonl"
    child = engine_run(["run", str(write(tmp_path)), str(ledger)], crash_at=crash_at)
    assert child.returncode == -signal.SIGKILL, child.stderr
    runner = Runner.resume(ledger)
    assert runner.continue_run() == 0
    runner.close()
    recs = records(ledger)
    assert [s["applied"] for s in recs if s["type"] == "stage_done"] == [
        ["tighten_timeout.b"], []]
    assert worker_reservations(recs)["b"] == 4.0


def test_a_bad_planner_table_is_bad_input(tmp_path: Path) -> None:
    spec = tmp_path / "graph.toml"
    spec.write_text(GRAPH.format(planner='[planner]\ncommand = "plan.py"'))
    with pytest.raises(BadInput, match=r"\[planner\] command"):
        load(spec)
