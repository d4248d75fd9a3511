"""Where a run is created: paths a careless user gives are checked, and the ledger's folder is
locked while a run is created in it.

Why: `loopproof run` deletes an old run's <ledger>.work/ and <ledger>.accepted/ before it creates
the ledger (the ledger they belonged to is gone). Ten `run`s racing for one path must not delete
the folders of the one that won, nor each other's half-written ledger: so the check that the
ledger does not exist, the clean-up and the creation happen under one lock on the folder (flock;
the kernel drops it if the process dies), and the losers are refused with exit 2 having written
nothing. A path too long for the file system, or a folder that cannot be written (read-only, a
read-only mount), is refused the same way, before anything is deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from loopproof.engine.system.errors import BadInput


def lexists(path: Path, field: str) -> bool:
    """Does anything (even a dangling symlink) exist at `path`? A path that cannot exist (too
    long, a component that is a file) is bad input naming `field`."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        raise BadInput(str(path)[:300], field, f"is not a usable path "
                       f"({getattr(exc, 'strerror', None) or exc})",
                       "choose a shorter path in an existing folder") from None
    return True


def folder_of(path: Path, field: str) -> Path:
    """The existing, writable folder `path` is to be created in."""
    folder = path.parent
    try:
        is_dir = stat.S_ISDIR(os.stat(folder).st_mode)
    except OSError:
        is_dir = False
    if not is_dir:
        raise BadInput(str(path), field, "its folder does not exist",
                       "create the folder first or choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInput(str(path), field, "its folder cannot be written (read-only, or not "
                       "yours)", "choose a folder you can write to")
    return folder


@contextlib.contextmanager
def creating(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` while a run is created in it (blocking: creation is
    short). Runs already created hold their own ledger's lock, not this one."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def lock_ledger(ledger_path: Path) -> int:
    """One engine per ledger: an exclusive lock on the ledger file for the whole run (the kernel
    drops it if the process dies). A second `run`/`resume` on the same ledger is refused."""
    try:
        fd = os.open(ledger_path, os.O_RDONLY)
    except FileNotFoundError:
        raise BadInput(str(ledger_path), "--ledger", "file not found",
                       "give the path of an existing ledger file") from None
    except OSError as exc:
        raise BadInput(str(ledger_path)[:300], "--ledger", f"cannot be opened "
                       f"({exc.strerror or exc})", "give the path of a readable ledger file"
                       ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BadInput(str(ledger_path), "--ledger", "another loopproof process is running "
                       "this ledger", "wait for it to finish, or stop it (kill switch), then "
                       "resume") from None
    return fd
