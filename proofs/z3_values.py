"""The Z3 backend of the rule table (model/run_rules.py): the same rules on Z3 terms.

A guard's conditions are conjoined (`Conjuncts`; `Loosened` drops those on spend and on the
number of attempts in flight), an effect's writes are collected into the new value of each
field (`Writes`), and three representations of a run state give the rules their reads and
writes:

- `SerialTerms`: one graph shape, one constant per field (proofs/encoding.py, `RunEncoding`);
  the attempt in flight keeps its account in the run's totals, and a spend event that names no
  node acts on the first RUNNING node, as in the serial model.
- `ConcurrentTerms`: the same with an account per node (`reserved:v`, `spent:v`) beside the
  totals, and `max_parallel` a term (proofs/concurrent.py).
- `UnboundedTerms`: the nodes an uninterpreted sort, node fields arrays over it, node sets
  predicates that guards quantify over and effects write through lambdas (proofs/unbounded.py).

Each is the interface of model/rule_values.py; no rule is stated here.

Why one module: over 400 lines on purpose, since the three representations are one backend:
each implements the same interface, and a change to it (a read a rule needs) is made to all
three at once, read side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import z3

from loopproof.model.run_rules import EPS as MODEL_EPS
from loopproof.model.state import Outcome, Status

StatusSort, (S_PENDING, S_RUNNING, S_DONE, S_EXHAUSTED) = z3.EnumSort(
    "Status", ["PENDING", "RUNNING", "DONE", "EXHAUSTED"])
OutcomeSort, (O_RUNNING, O_DONE, O_FAILED, O_BUDGET) = z3.EnumSort(
    "Outcome", ["RUN", "DONE_RUN", "FAILED", "BUDGET_EXHAUSTED"])
STATUS = {Status.PENDING: S_PENDING, Status.RUNNING: S_RUNNING, Status.DONE: S_DONE,
          Status.EXHAUSTED: S_EXHAUSTED}
OUTCOME = {Outcome.RUNNING: O_RUNNING, Outcome.DONE: O_DONE, Outcome.FAILED: O_FAILED,
           Outcome.BUDGET_EXHAUSTED: O_BUDGET}


def real(x: float | Fraction | int) -> z3.ArithRef:
    """The exact rational value of a Python number (floats are binary fractions, kept exact)."""
    return z3.RealVal(str(Fraction(x)))


EPS = real(MODEL_EPS)


# ---- connectives, folding the Python bools a rule may pass (a node known, a static flag) ------

def all_of(terms: Sequence[Any]) -> z3.BoolRef:
    """`z3.And(terms)`, the very same term (Z3 shares equal terms), made in one call when every
    term is already a Boolean term of one context: z3.And checks and casts each argument in
    Python first, which was most of the cost of a transition (a conjunct per field)."""
    return _connect(z3.Z3_mk_and, z3.And, terms)


def any_of(terms: Sequence[Any]) -> z3.BoolRef:
    """`z3.Or(terms)`, made as `all_of` makes `z3.And(terms)`."""
    return _connect(z3.Z3_mk_or, z3.Or, terms)


def _connect(make: Callable[..., Any], slow: Callable[..., z3.BoolRef],
             terms: Sequence[Any]) -> z3.BoolRef:
    if not terms or not all(type(t) is z3.BoolRef for t in terms):
        return slow(list(terms))
    ctx = terms[0].ctx
    if any(t.ctx is not ctx for t in terms):
        return slow(list(terms))
    asts = (z3.Ast * len(terms))(*[t.as_ast() for t in terms])
    return z3.BoolRef(make(ctx.ref(), len(terms), asts), ctx)


def and_(*xs: Any) -> Any:
    terms = []
    for x in xs:
        if isinstance(x, bool):
            if not x:
                return z3.BoolVal(False)
            continue
        terms.append(x)
    return terms[0] if len(terms) == 1 else all_of(terms)


def or_(*xs: Any) -> Any:
    """(Kept an Or even of one term: a guard's conjunct reads the same on every graph size, so
    the differential test plants one fault for it, tests/support/encoding_steps.py.)"""
    terms = []
    for x in xs:
        if isinstance(x, bool):
            if x:
                return z3.BoolVal(True)
            continue
        terms.append(x)
    return any_of(terms)


def not_(x: Any) -> Any:
    return (not x) if isinstance(x, bool) else z3.Not(x)


def ite(c: Any, a: Any, b: Any) -> Any:
    if isinstance(c, bool):
        return a if c else b
    return z3.If(c, a, b)


@dataclass(frozen=True)
class Attempt:
    """An attempt's account as terms (model/rule_values.py, `Attempt`)."""

    node: Any  # a node handle, or THE_RUNNING (the serial model's attempt in flight)
    reserved: Any
    spent: Any
    ceiling: Any


