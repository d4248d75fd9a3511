"""The engine owns the ledger file it writes: before each append and at the end it checks that
the file is still the one it wrote.

Why: whoever can write the ledger's folder (a worker without a sandbox, an escaped process) can
`os.replace` a forged, re-hashed chain onto the path, delete it, append to it, truncate it or
edit it in place. The engine's descriptor keeps pointing at the file it opened, so without a
check it would go on writing a deleted inode, report DONE with no record on disk, and sign the
forgery at the end. Three facts name "the file the engine wrote": its identity (device and
inode, from the open descriptor), its length (the engine is the only writer, so it knows every
byte) and its last line (the head). Checking them costs two stats and one small read per append.
An edit in place that keeps the length and the last line breaks the chain before the last line;
only a full read sees that, so `verify_written` re-reads and re-verifies the whole file from the
descriptor at the end, before a run may report DONE or a head may be signed.

What a failed check does is the runner's business (engine/run): record nothing more, report no
end state, sign nothing, exit 5.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.errors import LedgerCorrupt

FIX = ("fix: keep the ledger's folder out of every worker's reach (the sandbox does), then "
       "restore the ledger from a trusted copy or start the run again")


class LedgerLost(LedgerCorrupt):
    """The ledger at its path is no longer the file the engine wrote (replaced, removed,
    appended to, truncated or edited), or a write to it failed: nothing more is recorded, the
    run reports no end state and nothing is signed (exit 5)."""


@dataclass
class Written:
    """What the engine knows it wrote: the file's identity, its length, its last line."""

    dev: int
    ino: int
    size: int
    last: bytes  # the last complete line written (b"" for an empty file)

    @classmethod
    def of(cls, fd: int, last: bytes) -> Written:
        st = os.fstat(fd)
        return cls(st.st_dev, st.st_ino, st.st_size, last)


def why_not_owned(path: Path, fd: int, written: Written) -> str | None:
    """Why the file at `path` is no longer the one written through `fd` (None: it still is)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "the ledger file was removed while the run held it"
    except OSError as exc:
        return f"the ledger's path cannot be checked ({exc.strerror or exc})"
    if (st.st_dev, st.st_ino) != (written.dev, written.ino):
        return ("the path names another file now (the ledger was replaced while the run held "
                "it)")
    size = os.fstat(fd).st_size
    if size != written.size:
        what = "appended to" if size > written.size else "truncated"
        return (f"the ledger was {what} by someone else ({written.size} bytes written, "
                f"{size} on disk)")
    n = len(written.last)
    if n and os.pread(fd, n, size - n) != written.last:
        return "the ledger's last record is not the one written (it was edited in place)"
    return None


def read_all(fd: int, size: int) -> bytes:
    """The file's first `size` bytes, read through the descriptor (not the path, which another
    process may swap between a check and a read)."""
    chunks, off = [], 0
    while off < size:
        chunk = os.pread(fd, min(size - off, 1 << 24), off)
        if not chunk:
            break
        chunks.append(chunk)
        off += len(chunk)
    return b"".join(chunks)
