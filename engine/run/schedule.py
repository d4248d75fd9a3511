"""Scheduling: the run's next move, from the graph and the model state alone (no I/O).

Sequential and deterministic: an EXHAUSTED node is repaired (its first listed repair target) or
fails the run; when every node is DONE the run finishes; otherwise the first PENDING node
(topological order, ties by declaration order) whose predecessors are DONE runs its next
attempt, or is refused when settled + c_v does not fit B. A planner round, when one is due,
comes before all of these. The runner carries the move out (engine/run/runner.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from model import Begin, Fail, Finish, LoopGraph, Refuse, Repair, RunState, enabled
from model.transitions import Event

Kind = Literal["plan", "repair", "fail", "finish", "refuse", "attempt"]


@dataclass(frozen=True)
class Move:
    """What the run does next: a model event to commit with its facts, a planner round, or an
    attempt of `node` (no event: the attempt commits its own)."""

    kind: Kind
    node: str | None = None
    event: Event | None = None
    facts: dict[str, Any] = field(default_factory=dict)


def next_node(graph: LoopGraph, state: RunState) -> str:
    """The first node, in the graph's order, that may begin or must be refused."""
    for name in graph.names:
        if enabled(graph, state, Begin(name)) or enabled(graph, state, Refuse(name)):
            return name
    raise RuntimeError(f"engine bug: nothing can run in {state.summary(graph)}")


def repair_or_fail(graph: LoopGraph, state: RunState, x: str) -> Move:
    """An exhausted node `x`: repair its first declared target while K allows, else fail."""
    targets = [u for d, u in graph.repair_pairs if d == x]
    if targets and enabled(graph, state, Repair(x, targets[0])):
        return Move("repair", x, Repair(x, targets[0]), {
            "rerun": sorted(graph.subtree(targets[0])),
            "repairs_left": graph.repair_budget - state.repairs_used - 1})
    why = "no repair declared" if not targets else "the global repair budget K is spent"
    return Move("fail", x, Fail(x), {"why": why})


def next_move(graph: LoopGraph, state: RunState, *, plan_due: bool) -> Move:
    """The move at a safe point of a run that has not ended (no attempt may be in flight)."""
    if (node := state.running(graph)) is not None:  # only after a crash inside this process
        raise RuntimeError(f"{node!r} has an attempt in flight; use resume")
    if plan_due:
        return Move("plan")
    if (x := state.exhausted(graph)) is not None:
        return repair_or_fail(graph, state, x)
    if enabled(graph, state, Finish()):
        return Move("finish", None, Finish(), {"settled": state.settled})
    node = next_node(graph, state)
    if enabled(graph, state, Refuse(node)):
        return Move("refuse", node, Refuse(node), {
            "settled": state.settled, "ceiling": graph.node(node).spend_ceiling,
            "budget": graph.spend_budget,
            "why": "settled + c_v exceeds B: the next attempt could not be paid for"})
    return Move("attempt", node)
