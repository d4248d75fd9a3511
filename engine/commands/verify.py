"""`loopproof verify LEDGER`: check a ledger's hash chain (and, given a public key, its signed head)
without changing the file. Exit 0 verified or torn-tail, 5 broken, 2 bad input (among it a file
that is empty or holds only a line cut short: no run leaves one). A run's ledger whose chain holds
but whose records no run writes (a record its type does not declare, a step the model refuses:
a rewrite of the chain) is corrupt too: exit 5, the line saying why.

For a run's ledger it also says how the run stands (`run`: its outcome, or why it has not ended,
e.g. "unfinished: attempt open" after a kill inside an attempt): a chain that verifies says
nothing about whether the run is over."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loopproof.engine.record.ledger import Verification, holds_no_record, verify
from loopproof.engine.record.timeline import run_status
from loopproof.engine.system.exits import Exit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ledger", type=Path, metavar="LEDGER", help="the ledger file (JSON Lines)")
    parser.add_argument("--public-key", type=Path, default=None, metavar="PEM",
                        help="check the signed head (LEDGER.sig) with this Ed25519 public key")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def check(ledger: Path, public_key: Path | None = None) -> Verification:
    """The chain check, plus the signature check when a public key is given."""
    if public_key is None:
        return verify(ledger)
    from loopproof.engine.record.signing import verify_signed

    return verify_signed(ledger, public_key)


def main(args: argparse.Namespace) -> int:
    result = check(args.ledger, args.public_key)
    if result.records == 0 and result.status != "broken":  # not "verified, 0 records"
        raise holds_no_record(args.ledger, result.error)
    run = None if result.status == "broken" else run_status(args.ledger, result)
    if args.json:
        out = result.as_dict()
        if run is not None:
            out["run"] = run
        print(json.dumps(out, sort_keys=True))
    else:
        line = f"{args.ledger}: {result.status}, {result.records} records"
        if result.head:
            line += f", head {result.head[:16]}"
        if result.error:
            line += f" — {result.error}"
        if run is not None:
            line += f"; {run['unfinished'] or run['error'] or 'run ended ' + run['outcome']}"
        print(line)
    corrupt = result.status == "broken" or (run is not None and run["error"] is not None)
    return Exit.CORRUPT if corrupt else Exit.OK
