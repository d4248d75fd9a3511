"""The state of one bounded-loop run. Immutable: only `model.transitions.step` makes a new one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from model.graph import LoopGraph
from model.persistent import replaced


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

    On a graph of more than a few dozen nodes, the per-node tuples and the sets become
    `model.persistent.Row` and `Bag` once changed: equal to (and hashing as) the tuple and the
    frozenset of the same items, but changed one element at a time without a copy of the rest.

    `passes` is the model's view of the ledger: the (node, activation) pairs that have a PASS
    verdict appended. A PASS for an old activation stays but no longer counts (G2).

    `attempts_total` counts the attempts that ended (or are in flight): the ones G1's bound W
    covers. `abandoned` counts attempts interrupted by a crash and given back by `Abandon`; each
    was executed and is run again, so real executions = attempts_total + abandoned (G7).

    `cancelled` holds the (node, activation) pairs an operator ended without a verdict
    (`Cancel`): like `passes`, history that the ledger keeps and no guard reads.
    """

    # tuples, or past a few dozen nodes model.persistent's Rows (O(1) copies with one change)
    status: Sequence[Status]
    activation: Sequence[int]
    attempts: Sequence[int]
    passes: frozenset[tuple[str, int]]
    repairs_used: int = 0
    attempts_total: int = 0
    abandoned: int = 0
    settled: float = 0.0
    reserved: float = 0.0
    attempt_spend: float = 0.0
    outcome: Outcome = Outcome.RUNNING
    cancelled: frozenset[tuple[str, int]] = frozenset()
    # Derived from `status`, never compared: (RUNNING count, first RUNNING index, EXHAUSTED
    # count, first EXHAUSTED index, DONE count); an index is -1 when none, UNKNOWN when it must
    # be looked up. Kept up to date by `with_node`, so that on a graph of 10,000 nodes asking
    # which node is in flight does not scan the status tuple at every event; None: not counted
    # yet (counted on first use).
    _census: tuple[int, int, int, int, int] | None = field(default=None, compare=False,
                                                           repr=False)

    # ---- reads by name (the engine and tests never index tuples themselves) -----------------
    def status_of(self, graph: LoopGraph, name: str) -> Status:
        return self.status[graph.index(name)]

    def activation_of(self, graph: LoopGraph, name: str) -> int:
        return self.activation[graph.index(name)]

    def attempts_of(self, graph: LoopGraph, name: str) -> int:
        return self.attempts[graph.index(name)]

    def census(self) -> tuple[int, int, int, int, int]:
        c = self._census
        if c is None or c[1] == UNKNOWN or c[3] == UNKNOWN:
            st = self.status
            c = (st.count(Status.RUNNING), _first(st, Status.RUNNING),
                 st.count(Status.EXHAUSTED), _first(st, Status.EXHAUSTED), st.count(Status.DONE))
            object.__setattr__(self, "_census", c)
        return c

    def running(self, graph: LoopGraph) -> str | None:
        """The node with an attempt in flight, if any (the model runs one attempt at a time)."""
        i = self.census()[1]
        return None if i < 0 else graph.names[i]

    def exhausted(self, graph: LoopGraph) -> str | None:
        i = self.census()[3]
        return None if i < 0 else graph.names[i]

    def all_done(self) -> bool:
        return self.census()[4] == len(self.status)

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
            "cancelled": sorted([list(p) for p in self.cancelled]),
            "repairs_used": self.repairs_used,
            "attempts_total": self.attempts_total,
            "abandoned": self.abandoned,
            "settled": self.settled,
            "reserved": self.reserved,
        }


UNKNOWN = -2


def _first(status: Sequence[Status], kind: Status) -> int:
    return status.index(kind) if kind in status else -1


def _recount(c: tuple[int, int, int, int, int] | None, i: int, old: Status, new: Status
             ) -> tuple[int, int, int, int, int] | None:
    """The census after node `i` goes from `old` to `new` (None stays None)."""
    if c is None or old is new:
        return c
    counts = list(c)
    for slot, kind in ((0, Status.RUNNING), (2, Status.EXHAUSTED)):
        n, first = counts[slot], counts[slot + 1]
        if old is kind:
            n -= 1
            first = -1 if n == 0 else (UNKNOWN if first == i else first)
        if new is kind:
            n += 1
            first = i if first == -1 else (min(first, i) if first >= 0 else first)
        counts[slot], counts[slot + 1] = n, first
    counts[4] += (new is Status.DONE) - (old is Status.DONE)
    return tuple(counts)  # type: ignore[return-value]  # counts has the census's five items


def initial_state(graph: LoopGraph) -> RunState:
    """Init: every node PENDING in activation 0 with no attempts; nothing spent or reserved."""
    n = len(graph.nodes)
    return RunState(
        status=(Status.PENDING,) * n,
        activation=(0,) * n,
        attempts=(0,) * n,
        passes=frozenset(),
        _census=(0, -1, 0, -1, 0),
    )


def changed(s: RunState, *, status: Sequence[Status] | None = None,
            activation: Sequence[int] | None = None, attempts: Sequence[int] | None = None,
            passes: frozenset[tuple[str, int]] | None = None, repairs_used: int | None = None,
            attempts_total: int | None = None, abandoned: int | None = None,
            settled: float | None = None, reserved: float | None = None,
            attempt_spend: float | None = None, outcome: Outcome | None = None,
            cancelled: frozenset[tuple[str, int]] | None = None,
            _census: tuple[int, int, int, int, int] | None = None) -> RunState:
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
        s.cancelled if cancelled is None else cancelled,
        s._census if status is None else _census,  # a new status tuple: `_census` or recount
    )


def with_node(state: RunState, index: int, *, status: Status | None = None,
              activation: int | None = None, attempts: int | None = None, **fields: object
              ) -> RunState:
    """Copy of `state` with one node's fields changed (and any run-wide `fields`, as in
    `changed`). Used only by declared transitions."""
    def put(t: Sequence[Any], v: object) -> Any:
        # O(1) in the graph's size past a few dozen nodes (model.persistent), so replaying an
        # n-node ledger is linear, not quadratic
        return None if v is None else replaced(t, index, v)
    census = None if status is None else _recount(state._census, index, state.status[index],
                                                  status)
    return changed(state, status=put(state.status, status),
                   activation=put(state.activation, activation),
                   attempts=put(state.attempts, attempts), _census=census,
                   **fields)  # type: ignore[arg-type]  # fields: RunState's own, as in changed
