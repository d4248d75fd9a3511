"""GuardrailLoop's studies on loopproof's engine: the 2x2 growth study, the budget sweep, the
crash, resource-drift, kill-switch and output-guard matrices, and one planted fault per check.

    python -m experiments.growth --scale smoke|default|paper --seed S [--out DIR] [--jobs N] --json

writes DIR (default results/growth/): summary.json, arms.csv, sweep.csv, crash.csv, drift.csv,
killswitch.csv, guard.csv, negatives.csv (same seed, same bytes) and timings.json (wall clock,
kept apart). Exit 0 only when every matrix passes its checks and every planted fault is caught.
docs/growth.md says what each part shows and what it does not.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import results
from experiments.growth import audit, calibration, guards, matrices, utility
from experiments.growth.progress import Arm
from loopproof.engine.run.gate import remove_tree


@dataclass(frozen=True)
class Scale:
    utility_seeds: int            # the 2x2 study and the sweep (paper: seeds 0-49)
    reliability_seeds: int        # crash, drift, kill switch, output guard (paper: seeds 0-9)
    crash_limit: int | None = None  # smoke: only the first cases of the first seed
    drift_kinds: tuple[str, ...] = tuple(matrices.DRIFTS)
    guard_names: tuple[str, ...] | None = None


SCALES: dict[str, Scale] = {
    "smoke": Scale(utility_seeds=3, reliability_seeds=1, crash_limit=4, drift_kinds=("price",),
                   guard_names=("malformed_text", "policy_budget", "over_limit",
                                "agent_proposal")),
    "default": Scale(utility_seeds=50, reliability_seeds=2),
    "paper": Scale(utility_seeds=50, reliability_seeds=10),
}


def _timed(timings: dict[str, float], name: str, fn: Callable[[], Any]) -> Any:
    print(f"growth: {name} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    out = fn()
    timings[name] = round(time.perf_counter() - t0, 3)
    print(f"growth: {name} done in {timings[name]:.1f} s", file=sys.stderr, flush=True)
    return out


def negative_controls(root: Path, seed: int, jobs: int) -> list[dict[str, Any]]:
    """Each check run once with a fault planted where it should catch it."""
    rows = []
    r = utility.one_run(root, seed, Arm(), utility.BUDGET, faults=("unreserved_stage",))
    rows.append({"check": "accounting", "fault": "unreserved_stage",
                 "detected": not r["within_policy"],
                 "evidence": f"unreserved_units={r['unreserved_units']} "
                             f"reconciliation_error={r['reconciliation_error']:g}"})
    g = guards.output_guard(root, [seed], faults=("policy_write",), names=("policy_budget",))
    rows.append({"check": "output_guard", "fault": "policy_write",
                 "detected": any(not x["ok"] for x in g),
                 "evidence": "; ".join(f"{x['stage']}: policy_unchanged={x['policy_unchanged']} "
                                       f"exit={x['exit_code']}" for x in g)})
    d = matrices.drift_matrix(root, [seed], jobs, faults=("skip_repricing",), kinds=("price",))
    rows.append({"check": "drift", "fault": "skip_repricing",
                 "detected": any(not x["ok"] for x in d),
                 "evidence": "; ".join(f"{x['drift']}: mispriced_ticks={x['mispriced_ticks']} "
                                       f"repriced={x['repriced']}" for x in d)})
    base = matrices.baseline(root, seed)
    c = matrices.crash_case(root, base, "growth.after_commit", 1, "",
                            faults=("no_config_replay",))
    rows.append({"check": "crash", "fault": "no_config_replay",
                 "detected": not c["outcome_recovered"],
                 "evidence": f"{c['case']}: {c['mismatch'] or 'outcome recovered'}"})
    k = guards.kill_switch(root, [seed], faults=("ignore_stop",))
    rows.append({"check": "kill_switch", "fault": "ignore_stop",
                 "detected": any(not x["stopped_at_request"] for x in k),
                 "evidence": f"stopped at the request in {sum(x['stopped_at_request'] for x in k)}"
                             f" of {len(k)} cases"})
    return rows


def run_experiment(scale: str, seed: int, out: Path, jobs: int = 2) -> dict[str, Any]:
    sc = SCALES[scale]
    useeds = [seed + i for i in range(sc.utility_seeds)]
    rseeds = [seed + i for i in range(sc.reliability_seeds)]
    timings: dict[str, float] = {}
    root = utility.scratch()
    try:
        arms = _timed(timings, "growth study", lambda: utility.growth_study(useeds, root))
        sweep = _timed(timings, "budget sweep", lambda: utility.budget_sweep(useeds, root, arms))
        crash = _timed(timings, "crash matrix", lambda: matrices.crash_matrix(
            root, rseeds, jobs, limit=sc.crash_limit))
        drift = _timed(timings, "drift matrix", lambda: matrices.drift_matrix(
            root, rseeds, jobs, kinds=sc.drift_kinds))
        kills = _timed(timings, "kill-switch matrix", lambda: guards.kill_switch(root, rseeds))
        guard = _timed(timings, "output-guard matrix", lambda: guards.output_guard(
            root, rseeds, names=sc.guard_names))
        negs = _timed(timings, "negative controls", lambda: negative_controls(root, seed, jobs))
    finally:
        remove_tree(root)
    runs = list(arms) + [r for r in sweep if r not in arms]
    summary = {
        "contrasts": utility.contrasts(arms, seed),
        "arms": utility.arm_table(arms),
        "sweep": utility.sweep_table(sweep),
        "accounting": {"runs": len(runs),
                       "max_prefix_excess": max(r["max_prefix_excess"] for r in runs),
                       "reconciliation_error": max(r["reconciliation_error"] for r in runs),
                       "tolerance": audit.TOLERANCE,
                       "within_policy": sum(r["within_policy"] for r in runs)},
        "crash": matrices.crash_summary(crash),
        "drift": matrices.drift_summary(drift),
        "kill_switch": guards.kill_switch_summary(kills),
        "output_guard": guards.output_guard_summary(guard),
        "negative_controls": {f"{n['check']}:{n['fault']}": n["detected"] for n in negs},
    }
    summary["ok"] = passed(summary)
    write(out, scale, seed, summary, {"arms": arms, "sweep": sweep, "crash": crash,
                                       "drift": drift, "killswitch": kills, "guard": guard,
                                       "negatives": negs}, timings)
    return summary


def passed(s: Mapping[str, Any]) -> bool:
    acc, c, d = s["accounting"], s["crash"], s["drift"]
    return bool(acc["within_policy"] == acc["runs"] and c["outcome_recovered"] == c["cases"]
                and c["within_policy"] == c["cases"] and d["ok"] == d["runs"]
                and s["kill_switch"]["ok"] == s["kill_switch"]["cases"]
                and s["output_guard"]["ok"] == s["output_guard"]["cases"]
                and all(s["negative_controls"].values()))


COLUMNS: dict[str, tuple[str, ...]] = {
    "arms": ("seed", "arm", "round_growth", "idle_growth", "budget", "exit_code", "hit",
             "to_target", "spent", "evaluations", "features", "idle_features", "proposals",
             "records", "max_prefix_excess", "reconciliation_error", "unreserved_units",
             "within_policy"),
    "crash": ("case", "seed", "site", "n", "resume_site", "resumes", "restarted", "exit_code",
              "outcome_recovered", "trace_identical", "first_difference", "planner_calls",
              "repeated_planner_calls", "repeated_evaluations", "pre_commit_site",
              "within_policy", "max_prefix_excess", "mismatch"),
    "drift": ("run", "seed", "drift", "crash_tick", "crashed", "exit_code", "resumes",
              "terminal", "budget", "max_prefix_excess", "reconciliation_error",
              "mispriced_ticks", "gauge_monotone", "ticks", "repriced", "resources_recorded",
              "evaluations_complete", "ok"),
    "killswitch": ("case", "seed", "boundary", "where", "exit_code", "stopped_at_request",
                   "resumed_exit", "outcome_recovered", "trace_identical", "ok"),
    "guard": ("case", "seed", "hostile", "stage", "expected", "recorded_reasons",
              "rejected_and_recorded", "config_as_catalogue_allows", "changed_knobs",
              "policy_unchanged", "exit_code", "ok"),
    "negatives": ("check", "fault", "detected", "evidence"),
}
COLUMNS["sweep"] = COLUMNS["arms"]


def write(out: Path, scale: str, seed: int, summary: Mapping[str, Any],
          tables: Mapping[str, Sequence[Mapping[str, Any]]], timings: Mapping[str, float]
          ) -> None:
    for name, rows in tables.items():
        results.write_csv(out / f"{name}.csv", rows, COLUMNS[name])
    results.write_json(out / "summary.json", {"scale": scale, "seed": seed, **summary,
                                              "calibration": calibration.table()})
    results.write_json(out / "timings.json", {"scale": scale, "seconds": dict(timings)})


def _typed(v: str) -> Any:
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def load_results(folder: Path) -> dict[str, Any]:
    """What the notebook reads: the summary and every table, numbers typed back from the CSV."""
    out: dict[str, Any] = {"summary": json.loads((folder / "summary.json").read_text())}
    for name in COLUMNS:
        with open(folder / f"{name}.csv", newline="", encoding="utf-8") as f:
            out[name] = [{k: _typed(v) for k, v in r.items()} for r in csv.DictReader(f)]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = results.parser("growth", __doc__.splitlines()[0], SCALES)
    p.add_argument("--jobs", type=int, default=2, help="child processes at once (default 2)")
    args = results.parse(p, argv)
    if args is None:
        return 2
    summary = run_experiment(args.scale, args.seed, args.out, args.jobs)
    results.print_summary(summary, args.json)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
