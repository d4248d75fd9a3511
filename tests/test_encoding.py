"""Differential test: the Z3 encodings accept exactly the model's transitions.

Hypothesis draws a graph, a reachable state (by running model.step from Init with drawn enabled
events) and an event. If the event is enabled, the pair (state, model successor) must satisfy
the encoded transition, and a successor with one field changed must not. If it is disabled, no
successor at all may satisfy it. Both encodings are held to this: the per-shape run encoding
(proofs/encoding.py, used by G1, G2-family and G3) and the unbounded one (proofs/unbounded.py,
used by G2) with its node sort made exactly the graph's nodes (same code, same quantifiers).

Spend amounts are drawn from binary fractions, so the model's float sums are exact and Z3's
rational arithmetic sees the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import replace

import z3
from hypothesis import event, given
from hypothesis import strategies as st

from model.graph import LoopGraph, NodeSpec
from model.state import Outcome, RunState, Status, initial_state
from model.transitions import (
    Abandon,
    Begin,
    Cancel,
    Claim,
    Event,
    Fail,
    Finish,
    Overrun,
    Refuse,
    Repair,
    Reserve,
    Settle,
    Verdict,
    enabled,
    step,
)
from proofs.encoding import Ev, Params, RunEncoding
from proofs.unbounded import UnboundedRuns

NAMES = ("a", "b", "c", "d")
AMOUNTS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
CEILINGS = (0.0, 0.5, 1.0, 2.0, 3.0)
BUDGETS = (math.inf, 0.0, 1.0, 2.5, 4.0, 8.0)


@st.composite
def graphs(draw) -> LoopGraph:
    n = draw(st.integers(1, 4))
    names = NAMES[:n]
    needs = {v: tuple(draw(st.lists(st.sampled_from(names[:i]), unique=True, max_size=2)))
             if i else () for i, v in enumerate(names)}
    plain = LoopGraph.build([NodeSpec(v, needs=needs[v]) for v in names])
    nodes = []
    for v in names:
        targets = [v, *sorted(plain.ancestors(v))]
        repairs = draw(st.lists(st.sampled_from(targets), unique=True, max_size=2))
        nodes.append(NodeSpec(v, attempts=draw(st.integers(1, 2)),
                              spend_ceiling=draw(st.sampled_from(CEILINGS)),
                              needs=needs[v], repairs=tuple(repairs)))
    return LoopGraph.build(nodes, repair_budget=draw(st.integers(0, 2)),
                           spend_budget=draw(st.sampled_from(BUDGETS)))


def control(graph: LoopGraph) -> list[Event]:
    evs: list[Event] = [Finish()]
    for v in graph.names:
        evs += [Begin(v), Refuse(v), Verdict(v, True), Verdict(v, False), Abandon(v), Claim(v),
                Cancel(v), Fail(v)]
    return evs + [Repair(d, u) for d, u in graph.repair_pairs]


def metered(s: RunState) -> list[Event]:
    """Reserve, Overrun and Settle with drawn amounts; Settle also releasing one reservation
    (`of`) of several outstanding, including exactly the outstanding total."""
    amounts = sorted(set(AMOUNTS) | {s.reserved})
    evs: list[Event] = [k(a) for k in (Reserve, Overrun, Settle) for a in amounts]
    return evs + [Settle(a, of) for of in amounts for a in amounts if a <= of]


def pick(draw, events: list[Event]) -> Event:
    """An event drawn kind first, so that rare kinds (Settle, Repair, Claim) are drawn often."""
    kinds = sorted({type(e).__name__ for e in events})
    kind = draw(st.sampled_from(kinds))
    return draw(st.sampled_from([e for e in events if type(e).__name__ == kind]))


@st.composite
def runs(draw) -> tuple[LoopGraph, RunState]:
    """A graph and a state reached from Init by drawn enabled events (control or metered).
    Events that end the run are left for the step under test, so few drawn states are final."""
    graph = draw(graphs())
    s = initial_state(graph)
    for _ in range(draw(st.integers(0, 16))):
        en = [e for e in control(graph) + metered(s)
              if enabled(graph, s, e) and not isinstance(e, Finish | Fail | Refuse)]
        if not en:
            break
        s = step(graph, s, pick(draw, en))
    return graph, s


def perturb(graph: LoopGraph, s: RunState, which: int) -> RunState:
    """`s` with exactly one field changed."""
    n = len(graph.names)
    i = which % n
    statuses = list(Status)
    fields = [
        lambda: replace(s, status=_put(s.status, i, statuses[(statuses.index(s.status[i]) + 1)
                                                              % len(statuses)])),
        lambda: replace(s, activation=_put(s.activation, i, s.activation[i] + 1)),
        lambda: replace(s, attempts=_put(s.attempts, i, s.attempts[i] + 1)),
        lambda: replace(s, passes=s.passes ^ {(graph.names[i], s.activation[i])}),
        lambda: replace(s, repairs_used=s.repairs_used + 1),
        lambda: replace(s, attempts_total=s.attempts_total + 1),
        lambda: replace(s, abandoned=s.abandoned + 1),
        lambda: replace(s, settled=s.settled + 0.25),
        lambda: replace(s, reserved=s.reserved + 0.25),
        lambda: replace(s, attempt_spend=s.attempt_spend + 0.25),
        lambda: replace(s, outcome=next(o for o in Outcome if o is not s.outcome)),
        lambda: replace(s, cancelled=s.cancelled ^ {(graph.names[i], s.activation[i])}),
    ]
    return fields[(which // n) % len(fields)]()


def _put(t: tuple, i: int, v: object) -> tuple:
    return t[:i] + (v,) + t[i + 1:]


# ---- the run encoding -----------------------------------------------------------------------------

def run_encoded(graph: LoopGraph, s: RunState, ev: Event, t: RunState | None) -> bool:
    """Does some successor (or `t`, when given) satisfy the encoded transition from `s`?"""
    enc = RunEncoding(graph, Params.of(graph))
    pre, post = enc.fresh("pre"), enc.fresh("post")
    cs = [enc.pin(pre, s), enc.transition(pre, post, Ev.of_event(ev))]
    if t is not None:
        cs.append(enc.pin(post, t))
    solver = z3.Solver()
    solver.add(*enc.axioms(), *cs)
    r = solver.check()
    assert r != z3.unknown
    return r == z3.sat


@given(runs(), st.integers(0, 200))
def test_run_encoding_agrees_with_the_model_on_every_event(run, which):
    """From the drawn state, every event instance: each enabled one accepts the model's
    successor, rejects it with one field changed, and accepts nothing else (the successor is
    unique); no disabled one accepts any successor."""
    graph, s = run
    enc = RunEncoding(graph, Params.of(graph))
    pre, post = enc.fresh("pre"), enc.fresh("post")
    solver = z3.Solver()
    solver.add(enc.pin(pre, s))
    events = control(graph) + metered(s)
    off = [ev for ev in events if not enabled(graph, s, ev)]
    assert _check(solver, z3.Or([enc.transition(pre, post, Ev.of_event(ev)) for ev in off])) == z3.unsat
    for ev in events:
        if ev in off:
            continue
        event(type(ev).__name__)
        t = step(graph, s, ev)
        move = enc.transition(pre, post, Ev.of_event(ev))
        assert _check(solver, move, enc.pin(post, t)) == z3.sat, f"{ev} from {s}"
        wrong = perturb(graph, t, which)
        assert _check(solver, move, enc.pin(post, wrong)) == z3.unsat, f"{ev}: took {wrong}"
        assert _check(solver, move, z3.Not(enc.pin(post, t))) == z3.unsat, f"{ev}: not unique"


def _check(solver: z3.Solver, *formulas: z3.BoolRef) -> z3.CheckSatResult:
    solver.push()
    solver.add(*formulas)
    r = solver.check()
    solver.pop()
    assert r != z3.unknown
    return r


def test_run_encoding_reads_back_what_it_pins():
    graph = LoopGraph.build([NodeSpec("a", attempts=2, spend_ceiling=1.0),
                             NodeSpec("b", needs=("a",), repairs=("a",))],
                            repair_budget=1, spend_budget=5.0)
    s = initial_state(graph)
    for e in (Begin("a"), Reserve(0.5), Settle(0.25), Verdict("a", True), Begin("b"),
              Verdict("b", False), Repair("b", "a")):
        s = step(graph, s, e)
    enc = RunEncoding(graph, Params.of(graph))
    x = enc.fresh("x")
    solver = z3.Solver()
    solver.add(enc.pin(x, s))
    assert solver.check() == z3.sat
    assert enc.read(solver.model(), x) == s


# ---- the unbounded encoding (G2) ------------------------------------------------------------------

def unbounded_encoded(graph: LoopGraph, s: RunState, ev: Event, t: RunState | None) -> bool:
    sys, k, pinned = UnboundedRuns.on_graph(graph)
    pre, post = sys.fresh("pre"), sys.fresh("post")
    cs = [*sys.axioms(), *pinned, sys.pin_state(k, graph, pre, s),
          sys.transition(pre, post, sys.event(k, graph, s, ev))]
    if t is not None:
        cs.append(sys.pin_state(k, graph, post, t))
    solver = z3.Solver()
    solver.set("timeout", 20_000)
    solver.add(*cs)
    r = solver.check()
    assert r != z3.unknown, solver.reason_unknown()
    return r == z3.sat


@given(runs(), st.data())
def test_unbounded_encoding_accepts_exactly_the_model_step(run, data):
    graph, s = run
    en = [e for e in control(graph) + metered(s) if enabled(graph, s, e)]
    if not en:
        return
    ev = pick(data.draw, en)
    event(type(ev).__name__)
    t = step(graph, s, ev)
    assert unbounded_encoded(graph, s, ev, t), f"{ev} from {s.summary(graph)}"
    wrong = perturb(graph, t, data.draw(st.integers(0, 200)))
    assert not unbounded_encoded(graph, s, ev, wrong), f"{ev}: accepted {wrong}"


@given(runs(), st.data())
def test_unbounded_encoding_rejects_disabled_events(run, data):
    graph, s = run
    off = [e for e in control(graph) + metered(s) if not enabled(graph, s, e)]
    ev = pick(data.draw, off)
    event(type(ev).__name__)
    assert not unbounded_encoded(graph, s, ev, None), f"{ev} is disabled"
