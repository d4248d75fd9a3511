"""The run model over an UNBOUNDED set of nodes: an uninterpreted sort `Node`, node fields as
arrays over it, the ledger's PASS verdicts as a relation over (node, activation), and the graph as
uninterpreted relations constrained by axioms. A proof here holds for every graph of every size.

Graph axioms: `reach(u, w)` means w is in S_u = {u} + desc(u); it is reflexive, transitive and
antisymmetric (the graph is acyclic); every need p -> v has reach(p, v) and p != v; every repair
pair (d, u) has reach(u, d); a_v >= 1, c_v >= 0, K >= 0, B >= 0. Nothing more is assumed: G2 holds
for any relation with these properties, so it holds for the true descendant relation.

The rules are the rule table's (model/run_rules.py), read through `UnboundedTerms`
(proofs/z3_values.py): a guard's condition over every node is a quantifier over the sort, an
effect on a set of nodes a lambda. With one deliberate over-approximation: "the attempt in
flight is n" reads "n is RUNNING" (the model picks the first RUNNING node). The two agree on
every reachable state (at most one node runs); elsewhere the encoding allows more transitions,
which can only make an invariant harder to prove.

The lifting of a concrete graph and state onto it (`on_graph`, `pin_state`) is what the
differential test (tests/proofs/test_encoding.py) checks it against the model through.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import z3

from loopproof.model import transitions as mt
from loopproof.model.graph import LoopGraph
from loopproof.model.run_rules import RULES, RunRules
from loopproof.model.state import RunState
from loopproof.proofs.canonical import Canonical
from loopproof.proofs.encoding import (
    EPS,
    METERED,
    O_RUNNING,
    OUTCOME,
    S_PENDING,
    STATUS,
    OutcomeSort,
    StatusSort,
    outcome_name,
    real,
    value,
)
from loopproof.proofs.trace import number
from loopproof.proofs.z3_values import Conjuncts, UnboundedTerms, UnboundedWrites, all_of

Node = z3.DeclareSort("Node")
_FRESH = itertools.count()
INT = z3.IntSort()


@dataclass(frozen=True)
class UState:
    status: z3.ArrayRef          # Node -> Status
    activation: z3.ArrayRef      # Node -> Int
    attempts: z3.ArrayRef        # Node -> Int
    passes: z3.ArrayRef          # Node x Int -> Bool: a PASS for (node, activation) is in the ledger
    cancelled: z3.ArrayRef       # Node x Int -> Bool: an operator cancelled (node, activation)
    repairs_used: z3.ArithRef
    attempts_total: z3.ArithRef
    abandoned: z3.ArithRef       # attempts given back by Abandon (repeated executions)
    settled: z3.ArithRef
    reserved: z3.ArithRef
    attempt_spend: z3.ArithRef
    outcome: z3.ExprRef

    def fields(self) -> dict[str, z3.ExprRef]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class UEv:
    """A transition with its node arguments as Node constants (fresh per step in proofs)."""

    kind: str
    system: UnboundedRuns = field(compare=False, repr=False)
    node: z3.ExprRef | None = None
    target: z3.ExprRef | None = None
    passed: bool | None = None
    amount: z3.ArithRef | None = None
    of: z3.ArithRef | None = None  # a Settle's released reservation (None: every one)

    def label(self, model: z3.ModelRef | None = None) -> str:
        def name(x: z3.ExprRef | None) -> str:
            return "?" if model is None or x is None else self.system.node_name(model, x)
        if self.kind in METERED:
            amt = "?" if model is None else str(number(value(model, self.amount)))
            if self.of is not None:
                amt += " of " + ("?" if model is None else str(number(value(model, self.of))))
            return f"{self.kind}({amt}) while {name(self.node)} runs"
        if self.kind == "Verdict":
            return f"Verdict({name(self.node)}, {'PASS' if self.passed else 'FAIL'})"
        if self.kind == "Repair":
            return f"Repair({name(self.node)} -> {name(self.target)})"
        return "Finish()" if self.kind == "Finish" else f"{self.kind}({name(self.node)})"


class UnboundedRuns:
    """States, Init, graph axioms and transitions over a sort of nodes (`Node`, uninterpreted, in
    proofs), under a rule table (`rules`: the model's, or a broken variant of it)."""

    checks_class = Conjuncts  # how a guard's conditions are taken (all of them)

    def __init__(self, rules: RunRules = RULES, node_sort: z3.SortRef = Node) -> None:
        self.rules = rules
        self.N = node_sort
        self.needs = z3.Function("needs", self.N, self.N, z3.BoolSort())
        self.reach = z3.Function("reach", self.N, self.N, z3.BoolSort())
        self.repair = z3.Function("R", self.N, self.N, z3.BoolSort())
        self.a = z3.Function("a", self.N, INT)
        self.c = z3.Function("c", self.N, z3.RealSort())
        self.K = z3.Int("K")
        self.B = z3.Real("B")
        self.B_unbounded = z3.Bool("B_is_inf")
        self._canonical_nodes: list[z3.ExprRef] = []

    # ---- the System protocol (proofs/checks.py)
    def fresh(self, tag: str) -> UState:
        return UState(
            z3.Array(f"status@{tag}", self.N, StatusSort),
            z3.Array(f"activation@{tag}", self.N, INT),
            z3.Array(f"attempts@{tag}", self.N, INT),
            z3.Const(f"passes@{tag}", z3.ArraySort(self.N, INT, z3.BoolSort())),
            z3.Const(f"cancelled@{tag}", z3.ArraySort(self.N, INT, z3.BoolSort())),
            z3.Int(f"repairs_used@{tag}"), z3.Int(f"attempts_total@{tag}"),
            z3.Int(f"abandoned@{tag}"),
            z3.Real(f"settled@{tag}"), z3.Real(f"reserved@{tag}"),
            z3.Real(f"attempt_spend@{tag}"), z3.Const(f"outcome@{tag}", OutcomeSort))

    def axioms(self) -> list[z3.BoolRef]:
        x, y, z = z3.Consts("x y z", self.N)
        reach = self.reach
        return [
            z3.ForAll([x], reach(x, x)),
            z3.ForAll([x, y, z], z3.Implies(z3.And(reach(x, y), reach(y, z)), reach(x, z))),
            z3.ForAll([x, y], z3.Implies(z3.And(reach(x, y), reach(y, x)), x == y)),
            z3.ForAll([x, y], z3.Implies(self.needs(x, y), z3.And(reach(x, y), x != y))),
            z3.ForAll([x, y], z3.Implies(self.repair(x, y), reach(y, x))),
            z3.ForAll([x], z3.And(self.a(x) >= 1, self.c(x) >= 0)),
            self.K >= 0, self.B >= 0,
        ]

    def init(self, s: UState) -> z3.BoolRef:
        x, e = z3.Const("x", self.N), z3.Int("e")
        return z3.And(
            s.status == z3.K(self.N, S_PENDING), s.activation == z3.K(self.N, z3.IntVal(0)),
            s.attempts == z3.K(self.N, z3.IntVal(0)),
            s.passes == z3.Lambda([x, e], z3.BoolVal(False)),
            s.cancelled == z3.Lambda([x, e], z3.BoolVal(False)),
            s.repairs_used == 0, s.attempts_total == 0, s.abandoned == 0, s.settled == 0, s.reserved == 0,
            s.attempt_spend == 0, s.outcome == O_RUNNING)

    def events(self, tag: str) -> list[UEv]:
        def n(name: str) -> z3.ExprRef:
            return z3.Const(f"{name}@{tag}", self.N)
        evs = [UEv(k, self, n("n")) for k in ("Begin", "Refuse", "Abandon", "Claim", "Cancel",
                                              "Fail")]
        evs += [UEv("Verdict", self, n("n"), passed=True), UEv("Verdict", self, n("n"),
                                                               passed=False)]
        evs += [UEv(k, self, n("r"), amount=z3.Real(f"amount_{k}@{tag}")) for k in METERED]
        evs.append(UEv("Settle", self, n("r"), amount=z3.Real(f"amount_SettleOf@{tag}"),
                       of=z3.Real(f"of@{tag}")))
        evs += [UEv("Repair", self, n("d"), n("u")), UEv("Finish", self)]
        return evs

    def guard(self, s: UState, ev: UEv) -> z3.BoolRef:
        g = self.checks_class()
        self.rules.guard(UnboundedTerms(self, s), ev, g)
        return g.formula()

    def update(self, s: UState, ev: UEv) -> dict[str, z3.ExprRef]:
        w = UnboundedWrites(s)
        self.rules.effect(UnboundedTerms(self, s), ev, w)
        return w.out

    def transition(self, s: UState, t: UState, ev: UEv) -> z3.BoolRef:
        upd = self.update(s, ev)
        now, nxt = s.fields(), t.fields()
        return all_of([self.guard(s, ev), *[nxt[k] == upd.get(k, now[k]) for k in now]])

    def within_budget(self, amount: z3.ArithRef) -> z3.BoolRef:
        return z3.Or(self.B_unbounded, amount <= self.B + EPS)

    # ---- canonical counterexamples (proofs/canonical.py)
    def canonical_universe(self, c: Canonical) -> None:
        """The fewest nodes a counterexample needs, named n0, n1, ... in a fixed order."""
        if self.N.kind() != z3.Z3_UNINTERPRETED_SORT:
            return  # the differential test's enumerated nodes are named already
        size = len(c.model.get_universe(self.N) or [])
        self._canonical_nodes = c.least_universe(self.N, max(1, size))

    def parameters(self) -> list[z3.ExprRef]:
        es = self._canonical_nodes
        out: list[z3.ExprRef] = [self.K, self.B_unbounded, self.B]
        for x in es:
            out += [self.a(x), self.c(x)]
            out += [f(x, y) for y in es for f in (self.needs, self.reach, self.repair)]
        return out

    def observables(self, model: z3.ModelRef, s: UState, round_: int) -> list[z3.ExprRef]:
        scalars = [s.repairs_used, s.attempts_total, s.abandoned, s.settled, s.reserved,
                   s.attempt_spend, s.outcome]
        if round_ == 0:
            return [t for x in self._canonical_nodes
                    for t in (s.status[x], s.activation[x], s.attempts[x])] + scalars
        return [s.passes[x, model.eval(s.activation[x], model_completion=True)]
                for x in self._canonical_nodes] if round_ == 1 else []

    # ---- readable counterexamples
    def node_name(self, model: z3.ModelRef, x: z3.ExprRef) -> str:
        names = self._universe(model)
        return names.get(str(model.eval(x, model_completion=True)), "?")

    def _universe(self, model: z3.ModelRef) -> dict[str, str]:
        return {str(e): name for name, e in self._elements(model)}

    def _elements(self, model: z3.ModelRef) -> list[tuple[str, z3.ExprRef]]:
        """The model's nodes, in the canonical order when the counterexample was made canonical."""
        if self._canonical_nodes:
            elems = [model.eval(x, model_completion=True) for x in self._canonical_nodes]
        else:
            elems = list(model.get_universe(self.N) or [])
        return [(f"n{i}", e) for i, e in enumerate(elems)]

    def describe(self, model: z3.ModelRef, s: UState) -> dict[str, Any]:
        nodes = {}
        for name, e in self._elements(model):
            act = value(model, s.activation[e])
            nodes[name] = {"status": value(model, s.status[e]), "activation": act,
                           "attempts": value(model, s.attempts[e]),
                           "pass_current": value(model, s.passes[e, act]),
                           "cancelled_current": value(model, s.cancelled[e, act])}
        return {"nodes": nodes, "outcome": outcome_name(value(model, s.outcome)),
                "repairs_used": value(model, s.repairs_used),
                "attempts_total": value(model, s.attempts_total),
                "abandoned": value(model, s.abandoned),
                "settled": number(value(model, s.settled)),
                "reserved": number(value(model, s.reserved))}

    def describe_params(self, model: z3.ModelRef) -> dict[str, Any]:
        els = self._elements(model)
        return {"nodes": len(els),
                "needs": [f"{p}->{v}" for p, x in els for v, y in els
                          if value(model, self.needs(x, y))],
                "R": [f"({d},{u})" for d, x in els for u, y in els
                      if value(model, self.repair(x, y))]}

    # ---- pinning a concrete graph and state (for the differential test)
    @classmethod
    def on_graph(cls, graph: LoopGraph, rules: RunRules = RULES
                 ) -> tuple[UnboundedRuns, dict[str, z3.ExprRef], list[z3.BoolRef]]:
        """The same encoding (same code, same quantifiers) with the node sort made exactly the
        graph's nodes -- a finite enumeration -- and the relations pinned to the graph's."""
        sort, consts = z3.EnumSort(f"Node_{next(_FRESH)}", [f"node_{v}" for v in graph.names])
        sys = cls(rules, node_sort=sort)
        k = dict(zip(graph.names, consts, strict=True))
        return sys, k, sys.pin_relations(k, graph)

    def pin_relations(self, k: dict[str, z3.ExprRef], graph: LoopGraph) -> list[z3.BoolRef]:
        cs: list[z3.BoolRef] = []
        for v in graph.names:
            for w in graph.names:
                cs += [self.needs(k[v], k[w]) == (v in graph.predecessors(w)),
                       self.reach(k[v], k[w]) == (w in graph.subtree(v)),
                       self.repair(k[v], k[w]) == ((v, w) in graph.repair_pairs)]
            node = graph.node(v)
            cs += [self.a(k[v]) == node.attempts, self.c(k[v]) == real(node.spend_ceiling)]
        cs += [graph.repair_budget == self.K]
        if graph.spend_budget == float("inf"):
            cs.append(self.B_unbounded)
        else:
            cs += [z3.Not(self.B_unbounded), real(graph.spend_budget) == self.B]
        return cs

    def pin_state(self, k: dict[str, z3.ExprRef], graph: LoopGraph, s: UState,
                  r: RunState) -> z3.BoolRef:
        x, e = z3.Const("x", self.N), z3.Int("e")
        passed = z3.Or([z3.And(x == k[v], e == a) for v, a in r.passes] or [False])
        cancelled = z3.Or([z3.And(x == k[v], e == a) for v, a in r.cancelled] or [False])
        cs = [s.passes == z3.Lambda([x, e], passed),
              s.cancelled == z3.Lambda([x, e], cancelled)]
        for v in graph.names:
            cs += [s.status[k[v]] == STATUS[r.status_of(graph, v)],
                   s.activation[k[v]] == r.activation_of(graph, v),
                   s.attempts[k[v]] == r.attempts_of(graph, v)]
        cs += [s.repairs_used == r.repairs_used, s.attempts_total == r.attempts_total,
               s.abandoned == r.abandoned,
               s.settled == real(r.settled), s.reserved == real(r.reserved),
               s.attempt_spend == real(r.attempt_spend), s.outcome == OUTCOME[r.outcome]]
        return all_of(cs)

    def event(self, k: dict[str, z3.ExprRef], graph: LoopGraph, r: RunState,
              event: mt.Event) -> UEv:
        """The encoded transition for a concrete model event (metered events name the node
        whose attempt is in flight, or any node when none is)."""
        kind = mt.EVENT_NAMES[type(event)]
        e: Any = event  # its fields are those of the class `kind` names
        if kind in METERED:
            running = r.running(graph) or graph.names[0]
            of = getattr(event, "of", None)
            return UEv(kind, self, k[running], amount=real(e.amount),
                       of=None if of is None else real(of))
        if kind == "Repair":
            return UEv(kind, self, k[e.node], k[e.target])
        if kind == "Finish":
            return UEv(kind, self)
        return UEv(kind, self, k[e.node], passed=getattr(event, "passed", None))
