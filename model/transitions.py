"""The declared transitions of a bounded-loop run: the only way a `RunState` changes.

Each event is a small frozen dataclass with a guard (`why_not`, returning the reason it is
disabled, or None) and an effect (`apply`). `step` checks the guard and applies the effect;
a disabled event raises `Disabled`, so no caller can move a node's status by hand (Automat's rule).

An operator may end a node's activation without a verdict (`Cancel`); the node is then exhausted
and the repair rule decides what follows, as after its last failed attempt.

Spend is modelled as the engine meters it: an attempt is admitted only if settled + c_v <= B;
inside it every metered operation reserves first (`Reserve`; several may be outstanding, each
checked against all of them), a reservation that does not fit ends the attempt (`Overrun`)
instead of being spent, and `Settle` releases one reservation and charges what was used of it.

Why one module: just over 400 lines on purpose, since the events are one closed set: every
event's guard and effect, the guards they share, and the enumeration of enabled events
(`control_events`, `successors`, which must name every event kind) are read and changed
together, and proofs/encoding.py mirrors them one rule per method.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from model.graph import LoopGraph
from model.persistent import added, replaced_many
from model.state import Outcome, RunState, Status, changed, with_node

EPS = 1e-9  # tolerance for float spend comparisons (units are seconds or currency)


class Disabled(Exception):
    """The event's guard does not hold in this state."""


class Event:
    """Base of the declared transitions."""

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:  # pragma: no cover
        raise NotImplementedError


def step(graph: LoopGraph, s: RunState, event: Event) -> RunState:
    """The transition function: the successor of `s` under `event`, or `Disabled`."""
    reason = event.why_not(graph, s)
    if reason is not None:
        raise Disabled(f"{event}: {reason}")
    return event.apply(graph, s)


def enabled(graph: LoopGraph, s: RunState, event: Event) -> bool:
    return event.why_not(graph, s) is None


# ---- shared guards ------------------------------------------------------------------------------

def _live(s: RunState) -> str | None:
    return f"the run has ended ({s.outcome.value})" if s.ended else None


def _ready(graph: LoopGraph, s: RunState, node: str) -> str | None:
    """Guard shared by Begin and Refuse: `node` may start its next attempt now. (Reads the
    status tuple by index: the explorer evaluates this guard millions of times.)"""
    i = graph._index.get(node)
    if i is None:
        return f"unknown node {node!r}"
    if (why := _live(s)) is not None:
        return why
    status = s.status
    if (r := s.running(graph)) is not None:
        return f"{r!r} has an attempt in flight"
    if (x := s.exhausted(graph)) is not None:
        return f"{x!r} is exhausted and must be repaired or fail first"
    if status[i] is not Status.PENDING:
        return f"{node!r} is {status[i].value}, not PENDING"
    index = graph._index
    for p in graph.nodes[i].needs:
        if status[index[p]] is not Status.DONE:
            return f"predecessor {p!r} is not DONE"
    return None


def _fits(graph: LoopGraph, s: RunState, node: str) -> bool:
    return s.settled + graph.node(node).spend_ceiling <= graph.spend_budget + EPS


def _in_attempt(graph: LoopGraph, s: RunState, node: str | None = None) -> str | None:
    if (why := _live(s)) is not None:
        return why
    r = s.running(graph)
    if r is None:
        return "no attempt is in flight"
    if node is not None and r != node:
        return f"the attempt in flight is {r!r}, not {node!r}"
    return None


def _end_attempt(graph: LoopGraph, s: RunState, node: str, passed: bool) -> RunState:
    """An attempt ends: PASS -> DONE (recorded for this activation); else retry or EXHAUSTED."""
    i = graph.index(node)
    if passed:
        return with_node(s, i, status=Status.DONE, attempt_spend=0.0,
                         passes=added(s.passes, (node, s.activation[i])))
    left = s.attempts[i] < graph.node(node).attempts
    return with_node(s, i, status=Status.PENDING if left else Status.EXHAUSTED, attempt_spend=0.0)


