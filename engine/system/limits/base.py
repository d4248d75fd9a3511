"""What one command may use (memory, processes, its private temp folders, its workspace), and
the one interface every mechanism that holds a limit implements.

Why an interface with one adapter per mechanism: the kernel offers different tools on different
hosts (cgroup v2 with its controllers, cgroup v1 `memory` and `pids` hierarchies, only rlimits),
and the engine must say which one held each attempt. A `Mechanism` is asked what it can hold
here; each command then gets a `Group` of it (a cgroup, one per command) that its processes
join before the command runs, that says when a limit was hit, and that kills every process in
it, however it was started (the per-command group is also what makes "no process outlives its
attempt" exact: a process cannot leave a cgroup).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

MEMORY, PROCESSES, TMP, WORKSPACE = "memory", "processes", "tmp", "workspace"
KINDS = (MEMORY, PROCESSES, TMP, WORKSPACE)
LIFECYCLE = "lifecycle"  # not a limit: which mechanism kills every process of a command

MiB = 1 << 20
GiB = 1 << 30


def size_text(n: int) -> str:
    """Bytes in words: "256 MiB", "1.5 GiB", "4097 bytes"."""
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (1 << 10, "KiB")):
        if n >= unit and (n * 10) % unit == 0:
            v = n / unit
            return f"{int(v) if v == int(v) else v} {name}"
    return f"{n} bytes"


@dataclass(frozen=True)
class ResourceLimits:
    """The limits of one node's commands (None: not limited). `memory_bytes` covers every
    process of the command together, its private temp folders' pages included (tmpfs is memory);
    `processes` the processes and threads alive at once; `tmp_bytes` each private temp folder
    (`/tmp`, `/var/tmp`, `/dev/shm`, ...); `workspace_bytes` what the workspace's files may add
    up to at any moment while the command runs."""

    memory_bytes: int | None = None
    processes: int | None = None
    tmp_bytes: int | None = None
    workspace_bytes: int | None = None

    def value(self, kind: str) -> int | None:
        got: int | None = getattr(self, {MEMORY: "memory_bytes", PROCESSES: "processes",
                              TMP: "tmp_bytes", WORKSPACE: "workspace_bytes"}[kind])
        return got

    def text(self, kind: str) -> str:
        """The limit in words, as the ledger and `loopproof show` say it: "memory limit 256 MiB"."""
        v = self.value(kind)
        if kind == PROCESSES:
            return f"process limit {v}"
        return f"{kind} limit {size_text(v) if v is not None else 'none'}"

    def record(self) -> dict[str, int | None]:
        return {"memory_bytes": self.memory_bytes, "processes": self.processes,
                "tmp_bytes": self.tmp_bytes, "workspace_bytes": self.workspace_bytes}


class Group(Protocol):
    """One command's processes, as one mechanism holds them (one cgroup)."""

    def join_files(self) -> tuple[str, ...]:
        """Files a process writes its pid into to join (before it runs the command)."""
        ...

    def hit(self) -> str | None:
        """The kind of limit the kernel enforced (MEMORY: an OOM kill; PROCESSES: a refused
        fork), or None."""
        ...

    def pids(self) -> set[int]:
        """The processes in it now."""
        ...

    def kill(self) -> bool:
        """SIGKILL every process in it and wait (briefly) until it is empty; True if empty."""
        ...

    def remove(self) -> None:
        """Remove the (empty) group; a group that cannot be removed is left for `reap`."""
        ...


class Mechanism(Protocol):
    """A way to hold limits on this host: `holds()` says which (MEMORY, PROCESSES, LIFECYCLE)."""

    name: str

    def holds(self) -> frozenset[str]: ...

    def open(self, owner: str, label: str, limits: ResourceLimits) -> Group:
        """A fresh group for one command of `owner` (a run's key), limits set; OSError if it
        cannot be made."""
        ...

    def stale(self) -> Sequence[Group]:
        """The groups of any owner made by an engine that is gone (engine/system/limits/
        cgroupfs.py names each group after the engine's PID namespace and pid)."""
        ...

    def leftovers(self, owner: str) -> Sequence[Group]:
        """The groups of `owner` still there (an engine that died left them)."""
        ...
