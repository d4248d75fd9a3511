"""`loopproof bound GRAPH.toml`: the closed-form worst cases of a graph before it runs.

Prints {"W": W, "W_c": W_c, "B": B, "fits": W_c <= B} (model.bounds.GLOSS says what W and W_c
are). Exit 0; 2 on a bad spec, or a node whose wall-clock reservation leaves less than one
model call's bound. It reads no key: a bound needs no secret.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.call_room import refuse_unfit_model_calls
from loopproof.engine.run.values import add_size_argument
from loopproof.engine.system import collector
from loopproof.model.bounds import GLOSS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", type=Path, metavar="GRAPH.toml", help="the graph spec")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_size_argument(parser)


def main(args: argparse.Namespace) -> int:
    with collector.paused():  # W and W_c of a large graph build indices, not cycles
        spec = spec_mod.load(args.graph, args.max_spec_bytes)
        refuse_unfit_model_calls(spec)  # the bound needs no key, only the numbers
        b = spec.bounds()
    if args.json:
        print(json.dumps(b, sort_keys=True))
    else:
        verdict = "fits" if b["fits"] else "does NOT fit"
        print(f"{args.graph}: W = {b['W']} attempts, W_c = {b['W_c']:g} spend units: "
              f"{verdict} the budget B = {b['B']:g}\n  {GLOSS}")
    return 0
