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
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from engine.system.canonical import digest
from engine.system.errors import BadInput


class UnsafeTree(BadInput):
    """The workspace holds something a state hash cannot vouch for (an escaping symlink, a fifo)."""


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

def tree_digest(root: Path) -> str:
    """Content hash of a folder: every entry's relative path, type, permission bits and bytes
    (a symlink's target string, never followed)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        h.update(f"d\0{rel_dir}\0{stat.S_IMODE(os.lstat(dirpath).st_mode):o}\n".encode())
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(
                os.path.join(dirpath, d))]):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.join(rel_dir, name)
            if stat.S_ISLNK(st.st_mode):
                h.update(f"l\0{rel}\0{os.readlink(p)}\n".encode())
            elif stat.S_ISREG(st.st_mode):
                h.update(f"f\0{rel}\0{stat.S_IMODE(st.st_mode):o}\0".encode())
                h.update(file_digest(Path(p)).encode() + b"\n")
            else:
                h.update(f"o\0{rel}\0{st.st_mode:o}\n".encode())
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


def remove_tree(root: Path, *, best_effort: bool = False) -> None:
    """Delete `root` and everything in it, read-only folders included; nothing if it does not
    exist. An entry that still cannot be removed raises OSError, or with `best_effort` is left
    behind (for scratch folders, where a leftover must not hide the result being returned).

    A symlink is removed, never followed: a worker that replaces a folder the engine clears
    (its inputs/) with a link to elsewhere must not get the engine to change what lies there."""
    root = Path(root)
    if root.is_symlink():
        try:
            root.unlink(missing_ok=True)
        except PermissionError:  # a read-only parent, as `unlock` below handles it
            with contextlib.suppress(OSError):
                os.chmod(root.parent, 0o755)
            with contextlib.suppress(OSError) if best_effort else contextlib.nullcontext():
                root.unlink(missing_ok=True)
        return
    if not root.exists():
        return
    make_writable(root)

    def unlock(func, path, _exc):  # type: ignore[no-untyped-def]
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o755)
            os.chmod(path, 0o755)
        if best_effort:
            with contextlib.suppress(OSError):
                func(path)
        else:
            func(path)

    if sys.version_info >= (3, 12):
        shutil.rmtree(root, onexc=unlock)
    else:
        shutil.rmtree(root, onerror=unlock)


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
