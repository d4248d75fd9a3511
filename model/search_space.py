"""The explorer's abstract state space on small integers: the fast path of the worst-case search.

Why it exists: the bound explorer visits 5.5 million abstract states at 4 nodes. Building a
`RunState` per successor (a frozen dataclass of 13 fields), checking every guard through the
event objects and then abstracting the result again cost ~28 microseconds a state, most of the
explorer's time. Here a state is what the memo key keeps -- the outcome, node statuses and
attempt counters as tuples of small ints, and repairs left -- and successors are computed on
it directly, several times faster.

Why it is not a second copy of the rules: its successors are the rule table's
(model/run_rules.py), compiled once per graph into one Python function over the abstract state
(model/rule_source.py), so a rule changed in the table changes the explorer with it.
`tests/model/test_search_space.py` walks every reachable `RunState` of the explorer's graphs through
`model.transitions.successors` and checks, state by state, that `AbstractSpace.successors` of
the state's projection yields the same events in the same order leading to the projections of
the model's successor states, and that `key` is the explorer's memo key (`model.explore._key`)
renamed one for one; a difference planted on either side fails it.

What it assumes, as the explorer does: only control events (no spend metering, so `settled`
stays 0 and `Begin` fits iff c_v plus the c_w of the attempts in flight <= B), and the run
starts from `initial_state`. With `graph.max_parallel` > 1 the statuses hold several RUNNING
nodes, so the key (statuses and counters) already tells the interleavings apart.
"""

from __future__ import annotations

from collections.abc import Callable

from loopproof.model.graph import LoopGraph
from loopproof.model.rule_source import DONE, compile_successors
from loopproof.model.run_rules import RULES, RunRules
from loopproof.model.state import Outcome, RunState, Status
from loopproof.model.transitions import (
    Begin,
    Cancel,
    Event,
    Fail,
    Finish,
    Refuse,
    Repair,
    Verdict,
)

# Status and outcome codes (indices into these tuples; model/rule_source.py compiles to them).
PENDING, RUNNING, EXHAUSTED = 0, 1, 3
STATUSES: tuple[Status, ...] = (Status.PENDING, Status.RUNNING, Status.DONE, Status.EXHAUSTED)
LIVE, ENDED_DONE, FAILED, BUDGET = 0, 1, 2, 3
OUTCOMES: tuple[Outcome, ...] = (Outcome.RUNNING, Outcome.DONE, Outcome.FAILED,
                                 Outcome.BUDGET_EXHAUSTED)
_STATUS_CODE = {s: i for i, s in enumerate(STATUSES)}
_OUTCOME_CODE = {o: i for i, o in enumerate(OUTCOMES)}

Ints = tuple[int, ...]
State = tuple[int, Ints, Ints, int]  # (outcome, statuses, counters, repairs left)
Key = tuple[int, Ints, Ints, int, int]  # a State and the readable pairs as a bitmask
Successor = tuple[Event, int, Ints, Ints, int]  # the event, then the State it leads to


