"""A Python-callable worker that reports using more than it reserved is not silently
under-charged: the reservation is charged in full, the claim is recorded as a fact
(`overspend_claimed`), and the attempt ends failed without a verdict of the gate."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from loopproof.engine.run.meter import BudgetOverrun
from loopproof.engine.run.runner import Runner
from tests.support.oracles import CallableKind, records

KIND = CallableKind("test_overspend_claim_py")


def run_one(tmp_path: Path, name: str, worker, attempts: int = 1) -> tuple[int, list[dict]]:
    spec = KIND.one_node_spec(tmp_path, name, worker, budget=20.0, attempts=attempts,
                              spend_ceiling=5.0)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    code = runner.run()
    runner.close()
    return code, records(ledger)


def test_a_claim_above_the_reservation_is_charged_in_full_recorded_and_fails(
        tmp_path: Path) -> None:
    seen: list[str] = []

    def liar(ctx):
        ctx.meter.reserve(1.0, "api call")
        try:
            ctx.meter.settle(3.0, "api call")  # used more than it reserved
        except BudgetOverrun:
            seen.append("refused")
        try:
            ctx.meter.charge(0.5)  # the attempt is over: nothing more may be spent
        except BudgetOverrun:
            seen.append("refused again")
        return "done"

    code, recs = run_one(tmp_path, "liar", liar)
    assert code == 3 and seen == ["refused", "refused again"]
    claim = next(r for r in recs if r["type"] == "overspend_claimed")
    assert (claim["reserved"], claim["claimed"], claim["what"]) == (1.0, 3.0, "api call")
    settles = [r for r in recs if r["type"] == "settle"]
    assert [s["amount"] for s in settles] == [1.0]  # the reservation in full, not less
    verdict = next(r for r in recs if r["type"] == "verdict")
    assert not verdict["passed"] and verdict["verdict"] == "error"
    assert "claimed 3.0" in verdict["detail"]
    kinds = [r["type"] for r in recs]
    assert kinds.count("reserve") == 1 and kinds[-1] == "fail"


@pytest.mark.parametrize("bad", [-1.0, math.nan, "2"])
def test_a_negative_or_non_number_claim_is_not_coerced(tmp_path: Path, bad) -> None:
    def odd(ctx):
        ctx.meter.reserve(2.0)
        ctx.meter.settle(bad)
        return "done"

    code, recs = run_one(tmp_path, f"odd{bad!r}", odd)
    assert code == 3
    assert [r["amount"] for r in recs if r["type"] == "settle"] == [2.0]
    assert any(r["type"] == "overspend_claimed" for r in recs)


def test_an_honest_claim_within_the_reservation_is_charged_as_claimed(tmp_path: Path) -> None:
    def honest(ctx):
        ctx.meter.reserve(2.0)
        ctx.meter.settle(0.75)
        return "done"

    code, recs = run_one(tmp_path, "honest", honest)
    assert code == 0
    assert [r["amount"] for r in recs if r["type"] == "settle" and r["what"] == "charge"] == [0.75]
    assert not any(r["type"] == "overspend_claimed" for r in recs)
