"""The concurrent encoding (proofs/concurrent.py) is the model with several attempts in flight, and
its proofs can fail.

1. Differential: on walks of `model.step` with max_parallel 2 (spend included), at every state
   and for every candidate event, the encoding's guard holds exactly when the model's does, and
   its successor is the model's.
2. Each broken variant's run from Init is the broken rule's doing: the real model refuses one of
   its steps.
3. Each rule the invariants lean on, dropped from the real rules, makes its proof fail.
"""

from __future__ import annotations

import random

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RunRules, no_room, not_pending, unfit
from loopproof.model.state import RunState, initial_state
from loopproof.model.transitions import (
    Abandon,
    Begin,
    Event,
    Overrun,
    Reserve,
    Settle,
    control_events,
    step,
)
from loopproof.proofs import concurrent as par
from loopproof.proofs.encoding import Ev, Params, real
from loopproof.proofs.obligations import OBLIGATIONS
from loopproof.proofs.replay import real_run
from loopproof.proofs.trace import Trace
from tests.support.discharged import counterexample

BY_ID = {ob.id: ob for ob in OBLIGATIONS}

GRAPHS = (
    par.FORK,
    LoopGraph.build([NodeSpec("a", attempts=2, spend_ceiling=1.0),
                     NodeSpec("b", spend_ceiling=1.5, repairs=("b",)),
                     NodeSpec("c", spend_ceiling=0.5, needs=("a",), repairs=("a",))],
                    repair_budget=2, spend_budget=2.5, max_parallel=2),
)


def pinned(enc: par.ConcurrentEncoding, x, r: RunState) -> z3.BoolRef:
    g = enc.graph
    return z3.And(enc.pin(x, r), *[z3.And(par.reserved_of(x, v) == real(r.reserved_of(g, v)),
                                          par.spent_of(x, v) == real(r.spent_of(g, v)))
                                   for v in g.names])


def candidates(graph: LoopGraph, s: RunState) -> list[Event]:
    out: list[Event] = list(control_events(graph, s))
    for v in graph.names:
        mine = s.reserved_of(graph, v)
        out += [Begin(v), Abandon(v), Reserve(0.5, node=v), Overrun(2.0, node=v),
                Settle(mine / 2, node=v), Settle(0.0, mine / 2, node=v)]
    return out


def walk(graph: LoopGraph, rng: random.Random, length: int) -> list[RunState]:
    s, states = initial_state(graph), [initial_state(graph)]
    for _ in range(length):
        enabled = [e for e in candidates(graph, s) if e.why_not(graph, s) is None]
        if not enabled:
            break
        # prefer a second Begin, so that walks spend time with two attempts in flight
        begins = [e for e in enabled if isinstance(e, Begin)]
        s = step(graph, s, rng.choice(begins if begins and rng.random() < 0.8 else enabled))
        states.append(s)
    return states


def test_the_concurrent_encoding_is_the_model_on_walks() -> None:
    rng = random.Random(26)
    checked = two_in_flight = 0
    for graph in GRAPHS:
        enc = par.encoding(graph, params=Params.of(graph))
        enc.max_parallel = z3.IntVal(graph.max_parallel)
        x, y = enc.fresh("pre"), enc.fresh("post")
        solver = z3.Solver()
        solver.add(*enc.axioms())
        # a transition's term depends on the event alone (by repr: a spend event's node is
        # left out of its equality, model/transitions.py, but not out of its encoding)
        moves: dict[str, z3.BoolRef] = {}
        for _ in range(3):
            for s in walk(graph, rng, 10):
                two_in_flight += s.in_flight_count() >= 2
                solver.push()
                solver.add(pinned(enc, x, s))  # the state, for every candidate from it
                for e in candidates(graph, s):
                    ev = Ev.of_event(e)
                    if ev.kind in ("Reserve", "Overrun", "Settle") and ev.node is None:
                        continue
                    if repr(e) not in moves:
                        moves[repr(e)] = enc.transition(x, y, ev)
                    solver.push()
                    solver.add(moves[repr(e)])
                    model_ok = e.why_not(graph, s) is None
                    if model_ok:
                        solver.add(z3.Not(pinned(enc, y, step(graph, s, e))))
                        assert solver.check() == z3.unsat, (e, s.summary(graph))
                    else:
                        assert solver.check() == z3.unsat, ("encoding allows", e,
                                                            e.why_not(graph, s))
                    solver.pop()
                    checked += 1
                solver.pop()
    assert checked > 300 and two_in_flight > 8


