"""The utility studies: the 2x2 growth study (round growth x idle growth, paired by seed) and the
budget sweep under the full loop. Every run is a real loop on a real ledger (experiments/growth/
loop.py); what is reported is read back from its records (experiments/growth/audit.py).

Outcomes per seed-run (the experimental unit): target attainment (0/1) and compute to target,
restricted at the budget (a run that never meets the target counts the budget: the restricted
mean of the paper). Contrasts over the four arms, per seed, then a paired bootstrap over seeds
(experiments.stats.paired_contrast, scipy.stats.bootstrap, BCa, 10,000 resamples):

    round       = mean(R1I0, R1I1) - mean(R0I0, R0I1)
    idle        = mean(R0I1, R1I1) - mean(R0I0, R1I0)
    interaction = (R1I1 - R0I1) - (R1I0 - R0I0)
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.growth import audit
from experiments.growth.folder import read_records
from experiments.growth.loop import run_to_end
from experiments.growth.progress import Arm
from experiments.stats import paired_contrast
from loopproof.engine.run.gate import remove_tree

ARMS: tuple[Arm, ...] = (Arm(False, False), Arm(True, False), Arm(False, True), Arm(True, True))
BUDGET = 160.0
SWEEP = (20.0, 40.0, 80.0, 160.0)


def scratch() -> Path:
    """A folder for run ledgers: in memory where the machine has /dev/shm (fsync is free there;
    no study here crashes a machine, only processes, which the page cache survives)."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="loopproof-growth-",
                                 dir=shm if shm.is_dir() else None))


def one_run(root: Path, seed: int, arm: Arm, budget: float, faults: Iterable[str] = ()
            ) -> dict[str, Any]:
    """Run the loop once and summarise its ledger (one row)."""
    folder = root / f"{arm.name}-b{budget:g}-s{seed}"
    remove_tree(folder)
    code = run_to_end(folder, seed=seed, budget=budget, arm=arm, faults=faults)
    records = read_records(folder)
    acc = audit.accounting(records)
    out = audit.outcome(records)
    row = {"seed": seed, "arm": arm.name, "round_growth": arm.round_growth,
           "idle_growth": arm.idle_growth, "budget": budget, "exit_code": code,
           "hit": out["target_met"],
           "to_target": round(out["to_target"] if out["target_met"] else budget, 9),
           "spent": round(acc["terminal"], 9), "evaluations": len(out["evaluations"]),
           "features": sum(len(c[2]) for c in out["committed"]),
           "idle_features": sum(len(c[2]) for c in out["committed"] if c[0] == "idle_finished"),
           "proposals": len(out["proposals"]), "records": len(records),
           "max_prefix_excess": acc["max_prefix_excess"],
           "reconciliation_error": acc["reconciliation_error"],
           "unreserved_units": acc["unreserved_units"], "within_policy": audit.within_policy(acc)}
    remove_tree(folder)
    return row


def growth_study(seeds: Sequence[int], root: Path) -> list[dict[str, Any]]:
    return [one_run(root, s, arm, BUDGET) for s in seeds for arm in ARMS]


def budget_sweep(seeds: Sequence[int], root: Path, reuse: Sequence[Mapping[str, Any]] = ()
                 ) -> list[dict[str, Any]]:
    """The full loop at each budget; the 160 GPU-hour runs of the 2x2 study's full arm are the
    same runs (same seed, arm and budget give the same ledger), so they are reused."""
    full = Arm(True, True)
    have = {(r["seed"], r["budget"]): r for r in reuse if r["arm"] == full.name}
    return [dict(have.get((s, b)) or one_run(root, s, full, b)) for b in SWEEP for s in seeds]


def _per_seed(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {a.name: {} for a in ARMS}
    for r in rows:
        out[r["arm"]][r["seed"]] = float(r[key])
    return out


def contrasts(rows: Sequence[Mapping[str, Any]], seed: int) -> dict[str, Any]:
    """The round, idle and interaction contrasts of attainment and restricted compute to
    target, each with its paired-bootstrap 95% interval over seeds."""
    out: dict[str, Any] = {}
    for outcome, key in (("attainment", "hit"), ("to_target", "to_target")):
        v = _per_seed(rows, key)
        seeds = sorted(set.intersection(*(set(m) for m in v.values())))

        def mean(*arms: str, v: dict[str, dict[int, float]] = v,
                 seeds: list[int] = seeds) -> dict[int, float]:
            return {s: sum(v[a][s] for a in arms) / len(arms) for s in seeds}

        r1, r0 = mean("R1I0", "R1I1"), mean("R0I0", "R0I1")
        i1, i0 = mean("R0I1", "R1I1"), mean("R0I0", "R1I0")
        inter_a = {s: v["R1I1"][s] - v["R0I1"][s] for s in seeds}
        inter_b = {s: v["R1I0"][s] - v["R0I0"][s] for s in seeds}
        for name, (a, b) in (("round", (r1, r0)), ("idle", (i1, i0)),
                             ("interaction", (inter_a, inter_b))):
            c = paired_contrast(a, b, seed=seed)
            out[f"{name}_{outcome}"] = {"difference": c["difference"], "ci95": c["ci95"],
                                        "ci_method": c["ci_method"], "p": c["p"],
                                        "seeds": c["tasks"]}
    return out


def arm_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per arm: hits of n and the restricted mean compute to target."""
    out = {}
    for a in ARMS:
        rs = [r for r in rows if r["arm"] == a.name]
        out[a.name] = {"hits": sum(r["hit"] for r in rs), "runs": len(rs),
                       "restricted_mean_to_target":
                           round(sum(r["to_target"] for r in rs) / len(rs), 6) if rs else None}
    return out


def sweep_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for b in SWEEP:
        rs = [r for r in rows if r["budget"] == b]
        out[f"{b:g}"] = {"hits": sum(r["hit"] for r in rs), "runs": len(rs),
                         "mean_spent": round(sum(r["spent"] for r in rs) / len(rs), 6)
                         if rs else None,
                         "max_prefix_excess": max((r["max_prefix_excess"] for r in rs),
                                                  default=None)}
    return out
