"""`loopproof resume --ledger L`: continue a run from its verified ledger.

The ledger is verified (a torn final line is cut and reported; anything else is exit 5) and
replayed; the spec is rebuilt from the ledger's first record. An attempt that started with no
recorded end is charged its open reservation, marked outcome-unknown (`abandon`) and given back:
the node runs that attempt again, and the report counts the repeated execution. A finished run
is reported and left unchanged.

`--price P` changes the resources: a `resources` record (old and new price) is appended, every
later attempt is metered at P spend units per wall-clock second (so its deadline is
(c_v - eval_reserve) / P seconds, capped by timeout_s) and admitted against the settled spend
replayed from the ledger, which is never reset.

`--dask tcp://HOST:8786`: the rest of the run's attempts run on that Dask cluster; what a killed
engine left running there (its attempts in flight) is killed and its folders removed first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loopproof.engine.commands._report import (
    add_dask_argument,
    finish,
    on_cluster,
    runner_progress,
    warn_unsandboxed,
)
from loopproof.engine.run.runner import Runner


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ledger", type=Path, required=True, metavar="L",
                        help="the ledger written by `loopproof run`")
    parser.add_argument("--stop-file", type=Path, default=None, metavar="PATH",
                        help="kill switch file (default: the one the run recorded)")
    parser.add_argument("--price", type=float, default=None, metavar="P",
                        help="new price: spend units per wall-clock second (recorded)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_dask_argument(parser)


def main(args: argparse.Namespace) -> int:
    with on_cluster(args.dask, args.ledger) as cluster:
        runner = Runner.resume(args.ledger, stop_file=args.stop_file, price=args.price,
                               cluster=cluster)
        warn_unsandboxed(runner.spec.sandbox)
        try:
            with runner_progress(args.json) as progress:
                runner.progress = progress
                code = runner.continue_run()
        finally:
            runner.close()
    return finish(runner, code, args.json)
