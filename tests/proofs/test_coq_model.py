"""The Coq development is about this model: the step functions and W extracted from
proofs/coq/ (to OCaml, driven by proofs/coq/driver.ml) and model.step / model.bounds decide every
event the same way, reach the same state after it and compute the same W. The serial `step`
(Loopproof.v) on Hypothesis graphs of up to 8 nodes with drawn event sequences (every event kind,
spend events included), on the explorer's worst-case schedules and on W's maximising schedule;
the concurrent `cstep` (Concurrent.v) with max_parallel 2-4 (and 1) on Hypothesis graphs of up to
8 nodes with spend events naming their attempts, on the explorer's worst-case schedules with
several attempts in flight and on every interleaving of the control events of small graphs. A
fault planted on either side is caught."""

from __future__ import annotations

import functools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.model import run_rules as rr
from loopproof.model import transitions
from loopproof.model.explore import allowed_pairs, build_graph, dags, true_worst_case
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RunRules
from loopproof.model.state import RunState, initial_state
from loopproof.proofs import coq
from tests.support import coq_cases
from tests.support.coq_cases import (
    Case,
    cases_text,
    first_difference,
    python_run,
    random_case,
    random_concurrent_case,
)
from tests.support.example_counts import examples
from tests.support.strategies import any_graphs
from tests.support.worst_runs import maximising_run


def differences(cases: list[Case], variant: str = "real", concurrent: bool = False
                ) -> list[str]:
    """One driver run for all `cases` (through the concurrent step if `concurrent`); the first
    difference of each case that has one."""
    out = coq.drive(cases_text(cases, variant, concurrent))
    assert len(out) == len(cases)
    found = []
    for (graph, events), result in zip(cases, out, strict=True):
        ran = python_run(graph, events, concurrent)
        if (diff := first_difference(graph, events, ran, result)):
            found.append(f"{[n.name for n in graph.nodes]} max_parallel "
                         f"{graph.max_parallel}: {diff}")
    return found


@settings(max_examples=examples(10, fuzz=25))  # was 25 in make check too
@given(st.randoms(use_true_random=False))
def test_every_event_is_decided_alike_and_reaches_the_same_state(rng: random.Random) -> None:
    cases = [random_case(rng) for _ in range(4)]
    assert differences(cases) == []


@settings(max_examples=examples(10, fuzz=25))  # was 25 in make check too
@given(any_graphs(nodes=(1, 8)))
def test_w_and_its_maximising_schedule_agree(graph) -> None:
    events, end = maximising_run(graph)
    assert differences([(graph, events)]) == []


def explorer_cases() -> list[Case]:
    """Every DAG of up to 3 nodes with its full repair relation, a_v = 2 and K = 2, and the
    explorer's worst-case schedule on each."""
    out = []
    for n in (1, 2, 3):
        for edges in dags(n):
            graph = build_graph(n, edges, allowed_pairs(n, edges), [2] * n, 2)
            out.append((graph, true_worst_case(graph)[1]))
    return out


def test_the_explorers_worst_case_schedules_agree() -> None:
    cases = explorer_cases()
    assert len(cases) == 9
    assert differences(cases) == []


@functools.cache
def seeded_cases(count: int = 80) -> list[Case]:
    rng = random.Random(2027)
    return [random_case(rng) for _ in range(count)]


@pytest.mark.parametrize("variant", ["cancel_done", "begin_ignores_needs", "settle_tolerant",
                                     "ceiling_unchecked"])
def test_a_fault_in_the_coq_step_is_caught(variant: str) -> None:
    # the broken variants of proofs/coq/Broken.v, each one guard changed, extracted the same way
    assert differences(seeded_cases(), variant) != []


class OneRepairMore(RunRules):
    """The model's rule table with K taken as one more than it is, by Repair and by Fail."""

    def guard_repair(self, s, ev, g):
        self.live(s, g)
        g.need(s.in_relation(ev.node, ev.target), rr.not_in_relation, ev.node, ev.target)
        g.need(s.status(ev.node) == s.EXHAUSTED, rr.not_exhausted, ev.node)
        g.need(s.repairs_used <= s.repair_budget, rr.repairs_spent)

    def guard_fail(self, s, ev, g):
        self.live(s, g)
        g.need(s.status(ev.node) == s.EXHAUSTED, rr.not_exhausted, ev.node)
        g.need(s.or_(s.no_pair(ev.node), s.repairs_used > s.repair_budget), rr.repair_available)


