"""Gates judge a read-only snapshot copy; a changed snapshot, a timeout, a crash or an unknown exit
code is an error (never an accept); a changed gate file stops the run with exit 5, recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.run.gate import ACCEPT, ERROR, REJECT, CallableGate, CommandGate
from loopproof.engine.system.trees import tree_digest
from tests.support.specs import command_node, write_spec


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "a.txt").write_text("hello\n")
    (ws / "sub" / "b.txt").write_text("world\n")
    return ws


@pytest.mark.parametrize(("code", "verdict"), [(0, ACCEPT), (1, REJECT), (2, ERROR), (3, ERROR),
                                               (127, ERROR)])
def test_exit_codes(workspace: Path, code: int, verdict: str) -> None:
    result = CommandGate(("sh", "-c", f"exit {code}"), 10).judge(workspace)
    assert result.verdict == verdict
    assert result.accepted is (verdict == ACCEPT)


def test_gate_sees_the_workspace_content(workspace: Path) -> None:
    gate = CommandGate(("sh", "-c", 'test "$(cat sub/b.txt)" = world'), 10)
    assert gate.judge(workspace).verdict == ACCEPT
    (workspace / "sub" / "b.txt").write_text("moon\n")
    assert gate.judge(workspace).verdict == REJECT


def test_gate_writing_into_its_snapshot_is_an_error(workspace: Path) -> None:
    before = tree_digest(workspace)
    # chmod back, then write: even a gate that undoes the read-only bits is caught by the hash
    gate = CommandGate(("sh", "-c", "chmod u+w . ; echo pass > verdict.txt; exit 0"), 10)
    result = gate.judge(workspace)
    assert result.verdict == ERROR and "snapshot changed" in result.detail
    assert tree_digest(workspace) == before  # the worker's workspace itself is untouched


def test_callable_gate_writing_into_snapshot_is_an_error(workspace: Path) -> None:
    def sneaky(snap: Path) -> str:
        (snap / "a.txt").chmod(0o644)
        (snap / "a.txt").write_text("changed\n")
        return "accept"

    assert CallableGate(sneaky).judge(workspace).verdict == ERROR


def test_snapshot_is_read_only_and_a_copy(workspace: Path) -> None:
    seen = {}

    def look(snap: Path) -> str:
        seen["path"] = snap
        seen["mode"] = snap.stat().st_mode & 0o777
        seen["file_mode"] = (snap / "a.txt").stat().st_mode & 0o777
        return "accept"

    CallableGate(look).judge(workspace)
    assert seen["path"] != workspace and not seen["path"].exists()  # removed afterwards
    assert seen["mode"] == 0o555 and seen["file_mode"] == 0o444


def test_timeout_is_an_error(workspace: Path) -> None:
    result = CommandGate(("sleep", "30"), 0.3).judge(workspace)
    assert result.verdict == ERROR and "timed out" in result.detail
    assert result.seconds < 10


def test_crashing_callable_gate_and_non_verdict_are_errors(workspace: Path) -> None:
    def boom(snap: Path) -> str:
        raise RuntimeError("gate bug")

    assert CallableGate(boom).judge(workspace).verdict == ERROR
    assert CallableGate(lambda snap: "PASS").judge(workspace).verdict == ERROR
    assert CallableGate(lambda snap: ("reject", "too short")).judge(workspace).detail == "too short"


def test_missing_gate_program_is_an_error(workspace: Path) -> None:
    assert CommandGate(("/nonexistent/gate",), 5).judge(workspace).verdict == ERROR


def test_tree_digest_sees_content_names_and_modes(workspace: Path) -> None:
    d0 = tree_digest(workspace)
    (workspace / "a.txt").write_text("hellp\n")
    d1 = tree_digest(workspace)
    (workspace / "a.txt").rename(workspace / "c.txt")
    d2 = tree_digest(workspace)
    (workspace / "c.txt").chmod(0o600)
    d3 = tree_digest(workspace)
    assert len({d0, d1, d2, d3}) == 4


# ---- pinned gate files ------------------------------------------------------------------------

def tamper_graph(tmp_path: Path, sandbox: str = "none") -> tuple[Path, Path]:
    """Node `a`'s worker appends to the gate script it is judged by (its path is in its argv).
    Without a sandbox it can: the pin check is what catches it."""
    gate = tmp_path / "check.sh"
    gate.write_text("test -f out.txt\n")
    worker = ["sh", "-c", "touch out.txt; echo 'exit 0' >> \"$0\"", "check.sh"]
    spec = write_spec(tmp_path, {"a": command_node(worker, ["sh", "check.sh"], attempts=2,
                                                   spend_ceiling=2.0)},
                      spend_budget=10.0, sandbox=sandbox)
    return spec, gate


def test_a_sandboxed_worker_cannot_change_its_gate_file(tmp_path: Path) -> None:
    spec, gate = tamper_graph(tmp_path, "bwrap")
    original = gate.read_text()
    assert cli.main(["run", str(spec), "--ledger", str(tmp_path / "L.jsonl")]) == 0
    assert gate.read_text() == original


def test_changed_gate_file_stops_the_run_with_exit_5(tmp_path: Path, capsys) -> None:
    spec, gate = tamper_graph(tmp_path)
    original = gate.read_text()
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger), "--json"]) == 5
    out = capsys.readouterr()
    assert "changed since the run started" in out.err
    recs = [json.loads(x) for x in ledger.read_text().splitlines()]
    kinds = [r["type"] for r in recs]
    assert kinds[-2:] == ["pin_changed", "verdict"]  # recorded, then the attempt fails
    assert recs[-1]["verdict"] == "error" and recs[-1]["passed"] is False
    assert recs[-2]["file"] == str(gate.resolve())
    assert json.loads(out.out)["outcome"] == "RUNNING"

    # Still changed: resume refuses again (exit 5) and says so in the ledger.
    assert cli.main(["resume", "--ledger", str(ledger)]) == 5
    assert [json.loads(x)["type"] for x in ledger.read_text().splitlines()][-1] == "pin_changed"

    # Restored: resume goes on. The worker tampers again, so the run stops again — every time.
    gate.write_text(original)
    capsys.readouterr()
    assert cli.main(["resume", "--ledger", str(ledger), "--json"]) == 5
    report = json.loads(capsys.readouterr().out)
    assert report["resumes"] == 1 and report["nodes"]["a"]["attempts"] == 2


def test_unchanged_gate_file_does_not_stop(tmp_path: Path) -> None:
    gate = tmp_path / "check.sh"
    gate.write_text("test -f out.txt\n")
    spec = write_spec(tmp_path, {"a": command_node(["touch", "out.txt"], ["sh", "check.sh"],
                                                   spend_ceiling=2.0)}, spend_budget=10.0)
    assert cli.main(["run", str(spec), "--ledger", str(tmp_path / "L.jsonl")]) == 0


def test_a_fifo_left_by_the_worker_does_not_block_the_snapshot(workspace: Path) -> None:
    import os

    os.mkfifo(workspace / "trap")
    result = CommandGate(("sh", "-c", "test -f a.txt && test ! -e trap"), 10).judge(workspace)
    assert result.verdict == ACCEPT and result.seconds < 10


def test_gate_file_removed_is_a_change(tmp_path: Path, capsys) -> None:
    spec, gate = tamper_graph(tmp_path)
    spec.write_text(spec.read_text().replace("echo 'exit 0' >>", "rm"))
    assert "rm" in spec.read_text()
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 5
    changed = [json.loads(x) for x in ledger.read_text().splitlines()][-2]
    assert changed["type"] == "pin_changed" and changed["found"] == "missing"
