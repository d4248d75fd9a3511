"""The explorer's fast path (`model.search_space`) is the model's transitions, state by state.

Every reachable `RunState` of the explorer's graphs is walked through the model
(`model.transitions.successors`); at each one the abstract space must yield the same events in
the same order, leading to the projections of the model's successor states, and its memo key
must be the explorer's `_key` renamed. A rule changed on either side fails here (planted faults
below, on both sides).
"""

from __future__ import annotations

import itertools
from collections import deque

import pytest

import loopproof.model.search_space as space_module
from loopproof.model.explore import (
    K_CHOICES,
    NAMES,
    Task,
    WorstCase,
    _key,
    allowed_pairs,
    build_graph,
    dags,
    relations,
    run_task,
    true_worst_case,
)
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.search_space import AbstractSpace, AbstractWorstCase
from loopproof.model.state import changed, initial_state
from loopproof.model.transitions import Repair, Verdict, successors


def first_difference(graph: LoopGraph, space: AbstractSpace) -> str | None:
    """Walk the states the model can reach from `initial_state`, one per memo key (the states
    the model's own search expands); the first where the abstract space disagrees with the
    model, described, or None."""
    start = initial_state(graph)
    seen = {_key(graph, start)}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        here = space.project(s, graph.repair_budget)
        model_next = successors(graph, s)
        want = [(e, space.project(t, graph.repair_budget)) for e, t in model_next]
        got = [(e, (o, st, at, lf)) for e, o, st, at, lf in space.successors(*here)]
        if got != want:
            return f"successors of {s.summary(graph)}: model {want}, abstract {got}"
        if space.model_key(space.key(*here)) != _key(graph, s):
            return (f"key of {s.summary(graph)}: model {_key(graph, s)}, "
                    f"abstract {space.model_key(space.key(*here))}")
        for _, t in model_next:
            if (k := _key(graph, t)) not in seen:
                seen.add(k)
                queue.append(t)
    return None


def explorer_cases(n: int, every: int = 1, max_parallel: int = 1
                   ) -> list[tuple[LoopGraph, AbstractSpace]]:
    """The explorer's cases on n nodes (every `every`-th relation of each DAG and a_v), each
    with the space `run_task` would use: derived from the first relation's by `with_relation`,
    over the DAG's allowed pairs."""
    out = []
    for edges in dags(n):
        universe = tuple((NAMES[d], NAMES[u]) for d, u in allowed_pairs(n, edges))
        for att in itertools.product((1, 2), repeat=n):
            base = None
            for r, relation in enumerate(relations(n, edges)):
                if r % every:
                    continue
                built = build_graph(n, edges, relation, att, 0, max_parallel)
                base = space = (AbstractSpace(built, universe) if base is None
                                else base.with_relation(built))
                for k in K_CHOICES:
                    out.append((built.with_repair_budget(k), space))
    return out


def spend_cases() -> list[tuple[LoopGraph, AbstractSpace]]:
    """Graphs where some attempt does not fit B (Refuse), which the explorer's B = inf never has."""
    graphs = [
        LoopGraph.build([NodeSpec("a", spend_ceiling=2.0)], spend_budget=1.0),
        LoopGraph.build([NodeSpec("a", attempts=2, repairs=("a",)),
                         NodeSpec("b", spend_ceiling=3.0, needs=("a",), repairs=("a", "b"))],
                        repair_budget=1, spend_budget=2.0),
    ]
    return [(g, AbstractSpace(g)) for g in graphs]


@pytest.mark.parametrize("n", [1, 2])
def test_every_case_up_to_two_nodes_agrees_with_the_model(n: int) -> None:
    cases = explorer_cases(n)
    assert len(cases) > 10
    for graph, space in cases:
        assert first_difference(graph, space) is None


def test_three_node_cases_agree_with_the_model() -> None:
    # every 7th relation of each 3-node DAG and a_v, with every K (a few hundred cases; each
    # reachable model state is compared)
    cases = explorer_cases(3, every=7)
    assert len(cases) > 300
    for graph, space in cases:
        assert first_difference(graph, space) is None


@pytest.mark.parametrize(("n", "every"), [(2, 1), (3, 11)])
def test_interleavings_of_two_attempts_agree_with_the_model(n: int, every: int) -> None:
    # max_parallel 2: several RUNNING nodes, repairs waiting for the attempts in their subtree
    cases = explorer_cases(n, every, max_parallel=2)
    assert len(cases) > 40
    for graph, space in cases:
        assert first_difference(graph, space) is None


def test_interleaved_attempts_that_do_not_fit_together_agree_with_the_model() -> None:
    # B = 3 holds one attempt of c_v = 2 but not two: the second Begin waits, Refuse only
    # with none in flight
    wide = LoopGraph.build([NodeSpec("a", spend_ceiling=2.0), NodeSpec("b", spend_ceiling=2.0),
                            NodeSpec("c", spend_ceiling=4.0, needs=("a",), repairs=("a",))],
                           repair_budget=1, spend_budget=3.0, max_parallel=2)
    assert first_difference(wide, AbstractSpace(wide)) is None