def test_a_fault_in_the_model_is_caught(monkeypatch) -> None:
    # the model's rule table takes K as one more than it is (model.step reads transitions.RULES)
    monkeypatch.setattr(transitions, "RULES", OneRepairMore())
    assert differences(seeded_cases() + explorer_cases()) != []


def test_a_fault_in_the_models_w_is_caught(monkeypatch) -> None:
    # W's per-repair term summed over all of S_u, as if desc(d) could have run
    def loose(graph: LoopGraph) -> int:
        per = max((sum(graph.node(w).attempts for w in graph.subtree(u))
                   for _, u in graph.repair_pairs), default=0)
        return sum(n.attempts for n in graph.nodes) + graph.repair_budget * per

    monkeypatch.setattr(coq_cases, "attempt_bound", loose)
    assert differences(seeded_cases()) != []


def test_the_drawn_cases_admit_and_refuse_every_event_kind() -> None:
    # the comparison is only as strong as what the cases exercise: every kind of the model's
    # events both admitted and refused somewhere in the seeded cases
    admitted: set[str] = set()
    refused: set[str] = set()
    for graph, events in seeded_cases():
        run = python_run(graph, events)
        for e, ok in zip(events, run["admitted"], strict=True):
            (admitted if ok else refused).add(type(e).__name__)
    kinds = {t.__name__ for t in transitions.EVENT_TYPES}
    assert admitted == kinds and refused == kinds, (kinds - admitted, kinds - refused)


# ---- several attempts in flight: the concurrent step ------------------------------------------

@settings(max_examples=examples(10, fuzz=25))  # was 25 in make check too
@given(st.randoms(use_true_random=False))
def test_the_concurrent_step_decides_every_event_alike(rng: random.Random) -> None:
    cases = [random_concurrent_case(rng) for _ in range(4)]
    assert differences(cases, concurrent=True) == []


@settings(max_examples=examples(5, fuzz=10))  # was 10 in make check too
@given(st.randoms(use_true_random=False))
def test_the_concurrent_step_with_one_attempt_in_flight_is_the_model(rng: random.Random) -> None:
    # max_parallel = 1 through cstep (Serial.v proves it is the serial step)
    cases = [random_concurrent_case(rng, max_parallel=(1, 1)) for _ in range(4)]
    assert differences(cases, concurrent=True) == []


def explorer_interleaved_cases() -> list[Case]:
    """The explorer's worst-case schedule, with 2 and 3 attempts in flight, on every DAG of up to
    3 nodes with its full repair relation, a_v = 2 and K = 2."""
    out = []
    for mp in (2, 3):
        for n in (1, 2, 3):
            for edges in dags(n):
                graph = build_graph(n, edges, allowed_pairs(n, edges), [2] * n, 2,
                                    max_parallel=mp)
                out.append((graph, true_worst_case(graph)[1]))
    return out


def every_interleaving(graph: LoopGraph) -> list[Case]:
    """Every interleaving of `graph`'s control events: a walk of every reachable state (told
    apart by statuses, counters, repairs used and outcome, as the explorer's memo key does),
    each case the path to a state followed by every control event refused there, or the path
    followed by an enabled event to a state already reached."""
    every = transitions.all_control_candidates(graph)
    seen: set[object] = set()
    cases: list[Case] = []
    stack = [(initial_state(graph), list[transitions.Event]())]
    while stack:
        s, path = stack.pop()
        key = (tuple(s.status), tuple(s.attempts), s.repairs_used, s.outcome)
        if key in seen:
            cases.append((graph, path))
            continue
        seen.add(key)
        cases.append((graph, path + [e for e in every if not transitions.enabled(graph, s, e)]))
        stack += [(after, [*path, e]) for e, after in transitions.successors(graph, s)]
    return cases


@functools.cache
def interleaving_cases() -> list[Case]:
    """Every DAG of up to 3 nodes with its full repair relation, a_v = 1, K = 1, c_v = 1: up
    to two in flight with B = 1 (admission waits for the attempt in flight), up to three with
    B = 3 (max_parallel binds)."""
    return [case for mp, budget in ((2, 1.0), (3, 3.0)) for n in (1, 2, 3)
            for edges in dags(n) for case in every_interleaving(small_graph(n, edges, mp, budget))]


