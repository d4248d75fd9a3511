"""Prefix accounting with evaluation reserved ahead of the work, and across a change of price.

Every spend check here is recomputed from the ledger file's own records (tests/support/oracles.py `assert_g3`), not
through the engine's replay, so a bug in the engine's state cannot hide one in its accounting.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.engine.cli import main as cli_main
from loopproof.engine.record.replay import replay
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import Runner
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from tests.support.oracles import CallableKind, assert_g3, records
from tests.support.specs import command_node, write_spec

KIND = CallableKind("test_prefix_py")
EPS = 1e-9


def attempts(recs: list[dict]) -> list[list[dict]]:
    """The records of each attempt, from its `begin` to the record before the next `begin` or
    the end of the run."""
    out: list[list[dict]] = []
    for r in recs[1:]:
        if r["type"] == "begin":
            out.append([])
        if out and r["type"] not in ("finish", "fail", "refuse", "repair", "resumed",
                                     "resources", "stopped"):
            out[-1].append(r)
    return out


def graph_file(tmp_path: Path, nodes: dict, budget: float, price: float | None = None) -> Path:
    return write_spec(tmp_path, nodes, spend_budget=budget, **({"price": price} if price else {}))


def _reserve(eval_reserve: object) -> dict:
    return {"eval_reserve": eval_reserve} if eval_reserve is not None else {}


def py_node(name: str, fn: str, *, ceiling: float, eval_reserve: float | None,
            attempts_: int = 1) -> dict:
    return {name: {"kind": KIND.name, "fn": fn, "attempts": attempts_, "spend_ceiling": ceiling,
                   **_reserve(eval_reserve)}}


def cmd_node(name: str, worker: str, *, ceiling: float, eval_reserve: object = None,
             attempts_: int = 1, timeout: float = 30, **more: object) -> dict:
    return {name: command_node(["sh", "-c", worker], ["sh", "-c", "test -f out.txt"],
                               attempts=attempts_, spend_ceiling=ceiling, timeout_s=timeout,
                               **_reserve(eval_reserve), **more)}


def run(path: Path, ledger: Path) -> tuple[int, Runner]:
    runner = Runner.start(spec_mod.load(path), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    return code, runner


# ---- (a) with eval_reserve the evaluation always fits ------------------------------------------

def test_a_command_worker_is_killed_at_c_v_minus_eval_reserve_and_the_gate_still_runs(
        tmp_path: Path) -> None:
    """A worker that would run for 30 s is killed when it has used c_v - eval_reserve; the held
    back part pays for the gate, which judges what the worker left (out.txt: accept)."""
    # 1.2 held back: the sandboxed gate's few milliseconds fit even on a loaded machine (0.3
    # did not, once, at a load of 20 on 2 cores: the gate was cut and the run FAILED)
    body = cmd_node("n", "touch out.txt; sleep 30", ceiling=1.5, eval_reserve=1.2)
    code, runner = run(graph_file(tmp_path, body, budget=5.0), tmp_path / "L.jsonl")
    recs = records(tmp_path / "L.jsonl")
    assert code == 0
    work = next(r for r in recs if r["type"] == "settle" and r["what"] == "wall_clock")
    assert work["killed"] == "ceiling" and work["reserved"] == pytest.approx(0.3)
    held = next(r for r in recs if r["type"] == "reserve" and r["what"] == "evaluation")
    assert held["amount"] >= 1.2 - EPS
    assert [r["type"] for r in recs][-5:] == ["claim", "reserve", "settle", "verdict", "finish"]
    assert not any(r["type"] == "overrun" for r in recs)
    assert_g3(recs)


@settings(max_examples=30)
@given(ceiling=st.sampled_from([0.5, 1.0, 2.0]), share=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
       charges=st.lists(st.sampled_from([0.05, 0.2, 0.5, 1.0]), min_size=1, max_size=6),
       budget=st.sampled_from([1.0, 3.0, 10.0]), tries=st.integers(1, 3))
def test_with_eval_reserve_every_admitted_attempt_reaches_its_verdict(
        tmp_path_factory, ceiling: float, share: float, charges: list[float], budget: float,
        tries: int) -> None:
    """(a) and (b): a worker charging as much as it likes never makes its evaluation unpayable:
    every attempt ends with a verdict (no Overrun), its worker spent at most c_v - eval_reserve,
    and settled + reserved <= B at every prefix of the ledger file."""
    tmp = tmp_path_factory.mktemp("p")
    reserve = round(ceiling * share, 6)

    def greedy(ctx):
        for c in charges:
            ctx.meter.charge(c, "api")
        return "ok"

    KIND.add("greedy", greedy, lambda snap: "reject")
    body = py_node("n", "greedy", ceiling=ceiling, eval_reserve=reserve, attempts_=tries)
    code, _ = run(graph_file(tmp, body, budget=budget), tmp / "L.jsonl")
    recs = records(tmp / "L.jsonl")
    assert code in (3, 4)  # rejected to the end, or refused when B ran out
    assert not any(r["type"] == "overrun" for r in recs)
    for att in attempts(recs):
        assert att[-1]["type"] == "verdict", [r["type"] for r in att]
        worker = sum(r["amount"] for r in att if r["type"] == "settle" and r["what"] == "api")
        assert worker <= ceiling - reserve + EPS
        asked = sum(r["amount"] for r in att if r["type"] == "reserve")
        assert asked <= ceiling + EPS
    assert_g3(recs)


# ---- (c) without eval_reserve: the gate's reservation fails inside the attempt -----------------

def test_without_eval_reserve_a_worker_using_all_of_c_v_leaves_the_gate_unpayable(
        tmp_path: Path) -> None:
    """The worker is killed at c_v; the gate's reservation then does not fit: an `overrun`
    (what = evaluation) right after the claim, while the attempt is still in flight (the
    model's state just before it has the node running), and no verdict is ever recorded."""
    body = cmd_node("n", "touch out.txt; sleep 30", ceiling=0.3)
    code, runner = run(graph_file(tmp_path, body, budget=5.0), tmp_path / "L.jsonl")
    recs = records(tmp_path / "L.jsonl")
    assert code == 3  # FAILED: the one attempt ended without a verdict
    types = [r["type"] for r in recs]
    i = types.index("overrun")
    assert types[i - 1] == "claim" and recs[i]["what"] == "evaluation"
    before = replay(recs[:i])
    assert before.state.running(before.graph) == "n"  # inside the attempt, not after it
    assert "verdict" not in types
    assert runner.state.settled <= 0.3 + EPS
    assert_g3(recs)


def test_without_eval_reserve_a_callable_worker_spending_c_v_overruns_at_the_gate(
        tmp_path: Path) -> None:
    def spend_all(ctx):
        ctx.meter.charge(1.0, "api")

    KIND.add("spend_all", spend_all, lambda snap: "accept")
    code, _ = run(graph_file(tmp_path, py_node("n", "spend_all", ceiling=1.0, eval_reserve=None),
                             budget=3.0), tmp_path / "L.jsonl")
    recs = records(tmp_path / "L.jsonl")
    assert code == 3
    assert [r["type"] for r in recs][-4:] == ["settle", "claim", "overrun", "fail"]
    assert recs[-2]["what"] == "evaluation"


def test_a_worker_asking_into_the_reserve_is_refused_and_recorded(tmp_path: Path) -> None:
    """A charge that fits c_v but not c_v - eval_reserve never runs (a `worker_ceiling` fact);
    the attempt goes on to its gate, which the reserve pays for."""
    done: list[float] = []

    def two(ctx):
        for c in (0.5, 0.5):
            ctx.meter.charge(c, "api")
            done.append(c)

    KIND.add("two", two, lambda snap: "accept")
    code, _ = run(graph_file(tmp_path, py_node("n", "two", ceiling=1.0, eval_reserve=0.4),
                             budget=3.0), tmp_path / "L.jsonl")
    recs = records(tmp_path / "L.jsonl")
    assert code == 0 and done == [0.5]
    types = [r["type"] for r in recs]
    assert "worker_ceiling" in types and "overrun" not in types
    assert types[-2] == "verdict" and recs[-2]["verdict"] == "accept"


# ---- a change of resources: the price -----------------------------------------------------------

def two_nodes(tmp_path: Path, budget: float) -> Path:
    body = (cmd_node("a", "sleep 0.3; touch out.txt", ceiling=1.0, attempts_=3)
            | cmd_node("b", "sleep 0.3; touch out.txt", ceiling=1.0, attempts_=3,
                       needs=["a"]))
    return graph_file(tmp_path, body, budget=budget)


def test_resume_with_a_higher_price_shortens_deadlines_and_ends_budget_exhausted(
        tmp_path: Path) -> None:
    """At price 1, a 0.3 s worker fits c_v = 1 and passes (node a). Resumed at price 10, the
    same worker's deadline is c_v / 10 = 0.1 s: it is killed and charged its full c_v, its gate
    cannot be paid, and the run is refused when the next attempt no longer fits B. Settled spend
    only grows, and never passes B at any prefix."""
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec_mod.load(two_nodes(tmp_path, budget=2.5)), ledger)
    runner.step()  # node a's attempt, at price 1
    before = runner.state.settled
    runner.close()
    assert runner.state.status_of(runner.graph, "a").value == "DONE"

    again = Runner.resume(ledger, price=10.0)
    code = again.continue_run()
    again.close()
    recs = records(ledger)
    assert code == 4  # BUDGET_EXHAUSTED, never an overspend
    res = next(r for r in recs if r["type"] == "resources")
    assert (res["old_price"], res["new_price"]) == (1.0, 10.0)
    assert res["settled"] == pytest.approx(before)
    after = recs[[r["type"] for r in recs].index("resources"):]
    work = [r for r in after if r["type"] == "settle" and r["what"] == "wall_clock"]
    assert work and all(r["killed"] == "ceiling" and r["price"] == 10.0 for r in work)
    assert all(r["reserved"] == pytest.approx(1.0) and r["seconds"] < 0.3 for r in work)
    assert again.state.settled >= before
    assert again.state.settled <= 2.5 + EPS
    assert recs[-1]["type"] == "refuse"
    assert replay(recs).price == 10.0
    assert_g3(recs)


