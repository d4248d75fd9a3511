"""Judged trees: what a worker leaves for a gate, checked and copied on the engine's terms.

Why apart from engine/system/trees.py: every byte of a judged tree is a worker's, and the runner
stages it, hands it to successors and snapshots it for a command gate. So:

* *A judged tree holds folders and regular files only.* A symlink's text can be hashed, but it
  resolves to different files in each copy (the judged copy, the gate's snapshot, a successor's
  inputs/), or to files outside the tree that change later or that a successor writes through;
  so `copy_judged` and `scan` refuse a symlink anywhere (`TreeRefused`). Special files are left
  out of every copy, so staged = judged = handed off still holds.
* *Bounded work.* `scan` checks a tree against `Limits` (entries, bytes, depth) with `lstat`
  alone, before anything is copied; `copy_judged` enforces the same limits while it copies (the
  tree may grow meanwhile), copies at most a file's size when opened, and keeps sparse files
  sparse (only data extents are copied).
* *Names are bytes, walks are iterative.* A file name that is not UTF-8 is checked and copied
  like any other (`shown()` turns it into text for a message), and a tree nested thousands of
  levels deep is refused by its depth, never by a RecursionError.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.trees import _b, _entries, shown

DEFAULT_MAX_FILES = 10_000              # entries (files and folders) in one workspace
DEFAULT_MAX_BYTES = 256 * 1024 * 1024   # apparent size of its regular files
MAX_DEPTH = 64                          # folder levels below the workspace
_CHUNK = 1 << 20


class TreeRefused(Exception):
    """A tree the engine will not judge or hand on: a symlink in it, more entries, bytes or
    levels than its limits, or an entry it cannot read. The message names the entry and the fix;
    the attempt's verdict is an `error`."""


@dataclass(frozen=True)
class Limits:
    """What one staged tree may hold (checked before copying, and again while copying)."""

    max_files: int = DEFAULT_MAX_FILES
    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = MAX_DEPTH


@dataclass(frozen=True)
class TreeSize:
    files: int  # entries: regular files and folders below the root
    bytes: int  # apparent size of the regular files
    skipped: int  # special files (FIFOs, sockets, devices), left out of every copy


def _refuse_link(root: bytes, path: bytes) -> TreeRefused:
    try:
        target = shown(os.readlink(path))
    except OSError:
        target = "?"
    rel = shown(os.path.relpath(path, root))
    return TreeRefused(f"symlink {rel} -> {target}: a judged tree holds only folders and "
                       f"regular files (a link resolves to different files in each copy); fix: "
                       f"write a regular file or folder instead of a link (cp, not ln -s)")


def _walk(root: bytes, limits: Limits | None, *, skip: frozenset[bytes] = frozenset(),
          refuse_links: bool = True) -> Iterator[tuple[bytes, os.stat_result, int]]:
    """(path, lstat, depth) of every entry below `root`, folders before their contents, names
    in byte order; symlinks refused (or yielded, not followed); `skip`: top-level names left
    out; limits checked as it goes."""
    stack: list[tuple[bytes, int]] = [(root, 0)]
    files = total = 0
    while stack:
        folder, depth = stack.pop()
        subdirs = []
        for entry in _entries(folder):
            if depth == 0 and entry.name in skip:
                continue
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) and refuse_links:
                raise _refuse_link(root, entry.path)
            files += 1
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
            if limits is not None:
                _check(limits, files, total, depth + 1, root, entry.path)
            yield entry.path, st, depth + 1
            if stat.S_ISDIR(st.st_mode):
                subdirs.append((entry.path, depth + 1))
        stack.extend(reversed(subdirs))


def _check(limits: Limits, files: int, total: int, depth: int, root: bytes, path: bytes) -> None:
    if files > limits.max_files:
        raise TreeRefused(f"the workspace holds more than max_files = {limits.max_files} "
                          f"entries; fix: remove what the gate does not need, or raise "
                          f"max_files for this node in graph.toml")
    if total > limits.max_bytes:
        raise TreeRefused(f"the workspace's files add up to more than max_workspace_bytes = "
                          f"{limits.max_bytes} bytes (at {shown(os.path.relpath(path, root))}, "
                          f"sparse files counted at their full size); fix: remove what the gate "
                          f"does not need, or raise max_workspace_bytes for this node")
    if depth > limits.max_depth:
        raise TreeRefused(f"the workspace nests folders more than {limits.max_depth} levels "
                          f"deep (at {shown(os.path.relpath(path, root))[:200]}); fix: flatten it")


