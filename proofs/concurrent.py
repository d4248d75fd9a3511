"""G1, G2 and G3 with several attempts in flight (`LoopGraph.max_parallel`, symbolic here).

The encoding is the run encoding (proofs/encoding.py) with the rule table's concurrent
conditions on (model/run_rules.py): each node's attempt in flight has its own account (`reserved:v`, `spent:v`),
the scalars `reserved` and `attempt_spend` are their totals, spend events name their node, and
`max_parallel` is a symbolic integer >= 1, so one proof per shape covers every limit, the serial
one (1) included. The family is proofs/family.py's (every DAG up to 3 nodes, every repair
relation, a_v, c_v, K, B symbolic).

What is proved, per shape: the attempt bound (attempts_total <= W, the serial invariant with "at
most one attempt in flight" dropped from its structural facts) and the ranking; G3 at every step,
settled + every open reservation <= B + EPS, with each attempt within its own c_v; and what
admission promises, `held` (settled + what every attempt in flight may still charge) <= B, so an
admitted attempt can always reserve up to its c_v. `held` is proved with exact amounts (the float
tolerance EPS = 0): with EPS, an attempt may settle c_v + EPS, and the EPSs of several attempts
add up in `held` though never in G3.

G2 is also proved for every graph size and every limit, on `AnyNumberInFlight`: the unbounded
encoding (proofs/unbounded.py) with its guards loosened (no capacity, no spend condition).

Broken variants, each refuted by a run from Init: check then reserve (admission counts only what
is settled, and a reservation trusts admission, checked against its c_v only: two attempts in
flight overspend B); check then reserve with the run-wide reservation check kept (B holds, but an
admitted attempt is starved: `held` > B); and a repair that resets a node whose attempt is in flight
(the attempt is dropped with its open reservation, which its worker still spends: the real
exposure passes B). Termination: G1's ranking with its ghost counter of operations kept per
attempt in flight (`BoundedConcurrent`) decreases on every transition, under G1's two stated
assumptions (at most P operations/claims per attempt, at most C recovered crashes).

Why one module: just over 400 lines on purpose, since the invariants and broken variants are one
argument about the concurrent rules (each variant overrides one rule of the table and is
refuted against the invariant that rule keeps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RULES, RunRules, not_exhausted, repairs_spent, unfit
from loopproof.model.run_rules import not_in_relation as not_in_r
from loopproof.proofs.checks import (
    Found,
    bmc,
    check_enabled,
    check_inductive,
    check_init_satisfiable,
    check_ranking,
    first,
)

__all__ = ["check_inductive"]  # (tests reach it through this module)
from loopproof.proofs.encoding import (
    EPS,
    METERED,
    O_RUNNING,
    S_DONE,
    S_PENDING,
    S_RUNNING,
    Ev,
    Ghosts,
    Params,
    RunEncoding,
    State,
    assumed,
    real,
    value,
)
from loopproof.proofs.family import shapes
from loopproof.proofs.g1_finishes import C, P, closed_form, mu, per_repair, remaining
from loopproof.proofs.g2_no_drift import SelfReportMarksDone, no_drift
from loopproof.proofs.unbounded import UnboundedRuns
from loopproof.proofs.z3_values import ConcurrentTerms, ConcurrentWrites, Loosened

MAX_PARALLEL = z3.Int("max_parallel")


def reserved_of(s: State, v: str) -> z3.ArithRef:
    return s.ghost("reserved", v)


def spent_of(s: State, v: str) -> z3.ArithRef:
    return s.ghost("spent", v)


@dataclass
class ConcurrentEncoding(RunEncoding):
    """The run encoding with several attempts in flight, at most `max_parallel`: the rule
    table's rules with `concurrent` true, each node's account (`reserved:v`, `spent:v`) beside
    the run's totals (proofs/z3_values.py, `ConcurrentTerms`)."""

    max_parallel: z3.ArithRef = field(default_factory=lambda: MAX_PARALLEL)
    kinds: tuple[str, ...] | None = None  # a bounded search's events (None: every kind)

    terms_class = ConcurrentTerms
    writes_class = ConcurrentWrites

    def representation_fields(self):
        return {k: z3.RealSort() for v in self.graph.names
                for k in (("reserved", v), ("spent", v))}

    def representation_init(self, s):
        return [x == 0 for v in self.graph.names for x in (reserved_of(s, v), spent_of(s, v))]

    def axioms(self) -> list[z3.BoolRef]:
        return [*super().axioms(), self.max_parallel >= 1]

    def parameters(self) -> list[z3.ExprRef]:
        return [*super().parameters(), self.max_parallel]

    def describe_params(self, model: z3.ModelRef) -> dict[str, Any]:
        return {**super().describe_params(model), "max_parallel": value(model, self.max_parallel)}

    def events(self, tag: str) -> list[Ev]:
        """Every transition; the spend events once per node (each names its attempt)."""
        evs = [ev for ev in super().events(tag) if ev.kind not in METERED]
        for v in self.graph.names:
            evs += [Ev(k, v, amount=z3.Real(f"amount_{k}_{v}_{tag}")) for k in METERED]
            evs.append(Ev("Settle", v, amount=z3.Real(f"amount_SettleOf_{v}_{tag}"),
                          of=z3.Real(f"of_{v}_{tag}")))
        return evs if self.kinds is None else [ev for ev in evs if ev.kind in self.kinds]

    # ---- what the invariants read (the representation's, as the rules read it)
    def in_flight(self, s: State) -> z3.ArithRef:
        return self.view(s).in_flight()

    def held(self, s: State) -> z3.ArithRef:
        """`RunState.held`: settled + sum over attempts in flight of c_w - what w settled."""
        return self.view(s).held()


