"""Run a command as a child process and measure it: wall seconds, CPU seconds, peak memory.

Why `os.wait4`: it returns the resource use of that one child (peak RSS included), where
`getrusage(RUSAGE_CHILDREN)` would mix every child the benchmark ever waited for. Why through a
fresh interpreter (`python -m bench.child OUT ARGV...`): Linux counts in a child's peak RSS the
pages of the process it was forked from, before its exec, so a command forked by a benchmark that
holds a large ledger would be charged that ledger; the small measurer forks the command instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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
    """Run `argv` from a fresh measuring interpreter (see the module docstring)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as note:
        p = subprocess.run([sys.executable, "-m", "bench.child", note.name, *argv], cwd=cwd,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        got = json.loads(Path(note.name).read_text() or "null")
    if got is None:
        raise RuntimeError(f"the measurer failed for {argv[0]} (exit {p.returncode})")
    return Measured(got["wall_s"], got["cpu_s"], got["peak_mib"], got["returncode"], p.stdout)


def _direct(argv: Sequence[str]) -> dict[str, float | int]:
    t = time.perf_counter()
    p = subprocess.Popen(list(argv))  # stdout: the measurer's, which the benchmark reads
    _, status, usage = os.wait4(p.pid, 0)
    return {"wall_s": time.perf_counter() - t, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_mib": usage.ru_maxrss / 1024, "returncode": os.waitstatus_to_exitcode(status)}


def best(argv: Sequence[str], repeat: int, **kw: object) -> Measured:
    """The fastest of `repeat` runs (the machine may be shared); peak memory is the largest."""
    runs = [measure(argv, **kw) for _ in range(repeat)]  # type: ignore[arg-type]  # measure's own
    fastest = min(runs, key=lambda m: m.wall_s)
    return Measured(fastest.wall_s, min(m.cpu_s for m in runs),
                    max(m.peak_mib for m in runs), fastest.returncode, fastest.stdout)


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(_direct(sys.argv[2:])))
