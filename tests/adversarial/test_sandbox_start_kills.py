"""No sandbox outlives its attempt or its engine, whatever moment of its start it is killed at.

bubblewrap's set-up has a window (between its clone and the write that lets the child go on)
where killing its parent leaves the child blocked for good in `eventfd_read`, with parent PID 1
and `--die-with-parent` not yet set: issue 30 found two such processes after a run. Every
process of a command is in the command's cgroup (engine/system/limits/) before bwrap starts, so
the engine kills it when the command ends (a deadline included), and the next `run` or `resume`
of the ledger kills what a killed engine left there. These tests kill at many moments of that
start and count the survivors (tests/support/leftover_processes.py also counts, after every test).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from loopproof.engine.system import limits
from loopproof.engine.system.limits import Cell, Hold, ResourceLimits
from loopproof.engine.system.process import run_command
from loopproof.engine.system.sandbox import Confinement, View, backend
from tests.support.engine_child import engine_run

from .sandbox_start_killer import marked

ROOT = Path(__file__).resolve().parents[2]
KILLER = Path(__file__).with_name("sandbox_start_killer.py")


def test_an_engine_killed_at_any_moment_of_a_sandbox_start_leaves_nothing_after_reap(
        tmp_path: Path) -> None:
    """80 engines, each SIGKILLed 0.3 ms later than the one before after it began a command
    (0 to 24 ms: before bwrap starts, in its set-up, once the command runs); then what `run`
    and `resume` do first (`limits.reap`). Some kills must land in bwrap's set-up window (or
    the test would prove nothing), and nothing may survive the reap."""
    marker = f"lp-start-{secrets.token_hex(6)}"
    owner = limits.owner_of(tmp_path / "L.jsonl")
    try:
        res = subprocess.run([sys.executable, str(KILLER), owner, marker, str(tmp_path),
                              "0.0003", "80"], capture_output=True, text=True, timeout=120,
                             cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert res.returncode == 0, res.stderr
        got = json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        limits.reap(owner)
    assert got["left_by_a_kill"] >= 1, f"no kill landed in a sandbox's start: {got}"
    assert got["after_reap"] == 0, got
    assert marked(marker) == []


def test_an_engine_killed_during_its_sandbox_probe_leaves_nothing_after_the_next_probe() -> None:
    """The engine's first act, the probe of bwrap (`bwrap ... -- true`), killed 0 to 30 ms in,
    60 times: the next engine's probe kills what those left (without the probe's cell, 31 and
    39 of 60 stuck bwraps were left in two runs, and nothing would ever reap them)."""
    res = subprocess.run([sys.executable, str(KILLER), "probe", "0.0005", "60"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["after_reap"] == 0, got


def test_a_deadline_at_any_moment_of_a_sandbox_start_leaves_nothing(tmp_path: Path) -> None:
    """A command's deadline hit 0 to 20 ms after it began (during bwrap's set-up and after):
    when `run_command` returns, no process of it is left, without any reap."""
    marker = f"lp-deadline-{secrets.token_hex(6)}"
    hold = Hold(ResourceLimits(memory_bytes=256 << 20, processes=64),
                limits.owner_of(tmp_path / "L.jsonl"), "deadline", tmp_path)
    box = Confinement(backend("bwrap"), View(writable=(tmp_path,)), hold=hold)
    left = []
    for i in range(40):
        res = run_command(["/bin/sh", "-c", "sleep 30", marker], tmp_path, i * 0.0005,
                          confine=box)
        assert res.killed == "timeout" or res.returncode is not None
        left += marked(marker)
    assert left == []


def test_resume_reaps_what_a_killed_engine_left_in_the_runs_cgroups(tmp_path: Path) -> None:
    """A process left in one of the run's cgroups (as a bwrap stuck in its set-up is, after
    its engine was SIGKILLed) is killed by `resume`, which records how many it found."""
    ledger = tmp_path / "L.jsonl"
    spec = tmp_path / "graph.toml"
    spec.write_text('[graph]\nspend_budget = 10.0\n[node.a]\nworker = ["/bin/true"]\n'
                    'gate = ["/bin/true"]\nspend_ceiling = 5.0\n')
    # the engine in processes of its own, forked warm (tests/support/engine_child.py)
    crashed = engine_run(["cli", "run", str(spec), "--ledger", str(ledger)],
                         crash_at="runner.before_worker:1", timeout=60)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    marker = f"lp-left-{secrets.token_hex(6)}"
    cell = Cell(Hold(ResourceLimits(processes=16), limits.owner_of(ledger), "a.worker"))
    assert cell.groups, "this host offers no cgroup the engine may create"
    left = subprocess.Popen(cell.wrap(["/bin/sh", "-c", "sleep 30 & sleep 30", marker]),
                            start_new_session=True)  # the shell and its two sleeps
    try:
        deadline = time.monotonic() + 5
        while len(cell.pids()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert left.pid in cell.pids() and len(cell.pids()) == 3
        resumed = engine_run(["cli", "resume", "--ledger", str(ledger), "--json"], timeout=60)
        assert resumed.returncode == 0, resumed.stderr
        # killed (the shell itself, or its sleep first, after which it exits 128 + 9)
        assert left.wait(timeout=5) in (-signal.SIGKILL, 128 + signal.SIGKILL)
    finally:
        if left.poll() is None:
            left.kill()
            left.wait()
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [r["reaped"] for r in records if r["type"] == "resumed"] == [3]
    assert marked(marker) == [] and cell.pids() == set()
