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

Several attempts may be in flight, at most `graph.max_parallel` (default 1: the serial model,
guard for guard and float for float). Begin then counts what every attempt in flight may still
charge (its c_w minus what it has settled: `RunState.held`), so each admitted attempt can spend
its whole c_v whatever the others do. Spend events name their attempt's node (`node=None`: the
only one in flight). The run's endings wait for the attempts in flight: Refuse and Fail need none
in flight, and a Repair none in the subtree it resets (docs/design.md, "Several attempts").

Why one module: just over 400 lines on purpose, since the events are one closed set: every
event's guard and effect, the guards they share, and the enumeration of enabled events
(`control_events`, `successors`, which must name every event kind) are read and changed
together, and proofs/encoding.py mirrors them one rule per method.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from loopproof.model.graph import LoopGraph
from loopproof.model.persistent import added, replaced_many
from loopproof.model.state import Outcome, RunState, Status, changed, with_node

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


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(names)


def _ready(graph: LoopGraph, s: RunState, node: str) -> str | None:
    """Guard shared by Begin, Refuse and Cancel: `node` may start its next attempt now. (Reads
    the status tuple by index: the explorer evaluates this guard millions of times.)"""
    i = graph._index.get(node)
    if i is None:
        return f"unknown node {node!r}"
    if (why := _live(s)) is not None:
        return why
    status = s.status
    if s.census()[0] >= graph.max_parallel:
        if graph.max_parallel == 1:
            return f"{s.running(graph)!r} has an attempt in flight"
        return (f"max_parallel = {graph.max_parallel} attempts are in flight "
                f"({_listed(s.in_flight(graph))})")
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
    """settled + what the attempts in flight may still charge + c_v fits B (none in flight:
    settled + c_v <= B, the serial rule)."""
    return s.held(graph) + graph.node(node).spend_ceiling <= graph.spend_budget + EPS


def _unfit(graph: LoopGraph, s: RunState) -> str:
    if s.census()[0] == 0:
        return "settled + c_v exceeds the budget B"
    return (f"settled + the ceilings held by the attempts in flight "
            f"({_listed(s.in_flight(graph))}) + c_v exceeds the budget B: wait for one to end")


def _in_attempt(graph: LoopGraph, s: RunState, node: str | None = None) -> str | None:
    """`node` (None: the only attempt in flight) has an attempt in flight."""
    if (why := _live(s)) is not None:
        return why
    count = s.census()[0]
    if count == 0:
        return "no attempt is in flight"
    if count == 1 or graph.max_parallel == 1:  # the serial rule: the first running node's
        r = s.running(graph)
        return None if node is None or r == node else f"the attempt in flight is {r!r}, not {node!r}"
    if node is None:
        return (f"several attempts are in flight ({_listed(s.in_flight(graph))}): the event "
                f"must name its node")
    i = graph._index.get(node)
    if i is None or s.status[i] is not Status.RUNNING:
        return f"{node!r} has no attempt in flight (in flight: {_listed(s.in_flight(graph))})"
    return None


# _SPEND_NODE: a spend event's `node` is left out of comparisons, since Reserve(x) and
# Reserve(x, node=n) are one event whenever n is the only attempt in flight (every serial run),
# and a serial ledger's record, which names its node, must still read back equal to the event
# the engine committed. Which attempt an event acts on is the guard's business, not equality's.


def _whose(graph: LoopGraph, s: RunState, node: str | None) -> int:
    """The node index of the attempt an event names (None: the only one in flight)."""
    return s.census()[1] if node is None else graph.index(node)


def _spend_moved(s: RunState, i: int, reserved: float, spent: float
                 ) -> tuple[tuple[int, float, float], ...] | None:
    """`accounts` with node `i`'s moved to (reserved, spent); None (kept) when it is empty."""
    if not s.accounts:
        return None
    return tuple((i, reserved, spent) if a[0] == i else a for a in s.accounts)


def _leaving(graph: LoopGraph, s: RunState, i: int) -> dict[str, Any]:
    """The run-wide spend fields once node `i`'s attempt leaves the flight (its reservations
    already dealt with). One in flight, or a serial graph: the serial rule (spend back to 0)."""
    if s.census()[0] <= 1 or graph.max_parallel == 1:
        return {"attempt_spend": 0.0}
    rest = tuple(a for a in s.accounts if a[0] != i)
    reserved, spent = s.account(graph, i)
    if len(rest) == 1:  # one attempt left: the totals are its own again (RunState)
        return {"accounts": (), "reserved": rest[0][1], "attempt_spend": rest[0][2]}
    return {"accounts": rest, "reserved": s.reserved - reserved,
            "attempt_spend": s.attempt_spend - spent}


