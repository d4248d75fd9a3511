"""Run a command as a child process and measure it: wall seconds, CPU seconds, peak memory.

Why `os.wait4`: it returns the resource use of that one child (peak RSS included), where
`getrusage(RUSAGE_CHILDREN)` would mix every child the benchmark ever waited for.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    peak_mib: float
    returncode: int
    stdout: bytes


def measure(argv: Sequence[str], cwd: Path | None = None, env: dict | None = None) -> Measured:
    t = time.perf_counter()
    p = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    out = p.stdout.read() if p.stdout else b""
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.stdout:
        p.stdout.close()
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                    p.returncode, out)


def best(argv: Sequence[str], repeat: int, **kw: object) -> Measured:
    """The fastest of `repeat` runs (the machine may be shared); peak memory is the largest."""
    runs = [measure(argv, **kw) for _ in range(repeat)]  # type: ignore[arg-type]
    fastest = min(runs, key=lambda m: m.wall_s)
    return Measured(fastest.wall_s, min(m.cpu_s for m in runs),
                    max(m.peak_mib for m in runs), fastest.returncode, fastest.stdout)
