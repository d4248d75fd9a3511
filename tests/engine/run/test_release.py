"""The pinned policy's release conditions are enforced: a run whose nodes are all DONE but whose
conditions do not hold does not end DONE (a `release_unmet` record, exit 3, no `finish`);
resumed once they hold, it finishes DONE."""

from __future__ import annotations

import json
from pathlib import Path

from loopproof.engine import cli
from loopproof.engine.run.runner import Runner
from tests.support.oracles import records
from tests.support.specs import command_node, write_spec

POLICY = """
[policy]
goals = ["every node DONE with a PASS verdict"]
scope = ["."]
[gate]
files = ["check.sh"]
[budget]
spend = 60.0
repairs = 0
[release]
conditions = {conditions}
{extra}
"""


def graph(tmp_path: Path, conditions: list[str], extra: str = "") -> Path:
    (tmp_path / "check.sh").write_text("test -f out.txt\n")
    (tmp_path / "policy.toml").write_text(POLICY.format(conditions=json.dumps(conditions),
                                                        extra=extra))
    return write_spec(tmp_path, {"a": command_node(["sh", "-c", "touch out.txt"], ["sh", "check.sh"],
                                                   spend_ceiling=5.0)},
                      spend_budget=10.0, policy="policy.toml")


def test_an_unmet_approval_does_not_end_done_and_an_approval_then_does(tmp_path: Path,
                                                                       capsys) -> None:
    spec = graph(tmp_path, ["all_done", "ledger_verified", "approved"],
                 'approver = "alice"')
    ledger = tmp_path / "L.jsonl"
    capsys.readouterr()
    assert cli.main(["run", str(spec), "--ledger", str(ledger), "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["release_unmet"] == ["approved"] and report["outcome"] != "DONE"
    assert report["nodes"]["a"]["status"] == "DONE"
    recs = records(ledger)
    assert recs[-1]["type"] == "release_unmet" and recs[-1]["unmet"] == ["approved"]
    assert "finish" not in [r["type"] for r in recs]

    runner = Runner.resume(ledger)  # a resume without the sign-off is refused again
    assert runner.continue_run() == 3
    runner.close()
    runner = Runner.resume(ledger)
    runner.approved_by = "mallory"  # not the policy's approver
    assert runner.continue_run() == 3
    runner.close()
    runner = Runner.resume(ledger)
    runner.approved_by = "alice"
    assert runner.continue_run() == 0
    assert runner.report()["outcome"] == "DONE" and runner.report()["release_unmet"] is None
    runner.close()
    assert records(ledger)[-1]["type"] == "finish"


def test_default_conditions_hold_for_a_clean_run(tmp_path: Path) -> None:
    spec = graph(tmp_path, ["all_done", "ledger_verified", "pins_unchanged"])
    assert cli.main(["run", str(spec), "--ledger", str(tmp_path / "L.jsonl")]) == 0
    assert records(tmp_path / "L.jsonl")[-1]["type"] == "finish"
