"""Resource limits per command, and the cell that holds every process of one command.

A `Hold` says what one kind of command of a run may use (`ResourceLimits`), whose it is (the
run's `owner` key, from its ledger's path) and which workspace to watch. `run_command` opens a
`Cell` for it around the command: the command's first process joins a fresh cgroup of each
mechanism that holds something here (engine/system/limits/cgroup_v2.py, cgroup_v1.py) before it
execs the sandbox, so everything it ever starts is inside; rlimits (engine/system/limits/
rlimits.py) cover what no cgroup holds; bwrap's `--size` caps each private temp folder; the
workspace's size is polled (engine/system/limits/watch.py). Which mechanism held each limit is in
`Cell.held`, which the ledger records with the attempt.

When the command ends, whatever way, the cell kills every process still in its cgroup and waits
until it is empty, so no process of an attempt outlives it (a bubblewrap half-way through its
set-up included: its child waits on an eventfd that a killed parent never writes, and only a
cgroup still knows it is there). If the engine itself is killed, the cgroups stay, and the next
`run` or `resume` of that ledger kills what is in them (`reap`).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.limits import rlimits
from loopproof.engine.system.limits.base import (
    KINDS,
    LIFECYCLE,
    MEMORY,
    PROCESSES,
    TMP,
    WORKSPACE,
    Group,
    Mechanism,
    ResourceLimits,
    size_text,
)
from loopproof.engine.system.limits.cgroup_v1 import CgroupV1
from loopproof.engine.system.limits.cgroup_v2 import CgroupV2
from loopproof.engine.system.limits.watch import TmpWatch, WorkspaceWatch, descendants

SH = "/bin/sh"
JOIN_FAILED = 125  # the wrapper's exit code when it could not join a cgroup
JOIN_WORDS = "loopproof: cannot join the command's cgroup"
# Joins every cgroup file given before "--", then execs the rest (the pid stays the same).
_JOIN = (f'while [ "$1" != -- ]; do echo $$ > "$1" || {{ echo "{JOIN_WORDS} $1" >&2; '
         f'exit {JOIN_FAILED}; }}; shift; done; shift; exec "$@"')

_mechanisms: list[Mechanism] | None = None


def mechanisms() -> list[Mechanism]:
    """The cgroup mechanisms of this host that a command joins, best first (probed once per
    process). A mechanism that would only add the lifecycle another one already gives is left
    out: every cgroup joined costs the command's start a migration (a few ms of waiting on the
    kernel), and any one cgroup holds every process of the command."""
    global _mechanisms
    if _mechanisms is None:
        found: list[Mechanism] = [m for m in (CgroupV2(), CgroupV1()) if m.holds()]
        limiting = [m for m in found if m.holds() - {LIFECYCLE}]
        _mechanisms = limiting or found[:1]
    return _mechanisms


def owner_of(ledger: Path | str) -> str:
    """A run's key in cgroup names: from its ledger's absolute path."""
    return hashlib.sha256(os.fsencode(os.path.abspath(ledger))).hexdigest()[:16]


@dataclass(frozen=True)
class Hold:
    """The limits of one kind of command of a run (a node's worker, its gate)."""

    limits: ResourceLimits
    owner: str
    label: str
    workspace: Path | None = None  # watched against limits.workspace_bytes while it runs


def holders(limits: ResourceLimits, *, sized_tmp: bool) -> dict[str, str]:
    """Which mechanism holds each limit that is set, here: "cgroup-v2", "cgroup-v1", "rlimit",
    "bwrap-size", "watch" or "none"; and which kills the command's processes
    (LIFECYCLE)."""
    out: dict[str, str] = {}
    for kind in (MEMORY, PROCESSES):
        if limits.value(kind) is not None:
            out[kind] = next((m.name for m in mechanisms() if kind in m.holds()),
                             rlimits.NAME if rlimits.available() else "none")
    if limits.tmp_bytes is not None:
        out[TMP] = "bwrap-size" if sized_tmp else "none"
    if limits.workspace_bytes is not None:
        out[WORKSPACE] = "watch"
    out[LIFECYCLE] = next((m.name for m in mechanisms() if LIFECYCLE in m.holds()),
                          "process-group")
    return out


class Cell:
    """Every process of one command: see the module docstring."""

    def __init__(self, hold: Hold, tmpfs: Sequence[str] = ()) -> None:
        self.hold, self.limits = hold, hold.limits
        self.held = holders(self.limits, sized_tmp=bool(tmpfs))
        self.groups: list[Group] = []
        for mech in mechanisms():
            try:
                self.groups.append(mech.open(hold.owner, hold.label, self.limits))
            except OSError:  # this one cannot hold it now: the next one, or rlimits, will
                for kind, name in self.held.items():
                    if name == mech.name:
                        self.held[kind] = "none"
        self.rlimit_kinds = frozenset(k for k, v in self.held.items() if v == rlimits.NAME)
        self.workspace = (WorkspaceWatch(hold.workspace, self.limits.workspace_bytes)
                          if hold.workspace is not None and self.limits.workspace_bytes is not None
                          else None)
        self.tmp = (TmpWatch(tuple(tmpfs), self.limits.tmp_bytes)
                    if tmpfs and self.limits.tmp_bytes is not None else None)
        self.hit: str | None = None
        self.ended = False

    def hold_tmp(self, leader: int, until: float, ended: Callable[[], bool]) -> bool:
        """Open the sized temp folders of the command's sandbox while it waits before the
        command (`Launch.release` then lets it go): a folder the command fills is seen full
        however soon the command ends. True once they are held (or there are none); False when
        the sandbox ended first or `until` passed (the folders' size still caps them; only
        the name of the limit could then be missed)."""
        if self.tmp is None:
            return True
        while True:
            self.tmp.find(self.pids() or descendants(leader))
            if self.tmp.fds:
                return True
            if ended() or time.monotonic() >= until:
                return False
            time.sleep(0.001)

    def wrap(self, argv: Sequence[str]) -> tuple[str, ...]:
        """`argv` as the cell starts it: joined to its cgroups, under its rlimits."""
        inner = (*rlimits.prefix(self.limits, self.rlimit_kinds), *argv)
        files = [f for g in self.groups for f in g.join_files()]
        if not files:
            return tuple(inner)
        return (SH, "-c", _JOIN, "sh", *files, "--", *inner)

    def breach(self, *, final: bool = False) -> str | None:
        """The limit the command hit, in words ("memory limit 256 MiB"), or None. `final`:
        the command has ended; look once more at everything."""
        if self.hit is None:
            self.hit = self._check(final)
        return None if self.hit is None else self._words(self.hit)

    def _check(self, final: bool) -> str | None:
        for g in self.groups:
            if (kind := g.hit()) is not None:
                return kind
        if self.tmp is not None:
            if not final:
                self.tmp.find(self.pids())
            if self.tmp.full():
                return TMP
        if self.workspace is not None and self.workspace.over(force=final):
            return WORKSPACE
        return None

    def _words(self, kind: str) -> str:
        return self.limits.text(kind)

    def pids(self) -> set[int]:
        out: set[int] = set()
        for g in self.groups:
            out |= g.pids()
        return out

    def end(self) -> bool:
        """Kill every process left in the cell, wait until it is empty, remove its cgroups.
        True if it emptied (a cgroup that did not is left for `reap`)."""
        if self.ended:
            return True
        self.ended = True
        if self.tmp is not None:
            self.tmp.close()
        empty = all([g.kill() for g in self.groups])
        if empty:
            for g in self.groups:
                g.remove()
        return empty


def reap(owner: str) -> int:
    """Kill every process left in the cgroups of `owner` (a run whose engine was killed) and
    remove those cgroups; the number of processes found."""
    found: set[int] = set()
    for mech in mechanisms():
        for group in mech.leftovers(owner):
            found |= group.pids()
            if group.kill():
                group.remove()
    return len(found)


def probe_hold() -> Hold:
    """The hold of this engine's start-up probe of its sandbox (engine/system/sandbox/bwrap.py):
    a bwrap killed with the engine half-way through its set-up stays in it, and a later
    engine reaps it (`reap_dead`)."""
    return Hold(ResourceLimits(processes=16), f"probe-{os.getpid()}", "probe")


def reap_dead() -> int:
    """Kill what is left in the cgroups of engines that are gone, whatever their run (a test's
    ledger that no one resumes, a probe), and remove those cgroups; the processes found. Every
    engine does this once, at its first sandbox probe."""
    found: set[int] = set()
    for mech in mechanisms():
        for group in mech.stale():
            found |= group.pids()
            if group.kill():
                group.remove()
    return len(found)


__all__ = ["JOIN_FAILED", "JOIN_WORDS", "KINDS", "LIFECYCLE", "MEMORY", "PROCESSES", "TMP",
           "WORKSPACE", "Cell", "Hold", "ResourceLimits", "holders", "mechanisms", "owner_of",
           "probe_hold", "reap", "reap_dead", "size_text"]
