"""The state of one bounded-loop run. Immutable: only `model.transitions.step` makes a new one."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from model.graph import LoopGraph


class Status(StrEnum):
    """A node's life: PENDING -> RUNNING -> (PENDING | DONE | EXHAUSTED); a repair -> PENDING."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    EXHAUSTED = "EXHAUSTED"


class Outcome(StrEnum):
    """A run's end state; RUNNING while it has not ended."""

    RUNNING = "RUNNING"
    DONE = "DONE"
    FAILED = "FAILED"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"


@dataclass(frozen=True, slots=True)
class RunState:
    """Everything the model knows about a run. Tuples are indexed in `graph.names` order.

    `passes` is the model's view of the ledger: the (node, activation) pairs that have a PASS
    verdict appended. A PASS for an old activation stays but no longer counts (G2).

    `attempts_total` counts the attempts that ended (or are in flight): the ones G1's bound W
    covers. `abandoned` counts attempts interrupted by a crash and given back by `Abandon`; each
    was executed and is run again, so real executions = attempts_total + abandoned (G7).
    """

    status: tuple[Status, ...]
    activation: tuple[int, ...]
    attempts: tuple[int, ...]
    passes: frozenset[tuple[str, int]]
    repairs_used: int = 0
    attempts_total: int = 0
    abandoned: int = 0
    settled: float = 0.0
    reserved: float = 0.0
    attempt_spend: float = 0.0
    outcome: Outcome = Outcome.RUNNING

    # ---- reads by name (the engine and tests never index tuples themselves) -----------------
    def status_of(self, graph: LoopGraph, name: str) -> Status:
        return self.status[graph.index(name)]

    def activation_of(self, graph: LoopGraph, name: str) -> int:
        return self.activation[graph.index(name)]

    def attempts_of(self, graph: LoopGraph, name: str) -> int:
        return self.attempts[graph.index(name)]

    def running(self, graph: LoopGraph) -> str | None:
        """The node with an attempt in flight, if any (the model runs one attempt at a time)."""
        if Status.RUNNING not in self.status:
            return None
        return graph.names[self.status.index(Status.RUNNING)]

    def exhausted(self, graph: LoopGraph) -> str | None:
        if Status.EXHAUSTED not in self.status:
            return None
        return graph.names[self.status.index(Status.EXHAUSTED)]

    @property
    def ended(self) -> bool:
        return self.outcome is not Outcome.RUNNING

    def summary(self, graph: LoopGraph) -> dict[str, object]:
        """A plain-data view, for counterexample traces, JSON output and test messages."""
        return {
            "outcome": self.outcome.value,
            "nodes": {
                name: {"status": st.value, "activation": e, "attempts": i}
                for name, st, e, i in zip(graph.names, self.status, self.activation,
                                           self.attempts, strict=True)
            },
            "passes": sorted([list(p) for p in self.passes]),
            "repairs_used": self.repairs_used,
            "attempts_total": self.attempts_total,
            "abandoned": self.abandoned,
            "settled": self.settled,
            "reserved": self.reserved,
        }


def initial_state(graph: LoopGraph) -> RunState:
    """Init: every node PENDING in activation 0 with no attempts; nothing spent or reserved."""
    n = len(graph.nodes)
    return RunState(
        status=(Status.PENDING,) * n,
        activation=(0,) * n,
        attempts=(0,) * n,
        passes=frozenset(),
    )


def changed(s: RunState, *, status: tuple[Status, ...] | None = None,
            activation: tuple[int, ...] | None = None, attempts: tuple[int, ...] | None = None,
            passes: frozenset[tuple[str, int]] | None = None, repairs_used: int | None = None,
            attempts_total: int | None = None, abandoned: int | None = None,
            settled: float | None = None, reserved: float | None = None,
            attempt_spend: float | None = None, outcome: Outcome | None = None) -> RunState:
    """Copy of `s` with the given fields changed (None: kept). Used only by declared transitions.

    Why not `dataclasses.replace`: it inspects the fields on every call, which made it the
    single largest cost of the bound explorer; this is the same copy, three to four times faster."""
    return RunState(
        s.status if status is None else status,
        s.activation if activation is None else activation,
        s.attempts if attempts is None else attempts,
        s.passes if passes is None else passes,
        s.repairs_used if repairs_used is None else repairs_used,
        s.attempts_total if attempts_total is None else attempts_total,
        s.abandoned if abandoned is None else abandoned,
        s.settled if settled is None else settled,
        s.reserved if reserved is None else reserved,
        s.attempt_spend if attempt_spend is None else attempt_spend,
        s.outcome if outcome is None else outcome,
    )


def with_node(state: RunState, index: int, *, status: Status | None = None,
              activation: int | None = None, attempts: int | None = None, **fields: object
              ) -> RunState:
    """Copy of `state` with one node's fields changed (and any run-wide `fields`, as in
    `changed`). Used only by declared transitions."""
    def put(t: tuple, v: object) -> tuple | None:
        return None if v is None else t[:index] + (v,) + t[index + 1:]
    return changed(state, status=put(state.status, status),
                   activation=put(state.activation, activation),
                   attempts=put(state.attempts, attempts), **fields)  # type: ignore[arg-type]
