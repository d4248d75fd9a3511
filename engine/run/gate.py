"""Gates: the independent judge of an attempt. One protocol, two adapters (a command, a callable).

Why a snapshot: the worker must have no write path to what the gate sees while it judges, and a
gate must not change what it judges. The gate runs on a *copy* of the workspace, made read-only
and content-hashed before and after the gate runs; any change makes the verdict an error. (Under
root, permissions do not stop a write; the hash comparison still catches it.)

Verdicts: exit 0 accept, 1 reject, 2 error, anything else error; a timeout is an error; a
snapshot change is an error. An error is never an accept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from engine.system.process import ProcessError, run_command, safe_environment

ACCEPT, REJECT, ERROR = "accept", "reject", "error"
VERDICTS = (ACCEPT, REJECT, ERROR)
DETAIL_LIMIT = 2000


@dataclass(frozen=True)
class GateResult:
    """A gate's verdict on one snapshot. `detail` is the gate's own words, for the ledger."""

    verdict: str
    detail: str
    seconds: float
    snapshot: str = ""  # content hash of the snapshot the gate judged

    @property
    def accepted(self) -> bool:
        return self.verdict == ACCEPT


class Gate(Protocol):
    """Judge a workspace. Implementations must never write to `workspace`."""

    def judge(self, workspace: Path) -> GateResult: ...

    def pinned_files(self) -> tuple[Path, ...]: ...


# ---- hashing ------------------------------------------------------------------------------------

def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, or a marker naming why it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable:{exc.errno}"


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


def make_read_only(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, 0o444)
        os.chmod(dirpath, 0o555)


def remove_tree(root: Path) -> None:
    """Delete a (possibly read-only) tree."""
    def unlock(func, path, _exc):
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o755)
            os.chmod(path, 0o755)
        func(path)
    if not root.exists():
        return
    if sys.version_info >= (3, 12):
        shutil.rmtree(root, onexc=unlock)
    else:
        shutil.rmtree(root, onerror=unlock)


def copy_tree(src: Path, dst: Path, ignore: Iterable[str] = ()) -> None:
    """Copy a workspace without following symlinks (a link stays a link). Special files (FIFOs,
    sockets, devices) are left out: reading a FIFO a worker left behind would block the engine."""
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


# ---- the snapshot judge, shared by both adapters -------------------------------------------------

Judge = Callable[[Path, float], tuple[str, str]]


def judge_snapshot(workspace: Path, timeout_s: float, inner: Judge) -> GateResult:
    """Copy `workspace` to a fresh read-only snapshot, hash it, let `inner` judge the snapshot,
    hash again; a change, or a verdict outside accept|reject, is an error."""
    start = time.monotonic()
    snap_parent = Path(tempfile.mkdtemp(prefix="loopproof-snapshot-"))
    snap = snap_parent / "workspace"
    try:
        try:
            copy_tree(workspace, snap)
            make_read_only(snap)
            before = tree_digest(snap)
        except (OSError, shutil.Error) as exc:  # e.g. a file the worker made unreadable
            return GateResult(ERROR, f"cannot snapshot the workspace: {exc}"[:DETAIL_LIMIT],
                              time.monotonic() - start)
        try:
            verdict, detail = inner(snap, timeout_s)
        except Exception as exc:  # a gate that crashes gives no verdict
            verdict, detail = ERROR, f"gate raised {type(exc).__name__}: {exc}"
        after = tree_digest(snap)
        if after != before:
            verdict, detail = ERROR, f"the gate's snapshot changed while it judged; {detail}"
        elif verdict not in VERDICTS:
            verdict, detail = ERROR, f"not a verdict: {verdict!r}; {detail}"
        return GateResult(verdict, detail[-DETAIL_LIMIT:], time.monotonic() - start, before)
    finally:
        remove_tree(snap_parent)


# ---- adapters ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CommandGate:
    """A gate command: exit 0 accept, 1 reject, 2 error, anything else error; timeout error."""

    argv: tuple[str, ...]
    timeout_s: float = 60.0

    def pinned_files(self) -> tuple[Path, ...]:
        return tuple(Path(a) for a in self.argv if Path(a).is_absolute() and Path(a).is_file())

    def judge(self, workspace: Path) -> GateResult:
        return judge_snapshot(workspace, self.timeout_s, self._run)

    def _run(self, snapshot: Path, timeout_s: float) -> tuple[str, str]:
        try:
            res = run_command(self.argv, snapshot, timeout_s, env=safe_environment())
        except ProcessError as exc:
            return ERROR, str(exc)
        words = (res.stdout + res.stderr).decode("utf-8", "replace").strip()
        if res.timed_out:
            return ERROR, f"gate timed out after {timeout_s:g} s; {words}"
        if res.killed:
            return ERROR, f"gate killed ({res.killed}); {words}"
        verdict = {0: ACCEPT, 1: REJECT}.get(res.returncode, ERROR)
        return verdict, f"exit {res.returncode}; {words}"


@dataclass(frozen=True)
class CallableGate:
    """A Python gate: `fn(snapshot_dir) -> "accept" | "reject" | "error" | (verdict, detail)`.
    It judges the same read-only snapshot a command gate would; it has no timeout of its own."""

    fn: Callable[[Path], object]
    files: tuple[Path, ...] = ()

    def pinned_files(self) -> tuple[Path, ...]:
        return self.files

    def judge(self, workspace: Path) -> GateResult:
        return judge_snapshot(workspace, 0.0, self._run)

    def _run(self, snapshot: Path, timeout_s: float) -> tuple[str, str]:
        out = self.fn(snapshot)
        if isinstance(out, tuple):
            verdict, detail = out
            return str(verdict), str(detail)
        return str(out), ""
