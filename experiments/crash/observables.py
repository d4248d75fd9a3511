"""What a recovered run is compared on: the scientific state, the normalized trace, worker calls,
and the budget at every prefix of the ledger (docs/crash.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.replay import Replayed
from loopproof.model.transitions import EPS

# ---- observables ------------------------------------------------------------------------------

# Fields whose values are not part of what a run decided: chain fields (they hash volatile
# content), wall-clock measurements and process facts. Removed at any depth.
VOLATILE_KEYS = frozenset({"hash", "prev", "seq", "seconds", "elapsed", "pid", "pgid", "time",
                           "duration"})
# Fields that accumulate measured wall clock: kept, with the value replaced by "~".
MEASURED_KEYS = frozenset({"settled"})
# Records that exist only because a run was interrupted and resumed (bookkeeping, not execution).
RECOVERY_TYPES = frozenset({"resumed"})
WALL_CLOCK = "wall_clock"
EVALUATION = "evaluation"  # a gate run's reservation and settlement (engine.run.meter)


def _strip(obj: Any, root: str) -> Any:
    if isinstance(obj, dict):
        out = {k: ("~" if k in MEASURED_KEYS else _strip(v, root))
               for k, v in obj.items() if k not in VOLATILE_KEYS}
        if obj.get("type") == "settle" and obj.get("what") in (WALL_CLOCK, EVALUATION):
            out["amount"] = "~"  # seconds a command took: a measurement, not a decision
        if obj.get("what") == EVALUATION and obj.get("type") in ("reserve", "overrun", "settle"):
            out["amount"] = "~"  # a gate's hold is what the measured worker left of c_v
            for key in ("reserved", "of"):  # `of`: the reservation a settle releases
                if key in out:
                    out[key] = "~"
        if obj.get("type") == "run" and isinstance(out.get("spec"), dict):
            out["spec"].pop("sha256", None)  # the spec file's bytes embed the case folder
        return out
    if isinstance(obj, list):
        return [_strip(v, root) for v in obj]
    if isinstance(obj, str) and root and root in obj:
        return obj.replace(root, "<case>")
    return obj


def normalized_trace(records: Iterable[Mapping[str, Any]], root: str) -> list[Any]:
    """The record sequence with recovery bookkeeping and volatile fields removed (docs/crash.md)."""
    return [_strip(dict(r), root) for r in records if r.get("type") not in RECOVERY_TYPES]


def content_hash(folder: Path) -> str:
    """SHA-256 over sorted relative paths and file contents (empty string if no folder): what
    observable (a) of docs/crash.md compares, so modes and links are left out (unlike the
    engine's digests in engine/system/trees.py)."""
    if not folder.is_dir():
        return ""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def scientific_state(rep: Replayed, records: Sequence[Mapping[str, Any]],
                     workspaces: Path) -> dict[str, Any]:
    """Outcome, node statuses and activations, repairs, workspace and PASS-snapshot hashes."""
    g, s = rep.graph, rep.state
    passes = sorted({(r["node"], int(r.get("activation", -1)), str(r.get("snapshot", "")))
                     for r in records if r.get("type") == "verdict" and r.get("passed")})
    ws = {n: content_hash(workspaces / n) for n in g.names}
    return {
        "outcome": s.outcome.value,
        "nodes": {n: {"status": s.status_of(g, n).value, "activation": s.activation_of(g, n)}
                  for n in g.names},
        "repairs_used": s.repairs_used,
        "pass_snapshots": [list(p) for p in passes],
        "workspaces": ws,
        "settled_within_budget": s.settled <= g.spend_budget + EPS,
        "reserved_left": round(s.reserved, 9),
    }


def prefix_excess(records: Sequence[Mapping[str, Any]]) -> float:
    """max over every prefix of (settled + reserved - B); <= EPS means no budget violation.

    Computed from the records' own amounts, not through the engine's replay, so the check does
    not rest on the code it checks: `reserve` holds its amount, `settle` charges its amount and
    releases its reservation, `abandon` charges what it says it charged and releases that much
    (its attempt's open reservation; other attempts in flight keep theirs).
    """
    if not records:
        return 0.0
    budget = float(records[0]["graph"]["spend_budget"])
    settled = reserved = 0.0
    worst = -budget
    for rec in records[1:]:
        t = rec.get("type")
        if t == "reserve":
            reserved += float(rec["amount"])
        elif t == "settle":
            settled += float(rec["amount"])
            reserved = max(0.0, reserved - float(rec["reserved"]))
        elif t == "abandon":  # its own attempt's open reservation (several may be in flight)
            charged = float(rec.get("charged", 0.0))
            settled += charged
            reserved = max(0.0, reserved - charged)
        worst = max(worst, settled + reserved - budget)
    return worst


def read_records(ledger: Path) -> list[dict[str, Any]]:
    with Ledger.open(ledger) as led:
        return [dict(r) for r in led.records]


def worker_calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