THE_RUNNING = "<the attempt in flight>"  # a serial spend event names no node: the first RUNNING


@dataclass(frozen=True)
class NodePred:
    """A set of nodes of an uninterpreted sort, as a predicate; `name` is the bound variable's
    name in the quantifiers and lambdas made from it."""

    name: str
    sort: z3.SortRef
    contains: Callable[[z3.ExprRef], z3.BoolRef]

    def bound(self) -> z3.ExprRef:
        return z3.Const(self.name, self.sort)

    def forall(self, cond: Callable[[z3.ExprRef], Any]) -> z3.BoolRef:
        x = self.bound()
        return z3.ForAll([x], z3.Implies(self.contains(x), cond(x)))


# ---- guards ---------------------------------------------------------------------------------------

class Conjuncts:
    """A guard on terms: the conjunction of its conditions (their reasons are the Python
    backend's; a Python True adds nothing)."""

    def __init__(self) -> None:
        self.conds: list[z3.BoolRef] = []

    def _add(self, c: Any) -> None:
        if isinstance(c, bool):
            if not c:
                self.conds.append(z3.BoolVal(False))
            return
        self.conds.append(c)

    def need(self, cond: Any, why: Any, *args: Any) -> None:
        self._add(cond)

    def need_spend(self, cond: Any, why: Any, *args: Any) -> None:
        self._add(cond)

    def need_room(self, cond: Any, why: Any, *args: Any) -> None:
        self._add(cond)

    def need_all(self, nodes: Any, cond: Callable[[Any], Any], why: Any, *args: Any) -> None:
        if isinstance(nodes, NodePred):
            self._add(nodes.forall(cond))
        else:
            for v in nodes:
                self._add(cond(v))

    def formula(self) -> z3.BoolRef:
        return all_of(self.conds)


class Loosened(Conjuncts):
    """A guard without its conditions on spend and on room for another attempt in flight
    (proofs/concurrent.py, `AnyNumberInFlight`): loosened, never tightened."""

    def need_spend(self, cond: Any, why: Any, *args: Any) -> None:
        pass

    def need_room(self, cond: Any, why: Any, *args: Any) -> None:
        pass


# ---- effects --------------------------------------------------------------------------------------

class Writes:
    """An effect on terms: the new value of each field written, by key. A write made under a
    condition (`when`) keeps the field's current value where the condition fails; a read of
    `current` sees the writes made so far (a rule may move an account, then close it)."""

    def __init__(self, now: dict[Any, z3.ExprRef]) -> None:
        self.now = now
        self.out: dict[Any, Any] = {}
        self.when: z3.BoolRef | None = None

    def current(self, key: Any) -> Any:
        return self.out.get(key, self.now[key])

    def write(self, key: Any, x: Any) -> None:
        if not isinstance(x, z3.ExprRef):  # a Python number a rule wrote (a counter reset to 0)
            x = z3.IntVal(x) if self.now[key].sort() == z3.IntSort() else real(x)
        if self.when is not None:
            x = z3.If(self.when, x, self.current(key))
        self.out[key] = x


