"""The crash experiment: SIGKILL a real run at every commit boundary, resume it, and compare.

For each seed the deterministic crash graph (experiments/crash/graph) is run once without a crash
(the baseline). Then for each crash site and each chosen occurrence index n, a fresh copy of the
run is started as a child process (`loopproof run`) with LOOPPROOF_CRASH_AT=site:n, so it is
SIGKILLed at the n-th time it reaches that site; it is then resumed (`loopproof resume`) until it
ends. "During a resume" cases also kill the first resume at a resume-time site, then resume again.

Each case is compared with its seed's baseline on three separate observables (docs/crash.md):

(a) scientific state — the run's outcome, each node's status and activation, the repairs used,
    the content hash of each node's workspace, the snapshot hash each PASS verdict judged, and
    settled spend <= B with nothing left reserved;
(b) normalized trace identity — the ledger's record sequence with recovery bookkeeping and
    volatile fields (wall-clock amounts, timings, paths, chain hashes) removed;
(c) repeated worker calls — worker invocations (counted by the workers themselves, in a file
    outside every workspace) beyond the baseline's.

Every prefix of every recovered ledger is also checked for settled + reserved <= B, and every
node that was DONE in the baseline must be DONE after recovery (no lost verdict).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments import results
from experiments.crash.sites import SCALES, engine_sites
from experiments.executor import Executor, executor_from
from experiments.results import write_csv, write_json
from loopproof.engine.system.trees import remove_tree
from loopproof.model.executor import Threads

if TYPE_CHECKING:
    # experiments.crash.cases imports the engine's runner (~0.5 CPU-s): imported where a run
    # needs it, not by the notebook, which reads results (load_results, site_table)
    from experiments.crash.cases import Baseline, Case, Row

RESULTS = Path("results") / "crash"


# ---- the experiment ---------------------------------------------------------------------------

def _baseline_unit(args: tuple[int, Path, int]) -> Baseline:
    from experiments.crash.cases import run_baseline
    return run_baseline(*args)


def _case_unit(args: tuple[Case, Path, Baseline]) -> Row:
    from experiments.crash.cases import run_case
    return run_case(*args)


def run_experiment(scale: str, seed: int, out: Path, jobs: int = 2,
                   work: Path | None = None, executor: Executor | None = None) -> dict[str, Any]:
    """The crash matrix; its cases run on `jobs` threads (each case is child processes), or as
    units of `executor` (a Dask cluster: `work` must then be a folder every worker sees)."""
    from experiments.crash.cases import plan, run_baseline, run_case

    sc = SCALES[scale]
    sites = sc.sites or engine_sites()
    tmp = Path(tempfile.mkdtemp(prefix="loopproof-crash-")) if work is None else work
    try:
        # (seed, width): width 1 is the chain; wider graphs have that many builds in flight
        keys = [(seed + i, w) for w in (1, *sc.widths) for i in range(sc.seeds)]
        if executor is not None and executor.client is not None:
            bases = dict(zip(keys, executor.map(_baseline_unit, [(s, tmp, w) for s, w in keys]),
                             strict=True))
            cases = [c for k in keys for c in plan(bases[k], sc, sites)]
            rows = executor.map(_case_unit, [(c, tmp, bases[c.seed, c.width]) for c in cases])
        else:
            threads = Threads(jobs)  # each unit waits on engines of its own (model/executor.py)
            bases = dict(zip(keys, threads.map(lambda k: run_baseline(k[0], tmp, k[1]), keys),
                             strict=True))
            cases = [c for k in keys for c in plan(bases[k], sc, sites)]
            rows = threads.map(lambda c: run_case(c, tmp, bases[c.seed, c.width]), cases)
    finally:
        if work is None:
            remove_tree(tmp)
    rows = [r for r in rows if r.crashed]   # a site not reached is not a case
    rows.sort(key=lambda r: r.case)
    summary = summarise(rows)
    write(out, rows, summary, scale, seed)
    return summary


def summarise(rows: Sequence[Row]) -> dict[str, Any]:
    """The chain's cases (width 1); the cases with several attempts in flight are summed apart,
    per width, under "parallel" (only when there are any)."""
    chain = [r for r in rows if r.width == 1]
    out = _sums(chain)
    widths = sorted({r.width for r in rows} - {1})
    if widths:
        out["parallel"] = {f"width_{w}": {
            **_sums(wide := [r for r in rows if r.width == w]),
            "abandoned": sum(r.abandoned for r in wide),
            "several_in_flight": sum(r.in_flight >= 2 for r in wide),
            "most_in_flight": max((r.in_flight for r in wide), default=0)} for w in widths}
    return out


def _sums(rows: Sequence[Row]) -> dict[str, int]:
    return {
        "cases": len(rows),
        "outcome_recovered": sum(r.outcome_recovered for r in rows),
        "trace_identical": sum(r.trace_identical for r in rows),
        "repeated_calls": sum(r.repeated_calls for r in rows),
        "budget_violations": sum(not r.budget_ok for r in rows),
        "lost_verdicts": sum(r.lost_verdicts for r in rows),
    }


def by_site(rows: Sequence[Row]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter] = {}
    for r in rows:
        key = f"{r.site}+resume@{r.resume_site}" if r.resume_site else r.site
        key = key if r.width == 1 else f"w{r.width}/{key}"
        c = out.setdefault(key, Counter())
        c["cases"] += 1
        c["outcome_recovered"] += r.outcome_recovered
        c["trace_identical"] += r.trace_identical
        c["repeated_calls"] += r.repeated_calls
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def load_results(folder: Path) -> dict[str, Any]:
    """What the notebook reads: the summary and the per-case rows (typed back from the CSV)."""
    summary = json.loads((folder / "summary.json").read_text())
    ints = {"seed", "n", "resumes", "restarted", "exit_code", "outcome_recovered",
            "trace_identical", "first_difference", "worker_calls", "repeated_calls",
            "abandoned", "budget_ok", "lost_verdicts", "width", "in_flight"}
    with open(folder / "cases.csv", newline="") as f:
        rows = [{k: int(v) if k in ints else v for k, v in r.items()}
                for r in csv.DictReader(f)]
    return {"summary": summary, "rows": rows}


def site_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per crash site (a killed resume is its own row): cases, the share whose outcome was
    recovered, the share whose normalized trace was identical, and the repeated worker calls."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        key = f"{r['site']} + resume@{r['resume_site']}" if r["resume_site"] else r["site"]
        key = key if r.get("width", 1) == 1 else f"{key} ({r['width']} builds at once)"
        groups.setdefault(key, []).append(r)
    out = []
    for key, rs in groups.items():
        n = len(rs)
        out.append({"site": key, "cases": n,
                    "outcome_recovered": round(sum(r["outcome_recovered"] for r in rs) / n, 4),
                    "trace_identical": round(sum(r["trace_identical"] for r in rs) / n, 4),
                    "repeated_calls": sum(r["repeated_calls"] for r in rs),
                    "abandoned": sum(r["abandoned"] for r in rs)})
    return sorted(out, key=lambda d: (d["trace_identical"], d["site"]))


COLUMNS = ("case", "seed", "site", "n", "resume_site", "resumes", "restarted", "exit_code",
           "outcome", "outcome_recovered", "trace_identical", "first_difference", "worker_calls",
           "repeated_calls", "abandoned", "budget_ok", "lost_verdicts", "mismatch", "width",
           "in_flight")


def write(out: Path, rows: Sequence[Row], summary: Mapping[str, Any], scale: str,
          seed: int) -> None:
    write_csv(out / "cases.csv", (asdict(r) for r in rows), COLUMNS)
    write_json(out / "summary.json", {"scale": scale, "seed": seed, **summary,
                                      "by_site": by_site(rows)})


def main(argv: Sequence[str] | None = None) -> int:
    p = results.parser("crash", __doc__.splitlines()[0], SCALES)
    p.add_argument("--jobs", type=int, default=2, help="cases run in parallel (default 2)")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="run the cases on the Dask scheduler at ADDRESS (with --work, a folder "
                        "every worker sees)")
    p.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp dir)")
    args = results.parse(p, argv)
    if args is None:
        return 2
    with executor_from(argparse.Namespace(dask=args.dask, jobs=1)) as executor:
        summary = run_experiment(args.scale, args.seed, args.out, args.jobs, args.work,
                                 executor)
    results.print_summary(summary, args.json)
    parts = [summary, *summary.get("parallel", {}).values()]
    ok = all(p["outcome_recovered"] == p["cases"] and p["budget_violations"] == 0
             and p["lost_verdicts"] == 0 for p in parts)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
