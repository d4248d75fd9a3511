"""The one byte form every record and digest is taken over, and the digest of it.

Why in system/: the ledger (engine/record) hashes records with it and the file-tree state hash
(engine/system/trees.py) hashes tree entries with it; both must agree on the bytes, so the form
lives below both.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False),
# with the encoder built once rather than on every call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False)


def canonical(obj: Any) -> bytes:
    """The one byte form of a record: sorted keys, no spaces, UTF-8, no NaN/Infinity."""
    return _ENCODER.encode(obj).encode()


def digest(obj: Any) -> str:
    """SHA-256 of the canonical JSON of `obj`, hex."""
    return hashlib.sha256(canonical(obj)).hexdigest()
