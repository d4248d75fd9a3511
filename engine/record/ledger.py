"""The hash-chained ledger: the run's source of truth (state = replay(ledger)).

Format: JSON Lines. Each line is `canonical(record)`; every record carries `seq` (0, 1, 2, ...),
`prev` (the previous record's `hash`, "" for record 0), `type`, and `hash` = sha256 hex of
`canonical(record without "hash")`. Opening verifies the whole chain by the recovery rule
(docs/ledger.md#torn-tails-the-recovery-rule, decided in `_scan` alone): only bytes after the last
newline that are a record cut short or zero padding, above the known-committed point
(engine/record/committed.py), are a torn tail; they are kept in a side file, cut, and reported in
`Ledger.torn`. Any other inconsistency raises LedgerCorrupt naming the line, nothing is cut, and
no Ledger object exists to append with (fail closed).

Why verification hashes the stored bytes instead of re-serialising: the writer stores canonical
JSON, so "the line minus its own `"hash":"…"` member" *is* `canonical(record without hash)`;
hashing those bytes directly checks the same equation at a fraction of the cost, and binds the
exact bytes on disk (a line that is not canonical can only verify if whoever wrote it computed
its hash themselves — a rewrite of the chain, which only signing catches; see engine.record.signing).

Appends never re-read the chain: the ledger keeps the head hash and next seq in memory, checks
that the file is still the one it wrote (engine/record/owned.py: its identity, length and last
line; two stats and a small read), writes one line with a single `write`, and fsyncs it (once per `group()` under group commit). A SIGKILL
after `write` returns cannot lose the line (it is in the kernel); fsync guards against power loss.
An append encodes the record once: the keys below "hash" and those above it are encoded apart,
hashed joined, and the `"hash":"…"` member is spliced between them (the same bytes as encoding
the whole record with its hash, which a test checks).

Reading streams: verification reads the file in blocks of `BLOCK` bytes and keeps no record
unless asked (`Ledger.open(keep=...)`, or `fold`, which sees each verified record once), so its
memory does not grow with the ledger. A large ledger is verified by `VERIFY_JOBS` processes, each
checking the hashes and links inside one byte range, and the ranges' ends are linked after; any
problem sends the file through the serial scan, which names the first bad line.

Why one module: over 400 lines on purpose, since the writer and the verifier are one byte
format; `Ledger.open` runs the same `_scan` that `verify` does, and every line, in the serial
scan and in the parallel ranges, passes the one chain check `_link`, so they change together and
are read together.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, overload

from loopproof.engine.record.committed import Floor, Mark, read_floor, remove_stale
from loopproof.engine.record.owned import FIX as OWNED_FIX
from loopproof.engine.record.owned import LedgerLost, Written, read_all, why_not_owned
from loopproof.engine.record.tail import is_cut_short
from loopproof.engine.system import collector, faults
from loopproof.engine.system.canonical import canonical
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from loopproof.model.executor import Processes

try:  # orjson parses ~2.5x faster; json is the reference and the fallback. orjson reads an
    # integer beyond 64 bits as a float, so `append` refuses such integers (see _check_ints).
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _fast_loads = json.loads  # type: ignore[assignment]  # same call, a wider argument type


GENESIS = ""  # `prev` of record 0
CHAIN_FIELDS = ("seq", "prev", "hash")
_HEX = frozenset("0123456789abcdef")
_UNPARSEABLE = object()
_FIX = "fix: restore the ledger from a trusted copy; a broken chain is never repaired in place"
BLOCK = 1 << 20                 # bytes read at a time while verifying
VERIFY_JOBS = 2                 # processes that verify a large ledger
PARALLEL_BYTES = 64 << 20       # a ledger at least this large is verified by VERIFY_JOBS processes
Record = dict[str, Any]  # a record as JSON gives it: its values are any JSON value
Fold = Callable[[Record], None]
NO_FLOOR = Floor()


def record_hash(record: Record) -> str:
    """sha256 hex of canonical(record without "hash")."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical(body)).hexdigest()


