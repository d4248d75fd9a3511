"""Scheduling: the run's next move, from the graph and the model state alone (no I/O).

Sequential and deterministic: an EXHAUSTED node is repaired (its first listed repair target) or
fails the run; when every node is DONE the run finishes; otherwise the first PENDING node
(topological order, ties by declaration order) whose predecessors are DONE runs its next
attempt, or is refused when settled + c_v does not fit B. A planner round, when one is due,
comes before all of these. The runner carries the move out (engine/run/runner.py).

With several attempts in flight (`max_parallel` > 1), `next_begin` names the node to begin beside
them: the one the serial rule would run next, if the model admits its Begin now; every other move
waits until nothing is in flight (engine/run/runner.py).

Why a frontier: trying every node for the next one to begin made each decision O(n) guard
checks, and a run of n nodes O(n^2). `Frontier` keeps a heap of the nodes that may be ready and
is told every committed event (`Journal.commit`); a node whose status may have become PENDING, or
whose predecessor has just passed, is pushed, and a node found not to be PENDING with every
predecessor DONE is popped. So the least ready node is at the top and each decision costs
O(1) amortised (plus the node's predecessors). `next_node` is the plain scan it must agree with.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Literal

from loopproof.model import (
    Abandon,
    Begin,
    Fail,
    Finish,
    LoopGraph,
    Overrun,
    Refuse,
    Repair,
    RunState,
    Status,
    Verdict,
    enabled,
)
from loopproof.model.transitions import Event

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


class Frontier:
    """The nodes that may begin next, as a heap of node indices (see the module docstring)."""

    def __init__(self, graph: LoopGraph) -> None:
        self.graph = graph
        self.heap = list(range(len(graph.nodes)))  # already a heap: every node may be ready

    def observe(self, event: Event, before: RunState) -> None:
        """`event` was committed in state `before`: push what it may have made ready."""
        g = self.graph
        if isinstance(event, Verdict):
            if event.passed:
                for j in g.successors[g.index(event.node)]:
                    heapq.heappush(self.heap, j)
            else:
                heapq.heappush(self.heap, g.index(event.node))
        elif isinstance(event, Abandon):
            heapq.heappush(self.heap, g.index(event.node))
        elif isinstance(event, Overrun):
            if (node := event.node or before.running(g)) is not None:
                heapq.heappush(self.heap, g.index(node))
        elif isinstance(event, Repair):  # only the target of S_u can have every need DONE
            heapq.heappush(self.heap, g.index(event.target))

    def ready(self, state: RunState) -> str | None:
        """The least node that is PENDING with every predecessor DONE, or None; the nodes
        above it that are neither are popped (a node in flight too: its end pushes it again)."""
        g, heap, status = self.graph, self.heap, state.status
        index = g._index
        while heap:
            i = heap[0]
            node = g.nodes[i]
            if status[i] is Status.PENDING and all(status[index[p]] is Status.DONE
                                                   for p in node.needs):
                return node.name
            heapq.heappop(heap)
        return None

    def next_node(self, state: RunState) -> str:
        """The node `next_node(graph, state)` names, from the top of the heap."""
        name = self.ready(state)
        if name is not None and (enabled(self.graph, state, Begin(name))
                                 or enabled(self.graph, state, Refuse(name))):
            return name
        name = next_node(self.graph, state)  # raises when nothing can run, as it should
        raise RuntimeError(f"engine bug: the frontier lost {name!r}, which may begin")


def repair_or_fail(graph: LoopGraph, state: RunState, x: str) -> Move:
    """An exhausted node `x`: repair its first declared target while K allows, else fail."""
    targets = [u for d, u in graph.repair_pairs if d == x]
    if targets and enabled(graph, state, Repair(x, targets[0])):
        return Move("repair", x, Repair(x, targets[0]), {
            "rerun": sorted(graph.subtree(targets[0])),
            "repairs_left": graph.repair_budget - state.repairs_used - 1})
    why = "no repair declared" if not targets else "the global repair budget K is spent"
    return Move("fail", x, Fail(x), {"why": why})


def next_begin(graph: LoopGraph, state: RunState, frontier: Frontier) -> str | None:
    """With attempts in flight: the node to begin next beside them, or None to wait. It is the
    node the serial rule would run next (the least ready one), and only if the model admits its
    Begin now; anything else (a refusal, a repair, a fail) waits until nothing is in flight."""
    if state.ended or state.exhausted(graph) is not None:
        return None
    node = frontier.ready(state)
    return node if node is not None and enabled(graph, state, Begin(node)) else None


def next_move(graph: LoopGraph, state: RunState, *, plan_due: bool,
              frontier: Frontier | None = None) -> Move:
    """The move at a safe point of a run that has not ended (no attempt may be in flight).
    With a `frontier` told every committed event, the same move without scanning the nodes."""
    if (node := state.running(graph)) is not None:  # only after a crash inside this process
        raise RuntimeError(f"{node!r} has an attempt in flight; use resume")
    if plan_due:
        return Move("plan")
    if (x := state.exhausted(graph)) is not None:
        return repair_or_fail(graph, state, x)
    if enabled(graph, state, Finish()):
        return Move("finish", None, Finish(), {"settled": state.settled})
    node = frontier.next_node(state) if frontier is not None else next_node(graph, state)
    if enabled(graph, state, Refuse(node)):
        return Move("refuse", node, Refuse(node), {
            "settled": state.settled, "ceiling": graph.node(node).spend_ceiling,
            "budget": graph.spend_budget,
            "why": "settled + c_v exceeds B: the next attempt could not be paid for"})
    return Move("attempt", node)