def test_resume_never_resets_spent_budget(tmp_path: Path) -> None:
    """B = 2.2, c_v = 1, a worker that is killed at its ceiling (charged 1 each attempt).

    One attempt before the resume settles 1 (plus nothing for the unpayable gate). After a resume
    with a new price, a second attempt is admitted (1 + 1 <= 2.2) and the third is refused
    (2 + 1 > 2.2): exactly two `begin` records and a final `refuse` whose `settled` is the sum
    of every settlement in the file, including those before the resume.

    Which assertion catches a reset: if resume (or the `resources` record in replay) reset the
    settled spend to 0, the third attempt would be admitted (0 + 1 + 1 <= 2.2), so the run would
    hold three `begin` records and `begins == 2` fails; the run would also end FAILED (exit 3,
    attempts spent) instead of BUDGET_EXHAUSTED, so `code == 4` fails too, and the refuse
    record's `settled` (the engine's own total) would no longer equal the file's sum."""
    body = cmd_node("n", "sleep 30", ceiling=1.0, attempts_=3)
    path = graph_file(tmp_path, body, budget=2.2, price=4.0)  # deadline 0.25 s
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec_mod.load(path), ledger)
    runner.step()
    before = runner.state.settled
    runner.close()
    assert before == pytest.approx(1.0)

    again = Runner.resume(ledger, price=8.0)
    code = again.continue_run()
    again.close()
    recs = records(ledger)
    begins = sum(1 for r in recs if r["type"] == "begin")
    assert begins == 2
    assert code == 4
    total = sum(r["amount"] for r in recs if r["type"] == "settle")
    assert recs[-1]["type"] == "refuse"
    assert recs[-1]["settled"] == pytest.approx(total)
    assert again.state.settled == pytest.approx(total) and total >= before
    assert_g3(recs)