class _Terms:
    """What the three representations share: constants, connectives, the run's scalars."""

    PENDING, RUNNING, DONE, EXHAUSTED = S_PENDING, S_RUNNING, S_DONE, S_EXHAUSTED
    concurrent = False
    and_ = staticmethod(and_)
    or_ = staticmethod(or_)
    not_ = staticmethod(not_)
    ite = staticmethod(ite)

    def __init__(self, s: Any, eps: Any) -> None:
        self.s, self.eps = s, eps

    def known(self, v: Any) -> bool:
        return True  # every node an encoded event names is the graph's (or the sort's)

    def live(self) -> Any:
        return self.s.outcome == O_RUNNING

    @property
    def settled(self) -> Any:
        return self.s.settled

    @property
    def reserved(self) -> Any:
        return self.s.reserved

    @property
    def repairs_used(self) -> Any:
        return self.s.repairs_used

    @property
    def attempts_total(self) -> Any:
        return self.s.attempts_total

    @property
    def abandoned(self) -> Any:
        return self.s.abandoned

    def ghost(self, name: str, v: Any = None) -> Any:
        """A field a variant declares for itself (a ghost counter, proofs/g1_finishes.py)."""
        return self.s.ghost(name, v)


# ---- one graph shape ------------------------------------------------------------------------------

class SerialTerms(_Terms):
    """A run of one graph shape as terms, at most one attempt in flight (`enc`: a
    `RunEncoding`, for the parameters and the shape)."""

    def __init__(self, enc: Any, s: Any) -> None:
        super().__init__(s, enc.eps)
        self.enc, self.p, self.graph = enc, enc.params, enc.graph

    def attempts_allowed(self, v: Any) -> Any:
        return self.p.attempts[v]

    def ceiling(self, v: Any) -> Any:
        return self.p.ceilings[v]

    @property
    def repair_budget(self) -> Any:
        return self.p.repair_budget

    @property
    def max_parallel(self) -> Any:
        return self.enc.max_parallel

    def within_budget(self, amount: Any) -> Any:
        return self.enc.within_budget(amount)

    def in_relation(self, d: Any, u: Any) -> Any:
        return self.p.repairs[(d, u)]

    def no_pair(self, d: Any) -> Any:
        return z3.Not(z3.Or([x for (d2, _), x in self.p.repairs.items() if d2 == d] or [False]))

    def predecessors(self, v: Any) -> tuple[str, ...]:
        return self.graph.predecessors(v)

    def subtree(self, u: Any) -> tuple[str, ...]:
        inside = self.graph.subtree(u)
        return tuple(w for w in self.graph.names if w in inside)

    def status(self, v: Any) -> Any:
        return self.s.status(v)

    def activation(self, v: Any) -> Any:
        return self.s.activation(v)

    def attempts(self, v: Any) -> Any:
        return self.s.attempts(v)

    def none(self, status: Any) -> Any:
        return and_(*[self.s.status(w) != status for w in self.graph.names])

    def some(self, status: Any) -> Any:
        return or_(*[self.s.status(w) == status for w in self.graph.names])

    def every(self, status: Any) -> Any:
        return and_(*[self.s.status(w) == status for w in self.graph.names])

    def in_flight(self) -> Any:
        return z3.Sum([z3.If(self.s.status(v) == S_RUNNING, 1, 0) for v in self.graph.names])

    def first_running_is(self, v: Any) -> Any:
        return self.enc.running_is(self.s, v)

    def held(self) -> Any:
        s = self.s
        flying = self.enc.running_ceiling(s) - (s.attempt_spend - s.reserved)
        return s.settled + z3.If(self.some(S_RUNNING), flying, real(0))

    def attempt(self, who: Any) -> Attempt:
        s = self.s
        if who is None:
            return Attempt(THE_RUNNING, s.reserved, s.attempt_spend, self.enc.running_ceiling(s))
        return Attempt(who, s.reserved, s.attempt_spend, self.p.ceilings[who])


