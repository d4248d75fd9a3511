"""The mutant experiment, the paper's protocol for measuring gates without fooling ourselves.

    python -m experiments.mutants [--scale smoke|default|paper] [--seed S] [--json] [--out DIR]

1. Audit the catalogue's gates with tier 1 (absence and structural mutants, probes).
2. Every flagged gate (vacuous, self-attesting, or a tier-1 false accept) is replaced by the
   repair written beside it (`<loop>/gate.repaired/`); tier 1 is run again on the repaired set and
   must show no false accepts.
3. Freeze: the SHA-256 of every audited gate file is recorded.
4. Only now run tier 2, the held-out family (cosmic-ray semantic mutants, content negations and
   boundaries), on the frozen gates, and report the false-accept rate it recovers with its Wilson
   95% interval. Tier 2 on the original gates is reported beside it.

Writes to DIR (default results/mutants): summary.json, gates.csv, audit_before.json,
audit_after.json (deterministic for a seed) and timing.json (wall-clock; not deterministic).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from experiments import results
from experiments.executor import Executor, executor_from
from experiments.results import write_csv, write_json
from experiments.stats import cluster_mean
from loopproof.engine.system.errors import BadInput

if TYPE_CHECKING:
    # the audit's machinery (cosmic-ray's operators, parso, stevedore: ~0.5 CPU-s of imports) is
    # imported where a run needs it, not by the notebook, which reads results (load_results)
    from loopproof.engine.audit.catalogue import Loop
    from loopproof.engine.audit.instrument import Audit

NAME = "mutants"
CATALOG = Path(__file__).resolve().parents[2] / "examples" / "catalog"
COLUMNS = ("gate", "phase", "tier", "mutants", "destroying", "errors", "false_accepts", "alpha",
           "alpha_low95", "alpha_upper95", "vacuous", "self_attesting", "flagged", "repaired")


@dataclass(frozen=True)
class Scale:
    """How big a run is: which loops (None: all) and at most how many tier-2 mutants per loop."""

    loops: tuple[str, ...] | None
    tier2_cap: int | None


SMOKE_LOOPS = ("changelog-release-claim", "he000-full-check", "he005-imports")
SCALES = {"smoke": Scale(SMOKE_LOOPS, 4), "default": Scale(None, 20), "paper": Scale(None, 60)}


def _cpu_seconds() -> float:
    """CPU time of this process and the gates it ran (a rate a busy machine distorts less)."""
    own, kids = (resource.getrusage(resource.RUSAGE_SELF),
                 resource.getrusage(resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _gate_digest(loops: list[Loop]) -> dict[str, str]:
    """The frozen gates: per loop, SHA-256 over the audited gate folder's files."""
    out = {}
    for lp in loops:
        digest = hashlib.sha256()
        for path in sorted(p for p in lp.gate_dir.rglob("*") if p.is_file()):
            digest.update(path.relative_to(lp.gate_dir).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        out[lp.id] = digest.hexdigest()
    return out


def _pooled(gates: list[dict], tier: str) -> dict:
    from loopproof.engine.audit import report

    rows = [g["tiers"][tier] for g in gates if g["status"] == "audited" and tier in g["tiers"]]
    destroying = sum(r["destroying"] for r in rows)
    errors = sum(r["errors"] for r in rows)
    fa = sum(r["false_accepts"] for r in rows)
    judged = destroying - errors
    # the gate is the cluster: a gate's mutants share its blind spots, so the pooled Wilson
    # interval (every mutant an independent trial) is too narrow; by_gate is the mean of the
    # per-gate rates with a BCa bootstrap over gates (experiments.stats.cluster_mean)
    per_gate = {g["gate"]: (g["tiers"][tier]["false_accepts"]
                            / (g["tiers"][tier]["destroying"] - g["tiers"][tier]["errors"]))
                for g in gates if g["status"] == "audited" and tier in g["tiers"]
                and g["tiers"][tier]["destroying"] - g["tiers"][tier]["errors"] > 0}
    return {"mutants": sum(r["mutants"] for r in rows), "destroying": destroying,
            "errors": errors, "false_accepts": fa,
            "alpha": round(fa / judged, report.DIGITS) if judged else None,
            "wilson95": report.wilson_interval(fa, judged),
            "by_gate": cluster_mean(per_gate, seed=0)}


def _rows(result: Audit, phase: str, repaired: set[str]) -> list[dict]:
    from loopproof.engine.audit import report

    rows = []
    for g in result.gates:
        for tier, s in sorted(g["tiers"].items()):
            judged = s["destroying"] - s["errors"]
            interval = report.wilson_interval(s["false_accepts"], judged)
            rows.append({"gate": g["gate"], "phase": phase, "tier": tier, "mutants": s["mutants"],
                         "destroying": s["destroying"], "errors": s["errors"],
                         "false_accepts": s["false_accepts"], "alpha": s["alpha"],
                         "alpha_low95": interval[0] if interval else None,
                         "alpha_upper95": interval[1] if interval else None,
                         "vacuous": g["vacuous"], "self_attesting": g["self_attesting"],
                         "flagged": g["flagged"], "repaired": g["gate"] in repaired})
    return rows


def _merge(first: Audit, second: Audit) -> list[dict]:
    """One gate list holding both audits' tiers (same loops, same order)."""
    merged = []
    for a, b in zip(first.gates, second.gates, strict=True):
        merged.append(dict(a, tiers={**a["tiers"], **b["tiers"]}))
    return merged


def run(scale_name: str, seed: int, out: Path, jobs: int | None = None,
        catalog: Path = CATALOG, executor: Executor | None = None) -> tuple[dict, dict]:
    from loopproof.engine.audit.catalogue import REPAIRED_DIR, load_catalogue, load_loop
    from loopproof.engine.audit.instrument import Audit, audit
    from loopproof.engine.audit.judge import Judge

    scale = SCALES[scale_name]
    originals = load_catalogue(catalog)
    if scale.loops is not None:
        originals = [lp for lp in originals if lp.id in scale.loops]
    cap = {2: scale.tier2_cap}
    judge = Judge(jobs, mapper=None if executor is None or executor.client is None
                  else executor.map)
    clock = {}

    t0 = time.monotonic()
    cpu0 = _cpu_seconds()
    before1 = audit(originals, tiers=(1,), seed=seed, cap=cap, judge=judge)
    flagged = {g["gate"] for g in before1.gates if g["flagged"]}
    frozen = [load_loop(lp.root, REPAIRED_DIR) if lp.id in flagged else lp for lp in originals]
    repaired = {lp.id for lp in frozen if lp.repaired}
    after1 = audit(frozen, tiers=(1,), seed=seed, cap=cap, judge=judge)
    digests = _gate_digest(frozen)
    clock["tier1_s"] = round(time.monotonic() - t0, 2)

    t1 = time.monotonic()
    after2 = audit(frozen, tiers=(2,), seed=seed, cap=cap, judge=judge)
    before2 = audit(originals, tiers=(2,), seed=seed, cap=cap, judge=judge)
    clock["tier2_s"] = round(time.monotonic() - t1, 2)
    if _gate_digest(frozen) != digests:
        raise RuntimeError("a frozen gate changed while tier 2 ran")

    before, after = _merge(before1, before2), _merge(after1, after2)
    still = sorted(g["gate"] for g in after1.gates
                   if g["status"] != "audited" or g["tiers"]["1"]["false_accepts"])
    summary = {
        "scale": scale_name, "seed": seed, "loops": len(originals),
        "before": {"flagged": len(flagged), "vacuous": before1.summary["vacuous"],
                   "self_attesting": before1.summary["self_attesting"],
                   "broken": before1.summary["broken"],
                   "tier1": _pooled(before, "1"), "tier2": _pooled(before, "2")},
        "repaired": sorted(repaired),
        "unrepaired_flagged": sorted(flagged - repaired),
        "after": {"flagged_tier1": sum(g["flagged"] for g in after1.gates),
                  "vacuous": after1.summary["vacuous"],
                  "self_attesting": after1.summary["self_attesting"],
                  "tier1_false_accepts_remaining": still,
                  "tier1": _pooled(after, "1"), "tier2": _pooled(after, "2")},
        "frozen_gates_sha256": hashlib.sha256(
            json.dumps(digests, sort_keys=True).encode()).hexdigest(),
        "tier2_cap_per_loop": scale.tier2_cap,
    }
    out.mkdir(parents=True, exist_ok=True)
    rows = _rows(Audit(before, {}), "before", set()) + _rows(Audit(after, {}), "after", repaired)
    files = {"summary.json": summary, "audit_before.json": {"gates": before},
             "audit_after.json": {"gates": after}}
    for name, data in files.items():
        write_json(out / name, data)
    write_csv(out / "gates.csv", rows, COLUMNS)
    runs = judge.runs
    timing = {**clock, "gate_runs": runs, "jobs": judge.jobs,
              "wall_s": round(time.monotonic() - t0, 2),
              "runs_per_s": round(runs / max(time.monotonic() - t0, 1e-9), 1),
              "mutants_judged": sum(a.summary["mutants_judged"]
                                    for a in (before1, after1, after2, before2))}
    timing["mutants_per_s"] = round(timing["mutants_judged"] / max(timing["wall_s"], 1e-9), 1)
    timing["cpu_s"] = round(_cpu_seconds() - cpu0, 2)
    timing["mutants_per_cpu_s"] = round(timing["mutants_judged"] / max(timing["cpu_s"], 1e-9), 1)
    timing["loadavg_1m"] = round(os.getloadavg()[0], 2)
    write_json(out / "timing.json", timing)
    return summary, timing


def load_results(directory: Path) -> dict:
    """summary.json and gates.csv (typed) from a results directory, for the notebook."""
    directory = Path(directory)
    summary = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    rows = []
    with (directory / "gates.csv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            for key in ("mutants", "destroying", "errors", "false_accepts"):
                row[key] = int(row[key])
            for key in ("alpha", "alpha_low95", "alpha_upper95"):
                row[key] = float(row[key]) if row[key] else None
            for key in ("vacuous", "self_attesting", "flagged", "repaired"):
                row[key] = row[key] in ("True", "1")  # write_csv stores booleans as 1/0
            rows.append(row)
    return {"summary": summary, "rows": rows}


def interval_series(rows: list[dict], phase: str, tier: str, gates: list[str]) -> dict:
    """Per gate (in `gates` order) alpha and its Wilson error bars, NaN where nothing was judged."""
    index = {(r["gate"], r["phase"], r["tier"]): r for r in rows}
    alpha, low, high = [], [], []
    for gate in gates:
        r = index.get((gate, phase, tier))
        a = r["alpha"] if r and r["alpha"] is not None else float("nan")
        alpha.append(a)
        low.append(a - r["alpha_low95"] if r and r["alpha"] is not None else 0.0)
        high.append(r["alpha_upper95"] - a if r and r["alpha"] is not None else 0.0)
    return {"alpha": alpha, "yerr": [low, high]}


def main(argv: list[str] | None = None) -> int:
    parser = results.parser(NAME, "tier 1, repair, freeze, held-out tier 2", SCALES)
    parser.add_argument("--jobs", type=int, default=None, help="gates run in parallel (default: cores)")
    parser.add_argument("--catalog", type=Path, default=CATALOG, help="the gate catalogue")
    parser.add_argument("--dask", default=None, metavar="ADDRESS",
                        help="run the gates on the Dask scheduler at ADDRESS (the catalogue "
                             "at the same path on every worker); same results as locally")
    args = results.parse(parser, argv)
    if args is None:
        return 2
    try:
        with executor_from(argparse.Namespace(dask=args.dask, jobs=1)) as executor:
            summary, timing = run(args.scale, args.seed, args.out, args.jobs, args.catalog,
                                  executor)
    except BadInput as exc:
        print(f"experiments.mutants: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**summary, "timing": timing, "out": str(args.out)}, sort_keys=True))
    else:
        a, b = summary["after"], summary["before"]
        print(f"mutants: {summary['loops']} loops; before repair {b['flagged']} flagged "
              f"({b['vacuous']} vacuous, {b['self_attesting']} self-attesting); "
              f"{len(summary['repaired'])} repaired; after: tier 1 {a['tier1']['false_accepts']}"
              f"/{a['tier1']['destroying']} false accepts (Wilson {a['tier1']['wilson95']}), "
              f"held-out tier 2 {a['tier2']['false_accepts']}/{a['tier2']['destroying']} = "
              f"{a['tier2']['alpha']} (Wilson {a['tier2']['wilson95']}); "
              f"{timing['wall_s']} s; written to {args.out}")
    return 0 if protocol_holds(summary) else 1


def protocol_holds(summary: dict) -> bool:
    """The protocol's condition before tier 2 may be read: every flagged gate was repaired and
    the repaired, frozen set shows no tier-1 false accept. A repair that still accepts a
    destroyed artifact fails the run (exit 1), it is not reported as a result."""
    after = summary["after"]
    return (not summary["unrepaired_flagged"] and not after["tier1_false_accepts_remaining"]
            and after["tier1"]["false_accepts"] == 0)


if __name__ == "__main__":
    sys.exit(main())