def test_refused_attempts_agree_with_the_model() -> None:
    for graph, space in spend_cases():
        assert first_difference(graph, space) is None
    graph, space = spend_cases()[1]
    a_done = space.successors(*space.successors(*space.start())[0][1:])[0]
    assert a_done[0] == Verdict("a", True)
    assert [type(e).__name__ for e, *_ in space.successors(*a_done[1:])] == ["Refuse", "Cancel"]


def test_the_abstract_search_keeps_the_model_search_counts() -> None:
    # Same memo keys one for one: every 3-node task's abstract table has as many states as the
    # model's table over the same cases, and every case has the same worst case.
    for edges in dags(3):
        for att in itertools.product((1, 2), repeat=3):
            fast, model_search = AbstractWorstCase(), WorstCase()
            for graph, space in _task_cases(3, edges, att):
                assert fast.worst(space, graph.repair_budget) == \
                    model_search.remaining(graph, initial_state(graph))
            assert fast.states == model_search.states == run_task(Task(3, edges, att)).states


def _task_cases(n: int, edges, att) -> list[tuple[LoopGraph, AbstractSpace]]:
    """The cases `run_task` checks for one DAG and a_v, in its order."""
    from loopproof.model.explore import _least_in_orbit, automorphisms

    autos = [q for q in automorphisms(n, edges) if q != tuple(range(n))]
    universe = tuple((NAMES[d], NAMES[u]) for d, u in allowed_pairs(n, edges))
    out, base = [], None
    for relation in relations(n, edges):
        if autos and not _least_in_orbit(relation, att, autos):
            continue
        built = build_graph(n, edges, relation, att, 0)
        base = space = AbstractSpace(built, universe) if base is None else base.with_relation(built)
        out += [(built.with_repair_budget(k), space) for k in K_CHOICES]
    return out


def test_four_node_tasks_keep_the_model_counts() -> None:
    # two of the heaviest 4-node tasks (a chain: every allowed pair), against the model's search
    for att in ((2, 1, 1, 2), (1, 2, 2, 1)):
        edges = ((0, 1), (1, 2), (2, 3))
        fast = run_task(Task(4, edges, att))
        reduced = WorstCase()
        for graph, _ in _task_cases(4, edges, att)[::16]:
            assert reduced.remaining(graph, initial_state(graph)) == \
                AbstractWorstCase().worst(AbstractSpace(graph), graph.repair_budget)
        assert fast.cases == 3 * 2 ** 10 and fast.mismatches == 0


def test_true_worst_case_replays_through_the_model() -> None:
    g = LoopGraph.build([NodeSpec("a", attempts=2), NodeSpec("b", needs=("a",), repairs=("a",))],
                        repair_budget=1)
    worst, schedule = true_worst_case(g)
    assert worst == 6 == WorstCase().remaining(g, initial_state(g))
    assert sum(type(e).__name__ == "Begin" for e in schedule) == 6


# ---- planted faults: the test above must see a change on either side ------------------------------

def test_a_fault_planted_in_the_model_is_seen(monkeypatch) -> None:
    """A repair that spends nothing of K, in the model only: the abstract space disagrees."""
    real = Repair.apply
    monkeypatch.setattr(Repair, "apply", lambda self, graph, s: changed(
        real(self, graph, s), repairs_used=s.repairs_used))
    graph, space = explorer_cases(1)[-1]  # a repairs itself, a_v = 2, K = 2
    assert graph.repair_pairs == (("a", "a"),) and graph.repair_budget == 2
    found = first_difference(graph, space)
    assert found is not None and "Repair(node='a', target='a')" in found


def test_a_fault_planted_in_the_abstract_space_is_seen(monkeypatch) -> None:
    """An off-by-one in the abstract space's repairs left (a repair that spends nothing)."""
    real = AbstractSpace.successors

    def free_repairs(self, outcome, status, counters, left):
        return [(e, o, st, at, lf + 1 if type(e).__name__ == "Repair" else lf)
                for e, o, st, at, lf in real(self, outcome, status, counters, left)]

    monkeypatch.setattr(AbstractSpace, "successors", free_repairs)
    differences = [first_difference(g, s) for g, s in explorer_cases(2)]
    assert any(d is not None and "Repair" in d for d in differences)


def test_a_rule_changed_in_the_table_for_the_fast_path_alone_is_seen() -> None:
    """The fast path is compiled from the rule table: compiled from a variant of it (a repair
    that spends nothing of K; a cancel that needs an attempt made) while the model keeps the
    table, it disagrees with the model, and compiled from the table it agrees."""
    from tests.support.rule_variants import CancelAfterAnAttempt, FreeRepairs

    graph, _ = explorer_cases(1)[-1]  # a repairs itself, a_v = 2, K = 2
    assert first_difference(graph, AbstractSpace(graph)) is None
    found = first_difference(graph, AbstractSpace(graph, rules=FreeRepairs()))
    assert found is not None and "Repair(node='a', target='a')" in found
    found = first_difference(graph, AbstractSpace(graph, rules=CancelAfterAnAttempt()))
    assert found is not None and "Cancel(node='a')" in found


def test_a_fault_planted_in_the_counters_is_seen(monkeypatch) -> None:
    """The abstract space keeps a DONE node's counter: the keys no longer match the model's."""
    monkeypatch.setattr(space_module, "DONE", 99)  # no status is DONE to the abstract space
    differences = [first_difference(g, s) for g, s in explorer_cases(1)]
    assert any(d is not None for d in differences)
