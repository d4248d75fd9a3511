"""Red team: processes that try to outlive their attempt under the default sandbox.

The sandbox promises (docs/threat-model.md, "Leave a process behind") that every process an
attempt starts dies with it: when the command exits, when it is killed at its deadline, and when
the engine itself is killed. The attacks here go after the mechanisms that promise rests on:

- the parent-death signal bubblewrap sets (`--die-with-parent`) is the process's own setting: a
  command may clear it (`prctl(PR_SET_PDEATHSIG, 0)`) and leave bwrap's process group
  (`setsid`), so neither the engine's group kill nor bwrap's death reaches it;
- a process in a namespace of its own (`unshare --pid --fork`), so it is not a plain child of the
  command.

Each surviving process would spend compute no meter sees and keep writing the node's workspace
(and any `writable` path) while later attempts and gates run. A probe that survives is killed
by its pid at the end of the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path

import pytest

from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load
from tests.support.engine_child import started

from .sandbox_start_killer import marked

# Clear the parent-death signal bwrap gave us, leave bwrap's process group, then keep writing a
# tick file in the workspace (by absolute path, so a chdir cannot hide it) for 20 s.
ESCAPE = """
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(1, 0)  # PR_SET_PDEATHSIG = 0
os.setsid()
ticks = os.path.join(os.getcwd(), "tick")
open("started", "w").close()
for i in range(200):
    with open(ticks, "a") as f:
        f.write("%d\\n" % i)
    time.sleep(0.1)
"""


def write_graph(tmp_path: Path, worker: list[str], gate: list[str], timeout_s: float = 20,
                extra: str = "") -> Path:
    path = tmp_path / "graph.toml"
    path.write_text(f"[graph]\nspend_budget = 60.0\n{extra}[node.a]\n"
                    f"worker = {json.dumps(worker)}\ngate = {json.dumps(gate)}\n"
                    f"spend_ceiling = 30.0\ntimeout_s = {timeout_s}\ngate_timeout_s = 20\n")
    return path


def reap(marker: str) -> list[int]:
    """Kill (by pid) every probe process still alive; return their pids."""
    found = marked(marker)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return found


def ticking(path: Path, wait_s: float = 0.6) -> bool:
    """Does the tick file still grow?"""
    before = path.read_bytes() if path.exists() else b""
    time.sleep(wait_s)
    return (path.read_bytes() if path.exists() else b"") != before


@pytest.fixture
def probe(tmp_path: Path):
    """The escaping worker, in a folder named by a random marker (to find its processes)."""
    folder = tmp_path / f"probe-{secrets.token_hex(6)}"
    folder.mkdir()
    script = folder / "escape.py"
    script.write_text(ESCAPE)
    yield script
    reap(folder.name)


def test_a_worker_that_clears_its_death_signal_dies_at_its_deadline(tmp_path: Path,
                                                                    probe: Path) -> None:
    # the worker outlives its 1 s deadline; the engine kills bwrap's process group
    path = write_graph(tmp_path, [sys.executable, str(probe)], ["sh", "-c", "true"], timeout_s=1)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(path), ledger)
    try:
        runner.run()
    finally:
        runner.close()
    ws = Path(f"{ledger}.work") / "a"
    assert (ws / "started").exists(), "the probe never ran"
    alive = ticking(ws / "tick")
    assert not alive and reap(probe.parent.name) == [], "a process outlived its attempt"


def test_a_worker_that_clears_its_death_signal_dies_with_a_killed_engine(
        tmp_path: Path, probe: Path) -> None:
    path = write_graph(tmp_path, [sys.executable, str(probe)], ["sh", "-c", "true"])
    ledger = tmp_path / "L.jsonl"
    ws = Path(f"{ledger}.work") / "a"
    # the engine in a process of its own (forked warm: tests/support/engine_child.py)
    with started(["cli", "run", str(path), "--ledger", str(ledger)]) as engine:
        for _ in range(300):
            if (ws / "tick").exists():
                break
            time.sleep(0.05)
        assert (ws / "tick").exists(), "the probe never ran"
        engine.kill()  # SIGKILL: the engine cannot clean anything up
    time.sleep(0.3)
    alive = ticking(ws / "tick")
    assert not alive and reap(probe.parent.name) == [], "a process outlived the killed engine"


def test_a_process_in_a_pid_namespace_of_its_own_dies_with_the_attempt(tmp_path: Path) -> None:
    marker = f"probe-{secrets.token_hex(6)}"
    # unshare may be refused inside the sandbox (then the probe runs as a plain child): either
    # way it must not outlive the worker, which exits at once
    body = f"sleep 1.5; echo late > late.txt # {marker}"
    worker = ["sh", "-c", f"(unshare --user --pid --fork sh -c '{body}' || sh -c '{body}') "
                          f">/dev/null 2>&1 </dev/null & sleep 0.3; echo ok > out.txt"]
    path = write_graph(tmp_path, worker, ["sh", "-c", "test -f out.txt"])
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(path), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    time.sleep(1.8)
    assert code == 0
    assert reap(marker) == [], "a process outlived its attempt"
    assert not (Path(f"{ledger}.work") / "a" / "late.txt").exists()
