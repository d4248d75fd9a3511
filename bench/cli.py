"""`python -m bench --json`: every benchmark of bench/, written to results/bench/bench.json.

Every module listed in `MODULES` registers its benchmarks in `bench.registry`; each result dict
is stored under its name, and each benchmark's elapsed seconds under `machine.elapsed_s`.
Timings vary run to run, so bench.json is exempt from the same-bytes rule.

`--quick` (what `make reproduce` runs; `make bench` is the full one): every figure with its
target and ratio still, at smaller sizes where the target is a rate or a ratio (`QUICK`: a
sample of records, a shorter chain), best of one, and without what other steps of make
reproduce measure (`QUICK_SKIP`: the explorer is the bounds step, the proofs the proofs step)
or what times the newcomer's path for the README (`extending_path`), and the audit of a
real-sized tree (`audit_real_tree`: minutes by itself). A size given on the
command line wins.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

from bench.registry import BENCHMARKS
from bench.targets import figures, line

MODULES = ("bench.ledger", "bench.attempt", "bench.llm", "bench.proxy", "bench.sandbox",
           "bench.bound", "bench.chain", "bench.replay", "bench.startup", "bench.explorer",
           "bench.prove", "bench.peer", "bench.extending", "bench.judge", "bench.record_check",
           "bench.fan", "bench.audit", "bench.rule_table", "bench.cluster",
           "bench.pytest_gate")


# --quick: sizes where the target is a rate or a ratio (a 500,000-record ledger shows the rate
# and the constant memory of 1M; at 200,000 the command's start-up of ~0.1 s held `loopproof
# verify` under its rate; the chain's overhead ratio is read at 2,000 nodes), best of one
QUICK: dict[str, int] = {"records": 500_000, "chain_nodes": 2_000, "repeat": 1,
                         "fan_nodes": 16}
QUICK_SKIP = ("explorer", "explorer_parallel", "proofs", "extending_path", "audit_real_tree",
              "rule_table", "dask")


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
    p.add_argument("--fan-nodes", type=int, default=40,
                   help="independent nodes of the parallel-attempts fan (default 40)")
    p.add_argument("--fan-sleep", type=float, default=1.0,
                   help="seconds each fan worker waits (default 1)")
    p.add_argument("--fan-jobs", type=lambda v: [int(j) for j in v.split(",")],
                   default=[1, 4, 8], help="--jobs values, serial first (default 1,4,8)")
    p.add_argument("--out", type=Path, default=Path("results/bench"), help="results folder")
    p.add_argument("--only", action="append", default=None, metavar="NAME",
                   help="run only this benchmark (repeatable)")
    p.add_argument("--skip", action="append", default=[], metavar="NAME",
                   help="leave this benchmark out (repeatable)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--quick", action="store_true",
                   help=f"smaller sizes where the target is a rate or a ratio ({QUICK}), "
                        f"without {', '.join(QUICK_SKIP)} (make reproduce measures them)")
    args = p.parse_args(argv)
    if args.quick:  # a size given on the command line wins
        given = {a.split("=", 1)[0] for a in (argv if argv is not None else sys.argv[1:])}
        for name, value in QUICK.items():
            if f"--{name.replace('_', '-')}" not in given:
                setattr(args, name, value)
        args.skip = [*args.skip, *(s for s in QUICK_SKIP if s not in (args.only or ()))]
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
    elapsed: dict[str, float] = {}
    load_before = os.getloadavg()[0]
    for name, fn in sorted(registry.items()):
        if (not args.only or name in args.only) and name not in args.skip:
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            start = time.perf_counter()
            results[name] = fn(args)
            elapsed[name] = round(time.perf_counter() - start, 1)
            for label, f in figures(results[name], f"{name}."):
                print(f"  {line(label, f)}", file=sys.stderr, flush=True)
            print(f"  ({elapsed[name]:g} s)", file=sys.stderr, flush=True)
    # what the timings ran beside: on a shared machine every wall-clock figure is stretched
    results["machine"] = {"cores": os.cpu_count(), "load_1min_before": round(load_before, 2),
                          "load_1min_after": round(os.getloadavg()[0], 2),
                          "elapsed_s": elapsed, "quick": args.quick}
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
