"""The Z3 encoding of `model/`: a run state as Z3 terms, one guard and one update per declared
transition (Begin, Refuse, Reserve, Overrun, Settle, Verdict, Abandon, Claim, Cancel, Repair, Fail,
Finish).

The graph's *shape* (nodes, needs, repair relation) is fixed per encoding; its numbers
(a_v, c_v, K, B) are Z3 terms, so one encoding serves both the concrete graphs of the differential
test and the symbolic ones of the proofs (every a_v >= 1, every K >= 0, ...).

`Semantics` holds the rules; a broken variant subclasses it and overrides one rule, so a broken
model differs from the real one in exactly the place its name says.

Why one module: over 400 lines on purpose, since the guard and the update of every transition
are read side by side with model/transitions.py, one rule per method of `Semantics`, so that a
broken variant overrides exactly one of them; splitting by transition would scatter that
one-to-one reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

import z3

from loopproof.model import transitions as mt
from loopproof.model.graph import LoopGraph
from loopproof.model.state import Outcome, RunState, Status
from loopproof.proofs.trace import number

StatusSort, (S_PENDING, S_RUNNING, S_DONE, S_EXHAUSTED) = z3.EnumSort(
    "Status", ["PENDING", "RUNNING", "DONE", "EXHAUSTED"])
OutcomeSort, (O_RUNNING, O_DONE, O_FAILED, O_BUDGET) = z3.EnumSort(
    "Outcome", ["RUN", "DONE_RUN", "FAILED", "BUDGET_EXHAUSTED"])

def outcome_name(z3_name: str) -> str:
    """The model's name (`Outcome.value`) of an Outcome enum constant printed by Z3."""
    return {str(z): o.value for o, z in OUTCOME.items()}[z3_name]


STATUS = {Status.PENDING: S_PENDING, Status.RUNNING: S_RUNNING, Status.DONE: S_DONE,
          Status.EXHAUSTED: S_EXHAUSTED}
OUTCOME = {Outcome.RUNNING: O_RUNNING, Outcome.DONE: O_DONE, Outcome.FAILED: O_FAILED,
           Outcome.BUDGET_EXHAUSTED: O_BUDGET}

KINDS = tuple(mt.EVENT_NAMES.values())  # the model's event names (model/transitions.py)
METERED = ("Reserve", "Overrun", "Settle")  # the events that carry an amount


def real(x: float | Fraction | int) -> z3.ArithRef:
    """The exact rational value of a Python number (floats are binary fractions, kept exact)."""
    return z3.RealVal(str(Fraction(x)))


EPS = real(mt.EPS)


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

@dataclass
class State:
    """A run state as Z3 constants, one per field: `status:v`, `activation:v`, `attempts:v`,
    `passes:v` (the activations of v with a PASS in the ledger), `cancelled:v` (the activations
    of v an operator cancelled), the globals, and any extra fields a semantics declares (ghosts,
    or a broken variant's own counters)."""

    vars: dict[str, z3.ExprRef]

    def __getitem__(self, key: str) -> z3.ExprRef:
        return self.vars[key]

    def st(self, v: str) -> z3.ExprRef:
        return self.vars[f"status:{v}"]

    def act(self, v: str) -> z3.ArithRef:
        return self.vars[f"activation:{v}"]

    def att(self, v: str) -> z3.ArithRef:
        return self.vars[f"attempts:{v}"]

    def passes(self, v: str) -> z3.ArrayRef:
        return self.vars[f"passes:{v}"]

    def cancelled(self, v: str) -> z3.ArrayRef:
        return self.vars[f"cancelled:{v}"]


# ---- the rules ----------------------------------------------------------------------------------

def released(reserved: z3.ArithRef, ev: Ev | Any) -> z3.ArithRef:
    """The reservation a Settle releases: its `of`, or (None) every outstanding one."""
    return reserved if ev.of is None else ev.of