def refused_step(trace: Trace) -> str:
    run = real_run(trace)
    assert run.refused is not None, run.describe()
    return run.refused[2]


def test_check_then_reserve_overspends_and_the_real_model_refuses_the_second_begin(
        tmp_path_factory) -> None:
    assert BY_ID["G3-concurrent-broken-check-then-reserve"].check is par.run_check_then_reserve
    trace = counterexample(tmp_path_factory, "G3-concurrent-broken-check-then-reserve")  # its run, discharged once a session
    assert isinstance(trace, Trace) and "Reserve(b: 2)" in trace.render()
    assert "ceilings held by the attempts in flight (a)" in refused_step(trace)


def test_check_then_reserve_starves_and_the_real_model_refuses_the_second_begin(
        tmp_path_factory) -> None:
    assert BY_ID["G3-concurrent-broken-check-then-reserve-starves"].check is par.run_check_then_reserve_starves
    trace = counterexample(tmp_path_factory, "G3-concurrent-broken-check-then-reserve-starves")  # its run, discharged once a session
    assert isinstance(trace, Trace)
    assert "ceilings held by the attempts in flight (a)" in refused_step(trace)


def test_a_repair_of_an_attempt_in_flight_loses_its_reservation_and_the_model_waits(
        tmp_path_factory) -> None:
    assert BY_ID["G3-concurrent-broken-repair-in-flight"].check is par.run_repair_drops_flight
    trace = counterexample(tmp_path_factory, "G3-concurrent-broken-repair-in-flight")  # its run, discharged once a session
    assert isinstance(trace, Trace) and "Repair(y -> r)" in trace.render()
    assert "repair (y, r) would reset 'x', whose attempt is in flight" in refused_step(trace)


# ---- each rule the proofs lean on, dropped, fails its proof --------------------------------------

class NoRepairWait(RunRules):
    """A repair that does not wait for the attempts in flight in S_u."""

    guard_repair = par.RepairDropsFlight.guard_repair


class NoRoomCheck(RunRules):
    """Begin without the room check (and without nothing-EXHAUSTED)."""

    def guard_begin(self, s, ev, g):
        v = ev.node
        self.live(s, g)
        g.need(s.status(v) == s.PENDING, not_pending, v)
        g.need_spend(self.fits(s, v), no_room)
        g.need_all(s.predecessors(v), lambda p: s.status(p) == s.DONE, not_pending)


class HeldIgnoresFlight(RunRules):
    def guard_begin(self, s, ev, g):
        self.ready(s, g, ev.node)
        g.need_spend(s.within_budget(s.settled + s.ceiling(ev.node)), unfit)


class VerdictOfAnyNode(RunRules):
    """A verdict for a node with no attempt in flight (the node need only be live)."""

    def guard_verdict(self, s, ev, g):
        self.live(s, g)


def test_dropping_a_rule_fails_the_proof_that_needs_it() -> None:
    fork = par.FORK
    enc = par.encoding(fork, NoRepairWait())
    assert par.check_inductive(enc, lambda s: par.spend_invariant(enc, s)) is not None
    enc = par.encoding(fork, RunRules())
    assert par.check_inductive(enc, lambda s: par.spend_invariant(enc, s)) is None
    enc = par.encoding(fork, NoRoomCheck())
    assert par.check_inductive(enc, lambda s: par.attempt_invariant(enc, s)) is not None
    enc = par.encoding(par.PAIR, HeldIgnoresFlight(), exact=True)
    assert par.check_inductive(enc, lambda s: par.held_invariant(enc, s)) is not None
    enc = par.encoding(fork, VerdictOfAnyNode())
    assert par.check_inductive(enc, lambda s: par.attempt_invariant(enc, s)) is not None


class NoOpsBound(par.BoundedConcurrent):
    """Without the per-attempt bound on operations: Claim changes nothing, forever."""

    COUNTED = ()


def test_the_concurrent_ranking_needs_its_per_attempt_operations_bound() -> None:
    one = LoopGraph.build([NodeSpec("a")], max_parallel=2)
    assert par.check_ranking_of(one) is None
    found = par.check_ranking_of(one, NoOpsBound())
    assert isinstance(found, Trace) and "does not decrease the ranking" in found.render()

