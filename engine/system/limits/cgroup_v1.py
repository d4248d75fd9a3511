"""The cgroup v1 adapter: the `memory` and `pids` hierarchies, where that is what the host has
(cgroup v2 mounted without those controllers, as on hybrid hosts).

Per command, one cgroup in each hierarchy found, below our own: `memory.limit_in_bytes` (and
`memory.memsw.limit_in_bytes`, so swap is no way around it) and `pids.max`. The kernel then
OOM-kills inside the group at the memory limit (counted in `memory.oom_control`'s `oom_kill`)
and refuses a fork past the process limit (counted in `pids.events`'s `max`). v1 has no
`cgroup.kill`: `kill` kills round by round until the group is empty.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.limits import cgroupfs
from loopproof.engine.system.limits.base import LIFECYCLE, MEMORY, PROCESSES, ResourceLimits


@dataclass
class V1Group:
    memory: Path | None
    tasks: Path | None  # the `pids` hierarchy's cgroup

    def folders(self) -> list[Path]:
        return [f for f in (self.memory, self.tasks) if f is not None]

    def join_files(self) -> tuple[str, ...]:
        return tuple(str(f / "cgroup.procs") for f in self.folders())

    def hit(self) -> str | None:
        if self.memory is not None and cgroupfs.counter(self.memory / "memory.oom_control",
                                                        "oom_kill") > 0:
            return MEMORY
        if self.tasks is not None and cgroupfs.counter(self.tasks / "pids.events", "max") > 0:
            return PROCESSES
        return None

    def pids(self) -> set[int]:
        out: set[int] = set()
        for f in self.folders():
            out |= cgroupfs.procs(f)
        return out

    def kill(self) -> bool:
        return all([cgroupfs.kill_all(f, with_kill_file=False) for f in self.folders()])

    def remove(self) -> None:
        for f in self.folders():
            cgroupfs.remove(f)


class CgroupV1:
    name = "cgroup-v1"

    def __init__(self) -> None:
        self.memory_base = cgroupfs.own_folder("cgroup", "memory")
        self.pids_base = cgroupfs.own_folder("cgroup", "pids")
        self._holds: frozenset[str] | None = None

    def holds(self) -> frozenset[str]:
        if self._holds is None:
            self._holds = self._probe()
        return self._holds

    def _probe(self) -> frozenset[str]:
        """What we may make here: a cgroup below our own, made and removed once."""
        got: set[str] = set()
        for kind, base in ((MEMORY, self.memory_base), (PROCESSES, self.pids_base)):
            if base is None:
                continue
            probe = base / cgroupfs.new_name("probe")
            try:
                probe.mkdir()
            except OSError:
                continue
            ok = (probe / ("memory.limit_in_bytes" if kind == MEMORY else "pids.max")).exists()
            with contextlib.suppress(OSError):
                probe.rmdir()
            if ok:
                got.add(kind)
        if got:
            got.add(LIFECYCLE)
        return frozenset(got)

    def open(self, owner: str, label: str, limits: ResourceLimits) -> V1Group:
        name = cgroupfs.new_name(label)
        group = V1Group(None, None)
        try:
            if MEMORY in self.holds() and self.memory_base is not None:
                group.memory = _make(cgroupfs.run_folder(self.memory_base, owner), name)
                if limits.memory_bytes is not None:
                    cgroupfs.write(group.memory / "memory.limit_in_bytes", str(limits.memory_bytes))
                    sw = group.memory / "memory.memsw.limit_in_bytes"
                    if sw.exists():
                        cgroupfs.write(sw, str(limits.memory_bytes))
            if PROCESSES in self.holds() and self.pids_base is not None:
                group.tasks = _make(cgroupfs.run_folder(self.pids_base, owner), name)
                if limits.processes is not None:
                    cgroupfs.write(group.tasks / "pids.max", str(limits.processes))
        except OSError:
            group.remove()
            raise
        return group

    def stale(self) -> list[V1Group]:
        return ([V1Group(p, None) for p in cgroupfs.stale(self.memory_base)]
                + [V1Group(None, p) for p in cgroupfs.stale(self.pids_base)])

    def leftovers(self, owner: str) -> list[V1Group]:
        out: list[V1Group] = []
        for base, memory in ((self.memory_base, True), (self.pids_base, False)):
            if base is not None:
                out += [V1Group(p, None) if memory else V1Group(None, p)
                        for p in cgroupfs.children(cgroupfs.run_folder(base, owner))]
        return out


def _make(run: Path, name: str) -> Path:
    folder = run / name
    for _ in range(3):  # another engine's `remove` may take the empty run folder meanwhile
        run.mkdir(exist_ok=True)
        try:
            folder.mkdir()
            return folder
        except FileNotFoundError:
            continue
    folder.mkdir()
    return folder
