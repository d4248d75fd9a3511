"""The scheduler's frontier names the node the plain scan names, after any run of events, and
a long chain is scheduled with a number of guard checks linear in its length."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.engine.run import schedule
from loopproof.engine.run.schedule import Frontier, next_node
from loopproof.model import (
    Begin,
    LoopGraph,
    NodeSpec,
    Refuse,
    Verdict,
    control_events,
    enabled,
    step,
)
from loopproof.model.state import initial_state
from tests.support.strategies import any_graphs


def _safe_point(graph, s) -> bool:
    return (not s.ended and s.running(graph) is None and s.exhausted(graph) is None
            and any(enabled(graph, s, Begin(n)) or enabled(graph, s, Refuse(n))
                    for n in graph.names))


@settings(max_examples=150)
@given(any_graphs(nodes=(1, 6)), st.data())
def test_the_frontier_names_the_node_the_scan_names(graph: LoopGraph, data) -> None:
    """Every event a run may take (Begin, both verdicts, repairs, fails, refusals), in any
    order the model allows; at every safe point both choose the same node."""
    s, frontier = initial_state(graph), Frontier(graph)
    for _ in range(60):
        if _safe_point(graph, s):
            assert frontier.next_node(s) == next_node(graph, s)
        events = list(control_events(graph, s))
        if not events:
            break
        event = data.draw(st.sampled_from(events))
        before, s = s, step(graph, s, event)
        frontier.observe(event, before)


def test_a_long_chain_costs_linear_guard_checks(monkeypatch) -> None:
    """3,000 nodes, each passing at once: the frontier checks O(n) guards in all; the plain
    scan checked O(n^2) (it tries every node before the first PENDING one each time)."""
    n = 3000
    graph = LoopGraph.build([NodeSpec(f"n{i}", needs=(f"n{i - 1}",) if i else ())
                             for i in range(n)])
    calls = []
    real = schedule.enabled
    monkeypatch.setattr(schedule, "enabled", lambda g, s, e: calls.append(1) or real(g, s, e))
    s, frontier = initial_state(graph), Frontier(graph)
    for _ in range(n):
        name = schedule.next_move(graph, s, plan_due=False, frontier=frontier).node
        for event in (Begin(name), Verdict(name, True)):
            before, s = s, step(graph, s, event)
            frontier.observe(event, before)
    assert s.all_done()
    assert len(calls) < 10 * n, len(calls)
    calls.clear()
    s = initial_state(graph)
    for i in range(200):  # the plain scan, for contrast, on the first 200 nodes
        next_node(graph, s)
        s = step(graph, step(graph, s, Begin(f"n{i}")), Verdict(f"n{i}", True))
    assert len(calls) > 200 * 199  # quadratic
