"""The matrices that kill a real loop process: crash recovery and resource drift.

Crash matrix. For each seed the full loop (round and idle growth on, the reliability budget of
20 GPU-hours, so every boundary is reached in a short run) is run once in a child process that
counts how often it reaches each crash site (the baseline). A case is (seed, site, n): a fresh
run SIGKILLed the n-th time it reaches `site` (LOOPPROOF_CRASH_AT), then resumed in new
processes until it ends; n is spread over the baseline's occurrences by the seed's index, so the
seeds together crash early, middle and late. The two resume-time sites are reached by a first
crash inside a training stage, then a resume killed there. Each case is judged three ways,
separately: (a) outcome — the scientific state (audit.outcome: evaluations, committed features,
configuration, attainment, compute to target, terminal spend) equals the baseline's; (b)
normalized trace identity; (c) repeated execution — planner calls and evaluations (counted in a
file outside the ledger) beyond the baseline's. Prefix accounting is checked on every case.

Resource-drift matrix. Each run starts with four GPUs and 0.25-hour steps at price 1, is
SIGKILLed inside a training stage (at a tick chosen by the seed), and is resumed with the GPU
count, the step, the price, or all three changed. Checks: terminal and every prefix within the
20 GPU-hour policy, settlements reconciled, every tick sized and priced by the resources in
force, the tick gauge monotone, every round's evaluation complete, and the open stage repriced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.growth import audit
from experiments.growth.child import COUNT_ENV
from experiments.growth.folder import LEDGER, calls, read_records
from experiments.growth.loop import PRE_COMMIT, SITES
from loopproof.engine.run.gate import remove_tree
from loopproof.engine.run.meter import METER_SITES
from loopproof.model.executor import Threads

RELIABILITY_BUDGET = 20.0
LEDGER_SITES = ("ledger.before_append", "ledger.torn_write", "ledger.after_append")
RESUME_SITES = ("growth.resume", "growth.after_reprice")
CRASH_SITES: tuple[str, ...] = tuple(s for s in SITES if s not in RESUME_SITES) + \
    tuple(METER_SITES) + LEDGER_SITES + RESUME_SITES
DRIFTS: dict[str, dict[str, float]] = {
    "gpus": {"gpus": 8}, "step": {"step": 0.5}, "price": {"price": 1.25},
    "all": {"gpus": 8, "step": 0.5, "price": 1.25}}


def child(args: Sequence[str], crash_at: str | None = None, count_into: Path | None = None
          ) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPPROOF_")}
    env["PYTHONHASHSEED"] = "0"
    if crash_at:
        env["LOOPPROOF_CRASH_AT"] = crash_at
    if count_into is not None:
        env[COUNT_ENV] = str(count_into)
    proc = subprocess.run([sys.executable, "-m", "experiments.growth.child", *args],
                          env=env, capture_output=True, timeout=300)
    return proc.returncode


def recover(folder: Path, start: Sequence[str], first: int, faults: Iterable[str] = (),
            resume_extra: Sequence[str] = (), resume_crash: str | None = None
            ) -> tuple[int, int, bool]:
    """The operator's protocol after a kill: resume until the run ends (a crash before record 0
    was linked into place left no run: start it again). Returns (exit, resumes, restarted)."""
    code, resumes, restarted = first, 0, False
    extra = [a for f in faults for a in ("--fault", f)]
    while code == -9 and resumes < 6:
        crash_at = resume_crash if resumes == 0 else None
        code = child(["resume", str(folder), *resume_extra, *extra], crash_at=crash_at)
        resumes += 1
        if code == 2 and not (folder / LEDGER).exists():
            code, restarted = child(list(start)), True
    return code, resumes, restarted


# ---- crash matrix ---------------------------------------------------------------------------

@dataclass
class Baseline:
    seed: int
    code: int
    counts: dict[str, int]
    outcome: dict[str, Any]
    trace: list[Any]
    calls: list[str]


def _start_args(folder: Path, seed: int) -> list[str]:
    return ["start", str(folder), "--seed", str(seed), "--budget", str(RELIABILITY_BUDGET)]


def baseline(root: Path, seed: int) -> Baseline:
    folder = root / f"baseline-{seed}"
    remove_tree(folder)
    counts_file = root / f"counts-{seed}.json"
    code = child(_start_args(folder, seed), count_into=counts_file)
    counts = json.loads(counts_file.read_text())
    counts["ledger.torn_write"] = counts.get("ledger.before_append", 0)
    records = read_records(folder)
    return Baseline(seed, code, counts, audit.outcome(records),
                    audit.normalized_trace(records, str(folder)), calls(folder))


def spread(count: int, index: int, of: int) -> int:
    """The occurrence the `index`-th of `of` seeds crashes at: first to last, evenly."""
    if of <= 1:
        return count
    return 1 + round(index * (count - 1) / (of - 1))


def crash_cases(bases: Sequence[Baseline]) -> list[tuple[int, str, int, str]]:
    """(seed, site, n, resume_site) for every seed and site."""
    out = []
    for i, b in enumerate(bases):
        for site in CRASH_SITES:
            if site in RESUME_SITES:
                n = spread(b.counts.get("growth.tick", 0), i, len(bases))
                out.append((b.seed, "growth.tick", n, site))
            elif b.counts.get(site, 0):
                out.append((b.seed, site, spread(b.counts[site], i, len(bases)), ""))
    return out


def crash_case(root: Path, base: Baseline, site: str, n: int, resume_site: str,
               faults: Iterable[str] = ()) -> dict[str, Any]:
    name = f"s{base.seed}-{site}-{n}" + (f"-{resume_site}" if resume_site else "")
    folder = root / "cases" / name
    remove_tree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    start = _start_args(folder, base.seed)
    first = child(start, crash_at=f"{site}:{n}")
    crashed = first == -9
    code, resumes, restarted = recover(folder, start, first, faults,
                                       resume_crash=f"{resume_site}:1" if resume_site else None)
    records = read_records(folder)
    out = audit.outcome(records)
    trace = audit.normalized_trace(records, str(folder))
    mine = calls(folder)
    planner = [c for c in mine if c.startswith("planner")]
    base_planner = [c for c in base.calls if c.startswith("planner")]
    diff = sorted(k for k in out if out[k] != base.outcome.get(k))
    acc = audit.accounting(records)
    row = {"case": name, "seed": base.seed, "site": site, "n": n, "resume_site": resume_site,
           "crashed": crashed, "resumes": resumes, "restarted": restarted, "exit_code": code,
           "outcome_recovered": not diff and code == base.code,
           "trace_identical": trace == base.trace,
           "first_difference": audit.first_difference(trace, base.trace),
           "planner_calls": len(planner),
           "repeated_planner_calls": max(0, len(planner) - len(base_planner)),
           "repeated_evaluations": max(0, len(mine) - len(planner)
                                       - (len(base.calls) - len(base_planner))),
           "pre_commit_site": site in PRE_COMMIT,
           "within_policy": audit.within_policy(acc),
           "max_prefix_excess": acc["max_prefix_excess"],
           "mismatch": f"differs in {diff}" if diff else ""}
    remove_tree(folder)
    return row


def crash_matrix(root: Path, seeds: Sequence[int], jobs: int = 2,
                 faults: Iterable[str] = (), limit: int | None = None) -> list[dict[str, Any]]:
    faults = tuple(faults)
    threads = Threads(jobs)  # each unit waits on loops of its own (model/executor.py)
    bases = threads.map(lambda s: baseline(root, s), seeds)
    by_seed = {b.seed: b for b in bases}
    cases = crash_cases(bases)[:limit]
    rows = threads.map(lambda c: crash_case(root, by_seed[c[0]], c[1], c[2], c[3], faults), cases)
    return sorted((r for r in rows if r["crashed"]), key=lambda r: r["case"])


def crash_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"cases": len(rows),
            "outcome_recovered": sum(r["outcome_recovered"] for r in rows),
            "trace_identical": sum(r["trace_identical"] for r in rows),
            "repeated_planner_calls": sum(r["repeated_planner_calls"] for r in rows),
            "cases_repeating_a_planner_call": sum(r["repeated_planner_calls"] > 0 for r in rows),
            "repeated_evaluations": sum(r["repeated_evaluations"] for r in rows),
            "within_policy": sum(r["within_policy"] for r in rows),
            "sites": len({(r["site"], r["resume_site"]) for r in rows})}


# ---- resource-drift matrix ------------------------------------------------------------------

def drift_run(root: Path, seed: int, kind: str, faults: Iterable[str] = ()) -> dict[str, Any]:
    folder = root / "drift" / f"s{seed}-{kind}"
    remove_tree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    start = _start_args(folder, seed)
    tick = 2 + (seed * 5) % 13  # inside a training stage of the first round
    first = child(start, crash_at=f"growth.tick:{tick}")
    extra = [a for k, v in DRIFTS[kind].items() for a in (f"--{k}", str(v))]
    code, resumes, _ = recover(folder, start, first, faults, resume_extra=extra)
    records = read_records(folder)
    acc = audit.accounting(records)
    row = {"run": f"s{seed}-{kind}", "seed": seed, "drift": kind, "crash_tick": tick,
           "crashed": first == -9, "exit_code": code, "resumes": resumes,
           "terminal": round(acc["terminal"], 9), "budget": acc["budget"],
           "max_prefix_excess": acc["max_prefix_excess"],
           "reconciliation_error": acc["reconciliation_error"],
           "mispriced_ticks": acc["mispriced_ticks"], "gauge_monotone": acc["gauge_monotone"],
           "ticks": acc["ticks"],
           "repriced": any(r.get("repriced") for r in records if r.get("type") == "settle"),
           "resources_recorded": any(r.get("type") == "resources" for r in records),
           "evaluations_complete": audit.evaluations_complete(records)}
    row["ok"] = bool(audit.within_policy(acc) and row["evaluations_complete"] and row["repriced"]
                     and row["resources_recorded"] and row["crashed"])
    remove_tree(folder)
    return row


def drift_matrix(root: Path, seeds: Sequence[int], jobs: int = 2, faults: Iterable[str] = (),
                 kinds: Sequence[str] = tuple(DRIFTS)) -> list[dict[str, Any]]:
    faults = tuple(faults)
    runs = [(s, k) for s in seeds for k in kinds]
    return Threads(jobs).map(lambda c: drift_run(root, c[0], c[1], faults), runs)


def drift_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"runs": len(rows), "ok": sum(r["ok"] for r in rows),
            "within_budget": sum(r["max_prefix_excess"] <= audit.TOLERANCE
                                 and r["terminal"] <= r["budget"] + audit.TOLERANCE
                                 for r in rows),
            "reconciled": sum(r["reconciliation_error"] <= audit.TOLERANCE for r in rows),
            "priced_in_force": sum(r["mispriced_ticks"] == 0 for r in rows),
            "gauge_monotone": sum(r["gauge_monotone"] for r in rows),
            "evaluations_complete": sum(r["evaluations_complete"] for r in rows),
            "max_prefix_excess": max((r["max_prefix_excess"] for r in rows), default=None),
            "max_reconciliation_error": max((r["reconciliation_error"] for r in rows),
                                            default=None)}
