"""The engine equals the model with several attempts in flight (`max_parallel` 2 or 3).

A Hypothesis state machine draws a small graph and drives the real engine (real ledger file, real
snapshots, attempts on threads) with adversarial Python workers and gates: overspend, random
verdicts, gate errors, a worker that throws the kill switch while others are in flight, and a
crash that takes every attempt in flight down with it (as a SIGKILL does: their records end
where they are). Which records interleave how is up to thread timing, so instead of predicting
each step it checks, after every rule, on the real ledger file:

- the independent fold of the ledger's records through `model.step` (the test's own reading of
  each record, every spend event naming its node) equals replay and the engine's state;
- at most `max_parallel` attempts are open at every prefix, and no node has two at once;
- G1: attempts_total <= W; G2: every DONE node has a PASS for its current activation;
- G3 at every prefix: settled + every open reservation <= B, each attempt within its c_v;
- after a crash, resume gives back exactly the attempts that were open (one `abandon` each,
  charged its own reservation): none lost, none counted twice (attempts = begins - abandons).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from loopproof.engine.record.replay import replay
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import Runner, default_stop_file
from loopproof.model import (
    Abandon,
    Begin,
    Cancel,
    Claim,
    Fail,
    Finish,
    Overrun,
    Refuse,
    Repair,
    Reserve,
    Settle,
    Status,
    Verdict,
    attempt_bound,
    initial_state,
    step,
)
from loopproof.model.graph import LoopGraph
from tests.support.oracles import CallableKind, assert_g3, records, spend_at_every_prefix
from tests.support.specs import model_tables, write_spec
from tests.support.strategies import graphs

KIND = CallableKind("test_parallel_stateful_py")


class SimulatedCrash(BaseException):
    """The engine's death: not an Exception, so no adapter catches it."""


def to_event(r: dict):
    """The model event a ledger record stands for (this test's own reading)."""
    t, n = r["type"], r.get("node")
    table = {
        "begin": lambda: Begin(n), "refuse": lambda: Refuse(n),
        "reserve": lambda: Reserve(r["amount"], node=n),
        "overrun": lambda: Overrun(r["amount"], node=n),
        "settle": lambda: Settle(r["amount"], r.get("of"), node=n),
        "claim": lambda: Claim(n), "verdict": lambda: Verdict(n, r["passed"]),
        "abandon": lambda: Abandon(n), "repair": lambda: Repair(n, r["target"]),
        "cancel": lambda: Cancel(n), "fail": lambda: Fail(n), "finish": lambda: Finish(),
    }
    return table[t]() if t in table else None


BEHAVIOURS = st.tuples(
    st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.5]), max_size=2).map(tuple),  # charges
    st.sampled_from(["accept", "accept", "accept", "reject", "error"]),         # gate
    st.sampled_from(["plain"] * 6 + ["crash", "stop"]))                          # event


class ParallelEngineMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="loopproof-pstateful-"))
        self.pid = f"p{id(self)}"
        self.plans: dict[str, list[tuple]] = {}
        self.crashed = threading.Event()
        self.lock = threading.Lock()
        KIND.add_per_node(self.pid, self.pair)
        self.runner: Runner | None = None
        self.runs = 0

    # ---- the adversary -----------------------------------------------------------------------
    def next_plan(self, node: str) -> tuple:
        with self.lock:
            queue = self.plans.setdefault(node, [])
            return queue.pop(0) if queue else ((), "accept", "plain")

    def pair(self, node: str):
        plan: dict[str, tuple] = {}

        def work(ctx):
            charges, gate, what = plan[node] = self.next_plan(node)
            time.sleep(0.002)  # long enough for the others in flight to interleave
            if self.crashed.is_set():
                raise SimulatedCrash
            for c in charges:
                ctx.meter.charge(c, "api")  # an overrun raises here, inside the attempt
            if what == "stop":
                default_stop_file(self.ledger).write_text("stop\n")
            if what == "crash":
                self.crashed.set()
                raise SimulatedCrash
            return "ok"

        def judge(snap):
            if self.crashed.is_set():  # the process died: no attempt in flight records more
                raise SimulatedCrash
            return plan.get(node, ((), "accept", "plain"))[1]

        return work, judge

    # ---- setup -------------------------------------------------------------------------------
    @initialize(g=graphs(nodes=(2, 4), max_needs=1, max_repairs=1, attempts=(1, 2),
                         repair_budget=(0, 1), budgets=(2.5, 6.0, 50.0)),
                jobs=st.integers(2, 3))
    def build(self, g: LoopGraph, jobs: int) -> None:
        fields, nodes = model_tables(g)
        for table in nodes.values():
            table.update(kind=KIND.name, fn=self.pid)
        write_spec(self.tmp, nodes, max_parallel=jobs, **fields)
        self.start_run()

    def start_run(self) -> None:
        if self.runner is not None:
            self.runner.close()
        self.runs += 1
        self.ledger = self.tmp / f"run{self.runs}.jsonl"
        self.runner = Runner.start(spec_mod.load(self.tmp / "graph.toml"), self.ledger)
        self.graph = self.runner.graph
        self.limit = self.graph.max_parallel

    def teardown(self) -> None:
        if self.runner is not None:
            self.runner.close()
        KIND.funcs.pop(self.pid, None)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- rules -------------------------------------------------------------------------------
    @rule(plans=st.lists(st.tuples(st.integers(0, 3), BEHAVIOURS), max_size=6))
    def engine_runs(self, plans: list) -> None:
        """Queue what the next attempts of some nodes do, then run the engine until it ends,
        stops or crashes; a crash or a stop is resumed; an ended run starts again afresh."""
        if self.runner.state.ended:
            self.start_run()
        for i, behaviour in plans:
            self.plans.setdefault(self.graph.names[i % len(self.graph.names)],
                                  []).append(behaviour)
        try:
            self.runner.run()
            how = "stopped" if self.runner.stopped else "ended"
        except SimulatedCrash:
            how = "crash"
        event(f"run: {how}")
        if how == "ended":
            return
        self.runner.close()
        self.runner = None
        self.check_ledger()  # the dead (or stopped) run's ledger, before resume touches it
        recs = records(self.ledger)
        open_before = open_attempts(recs)
        if how == "crash":
            event(f"crash with {len(open_before)} in flight")
        self.crashed.clear()
        default_stop_file(self.ledger).unlink(missing_ok=True)
        self.runner = Runner.resume(self.ledger)
        assert self.runner.recover() is None
        after = records(self.ledger)[len(recs):]
        abandons = [r for r in after if r["type"] == "abandon"]
        # each attempt left open is given back once, charged its own open reservation
        assert sorted(r["node"] for r in abandons) == sorted(open_before), (abandons, open_before)
        held = {n: res for n, res, _ in spend_at_every_prefix(recs)[-1].by_node}
        for r in abandons:
            assert abs(r["charged"] - held[r["node"]]) < 1e-9, (r, held)
        assert not self.runner.state.in_flight(self.graph)

    # ---- invariants, on the real ledger file -------------------------------------------------
    @invariant()
    def ledger_holds(self) -> None:
        if self.runner is not None:
            self.check_ledger()

    def check_ledger(self) -> None:
        recs = records(self.ledger)
        model = initial_state(self.graph)
        flying: set[str] = set()
        for r in recs[1:]:
            e = to_event(r)
            if e is not None:
                model = step(self.graph, model, e)  # the independent model accepts it
            if r["type"] == "begin":
                assert r["node"] not in flying, r
                flying.add(r["node"])
                assert len(flying) <= self.limit, (r, flying)
            elif r["type"] in ("verdict", "overrun", "abandon"):
                flying.discard(r["node"])
        assert replay(recs).state == model
        if self.runner is not None:
            assert self.runner.state == model
        assert model.attempts_total <= attempt_bound(self.graph)  # G1
        begins = sum(r["type"] == "begin" for r in recs)
        abandons = sum(r["type"] == "abandon" for r in recs)
        assert model.attempts_total == begins - abandons  # none lost, none counted twice
        for name in self.graph.names:  # G2
            if model.status_of(self.graph, name) is Status.DONE:
                e = model.activation_of(self.graph, name)
                assert any(r["type"] == "verdict" and r["node"] == name and r["passed"]
                           and r["activation"] == e for r in recs), name
        spend = assert_g3(recs, self.graph.spend_budget)  # G3 at every prefix
        assert abs(spend.settled - model.settled) < 1e-6


def open_attempts(recs: list[dict]) -> list[str]:
    flying: set[str] = set()
    for r in recs:
        if r["type"] == "begin":
            flying.add(r["node"])
        elif r["type"] in ("verdict", "overrun", "abandon"):
            flying.discard(r["node"])
    return sorted(flying)


# settings() inherits the loaded profile (the ci profile's derandomize and deadline stay).
ParallelEngineMatchesModel.TestCase.settings = settings(max_examples=12, stateful_step_count=4)
TestParallelEngineMatchesModel = ParallelEngineMatchesModel.TestCase
