"""The meter stops an overspend inside the attempt (not after it), charges commands by wall clock,
kills them at their ceiling or timeout, and refuses an attempt that does not fit the budget."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.meter import BudgetOverrun
from loopproof.engine.run.runner import Runner
from tests.support.oracles import CallableKind, assert_g3, records
from tests.support.specs import command_node, write_spec

KIND = CallableKind("test_meter_py")


def py_graph(tmp_path: Path, name: str, worker, gate, *, ceiling: float, budget: float,
             attempts: int = 1) -> spec_mod.Spec:
    return KIND.one_node_spec(tmp_path, name, worker, gate, budget=budget, attempts=attempts,
                              spend_ceiling=ceiling)


def test_overspend_is_stopped_inside_the_attempt(tmp_path: Path) -> None:
    done: list[float] = []

    def greedy(ctx):
        for price in (0.4, 0.4, 0.4, 0.4):
            ctx.meter.charge(price, "api call")
            done.append(price)  # the paid call would happen here
        return "finished"  # never reached

    spec = py_graph(tmp_path, "greedy", greedy, lambda snap: "accept", ceiling=1.0, budget=5.0)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    assert runner.run() == 3  # FAILED: the one attempt ended by the overrun
    runner.close()
    assert done == [0.4, 0.4]  # the third call never ran: stopped inside the attempt
    recs = records(ledger)
    kinds = [r["type"] for r in recs]
    assert kinds == ["run", "begin", "reserve", "settle", "reserve", "settle", "overrun",
                     "worker_output", "fail"]
    assert "verdict" not in kinds  # no gate verdict for an attempt that overran
    over = recs[kinds.index("overrun")]
    assert over["amount"] == 0.4 and over["attempt_spend"] == pytest.approx(0.8)
    assert "overrun" in recs[kinds.index("worker_output")]["claims"]
    assert_g3(recs, 5.0)


def test_a_worker_that_swallows_the_overrun_cannot_spend_more(tmp_path: Path) -> None:
    tries: list[str] = []

    def stubborn(ctx):
        for _ in range(3):
            try:
                ctx.meter.charge(0.8)
                tries.append("paid")
            except BudgetOverrun:
                tries.append("refused")
        return "claims it is done"

    spec = py_graph(tmp_path, "stubborn", stubborn, lambda snap: "accept", ceiling=1.0,
                    budget=5.0)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    assert runner.run() == 3
    runner.close()
    assert tries == ["paid", "refused", "refused"]
    kinds = [r["type"] for r in records(ledger)]
    assert kinds.count("overrun") == 1 and kinds.count("reserve") == 1


def test_reservation_must_fit_the_run_budget_too(tmp_path: Path) -> None:
    """c_v = 3 fits B = 3 at admission; a second attempt finds only 1 unit of B left."""
    def spend2(ctx):
        ctx.meter.charge(2.0)

    spec = py_graph(tmp_path, "spend2", spend2, lambda snap: "reject", ceiling=3.0, budget=3.0,
                    attempts=3)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    assert runner.run() == 4  # BUDGET_EXHAUSTED: settled 2 + c_v 3 > B 3 at the second Begin
    runner.close()
    recs = records(ledger)
    assert [r["type"] for r in recs][-1] == "refuse"
    gate_runs = sum(r["amount"] for r in recs if r["type"] == "settle"
                    and r["what"] == "evaluation")  # the gate run is metered too
    assert runner.state.settled == pytest.approx(2.0 + gate_runs, abs=1e-9)
    assert_g3(recs, 3.0)


def command_graph(tmp_path: Path, worker: str, *, ceiling: float, timeout: float,
                  budget: float = 10.0) -> spec_mod.Spec:
    return spec_mod.load(write_spec(
        tmp_path, {"n": command_node(["sh", "-c", worker], ["sh", "-c", "test -f out.txt"],
                                     spend_ceiling=ceiling, timeout_s=timeout)},
        spend_budget=budget))


def test_command_is_killed_at_its_ceiling_and_charged_the_ceiling(tmp_path: Path) -> None:
    spec = command_graph(tmp_path, "sleep 30; touch out.txt", ceiling=0.3, timeout=30)
    ledger = tmp_path / "L.jsonl"
    t = time.monotonic()
    runner = Runner.start(spec, ledger)
    assert runner.run() == 3
    runner.close()
    assert time.monotonic() - t < 10  # killed, not waited for
    recs = records(ledger)
    reserve = next(r for r in recs if r["type"] == "reserve")
    settle = next(r for r in recs if r["type"] == "settle")
    assert reserve["amount"] == 0.3 and reserve["what"] == "wall_clock"
    assert settle["killed"] == "ceiling" and settle["amount"] == 0.3
    # the worker used all of c_v, so the gate run cannot be paid: an Overrun inside the attempt
    types = [r["type"] for r in recs]
    assert types[types.index("claim") + 1] == "overrun"
    overrun = next(r for r in recs if r["type"] == "overrun")
    assert overrun["what"] == "evaluation"
    assert not any(r["type"] == "verdict" for r in recs)
    assert_g3(recs, 10.0)


def test_command_timeout_is_metered_as_timeout(tmp_path: Path) -> None:
    spec = command_graph(tmp_path, "sleep 30", ceiling=5.0, timeout=0.3)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    runner.run()
    runner.close()
    settle = next(r for r in records(ledger) if r["type"] == "settle")
    assert settle["killed"] == "timeout"
    assert 0.25 <= settle["amount"] <= 0.3


def test_command_charged_its_wall_clock(tmp_path: Path) -> None:
    spec = command_graph(tmp_path, "sleep 0.2; touch out.txt", ceiling=5.0, timeout=5)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    assert runner.run() == 0
    runner.close()
    settle = next(r for r in records(ledger) if r["type"] == "settle")
    assert settle["killed"] is None and 0.2 <= settle["amount"] < 5.0
    assert runner.state.settled == pytest.approx(
        sum(r["amount"] for r in records(ledger) if r["type"] == "settle"), abs=1e-9)


class _Crash(BaseException):
    """Leaves the engine mid-attempt with no cleanup, like a SIGKILL."""


def test_resume_charges_the_open_reservation_and_readmits_against_it(tmp_path: Path) -> None:
    """Prefix accounting across a crash: the attempt that held 2.0 units when it died is charged
    2.0 on resume (outcome unknown); the spent budget is not reset, so the second attempt
    (settled 2 + c_v 2 > B 3) is refused. Charging less would wrongly admit it."""
    def reserve_then_die(ctx):
        ctx.meter.reserve(2.0, "training step")
        raise _Crash

    spec = py_graph(tmp_path, "die", reserve_then_die, lambda snap: "accept", ceiling=2.0,
                    budget=3.0, attempts=2)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    with pytest.raises(_Crash):
        runner.run()
    runner.close()
    assert [r["type"] for r in records(ledger)][-1] == "reserve"
    again = Runner.resume(ledger)
    assert again.state.settled == 0.0 and again.state.reserved == 2.0
    assert again.continue_run() == 4  # BUDGET_EXHAUSTED
    again.close()
    recs = records(ledger)
    assert [r["type"] for r in recs][-3:] == ["resumed", "abandon", "refuse"]
    abandon = recs[-2]
    assert abandon["outcome"] == "unknown" and abandon["charged"] == 2.0
    assert again.state.settled == 2.0
    assert_g3(recs, 3.0)
