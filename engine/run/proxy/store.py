"""Request and response bodies of model calls, stored content-addressed beside the ledger.

Why content-addressed: the ledger records only a body's SHA-256 (a call record stays small and
the chain covers it); the bytes live in `<ledger>.calls/<sha256>`, so a reader can check a body
against its record, and the same body is stored once. Why redacted first: a worker may echo its
per-attempt token into a prompt, and an upstream may echo anything; every secret the proxy knows
(the upstream key, the attempt's token) is replaced by `[redacted]` before hashing and storing,
so neither reaches the ledger or its side files.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

REDACTED = b"[redacted]"


def calls_root(ledger_path: Path) -> Path:
    return ledger_path.with_name(ledger_path.name + ".calls")


def redact(data: bytes, secrets: Iterable[str | None]) -> bytes:
    for s in secrets:
        if s:
            data = data.replace(s.encode(), REDACTED)
    return data


class BodyStore:
    """Write-once files named by the SHA-256 of their (redacted) bytes."""

    def __init__(self, root: Path, secrets: Iterable[str | None]) -> None:
        self.root = root
        self.secrets = tuple(s for s in secrets if s)

    def put(self, data: bytes) -> str:
        data = redact(data, self.secrets)
        digest = hashlib.sha256(data).hexdigest()
        path = self.root / digest
        if not path.exists():
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = path.with_name(f".{digest}.{os.getpid()}.{id(data)}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return digest
