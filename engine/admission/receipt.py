"""Receipts: what a completed guarded run issues, and how anyone checks one later.

A receipt names the checkpoint (tree hash, generation, the proposal that admitted it), the pinned
suites and policy, every verdict with the id of its recorded evidence, how much of the run the
checks covered, and why this checkpoint was selected. Its digest is anchored in the ledger
(`guard.receipt`, or the accepting `verdict` of a run ledger), so an edited or unanchored receipt,
or one whose evidence the ledger does not hold, fails `verify_receipt`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from loopproof.engine.admission.checkpoint import CheckpointError, CheckpointStore
from loopproof.engine.admission.evidence import Evidence
from loopproof.engine.admission.state import BrokerState
from loopproof.engine.policy.guards import refuse
from loopproof.engine.record.ledger import verify as verify_chain
from loopproof.engine.system.canonical import digest
from loopproof.engine.system.errors import BadInput
from loopproof.model import receipts as mr

RECEIPT_VERSION = 1


def build_receipt(broker: BrokerState, recert: Sequence[Evidence], restored: Sequence[str]
                  ) -> dict[str, Any]:
    """The receipt for `broker`'s checkpoint, recertified by `recert`; `restored`: leftovers
    removed from the workspace at completion."""
    assert broker.checkpoint is not None
    coverage: dict[str, dict[str, Any]] = {}
    for v in broker._verdicts:
        entry = coverage.setdefault(v["check"], {"intermediate": [], "terminal": False})
        if v["phase"] == "recertification":
            entry["terminal"] = True
        elif v["candidate"] != broker.checkpoint and v["candidate"] not in entry["intermediate"]:
            entry["intermediate"].append(v["candidate"])
    for entry in coverage.values():
        entry["intermediate"] = len(entry["intermediate"])
    mode = ("intermediate and terminal"
            if any(e["intermediate"] for e in coverage.values()) else "terminal only")
    later = broker.counts["proposals"] - broker._proposals_at_checkpoint
    origin = ("the initial tree passed admission" if broker._checkpoint_by == "initial"
              else f"proposal {broker._checkpoint_by[:12]} passed admission")
    selected = (f"latest admitted candidate (generation {broker.generation}: {origin}); "
                f"{later} later proposal(s) were not admitted; recertified by "
                f"{', '.join(e.check for e in recert)}")
    body = {
        "version": RECEIPT_VERSION,
        "checkpoint": {"tree_hash": broker.checkpoint, "generation": broker.generation,
                       "admitted_by": broker._checkpoint_by},
        "suites": dict(broker.pinned_suites),
        "policy_hash": broker.pinned_policy,
        "verdicts": list(broker._verdicts),
        "coverage": {"mode": mode, "checks": coverage},
        "liveness": {**broker.counts, "after_checkpoint": later,
                     "ended": broker.status.value if broker.status != "open" else "by the caller",
                     "why_ended": broker.status_reason,
                     "recovered": later > 0 or broker.counts["restores"] > 0,
                     "restored_at_completion": list(restored),
                     "selected_because": selected},
        "proposals": list(broker._proposals),
    }
    return {**body, "digest": digest(body)}


def load_receipt(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(str(path), "receipt", f"cannot be read as JSON ({exc})",
                       "give the receipt.json a completed guarded run wrote") from None
    if not isinstance(obj, dict):
        raise BadInput(str(path), "receipt", "is not a JSON object",
                       "give the receipt.json a completed guarded run wrote")
    return obj


def verify_receipt(receipt: Mapping[str, Any], records: Iterable[Mapping[str, Any]],
                   store: CheckpointStore | None = None) -> list[str]:
    """Every reason `receipt` cannot be trusted against the ledger `records` (empty: verified).

    Checks: the digest matches the content; the digest is anchored by a `guard.receipt` record;
    every verdict names evidence the ledger holds with that verdict; and, given the store, the
    checkpoint snapshot still hashes to the receipt's tree hash.

    `records` may also be a run ledger (record 0 of type `run`): see `verify_receipt_in_run`.
    """
    records = list(records)
    if records and records[0].get("type") == "run":
        return verify_receipt_in_run(receipt, records, store)
    body = {k: v for k, v in receipt.items() if k != "digest"}
    anchors = {r.get("digest") for r in records if r.get("type") == "guard.receipt"}
    said = dict(mr.receipt_problems(digest(body), receipt.get("digest"), anchors))
    problems = [why for why in (refuse("receipt.digest", said.get("digest")),
                                refuse("receipt.anchored", said.get("anchored"))) if why]
    evidence = {r.get("id"): r for r in records if r.get("type") == "guard.evidence"}
    for v in receipt.get("verdicts", []):
        rec = evidence.get(v.get("evidence_id"))
        if rec is None:
            problems.append(f"verdict {v.get('execution_id')!r}: its evidence is not in the ledger")
        elif rec.get("payload", {}).get("verdict") != v.get("verdict"):
            problems.append(f"verdict {v.get('execution_id')!r}: ledger says "
                            f"{rec.get('payload', {}).get('verdict')!r}, receipt says "
                            f"{v.get('verdict')!r}")
    if store is not None:
        tree = receipt.get("checkpoint", {}).get("tree_hash", "")
        try:
            store.path_of(str(tree))
        except CheckpointError as exc:
            problems.append(f"checkpoint: {exc}")
    return problems


def verify_receipt_in_run(receipt: Mapping[str, Any], run_records: Sequence[Mapping[str, Any]],
                          store: CheckpointStore | None = None) -> list[str]:
    """Verify a receipt against the run ledger that accepted it.

    The runner anchors a revision node's receipt in the accepting `verdict` record (`receipt`:
    digest, guard ledger path, its head hash and record count). The receipt's digest must be
    anchored by a passing verdict; the guard ledger it names must still verify and still have
    the anchored head at the anchored length (so it was not rewritten after the acceptance);
    then everything `verify_receipt` checks against the guard ledger must hold.
    """
    d = receipt.get("digest")
    anchors = [r["receipt"] for r in run_records
               if r.get("type") == "verdict" and r.get("passed") is True
               and isinstance(r.get("receipt"), dict) and r["receipt"].get("digest") == d]
    if not anchors:
        body = {k: v for k, v in receipt.items() if k != "digest"}
        problems = [why for rule, why in mr.receipt_problems(digest(body), d, (d,))
                    if rule == "digest"]
        return [*problems, "receipt digest is not anchored in the run ledger (no accepting "
                           "verdict names it)"]
    anchor = anchors[-1]
    guard = Path(str(anchor.get("guard_ledger", "")))
    count, head = anchor.get("guard_records"), anchor.get("guard_head")
    if not guard.is_file():
        return [f"{guard}: the guard ledger the run ledger anchors is missing"]
    check = verify_chain(guard)
    if check.status == "broken":
        return [f"guard ledger: {check.error}"]
    if not isinstance(count, int) or not 0 < count <= check.records:
        return [f"guard ledger: the run ledger anchors {count!r} records, it holds "
                f"{check.records}"]
    lines = guard.read_bytes().split(b"\n")[:count]
    guard_records = [json.loads(line) for line in lines]
    if guard_records[-1].get("hash") != head:
        return [f"guard ledger: record {count - 1} is not the head the run ledger anchored "
                f"({str(head)[:12]}...); it was rewritten after the acceptance"]
    return verify_receipt(receipt, guard_records, store)
