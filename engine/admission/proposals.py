"""The proposal store: every worker reply, content-addressed under <state_dir>/proposals/, and
read back (checked) to replay a guarded run.

Why content-addressed: the ledger names each proposal by its digest (`guard.proposal`), so a
stored reply that was lost or edited is found on reading, never silently replayed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from loopproof.engine.policy.guards import refuse
from loopproof.engine.record.ledger import canonical
from loopproof.engine.system.canonical import digest
from loopproof.engine.system.errors import LedgerCorrupt
from loopproof.model import receipts as mr


def store_proposal(proposals_dir: Path, record: Mapping[str, Any]) -> str:
    """Write `record` (an `action_record`) as <digest>.json, atomically, once; its digest."""
    d = str(record["digest"])
    path = proposals_dir / f"{d}.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(canonical(record))
        os.replace(tmp, path)
    return d


def stored_proposals(state_dir: Path, records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every proposal the ledger names, in order, read from the content-addressed store and
    checked: a missing or altered proposal raises LedgerCorrupt naming it."""
    out = []
    for r in records:
        if r.get("type") != "guard.proposal":
            continue
        d = str(r.get("digest"))
        path = Path(state_dir) / "proposals" / f"{d}.json"
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LedgerCorrupt(f"{path}: proposal {d[:12]} unreadable ({exc}); fix: restore "
                                f"the proposal store from a trusted copy") from None
        body = {k: v for k, v in stored.items() if k != "digest"}
        if refuse("proposal.digest",
                  dict(mr.proposal_problems(digest(body), stored.get("digest"), d)).get("digest")):
            raise LedgerCorrupt(f"{path}: proposal {d[:12]} does not match its digest; fix: "
                                f"restore the proposal store from a trusted copy")
        out.append(stored)
    return out