def _end_attempt(graph: LoopGraph, s: RunState, node: str, passed: bool) -> RunState:
    """An attempt ends: PASS -> DONE (recorded for this activation); else retry or EXHAUSTED."""
    i = graph.index(node)
    if passed:
        return with_node(s, i, status=Status.DONE, **_leaving(graph, s, i),
                         passes=added(s.passes, (node, s.activation[i])))
    left = s.attempts[i] < graph.node(node).attempts
    return with_node(s, i, status=Status.PENDING if left else Status.EXHAUSTED, **_leaving(graph, s, i))


# ---- the events ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Begin(Event):
    """Start the next attempt of `node`; admitted only if settled + c_v fits B."""

    node: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _ready(graph, s, self.node)) is not None:
            return why
        return None if _fits(graph, s, self.node) else _unfit(graph, s)

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        i = graph.index(self.node)
        count, first = s.census()[:2]
        if count == 0:
            return with_node(s, i, status=Status.RUNNING, attempts=s.attempts[i] + 1,
                             attempts_total=s.attempts_total + 1, attempt_spend=0.0)
        flying = ((first, s.reserved, s.attempt_spend),) if count == 1 else s.accounts
        return with_node(s, i, status=Status.RUNNING, attempts=s.attempts[i] + 1,
                         attempts_total=s.attempts_total + 1,
                         accounts=tuple(sorted((*flying, (i, 0.0, 0.0)))))


@dataclass(frozen=True)
class Refuse(Event):
    """The next attempt of `node` does not fit the budget: the run ends BUDGET_EXHAUSTED.
    Only with no attempt in flight: until they end, what they hold may come back, and Begin
    waits instead."""

    node: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _ready(graph, s, self.node)) is not None:
            return why
        if s.census()[0] > 0:
            return (f"attempts are in flight ({_listed(s.in_flight(graph))}): a refusal waits "
                    f"until none is")
        return "the attempt fits the budget" if _fits(graph, s, self.node) else None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return changed(s, outcome=Outcome.BUDGET_EXHAUSTED)


def _reservation_fits(graph: LoopGraph, s: RunState, i: int, amount: float) -> bool:
    within_attempt = s.account(graph, i)[1] + amount <= graph.nodes[i].spend_ceiling + EPS
    within_run = s.settled + s.reserved + amount <= graph.spend_budget + EPS
    return within_attempt and within_run


@dataclass(frozen=True)
class Reserve(Event):
    """Before a metered operation: hold `amount` against the attempt's ceiling and the budget.

    Several reservations may be outstanding at once (the concurrent model calls of one attempt,
    on top of a command's wall-clock reservation): each is checked against settled + every
    outstanding reservation, so concurrent operations cannot together pass c_v or B. `node`:
    whose attempt (None: the only one in flight)."""

    amount: float
    node: str | None = field(default=None, compare=False)  # (why: _SPEND_NODE)

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _in_attempt(graph, s, self.node)) is not None:
            return why
        if self.amount < 0:
            return "a reservation cannot be negative"
        i = _whose(graph, s, self.node)
        return None if _reservation_fits(graph, s, i, self.amount) else \
            "the reservation does not fit"

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        i = _whose(graph, s, self.node)
        reserved, spent = s.account(graph, i)
        return changed(s, reserved=s.reserved + self.amount,
                       attempt_spend=s.attempt_spend + self.amount,
                       accounts=_spend_moved(s, i, reserved + self.amount, spent + self.amount))


@dataclass(frozen=True)
class Overrun(Event):
    """A reservation that does not fit, with none outstanding: the operation never runs and the
    attempt ends failed. (With reservations outstanding, an attempt cannot end: the engine
    refuses the operation instead, and the attempt goes on.) Only `node`'s attempt ends, and
    only its own reservations count as outstanding."""

    amount: float
    node: str | None = field(default=None, compare=False)  # (why: _SPEND_NODE)

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _in_attempt(graph, s, self.node)) is not None:
            return why
        if self.amount < 0:
            return "a reservation cannot be negative"
        i = _whose(graph, s, self.node)
        if s.account(graph, i)[0] > EPS:
            return "a reservation is outstanding; settle it first"
        return "the reservation fits" if _reservation_fits(graph, s, i, self.amount) else None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return _end_attempt(graph, s, graph.names[_whose(graph, s, self.node)], passed=False)


