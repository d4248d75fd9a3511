"""A run counterexample replayed through the real model (`model.step`): where a broken variant
and the model part. Tests of broken variants use it to show that the bad run is the broken
rule's doing -- the real model refuses one of its events, or keeps the property on every state
it reaches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import z3

from loopproof.model.state import RunState, initial_state
from loopproof.model.transitions import Disabled, Event, step
from loopproof.proofs.encoding import Params, RunEncoding
from loopproof.proofs.trace import Trace


@dataclass
class RealRun:
    """The states the real model reaches on a trace's events, and the first event it refuses."""

    trace: Trace
    states: list[RunState] = field(default_factory=list)
    refused: tuple[int, Event, str] | None = None  # (step index, event, the model's reason)

    @property
    def graph(self):
        return self.trace.system.graph

    def holds(self, invariant: Callable[[RunEncoding, Any], z3.BoolRef]) -> bool:
        """Does every state the real model reached satisfy `invariant`?"""
        enc = RunEncoding(self.graph, Params.of(self.graph))
        x = enc.fresh("real")
        for s in self.states:
            solver = z3.Solver()
            solver.add(*enc.axioms(), enc.pin(x, s), z3.Not(invariant(enc, x)))
            if solver.check() != z3.unsat:
                return False
        return True

    def describe(self) -> str:
        if self.refused is not None:
            i, ev, why = self.refused
            return f"the real model refuses step [{i}] {ev}: {why}"
        return f"the real model makes all {len(self.states) - 1} steps:\n{self.trace.render()}"


def real_run(trace: Trace) -> RealRun:
    """Replay `trace` (a run from Init over the run encoding) through `model.step`."""
    run = RealRun(trace)
    graph = run.graph
    s = initial_state(graph)
    run.states.append(s)
    for i, st in enumerate(trace.steps[1:], start=1):
        try:
            s = step(graph, s, st.event_obj)
        except Disabled as exc:
            run.refused = (i, st.event_obj, str(exc))
            return run
        run.states.append(s)
    return run
