"""`loopproof receipt RECEIPT.json`: verify a completion receipt against the ledger that anchors
it and the checkpoint store that holds its tree, without changing anything.

By default the ledger is `guard.jsonl` and the store `checkpoint/` next to the receipt (the
layout a `kind = "revision"` attempt writes). Exit 0 verified, 5 broken (a tampered receipt, an
unanchored digest, a verdict the ledger does not hold, an altered snapshot, a broken ledger),
2 bad input (a missing or unreadable receipt, a --ledger that holds no ledger record, a
--store that is not a folder).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loopproof.engine.admission.broker import load_receipt, verify_receipt
from loopproof.engine.admission.checkpoint import CheckpointStore
from loopproof.engine.record.ledger import holds_no_record, verify
from loopproof.engine.record.record_types import GUARD_RECORDS, RUN_RECORDS
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.exits import Exit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("receipt", type=Path, metavar="RECEIPT.json", help="the receipt file")
    parser.add_argument("--ledger", type=Path, default=None, metavar="L",
                        help="the ledger anchoring it (default: guard.jsonl beside the receipt)")
    parser.add_argument("--store", type=Path, default=None, metavar="DIR",
                        help="the checkpoint store (default: checkpoint/ beside the receipt)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def main(args: argparse.Namespace) -> int:
    if not args.receipt.is_file():
        raise BadInput(str(args.receipt), "receipt", "is not a file",
                       "give the receipt.json a completed guarded attempt wrote")
    receipt = load_receipt(args.receipt)
    ledger_path = args.ledger or args.receipt.parent / "guard.jsonl"
    store_path = args.store or args.receipt.parent / "checkpoint"
    if ledger_path.is_dir():
        raise BadInput(str(ledger_path), "--ledger", "is a directory, not a ledger file",
                       "give the path of the ledger file itself")
    if not ledger_path.is_file():
        raise BadInput(str(ledger_path), "--ledger", "no such ledger",
                       "name the ledger that anchors this receipt with --ledger")
    if args.store is not None and not args.store.is_dir():  # a typo, not a tampered store
        raise BadInput(str(args.store), "--store", "is not a folder",
                       "give the checkpoint/ folder the revision attempt wrote (or leave --store "
                       "out: checkpoint/ beside the receipt)")
    check = verify(ledger_path)  # reads only; a torn tail is reported, not truncated
    if check.records == 0 and check.status != "broken":
        raise holds_no_record(ledger_path, check.error)
    if check.status == "broken":
        problems = [f"ledger: {check.error}"]
    else:
        lines = ledger_path.read_bytes().split(b"\n")[:check.records]
        records = [json.loads(line) for line in lines]
        declared = RUN_RECORDS if records[0].get("type") == "run" else GUARD_RECORDS
        for rec in records:  # a record no run or broker writes: one line, exit 2
            declared.check_read(rec, ledger_path)
        problems = verify_receipt(receipt, records,
                                  CheckpointStore(store_path) if store_path.is_dir() else None)
    if not store_path.is_dir():
        problems.append(f"{store_path}: no checkpoint store; the tree was not checked")
    out = {"status": "broken" if problems else "verified", "problems": problems,
           "digest": receipt.get("digest"),
           "checkpoint": (receipt.get("checkpoint") or {}).get("tree_hash"),
           "ledger": str(ledger_path)}
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        print(f"{args.receipt}: {out['status']}"
              + "".join(f"\n  - {p}" for p in problems))
    return Exit.CORRUPT if problems else Exit.OK
