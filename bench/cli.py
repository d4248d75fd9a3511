"""`python -m bench --json`: every benchmark of bench/, written to results/bench/bench.json.

Every module listed in `MODULES` registers its benchmarks in `bench.registry`; each result dict
is stored under its name. Timings vary run to run, so bench.json is exempt from the same-bytes
rule.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from bench.registry import BENCHMARKS
from bench.targets import figures, line

MODULES = ("bench.ledger", "bench.attempt", "bench.llm", "bench.proxy", "bench.sandbox",
           "bench.bound", "bench.chain", "bench.replay", "bench.startup", "bench.explorer",
           "bench.prove", "bench.peer", "bench.extending")


def _load_modules() -> None:
    for name in MODULES:
        importlib.import_module(name)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000,
                   help="ledger size (default 1,000,000)")
    p.add_argument("--bound-nodes", type=int, default=100_000,
                   help="graph size for `loopproof bound` (default 100,000)")
    p.add_argument("--chain-nodes", type=int, default=10_000,
                   help="chain run for the per-attempt overhead (default 10,000)")
    p.add_argument("--replay-nodes", type=int, default=10_000,
                   help="run whose ledger is replayed (default 10,000 nodes)")
    p.add_argument("--explore-nodes", type=int, default=4, help="explorer size (default 4)")
    p.add_argument("--peer-records", type=int, default=500,
                   help="records appended by the peer engine and by ours (default 500; the peer's append is O(n))")
    p.add_argument("--peer-python", default=".venv-peer/bin/python",
                   help="the peer engine's interpreter (made by `make bench-peer`)")
    p.add_argument("--fsync-records", type=int, default=2_000,
                   help="appends timed with an fsync each (default 2,000)")
    p.add_argument("--group-size", type=int, default=1_000, help="appends per group commit")
    p.add_argument("--repeat", type=int, default=3, help="verify timings: best of this many")
    p.add_argument("--out", type=Path, default=Path("results/bench"), help="results folder")
    p.add_argument("--only", action="append", default=None, metavar="NAME",
                   help="run only this benchmark (repeatable)")
    p.add_argument("--skip", action="append", default=[], metavar="NAME",
                   help="leave this benchmark out (repeatable)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    args = p.parse_args(argv)
    for name, least in (("records", 2), ("fsync_records", 2), ("group_size", 1), ("repeat", 1),
                        ("bound_nodes", 3), ("chain_nodes", 1), ("replay_nodes", 1),
                        ("explore_nodes", 1), ("peer_records", 2)):
        if getattr(args, name) < least:
            p.error(f"--{name.replace('_', '-')} must be at least {least}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _load_modules()
    registry = BENCHMARKS
    unknown = sorted((set(args.only or ()) | set(args.skip)) - set(registry))
    if unknown:
        print(f"bench: unknown benchmark(s) {unknown}; fix: choose from {sorted(registry)}",
              file=sys.stderr)
        return 2
    results: dict[str, dict] = {}
    load_before = os.getloadavg()[0]
    for name, fn in sorted(registry.items()):
        if (not args.only or name in args.only) and name not in args.skip:
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            results[name] = fn(args)
            for label, f in figures(results[name], f"{name}."):
                print(f"  {line(label, f)}", file=sys.stderr, flush=True)
    # what the timings ran beside: on a shared machine every wall-clock figure is stretched
    results["machine"] = {"cores": os.cpu_count(), "load_1min_before": round(load_before, 2),
                          "load_1min_after": round(os.getloadavg()[0], 2)}
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.out / "bench.json.tmp"
    tmp.write_text(json.dumps(results, sort_keys=True, indent=2) + "\n")
    os.replace(tmp, args.out / "bench.json")
    if args.json:
        print(json.dumps(results, sort_keys=True))
    else:
        for name, result in results.items():
            print(f"{name}:")
            for key, value in result.items():
                print(f"  {key}: {value}")
    met = [f["verdict"] for r in results.values() for _, f in figures(r)]
    m = results["machine"]
    print(f"bench: {met.count('met')} figures met their target, {met.count('missed')} missed "
          f"(load {m['load_1min_before']:g} -> {m['load_1min_after']:g} on {m['cores']} cores: "
          f"a load above the cores disturbs every timing; ratios are measured side by side)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
