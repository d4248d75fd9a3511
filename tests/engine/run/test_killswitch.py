"""The kill switch: a stop file or SIGTERM / SIGINT stops the run at the next safe point (no
attempt in flight), with a `stopped` record; resume continues to the same end."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import EXIT_STOPPED, Runner, default_stop_file
from tests.support.engine_child import started
from tests.support.oracles import CallableKind, records
from tests.support.specs import write_spec

KIND = CallableKind("test_killswitch_py")
STOP_AFTER: dict[str, Path] = {}  # node -> stop file its worker creates (a human's hand, simulated)


def _pair(name: str):
    def work(ctx):
        (ctx.workspace / "out.txt").write_text(name)
        if name in STOP_AFTER:
            STOP_AFTER[name].write_text("stop\n")
        return "ok"

    return work, lambda snap: "accept" if (snap / "out.txt").exists() else "reject"


KIND.add_per_node("chain", _pair)


def chain(tmp_path: Path, **graph: object) -> Path:
    return write_spec(tmp_path, KIND.node("a", "chain", spend_ceiling=1.0)
                      | KIND.node("b", "chain", spend_ceiling=1.0, needs=["a"])
                      | KIND.node("c", "chain", spend_ceiling=1.0, needs=["b"]),
                      spend_budget=5.0, **graph)


def kinds(ledger: Path) -> list[str]:
    return [r["type"] for r in records(ledger)]


def test_stop_file_stops_at_the_next_safe_point_and_resume_continues(tmp_path: Path) -> None:
    ledger = tmp_path / "L.jsonl"
    stop = default_stop_file(ledger)
    STOP_AFTER["a"] = stop
    try:
        runner = Runner.start(spec_mod.load(chain(tmp_path)), ledger)
        assert runner.run() == EXIT_STOPPED
        runner.close()
    finally:
        STOP_AFTER.clear()
    k = kinds(ledger)
    # a's attempt in flight when the switch was thrown finished (it was not a safe point)
    assert k[-2:] == ["verdict", "stopped"]
    assert k.count("begin") == 1  # b never began
    recs = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert recs[-1]["reason"] == f"stop file {stop.resolve()}"
    assert not runner.state.ended

    # While the stop file is there, resume appends nothing.
    before = ledger.read_bytes()
    again = Runner.resume(ledger)
    assert again.continue_run() == EXIT_STOPPED
    again.close()
    assert ledger.read_bytes() == before

    stop.unlink()
    again = Runner.resume(ledger)
    assert again.continue_run() == 0
    again.close()
    k = kinds(ledger)
    assert k.count("stopped") == 1 and k.count("resumed") == 1 and k[-1] == "finish"
    assert k.count("abandon") == 0  # stopped at a safe point: nothing was in flight


def test_stop_file_flag_and_graph_field(tmp_path: Path, capsys) -> None:
    flag = tmp_path / "halt-now"
    STOP_AFTER["b"] = flag
    try:
        ledger = tmp_path / "L.jsonl"
        assert cli.main(["run", str(chain(tmp_path)), "--ledger", str(ledger),
                         "--stop-file", str(flag)]) == EXIT_STOPPED
        assert "remove that file" in capsys.readouterr().err
        assert kinds(ledger).count("begin") == 2
        flag.unlink()
        assert cli.main(["resume", "--ledger", str(ledger)]) == 0  # the recorded stop file

        field = tmp_path / "field.stop"
        STOP_AFTER["b"] = field
        ledger2 = tmp_path / "L2.jsonl"
        spec = chain(tmp_path, stop_file="field.stop")
        assert cli.main(["run", str(spec), "--ledger", str(ledger2)]) == EXIT_STOPPED
    finally:
        STOP_AFTER.clear()


def test_existing_stop_file_refuses_to_start(tmp_path: Path) -> None:
    ledger = tmp_path / "L.jsonl"
    default_stop_file(ledger).write_text("")
    assert cli.main(["run", str(chain(tmp_path)), "--ledger", str(ledger)]) == 2
    assert not ledger.exists()


SLOW_GRAPH = """
[graph]
spend_budget = 20.0
[node.a]
worker = ["sh", "-c", "sleep 1.5; touch out.txt"]
gate = ["sh", "-c", "test -f out.txt"]
spend_ceiling = 5.0
[node.b]
worker = ["touch", "out.txt"]
gate = ["sh", "-c", "test -f out.txt"]
needs = ["a"]
spend_ceiling = 5.0
"""

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_at_the_next_safe_point(tmp_path: Path, sig: signal.Signals) -> None:
    spec = tmp_path / "graph.toml"
    spec.write_text(SLOW_GRAPH)
    ledger = tmp_path / "L.jsonl"
    with started(["run", str(spec), str(ledger)]) as child:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (ledger.exists()
                                                   and "reserve" in kinds(ledger)):
            time.sleep(0.02)
        os.kill(child.pid, sig)  # a's worker is running (its own session: it does not get this)
        assert child.wait(60) == EXIT_STOPPED, child.stderr()
    recs = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert recs[-1]["type"] == "stopped" and recs[-1]["reason"] == f"signal {sig.name}"
    assert [r["verdict"] for r in recs if r["type"] == "verdict"] == ["accept"]  # a finished
    assert [r["node"] for r in recs if r["type"] == "begin"] == ["a"]
    assert Runner.resume(ledger).continue_run() == 0
    assert kinds(ledger)[-1] == "finish"


def test_a_second_engine_on_the_same_ledger_is_refused(tmp_path: Path, capsys) -> None:
    ledger = tmp_path / "L.jsonl"
    STOP_AFTER["a"] = default_stop_file(ledger)
    try:
        runner = Runner.start(spec_mod.load(chain(tmp_path)), ledger)
        assert runner.run() == EXIT_STOPPED
        default_stop_file(ledger).unlink()
        before = ledger.read_bytes()
        assert cli.main(["resume", "--ledger", str(ledger)]) == 2  # the first still holds it
        assert "another loopproof process" in capsys.readouterr().err
        assert ledger.read_bytes() == before
        runner.close()
        assert cli.main(["resume", "--ledger", str(ledger)]) == 0
    finally:
        STOP_AFTER.clear()
