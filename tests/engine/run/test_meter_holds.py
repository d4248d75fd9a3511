"""Concurrent holds: many threads reserve through one meter at once (as the model-call proxy
does), and no interleaving lets the reservations in flight together pass c_v or B."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from loopproof.engine.record.replay import replay
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import Runner
from tests.support.oracles import CallableKind, assert_g3, records

KIND = CallableKind("test_meter_holds_py")


def py_graph(tmp_path: Path, name: str, worker, *, ceiling: float,
             budget: float) -> spec_mod.Spec:
    return KIND.one_node_spec(tmp_path, name, worker, budget=budget, spend_ceiling=ceiling)


def test_parallel_holds_never_pass_the_ceiling_or_the_budget(tmp_path: Path) -> None:
    got: dict[str, list] = {"held": [], "refused": [], "errors": []}

    def worker(ctx):
        rng = random.Random(7)
        plan = [(f"c{i}", rng.choice((0.5, 1.0, 1.5, 2.5))) for i in range(48)]
        barrier = threading.Barrier(len(plan))

        def call(key: str, amount: float) -> None:
            barrier.wait()  # every thread asks at the same moment
            try:
                if ctx.meter.hold(key, amount, "llm", call=key):
                    got["held"].append(amount)
                    ctx.meter.release(key, amount / 2, "llm", call=key)
                else:
                    got["refused"].append(amount)
            except Exception as exc:  # a race shows up as the model refusing a commit
                got["errors"].append(repr(exc))

        threads = [threading.Thread(target=call, args=p) for p in plan]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return len(got["held"])

    spec = py_graph(tmp_path, "holds", worker, ceiling=10.0, budget=10.0)
    runner = Runner.start(spec, tmp_path / "l.jsonl")
    runner.run()
    runner.close()
    recs = records(tmp_path / "l.jsonl")
    assert not got["errors"], got["errors"][:3]
    assert got["held"] and got["refused"], got  # some fit, some were refused
    assert_g3(recs)
    # the refusals committed nothing: one reserve and one settle per held call
    llm = [r for r in recs if r.get("what") == "llm"]
    assert sum(r["type"] == "reserve" for r in llm) == len(got["held"])
    assert sum(r["type"] == "settle" for r in llm) == len(got["held"])
    # every settle released exactly its own reservation, and replay agrees
    held = {r["call"]: r["amount"] for r in llm if r["type"] == "reserve"}
    assert all(r["of"] == held[r["call"]] for r in llm if r["type"] == "settle")
    charged = sum(r["amount"] for r in llm if r["type"] == "settle")
    assert abs(charged - sum(got["held"]) / 2) < 1e-6
    assert replay(recs).state.reserved == 0.0


def test_a_hold_left_open_is_charged_in_full_at_worker_end(tmp_path: Path) -> None:
    def worker(ctx):
        assert ctx.meter.hold("a", 1.0, "llm", call="a")
        assert ctx.meter.hold("b", 2.0, "llm", call="b")
        ctx.meter.release("a", 0.25, "llm", call="a")
        return "left b open"

    spec = py_graph(tmp_path, "open", worker, ceiling=5.0, budget=5.0)
    runner = Runner.start(spec, tmp_path / "l.jsonl")
    assert runner.run() == 0
    recs = records(tmp_path / "l.jsonl")
    end = [r for r in recs if r["type"] == "settle" and r["what"] == "unsettled at worker end"]
    assert [(r["amount"], r["of"]) for r in end] == [(2.0, 2.0)]
    assert_g3(recs)


def test_a_plain_reserve_is_refused_while_holds_are_open(tmp_path: Path) -> None:
    seen: list[str] = []

    def worker(ctx):
        assert ctx.meter.hold("a", 1.0, "llm", call="a")
        try:
            ctx.meter.reserve(1.0)
        except RuntimeError as exc:
            seen.append(str(exc))
        ctx.meter.release("a", 1.0, "llm", call="a")

    spec = py_graph(tmp_path, "mixed", worker, ceiling=5.0, budget=5.0)
    Runner.start(spec, tmp_path / "l.jsonl").run()
    assert seen and "outstanding" in seen[0]
