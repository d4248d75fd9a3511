"""Kill an engine at many moments of its sandbox's start (run by test_sandbox_start_kills.py).

`python sandbox_start_killer.py OWNER MARKER WORKSPACE STEP_S N`: for i in 0..N-1, fork a child
that runs one sandboxed command (`sh -c "sleep 30" MARKER`) the way an attempt does (bwrap, in a cell
of OWNER, engine/system/limits/), and SIGKILL that child i * STEP_S seconds after the fork: the
engine dies before, during or after bubblewrap's set-up. Prints one JSON line: how many
processes carrying MARKER were alive after the kills, and how many after `reap(OWNER)` (what
the next `run` or `resume` of the ledger does), then the same count once more.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from engine.system import limits
from engine.system.limits import Hold, ResourceLimits
from engine.system.process import run_command
from engine.system.sandbox import Confinement, View, backend


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


def main() -> None:
    owner, marker, workspace, step, n = sys.argv[1:6]
    box = backend("bwrap")
    assert box.problem() is None  # probed here, once: not in the children that are killed
    limits.mechanisms()
    hold = Hold(ResourceLimits(memory_bytes=256 << 20, processes=64), owner, "start",
                Path(workspace))
    confine = Confinement(box, View(writable=(Path(workspace),)), hold=hold)
    for i in range(int(n)):
        pid = os.fork()
        if pid == 0:
            try:
                run_command(["/bin/sh", "-c", "sleep 30", marker], Path(workspace), 60,
                            confine=confine)
            finally:
                os._exit(0)
        time.sleep(i * float(step))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    time.sleep(0.2)
    after_kills = len(marked(marker))
    if os.environ.get("KILLER_DEBUG"):
        for p in marked(marker):
            st = Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()
            print(p, st[0], "ppid", st[1], Path(f"/proc/{p}/cmdline").read_bytes()[:60], file=sys.stderr)
    reaped = limits.reap(owner)
    time.sleep(0.2)
    print(json.dumps({"after_kills": after_kills, "reaped": reaped,
                      "after_reap": len(marked(marker))}))


if __name__ == "__main__":
    main()