# ---- the events ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Begin(Event):
    """Start the next attempt of `node`; admitted only if settled + c_v fits B."""

    node: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _ready(graph, s, self.node)) is not None:
            return why
        return None if _fits(graph, s, self.node) else "settled + c_v exceeds the budget B"

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        i = graph.index(self.node)
        return with_node(s, i, status=Status.RUNNING, attempts=s.attempts[i] + 1,
                         attempts_total=s.attempts_total + 1, attempt_spend=0.0)


@dataclass(frozen=True)
class Refuse(Event):
    """The next attempt of `node` does not fit the budget: the run ends BUDGET_EXHAUSTED."""

    node: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _ready(graph, s, self.node)) is not None:
            return why
        return "the attempt fits the budget" if _fits(graph, s, self.node) else None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return changed(s, outcome=Outcome.BUDGET_EXHAUSTED)


def _reservation_fits(graph: LoopGraph, s: RunState, amount: float) -> bool:
    node = s.running(graph)
    assert node is not None
    within_attempt = s.attempt_spend + amount <= graph.node(node).spend_ceiling + EPS
    within_run = s.settled + s.reserved + amount <= graph.spend_budget + EPS
    return within_attempt and within_run


@dataclass(frozen=True)
class Reserve(Event):
    """Before a metered operation: hold `amount` against the attempt's ceiling and the budget.

    Several reservations may be outstanding at once (the concurrent model calls of one attempt,
    on top of a command's wall-clock reservation): each is checked against settled + every
    outstanding reservation, so concurrent operations cannot together pass c_v or B."""

    amount: float

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _in_attempt(graph, s)) is not None:
            return why
        if self.amount < 0:
            return "a reservation cannot be negative"
        return None if _reservation_fits(graph, s, self.amount) else "the reservation does not fit"

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return changed(s, reserved=s.reserved + self.amount,
                       attempt_spend=s.attempt_spend + self.amount)


@dataclass(frozen=True)
class Overrun(Event):
    """A reservation that does not fit, with none outstanding: the operation never runs and the
    attempt ends failed. (With reservations outstanding, an attempt cannot end: the engine
    refuses the operation instead, and the attempt goes on.)"""

    amount: float

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _in_attempt(graph, s)) is not None:
            return why
        if self.amount < 0:
            return "a reservation cannot be negative"
        if s.reserved > EPS:
            return "a reservation is outstanding; settle it first"
        return "the reservation fits" if _reservation_fits(graph, s, self.amount) else None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        node = s.running(graph)
        assert node is not None
        return _end_attempt(graph, s, node, passed=False)


@dataclass(frozen=True)
class Settle(Event):
    """After a metered operation: release its reservation `of` (None: every outstanding one) and
    charge `amount` of it, never more."""

    amount: float
    of: float | None = None

    def released(self, s: RunState) -> float:
        return s.reserved if self.of is None else self.of

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _in_attempt(graph, s)) is not None:
            return why
        # exact comparisons: an EPS here lets settled creep past B
        if self.of is not None and not 0 <= self.of <= s.reserved:
            return f"released reservation {self.of} is outside [0, reserved={s.reserved}]"
        if not 0 <= self.amount <= self.released(s):
            return f"settled amount {self.amount} is outside [0, reserved={self.released(s)}]"
        return None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        of = self.released(s)
        return changed(s, settled=s.settled + self.amount, reserved=s.reserved - of,
                       attempt_spend=s.attempt_spend - of + self.amount)


@dataclass(frozen=True)
class Verdict(Event):
    """The gate's verdict on the attempt in flight. Only a PASS can make a node DONE (G2)."""

    node: str
    passed: bool

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _in_attempt(graph, s, self.node)) is not None:
            return why
        return "a reservation is outstanding; settle it first" if s.reserved > EPS else None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return _end_attempt(graph, s, self.node, self.passed)


