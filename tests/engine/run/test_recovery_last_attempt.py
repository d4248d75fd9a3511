"""G7 on a node's last attempt: a crash inside an attempt is recovered by giving the attempt back.

A one-node graph with attempts = 1 is SIGKILLed at every crash site inside its only attempt, then
resumed. Before the fix, `Abandon` counted the interrupted attempt as failed, so the node was
exhausted and the resumed run ended FAILED while the uncrashed run ends DONE. Now the resumed run
must end exactly as the uncrashed one (outcome, statuses, verdicts, attempts that count), report
the one repeated execution, and keep settled + reserved <= B on every ledger prefix (G3).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.run.meter import METER_SITES
from loopproof.engine.run.runner import CRASH_SITES
from tests.support.engine_child import engine_run
from tests.support.oracles import assert_g3, records
from tests.support.paths import REPO

ONE_NODE = """
[graph]
repair_budget = 0
spend_budget = 100.0

[node.a]
worker = ["sh", "-c", "echo ok > out"]
gate = ["sh", "-c", "test \\"$(cat out)\\" = ok"]
attempts = 1
spend_ceiling = 5.0
timeout_s = 5
"""

# the sites between a recorded Begin and its recorded verdict (engine/run/attempt.py, engine/run/meter.py)
INSIDE = ("runner.before_worker", "runner.after_worker", "runner.before_verdict", *METER_SITES)
# a meter site is passed twice per attempt: the worker's command, then the gate run
CASES = [f"{site}:{n}" for site in INSIDE for n in ((1, 2) if site in METER_SITES else (1,))]



def test_the_cases_cover_every_site_inside_an_attempt() -> None:
    inside = CRASH_SITES[CRASH_SITES.index("runner.before_worker"):
                         CRASH_SITES.index("runner.after_verdict")]
    assert set(inside) == set(INSIDE)


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def crash_child(spec: Path, ledger: Path, crash_at: str) -> subprocess.CompletedProcess:
    """`loopproof.run` in a child that dies at `crash_at`: the public API registers every
    shipped node kind (the regress-restore example's is `revision`)."""
    return engine_run(["api", str(spec), str(ledger)], crash_at=crash_at)


def same_end(report: dict) -> dict:
    """What a recovered run must share with the uncrashed one."""
    return {"outcome": report["outcome"], "attempts_total": report["attempts_total"],
            "nodes": {n: (v["status"], v["attempts"], v["verdicts"])
                      for n, v in report["nodes"].items()}}


@pytest.fixture(scope="module")
def uncrashed(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("uncrashed")
    (d / "graph.toml").write_text(ONE_NODE)
    code = cli.main(["run", str(d / "graph.toml"), "--ledger", str(d / "L.jsonl"), "--json"])
    assert code == 0
    from loopproof.engine.record.ledger import Ledger
    from loopproof.engine.record.replay import replay
    report = replay(Ledger.open(d / "L.jsonl")).summary()
    assert report["outcome"] == "DONE" and report["repeated_executions"] == 0
    return report


@pytest.mark.parametrize("crash_at", CASES)
def test_crash_inside_the_last_attempt_recovers_the_uncrashed_outcome(
        tmp_path: Path, capsys, uncrashed: dict, crash_at: str) -> None:
    spec, ledger = tmp_path / "graph.toml", tmp_path / "L.jsonl"
    spec.write_text(ONE_NODE)
    child = crash_child(spec, ledger, crash_at)
    assert child.returncode == -signal.SIGKILL, child.stderr
    code, report = run_json(capsys, "resume", "--ledger", str(ledger))
    assert code == 0, report
    assert same_end(report) == same_end(uncrashed)
    assert report["repeated_executions"] == 1 and report["outcome_unknown"] == 1
    assert report["nodes"]["a"]["attempts_all"] == 2  # executions = attempts_total + repeated
    recs = records(ledger)
    assert_g3(recs)
    abandon = next(r for r in recs if r["type"] == "abandon")
    assert abandon["outcome"] == "unknown" and "run again" in abandon["why"]
    begins = [r for r in recs if r["type"] == "begin"]
    assert len(begins) == 2


REGRESS = REPO / "examples" / "regress-restore"


@pytest.mark.parametrize("crash_at", ["runner.after_worker:1", "meter.before_settle:1"])
def test_regress_restore_example_recovers_after_a_crash_inside_its_attempt(
        tmp_path: Path, capsys, crash_at: str) -> None:
    """The example's only node has attempts = 1: a crash inside it used to fail the run."""
    ex = tmp_path / "regress-restore"
    shutil.copytree(REGRESS, ex)
    ledger = tmp_path / "L.jsonl"
    child = crash_child(ex / "graph.toml", ledger, crash_at)
    assert child.returncode == -signal.SIGKILL, child.stderr
    code, report = run_json(capsys, "resume", "--ledger", str(ledger))
    tail = [{k: r[k] for k in ("type", "verdict", "amount", "why", "reason") if k in r}
            for r in records(ledger)[-12:]]
    assert code == 0 and report["outcome"] == "DONE", (report, tail)
    assert report["repeated_executions"] == 1 and report["attempts_total"] == 1
    assert_g3(records(ledger))