class SerialWrites(Writes):
    """The writes of one event on a `SerialTerms` state (keys: (field, node or None))."""

    def __init__(self, enc: Any, s: Any) -> None:
        super().__init__(s.terms)
        self.enc, self.s = enc, s

    def set_status(self, v: Any, x: Any) -> None:
        self.write(("status", v), x)

    def set_activation(self, v: Any, x: Any) -> None:
        self.write(("activation", v), x)

    def set_attempts(self, v: Any, x: Any) -> None:
        self.write(("attempts", v), x)

    def add_pass(self, v: Any, activation: Any) -> None:
        self.write(("passes", v), z3.Store(self.current(("passes", v)), activation, True))

    def add_cancel(self, v: Any, activation: Any) -> None:
        self.write(("cancelled", v), z3.Store(self.current(("cancelled", v)), activation, True))

    def set_repairs_used(self, x: Any) -> None:
        self.write(("repairs_used", None), x)

    def set_attempts_total(self, x: Any) -> None:
        self.write(("attempts_total", None), x)

    def set_abandoned(self, x: Any) -> None:
        self.write(("abandoned", None), x)

    def set_settled(self, x: Any) -> None:
        self.write(("settled", None), x)

    def set_outcome(self, o: Outcome) -> None:
        self.write(("outcome", None), OUTCOME[o])

    def set_ghost(self, name: str, x: Any, v: Any = None) -> None:
        self.write((name, v), x)

    # spend: the totals are the one account
    def open(self, v: Any) -> None:
        self.write(("attempt_spend", None), real(0))

    def spend(self, a: Any, reserved: Callable[[Any], Any],
              spent: Callable[[Any], Any]) -> None:
        self.write(("reserved", None), reserved(self.current(("reserved", None))))
        self.write(("attempt_spend", None), spent(self.current(("attempt_spend", None))))

    def close(self, a: Any) -> None:
        self.write(("attempt_spend", None), real(0))

    def at(self, a: Any, effect: Callable[[Any], None]) -> None:
        if a.node is not THE_RUNNING:
            effect(a.node)
            return
        for v in self.enc.graph.names:  # whichever node is the first RUNNING one
            self.when = self.enc.running_is(self.s, v)
            effect(v)
        self.when = None

    def for_each(self, nodes: Any, effect: Callable[[Any], None]) -> None:
        for v in nodes:
            effect(v)


class ConcurrentTerms(SerialTerms):
    """Several attempts in flight: each node's account beside the totals, the limit a term."""

    concurrent = True

    def attempt(self, who: Any) -> Attempt:
        assert who is not None, "a concurrent spend event names its node"
        return Attempt(who, self.s.ghost("reserved", who), self.s.ghost("spent", who),
                       self.p.ceilings[who])

    def held(self) -> Any:
        """settled + sum over attempts in flight of c_w - what w settled (`RunState.held`)."""
        s, c = self.s, self.p.ceilings
        return s.settled + z3.Sum([
            z3.If(s.status(w) == S_RUNNING,
                  c[w] - (s.ghost("spent", w) - s.ghost("reserved", w)), real(0))
            for w in self.graph.names])


class ConcurrentWrites(SerialWrites):
    def open(self, v: Any) -> None:
        self.write(("reserved", v), real(0))
        self.write(("spent", v), real(0))

    def spend(self, a: Any, reserved: Callable[[Any], Any],
              spent: Callable[[Any], Any]) -> None:
        super().spend(a, reserved, spent)
        self.write(("reserved", a.node), reserved(self.current(("reserved", a.node))))
        self.write(("spent", a.node), spent(self.current(("spent", a.node))))

    def close(self, a: Any) -> None:
        """The attempt leaves the flight: its account out of the totals, and zeroed."""
        v = a.node
        self.write(("reserved", None),
                   self.current(("reserved", None)) - self.current(("reserved", v)))
        self.write(("attempt_spend", None),
                   self.current(("attempt_spend", None)) - self.current(("spent", v)))
        self.write(("reserved", v), real(0))
        self.write(("spent", v), real(0))


# ---- every graph: nodes of a sort -----------------------------------------------------------------

