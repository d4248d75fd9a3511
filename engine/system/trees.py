"""File trees: their digests, copies and removal, shared by the runner (engine/run) and the
admission broker (engine/admission).

Two tree digests, on purpose; their values are recorded in ledgers, evidence and receipts, so
neither may change:

- `tree_digest`: any tree, as the runner's gate snapshots and hand-offs see it. Every entry's
  relative path, type and permission bits, the root folder's included; file bytes; a symlink's
  target string (never followed); a special file (FIFO, socket, device) by its mode, never
  opened. An unreadable file is hashed as a marker (`file_digest`), so it never raises on content.
- `tree_hash`: the *state hash* of evidence and checkpoints: one canonical digest over the sorted
  `tree_entries` (path, kind, mode, content digest) of a tree that must be safe: a symlink that
  resolves outside the tree, or any special file, raises `UnsafeTree` (a state hash cannot vouch
  for what lies outside the tree or for bytes that are not there yet).

Copies keep symlinks as links and leave special files out (reading a FIFO a worker left behind
would block the engine). Removal first makes read-only folders writable (workers and the gate
snapshots leave them read-only) and never follows a symlink.

*Judged trees* (what the runner stages for a gate and hands on) have stricter rules and
limits: engine/system/judged.py. Here, for every tree: `tree_digest` walks bytes paths
iteratively (any name, any depth; for UTF-8 names the value os.walk gave), `remove_tree` is
iterative, never follows a symlink and, with `within`, deletes only below an engine folder;
`ensure_dir` replaces a symlink or file found in the place of an engine folder.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from loopproof.engine.system.canonical import digest
from loopproof.engine.system.errors import BadInput


class UnsafeTree(BadInput):
    """The workspace holds something a state hash cannot vouch for (an escaping symlink, a fifo)."""


# ---- names ----------------------------------------------------------------------------------

def shown(path: bytes | str) -> str:
    """A path as text for a message or a ledger record: bytes that are not UTF-8 become
    backslash escapes (a record must be valid UTF-8)."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def _b(path: Path | str | bytes) -> bytes:
    return os.fsencode(path)


def _entries(folder: bytes) -> list[os.DirEntry[bytes]]:
    with os.scandir(folder) as it:
        return sorted(it, key=lambda e: e.name)


# ---- files --------------------------------------------------------------------------------------

def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, hex (streamed, so large files do not load whole); OSError if
    it cannot be read."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, or a marker naming why it cannot be read ("missing",
    "unreadable:<errno>"): for pins, where a vanished file is a change, not an error."""
    try:
        return file_sha256(path)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable:{exc.errno}"


def inside(root: Path, target: Path) -> bool:
    """True if `target` is `root` or lies below it (as paths; resolve both first)."""
    try:
        target.relative_to(root)
    except ValueError:
        return False
    return True


# ---- digests ------------------------------------------------------------------------------------

def _content_digest(path: bytes) -> bytes:
    """A regular file's SHA-256 (opened without following a link swapped in), or the marker
    `file_digest` gives for a file that cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return f"unreadable:{exc.errno}".encode()
    with os.fdopen(fd, "rb") as fh:
        try:
            return hashlib.file_digest(fh, "sha256").hexdigest().encode()
        except OSError as exc:
            return f"unreadable:{exc.errno}".encode()


