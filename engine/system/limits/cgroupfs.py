"""The cgroup file system as both adapters (engine/system/limits/cgroup_v1.py, cgroup_v2.py) use
it: where a hierarchy is mounted, this process's own cgroup in it, and one cgroup folder's
processes, kill and removal.

Why our own cgroup and not the root: a cgroup made below our own stays inside whatever limits
the host put on us (the engine's session, a container), and needs no more rights than those.
Each run has a folder `loopproof-<owner>` below it, one cgroup per command inside that, so a
later run or resume of the same ledger finds what a killed engine left (`leftovers`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from pathlib import Path

DRAIN_S = 5.0  # how long a kill waits for a cgroup to empty (a process in an uninterruptible
#                system call dies when it leaves it)
PREFIX = "loopproof-"
_serial = itertools.count()


def mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount point, root, super options) of every cgroup and cgroup2 mount."""
    out = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            parts, rest = left.split(), right.split()
            if len(parts) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                out.append((rest[0], _unescape(parts[4]), _unescape(parts[3]),
                            set(rest[2].split(","))))
    return out


def _unescape(s: str) -> str:
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace(
        "\\134", "\\")


def own_paths() -> dict[str, str]:
    """This process's cgroup per hierarchy: controller name (or "" for cgroup2) -> path."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _id, ctrls, path = line.split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    return out


def own_folder(fstype: str, controller: str) -> Path | None:
    """The folder of our own cgroup in the hierarchy of `controller` ("" and fstype cgroup2: the
    unified one), or None when it is not mounted here or not under the mount's root."""
    own = own_paths().get(controller)
    if own is None:
        return None
    for kind, point, root, opts in mounts():
        if kind != fstype or (fstype == "cgroup" and controller not in opts):
            continue
        if own == root or root == "/" or own.startswith(root.rstrip("/") + "/"):
            rel = os.path.relpath(own, root).lstrip(".").lstrip("/") if own != root else ""
            folder = Path(point) / rel if rel else Path(point)
            if folder.is_dir():
                return folder
    return None


def _pid_ns() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def new_name(label: str) -> str:
    """A cgroup name for one command: its label, this engine's PID namespace and pid, and a
    serial number (so any later engine can tell that the engine that made it is gone)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:80] or "cmd"
    return f"{safe}-{_pid_ns()}-{os.getpid()}-{next(_serial)}"


def made_by_dead_engine(name: str) -> bool:
    """Was the cgroup `name` made by an engine of our PID namespace that no longer runs? (An
    engine of another namespace, or a name of another form, is never judged dead.)"""
    parts = name.rsplit("-", 3)
    if len(parts) != 4 or not all(p.isdigit() for p in parts[1:]):
        return False
    ns, pid = int(parts[1]), int(parts[2])
    return ns == _pid_ns() != 0 and pid != os.getpid() and not os.path.exists(f"/proc/{pid}")


def stale(base: Path | None) -> list[Path]:
    """The command cgroups below `base` made by engines that are gone."""
    if base is None:
        return []
    return [g for run in children(base) if run.name.startswith(PREFIX)
            for g in children(run) if made_by_dead_engine(g.name)]


def run_folder(base: Path, owner: str) -> Path:
    return base / f"{PREFIX}{owner}"


def write(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def counter(path: Path, key: str) -> int:
    """The value of `key` in a flat-keyed file such as memory.events ("oom_kill 1")."""
    for line in read(path).splitlines():
        k, _, v = line.partition(" ")
        if k == key and v.strip().isdigit():
            return int(v)
    return 0


def procs(folder: Path) -> set[int]:
    return {int(p) for p in read(folder / "cgroup.procs").split() if p.isdigit()}


def kill_all(folder: Path, *, with_kill_file: bool) -> bool:
    """SIGKILL every process in `folder` (v2: its `cgroup.kill`, which takes every process at
    once; else round by round, each round killing what is there: a process cannot leave the
    cgroup, and a fork between two rounds is killed in the next), then wait at most DRAIN_S
    until it is empty. True if it is."""
    deadline = time.monotonic() + DRAIN_S
    kill_file = folder / "cgroup.kill"
    used_file = False
    if with_kill_file and kill_file.exists():
        with contextlib.suppress(OSError):
            write(kill_file, "1")
            used_file = True
    while True:
        left = procs(folder)
        if not left:
            return True
        if time.monotonic() >= deadline:
            return False
        if not used_file:
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def remove(folder: Path) -> None:
    """Remove an empty cgroup folder and, if it is now empty too, its run folder."""
    with contextlib.suppress(OSError):
        folder.rmdir()
    if folder.parent.name.startswith(PREFIX):
        with contextlib.suppress(OSError):
            folder.parent.rmdir()


def children(folder: Path) -> list[Path]:
    with contextlib.suppress(OSError):
        return sorted(p for p in folder.iterdir() if p.is_dir())
    return []