class Semantics:
    """The model's rules, one guard and one update per event kind, written as in
    model/transitions.py. A broken variant subclasses this and overrides one method."""

    name = "model"

    def extra_fields(self, enc: RunEncoding) -> dict[str, z3.SortRef]:
        return {}

    def extra_init(self, enc: RunEncoding, s: State) -> list[z3.BoolRef]:
        return []

    def guard(self, enc: RunEncoding, s: State, ev: Ev) -> z3.BoolRef:
        return getattr(self, f"guard_{ev.kind.lower()}")(enc, s, ev)

    def update(self, enc: RunEncoding, s: State, ev: Ev) -> dict[str, z3.ExprRef]:
        return getattr(self, f"update_{ev.kind.lower()}")(enc, s, ev)

    # Begin / Refuse: admission checks settled + c_v <= B before the attempt starts
    def guard_begin(self, enc, s, ev):
        return z3.And(enc.ready(s, ev.node), enc.fits(s, ev.node))

    def update_begin(self, enc, s, ev):
        v = ev.node
        return {f"status:{v}": S_RUNNING, f"attempts:{v}": s.att(v) + 1,
                "attempts_total": s["attempts_total"] + 1, "attempt_spend": real(0)}

    def guard_refuse(self, enc, s, ev):
        return z3.And(enc.ready(s, ev.node), z3.Not(enc.fits(s, ev.node)))

    def update_refuse(self, enc, s, ev):
        return {"outcome": O_BUDGET}

    # Reserve / Overrun / Settle: metering inside the attempt
    def guard_reserve(self, enc, s, ev):
        return z3.And(enc.in_attempt(s), ev.amount >= 0, enc.reservation_fits(s, ev.amount))

    def update_reserve(self, enc, s, ev):
        return {"reserved": s["reserved"] + ev.amount,
                "attempt_spend": s["attempt_spend"] + ev.amount}

    def guard_overrun(self, enc, s, ev):
        return z3.And(enc.in_attempt(s), ev.amount >= 0, s["reserved"] <= EPS,
                      z3.Not(enc.reservation_fits(s, ev.amount)))

    def update_overrun(self, enc, s, ev):
        return enc.end_running_attempt(s)

    def guard_settle(self, enc, s, ev):
        of = released(s["reserved"], ev)
        return z3.And(enc.in_attempt(s), of >= 0, of <= s["reserved"], ev.amount >= 0,
                      ev.amount <= of)

    def update_settle(self, enc, s, ev):
        of = released(s["reserved"], ev)
        return {"settled": s["settled"] + ev.amount, "reserved": s["reserved"] - of,
                "attempt_spend": s["attempt_spend"] - of + ev.amount}

    # Verdict / Abandon / Claim: the end of an attempt, and the worker's words that end nothing
    def guard_verdict(self, enc, s, ev):
        return z3.And(enc.in_attempt(s, ev.node), s["reserved"] <= EPS)

    def update_verdict(self, enc, s, ev):
        return enc.end_attempt(s, ev.node, ev.passed)

    def guard_abandon(self, enc, s, ev):
        return enc.in_attempt(s, ev.node)

    def update_abandon(self, enc, s, ev):
        """Charged its reservation and given back: PENDING, the attempt uncounted, `abandoned`
        counts the repeated execution."""
        v = ev.node
        return {f"status:{v}": S_PENDING, f"attempts:{v}": s.att(v) - 1,
                "attempts_total": s["attempts_total"] - 1, "abandoned": s["abandoned"] + 1,
                "settled": s["settled"] + s["reserved"], "reserved": real(0),
                "attempt_spend": real(0)}

    def guard_claim(self, enc, s, ev):
        return enc.in_attempt(s, ev.node)

    def update_claim(self, enc, s, ev):
        return {}

    # Cancel: the operator ends the activation of a node that is next to run, without a verdict
    def guard_cancel(self, enc, s, ev):
        return enc.ready(s, ev.node)

    def update_cancel(self, enc, s, ev):
        v = ev.node
        return {f"status:{v}": S_EXHAUSTED,
                f"cancelled:{v}": z3.Store(s.cancelled(v), s.act(v), True)}

    # Repair / Fail / Finish
    def guard_repair(self, enc, s, ev):
        return z3.And(enc.in_relation(ev.node, ev.target), enc.live(s),
                      s.st(ev.node) == S_EXHAUSTED,
                      s["repairs_used"] < enc.params.repair_budget)

    def update_repair(self, enc, s, ev):
        upd = enc.reset_subtree(s, ev.target)
        upd["repairs_used"] = s["repairs_used"] + 1
        return upd

    def guard_fail(self, enc, s, ev):
        no_repair = z3.Or(z3.Not(enc.has_pair(ev.node)),
                          s["repairs_used"] >= enc.params.repair_budget)
        return z3.And(enc.live(s), s.st(ev.node) == S_EXHAUSTED, no_repair)

    def update_fail(self, enc, s, ev):
        return {"outcome": O_FAILED}

    def guard_finish(self, enc, s, ev):
        return z3.And(enc.live(s), *[s.st(v) == S_DONE for v in enc.graph.names])

    def update_finish(self, enc, s, ev):
        return {"outcome": O_DONE}


