"""The declared transitions of a bounded-loop run: the only way a `RunState` changes.

Each event is a small frozen dataclass naming its arguments; its guard (`why_not`, the reason
it is disabled, or None) and its effect (`apply`) are the rule of its kind in the rule table
(model/run_rules.py), evaluated on Python values (model/python_values.py). `step` checks the
guard and applies the effect; a disabled event raises `Disabled`, so no caller can move a
node's status by hand (Automat's rule).

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
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar

from loopproof.model import python_values
from loopproof.model.graph import LoopGraph
from loopproof.model.run_rules import EPS as EPS  # the spend tolerance, read by the engine
from loopproof.model.run_rules import RULES, RunRules
from loopproof.model.state import Outcome, RunState, Status


class Disabled(Exception):
    """The event's guard does not hold in this state."""


class Event:
    """Base of the declared transitions: its guard and effect are the rule table's for its
    `kind` (set from EVENT_NAMES below)."""

    kind: ClassVar[str] = ""

    def why_not(self, graph: LoopGraph, s: RunState) -> str | None:
        return python_values.why_not(RULES, graph, s, self)

    def apply(self, graph: LoopGraph, s: RunState) -> RunState:
        return python_values.apply(RULES, graph, s, self)


def step(graph: LoopGraph, s: RunState, event: Event, rules: RunRules | None = None) -> RunState:
    """The transition function: the successor of `s` under `event`, or `Disabled` (under
    `rules`, a variant of the table, when given)."""
    reason = event.why_not(graph, s) if rules is None else \
        python_values.why_not(rules, graph, s, event)
    if reason is not None:
        raise Disabled(f"{event}: {reason}")
    return event.apply(graph, s) if rules is None else python_values.apply(rules, graph, s, event)


def enabled(graph: LoopGraph, s: RunState, event: Event) -> bool:
    return event.why_not(graph, s) is None


# _SPEND_NODE: a spend event's `node` is left out of comparisons, since Reserve(x) and
# Reserve(x, node=n) are one event whenever n is the only attempt in flight (every serial run),
# and a serial ledger's record, which names its node, must still read back equal to the event
# the engine committed. Which attempt an event acts on is the guard's business, not equality's.


# ---- the events ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Begin(Event):
    """Start the next attempt of `node`; admitted only if settled + c_v fits B."""

    node: str


@dataclass(frozen=True)
class Refuse(Event):
    """The next attempt of `node` does not fit the budget: the run ends BUDGET_EXHAUSTED.
    Only with no attempt in flight: until they end, what they hold may come back, and Begin
    waits instead."""

    node: str


@dataclass(frozen=True)
class Reserve(Event):
    """Before a metered operation: hold `amount` against the attempt's ceiling and the budget.

    Several reservations may be outstanding at once (the concurrent model calls of one attempt,
    on top of a command's wall-clock reservation): each is checked against settled + every
    outstanding reservation, so concurrent operations cannot together pass c_v or B. `node`:
    whose attempt (None: the only one in flight)."""

    amount: float
    node: str | None = field(default=None, compare=False)  # (why: _SPEND_NODE)


@dataclass(frozen=True)
class Overrun(Event):
    """A reservation that does not fit, with none outstanding: the operation never runs and the
    attempt ends failed. (With reservations outstanding, an attempt cannot end: the engine
    refuses the operation instead, and the attempt goes on.) Only `node`'s attempt ends, and
    only its own reservations count as outstanding."""

    amount: float
    node: str | None = field(default=None, compare=False)  # (why: _SPEND_NODE)


@dataclass(frozen=True)
class Settle(Event):
    """After a metered operation: release its reservation `of` (None: every outstanding one of
    `node`'s attempt) and charge `amount` of it, never more. `node`: whose attempt (None: the
    only one in flight)."""

    amount: float
    of: float | None = None
    node: str | None = field(default=None, compare=False)  # (why: _SPEND_NODE)


@dataclass(frozen=True)
class Verdict(Event):
    """The gate's verdict on `node`'s attempt in flight. Only a PASS can make a node DONE (G2).
    Needs that attempt's own reservations settled (another attempt's may stay open)."""

    node: str
    passed: bool


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


@dataclass(frozen=True)
class Claim(Event):
    """A worker's self-report ("done", "all tests pass"). Recorded; never moves control flow."""

    node: str


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


@dataclass(frozen=True)
class Repair(Event):
    """Exhausted `node` triggers repair `target`: S_target returns to PENDING with a new
    activation and a fresh attempt counter; the global repair budget K is spent, never reset.
    Waits while a node of S_target has an attempt in flight: a reset never drops an attempt
    (nor its spend) that has not ended, and the repair follows once it has."""

    node: str
    target: str


@dataclass(frozen=True)
class Fail(Event):
    """Exhausted `node` with no repair left (none declared, or K spent): the run ends FAILED."""

    node: str


@dataclass(frozen=True)
class Finish(Event):
    """Every node is DONE: the run ends DONE."""


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
for _cls, _name in EVENT_NAMES.items():
    _cls.kind = _name  # the rule table's key: a rule is looked up by name, not by class


def control_events(graph: LoopGraph, s: RunState, rules: RunRules | None = None
                   ) -> Iterator[Event]:
    """Every enabled event except spend metering: what a scheduler, the gates, the operator
    (Cancel) and the repair rule may do next. The explorer searches these; spend events take
    amounts, so are left out. (`rules`: a variant of the rule table, for tests.)

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
        if (e.why_not(graph, s) if rules is None
                else python_values.why_not(rules, graph, s, e)) is None:
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


def successors(graph: LoopGraph, s: RunState, rules: RunRules | None = None
               ) -> list[tuple[Event, RunState]]:
    """Every enabled control event with the state it leads to: `step` for each event of
    `control_events`, whose guard that has just checked, so it is not checked twice."""
    if rules is not None:
        return [(e, python_values.apply(rules, graph, s, e))
                for e in control_events(graph, s, rules)]
    return [(e, e.apply(graph, s)) for e in control_events(graph, s)]


def all_control_candidates(graph: LoopGraph) -> list[Event]:
    """Every control event of `graph`, enabled or not (for checking `control_events`)."""
    candidates: list[Event] = [Finish()]
    for name in graph.names:
        candidates += [Begin(name), Refuse(name), Cancel(name), Verdict(name, True),
                       Verdict(name, False), Fail(name)]
    candidates += [Repair(d, u) for d, u in graph.repair_pairs]
    return candidates
