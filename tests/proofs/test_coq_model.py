"""The Coq development is about this model: the step function and W extracted from
proofs/coq/Loopproof.v (to OCaml, driven by proofs/coq/driver.ml) and model.step / model.bounds
decide every event the same way, reach the same state after it and compute the same W, on
Hypothesis graphs of up to 8 nodes with drawn event sequences (every event kind, spend events
included), on the explorer's worst-case schedules and on W's maximising schedule. A fault planted
on either side is caught."""

from __future__ import annotations

import functools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.model import transitions
from loopproof.model.explore import allowed_pairs, build_graph, dags, true_worst_case
from loopproof.model.graph import LoopGraph
from loopproof.proofs import coq
from tests.support import coq_cases
from tests.support.coq_cases import Case, cases_text, first_difference, python_run, random_case
from tests.support.strategies import any_graphs
from tests.support.worst_runs import maximising_run


def differences(cases: list[Case], variant: str = "real") -> list[str]:
    """One driver run for all `cases`; the first difference of each case that has one."""
    out = coq.drive(cases_text(cases, variant))
    assert len(out) == len(cases)
    found = []
    for (graph, events), result in zip(cases, out, strict=True):
        if (diff := first_difference(graph, events, python_run(graph, events), result)):
            found.append(f"{[n.name for n in graph.nodes]}: {diff}")
    return found


@settings(max_examples=25)
@given(st.randoms(use_true_random=False))
def test_every_event_is_decided_alike_and_reaches_the_same_state(rng: random.Random) -> None:
    cases = [random_case(rng) for _ in range(4)]
    assert differences(cases) == []


@settings(max_examples=25)
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


def test_a_fault_in_the_model_is_caught(monkeypatch) -> None:
    # the model's Repair guard takes K as one more than it is
    monkeypatch.setattr(transitions, "_repair_budget_left",
                        lambda graph, s: s.repairs_used <= graph.repair_budget)
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