def small_graph(n: int, edges: tuple[tuple[int, int], ...], max_parallel: int,
                budget: float) -> LoopGraph:
    """The DAG with its full repair relation, a_v = 1, c_v = 1, K = 1 and B = `budget`."""
    shape = build_graph(n, edges, allowed_pairs(n, edges), [1] * n, 1)
    return LoopGraph.build([NodeSpec(x.name, attempts=1, spend_ceiling=1.0, needs=x.needs,
                                     repairs=x.repairs) for x in shape.nodes],
                           repair_budget=1, spend_budget=budget, max_parallel=max_parallel)


def test_the_explorers_interleaved_schedules_agree() -> None:
    # (a worst case is reached one attempt at a time as well, and these schedules happen to be;
    # every interleaving is the next test's)
    cases = explorer_interleaved_cases()
    assert len(cases) == 18
    assert differences(cases, concurrent=True) == []


def running_sets(graph: LoopGraph, events: list[transitions.Event]) -> list[tuple[str, ...]]:
    s, out = initial_state(graph), []
    for e in events:
        if transitions.enabled(graph, s, e):
            s = transitions.step(graph, s, e)
        out.append(s.in_flight(graph))
    return out


def test_every_interleaving_of_small_graphs_agrees() -> None:
    cases = interleaving_cases()
    # the walk reaches states with 2 and with 3 attempts in flight
    assert {len(r) for g, e in cases for r in running_sets(g, e)} >= {0, 1, 2, 3}
    assert differences(cases, concurrent=True) == []


@functools.cache
def seeded_concurrent_cases(count: int = 80) -> list[Case]:
    rng = random.Random(2028)
    return [random_concurrent_case(rng) for _ in range(count)]


@functools.cache
def fault_cases() -> list[Case]:
    """Seeded drawn runs, and every interleaving on r -> x, r -> y with two in flight and
    B = 1 (a Repair of S_r may find x in flight; a second Begin must wait for the first)."""
    return (seeded_concurrent_cases()[:40]
            + every_interleaving(small_graph(3, ((0, 1), (0, 2)), 2, 1.0)))


@pytest.mark.parametrize("variant", ["check_then_reserve", "check_settled", "repair_in_flight",
                                     "per_node_repairs"])
def test_a_fault_in_the_concurrent_coq_step_is_caught(variant: str) -> None:
    # the broken variants of proofs/coq/BrokenConcurrent.v, each one rule changed
    assert differences(fault_cases(), variant, concurrent=True) != []


def test_a_concurrent_admission_fault_in_the_model_is_caught(monkeypatch) -> None:
    # the model's admission counts only what is settled (check-then-admit: RunState.held
    # without the attempts in flight)
    monkeypatch.setattr(RunState, "held", lambda self, graph: self.settled)
    assert differences(fault_cases(), concurrent=True) != []


def test_a_concurrent_accounting_fault_in_the_model_is_caught(monkeypatch) -> None:
    # the model's accounts read as if one attempt were in flight: the totals are the first
    # attempt's own (RunState.account's serial rule with several in flight)
    def serial_account(self: RunState, graph: LoopGraph, i: int) -> tuple[float, float]:
        return (self.reserved, self.attempt_spend) if i == self.census()[1] else (0.0, 0.0)

    monkeypatch.setattr(RunState, "account", serial_account)
    assert differences(fault_cases(), concurrent=True) != []


def test_the_concurrent_cases_admit_and_refuse_every_event_kind() -> None:
    # as for the serial cases, and with two or more attempts in flight at some point of most
    # runs, and a spend event admitted with two or more in flight
    admitted: set[str] = set()
    refused: set[str] = set()
    spend_while_several = 0
    for graph, events in seeded_concurrent_cases():
        s = initial_state(graph)
        for e in events:
            ok = transitions.enabled(graph, s, e)
            (admitted if ok else refused).add(type(e).__name__)
            if ok and isinstance(e, transitions.Reserve | transitions.Settle) \
                    and s.in_flight_count() >= 2:
                spend_while_several += 1
            if ok:
                s = transitions.step(graph, s, e)
    kinds = {t.__name__ for t in transitions.EVENT_TYPES}
    assert admitted == kinds and refused == kinds, (kinds - admitted, kinds - refused)
    assert spend_while_several >= 20
