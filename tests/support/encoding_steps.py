"""What the differential tests of the run encoding draw, what they check, and the faults they
must catch (tests/proofs/test_encoding.py).

A case is (graph, state, step): the state is reached from Init by a drawn prefix of enabled
events, and the step under test is drawn *separately*, of a given kind, after the prefix; so
every kind the model declares is the step under test, enabled (the encoding must accept the
model's successor and nothing else) and disabled (the encoding must accept no successor).

Planted faults are generated from the encoding itself, never listed by hand: for each kind, its
guard negated, its guard dropped, each conjunct of its guard (flattened through the shared
helpers) dropped or negated, and each field of its effect written wrong (the value the update
gives it, or the unchanged value when it gives none, moved by one step). A dropped conjunct that
changes no transition on a state satisfying the proved invariants (G1's structural facts and
G3's spend bound) is not a fault and is not planted.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TypeVar

import z3
from hypothesis import strategies as st

from loopproof.model.graph import LoopGraph
from loopproof.model.run_rules import RunRules
from loopproof.model.state import Outcome, RunState, Status, initial_state
from loopproof.model.transitions import (
    EVENT_TYPES,
    Abandon,
    Begin,
    Cancel,
    Claim,
    Event,
    Fail,
    Finish,
    Overrun,
    Refuse,
    Repair,
    Reserve,
    Settle,
    Verdict,
    enabled,
    step,
)
from loopproof.proofs.encoding import (
    KINDS,
    Ev,
    OutcomeSort,
    Params,
    RunEncoding,
    State,
    StatusSort,
)
from loopproof.proofs.z3_values import Conjuncts
from tests.support import strategies

NAMES = ("a", "b", "c", "d")
CEILINGS = (0.0, 0.5, 1.0, 2.0, 3.0)
BUDGETS = (math.inf, 8.0, 4.0, 2.5, 1.0, 0.0)  # roomy first: most walks run far
TIGHT = (0.0, 1.0, 2.5, 4.0)  # for Refuse: a run soon out of budget
AMOUNTS = (-0.25, 0.0, 0.5, 2.0)  # binary fractions: float sums stay exact
ENDING = (Finish, Fail, Refuse)  # left out of prefixes: they end the run

assert set(KINDS) == {t.__name__ for t in EVENT_TYPES}, "the encoding and the model differ"


def graphs(repairs_needed: bool = False, tight: bool = False) -> st.SearchStrategy[LoopGraph]:
    """The graphs of the encoding's cases (tests/support/strategies.py): 1-4 nodes, a_v of 1-2,
    every ceiling and budget above, at least one repair pair when `repairs_needed` (the
    encoding has a Repair event only for a pair of the graph), and large ceilings and small
    budgets first when `tight`."""
    return strategies.graphs(nodes=(1, 4), max_needs=2, max_repairs=2, attempts=(1, 2),
                             ceilings=CEILINGS[::-1] if tight else CEILINGS,
                             repair_budget=(int(repairs_needed), 2),
                             budgets=TIGHT if tight else BUDGETS,
                             first_repairs=int(repairs_needed), names=NAMES)


def amounts(graph: LoopGraph, s: RunState) -> list[float]:
    """Spend amounts worth trying from `s`: fixed ones (a negative one included) and the edges
    of what still fits -- the outstanding reservation, the attempt's and the run's headroom --
    and a quarter either side of each."""
    edges = {s.reserved}
    node = s.running(graph)
    if node is not None:
        edges.add(graph.node(node).spend_ceiling - s.attempt_spend)
    if graph.spend_budget != math.inf:
        edges.add(graph.spend_budget - s.settled - s.reserved)
    near = {e + d for e in edges for d in (-0.25, 0.0, 0.25)}
    return sorted(set(AMOUNTS) | near)


def instances(kind: str, graph: LoopGraph, s: RunState) -> list[Event]:
    """Every instance of one kind of event in `graph` from `s` (amounts per `amounts`)."""
    names = graph.names
    if kind in ("Reserve", "Overrun"):
        return [(Reserve if kind == "Reserve" else Overrun)(a) for a in amounts(graph, s)]
    if kind == "Settle":  # releasing every outstanding reservation, or one of them (`of`)
        ofs = sorted({-0.25, s.reserved, s.reserved + 0.25})
        return [Settle(a) for a in amounts(graph, s)] + [
            Settle(a, of) for of in ofs for a in sorted({0.0, of, of + 0.25})]
    if kind == "Verdict":
        return [Verdict(v, p) for v in names for p in (True, False)]
    if kind == "Repair":
        return [Repair(d, u) for d, u in graph.repair_pairs]
    if kind == "Finish":
        return [Finish()]
    cls = {"Begin": Begin, "Refuse": Refuse, "Abandon": Abandon, "Claim": Claim,
           "Cancel": Cancel, "Fail": Fail}[kind]
    return [cls(v) for v in names]


def all_events(graph: LoopGraph, s: RunState) -> list[Event]:
    return [e for k in KINDS for e in instances(k, graph, s)]


@dataclass(frozen=True)
class Case:
    """A state of a graph and a kind: every instance of the kind from the state is a step
    under test (enabled ones and disabled ones alike), and so is each (state, step) pair in
    `nearby` (states next to `state`, see `neighbours`)."""

    graph: LoopGraph
    state: RunState
    kind: str
    mode: str = ""  # how the case was drawn (`cases`), for the statistics
    nearby: tuple[tuple[RunState, Event], ...] = ()

    @property
    def checks(self) -> list[tuple[RunState, Event]]:
        return [(self.state, e) for e in instances(self.kind, self.graph, self.state)] + \
            list(self.nearby)

    @property
    def enabled_steps(self) -> list[Event]:
        return [e for x, e in self.checks if enabled(self.graph, x, e)]

    @property
    def disabled_steps(self) -> list[Event]:
        return [e for x, e in self.checks if not enabled(self.graph, x, e)]


# Prefix events that move a run toward where the kind under test can fire: a failed verdict
# toward exhaustion (Repair, Fail), settled spend toward a budget that no longer fits (Refuse,
# Overrun), an attempt in flight toward everything that needs one.
TOWARD: dict[str, tuple[type, ...]] = {
    "Repair": (Begin, Verdict, Overrun), "Fail": (Begin, Verdict, Overrun, Repair), "Refuse": (Begin, Reserve, Settle),
    "Overrun": (Begin, Reserve, Settle), "Finish": (Begin, Verdict, Repair),
}
CANCEL_LEADS_TO = ("Cancel", "Repair", "Fail")  # a cancel exhausts a node: Repair or Fail next


def _toward(kind: str, e: Event) -> bool:
    if isinstance(e, Verdict) and kind in ("Repair", "Fail"):
        return not e.passed
    if isinstance(e, Verdict) and kind == "Finish":
        return e.passed
    if isinstance(e, Reserve | Settle) and kind in ("Refuse", "Overrun"):
        return e.amount > 0
    return isinstance(e, TOWARD.get(kind, (Begin,)))


WALK = 30  # the longest prefix
MODES = ("on", "on", "on", "off", "off", "near", "near", "near", "near", "near")


@st.composite
def cases(draw, kind: str, near: bool = True) -> Case:
    """A case of kind `kind`. A prefix of drawn enabled events is walked from Init (steered
    toward where `kind` fires, rarely through an event that ends the run); then, by mode:

    - "on" (3 in 10): the last state of the walk where some instance of `kind` is enabled;
    - "off" (2 in 10): any state of the walk (ended states too);
    - "near" (5 in 10, only when `near`): as "on", plus the states next to it where exactly
      one part of an instance's guard changes its value (`neighbours`). Such states need not
      be reachable: inductive proofs range over all states, so the encoding must equal the
      model on all of them.

    Without `near` (the unbounded test: fewer cases, each slower), a Cancel enters the prefix
    only when the kind is one it leads to (CANCEL_LEADS_TO): after a cancel most kinds cannot
    fire until a Repair, and too few of its cases would have an enabled step.
    """
    graph = draw(graphs(repairs_needed=kind == "Repair", tight=kind == "Refuse"))

    def on(x: RunState) -> list[Event]:
        return [e for e in instances(kind, graph, x) if enabled(graph, x, e)]

    mode = draw(st.sampled_from(MODES if near else tuple(m for m in MODES if m != "near")))
    s = initial_state(graph)
    walk = [s]
    seek = mode in ("on", "near")  # walk on until `kind` is enabled, then stop a quarter of times
    for _ in range(WALK if seek else draw(st.integers(0, WALK))):
        if seek and on(s) and draw(st.integers(0, 3)) == 0:
            break
        ending = draw(st.integers(0, 9)) == 0
        en = [e for e in all_events(graph, s) if enabled(graph, s, e)
              and (ending or not isinstance(e, ENDING))
              and (near or kind in CANCEL_LEADS_TO or not isinstance(e, Cancel))]
        if not en:
            break
        steer = [e for e in en if _toward(kind, e)]
        pool = steer if steer and draw(st.integers(0, 7)) > 0 else en
        kinds = sorted({type(e).__name__ for e in pool})
        chosen = draw(st.sampled_from(kinds))
        s = step(graph, s, draw(st.sampled_from([e for e in pool
                                                 if type(e).__name__ == chosen])))
        walk.append(s)
        if s.ended:
            break
    if seek and any(on(x) for x in walk):
        s = [x for x in walk if on(x)][-1]
        nearby = draw(neighbours(graph, s, kind)) if mode == "near" else ()
        return Case(graph, s, kind, mode, nearby)
    return Case(graph, draw(st.sampled_from(walk)), kind, "off" if mode == "off" else "missed")


QUARTERS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def field_values(graph: LoopGraph, s: RunState, field: str) -> list[object]:
    """The values a nudge may give `field` (a family, or a node's field such as `status:b`)."""
    family, _, node = field.partition(":")
    if family == "status":
        return list(Status)
    if family == "activation":
        return [0, 1, 2, 3]
    if family == "attempts":
        return list(range(graph.node(node).attempts + 2))
    if family in ("passes", "cancelled"):
        return [True, False]
    if family == "repairs_used":
        return list(range(graph.repair_budget + 2))
    if family in ("attempts_total", "abandoned"):
        return [max(0, getattr(s, family) - 1), getattr(s, family) + 1]
    if family == "outcome":
        return list(Outcome)
    return list(QUARTERS)


def with_field(graph: LoopGraph, s: RunState, field: str, x: object) -> RunState:
    """`s` with `field` set to `x` (for `passes` and `cancelled`: whether the node's current
    activation has a PASS, was cancelled)."""
    family, _, node = field.partition(":")
    fresh = {"_census": None}  # the status census is derived: counted again, never copied
    if not node:
        return replace(s, **{family: x}, **fresh)
    i = graph.index(node)
    if family in ("passes", "cancelled"):
        here, old_set = (node, s.activation[i]), getattr(s, family)
        return replace(s, **{family: old_set | {here} if x else old_set - {here}}, **fresh)
    old = getattr(s, family)
    return replace(s, **{family: old[:i] + (x,) + old[i + 1:]}, **fresh)


def all_fields(graph: LoopGraph) -> list[str]:
    """Every field of a state of `graph`, node fields named per node."""
    node = [f"{f}:{v}" for f in NODE_FIELDS for v in graph.names]
    return node + [f for f in FIELDS if f not in NODE_FIELDS]


def fields_of(term: z3.ExprRef) -> list[str]:
    """The state fields a term reads (`status:b`, `reserved`, ...)."""
    return sorted(n for n in leaves(term) if n in FIELDS or ":" in n)


def holds(enc: RunEncoding, s: RunState, term: z3.BoolRef, x: State,
          memo: dict[tuple[RunState, str], tuple] | None = None) -> bool:
    """Does `term` (over the encoded state `x`) hold in the concrete state `s`? (`memo` keeps
    each state's fields as Z3 values for one encoding and `x`: building them is most of the
    cost.)"""
    return value_in(enc, s, term, x, memo) is True


def value_in(enc: RunEncoding, s: RunState, term: z3.BoolRef, x: State,
             memo: dict[tuple[RunState, str], tuple] | None = None) -> bool | None:
    """`term`'s value in the concrete state `s`: True, False, or None when it does not
    simplify to a literal (`holds` is True only for True, its negation only for False)."""
    memo = {} if memo is None else memo
    subs = []
    for f in fields_of(term):  # only the fields the term reads: the rest replace nothing
        if (s, f) not in memo:
            family, _, node = f.partition(":")
            key = (family, node or None)
            memo[(s, f)] = (x.terms[key], enc.value_of(s, key))
        subs.append(memo[(s, f)])
    v = z3.simplify(z3.substitute(term, *subs))
    return True if z3.is_true(v) else False if z3.is_false(v) else None


@st.composite
def neighbours(draw, graph: LoopGraph, s: RunState,
               kind: str) -> tuple[tuple[RunState, Event], ...]:
    """For a drawn enabled instance of `kind` and a drawn disabled one, and each part of its
    encoded guard (one per `conjunct_key`): `s` with one field changed so that this part
    changes its truth value and every other part keeps its own (when some value of a field
    it reads does that); and `s` with one drawn field set to a drawn value."""
    every = instances(kind, graph, s)
    on = [e for e in every if enabled(graph, s, e)]
    off = [e for e in every if not enabled(graph, s, e)]
    enc = encoding_of(graph)
    x = state_of(graph, "s")
    memo: dict[tuple[RunState, str], tuple] = {}
    out: list[tuple[RunState, Event]] = []
    for event in [draw(st.sampled_from(group)) for group in (on, off) if group]:
        ev = Ev.of_event(event)
        parts = conjuncts(real_guard(graph, event))
        base = [value_in(enc, s, c, x, memo) for c in parts]
        now = [v is True for v in base]
        reads = [set(fields_of(c)) for c in parts]
        values: dict[tuple[RunState, int], bool | None] = {}

        def value(y: RunState, f: str, i: int, parts=parts, base=base, reads=reads,
                  values=values) -> bool | None:
            """Part i's value in `y`, which is `s` with field `f` changed: a part that does not
            read `f` (it reads nothing but state fields and literals) keeps its value in `s`."""
            if f not in reads[i]:
                return base[i]
            if (y, i) not in values:
                values[(y, i)] = value_in(enc, y, parts[i], x, memo)
            return values[(y, i)]

        for key in sorted({conjunct_key(c, ev) for c in parts}):
            j = draw(st.sampled_from([i for i, c in enumerate(parts)
                                      if conjunct_key(c, ev) == key]))
            # part j flipped and every other part as it is: the conjunction of each part or its
            # negation holds exactly when each part's value is the wanted literal
            want = [v != (i == j) for i, v in enumerate(now)]
            nudges = [(with_field(graph, s, f, v), f) for f in fields_of(parts[j])
                      for v in field_values(graph, s, f)]
            flips = [y for y, f in nudges if (value(y, f, j) is True) != now[j]
                     and all(value(y, f, i) is w for i, w in enumerate(want))]
            if flips:
                out.append((draw(st.sampled_from(flips)), event))
        f = draw(st.sampled_from(all_fields(graph)))
        out.append((with_field(graph, s, f, draw(st.sampled_from(field_values(graph, s, f)))),
                    event))
    return tuple(out)


# ---- encodings shared by the cases of a graph ---------------------------------------------------
# Building Z3 terms is most of a check's cost, and a graph's encoding under the real rules, its
# numbers, its states' constants (by tag) and its guards depend on nothing else: each is built
# once per graph (and event) and read by every check and every planted fault's encoding.

@functools.lru_cache(maxsize=1024)
def params_of(graph: LoopGraph) -> Params:
    return Params.of(graph)


@functools.lru_cache(maxsize=1024)
def encoding_of(graph: LoopGraph) -> RunEncoding:
    """`graph`'s encoding under the real rules."""
    return RunEncoding(graph, params_of(graph))


@functools.lru_cache(maxsize=4096)
def state_of(graph: LoopGraph, tag: str) -> State:
    """The state of `graph`'s encoding whose constants are tagged `tag` (the same under a
    planted fault's rules: a fault changes a rule, never the fields)."""
    return encoding_of(graph).fresh(tag)


@functools.lru_cache(maxsize=8192)
def real_guard(graph: LoopGraph, event: Event) -> z3.BoolRef:
    """The real rules' guard of `event` on `state_of(graph, "s")`."""
    return encoding_of(graph).guard(state_of(graph, "s"), Ev.of_event(event))


# ---- the check --------------------------------------------------------------------------------

def disagreement(rules: RunRules, case: Case) -> str | None:
    """None when the encoding under `rules` (the table, or a planted fault's variant of it)
    agrees with the model on every step of the case: a step the model takes is accepted with
    the model's successor and no other state; a step the model refuses has no successor at
    all."""
    graph = case.graph
    enc = RunEncoding(graph, params_of(graph), rules)
    pre, post = state_of(graph, "pre"), state_of(graph, "post")
    assert not enc.axioms(), "a concrete graph's encoding has no axioms: the solvers are shared"
    moves: dict[Event, z3.BoolRef] = {}  # a transition's term depends on the event, not the state
    by_state: dict[RunState, list[Event]] = {}
    for x, e in case.checks:
        by_state.setdefault(x, []).append(e)
    for s, events in by_state.items():
        solver = _pinned_solver(enc, pre, s)
        for ev in events:
            if ev not in moves:
                moves[ev] = enc.transition(pre, post, Ev.of_event(ev))
            move = moves[ev]
            if not enabled(graph, s, ev):
                if check_sat(solver, move) == z3.sat:
                    return f"{ev} is disabled in the model but the encoding takes it from {s}"
                continue
            t = step(graph, s, ev)
            successor = _pin(enc, post, t)
            if check_sat(solver, move, successor) != z3.sat:
                return f"{ev} from {s}: the encoding rejects the model's successor {t}"
            if check_sat(solver, move, z3.Not(successor)) != z3.unsat:
                return f"{ev} from {s}: the encoding accepts a successor other than {t}"
    return None


# A state pinned, and a solver holding a pinned state, depend only on the graph, the state and
# the fields' tag (never on the rule table: a planted fault's encoding pins the same constants),
# so the real rules' check and every fault's share them (a test's cases fit in the caches); each
# question is asked between a push and a pop (`check_sat`): no answer depends on the ones before.
def _pin(enc: RunEncoding, x: State, s: RunState) -> z3.BoolRef:
    return _pinned(enc.graph, _tag(x), s)


def _pinned_solver(enc: RunEncoding, x: State, s: RunState) -> z3.Solver:
    return _solver_holding(enc.graph, _tag(x), s)


def _tag(x: State) -> str:
    return next(iter(x.terms.values())).decl().name().rpartition("@")[2]


@functools.lru_cache(maxsize=4096)
def _pinned(graph: LoopGraph, tag: str, s: RunState) -> z3.BoolRef:
    return encoding_of(graph).pin(state_of(graph, tag), s)


@functools.lru_cache(maxsize=512)
def _solver_holding(graph: LoopGraph, tag: str, s: RunState) -> z3.Solver:
    solver = z3.Solver()
    solver.add(_pinned(graph, tag, s))
    return solver


def check_sat(solver: z3.Solver, *formulas: z3.BoolRef) -> z3.CheckSatResult:
    """`solver`'s answer with `formulas` added for this question only; unknown fails."""
    solver.push()
    solver.add(*formulas)
    r = solver.check()
    solver.pop()
    assert r != z3.unknown, solver.reason_unknown()
    return r


# ---- planted faults -----------------------------------------------------------------------------

def conjuncts(f: z3.BoolRef) -> list[z3.BoolRef]:
    """The conjuncts of a guard, flattened through nested Ands (the shared helpers')."""
    hit = _CONJUNCTS.get(f.get_id())
    if hit is None:
        parts = [c for child in f.children() for c in conjuncts(child)] if z3.is_and(f) else [f]
        hit = _CONJUNCTS[f.get_id()] = (f, parts)
    return list(hit[1])


# Memo tables keyed by Z3's term ids; each keeps its term alive, so an id is never reused.
_KEYS: dict[tuple[int, str | None, str | None], tuple[z3.ExprRef, str]] = {}
_CONJUNCTS: dict[int, tuple[z3.BoolRef, list[z3.BoolRef]]] = {}


def conjunct_key(c: z3.BoolRef, ev: Ev) -> str:
    """A conjunct by what it says, the same on every graph: its operator (through `Not`) and
    the state fields and constants it reads -- the event's node named v, its target u, any
    other node w -- without numbers. `settled + 1/2 <= 8 + EPS` is `<=(settled)` everywhere."""
    memo = (c.get_id(), ev.node, ev.target)
    if memo in _KEYS:
        return _KEYS[memo][1]
    op = []
    t = c
    while z3.is_not(t):
        op.append("not")
        t = t.arg(0)
    op.append(t.decl().name())
    atoms = set()
    for name in leaves(t):
        if ":" in name:
            family, node = name.split(":", 1)
            name = f"{family}:" + ("v" if node == ev.node else "u" if node == ev.target
                                   else "w")
        atoms.add(name)
    key = f"{'.'.join(op)}({','.join(sorted(atoms))})"
    _KEYS[memo] = (c, key)
    return key


_LEAVES: dict[int, tuple[z3.ExprRef, frozenset[str]]] = {}


def leaves(term: z3.ExprRef) -> frozenset[str]:
    """The names of the constants a term reads (state fields without their tag, enumeration
    constants), numbers left out; each shared subterm visited once."""
    hit = _LEAVES.get(term.get_id())
    if hit is not None:
        return hit[1]
    if z3.is_const(term):
        out = frozenset() if z3.is_int_value(term) or z3.is_rational_value(term) else \
            frozenset({str(term).split("@")[0]})
    else:
        out = frozenset().union(*(leaves(c) for c in term.children()))
    _LEAVES[term.get_id()] = (term, out)
    return out


def guard_keys(case: Case) -> set[str]:
    """The keys of the conjuncts of the guards of the case's steps."""
    return {conjunct_key(c, Ev.of_event(e)) for e in {e for _, e in case.checks}
            for c in conjuncts(real_guard(case.graph, e))}


def _bump(x: z3.ExprRef, s: State, node: str) -> z3.ExprRef:
    """A value one step away from `x`, whatever `x` is: +1, +1/4, the next enum constant, the
    current activation's PASS (or cancel) flipped."""
    sort = x.sort()
    if sort in (StatusSort, OutcomeSort):
        values = [sort.constructor(i)() for i in range(sort.num_constructors())]
        out = values[0]
        for here, nxt in zip(values, values[1:] + values[:1], strict=True):
            out = z3.If(x == here, nxt, out)
        return out
    if z3.is_int(x):
        return x + 1
    if z3.is_real(x):
        return x + z3.RealVal("1/4")
    if z3.is_array(x):
        return z3.Store(x, s.activation(node), z3.Not(z3.Select(x, s.activation(node))))
    raise TypeError(f"no bump for {sort}")  # pragma: no cover


NODE_FIELDS = ("status", "activation", "attempts", "passes", "cancelled")
FIELDS = (*NODE_FIELDS, "repairs_used", "attempts_total", "abandoned", "settled", "reserved",
          "attempt_spend", "outcome")
DROPPED = "guard without "


C = TypeVar("C")


@dataclass(frozen=True)
class Fault:
    """One planted fault: `kind`'s guard or effect changed as `name` says, as a variant of the
    rule table."""

    kind: str
    name: str
    rules: RunRules

    @property
    def drops_a_conjunct(self) -> bool:
        return self.name.startswith(DROPPED)


def _field(enc: RunEncoding, ev: Ev, family: str) -> tuple[str, str | None]:
    """The state field a perturbed effect writes: a node field of the event's node (of the
    first node when the event names none), or the global field."""
    if family in NODE_FIELDS:
        return (family, ev.node or enc.graph.names[0])
    return (family, None)


def guard_changed(kind: str, change: Callable[[z3.BoolRef, Ev], z3.BoolRef]) -> type[RunRules]:
    """The rule table with `kind`'s guard, as conjoined on Z3 terms, changed by `change`."""
    class Changed(RunRules):
        def guard(self, s, ev, g):
            if ev.kind != kind:
                return super().guard(s, ev, g)
            real = Conjuncts()
            super().guard(s, ev, real)
            g.need(change(real.formula(), ev), None)
            return None
    return Changed


def effect_changed(kind: str, change: Callable[[object, object, Ev, object], None]
                   ) -> type[RunRules]:
    """The rule table with `kind`'s effect followed by `change(s, ev, u)`."""
    class Changed(RunRules):
        def effect(self, s, ev, u):
            super().effect(s, ev, u)
            if ev.kind == kind:
                change(s, ev, u)
    return Changed


def faults(kind: str, keys: Iterable[str]) -> Iterator[Fault]:
    """Every generated fault of `kind`: its guard negated, its guard dropped, each conjunct of
    its guard dropped (one fault per conjunct key in `keys`, the keys of the cases' guards),
    and each field of its effect written one step wrong."""
    yield Fault(kind, "guard negated", guard_changed(kind, lambda g, ev: z3.Not(g))())
    yield Fault(kind, "guard dropped", guard_changed(kind, lambda g, ev: z3.BoolVal(True))())
    for key in sorted(keys):
        def drop(g, ev, key=key):
            return z3.And([c for c in conjuncts(g) if conjunct_key(c, ev) != key])
        yield Fault(kind, f"{DROPPED}{key}", guard_changed(kind, drop)())
    for family in FIELDS:
        def write(s, ev, u, family=family):
            f = _field(s.enc, ev, family)
            u.write(f, _bump(u.current(f), s, ev.node or s.enc.graph.names[0]))
        yield Fault(kind, f"effect writes {family} wrong", effect_changed(kind, write)())


def caught(cases: list[C], disagrees: Callable[[C], object]) -> bool:
    """Does some case show the fault (`disagrees(case)` not None)? The case that showed the
    last fault is asked first (faults of one kind mostly show on the same cases): `cases` is
    reordered in place, and the answer is `any` over all of them whatever the order."""
    for i, case in enumerate(cases):
        if disagrees(case) is not None:
            cases.insert(0, cases.pop(i))
            return True
    return False


def changes_a_transition(fault: Fault, case: Case) -> bool:
    """Does a fault change the guard of one of the case's steps on some state of the case's
    graph? If not, on this graph it is the same rule, and no test could tell them apart."""
    graph = case.graph
    broken = RunEncoding(graph, params_of(graph), fault.rules)
    s = state_of(graph, "s")
    for e in {e for _, e in case.checks}:
        real, mutant = real_guard(graph, e), broken.guard(s, Ev.of_event(e))
        if z3.eq(real, mutant):
            continue
        if check_sat(_EMPTY, *encoding_of(graph).axioms(), real != mutant) == z3.sat:
            return True
    return False


_EMPTY = z3.Solver()  # every question between a push and a pop (`check_sat`)
