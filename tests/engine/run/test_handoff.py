"""A successor receives exactly the tree its predecessor's gate accepted, never the live
workspace: a process the worker left behind (in its own session, out of reach of the process
group kill) can still rewrite the live workspace after the verdict, but not what `b` gets; a
tampered stored snapshot stops the run (exit 5); and after a crash, resume hands on the
accepted tree it finds next to the ledger."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from loopproof.engine.run.runner import EXIT_PIN_CHANGED, Runner, accepted_root, workspace_root
from loopproof.engine.run.spec import load
from loopproof.engine.system import limits
from tests.support.engine_child import engine_run
from tests.support.oracles import records

# a's worker writes "good", then leaves a process in its own session that rewrites out.txt to
# "bad" as soon as a's gate has judged (the gate waits until it has), so the live workspace is
# "bad" before b is prepared, deterministically.
# No sandbox and no cgroup: the escaped process must live on to show what the accepted copy
# protects against (under the sandbox, or in the attempt's cgroup, it dies with its attempt:
# tests/adversarial/test_escaped_processes.py, engine/system/limits/).
GRAPH = """
[graph]
spend_budget = 100.0
sandbox = "none"

[node.a]
worker = ["sh", "-c", "echo good > out.txt; {escape}"]
gate = ["sh", "-c", "touch {judged}; i=0; while [ ! -f {tampered} ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; test \\"$(cat out.txt)\\" = good"]
spend_ceiling = 20.0
timeout_s = 10
gate_timeout_s = 10

[node.b]
worker = ["sh", "-c", "cp inputs/a/out.txt got"]
gate = ["true"]
needs = ["a"]
spend_ceiling = 20.0
timeout_s = 10
"""

ESCAPE = ("setsid sh -c 'i=0; while [ ! -f {judged} ] && [ $i -lt 500 ]; do sleep 0.01; "
          "i=$((i+1)); done; echo bad > out.txt; touch {tampered}' >/dev/null 2>&1 & sleep 0.2")
# (the sleep lets setsid leave the worker's process group before the worker exits and the
# group is killed)


def write_spec(tmp_path: Path, escape: bool) -> Path:
    judged, tampered = tmp_path / "judged", tmp_path / "tampered"
    if not escape:
        tampered.touch()  # the gate need not wait
    esc = ESCAPE.format(judged=judged, tampered=tampered) if escape else "true"
    spec = tmp_path / "graph.toml"
    spec.write_text(GRAPH.format(escape=esc.replace('"', '\\"'), judged=judged,
                                 tampered=tampered))
    return spec


def test_successor_gets_the_accepted_tree_not_the_live_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "_mechanisms", [])  # a host where no cgroup can be made
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(write_spec(tmp_path, escape=True)), ledger)
    code = runner.run()
    runner.close()
    assert code == 0
    assert (tmp_path / "tampered").exists()  # the escaped process did rewrite the live tree
    assert (workspace_root(ledger) / "a" / "out.txt").read_text().strip() == "bad"
    assert (workspace_root(ledger) / "b" / "got").read_text().strip() == "good"
    verdict = next(r for r in records(ledger) if r["type"] == "verdict" and r["node"] == "a")
    assert verdict["passed"] and len(verdict["accepted_tree"]) == 64


def crash_child(argv: list[str], crash_at: str) -> subprocess.CompletedProcess:
    return engine_run(["run", *argv], crash_at=crash_at)


def crash_before_b(tmp_path: Path) -> Path:
    """Run until a is accepted, then SIGKILL the engine just before b is chosen."""
    ledger = tmp_path / "L.jsonl"
    child = crash_child([str(write_spec(tmp_path, escape=False)), str(ledger)],
                        "runner.before_begin:2")
    assert child.returncode == -signal.SIGKILL, child.stderr
    return ledger


def test_resume_after_a_crash_hands_on_the_accepted_tree(tmp_path: Path) -> None:
    ledger = crash_before_b(tmp_path)
    (workspace_root(ledger) / "a" / "out.txt").write_text("bad\n")  # the live tree changes
    runner = Runner.resume(ledger)
    code = runner.continue_run()
    runner.close()
    assert code == 0
    assert (workspace_root(ledger) / "b" / "got").read_text().strip() == "good"


def test_a_tampered_stored_snapshot_stops_the_run_with_exit_5(tmp_path: Path) -> None:
    ledger = crash_before_b(tmp_path)
    stored = accepted_root(ledger) / "a"
    (snap,) = list(stored.iterdir())
    (snap / "out.txt").write_text("bad\n")
    runner = Runner.resume(ledger)
    code = runner.continue_run()
    report = runner.report()
    runner.close()
    assert code == EXIT_PIN_CHANGED == 5 and report["error"]
    recs = records(ledger)
    changed = [r for r in recs if r["type"] == "pin_changed"]
    assert len(changed) == 1 and changed[0]["what"] == "accepted_snapshot"
    assert changed[0]["predecessor"] == "a" and changed[0]["found"] != changed[0]["expected"]
    assert not [r for r in recs if r["type"] == "begin" and r["node"] == "b"]  # no attempt open
    assert not (workspace_root(ledger) / "b" / "got").exists()


# b's worker, on its first attempt, replaces its inputs/ with a symlink to a folder outside the
# run (and fails its gate); the next attempt's hand-off must remove the link, never follow it:
# the outside folder keeps its modes and files, and b receives a's accepted tree again.
SWAP = """
[graph]
spend_budget = 100.0

[node.a]
worker = ["sh", "-c", "echo good > out.txt"]
gate = ["true"]
spend_ceiling = 20.0
timeout_s = 10

[node.b]
worker = ["sh", "-c", "if [ $LOOPPROOF_ATTEMPT = 1 ]; then rm -rf inputs; ln -s {outside} inputs; exit 0; fi; cp inputs/a/out.txt got"]
gate = ["sh", "-c", "test -f got"]
needs = ["a"]
attempts = 2
spend_ceiling = 20.0
timeout_s = 10
"""


def test_a_worker_that_swaps_its_inputs_for_a_symlink_cannot_reach_outside(tmp_path: Path
                                                                          ) -> None:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "keep.txt").write_text("mine")
    os.chmod(outside / "sub", 0o750)
    os.chmod(outside, 0o751)
    spec = tmp_path / "graph.toml"
    spec.write_text(SWAP.format(outside=outside))
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(spec), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    assert code == 0
    inputs = workspace_root(ledger) / "b" / "inputs"
    assert not inputs.is_symlink() and (inputs / "a" / "out.txt").read_text() == "good\n"
    assert (workspace_root(ledger) / "b" / "got").read_text() == "good\n"
    assert (outside / "keep.txt").read_text() == "mine"
    assert oct(outside.stat().st_mode & 0o777) == oct(0o751)
    assert oct((outside / "sub").stat().st_mode & 0o777) == oct(0o750)
