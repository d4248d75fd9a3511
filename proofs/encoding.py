"""The Z3 encoding of `model/`'s run, one graph shape at a time: a run state as Z3 constants,
and each declared transition (Begin, Refuse, Reserve, Overrun, Settle, Verdict, Abandon, Claim,
Cancel, Repair, Fail, Finish) the rule table's (model/run_rules.py) on Z3 terms
(proofs/z3_values.py).

The graph's *shape* (nodes, needs, repair relation) is fixed per encoding; its numbers
(a_v, c_v, K, B) are Z3 terms, so one encoding serves both the concrete graphs of the differential
test and the symbolic ones of the proofs (every a_v >= 1, every K >= 0, ...).

The rules are a `RunRules` (the model's, by default); a broken variant subclasses it and
overrides one rule, so a broken model differs from the real one in exactly the place its name
says. A variant that needs fields of its own (a ghost counter) subclasses `Ghosts`.

Why one module: over 400 lines on purpose, since the state's fields, Init, the transition
relation and the way back from a Z3 model to a `RunState` (`pin`, `read`, `describe`) are one
representation, read and changed together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

import z3

from loopproof.model import transitions as mt
from loopproof.model.graph import LoopGraph
from loopproof.model.run_rules import RULES, RunRules
from loopproof.model.state import RunState
from loopproof.proofs.trace import number
from loopproof.proofs.z3_values import (
    EPS,
    O_BUDGET,
    O_DONE,
    O_FAILED,
    O_RUNNING,
    OUTCOME,
    S_DONE,
    S_EXHAUSTED,
    S_PENDING,
    S_RUNNING,
    STATUS,
    Conjuncts,
    OutcomeSort,
    SerialTerms,
    SerialWrites,
    StatusSort,
    all_of,
    real,
)

__all__ = ["EPS", "O_BUDGET", "O_DONE", "O_FAILED", "O_RUNNING", "OUTCOME", "S_DONE",
           "S_EXHAUSTED", "S_PENDING", "S_RUNNING", "STATUS", "OutcomeSort", "StatusSort",
           "real", "Params", "Ev", "State", "RunEncoding", "Ghosts", "assumed", "KINDS", "METERED",
           "value", "outcome_name", "event_instances", "describe_shape"]


def outcome_name(z3_name: str) -> str:
    """The model's name (`Outcome.value`) of an Outcome enum constant printed by Z3."""
    return {str(z): o.value for o, z in OUTCOME.items()}[z3_name]


KINDS = tuple(mt.EVENT_NAMES.values())  # the model's event names (model/transitions.py)
METERED = ("Reserve", "Overrun", "Settle")  # the events that carry an amount


def value(model: z3.ModelRef, e: z3.ExprRef) -> Any:
    """A model's value of `e` as plain Python (int, Fraction, bool or the enum's name)."""
    v = model.eval(e, model_completion=True)
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_rational_value(v):
        return Fraction(v.numerator_as_long(), v.denominator_as_long())
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    return str(v)


# ---- parameters ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Params:
    """The numbers of a graph as Z3 terms: a_v, c_v, K, B (None when B is unbounded), and
    which of the graph's repair pairs are in R (a Bool each: symbolic, one proof covers every
    sub-relation of the graph's pairs)."""

    attempts: Mapping[str, z3.ArithRef]
    ceilings: Mapping[str, z3.ArithRef]
    repair_budget: z3.ArithRef
    spend_budget: z3.ArithRef | None
    repairs: Mapping[tuple[str, str], z3.BoolRef]
    constraints: tuple[z3.BoolRef, ...] = ()

    def with_constraints(self, *more: z3.BoolRef) -> Params:
        return Params(self.attempts, self.ceilings, self.repair_budget, self.spend_budget,
                      self.repairs, self.constraints + more)

    @classmethod
    def of(cls, graph: LoopGraph) -> Params:
        """The concrete numbers of `graph`."""
        b = None if graph.spend_budget == float("inf") else real(graph.spend_budget)
        return cls({n.name: z3.IntVal(n.attempts) for n in graph.nodes},
                   {n.name: real(n.spend_ceiling) for n in graph.nodes},
                   z3.IntVal(graph.repair_budget), b,
                   {p: z3.BoolVal(True) for p in graph.repair_pairs})

    @classmethod
    def symbolic(cls, graph: LoopGraph) -> Params:
        """Every a_v >= 1, c_v >= 0, K >= 0, B >= 0 and every R contained in the graph's repair
        pairs: one proof covers all of them for the graph's DAG."""
        a = {v: z3.Int(f"a_{v}") for v in graph.names}
        c = {v: z3.Real(f"c_{v}") for v in graph.names}
        k, b = z3.Int("K"), z3.Real("B")
        r = {(d, u): z3.Bool(f"R_{d}_{u}") for d, u in graph.repair_pairs}
        cons = [x >= 1 for x in a.values()] + [x >= 0 for x in c.values()] + [k >= 0, b >= 0]
        return cls(a, c, k, b, r, tuple(cons))

    def describe(self, model: z3.ModelRef) -> dict[str, Any]:
        out: dict[str, Any] = {f"a_{v}": value(model, x) for v, x in self.attempts.items()}
        out |= {f"c_{v}": number(value(model, x)) for v, x in self.ceilings.items()}
        out["K"] = value(model, self.repair_budget)
        out["B"] = "inf" if self.spend_budget is None else number(value(model, self.spend_budget))
        out["R"] = [f"({d},{u})" for (d, u), x in self.repairs.items() if value(model, x)]
        return out


