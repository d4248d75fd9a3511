"""The last fallback: rlimits set on the command's first process and inherited by every process
it starts (`prlimit`, util-linux, which sets them and execs the command).

Weaker than a cgroup, and recorded as such: RLIMIT_AS caps each process's address space, not the
group's memory (N processes may use N times it); RLIMIT_NPROC counts every process of the user,
not of the command, and the kernel does not apply it to root. Each is used only where no cgroup
holds that limit. RLIMIT_FSIZE is not used for the workspace: a write past it kills the writer by
SIGXFSZ, which nothing outside the command can tell from a crash, and a sparse file past the
workspace limit must be seen (the watch does) and refused by the judged-tree check, not leave a
short file behind that passes.
"""

from __future__ import annotations

import shutil

from loopproof.engine.system.limits.base import MEMORY, PROCESSES, ResourceLimits

PRLIMIT = shutil.which("prlimit") or ""
NAME = "rlimit"


def prefix(limits: ResourceLimits, kinds: frozenset[str]) -> tuple[str, ...]:
    """The `prlimit ... --` argv prefix setting the rlimits of `kinds` (empty: none to set, or
    no prlimit on this host)."""
    flags: list[str] = []
    if MEMORY in kinds and limits.memory_bytes is not None:
        flags.append(f"--as={limits.memory_bytes}")
    if PROCESSES in kinds and limits.processes is not None:
        flags.append(f"--nproc={limits.processes}")
    if not flags or not PRLIMIT:
        return ()
    return (PRLIMIT, *flags, "--")


def available() -> bool:
    return bool(PRLIMIT)