def encoding(graph: LoopGraph, rules: RunRules | None = None, exact: bool = False,
             params: Params | None = None) -> ConcurrentEncoding:
    return ConcurrentEncoding(graph, params or Params.symbolic(graph), rules or RULES,
                              eps=real(0) if exact else EPS)


# ---- the invariants -----------------------------------------------------------------------------

def accounts(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    """Each attempt in flight holds 0 <= reserved <= spent <= c_v (+ eps), nothing else holds
    anything, and the totals are the sums of the accounts."""
    c = enc.params.ceilings
    cs: list[z3.BoolRef] = [s.settled >= 0]
    for v in enc.graph.names:
        r, x = reserved_of(s, v), spent_of(s, v)
        cs.append(z3.If(s.status(v) == S_RUNNING, z3.And(r >= 0, r <= x, x <= c[v] + enc.eps),
                        z3.And(r == 0, x == 0)))
    cs += [s.reserved == z3.Sum([reserved_of(s, v) for v in enc.graph.names]),
           s.attempt_spend == z3.Sum([spent_of(s, v) for v in enc.graph.names])]
    return z3.And(cs)


def no_overspend(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    """G3: settled + every open reservation <= B + eps."""
    return enc.within_budget(s.settled + s.reserved)


def spend_invariant(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    return z3.And(accounts(enc, s), no_overspend(enc, s))


def held_invariant(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    return z3.And(accounts(enc, s), enc.within_budget(enc.held(s)))


def never_starved(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    """Every attempt in flight may still reserve up to its c_v within B."""
    c = enc.params.ceilings
    return z3.And([z3.Implies(s.status(v) == S_RUNNING, enc.within_budget(
        s.settled + s.reserved + c[v] - spent_of(s, v))) for v in enc.graph.names])


def structural(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    """G1's structural facts (proofs/g1_finishes.py) without "at most one attempt in flight":
    counters in range, at most max_parallel in flight, and a node that has started in its
    activation has every ancestor DONE."""
    g, a = enc.graph, enc.params.attempts
    cs: list[z3.BoolRef] = [enc.in_flight(s) <= enc.max_parallel]
    for v in g.names:
        st, i = s.status(v), s.attempts(v)
        cs += [i >= 0, i <= a[v], z3.Implies(st == S_PENDING, i < a[v]),
               z3.Implies(st == S_RUNNING, i >= 1)]
        for w in g.desc(v):
            cs.append(z3.Implies(z3.Or(s.status(w) != S_PENDING, s.attempts(w) > 0), st == S_DONE))
    cs += [s.repairs_used >= 0, s.repairs_used <= enc.params.repair_budget]
    return z3.And(cs)


def attempt_invariant(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    lhs = s.attempts_total + z3.Sum([remaining(enc, s, v) for v in enc.graph.names])
    rhs = z3.Sum(list(enc.params.attempts.values())) + s.repairs_used * per_repair(enc)
    return z3.And(structural(enc, s), lhs <= rhs)


def within_w(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    return s.attempts_total <= closed_form(enc)


# ---- the obligations on the family -------------------------------------------------------------

def attempt_bound_family() -> Found:
    def one(graph: LoopGraph) -> Found:
        enc = encoding(graph)
        return check_inductive(enc, lambda s: attempt_invariant(enc, s),
                               lambda s: within_w(enc, s), "attempts_total <= W")
    return first(one(g) for g in shapes())


class BoundedConcurrent(Ghosts):
    """The concurrent rules under G1's two termination assumptions (proofs/g1_finishes.py), the
    first kept per attempt: at most P metered operations and claims per attempt in flight (a ghost
    `ops:v` per node, reset by Begin(v)), and at most C recovered crashes in the run."""

    name = "concurrent model + at most P operations/claims per attempt + at most C crashes"
    COUNTED = ("Reserve", "Settle", "Claim")

    def extra_fields(self, enc):
        return {("ops", v): z3.IntSort() for v in enc.graph.names}

    def extra_init(self, enc, s):
        return [s.ghost("ops", v) == 0 for v in enc.graph.names]

    def guard(self, s, ev, g):
        super().guard(s, ev, g)
        if ev.kind in self.COUNTED:
            g.need(s.ghost("ops", ev.node) < P, assumed)
        elif ev.kind == "Abandon":
            g.need(s.abandoned < C, assumed)

    def effect(self, s, ev, u):
        super().effect(s, ev, u)
        if ev.kind in self.COUNTED:
            u.set_ghost("ops", s.ghost("ops", ev.node) + 1, ev.node)
        elif ev.kind == "Begin":
            u.set_ghost("ops", z3.IntVal(0), ev.node)


def ranking_family() -> Found:
    """(live, K - repairs_used, C - abandoned, sum_v mu_v, sum_v (P - ops_v)) in N^5 decreases
    lexicographically on every transition of the concurrent model under both assumptions."""
    return first(check_ranking_of(g) for g in shapes())


def check_ranking_of(graph: LoopGraph, rules: RunRules | None = None) -> Found:
    enc = encoding(graph, rules or BoundedConcurrent(),
                   params=Params.symbolic(graph).with_constraints(P >= 0, C >= 0))
    names = graph.names

    def inv(s: State) -> z3.BoolRef:
        return z3.And(structural(enc, s), s.abandoned >= 0, s.abandoned <= C,
                      *[z3.And(s.ghost("ops", v) >= 0, s.ghost("ops", v) <= P) for v in names])

    def rank(s: State) -> list[z3.ArithRef]:
        return [z3.If(s.outcome == O_RUNNING, 1, 0),
                enc.params.repair_budget - s.repairs_used, C - s.abandoned,
                z3.Sum([mu(enc, s, v) for v in names]),
                z3.Sum([P - s.ghost("ops", v) for v in names])]

    return check_inductive(enc, inv) or check_ranking(enc, inv, rank)


class AnyNumberInFlight(UnboundedRuns):
    """The unbounded encoding (every graph size) with its rules loosened, never tightened: every
    condition on room for another attempt and on spend dropped (proofs/z3_values.py,
    `Loosened`), so any number of attempts may be in flight and Begin, Refuse, Reserve,
    Overrun, Settle and Verdict need only what they need of the statuses. The control updates
    are the model's, and no guard left reads a spend field, so the statuses, activations and
    passes of every run of the concurrent model, whatever its max_parallel and amounts, are
    those of a run of this one: an invariant over them here holds for every limit."""

    checks_class = Loosened


def no_drift_any_graph() -> Found:
    """G2 over an unbounded sort of nodes with any number of attempts in flight."""
    return check_inductive(AnyNumberInFlight(), no_drift)


def no_drift_any_graph_sanity() -> Found:
    """Init and every loosened transition satisfiable under the invariant (several in flight)."""
    sys = AnyNumberInFlight()
    return check_init_satisfiable(sys, no_drift) or check_enabled(sys, no_drift)


def no_drift_any_graph_and_sanity() -> Found:
    return no_drift_any_graph() or no_drift_any_graph_sanity()


def no_drift_any_graph_self_report() -> Found:
    """The same with a worker's Claim marking DONE (the G2 broken variant): must be refuted."""
    return check_inductive(AnyNumberInFlight(SelfReportMarksDone()), no_drift)


def no_overspend_family() -> Found:
    def one(graph: LoopGraph) -> Found:
        enc = encoding(graph)
        return check_inductive(enc, lambda s: spend_invariant(enc, s))
    return first(one(g) for g in shapes())


def held_family() -> Found:
    def one(graph: LoopGraph) -> Found:
        enc = encoding(graph, exact=True)
        return check_inductive(enc, lambda s: held_invariant(enc, s),
                               lambda s: never_starved(enc, s),
                               "every attempt in flight may still reserve up to its c_v")
    return first(one(g) for g in shapes())


def sanity_family() -> Found:
    """Init and every transition satisfiable under the G1 and G3 invariants."""
    def one(graph: LoopGraph) -> Found:
        enc = encoding(graph)

        def inv(s: State) -> z3.BoolRef:
            return z3.And(attempt_invariant(enc, s), spend_invariant(enc, s))

        return check_init_satisfiable(enc, inv) or check_enabled(enc, inv)
    return first(one(g) for g in shapes())


# ---- broken variants ----------------------------------------------------------------------------

class CheckThenReserve(RunRules):
    """Broken: each Begin checks settled + c_v <= B, as if nothing were in flight, and each
    reservation trusts admission (checked against its attempt's c_v only): the race of a budget
    proxy whose every request sees room."""

    name = "check then reserve: admission counts only settled spend"

    def fits(self, s, v):
        return s.within_budget(s.settled + s.ceiling(v))

    def reservation_fits(self, s, a, amount):
        return a.spent + amount <= a.ceiling + s.eps


class CheckThenReserveGuarded(RunRules):
    """Broken, more subtly: admission counts only settled spend, but every reservation is still
    checked against B. B holds; an admitted attempt may find its c_v gone."""

    name = "check then reserve, reservations checked against B"

    def guard_begin(self, s, ev, g):
        self.ready(s, g, ev.node)
        g.need_spend(s.within_budget(s.settled + s.ceiling(ev.node)), unfit)


class RepairDropsFlight(Ghosts):
    """Broken: a repair resets S_u even while a node of it has an attempt in flight; that
    attempt is dropped from the run's accounts with its open reservation, though its worker
    still runs and spends it. A ghost `exposure` counts what is really committed: settled plus
    every reservation made and not yet released, dropped ones included."""

    name = "a repair resets an attempt in flight"

    def extra_fields(self, enc):
        return {("exposure", None): z3.RealSort()}

    def extra_init(self, enc, s):
        return [s.ghost("exposure") == 0]

    def effect(self, s, ev, u):
        super().effect(s, ev, u)
        if ev.kind == "Repair":
            return  # the dropped reservations stay exposed
        moved = (u.current(("settled", None)) - s.settled) + (
            u.current(("reserved", None)) - s.reserved)
        u.set_ghost("exposure", s.ghost("exposure") + moved)

    def guard_repair(self, s, ev, g):
        """The model's guard without its wait for the attempts in flight in S_u."""
        d, target = ev.node, ev.target
        self.live(s, g)
        g.need(s.in_relation(d, target), not_in_r, d, target)
        g.need(s.status(d) == s.EXHAUSTED, not_exhausted, d)
        g.need(s.repairs_used < s.repair_budget, repairs_spent)

    def effect_repair(self, s, ev, u):
        super().effect_repair(s, ev, u)
        u.for_each(s.subtree(ev.target), lambda w: u.close(s.attempt(w)))  # dropped


# Two nodes side by side: either attempt fits B alone (c = 2, B = 3), both together do not.
PAIR = LoopGraph.build([NodeSpec("a", spend_ceiling=2.0), NodeSpec("b", spend_ceiling=2.0)],
                       spend_budget=3.0, max_parallel=2)
# x and y side by side under r; y's failure repairs r, whose subtree holds x.
FORK = LoopGraph.build([NodeSpec("r", spend_ceiling=1.0),
                        NodeSpec("x", spend_ceiling=1.0, needs=("r",)),
                        NodeSpec("y", spend_ceiling=0.0, needs=("r",), repairs=("r",))],
                       repair_budget=1, spend_budget=1.0, max_parallel=2)


def concrete(graph: LoopGraph, rules: RunRules, exact: bool = False) -> ConcurrentEncoding:
    return ConcurrentEncoding(graph, Params.of(graph), rules,
                              max_parallel=z3.IntVal(graph.max_parallel),
                              eps=real(0) if exact else EPS)


def run_check_then_reserve(depth: int = 4) -> Found:
    enc = concrete(PAIR, CheckThenReserve())
    return bmc(enc, lambda s: z3.Not(no_overspend(enc, s)), depth,
               "G3 (settled + every open reservation <= B)")


def run_check_then_reserve_starves(depth: int = 3) -> Found:
    enc = concrete(PAIR, CheckThenReserveGuarded(), exact=True)
    return bmc(enc, lambda s: z3.Not(never_starved(enc, s)), depth,
               "every attempt in flight may still reserve up to its c_v")


def run_repair_drops_flight(depth: int = 8) -> Found:
    """A run of the broken model from Init after which a reservation a worker still holds is
    no longer counted by G3 (exposure > settled + reserved; from there new attempts are admitted
    against B as if it were free: two steps later the exposure passes B). Searched among Begin,
    Verdict, Cancel, Reserve and Repair only, which keeps the search cheap; any run found is a
    run of the variant. The shortest is 6 steps; searched up to 8 (the docs' margin of two,
    which costs nothing: the search stops at the shortest run)."""
    enc = concrete(FORK, RepairDropsFlight())
    enc.kinds = ("Begin", "Verdict", "Cancel", "Reserve", "Repair")
    return bmc(enc, lambda s: s.ghost("exposure") > s.settled + s.reserved, depth,
               "G3 counting every reservation a worker holds (exposure = settled + reserved)")