@dataclass(frozen=True)
class Abandon(Event):
    """Recovery of an attempt with no recorded end (a crash): its outcome is unknown, so it is
    charged its open reservation and given back -- the node returns to PENDING, the interrupted
    attempt does not count against a_v (nor in `attempts_total`), and the node runs it again.
    The repeated execution is counted in `abandoned`, never hidden.

    Why not count it as failed: a crash is the environment's doing, not the worker's; charging
    it an attempt would let a crash inside a node's last attempt fail a run the uncrashed run
    finishes (G7). Termination therefore assumes finitely many crashes (docs/proofs.md)."""

    node: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        return _in_attempt(graph, s, self.node)

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        i = graph.index(self.node)
        return with_node(s, i, status=Status.PENDING, attempts=s.attempts[i] - 1,
                         settled=s.settled + s.reserved, reserved=0.0, attempt_spend=0.0,
                         attempts_total=s.attempts_total - 1, abandoned=s.abandoned + 1)


@dataclass(frozen=True)
class Claim(Event):
    """A worker's self-report ("done", "all tests pass"). Recorded; never moves control flow."""

    node: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        return _in_attempt(graph, s, self.node)

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return s


@dataclass(frozen=True)
class Cancel(Event):
    """An operator ends `node`'s activation without a verdict. Allowed where `node` could
    begin (it is next to run: no attempt in flight, nothing exhausted, every predecessor DONE);
    it becomes EXHAUSTED with the attempts it has made, and the activation is recorded in
    `cancelled`. What follows is what follows any exhausted node: a Repair (a new activation)
    or Fail.

    Why EXHAUSTED and not a status of its own: the rules for an exhausted node already say what
    may happen next, and they are the ones G1 bounds -- a cancel throws attempts away, never
    adds any, so W still bounds the run. Why only a node next to run: a node that has not
    started must not end before its inputs are gated (G2, needs respected); an attempt in
    flight is ended by its gate, or given back by `Abandon` first (the engine honours a cancel
    on resume, after recovery)."""

    node: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        return _ready(graph, s, self.node)

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        i = graph.index(self.node)
        return with_node(s, i, status=Status.EXHAUSTED,
                         cancelled=added(s.cancelled, (self.node, s.activation[i])))


def _repair_budget_left(graph: LoopGraph, s: RunState) -> bool:
    return s.repairs_used < graph.repair_budget


@dataclass(frozen=True)
class Repair(Event):
    """Exhausted `node` triggers repair `target`: S_target returns to PENDING with a new
    activation and a fresh attempt counter; the global repair budget K is spent, never reset."""

    node: str
    target: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _live(s)) is not None:
            return why
        if (self.node, self.target) not in graph.repair_pairs:
            return f"({self.node!r}, {self.target!r}) is not in the repair relation"
        if s.status_of(graph, self.node) is not Status.EXHAUSTED:
            return f"{self.node!r} is not EXHAUSTED"
        return None if _repair_budget_left(graph, s) else "the global repair budget K is spent"

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        where = [graph.index(w) for w in graph.subtree(self.target)]
        act = s.activation  # one copy of each tuple (or O(|S_u|) updates of a long one)
        return changed(s, status=replaced_many(s.status, dict.fromkeys(where, Status.PENDING)),
                       activation=replaced_many(act, {i: act[i] + 1 for i in where}),
                       attempts=replaced_many(s.attempts, dict.fromkeys(where, 0)),
                       repairs_used=s.repairs_used + 1)


@dataclass(frozen=True)
class Fail(Event):
    """Exhausted `node` with no repair left (none declared, or K spent): the run ends FAILED."""

    node: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _live(s)) is not None:
            return why
        if s.status_of(graph, self.node) is not Status.EXHAUSTED:
            return f"{self.node!r} is not EXHAUSTED"
        has_pair = any(d == self.node for d, _ in graph.repair_pairs)
        if has_pair and _repair_budget_left(graph, s):
            return "a repair is still available"
        return None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return changed(s, outcome=Outcome.FAILED)


@dataclass(frozen=True)
class Finish(Event):
    """Every node is DONE: the run ends DONE."""

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _live(s)) is not None:
            return why
        if not s.all_done():
            return "not every node is DONE"
        return None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return changed(s, outcome=Outcome.DONE)


