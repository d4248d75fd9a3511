"""`loopproof cancel LEDGER NODE`: an operator ends a node's activation without a verdict.

The request is checked against the model in the state the next resume acts on (refused: exit 2,
nothing written), recorded, and honoured on resume as the model's `Cancel` (engine/run/operator.py);
what follows is the repair rule's. Attacked as a careless or hostile operator would: unknown and
not-ready nodes, a finished run, a live run, a crashed run with an attempt open, a forged
request, a forged `cancel` record, a reason with odd bytes.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.replay import replay
from loopproof.engine.run.runner import Runner, default_stop_file
from loopproof.engine.run.spec import load
from loopproof.model import Cancel, Status, attempt_bound
from tests.support.engine_child import engine_run
from tests.support.oracles import records

# a passes at once; b's gate never passes (3 attempts, it may repair itself once).
GRAPH = """
[graph]
repair_budget = 1
spend_budget = 100.0

[node.a]
worker = ["sh", "-c", "echo a > out"]
gate = ["sh", "-c", "test -f out"]
attempts = 2
spend_ceiling = 5.0
timeout_s = 5

[node.b]
worker = ["sh", "-c", "echo b > out"]
gate = ["sh", "-c", "test -f never"]
needs = ["a"]
repairs = ["b"]
attempts = 3
spend_ceiling = 5.0
timeout_s = 5
"""


def cancel(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["cancel", *argv])
    out = capsys.readouterr()
    return code, out.out + out.err


def stopped_after(tmp_path: Path, steps: int) -> Path:
    """A run of GRAPH stopped by the kill switch after `steps` scheduling decisions."""
    spec = tmp_path / "graph.toml"
    spec.write_text(GRAPH)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(spec), ledger)
    try:
        for _ in range(steps):
            assert runner.step()
        default_stop_file(ledger).write_text("stop\n")
        assert runner.step() is False
    finally:
        runner.close()
    default_stop_file(ledger).unlink()
    return ledger


def resume(ledger: Path) -> int:
    runner = Runner.resume(ledger)
    try:
        return runner.continue_run()
    finally:
        runner.close()


def test_a_cancel_is_recorded_then_honoured_on_resume_and_the_repair_rule_follows(
        tmp_path, capsys):
    ledger = stopped_after(tmp_path, 2)  # a passed, b failed its first attempt
    with Ledger.open(ledger) as led:
        before = replay(led).state
    g = replay(records(ledger)).graph
    assert before.status_of(g, "b") is Status.PENDING and before.attempts_of(g, "b") == 1
    code, out = cancel(capsys, str(ledger), "b", "--reason", "flaky gate", "--json")
    assert code == 0, out
    req = json.loads(out)
    assert req["type"] == "cancel_requested" and req["node"] == "b"
    assert req["activation"] == 0 and req["reason"] == "flaky gate"
    # nothing changed in the model's state yet: the request is a fact, honoured on resume
    assert replay(records(ledger)).state == before
    assert resume(ledger) == 3  # b's new activation fails 3 times, K spent: FAILED
    recs = records(ledger)
    types = [r["type"] for r in recs]
    i = types.index("cancel_requested")
    assert types[i:i + 4] == ["cancel_requested", "resumed", "cancel", "repair"]
    assert recs[i + 2]["request"] == req["seq"] and recs[i + 2]["node"] == "b"
    final = replay(recs)
    assert ("b", 0) in final.state.cancelled and final.cancel_requests == []
    report = final.summary()
    assert report["nodes"]["b"]["cancelled"] == [0] and report["cancel_requests"] == []
    # G1: a cancel adds no attempt (b's cancelled activation made 1, not 3); within W
    assert final.state.attempts_total == 1 + 1 + 3 <= attempt_bound(final.graph)
    # G2: no accepting verdict in the cancelled activation
    assert not [r for r in recs if r["type"] == "verdict" and r["node"] == "b"
                and r["activation"] == 0 and r["passed"]]


def test_the_cancel_event_is_asked_of_the_model(tmp_path, capsys, monkeypatch):
    """The runner commits the cancel through the model: a model that refuses it gets a
    `cancel_refused` record with its reason, and the run goes on without it."""
    ledger = stopped_after(tmp_path, 2)
    assert cancel(capsys, str(ledger), "b")[0] == 0
    monkeypatch.setattr(Cancel, "why_not", lambda self, graph, s: "the operator's hand slipped")
    assert resume(ledger) == 3
    recs = records(ledger)
    refused = [r for r in recs if r["type"] == "cancel_refused"]
    assert len(refused) == 1 and refused[0]["why"] == "the operator's hand slipped"
    assert "cancel" not in [r["type"] for r in recs]
    assert replay(recs).cancel_requests == []


@pytest.mark.parametrize(("node", "why"), [
    ("zz", "'zz' is not a node of this run"),
    ("a", "'a' is DONE, not PENDING"),
])
def test_a_request_the_model_refuses_is_bad_input_and_writes_nothing(tmp_path, capsys, node,
                                                                       why):
    ledger = stopped_after(tmp_path, 2)
    before = ledger.read_bytes()
    code, out = cancel(capsys, str(ledger), node)
    assert code == 2 and why in out and "fix:" in out
    assert out.count("\n") == 1 and "Traceback" not in out
    assert ledger.read_bytes() == before


def test_a_node_whose_predecessor_is_not_done_cannot_be_cancelled(tmp_path, capsys):
    ledger = stopped_after(tmp_path, 0)  # nothing ran yet
    before = ledger.read_bytes()
    code, out = cancel(capsys, str(ledger), "b")
    assert code == 2 and "predecessor 'a' is not DONE" in out
    assert ledger.read_bytes() == before
    assert cancel(capsys, str(ledger), "a")[0] == 0  # a is next to run: allowed


def test_a_second_cancel_while_one_is_pending_is_refused(tmp_path, capsys):
    ledger = stopped_after(tmp_path, 2)
    assert cancel(capsys, str(ledger), "b")[0] == 0
    before = ledger.read_bytes()
    code, out = cancel(capsys, str(ledger), "b")
    assert code == 2 and "already pending" in out
    assert ledger.read_bytes() == before


def test_a_finished_run_cannot_be_cancelled(tmp_path, capsys):
    ledger = stopped_after(tmp_path, 2)
    assert resume(ledger) == 3
    before = ledger.read_bytes()
    code, out = cancel(capsys, str(ledger), "b")
    assert code == 2 and "the run has ended (FAILED)" in out
    assert ledger.read_bytes() == before


def test_a_live_run_refuses_a_cancel(tmp_path, capsys):
    ledger = stopped_after(tmp_path, 1)
    live = Runner.resume(ledger)  # holds the ledger's lock, as a running engine does
    try:
        before = ledger.read_bytes()
        code, out = cancel(capsys, str(ledger), "b")
        assert code == 2 and "another loopproof process is running this ledger" in out
        assert ledger.read_bytes() == before
    finally:
        live.close()


def test_odd_input_is_one_line_exit_2(tmp_path, capsys):
    ledger = stopped_after(tmp_path, 2)
    before = ledger.read_bytes()
    for argv in ([str(ledger), "b", "--reason", "two\nlines"],
                 [str(ledger), "b", "--reason", "x" * 501],
                 [str(tmp_path / "missing.jsonl"), "b"],
                 [str(tmp_path), "b"]):
        code, out = cancel(capsys, *argv)
        assert code == 2 and out.count("\n") == 1 and "fix:" in out, (argv, out)
    assert ledger.read_bytes() == before


def test_a_crashed_run_with_an_attempt_open_cancels_after_the_attempt_is_given_back(
        tmp_path, capsys):
    spec = tmp_path / "graph.toml"
    spec.write_text(GRAPH)
    ledger = tmp_path / "L.jsonl"
    child = engine_run(["run", str(spec), str(ledger)], crash_at="runner.before_verdict:2")
    assert child.returncode == -signal.SIGKILL, child.stderr
    g = replay(records(ledger)).graph
    assert replay(records(ledger)).state.running(g) == "b"  # b's attempt has no recorded end
    assert cancel(capsys, str(ledger), "b")[0] == 0
    assert resume(ledger) == 3
    types = [r["type"] for r in records(ledger)]
    i = types.index("resumed")
    assert types[i:i + 4] == ["resumed", "abandon", "cancel", "repair"]


def test_a_forged_request_for_a_node_not_ready_is_refused_on_resume(tmp_path):
    ledger = stopped_after(tmp_path, 0)
    with Ledger.open(ledger) as led:  # a request appended by hand, with a valid chain
        led.append({"type": "cancel_requested", "node": "b", "reason": "", "by": "someone",
                    "activation": 0, "attempts": 0})
    assert resume(ledger) == 3
    recs = records(ledger)
    refused = [r for r in recs if r["type"] == "cancel_refused"]
    assert len(refused) == 1 and "predecessor 'a' is not DONE" in refused[0]["why"]
    assert ("b", 0) not in replay(recs).state.cancelled


def test_a_forged_cancel_record_the_model_refuses_is_a_corrupt_ledger(tmp_path, capsys):
    ledger = stopped_after(tmp_path, 0)
    with Ledger.open(ledger) as led:
        led.append({"type": "cancel", "node": "b"})  # b is not next to run
    capsys.readouterr()
    assert cli.main(["resume", "--ledger", str(ledger)]) == 5
    assert "the model refuses cancel" in capsys.readouterr().err


def test_show_tells_the_cancel_in_words(tmp_path, capsys):
    ledger = stopped_after(tmp_path, 2)
    assert cancel(capsys, str(ledger), "b", "--reason", "flaky gate")[0] == 0
    assert resume(ledger) == 3
    capsys.readouterr()
    assert cli.main(["show", str(ledger), "--json"]) == 0
    shown = json.dumps(json.loads(capsys.readouterr().out))
    assert "cancel of b requested (activation 0): flaky gate" in shown
    assert "cancel: b's activation 0 ended without a verdict after 1 attempt(s)" in shown
