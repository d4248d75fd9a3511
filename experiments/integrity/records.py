"""The trial row, and run-shaped ledgers: the records of one plausible run, written through
engine.record.ledger.Ledger, and the line-level helpers the trials damage them with.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.record.ledger import Ledger, canonical, record_hash

ROOT = Path(__file__).resolve().parents[2]

COLUMNS = ("id", "cls", "kind", "records", "target", "expected", "status", "detected",
           "signed_status", "message")


@dataclass(frozen=True)
class Row:
    id: str
    cls: str            # tamper | torn | rewrite
    kind: str
    records: int        # records in the untouched ledger
    target: str         # what was changed (line numbers are 1-based)
    expected: str       # what a correct verifier must say
    status: str         # what it said
    detected: bool      # tamper: detected; torn: recovered; rewrite: caught with signing
    signed_status: str  # rewrite only: status with the signed head checked
    message: str


def clean(msg: str, folder: Path) -> str:
    return msg.replace(str(folder.resolve()), "<trial>").replace(str(folder), "<trial>")


# ---- run-shaped records --------------------------------------------------------------------------

NODES = ("fetch", "build", "test", "package")


def run_records(rng: random.Random, run_id: str) -> list[dict]:
    """The records of one plausible run (no chain fields): attempts, verdicts, spend, repairs."""
    out: list[dict] = [{"type": "run", "run": run_id, "graph": {"nodes": list(NODES)},
                        "policy": {"digest": f"{rng.getrandbits(256):064x}"},
                        "budget": 60.0, "repair_budget": 1}]
    settled = 0.0
    for node in NODES:
        activation = 1
        for attempt in range(1, rng.randint(1, 3) + 1):
            ceiling = float(rng.choice((5, 10, 15)))
            out.append({"type": "reserve", "node": node, "activation": activation,
                        "attempt": attempt, "amount": ceiling, "settled": round(settled, 3)})
            spend = round(rng.uniform(0.1, ceiling), 3)
            out.append({"type": "worker_end", "node": node, "attempt": attempt, "exit": 0,
                        "seconds": spend, "stdout_sha256": f"{rng.getrandbits(256):064x}",
                        "claims": rng.choice(("", "done", "all tests pass"))})
            verdict = rng.choice(("PASS", "REJECT", "ERROR"))
            out.append({"type": "verdict", "node": node, "activation": activation,
                        "attempt": attempt, "verdict": verdict, "gate_exit": {"PASS": 0,
                        "REJECT": 1, "ERROR": 2}[verdict], "snapshot": f"{rng.getrandbits(128):032x}"})
            settled += spend
            out.append({"type": "settle", "node": node, "attempt": attempt, "spend": spend,
                        "settled": round(settled, 3)})
            if verdict == "PASS":
                break
        if rng.random() < 0.2:
            out.append({"type": "repair", "exhausted": node, "target": NODES[0],
                        "repairs_used": 1, "note": "réparation ✓"})
        out.append({"type": "node_done", "node": node, "activation": activation})
    out.append({"type": "run_end", "outcome": "DONE", "settled": round(settled, 3)})
    return out


def write_ledger(path: Path, records: Sequence[dict]) -> bytes:
    led = Ledger.create(path, records[0])
    with led.group():
        for r in records[1:]:
            led.append(r)
    led.close()
    return path.read_bytes()


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def rehash(rec: dict) -> bytes:
    rec["hash"] = record_hash(rec)
    return canonical(rec) + b"\n"