def tree_digest(root: Path) -> str:
    """Content hash of a folder: every entry's relative path, type, permission bits and bytes
    (a symlink's target string, never followed). Paths are bytes (so any name is hashed) and
    the walk is iterative; for UTF-8 names the value is the one os.walk gave: one line per
    folder, then its other entries in name order, then its subfolders, depth first."""
    h = hashlib.sha256()
    stack: list[tuple[bytes, bytes]] = [(_b(root), b".")]
    while stack:
        folder, rel_dir = stack.pop()
        mode = stat.S_IMODE(os.lstat(folder).st_mode)
        h.update(b"d\0" + rel_dir + b"\0" + f"{mode:o}".encode() + b"\n")
        subdirs = []
        for entry in _entries(folder):
            st = entry.stat(follow_symlinks=False)
            rel = os.path.join(rel_dir, entry.name)
            if stat.S_ISDIR(st.st_mode):  # a folder's own line names it as relpath does
                subdirs.append((entry.path, entry.name if rel_dir == b"." else rel))
            elif stat.S_ISLNK(st.st_mode):
                h.update(b"l\0" + rel + b"\0" + os.readlink(entry.path) + b"\n")
            elif stat.S_ISREG(st.st_mode):
                bits = f"{stat.S_IMODE(st.st_mode):o}".encode()
                h.update(b"f\0" + rel + b"\0" + bits + b"\0")
                h.update(_content_digest(entry.path) + b"\n")
            else:
                h.update(b"o\0" + rel + b"\0" + f"{st.st_mode:o}".encode() + b"\n")
        stack.extend(reversed(subdirs))
    return h.hexdigest()