# ---- events -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ev:
    """One declared transition with its arguments; `amount` (and a Settle's released
    reservation `of`; None: every outstanding one) is a Z3 term (a fresh variable in proofs, a
    literal when a concrete model event is encoded)."""

    kind: str
    node: str | None = None
    target: str | None = None
    passed: bool | None = None
    amount: z3.ArithRef | None = None
    of: z3.ArithRef | None = None

    @classmethod
    def of_event(cls, event: mt.Event) -> Ev:
        kind = mt.EVENT_NAMES[type(event)]
        amount, of = getattr(event, "amount", None), getattr(event, "of", None)
        return cls(kind, getattr(event, "node", None), getattr(event, "target", None),
                   getattr(event, "passed", None), None if amount is None else real(amount),
                   None if of is None else real(of))

    def to_model(self, model: z3.ModelRef | None = None) -> mt.Event:
        cls: Any = mt.EVENT_OF_NAME[self.kind]  # its fields are the ones built below
        if self.kind in METERED:
            assert model is not None and self.amount is not None
            whose = {} if self.node is None else {"node": self.node}  # (the concurrent model's)
            if self.of is not None:
                return cls(float(value(model, self.amount)), float(value(model, self.of)),
                           **whose)
            return cls(float(value(model, self.amount)), **whose)
        if self.kind == "Verdict":
            return cls(self.node, self.passed)
        if self.kind == "Repair":
            return cls(self.node, self.target)
        return cls() if self.kind == "Finish" else cls(self.node)

    def label(self, model: z3.ModelRef | None = None) -> str:
        if self.kind in METERED:
            amt = "?" if model is None or self.amount is None else _num(value(model, self.amount))
            whose = "" if self.node is None else f"{self.node}: "
            if self.of is not None:
                of = "?" if model is None else _num(value(model, self.of))
                return f"{self.kind}({whose}{amt} of {of})"
            return f"{self.kind}({whose}{amt})"
        if self.kind == "Verdict":
            return f"Verdict({self.node}, {'PASS' if self.passed else 'FAIL'})"
        if self.kind == "Repair":
            return f"Repair({self.node} -> {self.target})"
        return f"{self.kind}()" if self.node is None else f"{self.kind}({self.node})"


def _num(q: Fraction) -> str:
    return str(number(q))


def event_instances(graph: LoopGraph, tag: str) -> list[Ev]:
    """Every declared transition of `graph`, amounts as fresh Real variables tagged `tag`; a
    Settle twice: releasing every outstanding reservation, and releasing one of them (`of`)."""
    evs: list[Ev] = []
    for v in graph.names:
        evs += [Ev("Begin", v), Ev("Refuse", v), Ev("Verdict", v, passed=True),
                Ev("Verdict", v, passed=False), Ev("Abandon", v), Ev("Claim", v),
                Ev("Cancel", v), Ev("Fail", v)]
    evs += [Ev(k, amount=z3.Real(f"amount_{k}_{tag}")) for k in METERED]
    evs.append(Ev("Settle", amount=z3.Real(f"amount_SettleOf_{tag}"), of=z3.Real(f"of_{tag}")))
    evs += [Ev("Repair", d, u) for d, u in graph.repair_pairs]
    evs.append(Ev("Finish"))
    return evs


# ---- states -------------------------------------------------------------------------------------

NODE_FIELDS = ("status", "activation", "attempts", "passes", "cancelled")
RUN_FIELDS = ("repairs_used", "attempts_total", "abandoned", "settled", "reserved",
              "attempt_spend", "outcome")