@dataclass(frozen=True)
class Verification:
    """What `verify` found. `records`/`head` describe the verified prefix."""

    status: str  # "verified" | "torn-tail" | "broken"
    records: int
    head: str
    error: str | None

    def as_dict(self) -> dict[str, object]:
        return {"status": self.status, "records": self.records, "head": self.head,
                "error": self.error}


@dataclass
class _Scan:
    records: list[Record]
    head: str
    count: int               # number of verified records
    good_bytes: int          # length of the verified prefix (complete lines)
    torn: str | None         # why the tail after good_bytes is a torn write
    error: str | None        # why the chain is broken (then records/head are the good prefix)
    tail: bytes = b""        # the bytes after the last newline (what a cut would remove)


def _is_hex64(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and _HEX.issuperset(value)


def _loads(line: bytes) -> Any:
    """The JSON value of `line`, or _UNPARSEABLE: every decode problem (invalid UTF-8, a lone
    surrogate, nesting deeper than the parsers allow, a number they refuse) is "not a record",
    never an exception."""
    try:
        return _fast_loads(line)
    except ValueError:
        pass
    try:  # what orjson refuses but JSON allows, e.g. 1e400 or an integer beyond 64 bits
        return json.loads(line)
    except (ValueError, RecursionError, MemoryError):  # UnicodeDecodeError is a ValueError
        return _UNPARSEABLE


def _body_without_hash(line: bytes, member: bytes) -> bytes | None:
    """`line` minus its `"hash":"…"` member (and the comma that joins it), or None if absent."""
    i = line.find(member)
    if i < 0:
        return None
    j = i + len(member)
    if line[i - 1:i] == b",":
        return line[:i - 1] + line[j:]
    if line[j:j + 1] == b",":
        return line[:i] + line[j + 1:]
    return line[:i] + line[j:]


# why a line is not the next record (the keys of _PROBLEM)
_NOT_JSON, _NOT_OBJECT, _BAD_HASH, _EDITED, _BAD_SEQ, _BAD_PREV, _BAD_TYPE = range(7)


def _link(line: bytes, seq: int, prev: str) -> Record | int:
    """The chain check, the only one: the record on `line` if it is record `seq` chained after
    `prev` (its hash is the sha256 of the line without its own hash member), else why not (one
    of the problem codes above, in the order they are checked)."""
    rec = _loads(line)
    if rec.__class__ is not dict:
        return _NOT_JSON if rec is _UNPARSEABLE else _NOT_OBJECT
    h = rec.get("hash")
    if h.__class__ is not str or len(h) != 64:
        return _BAD_HASH
    body = _body_without_hash(line, b'"hash":"' + h.encode("utf-8", "surrogatepass") + b'"')
    if body is None or hashlib.sha256(body).hexdigest() != h:
        return _EDITED if _is_hex64(h) else _BAD_HASH
    s = rec.get("seq")
    if s != seq or s.__class__ is not int:
        return _BAD_SEQ
    if rec.get("prev") != prev:
        return _BAD_PREV
    if rec.get("type").__class__ is not str:
        return _BAD_TYPE
    return rec


def _blocks(f: BinaryIO, stop: int | None = None) -> Iterator[tuple[list[bytes], bytes, bool]]:
    """(complete lines, the bytes after the last newline once the file ends, whether it ended),
    one block at a time; `stop` ends the read at that offset (a range of a parallel verify).
    A line longer than a block is gathered in pieces and joined once, so a long tail without a
    newline is read in linear time."""
    parts: list[bytes] = []  # the line being read, in pieces
    left = stop
    while True:
        size = BLOCK if left is None else min(BLOCK, left)
        block = f.read(size) if size > 0 else b""
        if left is not None:
            left -= len(block)
        if not block:
            yield [], b"".join(parts), True
            return
        end = block.rfind(b"\n") + 1
        if not end:
            parts.append(block)
            continue
        if parts:
            parts.append(block[:end])
            data, parts = b"".join(parts), []
        else:
            data = block[:end] if end < len(block) else block
        if end < len(block):
            parts.append(block[end:])
        lines = data.split(b"\n")
        lines.pop()
        yield lines, b"", False


def _scan(f: BinaryIO, name: str, keep: bool = True, fold: Fold | None = None,
          floor: Floor = NO_FLOOR) -> _Scan:
    """The recovery rule (docs/ledger.md#torn-tails), with the cyclic GC paused (building
    100,000 record dicts would otherwise trigger dozens of full collections that free nothing).

    Every newline-terminated line must pass `_link`; the first that fails makes the ledger
    broken, whatever its position. The bytes after the last newline are a torn tail only when
    `tail.is_cut_short` says they are a record cut short or zero padding, and only when the
    verified prefix reaches `floor` (the known-committed point); a prefix below the floor is
    broken too. Nothing here writes: `Ledger.open` cuts what this calls torn."""
    with collector.paused():
        scan = _verify_lines(f, name, keep, fold)
    if scan.error is None:
        below = floor.why_below(scan.good_bytes, scan.count)
        if below is not None:
            scan.error, scan.torn = f"{name}: {below}; {_FIX}", None
    return scan


def _verify_lines(f: BinaryIO, name: str, keep: bool, fold: Fold | None) -> _Scan:
    """Verify the file line by line, block by block; stop at the first line that fails."""
    records: list[Record] = []
    head = GENESIS
    good = 0
    seq = 0
    link = _link
    tail = b""
    for lines, rest, _ended in _blocks(f):
        tail = rest
        for line in lines:
            rec: Any = link(line, seq, head)  # Any: `__class__ is` (fast) does not narrow
            if rec.__class__ is not dict:
                return _failure(line, seq, rec, records, head, good, name)
            head = rec["hash"]
            good += len(line) + 1
            seq += 1
            if keep:
                records.append(rec)
            if fold is not None:
                fold(rec)
    scan = _Scan(records, head, seq, good, None, None, tail)
    if tail and is_cut_short(tail):
        scan.torn = (f"{name}: line {seq + 1}: final line has no newline "
                     f"({len(tail)} bytes of a write cut short)")
    elif tail:
        scan.error = (f"{name}: line {seq + 1}: final line has no newline and is not the start "
                      f"of a record or zero padding ({len(tail)} bytes of garbage); {_FIX}")
    return scan


_PROBLEM = {
    _NOT_JSON: ": not valid JSON (garbage in the ledger)",
    _NOT_OBJECT: ": not a JSON object (garbage in the ledger)",
    _BAD_HASH: ": field 'hash' is missing or not 64 lowercase hex",
    _EDITED: " (seq {seq}): hash does not match the record's content (the record was edited)",
    _BAD_PREV: (" (seq {seq}): prev does not equal the hash of the record before it (a record "
                "before it was deleted, reordered, replaced or re-hashed, or this one was "
                "spliced in)"),
    _BAD_TYPE: " (seq {seq}): field 'type' is missing or not a string",
}


def _failure(line: bytes, seq: int, problem: int, records: list[Record], head: str, good: int,
             name: str) -> _Scan:
    """Line `seq + 1`, newline-terminated, failed `_link` for `problem`: the ledger is broken
    there (a complete line is never a torn write, whatever its position)."""
    if problem == _BAD_SEQ:
        s = _loads(line).get("seq")
        why = ("a record was deleted, reordered, duplicated or spliced in"
               if type(s) is int else "field 'seq' is missing or not an integer")
        text = f": seq is {s!r}, expected {seq} ({why})"
    elif problem == _EDITED:
        text = _PROBLEM[problem].format(seq=repr(_loads(line).get("seq")))
    else:
        text = _PROBLEM[problem].format(seq=seq)
    return _Scan(records, head, seq, good, None, f"{name}: line {seq + 1}{text}; {_FIX}", b"")


def holds_no_record(path: Path | str, why: str | None) -> BadInput:
    """A file that is empty or holds only a line cut short is not a ledger: `Ledger.create`
    links the file into place only once record 0 is written, so no run leaves one. Bad input,
    not a corrupt run; nothing is changed. (A first line that is complete but fails its check
    stays LedgerCorrupt: it cannot be told from a tampered record 0.)"""
    return BadInput(str(path), "ledger", f"holds no ledger record ({why or 'the file is empty'})",
                    "give the ledger `loopproof run` wrote (its record 0 is in place before the "
                    "file appears); the file was left as it is")


def _read(path: Path) -> BinaryIO:
    """The ledger opened for reading, or BadInput naming why it cannot be."""
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise BadInput(str(path), "ledger", "file not found",
                       "give the path of an existing ledger file") from None
    except IsADirectoryError:
        raise BadInput(str(path), "ledger", "is a directory, not a ledger file",
                       "give the path of the ledger file itself") from None
    except PermissionError:
        raise BadInput(str(path), "ledger", "cannot be read (permission denied)",
                       "run as a user who can read it, or copy it somewhere readable") from None


# ---- parallel verification of a large ledger ---------------------------------------------------

@dataclass(frozen=True)
class _Range:
    """What one process found in its byte range: None if any line in it failed a check."""

    first_seq: int
    first_prev: str
    last_hash: str
    count: int


def _check_range(args: tuple[str, int, int]) -> _Range | None:
    """Check every line of [start, stop) (both at line starts) on its own and linked to the line
    before it in the range; the range's first seq and prev are linked by the caller."""
    path, start, stop = args
    first_seq, first_prev, head, count = -1, "", "", 0
    with open(path, "rb") as f:
        f.seek(start)
        for lines, pending, ended in _blocks(f, stop - start):
            if pending and ended:
                return None  # a line without newline: the serial scan says what it is
            for line in lines:
                if count == 0:  # the range's first line is linked to the one before it later
                    first = _loads(line)
                    if first.__class__ is not dict:
                        return None
                    seq, prev = first.get("seq"), first.get("prev")
                    if seq.__class__ is not int or prev.__class__ is not str:
                        return None
                    first_seq, first_prev, head = seq, prev, prev
                rec: Any = _link(line, first_seq + count, head)  # as in _verify_lines
                if rec.__class__ is not dict:
                    return None
                head = rec["hash"]
                count += 1
    return _Range(first_seq, first_prev, head, count)


def _parallel_verify(path: Path, size: int, jobs: int) -> Verification | None:
    """A verified ledger's Verification from `jobs` processes, or None (then scan serially)."""
    cuts = [0]
    with open(path, "rb") as f:
        for k in range(1, jobs):
            f.seek(size * k // jobs)
            f.readline()
            cuts.append(max(f.tell(), cuts[-1]))
    cuts.append(size)
    ranges = [(str(path), a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
    try:
        found = Processes(len(ranges)).map(_check_range, ranges)  # model/executor.py
    except (OSError, ValueError):
        return None
    head, seq = GENESIS, 0
    for r in found:
        if r is None or r.first_seq != seq or r.first_prev != head:
            return None
        head, seq = r.last_hash, seq + r.count
    return Verification("verified", seq, head, None)


def verify(path: Path | str, jobs: int | None = None) -> Verification:
    """Check the whole chain without modifying the file (a torn tail is reported, not cut), in
    constant memory, by the recovery rule `Ledger.open` follows (the same `_scan`, the same
    committed floor: the mark beside the ledger). A ledger of PARALLEL_BYTES or more is checked
    by `jobs` processes (default VERIFY_JOBS); the result is the same as the serial scan's."""
    path = Path(path)
    with _read(path) as f:
        floor = read_floor_or_broken(path, signed=False)
        if isinstance(floor, Verification):
            return floor
        size = os.fstat(f.fileno()).st_size
        jobs = VERIFY_JOBS if jobs is None else jobs
        if jobs > 1 and size >= PARALLEL_BYTES:
            found = _parallel_verify(path, size, jobs)
            if found is not None and floor.why_below(size, found.records) is None:
                return found
        scan = _scan(f, str(path), keep=False, floor=floor)
    return classify(scan)


def classify(scan: _Scan) -> Verification:
    """A scan's class: broken, torn-tail (what a cut removes is in `error`) or verified."""
    if scan.error:
        return Verification("broken", scan.count, scan.head, scan.error)
    if scan.torn:
        return Verification("torn-tail", scan.count, scan.head, scan.torn)
    return Verification("verified", scan.count, scan.head, None)


def read_floor_or_broken(path: Path, signed: bool) -> Floor | Verification:
    """`read_floor`, or the broken Verification naming a mark that is not valid."""
    try:
        return read_floor(path, signed=signed)
    except LedgerCorrupt as exc:
        return Verification("broken", 0, GENESIS, str(exc))


class _Records(Sequence[Record]):
    """A read-only view of the stored records (dicts; do not mutate them)."""

    def __init__(self, items: list[Record]) -> None:
        self._items = items

    @overload
    def __getitem__(self, i: int) -> Record: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Record]: ...

    def __getitem__(self, i: int | slice) -> Record | Sequence[Record]:
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)


def _exists(path: Path) -> BadInput:
    return BadInput(str(path), "ledger", "already exists",
                    "use `loopproof resume --ledger` to continue it, or choose a new path")


class Ledger:
    """An open, verified ledger that appends chained records. Create with `create` or `open`."""

    def __init__(self, path: Path, records: list[Record] | None, head: str, torn: str | None,
                 count: int = 0, last: bytes | None = None, fd: int | None = None,
                 mark: bool = True, torn_kept: str | None = None) -> None:
        self.path = path
        self._records = records  # None: opened with keep=False, records not held
        self._count = len(records) if records is not None else count
        self.head = head
        self.torn = torn
        self.torn_kept = torn_kept  # the side file holding the bytes a torn tail's cut removed
        self._group_depth = 0
        self._dirty = False
        self._failed: str | None = None
        # A torn write is a branch only a crash request takes (LOOPPROOF_CRASH_AT is set before
        # the process starts); the crashpoints themselves are always called, so they can be counted.
        self._torn_armed = os.environ.get(faults.ENV, "").startswith("ledger.torn_write:")
        self.lost: str | None = None  # why the file is no longer the one written (LedgerLost)
        self._mark: Mark | None = None
        if fd is None:
            fd = _open_for_append(path)
        self._fd = fd  # read-write: the ownership check reads the last line back through it
        self._written = Written.of(self._fd, _last_line(self._fd) if last is None else last)
        if mark:
            self._mark = Mark(path)

    def _committed(self) -> None:
        """The ledger was just fsynced: move the committed-length mark up to what it holds."""
        if self._mark is not None:
            self._mark.set(self._written.size, self._count)

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path | str, first: Record,
               before_link: Callable[[Ledger, Path], None] | None = None) -> Ledger:
        """A new ledger at `path` holding `first` as record 0; refuses an existing file.
        `before_link(ledger, path)` runs when record 0 is written and durable but not yet at
        `path` (the runner signs it there, so a signed run always has a signature)."""
        path = Path(path)
        _check_record(first, str(path))
        canonical(first)  # refuses what JSON cannot carry exactly, before the file exists
        if _lexists(path):
            raise _exists(path)
        if not path.parent.is_dir():
            raise BadInput(str(path), "ledger", "its folder does not exist",
                           "create the folder first or choose another path")
        # Record 0 is written to a private file and linked into place only when complete, so a
        # crash during creation leaves no ledger at all (the run never started: `run` it again)
        # rather than an empty file that neither `run` nor `resume` would accept. A private file
        # left by a creator that died is removed; a live creator's is left alone.
        for stale in path.parent.glob(f".{path.name}.creating.*"):
            if not _alive(stale.name.rpartition(".")[2]):
                stale.unlink(missing_ok=True)
        tmp = path.with_name(f".{path.name}.creating.{os.getpid()}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        except OSError as exc:
            raise BadInput(str(path), "ledger", f"cannot be created in its folder "
                           f"({exc.strerror or exc})",
                           "choose a folder you can write to (a read-only folder or file "
                           "system cannot hold a ledger)") from None
        ledger: Ledger | None = None
        try:
            ledger = cls(tmp, [], GENESIS, None, last=b"", mark=False)
            ledger.append(first)
            if before_link is not None:
                before_link(ledger, path)
            remove_stale(path)  # an old run's mark, its ledger gone, is no floor for this one
            os.link(tmp, path)  # atomic, and fails if `path` appeared meanwhile (like O_EXCL)
        except FileExistsError:
            if ledger is not None:
                ledger.close()
            raise _exists(path) from None
        except BaseException:
            if ledger is not None:
                ledger.close()
            raise
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(path.parent)
        ledger.path = path
        ledger._mark = Mark(path)
        ledger._committed()
        return ledger

    @classmethod
    def open(cls, path: Path | str, *, keep: bool = True, fold: Fold | None = None,
             allow_empty: bool = True) -> Ledger:
        """Verify the whole chain by the recovery rule (`_scan`), cut a torn tail, and open for
        appending, all through one descriptor (the path is looked up once: a file swapped in
        meanwhile is never cut or appended to).

        A torn tail is cut only after the known-committed point (the mark beside the ledger and
        the signed head's count) is checked, and its bytes are first kept, fsynced, in a side
        file beside the ledger (`torn_kept` names it; `resume` records it in `resumed`).
        `keep=False` holds no record (`records` then raises): a caller that needs the records
        once, such as replay, passes `fold`, called with each verified record in order.
        `allow_empty=False` refuses (BadInput, the file untouched) a file with no complete
        record, which no `Ledger.create` leaves: resuming a wrong file must not cut it to 0."""
        path = Path(path)
        fd, writable = _open_either(path)
        try:
            floor = read_floor(path)
            with os.fdopen(os.dup(fd), "rb") as f:
                scan = _scan(f, str(path), keep=keep, fold=fold, floor=floor)
            if scan.count == 0 and not scan.error and not allow_empty:  # empty, or a torn line:
                raise holds_no_record(path, scan.torn)  # refused before anything is cut
            if scan.error:
                raise LedgerCorrupt(scan.error)
            kept = None
            if scan.torn:
                if not writable:
                    raise BadInput(str(path), "ledger", "ends in a torn line that cannot be cut "
                                   "(the file is read-only)", "make the ledger writable, then resume")
                kept = _cut_torn(fd, path, scan)
            elif not writable:
                raise BadInput(str(path), "ledger", "cannot be opened for appending (the file is "
                               "read-only)", "run as a user who can write it, on a writable file "
                               "system")
        except BaseException:
            os.close(fd)
            raise
        return cls(path, scan.records if keep else None, scan.head, scan.torn, scan.count,
                   fd=fd, torn_kept=kept)

    # ---- reading --------------------------------------------------------------------------
    @property
    def records(self) -> Sequence[Record]:
        if self._records is None:
            raise ValueError(f"{self.path}: opened with keep=False, its records are not held")
        return _Records(self._records)

    def __len__(self) -> int:
        return self._count

    # ---- appending ------------------------------------------------------------------------
    def append(self, record: Record) -> Record:
        """Chain `record` (which must carry "type") after the head, write it, fsync it."""
        if self._fd < 0:
            raise ValueError(f"{self.path}: ledger is closed")
        if self.lost:
            raise LedgerLost(self.lost)
        if self._failed:
            raise LedgerCorrupt(f"{self.path}: an earlier append failed part-way ({self._failed}); "
                                f"fix: reopen the ledger, which verifies it and cuts a torn line")
        _check_record(record, str(self.path))
        stored = dict(record)
        stored["seq"] = self._count
        stored["prev"] = self.head
        h, line = _encode(stored)
        stored["hash"] = h
        self.check_owned()
        faults.crashpoint("ledger.before_append")
        try:
            if self._torn_armed:
                half = len(line) // 2
                _write_all(self._fd, line[:half])
                os.fsync(self._fd)
                faults.crashpoint("ledger.torn_write")
                _write_all(self._fd, line[half:])
            else:
                _write_all(self._fd, line)
            if self._group_depth:
                self._dirty = True
            else:
                os.fsync(self._fd)
        except OSError as exc:  # fail closed: the file may now end in a torn line
            self._failed = str(exc)
            self.lost = (f"{self.path}: a write to the ledger failed ({exc.strerror or exc}); "
                         f"nothing more is recorded; fix: free space or make the file writable, "
                         f"then reopen it (`loopproof resume` cuts a torn last line)")
            raise LedgerLost(self.lost) from None
        if self._records is not None:
            self._records.append(stored)
        self._count += 1
        self.head = h
        self._written.size += len(line)
        self._written.last = line
        if not self._group_depth:
            self._committed()
        faults.crashpoint("ledger.after_append")
        return stored

    # ---- ownership (engine/record/owned.py) -----------------------------------------------
    def _lose(self, why: str) -> LedgerLost:
        self.lost = f"{self.path}: {why}; nothing more is recorded; {OWNED_FIX}"
        return LedgerLost(self.lost)

    def check_owned(self) -> None:
        """Raise LedgerLost unless the path still names the file written, with the length and
        last line written (two stats and a small read)."""
        if self.lost:
            raise LedgerLost(self.lost)
        why = why_not_owned(self.path, self._fd, self._written)
        if why is not None:
            raise self._lose(why)

    def verify_owned(self) -> None:
        """`check_owned`, then re-read the whole file through the descriptor and verify it
        ends in the head and record count written: an edit in place anywhere is caught. Called
        before a run may report DONE and before a head is signed."""
        self.check_owned()
        data = read_all(self._fd, self._written.size)
        scan = _scan(io.BytesIO(data), str(self.path), keep=False)
        if scan.error or scan.torn or scan.count != self._count or scan.head != self.head:
            raise self._lose(f"the ledger on disk is not the chain written "
                             f"({scan.error or scan.torn or 'another head'})")

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """Group commit: appends inside are written at once and fsync'd once, at exit."""
        self._group_depth += 1
        try:
            yield
        finally:
            self._group_depth -= 1
            if self._group_depth == 0 and self._dirty and self._fd >= 0:
                os.fsync(self._fd)
                self._dirty = False
                self._committed()

    def close(self) -> None:
        if self._fd >= 0:
            if self._dirty:
                os.fsync(self._fd)
                self._dirty = False
                self._committed()
            os.close(self._fd)
            self._fd = -1
        if self._mark is not None:
            self._mark.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if self._fd >= 0:
                os.close(self._fd)
            if self._mark is not None:
                self._mark.close()


def _encode(stored: Record) -> tuple[str, bytes]:
    """(hash, line) of a record without "hash": encoded once, the hash member spliced in where
    sorted keys put it. Every record holds "prev", "seq" and "type", which sort after "hash"."""
    low = {k: v for k, v in stored.items() if k < "hash"}
    high = {k: v for k, v in stored.items() if k > "hash"}
    head, tail = canonical(low)[:-1], canonical(high)[1:]
    join = b"," if low else b""
    h = hashlib.sha256(head + join + tail).hexdigest()
    return h, b"".join((head, join, b'"hash":"', h.encode(), b'",', tail, b"\n"))


def _open_for_append(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_APPEND)
    except OSError as exc:
        raise BadInput(str(path), "ledger", f"cannot be opened for appending "
                       f"({exc.strerror or exc})",
                       "run as a user who can write it, on a writable file system") from None


def _open_either(path: Path) -> tuple[int, bool]:
    """One descriptor for the scan, the cut and the appends (read-write when it can be; a
    read-only file is still verified, so corruption is named before "cannot be written")."""
    try:
        return os.open(path, os.O_RDWR | os.O_APPEND), True
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ETXTBSY):
            return _read_fd(path), False
        _read(path).close()  # a missing file, a folder: the BadInput that names it
        raise BadInput(str(path), "ledger", f"cannot be opened ({exc.strerror or exc})",
                       "give the path of a ledger file you can read and write") from None


def _read_fd(path: Path) -> int:
    with _read(path) as f:
        return os.dup(f.fileno())


def _cut_torn(fd: int, path: Path, scan: _Scan) -> str:
    """Keep the torn tail's bytes in a new side file beside the ledger (fsynced, with its
    folder), then cut the ledger to its verified prefix through `fd`, and fsync. Returns the
    side file's name. A crash between the two leaves both: the next open keeps another copy."""
    folder, k = path.parent, 0
    while True:
        name = f"{path.name}.torn-{scan.good_bytes}" + (f".{k}" if k else "")
        try:
            side = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            k += 1
        except OSError as exc:
            raise BadInput(str(path), "ledger", f"ends in a torn line whose bytes cannot be kept "
                           f"beside it ({exc.strerror or exc})",
                           "make the ledger's folder writable, then resume") from None
    try:
        _write_all(side, scan.tail)
        os.fsync(side)
    finally:
        os.close(side)
    _fsync_dir(folder)
    try:
        os.ftruncate(fd, scan.good_bytes)
        os.fsync(fd)
    except OSError as exc:
        raise BadInput(str(path), "ledger", f"ends in a torn line that cannot be cut "
                       f"({exc.strerror or exc})", "make the ledger writable, then resume"
                       ) from None
    return name


def _lexists(path: Path) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:  # a name too long, a component that is a file, ...
        raise BadInput(str(path), "ledger", f"is not a usable path ({exc.strerror or exc})",
                       "choose a shorter path in an existing folder") from None
    return True


def _alive(pid: str) -> bool:
    """Is `pid` (a decimal string from a file name) a running process?"""
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _last_line(fd: int) -> bytes:
    """The file's last complete line (b"" for an empty file), read backwards through `fd`."""
    end = os.fstat(fd).st_size
    if end == 0:
        return b""
    tail, pos = b"", end
    while pos > 0:
        step = min(pos, 1 << 16)
        pos -= step
        tail = os.pread(fd, step, pos) + tail
        i = tail.rfind(b"\n", 0, len(tail) - 1)
        if i >= 0:
            return tail[i + 1:]
    return tail


def _check_record(record: object, name: str) -> None:
    if not isinstance(record, dict):
        raise TypeError(f"{name}: a ledger record must be a dict, got {type(record).__name__}")
    if not isinstance(record.get("type"), str) or not record["type"]:
        raise ValueError(f"{name}: a ledger record must carry a non-empty string 'type'")
    taken = [k for k in CHAIN_FIELDS if k in record]
    if taken:
        raise ValueError(f"{name}: fields {taken} are set by the ledger, not by the caller")
    _check_ints(record, name)


_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1


def _check_ints(value: Any, name: str) -> None:
    """Refuse integers beyond 64 bits: the fast reader (orjson) would turn them into floats, so
    replay would not see what was written. Store such numbers as strings."""
    t = type(value)
    if t is dict:
        for v in value.values():
            _check_ints(v, name)
    elif t is list or t is tuple:
        for v in value:
            _check_ints(v, name)
    elif isinstance(value, int) and not isinstance(value, bool) and not (
            _INT_MIN <= value <= _INT_MAX):
        raise ValueError(f"{name}: integer {value} does not fit 64 bits; store it as a string")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
