"""The engine equals the model (docs/design.md, chain of trust, step 3).

A Hypothesis state machine draws a small graph and drives the real engine (real ledger file, real
snapshots, a few real processes) with adversarial workers — overspend, sleep past the deadline,
write into the gate's files, crash with a reservation open, claim success — and adversarial gates
— random verdicts, errors, crashes, writes into their own snapshot. For every step it predicts,
from the model alone, which model events the engine must record, runs an independent
`model.step` on them, and checks after every step:

- the engine's state, and replay of the ledger file, equal the independent model state;
- G1: attempts_total <= the closed-form attempt bound W;
- G2: every DONE node has a PASS verdict for its current activation in the real ledger file;
- G3: settled + reserved <= B at every prefix of the real ledger file;
- an activation the operator cancelled (`loopproof cancel`, honoured on resume) has no PASS in
  the real ledger file and its node is not DONE in it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from loopproof.engine import cli
from loopproof.engine.record.ledger import Ledger
from loopproof.engine.record.replay import replay
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import (
    EXIT_PIN_CHANGED,
    EXIT_STOPPED,
    PinChanged,
    Runner,
    default_stop_file,
)
from loopproof.model import (
    Abandon,
    Begin,
    Cancel,
    Claim,
    Fail,
    Finish,
    LoopGraph,
    Overrun,
    Refuse,
    Repair,
    Reserve,
    Settle,
    Status,
    Verdict,
    attempt_bound,
    enabled,
    initial_state,
    step,
)
from tests.support.oracles import CallableKind, assert_g3, records
from tests.support.specs import command_node, model_tables, write_spec
from tests.support.strategies import graphs

KIND = CallableKind("test_stateful_py")
EPS = 1e-9
CMD_TIMEOUT = 1.0
MAX_SLEEPS = 2  # real processes that sleep past their deadline, per test case
GATE_PRICE = 60.0  # a gate run is metered too: gate_timeout_s (default 60) x price (default 1)


@dataclass(frozen=True)
class Measured:
    """A Settle whose amount is a measurement (a gate's wall clock): any amount in
    [0, reserved] matches."""

    reserved: float


def gate_part(g: LoopGraph, s, node: str) -> list:
    """The gate run's reservation after the worker's settlement: min(its price, what is left of
    c_v and B); nothing left is an Overrun of its full price (the attempt ends, no verdict)."""
    left = min(g.node(node).spend_ceiling - s.attempt_spend,
               g.spend_budget - s.settled - s.reserved)
    hold = min(GATE_PRICE, max(0.0, left))
    return [Reserve(hold)] if hold > EPS else [Overrun(GATE_PRICE)]


class SimulatedCrash(BaseException):
    """Leaves the engine mid-step with no cleanup, like SIGKILL (not an Exception: no adapter
    may catch it)."""


@dataclass
class Plan:
    """What the adversary does in the next attempt (any Python node)."""

    worker: str = "honest"
    charges: tuple[float, ...] = ()
    gate: str = "accept"
    pinned: dict[str, Path] = field(default_factory=dict)

    def work(self, name: str, ctx) -> object:
        (ctx.workspace / "out.txt").write_text(f"{ctx.activation}.{ctx.attempt}")
        if self.worker == "claim":
            (ctx.workspace / "STATUS").write_text("PASS: all tests pass")
        for c in self.charges:
            ctx.meter.charge(c, "api")  # an overrun raises here, inside the attempt
        if self.worker == "crash_open":
            ctx.meter.reserve(min(0.5, ctx.meter.allowance()), "api")
            raise SimulatedCrash
        if self.worker == "crash_after":
            raise SimulatedCrash
        if self.worker == "tamper_gate_file":
            p = self.pinned[name]
            p.write_text(p.read_text() + "weakened\n")
        return {"status": "DONE, all tests pass"} if self.worker == "claim" else "ok"

    def judge(self, name: str, snap: Path) -> object:
        if self.gate == "raise":
            raise RuntimeError("gate bug")
        if self.gate == "crash":
            raise SimulatedCrash
        if self.gate == "tamper_snapshot":
            snap.chmod(0o755)
            (snap / "verdict.txt").write_text("accept")
            return "accept"
        return self.gate


def _pair(plan: Plan, name: str):
    return lambda ctx: plan.work(name, ctx), lambda snap: plan.judge(name, snap)

# A real command node: its control file decides whether it sleeps past its deadline.
CMD_WORKER = 'rm -f out.txt; if [ -f "$0/sleep" ]; then sleep 30; fi; echo ok > out.txt'


def to_event(r: dict):
    """The model event a ledger record stands for (the test's own reading of the records)."""
    t = r["type"]
    table = {
        "begin": lambda: Begin(r["node"]), "refuse": lambda: Refuse(r["node"]),
        "reserve": lambda: Reserve(r["amount"]), "overrun": lambda: Overrun(r["amount"]),
        "settle": lambda: Settle(r["amount"]), "claim": lambda: Claim(r["node"]),
        "verdict": lambda: Verdict(r["node"], r["passed"]),
        "abandon": lambda: Abandon(r["node"]), "repair": lambda: Repair(r["node"], r["target"]),
        "cancel": lambda: Cancel(r["node"]),
        "fail": lambda: Fail(r["node"]), "finish": lambda: Finish(),
    }
    return table[t]() if t in table else None


def same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    for k, v in vars(a).items():
        w = vars(b)[k]
        if isinstance(v, float) and abs(v - w) > EPS or not isinstance(v, float) and v != w:
            return False
    return True


class EngineMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="loopproof-stateful-"))
        self.plan = Plan()
        self.pid = str(id(self))
        KIND.add_per_node(self.pid, partial(_pair, self.plan))
        self.runner: Runner | None = None
        self.pending: str | None = None  # "crash" | "pin" | "stop": the next step is a resume
        self.seen = 0  # ledger records already checked
        self.sleeps = 0

    # ---- setup -------------------------------------------------------------------------------
    @initialize(g=graphs(nodes=(1, 3), budgets=(2.0, 6.0, 50.0)), cmd=st.booleans())
    def build(self, g: LoopGraph, cmd: bool) -> None:
        fields, nodes = model_tables(g)
        for i, (name, table) in enumerate(nodes.items()):
            pin = self.tmp / f"gate_{name}.txt"
            pin.write_text("the gate's rules\n")
            self.plan.pinned[name] = pin
            table["gate_files"] = [pin.name]
            if i == 0 and cmd:
                (self.tmp / "ctrl").mkdir()
                table.update(command_node(["sh", "-c", CMD_WORKER, "ctrl"],
                                          ["sh", "-c", "test -f out.txt"], timeout_s=CMD_TIMEOUT))
            else:
                table.update(kind=KIND.name, fn=self.pid)
        write_spec(self.tmp, nodes, **fields)
        self.cmd_node = "n0" if cmd else None
        self.runs = 0
        self.start_run()

    def start_run(self) -> None:
        if self.runner is not None:
            self.runner.close()
        spec = spec_mod.load(self.tmp / "graph.toml")
        self.graph: LoopGraph = spec.graph
        self.model = initial_state(self.graph)
        self.runs += 1
        self.ledger = self.tmp / f"run{self.runs}.jsonl"
        self.seen = 0
        self.runner = Runner.start(spec, self.ledger)
        assert [r["type"] for r in self.new_records()] == ["run"]

    def teardown(self) -> None:
        if self.runner is not None:
            self.runner.close()
        KIND.funcs.pop(self.pid, None)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- prediction from the model alone ----------------------------------------------------
    def predict(self, sleep: bool) -> tuple[list, str]:
        """The model events the next engine step must record, and how the step ends."""
        g, s, plan = self.graph, self.model, self.plan
        if s.ended:
            return [], "ok"
        if (x := s.exhausted(g)) is not None:
            targets = [u for d, u in g.repair_pairs if d == x]
            if targets and enabled(g, s, Repair(x, targets[0])):
                return [Repair(x, targets[0])], "ok"
            return [Fail(x)], "ok"
        if enabled(g, s, Finish()):
            return [Finish()], "ok"
        node = next(n for n in g.names
                    if enabled(g, s, Begin(n)) or enabled(g, s, Refuse(n)))
        if enabled(g, s, Refuse(node)):
            return [Refuse(node)], "ok"
        events = [Begin(node)]
        s = step(g, s, events[0])
        if node == self.cmd_node:
            left = min(g.node(node).spend_ceiling - s.attempt_spend,
                       g.spend_budget - s.settled - s.reserved)
            return events + [Reserve(min(CMD_TIMEOUT, max(0.0, left)))], "cmd-sleep" if sleep \
                else "cmd"
        for c in plan.charges:
            if enabled(g, s, Reserve(c)):
                events += [Reserve(c), Settle(c)]
                s = step(g, step(g, s, Reserve(c)), Settle(c))
            else:
                return events + [Overrun(c)], "ok"
        if plan.worker == "crash_open":
            left = max(0.0, min(g.node(node).spend_ceiling - s.attempt_spend,
                                g.spend_budget - s.settled - s.reserved))
            return events + [Reserve(min(0.5, left))], "crash"
        if plan.worker == "crash_after":
            return events, "crash"
        events.append(Claim(node))
        if plan.worker == "tamper_gate_file":
            return events + [Verdict(node, False)], "pin"
        gate = gate_part(g, step(g, s, Claim(node)), node)
        if isinstance(gate[0], Overrun):
            return events + gate, "ok"
        if plan.gate == "crash":
            return events + gate, "crash"
        return events + gate + [Measured(gate[0].amount), Verdict(node, plan.gate == "accept")], \
            "ok"

    def new_records(self) -> list[dict]:
        recs = records(self.ledger)
        new, self.seen = recs[self.seen:], len(recs)
        return new

    def apply(self, expected: list, records: list[dict], how: str = "ok") -> None:
        """Check the recorded events against the prediction and step the independent model."""
        got = [(to_event(r), r) for r in records if to_event(r) is not None]
        if how.startswith("cmd"):
            # A real process: its wall-clock charge and its verdict are measured, then checked
            # for consistency: a worker killed at its deadline never leaves out.txt behind.
            assert all(same(e, g) for e, (g, _) in zip(expected, got[:2], strict=False))
            (settle, srec), (claim, _) = got[2], got[3]
            assert isinstance(settle, Settle) and settle.amount <= expected[1].amount + EPS
            if how == "cmd-sleep":
                assert srec["killed"] in ("timeout", "ceiling")
            assert isinstance(claim, Claim)
            s = self.model
            for e in expected + [settle, claim]:
                s = step(self.graph, s, e)
            gate = gate_part(self.graph, s, claim.node)
            expected = expected + [settle, claim] + gate
            if isinstance(gate[0], Reserve):  # the gate ran: its charge and verdict measured
                assert len(got) == 7, [r["type"] for r in records]
                verdict = got[6][0]
                assert isinstance(verdict, Verdict)
                if srec["killed"] is not None:
                    assert not verdict.passed
                elif gate[0].amount >= 0.5:  # the gate's limit: its reservation / price
                    assert verdict.passed
                expected = expected + [Measured(gate[0].amount), verdict]
        assert len(got) == len(expected), (expected, [r["type"] for r in records])
        for e, (ev, rec) in zip(expected, got, strict=True):
            if isinstance(e, Measured):
                assert isinstance(ev, Settle) and ev.amount <= e.reserved + EPS, (e, rec)
                assert rec["what"] == "evaluation", rec
                e = ev
            assert same(e, ev), (e, rec)
            self.model = step(self.graph, self.model, e)

    # ---- rules (no preconditions: every rule is always enabled, so no draw is wasted) -----
    @rule(worker=st.sampled_from(["honest", "honest", "claim", "tamper_gate_file",
                                  "crash_open", "crash_after"]),
          charges=st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), max_size=3).map(tuple),
          gate=st.sampled_from(["accept"] * 4 + ["reject", "error", "raise",
                                                 "tamper_snapshot", "crash"]),
          sleep=st.booleans(), restore_first=st.booleans())
    def engine_step(self, worker: str, charges: tuple, gate: str, sleep: bool,
                    restore_first: bool) -> None:
        """One scheduling decision of the engine; after a crash or a changed gate file, the
        invariants are checked on the dead run, then it is resumed."""
        if self.model.ended:
            self.resume_a_finished_run()
            self.start_run()  # the same graph again, on a fresh ledger
            return
        self.plan.worker, self.plan.charges, self.plan.gate = worker, charges, gate
        sleep = sleep and self.sleeps < MAX_SLEEPS
        expected, how = self.predict(sleep)
        if how == "cmd-sleep":
            self.sleeps += 1
            (self.tmp / "ctrl" / "sleep").write_text("")
        elif how == "cmd":
            (self.tmp / "ctrl" / "sleep").unlink(missing_ok=True)
        outcome = "ok"
        try:
            self.runner.step()
        except SimulatedCrash:
            outcome = "crash"
        except PinChanged:
            outcome = "pin"
        assert outcome == ("ok" if how.startswith("cmd") else how)
        event(f"step: {how}" if how != "ok" else f"step: {type(expected[-1]).__name__}"
              if expected else "step: nothing")
        records = self.new_records()
        self.apply(expected, records, how)
        if outcome == "pin":
            assert [r["type"] for r in records][-2:] == ["pin_changed", "verdict"]
        if gate == "tamper_snapshot" and outcome == "ok" and not how.startswith("cmd"):
            verdicts = [r for r in records if r["type"] == "verdict"]
            assert all(v["verdict"] == "error" for v in verdicts)
        if outcome == "ok":
            return
        self.runner.close()
        self.pending = outcome
        self.check_all()  # on the dead run's ledger, before anything else touches it
        if outcome == "pin" and not restore_first:
            runner = Runner.resume(self.ledger)
            assert runner.recover() == EXIT_PIN_CHANGED  # still changed: recorded, exit 5
            runner.close()
            assert [r["type"] for r in self.new_records()] == ["pin_changed"]
            self.check_all()
        self.resume()

    @rule()
    def throw_kill_switch(self) -> None:
        """The stop file at a safe point: a `stopped` record, nothing else; resume refuses while
        the file is there (a finished run is reported unchanged); then resume continues."""
        stop = default_stop_file(self.ledger)
        stop.write_text("stop\n")
        ended = self.model.ended
        if not ended:
            assert self.runner.step() is False
            assert [r["type"] for r in self.new_records()] == ["stopped"]
        self.runner.close()
        before = self.ledger.read_bytes()
        blocked = Runner.resume(self.ledger)
        code = blocked.recover()
        blocked.close()
        assert code == (self.end_code() if ended else EXIT_STOPPED)
        assert self.ledger.read_bytes() == before
        stop.unlink()
        self.pending = "stop"
        self.check_all()
        self.resume()

    @rule(pick=st.integers(0, 2))
    def operator_cancels(self, pick: int) -> None:
        """At a safe point: the kill switch, then `loopproof cancel LEDGER NODE`. The model
        decides: a cancel it allows is recorded and honoured on resume (as `Cancel`), one it
        refuses is exit 2 with the ledger unchanged; then the run is resumed."""
        node = self.graph.names[pick % len(self.graph.names)]
        if not self.model.ended:
            stop = default_stop_file(self.ledger)
            stop.write_text("stop\n")
            assert self.runner.step() is False
            assert [r["type"] for r in self.new_records()] == ["stopped"]
            stop.unlink()
        self.runner.close()
        before = self.ledger.read_bytes()
        allowed = enabled(self.graph, self.model, Cancel(node))
        event(f"cancel: {'allowed' if allowed else 'refused'}")
        assert cli.main(["cancel", str(self.ledger), node]) == (0 if allowed else 2)
        if allowed:
            assert [r["type"] for r in self.new_records()] == ["cancel_requested"]
        else:
            assert self.ledger.read_bytes() == before
        self.pending = "stop"
        self.check_all()
        self.resume(cancel=node if allowed else None)

    def end_code(self) -> int:
        return {"DONE": 0, "FAILED": 3, "BUDGET_EXHAUSTED": 4}[self.model.outcome.value]

    def resume(self, cancel: str | None = None) -> None:
        if self.pending == "pin":
            for p in self.plan.pinned.values():
                p.write_text("the gate's rules\n")
        running = self.model.running(self.graph)
        self.runner = Runner.resume(self.ledger)
        assert self.runner.state == self.model
        if self.model.ended:
            assert self.runner.recover() == self.end_code()
            self.pending = None
            return
        assert self.runner.recover() is None
        records = self.new_records()
        assert records[0]["type"] == "resumed"
        expected = [Abandon(running)] if running is not None else []
        expected += [Cancel(cancel)] if cancel is not None else []
        if running is not None:
            assert records[1]["outcome"] == "unknown"
            assert records[1]["charged"] == self.model.reserved
        self.apply(expected, records)
        self.pending = None

    def resume_a_finished_run(self) -> None:
        self.runner.close()
        before = self.ledger.read_bytes()
        self.runner = Runner.resume(self.ledger)
        assert self.runner.recover() == self.end_code()
        assert self.ledger.read_bytes() == before

    def check_all(self) -> None:
        self.engine_state_equals_model()
        self.g1_attempts_within_bound()
        self.g2_done_only_with_pass_for_current_activation()
        self.g3_no_overspend_at_any_prefix()
        self.cancelled_activation_never_passes()

    # ---- invariants, on the real ledger file -------------------------------------------------
    @invariant()
    def engine_state_equals_model(self) -> None:
        if self.runner is None:
            return
        if self.pending is None:
            assert self.runner.state == self.model
        with Ledger.open(self.ledger) as led:
            assert replay(led).state == self.model

    @invariant()
    def g1_attempts_within_bound(self) -> None:
        if self.runner is not None:
            assert self.model.attempts_total <= attempt_bound(self.graph)

    @invariant()
    def g2_done_only_with_pass_for_current_activation(self) -> None:
        if self.runner is None:
            return
        recs = records(self.ledger)
        for name in self.graph.names:
            if self.model.status_of(self.graph, name) is Status.DONE:
                e = self.model.activation_of(self.graph, name)
                assert any(r["type"] == "verdict" and r["node"] == name and r["passed"]
                           and r["verdict"] == "accept" and r["activation"] == e for r in recs)

    @invariant()
    def cancelled_activation_never_passes(self) -> None:
        if self.runner is None:
            return
        recs = records(self.ledger)
        cancelled = {(r["node"], r["activation"]) for r in recs if r["type"] == "cancel"}
        assert cancelled == set(self.model.cancelled)
        assert not [r for r in recs if r["type"] == "verdict" and r["passed"]
                    and (r["node"], r["activation"]) in cancelled]
        for name, e in cancelled:
            if self.model.activation_of(self.graph, name) == e:
                assert self.model.status_of(self.graph, name) is Status.EXHAUSTED

    @invariant()
    def g3_no_overspend_at_any_prefix(self) -> None:
        if self.runner is None:
            return
        spend = assert_g3(self.ledger, self.graph.spend_budget)
        assert abs(spend.settled - self.model.settled) < 1e-6


# settings() inherits the loaded profile (the ci profile's derandomize and deadline stay).
EngineMatchesModel.TestCase.settings = settings(max_examples=20, stateful_step_count=25)
TestEngineMatchesModel = EngineMatchesModel.TestCase
