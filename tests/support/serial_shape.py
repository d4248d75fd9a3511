"""The shape of a serial run's ledger: what `max_parallel = 1` must leave exactly as it was.

Why a shape and not the bytes: a command worker's spend is its wall clock, gates report their
seconds, and record 0 names the folders of the run, so no two runs of an example have the same
bytes. The shape is every record with those removed: chain fields, measured amounts and times,
the run's and the repository's folders, and digests (of trees and receipts, which cover file
modes and paths of the checkout). What is left (which records, in which order, with which
fields and decided values) is what an engine change could alter; tests/fixtures/
serial_shapes.json holds the digest of each example's shape as the engine made it before
several attempts could be in flight (commit 18eb5de), and test_examples.py compares.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

MEASURED = frozenset({"hash", "prev", "seq", "seconds", "elapsed", "pid", "pgid", "time",
                      "duration", "settled", "reserved", "charged", "head", "attempt_spend",
                      "left"})
HEX = re.compile(r"[0-9a-f]{12,64}")


def _strip(obj: Any, roots: list[tuple[str, str]]) -> Any:
    if isinstance(obj, dict):
        out = {_strip(k, roots): _strip(v, roots) for k, v in obj.items() if k not in MEASURED}
        if (obj.get("type") in ("settle", "reserve", "overrun")
                and obj.get("what") in ("wall_clock", "evaluation")):
            out.pop("amount", None)
            out.pop("of", None)
        return out
    if isinstance(obj, list):
        return [_strip(v, roots) for v in obj]
    if isinstance(obj, str):
        for root, name in roots:
            obj = obj.replace(root, name)
        return HEX.sub("<digest>", obj)
    return obj


def shape_digest(ledger: Path, run_folder: Path, repo: Path) -> str:
    """sha256 (16 hex digits) of the ledger's shape (module docstring)."""
    recs = [json.loads(line) for line in Path(ledger).read_text().splitlines()]
    shape = _strip(recs, [(str(Path(run_folder).resolve()), "<run>"), (str(run_folder), "<run>"),
                          (str(Path(repo).resolve()), "<repo>")])
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]
