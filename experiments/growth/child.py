"""One growth loop process, for the matrices that SIGKILL a real run (crash, resource drift).

    python -m experiments.growth.child start DIR --seed S --budget B [--arm R1I1] [--fault F]
    python -m experiments.growth.child resume DIR [--gpus G --step H --price P] [--fault F]

Exit status: the loop's (0 DONE, 3 FAILED, 5 policy changed, 6 stopped, 7 broken), 2 for bad
input (one line on stderr). With LOOPPROOF_GROWTH_COUNT=FILE the process counts how often it
reaches each crash site and writes the counts to FILE as JSON (nothing is killed): the crash
matrix's baseline. LOOPPROOF_CRASH_AT=site:n kills it there (engine.system.faults).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

COUNT_ENV = "LOOPPROOF_GROWTH_COUNT"


def _count_sites(path: str) -> dict[str, int]:
    """Wrap the crashpoint before the engine modules bind it, counting every call."""
    import loopproof.engine.system.faults as faults
    counts: dict[str, int] = {}
    real = faults.crashpoint

    def crashpoint(site: str) -> None:
        counts[site] = counts.get(site, 0) + 1
        real(site)

    faults.crashpoint = crashpoint
    return counts


def main(argv: list[str] | None = None) -> int:
    count_into = os.environ.get(COUNT_ENV)
    counts = _count_sites(count_into) if count_into else None
    from experiments.growth.folder import prepare
    from experiments.growth.loop import GrowthLoop
    from experiments.growth.progress import Arm
    from loopproof.engine.system.errors import BadInput, LedgerCorrupt

    p = argparse.ArgumentParser(prog="python -m experiments.growth.child")
    p.add_argument("command", choices=["start", "resume"])
    p.add_argument("folder", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=float, default=20.0)
    p.add_argument("--arm", default="R1I1", choices=["R0I0", "R1I0", "R0I1", "R1I1"])
    p.add_argument("--gpus", type=int)
    p.add_argument("--step", type=float)
    p.add_argument("--price", type=float)
    p.add_argument("--fault", action="append", default=[])
    args = p.parse_args(argv)
    try:
        if args.command == "start":
            prepare(args.folder, args.budget)
            arm = Arm(args.arm[1] == "1", args.arm[3] == "1")
            loop = GrowthLoop.start(args.folder, seed=args.seed, arm=arm, faults=args.fault)
        else:
            loop = GrowthLoop.resume(args.folder, faults=args.fault)
            given = {k: v for k, v in (("gpus", args.gpus), ("step", args.step),
                                       ("price", args.price)) if v is not None}
            if given:  # a change of resources at this resume (the drift matrix)
                loop.new_resources = dataclasses.replace(loop.view.resources, **given)
        code = loop.run()
    except (BadInput, LedgerCorrupt) as exc:
        print(f"growth: {exc}", file=sys.stderr)
        code = 2 if isinstance(exc, BadInput) else 5
    finally:
        if counts is not None and count_into:
            Path(count_into).write_text(json.dumps(counts, sort_keys=True))
    return code


if __name__ == "__main__":
    sys.exit(main())