def tree_entries(root: Path) -> list[tuple[str, str, int, str]]:
    """`(relative path, kind, mode, content digest)` for every entry under `root`, sorted by path.

    Kinds are "dir", "file" and "link" (a link's digest is over its target text). A symlink whose
    target resolves outside `root`, or any other kind of entry, raises `UnsafeTree`.
    """
    root = Path(root)
    real_root = root.resolve()
    if not real_root.is_dir():
        raise UnsafeTree(str(root), "workspace", "is not a directory",
                         "point the node at an existing workspace folder")
    out: list[tuple[str, str, int, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = base / name
            rel = path.relative_to(root).as_posix()
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
                if not inside(real_root, (path.parent / target).resolve()):
                    raise UnsafeTree(str(root), rel, f"symlink leaves the workspace (-> {target})",
                                     "remove the link or point it at a file inside the workspace")
                out.append((rel, "link", 0, hashlib.sha256(target.encode()).hexdigest()))
            elif stat.S_ISDIR(st.st_mode):
                out.append((rel, "dir", mode, ""))
            elif stat.S_ISREG(st.st_mode):
                out.append((rel, "file", mode, file_sha256(path)))
            else:
                raise UnsafeTree(str(root), rel, "is neither a file, a folder nor a symlink",
                                 "remove it from the workspace")
        # os.walk does not descend into symlinked folders (followlinks=False); they were hashed
        # above as links. Keep the walk order deterministic.
        dirnames.sort()
    out.sort()
    return out


def tree_hash(root: Path) -> str:
    """The state hash: one digest over the sorted (path, kind, mode, content) entries of `root`."""
    return digest(tree_entries(root))


def relative_paths(root: Path) -> set[str]:
    """Every entry below `root`, as a POSIX path relative to it."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.add((Path(dirpath) / name).relative_to(root).as_posix())
    return out


# ---- copies -------------------------------------------------------------------------------------

def copy_tree(src: Path, dst: Path, ignore: Iterable[str] = ()) -> None:
    """Copy a tree to a new folder `dst` (contents, modes, the root's too) without following
    symlinks (a link stays a link). Special files (FIFOs, sockets, devices) and entries named in
    `ignore` are left out."""
    names = set(ignore)

    def skip(folder: str, entries: list[str]) -> set[str]:
        out = set()
        for e in entries:
            if e in names:
                out.add(e)
                continue
            mode = os.lstat(os.path.join(folder, e)).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                out.add(e)
        return out

    shutil.copytree(src, dst, symlinks=True, ignore=skip)


def make_read_only(root: Path) -> None:
    """Files 0o444 and folders 0o555 below and at `root` (symlinks untouched)."""
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, 0o444)
        os.chmod(dirpath, 0o555)


# ---- removal ------------------------------------------------------------------------------------

def make_writable(root: Path) -> None:
    """Folders below and at `root` 0o700, so their entries can be removed (best effort). A
    symlink is never followed, `root` included."""
    if os.path.islink(root):
        return
    for dirpath, _dirs, _files in os.walk(root):
        with contextlib.suppress(OSError):
            os.chmod(dirpath, 0o700)


def ensure_dir(path: Path) -> Path:
    """`path` as a real folder the engine can use: created if missing; a symlink or a file
    found in its place (a worker put it there) is removed first, never followed. Another
    thread of the engine may create it at the same moment (attempts in flight that end
    together stage into one folder): a folder that appears between the look and the mkdir is
    looked at again, not an error."""
    for _ in range(8):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            try:
                os.mkdir(path)
                return path
            except FileExistsError:
                continue  # made meanwhile: look at what it is
        if stat.S_ISDIR(st.st_mode):
            return path
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile: as good
            os.unlink(path)
    os.mkdir(path)  # still contested after every look: the error says what is there
    return path


def remove_tree(root: Path, *, best_effort: bool = False, within: Path | None = None) -> None:
    """Delete `root` and everything in it, read-only folders included; nothing if it does not
    exist. An entry that still cannot be removed raises OSError, or with `best_effort` is left
    behind (for scratch folders, where a leftover must not hide the result being returned).

    A symlink is removed, never followed: a worker that replaces a folder the engine clears
    (its inputs/) with a link to elsewhere must not get the engine to change what lies there.
    With `within`, `root` must lie below that folder, and if a folder between them is not a
    real folder (a symlink a worker planted) nothing is deleted: what lies beyond is not the
    engine's. The walk is iterative (any depth)."""
    root = Path(os.path.normpath(root))
    if within is not None:
        base = Path(os.path.normpath(within))
        if root == base or base not in root.parents:
            raise ValueError(f"engine bug: {root} is not inside {base}")
        walk = base
        for part in root.relative_to(base).parts[:-1]:
            walk = walk / part
            try:
                if not stat.S_ISDIR(os.lstat(walk).st_mode):
                    return
            except FileNotFoundError:
                return
    try:
        try:
            st = os.lstat(root)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            try:
                os.unlink(root)
            except PermissionError:  # a read-only parent
                with contextlib.suppress(OSError):
                    os.chmod(root.parent, 0o755)
                os.unlink(root)
            return
        _rmtree(_b(root))
    except OSError:
        if not best_effort:
            raise


def _rmtree(root: bytes) -> None:
    """Delete the folder `root` and everything below it: iteratively (any depth, no
    RecursionError), read-only folders included, never following a symlink (a link is
    unlinked; a folder is opened with O_NOFOLLOW before it is listed). A folder deeper than
    half of PATH_MAX is first moved up next to the top, so no path grows too long."""
    moved = 0
    pending = [root]
    while pending:
        folder = pending[-1]
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            pending.pop()
            continue
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            os.unlink(folder)  # a symlink or file took the folder's place: remove it only
            pending.pop()
            continue
        try:
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o700)  # its entries can be removed (read-only copies)
            entries = list(os.scandir(fd))
        finally:
            os.close(fd)
        subdirs = []
        for entry in entries:
            path = os.path.join(folder, os.fsencode(entry.name))  # scandir(fd) names are str
            if entry.is_dir(follow_symlinks=False):
                if len(path) > 2048 and folder != root:
                    moved += 1
                    up = os.path.join(root, b".rm-%d-%d" % (os.getpid(), moved))
                    os.rename(path, up)
                    path = up
                subdirs.append(path)
            else:
                os.unlink(path)
        if subdirs:
            pending.extend(subdirs)  # `folder` is removed when it is reached again, empty
        else:
            os.rmdir(folder)
            pending.pop()


def clear_dir(root: Path) -> list[str]:
    """Remove everything inside `root` (not `root` itself); return what was removed, sorted."""
    removed = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        removed.append(entry.name)
        if entry.is_dir(follow_symlinks=False):
            make_writable(Path(entry.path))
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    return removed
