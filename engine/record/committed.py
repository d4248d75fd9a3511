"""The known-committed point of a ledger: what recovery may never cut below.

Why a mark beside the ledger: a chain cannot tell a record whose newline was lost (or a file
truncated inside its last record) from a write a crash cut short; both end in bytes after the last
newline that start like a record. What was committed can: the engine writes `<ledger>.committed`
(one fixed-size line, the ledger's length and record count) with `pwrite` and fsyncs it after
every fsync of the ledger (each append outside a group, each group commit, each close). The mark
only ever trails the ledger (a crash between the two fsyncs leaves the older mark), so a ledger
shorter than its mark, or with fewer verified records, lost committed bytes: `broken`, nothing
cut. The signed head (`<ledger>.sig`) is a second such point, read the same way before cutting.

The mark guards against accidents and crashes, not an attacker (who can rewrite it too): that is
what the signature is for. A missing mark means no floor (a copied ledger, one written before the
mark existed); a mark that is empty or all zeros (a power loss right after it was created) is
treated as missing; any other mark that does not parse is refused (fail closed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.errors import LedgerCorrupt

SUFFIX = ".committed"
_LINE = b"loopproof-committed v1 bytes %020d records %020d\n"
_PATTERN = re.compile(rb"loopproof-committed v1 bytes (\d{20}) records (\d{20})\n\Z")
SIZE = len(_LINE % (0, 0))


def mark_path(ledger: Path | str) -> Path:
    return Path(f"{ledger}{SUFFIX}")


@dataclass(frozen=True)
class Floor:
    """Bytes and records recovery may not go below, and where each figure comes from."""

    bytes: int = 0
    records: int = 0
    source: str = ""

    def why_below(self, good_bytes: int, records: int) -> str | None:
        """Why a ledger whose verified prefix is `records` records in `good_bytes` bytes lost
        committed records (None if it did not)."""
        if records >= self.records and good_bytes >= self.bytes:
            return None
        return (f"only {records} complete records ({good_bytes} bytes) verify, but "
                f"{self.records} records ({self.bytes} bytes) were committed ({self.source}): "
                f"committed records were damaged or cut, which no crash does, so nothing is "
                f"cut")


def read_floor(ledger: Path | str, signed: bool = True) -> Floor:
    """The floor from the mark and (with `signed`) the signed head's record count. Only ever
    raises: it may refuse a recovery, never allow one, so the sidecar's count is used before its
    signature is checked (a forged count can only stop a cut, which the check would stop too)."""
    ledger = Path(ledger)
    size, records, sources = 0, 0, []
    where = mark_path(ledger)
    try:
        raw = where.read_bytes()
    except FileNotFoundError:
        raw = b""
    except OSError as exc:
        raise LedgerCorrupt(f"{where}: the committed-length mark cannot be read "
                            f"({exc.strerror or exc}); fix: make it readable") from None
    if raw.strip(b"\x00"):
        m = _PATTERN.match(raw)
        if m is None:
            raise LedgerCorrupt(f"{where}: the committed-length mark is not valid; fix: restore "
                                f"it with the ledger from a trusted copy, or remove it if the "
                                f"ledger beside it is trusted")
        size, records = int(m[1]), int(m[2])
        sources.append(f"the committed-length mark {where.name}")
    if signed:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
            side = json.loads(Path(f"{ledger}.sig").read_text())
            signed_records = int(side["records"])
            if signed_records > records:
                records = signed_records
                sources.append(f"the signed head {ledger.name}.sig")
    return Floor(size, records, " and ".join(sources))


class Mark:
    """The open mark of a ledger the engine writes; `set` makes a new committed point durable."""

    def __init__(self, ledger: Path) -> None:
        self.fd = -1
        with contextlib.suppress(OSError):  # a folder that is read-only: no mark, no floor
            self.fd = os.open(mark_path(ledger), os.O_RDWR | os.O_CREAT, 0o644)

    def set(self, size: int, records: int) -> None:
        if self.fd >= 0:
            os.pwrite(self.fd, _LINE % (size, records), 0)
            os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def remove_stale(ledger: Path) -> None:
    """Remove the mark of a ledger no longer at `ledger` (before a new one is linked there)."""
    mark_path(ledger).unlink(missing_ok=True)
