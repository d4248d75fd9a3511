"""`descendants` (engine/system/limits/watch.py): a command's process tree, walked down the
kernel's per-thread children lists, is the tree a scan of every process's parent finds; and a
kernel without those lists gets the scan."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from loopproof.engine.system.limits import watch


@pytest.fixture
def tree(tmp_path: Path):
    """sh -> (a sleep, a subshell -> a sleep, a background sleep): five processes, three deep;
    each writes its pid so the test knows when all are up."""
    script = ("sleep 30 & echo $! > a; (sleep 30 & echo $! > c; wait) & echo $! > b; "
              "sleep 30 & echo $! > d; wait")
    proc = subprocess.Popen(["sh", "-c", script], cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not all((tmp_path / n).is_file() and (tmp_path / n).read_text().strip()
                  for n in "abcd"):
        assert time.monotonic() < deadline, "the tree never started"
        time.sleep(0.01)
    pids = {proc.pid, *(int((tmp_path / n).read_text()) for n in "abcd")}
    yield proc.pid, pids
    for pid in watch._descendants_by_scan(proc.pid):
        subprocess.run(["kill", "-9", str(pid)], check=False)
    proc.wait()


def test_the_walk_finds_the_tree_the_scan_finds(tree) -> None:
    leader, pids = tree
    assert watch.descendants(leader) == pids == watch._descendants_by_scan(leader)


def test_without_the_kernels_children_lists_the_scan_answers(tree, monkeypatch) -> None:
    leader, pids = tree
    monkeypatch.setattr(watch, "_children", lambda pid: None)
    assert watch.descendants(leader) == pids


def test_a_process_that_is_gone_is_only_itself() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert watch.descendants(proc.pid) == {proc.pid}
