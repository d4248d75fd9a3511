"""Family: escaped processes. A worker starts a daemon in its own session (`setsid`), out of
reach of the process-group kill, and exits; the daemon then acts while the engine goes on:
it writes the live workspace after the attempt ended, rewrites a successor's `inputs/` after the
hand-off check, swaps the gate script between the pin check and the gate's start (restoring it
afterwards), or deletes the stop file. Under the sandbox every process of an attempt dies with
it, and none of those paths is writable (or visible) to it anyway.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from loopproof.engine.run.runner import EXIT_STOPPED, Runner
from loopproof.engine.run.spec import load

# Leave the worker's process group (setsid), then act; the worker waits a moment so the daemon
# has left the group before the engine kills it.
DAEMON = "setsid sh -c '{body}' >/dev/null 2>&1 < /dev/null & sleep 0.2"


def daemon(body: str) -> str:
    return DAEMON.format(body=body)


def write_graph(tmp_path: Path, nodes: str, extra: str = "") -> Path:
    path = tmp_path / "graph.toml"
    path.write_text(f"[graph]\nspend_budget = 100.0\n{extra}\n{nodes}")
    return path


def node(name: str, worker: str, gate: str, needs: str = "") -> str:
    return (f"[node.{name}]\nworker = {json.dumps(['sh', '-c', worker])}\n"
            f"gate = {json.dumps(['sh', '-c', gate])}\nspend_ceiling = 30.0\n"
            f"timeout_s = 20\ngate_timeout_s = 20\n{needs}\n")


def run(path: Path, ledger: Path) -> tuple[int, list[dict]]:
    runner = Runner.start(load(path), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    return code, [json.loads(x) for x in ledger.read_text().splitlines()]


def survivors(ws: Path) -> list[int]:
    """Processes still running with their working directory in `ws`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd").startswith(str(ws)):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


@pytest.fixture
def engine_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tmp = tmp_path / "engine-tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp


def test_a_daemon_dies_with_the_attempt_that_started_it(tmp_path: Path) -> None:
    path = write_graph(tmp_path, node("a", "echo ok > out.txt; " + daemon(
        "sleep 0.5; echo alive > late.txt"), "test -f out.txt"))
    ledger = tmp_path / "L.jsonl"
    code, _ = run(path, ledger)
    ws = Path(f"{ledger}.work") / "a"
    time.sleep(1.2)  # past the daemon's sleep
    assert code == 0
    assert not (ws / "late.txt").exists(), "a process of the attempt outlived it"
    assert survivors(ws) == []


def test_a_daemon_cannot_rewrite_a_successors_inputs(tmp_path: Path) -> None:
    # a's daemon waits for b's copy of a's accepted tree, then rewrites it; b reads it a moment
    # after it starts. b's gate accepts only the tree a's gate accepted.
    rewrite = ("i=0; while [ ! -f ../b/inputs/a/out.txt ] && [ $i -lt 1000 ]; do sleep 0.01; "
               "i=$((i+1)); done; chmod -R u+w ../b/inputs/a; echo bad > ../b/inputs/a/out.txt")
    nodes = (node("a", "echo good > out.txt; " + daemon(rewrite), "test -f out.txt")
             + node("b", "sleep 1; cp inputs/a/out.txt got", 'test "$(cat got)" = good',
                    'needs = ["a"]'))
    ledger = tmp_path / "L.jsonl"
    code, records = run(write_graph(tmp_path, nodes), ledger)
    got = Path(f"{ledger}.work") / "b" / "got"
    assert got.read_text().strip() == "good"
    assert code == 0 and [r["verdict"] for r in records if r["type"] == "verdict"] == [
        "accept", "accept"]


def test_a_daemon_cannot_swap_the_gate_script_while_the_gate_starts(
        tmp_path: Path, engine_tmp: Path) -> None:
    check = tmp_path / "check.sh"
    check.write_text('test "$(cat answer.txt)" = 42\n')
    original = check.read_text()
    # The daemon saves the script, then spins (shell builtins only, so it reacts at once) until
    # the engine's snapshot of the workspace appears (made after the pin check, before the gate
    # starts), swaps the gate script for one that accepts, and restores it once the gate has run:
    # every later pin check finds the original bytes. The workspace holds a large file so that
    # copying and hashing it leaves the daemon time.
    swap = (f"cp {check} {tmp_path}/saved; i=0; while [ $i -lt 3000000 ]; do "
            f"for f in $TMPDIR/loopproof-snapshot-*; do [ -e \"$f\" ] && i=3000000; done; "
            f"i=$((i+1)); done; echo \"exit 0\" > {check}; sleep 1.5; cp {tmp_path}/saved {check}")
    worker = ("echo 41 > answer.txt; head -c 30000000 /dev/zero > blob; " + daemon(swap))
    path = write_graph(tmp_path, f"[node.a]\nworker = {json.dumps(['sh', '-c', worker])}\n"
                       f'gate = ["sh", "{check}"]\nspend_ceiling = 30.0\ntimeout_s = 20\n'
                       "gate_timeout_s = 20\n")
    code, records = run(path, tmp_path / "L.jsonl")
    time.sleep(2.0)  # let a surviving daemon restore the script
    assert check.read_text() == original
    assert [r["verdict"] for r in records if r["type"] == "verdict"] == ["reject"]
    assert code == 3


def test_a_worker_cannot_delete_the_stop_file(tmp_path: Path) -> None:
    ledger = tmp_path / "L.jsonl"
    stop = Path(f"{ledger}.stop")
    # a waits (up to 5 s) for the operator's stop file and deletes it; b must never start
    delete = ("touch started; i=0; while [ ! -f ../../L.jsonl.stop ] && [ $i -lt 500 ]; do "
              "sleep 0.01; i=$((i+1)); done; rm -f ../../L.jsonl.stop; echo ok > out.txt")
    nodes = (node("a", delete, "test -f out.txt")
             + node("b", "echo ok > out.txt", "test -f out.txt", 'needs = ["a"]'))
    path = write_graph(tmp_path, nodes)
    started = Path(f"{ledger}.work") / "a" / "started"

    def operator() -> None:
        for _ in range(1000):
            if started.exists():
                stop.touch()
                return
            time.sleep(0.01)

    t = threading.Thread(target=operator)
    t.start()
    code, records = run(path, ledger)
    t.join()
    assert stop.exists(), "the worker deleted the operator's stop file"
    assert code == EXIT_STOPPED
    assert not any(r["type"] == "begin" and r.get("node") == "b" for r in records)
