"""`python -m loopproof.proofs`: discharge every obligation, print a table (or `--json`), exit 0 iff every
result equals its expectation. `--out PATH` also writes the JSON array to PATH. A bounded search
that finds no counterexample is reported "not refuted within depth d", never "proved";
`--max-depth N` lets every bounded search go on to depth N (it stops at the shortest run).
`--keep DIR` keeps a full run's report in DIR/<digest of the sources>.json (proofs/kept.py).
`python -m loopproof.proofs new NAME --guarantee Gk` writes the skeleton of a new guarantee."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopproof.proofs.obligations import Result


def table(results: list[Result]) -> str:
    head = ("id", "guarantee", "prover", "expect", "result", "seconds", "")
    rows = [head] + [(r.obligation.id, r.obligation.guarantee, r.obligation.prover,
                      r.obligation.expect, r.result, f"{r.seconds:.2f}",
                      "ok" if r.ok else "MISMATCH") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def report(results: list[Result], elapsed: float | None = None, jobs: int = 1) -> str:
    out = [table(results), ""]
    for r in results:
        if r.counterexample is not None or r.error or r.hint:
            statement = r.to_json()["statement"]
            out.append(f"== {r.obligation.id} ({r.result}, expected {r.obligation.expect}): "
                       f"{statement}")
            if r.counterexample is not None:
                out.append(r.counterexample.render())
            out += [x for x in (r.error, r.hint and f"hint: {r.hint}") if x]
            out.append("")
    bad = [r.obligation.id for r in results if not r.ok]
    total = sum(r.seconds for r in results)
    refuted = sum(1 for r in results if r.obligation.broken and r.ok)
    out.append(f"{len(results)} obligations, {len(results) - len(bad)} as expected "
               f"({refuted} broken variants refuted), {total:.1f} s"
               + (f" of obligations in {jobs} processes, {elapsed:.1f} s elapsed"
                  if elapsed is not None and jobs > 1 else "")
               + (f"; MISMATCH: {', '.join(bad)}" if bad else ""))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["new"]:  # the skeleton of a new guarantee (proofs/scaffold.py)
        from loopproof.proofs import scaffold
        return scaffold.main(argv[1:])
    # imported here, not above: `new` writes files and needs neither Z3 nor the obligations
    # (importing them was most of its 0.8 CPU-s)
    from loopproof.proofs import checks, family, kept
    from loopproof.proofs.discharge import discharge_all
    from loopproof.proofs.obligations import select
    ap = argparse.ArgumentParser(prog="python -m loopproof.proofs", description=__doc__)
    ap.add_argument("--json", action="store_true", help="print a JSON array, one per obligation")
    ap.add_argument("--out", type=Path, help="also write the JSON array to this file")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep a full run's report as DIR/<digest of the sources>.json, where "
                         "the tests find it (make check: build/proofs)")
    ap.add_argument("--only", nargs="*", metavar="ID",
                    help="only obligations whose id starts with ID, or guarantee equals ID")
    ap.add_argument("--max-nodes", type=int, default=family.DEFAULT_MAX_NODES, choices=(1, 2, 3, 4, 5),
                    help="the per-shape proofs cover every DAG up to this many nodes (default 3)")
    ap.add_argument("--max-depth", type=int, default=0, metavar="N",
                    help="bounded searches (BMC, lassos) try every depth up to at least N "
                         "(default: each obligation's own depth); the shortest run is printed")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                    help="obligations discharged in N processes at once (default: the number "
                         "of cores; the results are the same whatever N is)")
    args = ap.parse_args(argv)
    if args.max_depth < 0:
        print(f"python -m loopproof.proofs: --max-depth {args.max_depth} is negative; fix: give a depth "
              ">= 0 (the number of steps of the longest run to search)", file=sys.stderr)
        return 2
    family.MAX_NODES = args.max_nodes
    checks.DEPTH_LIMIT = args.max_depth
    obligations = select(args.only)
    if not obligations:
        print(f"python -m loopproof.proofs: --only {' '.join(args.only)} matches no obligation; "
              "fix: use an id prefix or a guarantee such as G2", file=sys.stderr)
        return 2
    start = time.perf_counter()
    results = discharge_all(obligations, args.jobs)
    elapsed = time.perf_counter() - start
    doc = json.dumps([r.to_json() for r in results], indent=2, sort_keys=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(doc + "\n")
    if args.keep is not None and not args.only and args.max_depth == 0 \
            and args.max_nodes == family.DEFAULT_MAX_NODES:
        kept.keep(args.keep, [r.to_json() for r in results])
    print(doc if args.json else report(results, elapsed, min(args.jobs, len(results))))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
