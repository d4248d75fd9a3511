"""A run that reaches W, chosen by a hand policy independent of the explorer (G1's bound is
reached: tests/model/test_bounds.py; the Coq model agrees on it: tests/proofs/test_coq_model.py)."""

from __future__ import annotations

from loopproof.model.bounds import worst_repair_pair
from loopproof.model.graph import LoopGraph
from loopproof.model.state import RunState, initial_state
from loopproof.model.transitions import Begin, Event, Finish, Repair, Verdict, control_events, step


def maximising_schedule(graph: LoopGraph) -> RunState:
    """The end state of `maximising_run`."""
    return maximising_run(graph)[1]


def maximising_run(graph: LoopGraph) -> tuple[list[Event], RunState]:
    """Repeat the maximising pair (d, u) K times, then let everything pass on its last attempt.

    Each activation runs every node outside {d} and desc(d) first, then d, then desc(d); every
    node fails until its last attempt; d fails that one too while repairs are left, and the repair re-runs
    S_u \\ desc(d). A hand policy, independent of the explorer."""
    pair = worst_repair_pair(graph)
    d, u = pair if pair is not None else (None, None)
    late = graph.desc(d) if d is not None else frozenset()
    s = initial_state(graph)
    events: list[Event] = []
    while not s.ended:
        options = list(control_events(graph, s))
        event: Event
        if (running := s.running(graph)) is not None:
            last = s.attempts_of(graph, running) == graph.node(running).attempts
            keep_failing = running == d and s.repairs_used < graph.repair_budget
            event = Verdict(running, last and not keep_failing)
        elif (x := s.exhausted(graph)) is not None:
            assert x == d and Repair(d, u) in options
            event = Repair(d, u)
        elif begins := [e for e in options if isinstance(e, Begin)]:
            # everything outside {d} and desc(d) first, then d, then desc(d)
            event = sorted(begins, key=lambda e: (e.node == d) + 2 * (e.node in late))[0]
        else:
            event = Finish()
        events.append(event)
        s = step(graph, s, event)
    return events, s
