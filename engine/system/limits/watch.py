"""What no kernel counter says while a command runs: how much its workspace holds, and whether
a private temp folder of its sandbox is full.

Why a poll with a budget: a workspace is a folder of the host's disk, which no cgroup meters
and no mount here caps. `WorkspaceWatch` walks it (entries' apparent sizes, as the judged-tree
limit counts them) at most every `min_interval_s`, and never more often than a walk's own time
times `SPARE` (the watch takes at most about 1/SPARE of a core however large the tree); between
two walks a worker may write what it writes in that time. `TmpWatch` holds a descriptor of each sized tmpfs of the sandbox (found through
a process inside it, opened while the sandbox waits before its command: `Cell.hold_tmp`), so the
folder's use can be read even after the sandbox has gone, however soon its command quit.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

SPARE = 20


class WorkspaceWatch:
    """A workspace may not grow past `limit` while its command runs. One that already holds
    more when the command starts (a previous attempt's files, which the worker may be about to
    remove) may not grow at all: the threshold is what it holds then."""

    def __init__(self, root: Path, limit: int, min_interval_s: float = 0.1) -> None:
        self.root, self.min_interval_s = os.fsencode(root), min_interval_s
        self.limit = max(limit, total_size(self.root)) if size_above(self.root, limit) else limit
        self.next_at = 0.0

    def over(self, *, now: float | None = None, force: bool = False) -> bool:
        """True once the workspace holds more than the limit (walked when it is time)."""
        now = time.monotonic() if now is None else now
        if not force and now < self.next_at:
            return False
        start = time.monotonic()
        over = size_above(self.root, self.limit)
        took = time.monotonic() - start
        self.next_at = time.monotonic() + max(self.min_interval_s, took * SPARE)
        return over


def total_size(root: bytes) -> int:
    """The apparent size of the regular files below `root`."""
    total = 0
    for size in _sizes(root):
        total += size
    return total


def size_above(root: bytes, limit: int) -> bool:
    """Do the regular files below `root` add up to more than `limit` bytes (apparent sizes; a
    walk that stops as soon as they do)? Symlinks are not followed."""
    total = 0
    for size in _sizes(root):
        total += size
        if total > limit:
            return True
    return False


def _sizes(root: bytes) -> Iterator[int]:
    stack = [root]
    while stack:
        folder = stack.pop()
        with contextlib.suppress(OSError), os.scandir(folder) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                elif stat.S_ISREG(st.st_mode):
                    yield st.st_size


class TmpWatch:
    """The sized tmpfs folders of one sandbox, by descriptor."""

    def __init__(self, paths: tuple[str, ...], size: int) -> None:
        self.paths, self.size = paths, size
        self.fds: list[int] = []
        self.host = {p: _dev(p) for p in paths}

    def find(self, pids: set[int]) -> None:
        """Open each folder as a process of the sandbox sees it, once its mounts are made (its
        folder is a tmpfs of exactly our size, not the host's folder)."""
        if self.fds:
            return
        for pid in sorted(pids):
            fds = []
            for p in self.paths:
                with contextlib.suppress(OSError):
                    fd = os.open(f"/proc/{pid}/root{p}", os.O_RDONLY | os.O_DIRECTORY)
                    st = os.fstatvfs(fd)
                    if (os.fstat(fd).st_dev != self.host.get(p)
                            and st.f_blocks * st.f_frsize == _pages(self.size)):
                        fds.append(fd)
                        continue
                    os.close(fd)
            if fds:
                self.fds = fds
                return

    def full(self) -> bool:
        """A folder with no free block left: the command filled it to its limit."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                if os.fstatvfs(fd).f_bfree == 0:
                    return True
        return False

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def descendants(pid: int) -> set[int]:
    """`pid` and every process below it (for a command that no cgroup holds).

    Why down from `pid`: each process's children are listed by the kernel
    (/proc/PID/task/TID/children), so the walk reads the command's own tree, a few files, where
    a scan of /proc reads one file per process of the machine (hundreds on a busy host, and
    `Cell.hold_tmp` asks every millisecond until the sandbox is up). A kernel without those
    lists (CONFIG_PROC_CHILDREN unset) gets the scan."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p in found:
            continue
        found.add(p)
        kids = _children(p)
        if kids is None:
            return _descendants_by_scan(pid)
        todo += kids
    return found


def _children(pid: int) -> list[int] | None:
    """The children of every thread of `pid`; [] for a process that is gone, None where the
    kernel keeps no such list."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            if os.path.isdir(f"/proc/{pid}/task/{tid}"):
                return None  # the thread is there, its list is not: no such lists here
        except OSError:
            continue
    return out


def _descendants_by_scan(pid: int) -> set[int]:
    """`descendants` from every process's parent, read from /proc/*/stat."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError), os.scandir("/proc") as it:
        for entry in it:
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat_line = f.read()
                parent = int(stat_line[stat_line.rindex(b")") + 2:].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo += children.get(p, [])
    return found


def _dev(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def _pages(n: int) -> int:
    page = os.sysconf("SC_PAGE_SIZE")
    return -(-n // page) * page
