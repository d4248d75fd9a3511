"""`loopproof cancel LEDGER NODE`: ask that NODE's activation end without a verdict.

For a run that is not running (stopped by the kill switch, or crashed): the ledger is verified
and replayed, and the request is checked against the model in the state the next resume acts on
(an attempt with no recorded end is given back first). A request the model refuses is bad input
(exit 2, nothing written), with the model's reason. Otherwise a `cancel_requested` record is
appended (exit 0), and the next `loopproof resume` commits it as the model's `Cancel(NODE)`: the
node is exhausted with the attempts it made, and its repair (or the run's failure) follows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loopproof.engine.run.operator import request_cancel
from loopproof.engine.run.runner import Runner
from loopproof.engine.system.errors import BadInput


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ledger", type=Path, metavar="LEDGER",
                        help="the ledger of a run that is not running")
    parser.add_argument("node", metavar="NODE", help="the node whose activation ends")
    parser.add_argument("--reason", default="", metavar="TEXT",
                        help="a note kept in the ledger (one line)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def main(args: argparse.Namespace) -> int:
    if not args.ledger.is_file():
        raise BadInput(str(args.ledger), "LEDGER", "no such ledger file",
                       "give the ledger written by `loopproof run`")
    runner = Runner.resume(args.ledger)  # locks the ledger, verifies and replays it
    try:
        record = request_cancel(runner.journal, args.node, args.reason, str(args.ledger))
    finally:
        runner.close()
    if args.json:
        print(json.dumps(record, sort_keys=True))
    else:
        print(f"cancel of {args.node} (activation {record['activation']}) requested at record "
              f"{record['seq']}; `loopproof resume --ledger {args.ledger}` carries it out")
    return 0
