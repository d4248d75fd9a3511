"""`loopproof run GRAPH.toml --ledger L`: run a bounded-loop graph and write its ledger.

Exit 0 DONE, 2 bad input (nothing written), 3 FAILED, 4 BUDGET_EXHAUSTED, 5 a pinned file or
the policy changed (recorded), 6 stopped by the kill switch (resume continues).
`--dask tcp://HOST:8786`: every attempt's worker and gate run on that Dask cluster (docs/scale.md).
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
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.values import add_size_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", type=Path, metavar="GRAPH.toml", help="the graph spec")
    parser.add_argument("--ledger", type=Path, required=True, metavar="L",
                        help="the ledger to create (must not exist); workspaces go to L.work/")
    parser.add_argument("--stop-file", type=Path, default=None, metavar="PATH",
                        help="kill switch: when this file exists the run stops at the next safe "
                             "point (default: the graph's stop_file, else L.stop)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="attempts in flight at once (overrides [graph] max_parallel; "
                             "default: the graph's, else 1); kept in the ledger for resume")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_dask_argument(parser)
    add_size_argument(parser)


def main(args: argparse.Namespace) -> int:
    spec = spec_mod.load(args.graph, args.max_spec_bytes)
    warn_unsandboxed(spec.sandbox)
    with on_cluster(args.dask, args.ledger) as cluster, runner_progress(args.json) as progress:
        runner = Runner.start(spec, args.ledger, stop_file=args.stop_file, progress=progress,
                              jobs=args.jobs, cluster=cluster)
        try:
            code = runner.run()
        finally:
            runner.close()
    return finish(runner, code, args.json)
