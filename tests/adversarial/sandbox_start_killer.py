"""Kill an engine at many moments of its sandbox's start (run by test_sandbox_start_kills.py).

`python sandbox_start_killer.py OWNER MARKER WORKSPACE STEP_S N`: for i in 0..N-1, fork a child
that runs one sandboxed command (`sh -c "sleep 30" MARKER`) the way an attempt does (bwrap, in
a cell of OWNER, engine/system/limits/), and SIGKILL that child i * STEP_S seconds after the fork: the
engine dies before, during or after bubblewrap's set-up. Prints one JSON line: how many
processes carrying MARKER were left right after a kill, how many were alive after all the kills
(another engine starting meanwhile may have reaped some: `reap_dead`), how many `reap(OWNER)`
found (what the next `run` or `resume` of the ledger does), and how many are left after it.
`python sandbox_start_killer.py probe STEP_S N` does the same to the engine's start-up probe.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from loopproof.engine.system import limits
from loopproof.engine.system.limits import Hold, ResourceLimits
from loopproof.engine.system.process import run_command
from loopproof.engine.system.sandbox import Confinement, View, backend


def marked(marker: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                pass
    return out


def kill_at_moments(engine: Callable[[], object], step: float, n: int,
                    left: Callable[[], list[int]] = list) -> set[int]:
    """Fork n engines running `engine()`, SIGKILL the i-th i * step seconds after its fork;
    the processes `left()` names right after each kill (before any other engine reaps them)."""
    seen: set[int] = set()
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                engine()
            finally:
                os._exit(0)
        time.sleep(i * step)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        seen |= set(left())
    time.sleep(0.2)
    return seen


def children() -> set[int]:
    out: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        out |= {int(p) for p in (task / "children").read_text().split()}
    return out


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state == "Z":
            os.waitpid(pid, 0)
        else:
            out.add(pid)
    return out


def probes(step: str, n: str) -> None:
    """`probe STEP N`: the same for the engine's start-up probe of bwrap (`_probe`), killed at
    N moments; this process is the orphans' subreaper, so they become its children. Then a new
    probe (which reaps what dead engines' probes left) and a count."""
    from loopproof.engine.system.sandbox.bwrap import _probe
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    program = backend("bwrap").program
    assert program is not None
    limits.mechanisms()
    kill_at_moments(lambda: _probe(program), float(step), int(n))
    after_kills = len(alive(children()))
    assert _probe(program) is None
    time.sleep(0.2)
    print(json.dumps({"after_kills": after_kills, "after_reap": len(alive(children()))}))


def main() -> None:
    if sys.argv[1] == "probe":
        probes(*sys.argv[2:4])
        return
    owner, marker, workspace, step, n = sys.argv[1:6]
    box = backend("bwrap")
    assert box.problem() is None  # probed here, once: not in the children that are killed
    limits.mechanisms()
    hold = Hold(ResourceLimits(memory_bytes=256 << 20, processes=64), owner, "start",
                Path(workspace))
    confine = Confinement(box, View(writable=(Path(workspace),)), hold=hold)
    seen = kill_at_moments(lambda: run_command(["/bin/sh", "-c", "sleep 30", marker],
                                               Path(workspace), 60, confine=confine),
                           float(step), int(n), lambda: marked(marker))
    after_kills = len(marked(marker))
    reaped = limits.reap(owner)
    time.sleep(0.2)
    print(json.dumps({"left_by_a_kill": len(seen), "after_kills": after_kills,
                      "reaped": reaped, "after_reap": len(marked(marker))}))


if __name__ == "__main__":
    main()