def scan(root: Path | str, limits: Limits) -> TreeSize:
    """Check `root` against `limits` without reading a byte of content (lstat only). Raises
    TreeRefused (a symlink, a limit exceeded, an unreadable entry)."""
    files = total = skipped = 0
    try:
        for _path, st, _depth in _walk(_b(root), limits):
            files += 1
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
            elif not stat.S_ISDIR(st.st_mode):
                skipped += 1
    except OSError as exc:
        raise TreeRefused(_unreadable(root, exc)) from None
    return TreeSize(files, total, skipped)


def _unreadable(root: Path | str | bytes, exc: OSError) -> str:
    where = (shown(os.path.relpath(_b(exc.filename), _b(root))) if exc.filename
             else shown(_b(root)))
    return (f"{where[:200]}: cannot be read ({exc.strerror or exc}); fix: leave only readable "
            f"files and folders in the workspace")


# ---- copying ----------------------------------------------------------------------------------

def copy_judged(src: Path | str, dst: Path | str, limits: Limits | None = None,
                ignore: Iterable[str] = ()) -> None:
    """Copy the judged tree `src` to a new folder `dst`: folders and regular files (modes and
    times kept, sparse files kept sparse), special files left out, a symlink refused. With `limits`,
    the copy stops (TreeRefused) as soon as it would exceed them. `ignore`: top-level names to
    leave out. Any OSError is a TreeRefused naming the entry."""
    s, d = _b(src), _b(dst)
    skip = frozenset(_b(n) for n in ignore)
    budget = [limits.max_bytes if limits is not None else -1]
    folders: list[tuple[bytes, os.stat_result]] = []
    try:
        top = os.lstat(s)
        if not stat.S_ISDIR(top.st_mode):
            raise TreeRefused(f"{shown(s)}: not a folder (a symlink or file took its place); "
                              f"fix: let the engine keep its folders")
        os.mkdir(d, 0o700)
        folders.append((d, top))
        for path, st, _depth in _walk(s, limits, skip=skip):
            target = os.path.join(d, os.path.relpath(path, s))
            if stat.S_ISDIR(st.st_mode):
                os.mkdir(target, 0o700)
                folders.append((target, st))
            elif stat.S_ISREG(st.st_mode):
                _copy_file(path, target, budget, s)
    except OSError as exc:
        raise TreeRefused(_unreadable(s, exc)) from None
    for folder, st in reversed(folders):  # after their contents: a 0555 folder is filled first
        os.chmod(folder, stat.S_IMODE(st.st_mode))
        with contextlib.suppress(OSError):
            os.utime(folder, ns=(st.st_atime_ns, st.st_mtime_ns))


def _copy_file(src: bytes, dst: bytes, budget: list[int], root: bytes) -> None:
    """Copy one regular file (opened without following a link swapped in since the scan): only
    its data extents if it is sparse, at most its size when opened, within `budget`."""
    fin = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fin)
        if not stat.S_ISREG(st.st_mode):
            return  # replaced by something else since the scan: left out, like special files
        if budget[0] >= 0:
            budget[0] -= st.st_size
            if budget[0] < 0:
                raise TreeRefused(f"{shown(os.path.relpath(src, root))}: the workspace grew past "
                                  f"max_workspace_bytes while it was copied; fix: stop writing "
                                  f"to it after the worker ends")
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if st.st_blocks * 512 < st.st_size:
                for start, end in _extents(fin, st.st_size):
                    _copy_range(fin, fout, start, end - start)
                os.ftruncate(fout, st.st_size)  # the holes after the last extent
            else:
                _copy_range(fin, fout, 0, st.st_size)
            os.fchmod(fout, stat.S_IMODE(st.st_mode))
            os.utime(fout, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(fout)
    finally:
        os.close(fin)


def _extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The data extents of a sparse file, as (start, end) byte offsets below `size`."""
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole after `off`
                return
            raise
        if start >= size:
            return
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        off = end


def _copy_range(fin: int, fout: int, off: int, n: int) -> None:
    """Copy `n` bytes at `off` (same offset in both files); stops early at end of file."""
    end = off + n
    while off < end:
        try:
            done = os.copy_file_range(fin, fout, min(end - off, 1 << 30), off, off)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            done = _copy_plain(fin, fout, off, end - off)
        if done == 0:
            return
        off += done


def _copy_plain(fin: int, fout: int, off: int, n: int) -> int:
    data = os.pread(fin, min(n, _CHUNK), off)
    if data:
        view = memoryview(data)
        pos = off
        while view:
            w = os.pwrite(fout, view, pos)
            view, pos = view[w:], pos + w
    return len(data)
