"""The state of one bounded-loop run. Immutable: only `model.transitions.step` makes a new one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from loopproof.model.graph import LoopGraph
from loopproof.model.persistent import replaced


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

    Spend: `settled` is run-wide; `reserved` and `attempt_spend` are the totals of the attempts
    in flight (open reservations; what they have settled plus hold). With one attempt in flight
    (always, when `graph.max_parallel` is 1) they are that attempt's own, exactly as in the
    serial model, and `accounts` is empty. Only while two or more attempts are in flight does
    `accounts` hold each one's (node index, reserved, spent), sorted by index; read them with
    `reserved_of` and `spent_of`, which cover both cases. Why not per-node tuples always: a
    serial state then stays equal, field for field, to the serial model's.
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
    accounts: tuple[tuple[int, float, float], ...] = ()
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
        """The first node (in topological order) with an attempt in flight, if any: with
        `max_parallel` 1 the only one; with several in flight, read `in_flight`."""
        i = self.census()[1]
        return None if i < 0 else graph.names[i]

    def in_flight_count(self) -> int:
        return self.census()[0]

    def in_flight(self, graph: LoopGraph) -> tuple[str, ...]:
        """Every node with an attempt in flight, in topological order."""
        count, first = self.census()[:2]
        if count == 0:
            return ()
        if count == 1:
            return (graph.names[first],)
        if len(self.accounts) == count:  # always, in a state the transitions made
            return tuple(graph.names[i] for i, _, _ in self.accounts)
        return tuple(n for n, st in zip(graph.names, self.status, strict=True)
                     if st is Status.RUNNING)

    def account(self, graph: LoopGraph, i: int) -> tuple[float, float]:
        """(open reservations, spent = settled in the attempt + reserved) of the attempt in
        flight of node index `i`; (0.0, 0.0) if it has none. On a serial graph the totals are
        the first running node's, as in the serial model (whatever the state)."""
        count, first = self.census()[:2]
        if count == 1 or (count > 1 and graph.max_parallel == 1):
            return (self.reserved, self.attempt_spend) if first == i else (0.0, 0.0)
        for j, reserved, spent in self.accounts:
            if j == i:
                return reserved, spent
        return 0.0, 0.0

    def reserved_of(self, graph: LoopGraph, name: str) -> float:
        return self.account(graph, graph.index(name))[0]

    def spent_of(self, graph: LoopGraph, name: str) -> float:
        """What the attempt in flight of `name` has settled plus holds (its `attempt_spend`)."""
        return self.account(graph, graph.index(name))[1]

    def held(self, graph: LoopGraph) -> float:
        """settled + what every attempt in flight may still charge (c_w minus what it has
        settled): what admission counts against B, and what G3 bounds by B."""
        total = self.settled
        for name in self.in_flight(graph):
            reserved, spent = self.account(graph, graph.index(name))
            total += graph.node(name).spend_ceiling - (spent - reserved)
        return total

    def exhausted(self, graph: LoopGraph) -> str | None:
        i = self.census()[3]
        return None if i < 0 else graph.names[i]

    def all_done(self) -> bool:
        return self.census()[4] == len(self.status)

    @property
    def ended(self) -> bool:
        return self.outcome is not Outcome.RUNNING

    def summary(self, graph: LoopGraph) -> dict[str, object]:
        """A plain-data view, for counterexample traces, JSON output and test messages (with
        several attempts in flight, each one's spend under "in_flight")."""
        out = self._summary(graph)
        if self.accounts:
            out["in_flight"] = {graph.names[i]: {"reserved": r, "spent": x}
                                for i, r, x in self.accounts}
        return out

    def _summary(self, graph: LoopGraph) -> dict[str, object]:
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
            accounts: tuple[tuple[int, float, float], ...] | None = None,
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
        s.accounts if accounts is None else accounts,
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
