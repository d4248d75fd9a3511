"""The cgroup v2 adapter: one cgroup per command in the unified hierarchy, below our own.

Where v2 has the `memory` and `pids` controllers for us (our cgroup may enable them for its
children: the root, or a delegated cgroup), it holds those limits (`memory.max`,
`memory.swap.max` = 0, `memory.oom.group`, `pids.max`; hits counted in `memory.events`'
`oom_kill` and `pids.events`' `max`). Even without them (a hybrid host, whose v2 hierarchy has no
controllers) a v2 cgroup is the exact lifecycle: every process of the command is in it whatever
it does, and `cgroup.kill` kills them all at once.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.limits import cgroupfs
from loopproof.engine.system.limits.base import LIFECYCLE, MEMORY, PROCESSES, ResourceLimits

_CONTROLLERS = {MEMORY: "memory", PROCESSES: "pids"}


@dataclass
class V2Group:
    folder: Path

    def join_files(self) -> tuple[str, ...]:
        return (str(self.folder / "cgroup.procs"),)

    def hit(self) -> str | None:
        if cgroupfs.counter(self.folder / "memory.events", "oom_kill") > 0:
            return MEMORY
        if cgroupfs.counter(self.folder / "pids.events", "max") > 0:
            return PROCESSES
        return None

    def pids(self) -> set[int]:
        return cgroupfs.procs(self.folder)

    def kill(self) -> bool:
        return cgroupfs.kill_all(self.folder, with_kill_file=True)

    def remove(self) -> None:
        cgroupfs.remove(self.folder)


class CgroupV2:
    name = "cgroup-v2"

    def __init__(self) -> None:
        self.base = cgroupfs.own_folder("cgroup2", "")
        self._holds: frozenset[str] | None = None

    def holds(self) -> frozenset[str]:
        if self._holds is None:
            self._holds = self._probe()
        return self._holds

    def _probe(self) -> frozenset[str]:
        if self.base is None:
            return frozenset()
        probe = self.base / cgroupfs.new_name("probe")
        try:
            probe.mkdir()
        except OSError:
            return frozenset()
        got = {LIFECYCLE} if (probe / "cgroup.kill").exists() else set()
        try:
            for kind, ctrl in _CONTROLLERS.items():
                if ctrl in cgroupfs.read(self.base / "cgroup.controllers").split():
                    with contextlib.suppress(OSError):  # EBUSY: our cgroup has processes
                        if ctrl not in cgroupfs.read(self.base / "cgroup.subtree_control").split():
                            cgroupfs.write(self.base / "cgroup.subtree_control", f"+{ctrl}")
                    if ctrl in cgroupfs.read(probe / "cgroup.controllers").split():
                        got.add(kind)
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
        return frozenset(got)

    def open(self, owner: str, label: str, limits: ResourceLimits) -> V2Group:
        assert self.base is not None
        run = cgroupfs.run_folder(self.base, owner)
        run.mkdir(exist_ok=True)
        want = [_CONTROLLERS[k] for k in (MEMORY, PROCESSES) if k in self.holds()]
        if want:  # the run folder holds no process, so it may pass the controllers on
            have = cgroupfs.read(run / "cgroup.subtree_control").split()
            missing = " ".join(f"+{c}" for c in want if c not in have)
            if missing:
                cgroupfs.write(run / "cgroup.subtree_control", missing)
        group = V2Group(run / cgroupfs.new_name(label))
        group.folder.mkdir()
        try:
            if MEMORY in self.holds() and limits.memory_bytes is not None:
                cgroupfs.write(group.folder / "memory.max", str(limits.memory_bytes))
                for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if (group.folder / name).exists():
                        cgroupfs.write(group.folder / name, value)
            if PROCESSES in self.holds() and limits.processes is not None:
                cgroupfs.write(group.folder / "pids.max", str(limits.processes))
        except OSError:
            group.remove()
            raise
        return group

    def stale(self) -> list[V2Group]:
        return [V2Group(p) for p in cgroupfs.stale(self.base)]

    def leftovers(self, owner: str) -> list[V2Group]:
        if self.base is None:
            return []
        return [V2Group(p) for p in cgroupfs.children(cgroupfs.run_folder(self.base, owner))]
