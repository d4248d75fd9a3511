"""A pytest plugin (`-p tests.leftover_processes`, in pyproject.toml): no test leaves a process
behind, counted after every test.

Why a subreaper: a process whose parent dies (a bwrap half-way through its start when the test
SIGKILLs the engine; a worker's daemon) is re-parented to the nearest ancestor that asked for
it (PR_SET_CHILD_SUBREAPER), else to PID 1, where nobody would see it. This process asks, so
every such orphan of a test becomes our child, and `/proc/self/task/*/children` lists it: after
each test, a child that was not there before and is still alive after a grace period (a killed
process takes a moment to go) is a leftover. The test then fails in its teardown, naming each
process, and the processes are killed so that the next test starts clean. Orphans that have
already exited are reaped here (they would stay zombies of ours).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 3.0
# Children a test may start that live as long as this process by design (Python's own helper
# processes, started once and shared by every later test), never a test's leftover.
LIFELONG = (b"multiprocessing.resource_tracker", b"multiprocessing.forkserver")


def pytest_configure(config: pytest.Config) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def children() -> set[int]:
    """Our children now (every thread's: a child is listed under the thread that made it)."""
    out: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            out |= {int(p) for p in (task / "children").read_text().split()}
    return out


def state(pid: int) -> str:
    """The process's state letter ("Z": a zombie), or "" once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[0]


def describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            "utf-8", "replace").strip()
    except OSError:
        cmd = "?"
    return f"pid {pid} ({state(pid) or 'gone'}): {cmd[:160]}"


def lifelong(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return any(name in cmd for name in LIFELONG)


def left_alive(before: set[int], grace_s: float = GRACE_S) -> list[int]:
    """The children not in `before` that are still alive after `grace_s` (zombies reaped),
    but for Python's lifelong helpers."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = []
        for pid in sorted(children() - before):
            if state(pid) in ("Z", "X", ""):
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
            elif not lifelong(pid):
                alive.append(pid)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.02)


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    before = children()
    yield
    alive = left_alive(before)
    if alive:
        words = [describe(p) for p in alive]
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        left_alive(before, 1.0)  # reap what was just killed
        pytest.fail(f"{len(alive)} process(es) of this test outlived it: " + "; ".join(words),
                    pytrace=False)