class AbstractSpace:
    """One graph's transitions on abstract states. `universe` lists the repair pairs (d, u) the
    key's bitmask ranges over: one universe for every graph sharing a memo table (the allowed
    pairs of a DAG), so that equal bitmasks mean equal readable pairs. `rules`: the rule table
    the successors are compiled from (a variant of it, in tests)."""

    def __init__(self, graph: LoopGraph, universe: tuple[tuple[str, str], ...] | None = None,
                 rules: RunRules = RULES) -> None:
        self.graph = graph
        self.n = len(graph.names)
        self.universe = graph.repair_pairs if universe is None else universe
        self._bit = {p: 1 << b for b, p in enumerate(self.universe)}
        self._subtree: dict[str, tuple[Ints, int]] = {}
        names = graph.names
        events: list[tuple[Event, int | None]] = [(Finish(), None)]
        for i, x in enumerate(names):
            events += [(e, i) for e in (Begin(x), Refuse(x), Cancel(x), Verdict(x, True),
                                        Verdict(x, False), Fail(x))]
        events += [(Repair(d, u), graph.index(d)) for d, u in self.universe]
        self._successors: Callable[..., list[Successor]] = compile_successors(
            rules, graph, events, self.universe)
        self._set_pairs(graph)

    def _set_pairs(self, graph: LoopGraph) -> None:
        """What depends on R: per pair, in declaration order, d's index, the nodes of S_u, the
        event and the pair's bit; and R as a bitmask over the universe, for the successors."""
        index, subtrees = graph._index, self._subtree
        order = [p for p in self.universe if p in set(graph.repair_pairs)]
        if order != list(graph.repair_pairs):
            raise ValueError("the graph's repair pairs are not in the universe's order")
        pairs = []
        for d, u in graph.repair_pairs:
            sub = subtrees.get(u)
            if sub is None:
                nodes = tuple(sorted(index[w] for w in graph.subtree(u)))
                sub = subtrees[u] = (nodes, sum(1 << w for w in nodes))
            pairs.append((index[d], sub[0], Repair(d, u), self._bit[(d, u)], sub[1]))
        self.pairs: tuple[tuple[int, Ints, Repair, int, int], ...] = tuple(pairs)
        self.relation = sum(b for _, _, _, b, _ in pairs)
        self._readable: dict[tuple[Ints, int], int] = {}

    def with_relation(self, graph: LoopGraph) -> AbstractSpace:
        """The space of `graph`: the same nodes, needs and a_v as this one's graph, another R
        (and any K). Shares what does not read R, so each relation of a DAG costs little."""
        if graph.nodes != self.graph.nodes and tuple(
                (n.name, n.attempts, n.spend_ceiling, n.needs) for n in graph.nodes) != tuple(
                (n.name, n.attempts, n.spend_ceiling, n.needs) for n in self.graph.nodes):
            raise ValueError("with_relation: the graphs differ in more than their repairs")
        if graph.spend_budget != self.graph.spend_budget:
            raise ValueError("with_relation: the graphs differ in B")
        if graph.max_parallel != self.graph.max_parallel:
            raise ValueError("with_relation: the graphs differ in max_parallel")
        copy = object.__new__(AbstractSpace)
        copy.__dict__.update(self.__dict__)
        copy.graph = graph
        copy._set_pairs(graph)
        return copy

    # ---- states ---------------------------------------------------------------------------
    def start(self, repair_budget: int | None = None) -> State:
        """`initial_state`'s projection, with K = `repair_budget` (default: the graph's). The
        transitions read K only through repairs left, so one space serves every K."""
        zeros = (0,) * self.n
        return (LIVE, zeros, zeros,
                self.graph.repair_budget if repair_budget is None else repair_budget)

    def project(self, s: RunState, repair_budget: int | None = None) -> State:
        """The abstract state of a model state of this graph with K = `repair_budget` (default:
        the graph's): what `model.explore._key` keeps of it (a DONE or EXHAUSTED node's counter
        as 0), before the readable pairs are added."""
        k = self.graph.repair_budget if repair_budget is None else repair_budget
        status = tuple(_STATUS_CODE[x] for x in s.status)
        counters = tuple(0 if x >= DONE else i for x, i in zip(status, s.attempts, strict=True))
        return (_OUTCOME_CODE[s.outcome], status, counters, k - s.repairs_used)

    def key(self, outcome: int, status: Ints, counters: Ints, left: int) -> Key:
        """The memo key: the state and the pairs of R the rest of the run can read."""
        if left <= 0 or outcome != LIVE or not self.pairs:
            return (outcome, status, counters, left, 0)
        got = self._readable.get((status, left))
        if got is None:
            got = self._readable[(status, left)] = self._readable_bits(status, left)
        return (outcome, status, counters, left, got)

    def _readable_bits(self, status: Ints, left: int) -> int:
        """`model.explore.readable_pairs` as a bitmask: pairs whose d is not DONE, the not-DONE
        set grown `left - 1` times by S_u of its pairs."""
        may = 0
        for i, x in enumerate(status):
            if x != DONE:
                may |= 1 << i
        pairs = self.pairs
        for _ in range(left - 1):
            grown = may
            for d, _, _, _, sub in pairs:
                if may >> d & 1:
                    grown |= sub
            if grown == may:
                break
            may = grown
        bits = 0
        for d, _, _, b, _ in pairs:
            if may >> d & 1:
                bits |= b
        return bits

    def model_key(self, key: Key) -> tuple[object, ...]:
        """The same key in `model.explore._key`'s words (enums and name pairs), for the test
        that ties the two."""
        outcome, status, counters, left, bits = key
        names = self.graph.names
        pairs = tuple(sorted((names[d], e.target) for d, _, e, b, _ in self.pairs if bits & b))
        return (OUTCOMES[outcome], tuple(STATUSES[x] for x in status), counters, left, pairs)

    # ---- transitions ----------------------------------------------------------------------
    def successors(self, outcome: int, status: Ints, counters: Ints, left: int
                   ) -> list[Successor]:
        """`model.transitions.successors` on the abstract state: the enabled control events in
        `control_events`' order, each with the state it leads to (the rule table's, compiled)."""
        return self._successors(outcome, status, counters, left, self.relation)


class Deadlocked(Exception):
    """A live abstract state with no successor (`model.explore.Deadlock` on the model's side)."""


class AbstractWorstCase:
    """`model.explore.WorstCase` on abstract states: a memo table of the most attempts still to
    come, keyed by `AbstractSpace.key`; one table serves every graph of one DAG and a_v vector
    when their spaces share a pair universe."""

    def __init__(self) -> None:
        self.table: dict[Key, tuple[int, Event | None]] = {}

    @property
    def states(self) -> int:
        return len(self.table)

    def worst(self, space: AbstractSpace, repair_budget: int | None = None) -> int:
        """The most attempts any schedule and verdict sequence can begin from the start."""
        return self.remaining(space, *space.start(repair_budget))

    def remaining(self, space: AbstractSpace, outcome: int, status: Ints, counters: Ints,
                  left: int) -> int:
        key = space.key(outcome, status, counters, left)
        hit = self.table.get(key)
        if hit is not None:
            return hit[0]
        best, best_event = -1, None
        for event, o, st, at, lf in space.successors(outcome, status, counters, left):
            value = (event.__class__ is Begin) + self.remaining(space, o, st, at, lf)
            if value > best:
                best, best_event = value, event
        if best_event is None:
            if outcome == LIVE:
                raise Deadlocked(key)
            best = 0
        self.table[key] = (best, best_event)
        return best

    def schedule(self, space: AbstractSpace, repair_budget: int | None = None) -> list[Event]:
        """The events of one run from the start that begins the most attempts."""
        state = space.start(repair_budget)
        self.remaining(space, *state)
        events: list[Event] = []
        while (event := self.table[space.key(*state)][1]) is not None:
            events.append(event)
            state = next(s[1:] for s in space.successors(*state) if s[0] == event)
        return events