def test_bad_price_on_resume_is_refused_and_nothing_is_written(tmp_path: Path,
                                                                capsys) -> None:
    KIND.add("ok", lambda ctx: "ok", lambda snap: "accept")
    path = graph_file(tmp_path, py_node("n", "ok", ceiling=1.0, eval_reserve=None), budget=3.0)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec_mod.load(path), ledger)
    runner.close()
    before = ledger.read_bytes()
    for bad in ("0", "-1", "nan", "inf"):
        assert cli_main(["resume", "--ledger", str(ledger), "--price", bad]) == 2
        assert ledger.read_bytes() == before
    assert "--price" in capsys.readouterr().err


def test_a_resources_record_that_skips_a_price_is_refused_by_replay(tmp_path: Path) -> None:
    KIND.add("ok", lambda ctx: "ok", lambda snap: "accept")
    path = graph_file(tmp_path, py_node("n", "ok", ceiling=1.0, eval_reserve=None), budget=3.0)
    ledger = tmp_path / "L.jsonl"
    Runner.start(spec_mod.load(path), ledger).close()
    again = Runner.resume(ledger, price=3.0)
    assert again.continue_run() == 0
    again.close()
    recs = records(ledger)
    assert replay(recs).price == 3.0
    forged = [dict(r) for r in recs]
    i = [r["type"] for r in forged].index("resources")
    forged[i]["old_price"] = 0.5  # claims the price was lower than the run's
    with pytest.raises(LedgerCorrupt):
        replay(forged)


@pytest.mark.parametrize(("value", "field"), [
    (2.0, "eval_reserve"), (-1, "eval_reserve"), (True, "eval_reserve")])
def test_eval_reserve_is_validated(tmp_path: Path, value: object, field: str) -> None:
    path = graph_file(tmp_path, cmd_node("n", "true", ceiling=1.0, eval_reserve=value), budget=3.0)
    with pytest.raises(BadInput, match=field):
        spec_mod.load(path)


@pytest.mark.parametrize("price", [0, -2, True, "1"])
def test_price_is_validated(tmp_path: Path, price: object) -> None:
    p = write_spec(tmp_path, cmd_node("n", "true", ceiling=1.0), spend_budget=3, price=price)
    with pytest.raises(BadInput, match="price"):
        spec_mod.load(p)