@dataclass(frozen=True)
class Settle(Event):
    """After a metered operation: release its reservation `of` (None: every outstanding one of
    `node`'s attempt) and charge `amount` of it, never more. `node`: whose attempt (None: the
    only one in flight)."""

    amount: float
    of: float | None = None
    node: str | None = field(default=None, compare=False)  # (why: _SPEND_NODE)

    def released(self, graph: LoopGraph, s: RunState) -> float:
        return s.account(graph, _whose(graph, s, self.node))[0] if self.of is None else self.of

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _in_attempt(graph, s, self.node)) is not None:
            return why
        # exact comparisons: an EPS here lets settled creep past B
        held = s.account(graph, _whose(graph, s, self.node))[0]
        if self.of is not None and not 0 <= self.of <= held:
            return f"released reservation {self.of} is outside [0, reserved={held}]"
        if not 0 <= self.amount <= self.released(graph, s):
            return (f"settled amount {self.amount} is outside "
                    f"[0, reserved={self.released(graph, s)}]")
        return None

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        i = _whose(graph, s, self.node)
        of = self.released(graph, s)
        reserved, spent = s.account(graph, i)
        return changed(s, settled=s.settled + self.amount, reserved=s.reserved - of,
                       attempt_spend=s.attempt_spend - of + self.amount,
                       accounts=_spend_moved(s, i, reserved - of, spent - of + self.amount))


@dataclass(frozen=True)
class Verdict(Event):
    """The gate's verdict on `node`'s attempt in flight. Only a PASS can make a node DONE (G2).
    Needs that attempt's own reservations settled (another attempt's may stay open)."""

    node: str
    passed: bool

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _in_attempt(graph, s, self.node)) is not None:
            return why
        outstanding = s.account(graph, graph.index(self.node))[0] > EPS
        return "a reservation is outstanding; settle it first" if outstanding else None

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
        if s.census()[0] > 1 and graph.max_parallel > 1:  # only this one; the others fly on
            charged = s.account(graph, i)[0]
            return with_node(s, i, status=Status.PENDING, attempts=s.attempts[i] - 1,
                             settled=s.settled + charged, attempts_total=s.attempts_total - 1,
                             abandoned=s.abandoned + 1, **_leaving(graph, s, i))
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
    activation and a fresh attempt counter; the global repair budget K is spent, never reset.
    Waits while a node of S_target has an attempt in flight: a reset never drops an attempt
    (nor its spend) that has not ended, and the repair follows once it has."""

    node: str
    target: str

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        if (why := _live(s)) is not None:
            return why
        if (self.node, self.target) not in graph.repair_pairs:
            return f"({self.node!r}, {self.target!r}) is not in the repair relation"
        if s.status_of(graph, self.node) is not Status.EXHAUSTED:
            return f"{self.node!r} is not EXHAUSTED"
        if not _repair_budget_left(graph, s):
            return "the global repair budget K is spent"
        if graph.max_parallel > 1 and s.census()[0] > 0:  # (serial: none is, when one is exhausted)
            reset = graph.subtree(self.target)
            for w in s.in_flight(graph):
                if w in reset:
                    return (f"repair ({self.node}, {self.target}) would reset {w!r}, whose "
                            f"attempt is in flight: wait for it to end")
        return None

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
        if graph.max_parallel > 1 and s.census()[0] > 0:
            return (f"attempts are in flight ({_listed(s.in_flight(graph))}): the run fails "
                    f"once they end")
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
    DONE for Finish; a PENDING node, fewer than max_parallel in flight and nothing EXHAUSTED for
    Begin, Refuse and Cancel; a node in flight for Verdict; an EXHAUSTED node for Fail and
    Repair), then every guard is checked in full, so the result equals filtering all candidates
    by `enabled` (a test checks it).
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
    elif not exhausted and running < graph.max_parallel:  # several in flight, room for more
        for i, st in enumerate(status):
            if st is Status.PENDING:
                candidates += begin[i]
            elif st is Status.RUNNING:
                candidates += verdict[i]
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