Key = tuple[str, str | None]  # (field, node), node None for a field of the run


def _const_name(key: Key, tag: str) -> str:
    name, v = key
    return f"{name}@{tag}" if v is None else f"{name}:{v}@{tag}"


@dataclass
class State:
    """A run state as Z3 constants, one per field: per node its status, activation, attempts,
    passes (the activations of v with a PASS in the ledger) and cancelled (the activations of v
    an operator cancelled); the run's fields; and the fields a representation or a variant adds
    (an account per node, a ghost counter), each by its key (field, node or None)."""

    terms: dict[Key, z3.ExprRef]

    def status(self, v: str) -> z3.ExprRef:
        return self.terms[("status", v)]

    def activation(self, v: str) -> z3.ArithRef:
        return self.terms[("activation", v)]

    def attempts(self, v: str) -> z3.ArithRef:
        return self.terms[("attempts", v)]

    def passes(self, v: str) -> z3.ArrayRef:
        return self.terms[("passes", v)]

    def cancelled(self, v: str) -> z3.ArrayRef:
        return self.terms[("cancelled", v)]

    def ghost(self, name: str, v: str | None = None) -> z3.ExprRef:
        """A field the representation or a variant declares (`reserved` of node v, `ops`)."""
        return self.terms[(name, v)]

    @property
    def repairs_used(self) -> z3.ArithRef:
        return self.terms[("repairs_used", None)]

    @property
    def attempts_total(self) -> z3.ArithRef:
        return self.terms[("attempts_total", None)]

    @property
    def abandoned(self) -> z3.ArithRef:
        return self.terms[("abandoned", None)]

    @property
    def settled(self) -> z3.ArithRef:
        return self.terms[("settled", None)]

    @property
    def reserved(self) -> z3.ArithRef:
        return self.terms[("reserved", None)]

    @property
    def attempt_spend(self) -> z3.ArithRef:
        return self.terms[("attempt_spend", None)]

    @property
    def outcome(self) -> z3.ExprRef:
        return self.terms[("outcome", None)]


def assumed(graph: LoopGraph, s: RunState) -> str:
    """The reason a ghost's condition gives (a variant's, on Z3 terms only)."""
    return "an assumption of the proof does not hold"


class Ghosts(RunRules):
    """A rule table with fields of its own, beside the run's (a ghost counter, a broken
    variant's own counters): declared here with their sorts and initial values."""

    def extra_fields(self, enc: RunEncoding) -> dict[Key, z3.SortRef]:
        return {}

    def extra_init(self, enc: RunEncoding, s: State) -> list[z3.BoolRef]:
        return []


# ---- the encoding -------------------------------------------------------------------------------