# ---- the encoding -------------------------------------------------------------------------------

@dataclass
class RunEncoding:
    """States, Init and the transition relation of one graph shape under one semantics."""

    graph: LoopGraph
    params: Params
    semantics: Semantics = field(default_factory=Semantics)

    def fields(self) -> dict[str, z3.SortRef]:
        f: dict[str, z3.SortRef] = {}
        for v in self.graph.names:
            f[f"status:{v}"] = StatusSort
            f[f"activation:{v}"] = z3.IntSort()
            f[f"attempts:{v}"] = z3.IntSort()
            f[f"passes:{v}"] = z3.ArraySort(z3.IntSort(), z3.BoolSort())
            f[f"cancelled:{v}"] = z3.ArraySort(z3.IntSort(), z3.BoolSort())
        f |= {"repairs_used": z3.IntSort(), "attempts_total": z3.IntSort(),
              "abandoned": z3.IntSort(), "settled": z3.RealSort(), "reserved": z3.RealSort(),
              "attempt_spend": z3.RealSort(), "outcome": OutcomeSort}
        f |= self.semantics.extra_fields(self)
        return f

    def fresh(self, tag: str) -> State:
        return State({k: z3.Const(f"{k}@{tag}", sort) for k, sort in self.fields().items()})

    def axioms(self) -> list[z3.BoolRef]:
        return list(self.params.constraints)

    # ---- Init and the transition relation
    def init(self, s: State) -> z3.BoolRef:
        cs: list[z3.BoolRef] = []
        for v in self.graph.names:
            cs += [s.st(v) == S_PENDING, s.act(v) == 0, s.att(v) == 0,
                   s.passes(v) == z3.K(z3.IntSort(), z3.BoolVal(False)),
                   s.cancelled(v) == z3.K(z3.IntSort(), z3.BoolVal(False))]
        cs += [s["repairs_used"] == 0, s["attempts_total"] == 0, s["abandoned"] == 0,
               s["settled"] == 0,
               s["reserved"] == 0, s["attempt_spend"] == 0, s["outcome"] == O_RUNNING]
        cs += self.semantics.extra_init(self, s)
        return z3.And(cs)

    def guard(self, s: State, ev: Ev) -> z3.BoolRef:
        return self.semantics.guard(self, s, ev)

    def transition(self, s: State, t: State, ev: Ev) -> z3.BoolRef:
        """guard(s) and t = update(s), every field the update does not name left unchanged."""
        upd = self.semantics.update(self, s, ev)
        unknown = set(upd) - set(s.vars)
        assert not unknown, f"update names unknown fields {unknown}"
        return z3.And(self.guard(s, ev), *[t[k] == upd.get(k, s[k]) for k in s.vars])

    def events(self, tag: str) -> list[Ev]:
        return event_instances(self.graph, tag)

    # ---- shared guards (as in model/transitions.py)
    def in_relation(self, d: str, u: str) -> z3.BoolRef:
        return self.params.repairs[(d, u)]

    def has_pair(self, d: str) -> z3.BoolRef:
        """Some (d, u) is in R."""
        return z3.Or([x for (d2, _), x in self.params.repairs.items() if d2 == d] or [False])

    def live(self, s: State) -> z3.BoolRef:
        return s["outcome"] == O_RUNNING

    def running_is(self, s: State, v: str) -> z3.BoolRef:
        """`v` is the node `RunState.running` returns: the first RUNNING one in order."""
        names = self.graph.names
        before = names[:names.index(v)]
        return z3.And(s.st(v) == S_RUNNING, *[s.st(w) != S_RUNNING for w in before])

    def in_attempt(self, s: State, node: str | None = None) -> z3.BoolRef:
        if node is None:
            return z3.And(self.live(s), z3.Or([s.st(v) == S_RUNNING for v in self.graph.names]))
        return z3.And(self.live(s), self.running_is(s, node))

    def ready(self, s: State, v: str) -> z3.BoolRef:
        names = self.graph.names
        return z3.And(self.live(s),
                      *[s.st(w) != S_RUNNING for w in names],
                      *[s.st(w) != S_EXHAUSTED for w in names],
                      s.st(v) == S_PENDING,
                      *[s.st(p) == S_DONE for p in self.graph.predecessors(v)])

    def within_budget(self, amount: z3.ArithRef) -> z3.BoolRef:
        b = self.params.spend_budget
        return z3.BoolVal(True) if b is None else amount <= b + EPS

    def fits(self, s: State, v: str) -> z3.BoolRef:
        return self.within_budget(s["settled"] + self.params.ceilings[v])

    def running_ceiling(self, s: State) -> z3.ArithRef:
        c: z3.ArithRef = real(0)
        for v in reversed(self.graph.names):
            c = z3.If(self.running_is(s, v), self.params.ceilings[v], c)
        return c

    def reservation_fits(self, s: State, amount: z3.ArithRef) -> z3.BoolRef:
        return z3.And(s["attempt_spend"] + amount <= self.running_ceiling(s) + EPS,
                      self.within_budget(s["settled"] + s["reserved"] + amount))

    # ---- shared updates
    def end_attempt(self, s: State, v: str, passed: bool) -> dict[str, z3.ExprRef]:
        upd: dict[str, z3.ExprRef] = {"attempt_spend": real(0)}
        if passed:
            upd[f"status:{v}"] = S_DONE
            upd[f"passes:{v}"] = z3.Store(s.passes(v), s.act(v), True)
        else:
            upd[f"status:{v}"] = z3.If(s.att(v) < self.params.attempts[v], S_PENDING, S_EXHAUSTED)
        return upd

    def end_running_attempt(self, s: State) -> dict[str, z3.ExprRef]:
        """A failed end of whichever attempt is in flight (Overrun names no node)."""
        upd: dict[str, z3.ExprRef] = {"attempt_spend": real(0)}
        for v in self.graph.names:
            after = z3.If(s.att(v) < self.params.attempts[v], S_PENDING, S_EXHAUSTED)
            upd[f"status:{v}"] = z3.If(self.running_is(s, v), after, s.st(v))
        return upd

    def reset_subtree(self, s: State, u: str) -> dict[str, z3.ExprRef]:
        upd: dict[str, z3.ExprRef] = {}
        for w in self.graph.subtree(u):
            upd |= {f"status:{w}": S_PENDING, f"activation:{w}": s.act(w) + 1,
                    f"attempts:{w}": z3.IntVal(0)}
        return upd

    # ---- between Z3 and model.RunState
    def pin(self, s: State, r: RunState) -> z3.BoolRef:
        """`s` equals the concrete state `r` (extra fields are left free)."""
        g = self.graph
        cs: list[z3.BoolRef] = []
        for v in g.names:
            cs += [s.st(v) == STATUS[r.status_of(g, v)], s.act(v) == r.activation_of(g, v),
                   s.att(v) == r.attempts_of(g, v), s.passes(v) == _history(r.passes, v),
                   s.cancelled(v) == _history(r.cancelled, v)]
        cs += [s["repairs_used"] == r.repairs_used, s["attempts_total"] == r.attempts_total,
               s["abandoned"] == r.abandoned, s["settled"] == real(r.settled), s["reserved"] == real(r.reserved),
               s["attempt_spend"] == real(r.attempt_spend), s["outcome"] == OUTCOME[r.outcome]]
        return z3.And(cs)

    def read(self, model: z3.ModelRef, s: State) -> RunState:
        g = self.graph
        by_name = {str(z): st for st, z in STATUS.items()}
        outcome = {str(z): o for o, z in OUTCOME.items()}
        passes, cancelled = set(), set()
        for v in g.names:
            for e in range(value(model, s.act(v)) + 1):
                if value(model, z3.Select(s.passes(v), e)):
                    passes.add((v, e))
                if value(model, z3.Select(s.cancelled(v), e)):
                    cancelled.add((v, e))
        return RunState(
            status=tuple(by_name[value(model, s.st(v))] for v in g.names),
            activation=tuple(value(model, s.act(v)) for v in g.names),
            attempts=tuple(value(model, s.att(v)) for v in g.names),
            passes=frozenset(passes),
            repairs_used=value(model, s["repairs_used"]),
            attempts_total=value(model, s["attempts_total"]),
            abandoned=value(model, s["abandoned"]),
            settled=float(value(model, s["settled"])),
            reserved=float(value(model, s["reserved"])),
            attempt_spend=float(value(model, s["attempt_spend"])),
            outcome=outcome[value(model, s["outcome"])],
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
        for k in self.semantics.extra_fields(self):
            x = value(model, s[k])
            x = number(x) if isinstance(x, Fraction) else x
            if ":" in k:
                name, v = k.split(":", 1)
                nodes[v][name] = x
            else:
                out[k] = x
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
            return [x for x in s.vars.values() if not z3.is_array(x)]
        if round_ > 1:
            return []
        return [z3.Select(s.passes(v), e) for v in self.graph.names
                for e in range(min(max(value(model, s.act(v)), -1), 64) + 1)]

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
