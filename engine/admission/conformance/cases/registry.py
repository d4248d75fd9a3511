"""The case registry, and the two checks many cases end with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.admission.conformance.lab import Lab


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    obligation: str
    fault: str
    expected: str
    fn: Callable[[Path], None]


CASES: dict[str, Case] = {}  # in registration order; the package sorts it by id


def case(cid: str, title: str, *, obligation: str, fault: str, expected: str):
    def register(fn: Callable[[Path], None]) -> Callable[[Path], None]:
        assert cid not in CASES, f"duplicate case id {cid}"
        CASES[cid] = Case(cid, title, obligation, fault, expected, fn)
        return fn
    return register


def no_receipt(lab: Lab) -> None:
    assert not (lab.state / "receipt.json").exists(), "a receipt was written"
    assert not any(r["type"] == "guard.receipt" for r in lab.ledger.records), "receipt anchored"


def record_types(lab: Lab) -> list[str]:
    return [r["type"] for r in lab.ledger.records]