@dataclass
class RunEncoding:
    """States, Init and the transition relation of one graph shape under a rule table. `eps` is
    the float tolerance of the spend checks (EPS; 0 for exact amounts)."""

    graph: LoopGraph
    params: Params
    rules: RunRules = field(default_factory=lambda: RULES)
    eps: Any = field(default_factory=lambda: EPS)
    _memo: dict[tuple[int, str | None], tuple[State, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    terms_class = SerialTerms  # the representation: one attempt's account in the totals
    writes_class = SerialWrites
    max_parallel: Any = 1  # (serial: one attempt in flight; concurrent.py's is a term)

    def representation_fields(self) -> dict[Key, z3.SortRef]:
        """Fields the representation keeps beside the run's (none: one attempt in flight)."""
        return {}

    def representation_init(self, s: State) -> list[z3.BoolRef]:
        return []

    def fields(self) -> dict[Key, z3.SortRef]:
        f: dict[Key, z3.SortRef] = {}
        history = z3.ArraySort(z3.IntSort(), z3.BoolSort())
        for v in self.graph.names:
            f |= {("status", v): StatusSort, ("activation", v): z3.IntSort(),
                  ("attempts", v): z3.IntSort(), ("passes", v): history,
                  ("cancelled", v): history}
        f |= {("repairs_used", None): z3.IntSort(), ("attempts_total", None): z3.IntSort(),
              ("abandoned", None): z3.IntSort(), ("settled", None): z3.RealSort(),
              ("reserved", None): z3.RealSort(), ("attempt_spend", None): z3.RealSort(),
              ("outcome", None): OutcomeSort}
        f |= self.representation_fields()
        if isinstance(self.rules, Ghosts):
            f |= self.rules.extra_fields(self)
        return f

    def fresh(self, tag: str) -> State:
        return State({k: z3.Const(_const_name(k, tag), sort) for k, sort in self.fields().items()})

    def axioms(self) -> list[z3.BoolRef]:
        return list(self.params.constraints)

    # ---- Init and the transition relation
    def init(self, s: State) -> z3.BoolRef:
        cs: list[z3.BoolRef] = []
        for v in self.graph.names:
            cs += [s.status(v) == S_PENDING, s.activation(v) == 0, s.attempts(v) == 0,
                   s.passes(v) == z3.K(z3.IntSort(), z3.BoolVal(False)),
                   s.cancelled(v) == z3.K(z3.IntSort(), z3.BoolVal(False))]
        cs += [s.repairs_used == 0, s.attempts_total == 0, s.abandoned == 0, s.settled == 0,
               s.reserved == 0, s.attempt_spend == 0, s.outcome == O_RUNNING]
        cs += self.representation_init(s)
        if isinstance(self.rules, Ghosts):
            cs += self.rules.extra_init(self, s)
        return z3.And(cs)

    def view(self, s: State) -> SerialTerms:
        """The state as the rules read it (model/rule_values.py)."""
        return self.terms_class(self, s)

    def guard(self, s: State, ev: Ev) -> z3.BoolRef:
        g = Conjuncts()
        self.rules.guard(self.view(s), ev, g)
        return g.formula()

    def update(self, s: State, ev: Ev) -> dict[Key, Any]:
        """The new value of every field the event's effect writes."""
        w = self.writes_class(self, s)
        self.rules.effect(self.view(s), ev, w)
        return w.out

    def transition(self, s: State, t: State, ev: Ev) -> z3.BoolRef:
        """guard(s) and t = update(s), every field the update does not name left unchanged."""
        upd = self.update(s, ev)
        unknown = set(upd) - set(s.terms)
        assert not unknown, f"update names unknown fields {unknown}"
        return all_of([self.guard(s, ev), *[t.terms[k] == upd.get(k, s.terms[k])
                                            for k in s.terms]])

    def events(self, tag: str) -> list[Ev]:
        return event_instances(self.graph, tag)

    # ---- what invariants read besides fields (the representation's, not rules)
    def within_budget(self, amount: z3.ArithRef) -> z3.BoolRef:
        """amount <= B + eps (True when B is unbounded)."""
        b = self.params.spend_budget
        return z3.BoolVal(True) if b is None else amount <= b + self.eps

    def running_is(self, s: State, v: str) -> z3.BoolRef:
        """`v` is the node `RunState.running` returns: the first RUNNING one in order."""
        def build() -> z3.BoolRef:
            names = self.graph.names
            before = names[:names.index(v)]
            return all_of([s.status(v) == S_RUNNING, *[s.status(w) != S_RUNNING for w in before]])
        return self._of_state(s, v, build)

    def running_ceiling(self, s: State) -> z3.ArithRef:
        """c of the node whose attempt is in flight (0 when none is)."""
        def build() -> z3.ArithRef:
            c: z3.ArithRef = real(0)
            for v in reversed(self.graph.names):
                c = z3.If(self.running_is(s, v), self.params.ceilings[v], c)
            return c
        return self._of_state(s, None, build)

    def _of_state(self, s: State, v: str | None, build: Callable[[], Any]) -> Any:
        """A term that depends only on `s` (and this encoding), built once per state: a guard
        and an effect read the attempt in flight several times, and Z3 terms cost to build.
        (States are never changed once made; the memo keeps `s` alive, so its id is its own.)"""
        key = (id(s), v)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = (s, build())
        return hit[1]

    # ---- between Z3 and model.RunState
    def pin(self, s: State, r: RunState) -> z3.BoolRef:
        """`s` equals the concrete state `r` (extra fields are left free)."""
        return all_of([s.terms[k] == x for k, x in self.values(r).items()])

    def values(self, r: RunState) -> dict[Key, z3.ExprRef]:
        """The concrete state `r`'s fields as Z3 values, in `pin`'s order (extra fields
        left out)."""
        keys = [(f, v) for v in self.graph.names for f in NODE_FIELDS]
        return {k: self.value_of(r, k) for k in keys + [(f, None) for f in RUN_FIELDS]}

    def value_of(self, r: RunState, key: Key) -> z3.ExprRef:
        """One field of the concrete state `r` as a Z3 value."""
        name, v = key
        if v is None:  # a field of the run
            if name == "outcome":
                return OUTCOME[r.outcome]
            if name in ("settled", "reserved", "attempt_spend"):
                return real(getattr(r, name))
            return z3.IntVal(getattr(r, name))
        if name == "status":
            return STATUS[r.status_of(self.graph, v)]
        if name in ("passes", "cancelled"):
            return _history(getattr(r, name), v)
        return z3.IntVal(getattr(r, f"{name}_of")(self.graph, v))  # activation, attempts

    def read(self, model: z3.ModelRef, s: State) -> RunState:
        g = self.graph
        by_name = {str(z): st for st, z in STATUS.items()}
        outcome = {str(z): o for o, z in OUTCOME.items()}
        passes, cancelled = set(), set()
        for v in g.names:
            for e in range(value(model, s.activation(v)) + 1):
                if value(model, z3.Select(s.passes(v), e)):
                    passes.add((v, e))
                if value(model, z3.Select(s.cancelled(v), e)):
                    cancelled.add((v, e))
        return RunState(
            status=tuple(by_name[value(model, s.status(v))] for v in g.names),
            activation=tuple(value(model, s.activation(v)) for v in g.names),
            attempts=tuple(value(model, s.attempts(v)) for v in g.names),
            passes=frozenset(passes),
            repairs_used=value(model, s.repairs_used),
            attempts_total=value(model, s.attempts_total),
            abandoned=value(model, s.abandoned),
            settled=float(value(model, s.settled)),
            reserved=float(value(model, s.reserved)),
            attempt_spend=float(value(model, s.attempt_spend)),
            outcome=outcome[value(model, s.outcome)],
            cancelled=frozenset(cancelled),
        )

    def describe(self, model: z3.ModelRef, s: State) -> dict[str, Any]:
        """The state as plain data for a trace: `RunState.summary` plus extra fields."""
        r = self.read(model, s)
        out = r.summary(self.graph)
        out["attempt_spend"] = r.attempt_spend
        if len(r.passes) > 8:  # a CTI may carry a long history; show what the invariants read
            current = [[v, e] for v, e in sorted(r.passes) if e == r.activation_of(self.graph, v)]
            out["passes"] = current + [f"... {len(r.passes) - len(current)} older"]
        nodes = cast(dict[str, dict[str, Any]], out["nodes"])
        extra = dict(self.representation_fields())
        if isinstance(self.rules, Ghosts):
            extra |= self.rules.extra_fields(self)
        for (name, v) in extra:
            x = value(model, s.terms[(name, v)])
            x = number(x) if isinstance(x, Fraction) else x
            if v is None:
                out[name] = x
            else:
                nodes[v][name] = x
        return out

    # ---- for traces
    def parameters(self) -> list[z3.ExprRef]:
        """The numbers a trace shows (proofs/canonical.py fixes them first)."""
        p = self.params
        b = [] if p.spend_budget is None else [p.spend_budget]
        return [*p.attempts.values(), *p.ceilings.values(), p.repair_budget, *b,
                *p.repairs.values()]

    def observables(self, model: z3.ModelRef, s: State, round_: int) -> list[z3.ExprRef]:
        """Round 0: every scalar field; round 1: the PASS cells a trace shows (activations up
        to the current one, chosen after round 0 fixed the activations)."""
        if round_ == 0:
            return [x for x in s.terms.values() if not z3.is_array(x)]
        if round_ > 1:
            return []
        return [z3.Select(s.passes(v), e) for v in self.graph.names
                for e in range(min(max(value(model, s.activation(v)), -1), 64) + 1)]

    @property
    def case(self) -> str:
        return describe_shape(self.graph)

    def describe_params(self, model: z3.ModelRef) -> dict[str, Any]:
        return self.params.describe(model)

    def concrete(self, model: z3.ModelRef, s: State,
                 ev: Ev | None) -> tuple[RunState, mt.Event | None]:
        return self.read(model, s), None if ev is None else ev.to_model(model)

def _history(pairs: frozenset[tuple[str, int]], v: str) -> z3.ArrayRef:
    """The activations of `v` in a set of (node, activation) pairs, as an Int -> Bool array."""
    arr = z3.K(z3.IntSort(), z3.BoolVal(False))
    for node, e in sorted(pairs):
        if node == v:
            arr = z3.Store(arr, e, True)
    return arr


def describe_shape(graph: LoopGraph) -> str:
    """`nodes {a,b}; needs {a->b}`: a graph's shape in one line (R is listed with the params)."""
    edges = [f"{p}->{n.name}" for n in graph.nodes for p in n.needs]
    return f"nodes {{{','.join(graph.names)}}}; needs {{{', '.join(edges)}}}"
