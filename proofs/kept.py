"""A full run's report, kept under the digest of everything its results depend on.

Why: make check discharges every obligation in its `python -m loopproof.proofs` step, and the tests then
ask, per obligation, whether it gave its expected result and whether its counterexamples are the
same in another order. `python -m loopproof.proofs --keep build/proofs` writes the run's JSON report to
`build/proofs/<digest>.json`; the tests read it there instead of discharging all 68 again. The
digest covers every file of model/ and proofs/ (the Coq sources included), the Z3, Python, coqc
and ocamlopt versions: change any of them and the kept report is not found, so the tests run the
proofs afresh (tests/support/proofs_report.py). Only a run of the whole default set is kept: `--only`,
`--max-nodes` or `--max-depth` give a report of something else.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import z3

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("model", "proofs")


def digest() -> str:
    """The hash of what a full run's results depend on."""
    from loopproof.proofs import coq

    h = hashlib.sha256()
    h.update(f"z3 {z3.get_version_string()}\0python {sys.version}\0".encode())
    try:
        h.update(coq.source_hash().encode())
    except coq.CoqUnavailable as e:  # the coq obligations then fail; the report says so
        h.update(f"no coq: {e}".encode())
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def path(directory: Path) -> Path:
    return directory / f"{digest()}.json"


def keep(directory: Path, report: list[dict[str, Any]]) -> Path:
    """Write `report` to directory/<digest>.json whole or not at all (a reader in another
    process never sees half a file)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = path(directory)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kept-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
        f.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a report is for every reader of the tree
    os.replace(tmp, target)
    return target


def load(directory: Path) -> list[dict[str, Any]] | None:
    """The kept report for today's sources, or None: also when its bytes are not a report (a
    zero-filled or cut file, a disk that failed), so the caller runs the proofs again."""
    try:
        rows = json.loads(path(directory).read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(rows, list) and all(isinstance(r, dict) and "id" in r and "result" in r
                                           for r in rows)):
        return None
    return rows