class UnboundedTerms(_Terms):
    """A run over a sort of nodes (`sys`: an `UnboundedRuns`, for the graph's relations and
    numbers). "The attempt in flight is n" reads "n is RUNNING" (an over-approximation that
    agrees with the model wherever at most one node runs: proofs/unbounded.py)."""

    def __init__(self, sys: Any, s: Any) -> None:
        super().__init__(s, EPS)
        self.sys = sys

    def attempts_allowed(self, v: Any) -> Any:
        return self.sys.a(v)

    def ceiling(self, v: Any) -> Any:
        return self.sys.c(v)

    @property
    def repair_budget(self) -> Any:
        return self.sys.K

    @property
    def max_parallel(self) -> Any:
        raise NotImplementedError("the unbounded encoding is serial")

    def within_budget(self, amount: Any) -> Any:
        return self.sys.within_budget(amount)

    def in_relation(self, d: Any, u: Any) -> Any:
        return self.sys.repair(d, u)

    def no_pair(self, d: Any) -> Any:
        u = z3.Const("u", self.sys.N)
        return z3.ForAll([u], z3.Not(self.sys.repair(d, u)))

    def predecessors(self, v: Any) -> NodePred:
        return NodePred("p", self.sys.N, lambda p: self.sys.needs(p, v))

    def subtree(self, u: Any) -> NodePred:
        return NodePred("x", self.sys.N, lambda x: self.sys.reach(u, x))

    def status(self, v: Any) -> Any:
        return self.s.status[v]

    def activation(self, v: Any) -> Any:
        return self.s.activation[v]

    def attempts(self, v: Any) -> Any:
        return self.s.attempts[v]

    def _all(self, cond: Callable[[z3.ExprRef], Any]) -> z3.BoolRef:
        x = z3.Const("x", self.sys.N)
        return z3.ForAll([x], cond(x))

    def none(self, status: Any) -> Any:
        return self._all(lambda x: self.s.status[x] != status)

    def some(self, status: Any) -> Any:
        return z3.Not(self.none(status))

    def every(self, status: Any) -> Any:
        return self._all(lambda x: self.s.status[x] == status)

    def in_flight(self) -> Any:
        raise NotImplementedError("the unbounded encoding does not count (it is serial)")

    def first_running_is(self, v: Any) -> Any:
        return self.s.status[v] == S_RUNNING

    def held(self) -> Any:
        raise NotImplementedError("the unbounded encoding is serial: Begin reads settled")

    def attempt(self, who: Any) -> Attempt:
        return Attempt(who, self.s.reserved, self.s.attempt_spend, self.sys.c(who))


class UnboundedWrites(Writes):
    """Writes to arrays over the node sort (keys: the field's name). A node field written inside
    `for_each` over a predicate becomes a lambda: the new value inside the set, the current one
    outside it."""

    def __init__(self, s: Any) -> None:
        super().__init__(s.fields())
        self.binder: z3.ExprRef | None = None
        self.pointwise: dict[str, Any] = {}

    def _node(self, field: str, v: Any, x: Any) -> None:
        if self.binder is not None and v is self.binder:
            self.pointwise[field] = x
            return
        self.write(field, z3.Store(self.current(field), v, x))

    def set_status(self, v: Any, x: Any) -> None:
        self._node("status", v, x)

    def set_activation(self, v: Any, x: Any) -> None:
        self._node("activation", v, x)

    def set_attempts(self, v: Any, x: Any) -> None:
        self._node("attempts", v, x)

    def add_pass(self, v: Any, activation: Any) -> None:
        self.write("passes", z3.Store(self.current("passes"), v, activation, True))

    def add_cancel(self, v: Any, activation: Any) -> None:
        self.write("cancelled", z3.Store(self.current("cancelled"), v, activation, True))

    def set_repairs_used(self, x: Any) -> None:
        self.write("repairs_used", x)

    def set_attempts_total(self, x: Any) -> None:
        self.write("attempts_total", x)

    def set_abandoned(self, x: Any) -> None:
        self.write("abandoned", x)

    def set_settled(self, x: Any) -> None:
        self.write("settled", x)

    def set_outcome(self, o: Outcome) -> None:
        self.write("outcome", OUTCOME[o])

    def open(self, v: Any) -> None:
        self.write("attempt_spend", real(0))

    def spend(self, a: Any, reserved: Callable[[Any], Any],
              spent: Callable[[Any], Any]) -> None:
        self.write("reserved", reserved(self.current("reserved")))
        self.write("attempt_spend", spent(self.current("attempt_spend")))

    def close(self, a: Any) -> None:
        self.write("attempt_spend", real(0))

    def at(self, a: Any, effect: Callable[[Any], None]) -> None:
        effect(a.node)

    def for_each(self, nodes: Any, effect: Callable[[Any], None]) -> None:
        x = nodes.bound()
        self.binder, self.pointwise = x, {}
        effect(x)
        self.binder = None
        for field, value in self.pointwise.items():
            old = self.current(field)
            self.write(field, z3.Lambda([x], z3.If(nodes.contains(x), value, old[x])))