# The name of each event, declared once and read by every layer: a ledger record's `type` is it
# in lower case (engine/record/replay.py), an encoded event's kind is it (proofs/encoding.py). It
# is not read off the class, so renaming a class cannot change a stored record or a proof's trace.
EVENT_NAMES: Mapping[type[Event], str] = MappingProxyType({
    Begin: "Begin", Refuse: "Refuse", Reserve: "Reserve", Overrun: "Overrun", Settle: "Settle",
    Verdict: "Verdict", Abandon: "Abandon", Claim: "Claim", Cancel: "Cancel", Repair: "Repair",
    Fail: "Fail", Finish: "Finish"})
EVENT_TYPES: tuple[type[Event], ...] = tuple(EVENT_NAMES)
EVENT_OF_NAME: Mapping[str, type[Event]] = MappingProxyType(
    {name: cls for cls, name in EVENT_NAMES.items()})


def control_events(graph: LoopGraph, s: RunState) -> Iterator[Event]:
    """Every enabled event except spend metering: what a scheduler, the gates, the operator
    (Cancel) and the repair rule may do next. The explorer searches these; spend events take
    amounts, so are left out.

    Order: Finish; then per node Begin, Refuse, Cancel, Verdict PASS, Verdict FAIL, Fail; then
    repairs. Candidates are first narrowed by a necessary condition of each guard (every node
    DONE for Finish; a PENDING node, nothing in flight and nothing EXHAUSTED for Begin, Refuse
    and Cancel; the node in flight for Verdict; an EXHAUSTED node for Fail and Repair), then every
    guard is checked in full, so the result equals filtering all candidates by `enabled` (a test
    checks it).
    """
    if s.outcome is not Outcome.RUNNING:
        return
    status, names = s.status, graph.names
    begin, verdict = _node_events(graph)
    candidates: list[Event] = []
    if s.all_done():
        candidates.append(Finish())
    running, _, exhausted, _, _ = s.census()
    busy = running > 0
    if not busy and not exhausted:  # only Begin/Refuse/Cancel, for PENDING nodes
        for i, st in enumerate(status):
            if st is Status.PENDING:
                candidates += begin[i]
    else:
        stuck = set()
        for i, st in enumerate(status):
            if st is Status.RUNNING:
                candidates += verdict[i]
            elif st is Status.EXHAUSTED:
                candidates.append(Fail(names[i]))
                stuck.add(names[i])
        if stuck:
            candidates += [Repair(d, u) for d, u in graph.repair_pairs if d in stuck]
    for e in candidates:
        if e.why_not(graph, s) is None:
            yield e


def _node_events(graph: LoopGraph) -> tuple[list[tuple[Event, ...]], list[tuple[Event, ...]]]:
    """Per node index, (Begin, Refuse, Cancel) and (Verdict PASS, Verdict FAIL): immutable, so
    built once per graph shape."""
    memo = graph.shape_memo
    got: tuple[list[tuple[Event, ...]], list[tuple[Event, ...]]] | None = memo.get("node_events")
    if got is None:
        begin: list[tuple[Event, ...]] = [(Begin(n), Refuse(n), Cancel(n)) for n in graph.names]
        verdict: list[tuple[Event, ...]] = [(Verdict(n, True), Verdict(n, False))
                                            for n in graph.names]
        got = memo["node_events"] = (begin, verdict)
    return got


def successors(graph: LoopGraph, s: RunState) -> list[tuple[Event, RunState]]:
    """Every enabled control event with the state it leads to: `step` for each event of
    `control_events`, whose guard that has just checked, so it is not checked twice."""
    return [(e, e.apply(graph, s)) for e in control_events(graph, s)]


def all_control_candidates(graph: LoopGraph) -> list[Event]:
    """Every control event of `graph`, enabled or not (for checking `control_events`)."""
    candidates: list[Event] = [Finish()]
    for name in graph.names:
        candidates += [Begin(name), Refuse(name), Cancel(name), Verdict(name, True),
                       Verdict(name, False), Fail(name)]
    candidates += [Repair(d, u) for d, u in graph.repair_pairs]
    return candidates
