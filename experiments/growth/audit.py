"""Checks of a growth run computed from its ledger records alone, not through the loop's code.

Why separate: a check that reused the loop's own fold could not catch the loop's own bug. Every
function here reads only the records' fields: `reserve` holds its amount, `settle` charges its
amount and releases the reservation it names, `tick` and `evaluation` records carry the charge
of one unit of work, `resources` records change what a tick is and costs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.growth import catalogue
from loopproof.engine.policy.evolution import replay_config
from loopproof.engine.system.errors import BadInput

TOLERANCE = 1e-9  # GPU-hours: the model's EPS, the paper's tolerance
Records = Sequence[Mapping[str, Any]]


def budget_of(records: Records) -> float:
    return float(records[0]["graph"]["spend_budget"])


def accounting(records: Records) -> dict[str, Any]:
    """Prefix accounting and reconciliation, from the records' own amounts.

    - `max_prefix_excess`: max over every prefix of settled + reserved - B (<= TOLERANCE: no
      prefix overspent; it is negative when no prefix reached B);
    - `reconciliation_error`: the largest |settle amount - sum of the unit charges it pays for|
      over every settlement, and |sum of all settlements - sum of all unit charges| at the end;
    - `unreserved_units`: ticks or evaluations recorded while no reservation was open;
    - `mispriced_ticks`: ticks whose size or price is not that of the resources in force;
    - `gauge_monotone`: tick numbers run 1, 2, 3, ... with no gap or repeat.
    """
    budget = budget_of(records)
    first = records[0]
    res = dict(first["growth"]["resources"], price=float(first["price"]))
    settled = reserved = 0.0
    open_res = False
    pending = 0.0      # unit charges since the open reservation was made
    total_units = total_settled = 0.0
    worst_excess, worst_gap = -math.inf, 0.0
    unreserved = mispriced = 0
    gauge, monotone = 0, True
    for rec in records[1:]:
        t = rec.get("type")
        if t == "reserve":
            reserved += float(rec["amount"])
            open_res, pending = True, 0.0
        elif t == "settle":
            amount = float(rec["amount"])
            settled += amount
            total_settled += amount
            reserved = max(0.0, reserved - float(rec["reserved"]))
            worst_gap = max(worst_gap, abs(amount - pending))
            open_res, pending = False, 0.0
        elif t in ("tick", "evaluation"):
            charge = float(rec["charge"])
            total_units += charge
            pending += charge
            if not open_res:
                unreserved += 1
            if t == "tick":
                monotone &= rec["tick"] == gauge + 1
                gauge = rec["tick"]
                if rec["gpus"] != res["gpus"] or rec["step"] != res["step"] \
                        or rec["price"] != res["price"] \
                        or float(rec["work"]) > rec["gpus"] * rec["step"] + TOLERANCE \
                        or abs(charge - float(rec["work"]) * rec["price"]) > TOLERANCE:
                    mispriced += 1
        elif t == "resources":
            res = {"gpus": rec["gpus"], "step": rec["step"], "price": float(rec["new_price"])}
        worst_excess = max(worst_excess, settled + reserved - budget)
    worst_gap = max(worst_gap, abs(total_settled - total_units))
    return {"max_prefix_excess": worst_excess if worst_excess > -math.inf else -budget,
            "terminal": settled, "reserved_left": reserved, "budget": budget,
            "reconciliation_error": worst_gap, "unreserved_units": unreserved,
            "mispriced_ticks": mispriced, "gauge_monotone": bool(monotone), "ticks": gauge}


def within_policy(acc: Mapping[str, Any]) -> bool:
    """Terminal and every prefix inside the budget, settlements reconciled, no unreserved or
    mispriced work, the tick gauge monotone."""
    return (acc["max_prefix_excess"] <= TOLERANCE and acc["terminal"] <= acc["budget"] + TOLERANCE
            and acc["reconciliation_error"] <= TOLERANCE and acc["unreserved_units"] == 0
            and acc["mispriced_ticks"] == 0 and acc["gauge_monotone"])


def evaluations_complete(records: Records) -> bool:
    """Every round that was opened has its evaluation recorded, and the run ended."""
    rounds = {r["round"] for r in records if r.get("type") == "round"}
    evaluated = {r["round"] for r in records if r.get("type") == "evaluation"}
    ended = any(r.get("type") in ("finish", "fail") for r in records)
    return rounds <= evaluated and ended


def outcome(records: Records) -> dict[str, Any]:
    """What the run decided: the scientific state a recovered run must reproduce exactly."""
    evals = [r for r in records if r.get("type") == "evaluation"]
    verdict = next((r for r in records if r.get("type") == "verdict"), None)
    end = next((r["type"] for r in records if r.get("type") in ("finish", "fail")), "none")
    acc = accounting(records)
    try:
        config: Any = replay_config(catalogue.CATALOG, records)
    except BadInput as exc:  # a commit whose recorded configuration is not what code gives
        config = f"refused: {exc.problem}"
    return {
        "end": end,
        "target_met": bool(verdict and verdict["passed"]),
        "to_target": verdict.get("to_target") if verdict else None,
        "evaluations": [[e["round"], list(e["successes"]), e["target_met"]] for e in evals],
        "config": config,
        "committed": [[r["type"], r["round"], list(r["applied"])] for r in records
                      if r.get("type") in ("stage_done", "idle_finished")],
        "proposals": sorted({(r["round"], r["id"]) for r in records
                             if r.get("type") == "agent_proposal"}),
        "terminal": round(acc["terminal"], 9),
        "reserved_left": round(acc["reserved_left"], 9),
    }


VOLATILE = frozenset({"hash", "prev", "seq"})
RECOVERY = frozenset({"resumed", "stopped"})


def normalized_trace(records: Records, root: str) -> list[Any]:
    """The record sequence without recovery bookkeeping (`resumed`, `stopped`), the chain fields
    and the run folder's path. Nothing else in a growth run is volatile: there is no clock."""
    def strip(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {strip(k): strip(v) for k, v in obj.items() if k not in VOLATILE}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        if isinstance(obj, str) and root and root in obj:
            return obj.replace(root, "<run>")
        return obj
    return [strip(dict(r)) for r in records if r.get("type") not in RECOVERY]


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Index of the first differing element; -1 when equal."""
    if list(a) == list(b):
        return -1
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))
