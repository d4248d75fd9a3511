"""G1, G2 and G3 with several attempts in flight (`LoopGraph.max_parallel`, symbolic here).

The encoding is the run encoding (proofs/encoding.py) with the concurrent rules of
model/transitions.py: each node's attempt in flight has its own account (`reserved:v`, `spent:v`),
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

Why one module: just over 400 lines on purpose, since the concurrent rules are read side by side
with model/transitions.py and the invariants and broken variants are one argument about them
(each variant overrides exactly one rule of `ConcurrentRules` and is refuted against the
invariant that rule keeps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
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
    S_EXHAUSTED,
    S_PENDING,
    S_RUNNING,
    Ev,
    Params,
    RunEncoding,
    Semantics,
    State,
    real,
    value,
)
from loopproof.proofs.family import shapes
from loopproof.proofs.g1_finishes import C, P, closed_form, mu, per_repair, remaining
from loopproof.proofs.g2_no_drift import no_drift
from loopproof.proofs.unbounded import UnboundedRuns, UState

MAX_PARALLEL = z3.Int("max_parallel")


def reserved_of(s: State, v: str) -> z3.ArithRef:
    return s[f"reserved:{v}"]


def spent_of(s: State, v: str) -> z3.ArithRef:
    return s[f"spent:{v}"]


@dataclass
class ConcurrentEncoding(RunEncoding):
    """The run encoding with several attempts in flight, at most `max_parallel`; `eps` is the
    float tolerance of the model's spend checks (EPS; 0 for exact amounts)."""

    max_parallel: z3.ArithRef = field(default_factory=lambda: MAX_PARALLEL)
    eps: z3.ArithRef = field(default_factory=lambda: EPS)
    kinds: tuple[str, ...] | None = None  # a bounded search's events (None: every kind)

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

    # ---- shared guards, as in model/transitions.py with several attempts in flight
    def in_flight(self, s: State) -> z3.ArithRef:
        return z3.Sum([z3.If(s.st(v) == S_RUNNING, 1, 0) for v in self.graph.names])

    def in_attempt(self, s: State, node: str | None = None) -> z3.BoolRef:
        assert node is not None, "a concurrent spend event names its node"
        return z3.And(self.live(s), s.st(node) == S_RUNNING)

    def ready(self, s: State, v: str) -> z3.BoolRef:
        names = self.graph.names
        return z3.And(self.live(s), self.in_flight(s) < self.max_parallel,
                      *[s.st(w) != S_EXHAUSTED for w in names],
                      s.st(v) == S_PENDING,
                      *[s.st(p) == S_DONE for p in self.graph.predecessors(v)])

    def within_budget(self, amount: z3.ArithRef) -> z3.BoolRef:
        b = self.params.spend_budget
        return z3.BoolVal(True) if b is None else amount <= b + self.eps

    def held(self, s: State) -> z3.ArithRef:
        """`RunState.held`: settled + sum over attempts in flight of c_w - what w settled."""
        c = self.params.ceilings
        return s["settled"] + z3.Sum([
            z3.If(s.st(w) == S_RUNNING, c[w] - (spent_of(s, w) - reserved_of(s, w)), real(0))
            for w in self.graph.names])

    def fits(self, s: State, v: str) -> z3.BoolRef:
        return self.within_budget(self.held(s) + self.params.ceilings[v])

    def attempt_fits(self, s: State, v: str, amount: z3.ArithRef) -> z3.BoolRef:
        return spent_of(s, v) + amount <= self.params.ceilings[v] + self.eps

    def node_reservation_fits(self, s: State, v: str, amount: z3.ArithRef) -> z3.BoolRef:
        return z3.And(self.attempt_fits(s, v, amount),
                      self.within_budget(s["settled"] + s["reserved"] + amount))

    # ---- shared updates
    def leaving(self, s: State, v: str) -> dict[str, z3.ExprRef]:
        """`v`'s attempt leaves the flight: its account out of the totals, and zeroed."""
        return {"reserved": s["reserved"] - reserved_of(s, v),
                "attempt_spend": s["attempt_spend"] - spent_of(s, v),
                f"reserved:{v}": real(0), f"spent:{v}": real(0)}


class ConcurrentRules(Semantics):
    """model/transitions.py's rules with several attempts in flight (its module docstring)."""

    name = "concurrent model"

    def extra_fields(self, enc):
        f = {}
        for v in enc.graph.names:
            f[f"reserved:{v}"] = z3.RealSort()
            f[f"spent:{v}"] = z3.RealSort()
        return f

    def extra_init(self, enc, s):
        return [x == 0 for v in enc.graph.names for x in (reserved_of(s, v), spent_of(s, v))]

    def update_begin(self, enc, s, ev):
        v = ev.node
        return {f"status:{v}": S_RUNNING, f"attempts:{v}": s.att(v) + 1,
                "attempts_total": s["attempts_total"] + 1,
                f"reserved:{v}": real(0), f"spent:{v}": real(0)}

    def guard_refuse(self, enc, s, ev):
        return z3.And(enc.ready(s, ev.node), enc.in_flight(s) == 0,
                      z3.Not(enc.fits(s, ev.node)))

    def guard_reserve(self, enc, s, ev):
        return z3.And(enc.in_attempt(s, ev.node), ev.amount >= 0,
                      enc.node_reservation_fits(s, ev.node, ev.amount))

    def update_reserve(self, enc, s, ev):
        v, a = ev.node, ev.amount
        return {"reserved": s["reserved"] + a, "attempt_spend": s["attempt_spend"] + a,
                f"reserved:{v}": reserved_of(s, v) + a, f"spent:{v}": spent_of(s, v) + a}

    def guard_overrun(self, enc, s, ev):
        return z3.And(enc.in_attempt(s, ev.node), ev.amount >= 0,
                      reserved_of(s, ev.node) <= enc.eps,
                      z3.Not(enc.node_reservation_fits(s, ev.node, ev.amount)))

    def update_overrun(self, enc, s, ev):
        return enc.end_attempt(s, ev.node, False) | enc.leaving(s, ev.node)

    def guard_settle(self, enc, s, ev):
        mine = reserved_of(s, ev.node)
        of = mine if ev.of is None else ev.of
        return z3.And(enc.in_attempt(s, ev.node), of >= 0, of <= mine, ev.amount >= 0,
                      ev.amount <= of)

    def update_settle(self, enc, s, ev):
        v, a = ev.node, ev.amount
        of = reserved_of(s, v) if ev.of is None else ev.of
        return {"settled": s["settled"] + a, "reserved": s["reserved"] - of,
                "attempt_spend": s["attempt_spend"] - of + a,
                f"reserved:{v}": reserved_of(s, v) - of, f"spent:{v}": spent_of(s, v) - of + a}

    def guard_verdict(self, enc, s, ev):
        return z3.And(enc.in_attempt(s, ev.node), reserved_of(s, ev.node) <= enc.eps)

    def update_verdict(self, enc, s, ev):
        return enc.end_attempt(s, ev.node, ev.passed) | enc.leaving(s, ev.node)

    def update_abandon(self, enc, s, ev):
        v = ev.node
        return {f"status:{v}": S_PENDING, f"attempts:{v}": s.att(v) - 1,
                "attempts_total": s["attempts_total"] - 1, "abandoned": s["abandoned"] + 1,
                "settled": s["settled"] + reserved_of(s, v), **enc.leaving(s, v)}

    def guard_repair(self, enc, s, ev):
        return z3.And(super().guard_repair(enc, s, ev),
                      *[s.st(w) != S_RUNNING for w in sorted(enc.graph.subtree(ev.target))])

    def guard_fail(self, enc, s, ev):
        return z3.And(super().guard_fail(enc, s, ev), enc.in_flight(s) == 0)


def encoding(graph: LoopGraph, rules: Semantics | None = None, exact: bool = False,
             params: Params | None = None) -> ConcurrentEncoding:
    return ConcurrentEncoding(graph, params or Params.symbolic(graph), rules or ConcurrentRules(),
                              eps=real(0) if exact else EPS)


# ---- the invariants -----------------------------------------------------------------------------

def accounts(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    """Each attempt in flight holds 0 <= reserved <= spent <= c_v (+ eps), nothing else holds
    anything, and the totals are the sums of the accounts."""
    c = enc.params.ceilings
    cs: list[z3.BoolRef] = [s["settled"] >= 0]
    for v in enc.graph.names:
        r, x = reserved_of(s, v), spent_of(s, v)
        cs.append(z3.If(s.st(v) == S_RUNNING, z3.And(r >= 0, r <= x, x <= c[v] + enc.eps),
                        z3.And(r == 0, x == 0)))
    cs += [s["reserved"] == z3.Sum([reserved_of(s, v) for v in enc.graph.names]),
           s["attempt_spend"] == z3.Sum([spent_of(s, v) for v in enc.graph.names])]
    return z3.And(cs)


def no_overspend(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    """G3: settled + every open reservation <= B + eps."""
    return enc.within_budget(s["settled"] + s["reserved"])


def spend_invariant(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    return z3.And(accounts(enc, s), no_overspend(enc, s))


def held_invariant(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    return z3.And(accounts(enc, s), enc.within_budget(enc.held(s)))


def never_starved(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    """Every attempt in flight may still reserve up to its c_v within B."""
    c = enc.params.ceilings
    return z3.And([z3.Implies(s.st(v) == S_RUNNING, enc.within_budget(
        s["settled"] + s["reserved"] + c[v] - spent_of(s, v))) for v in enc.graph.names])


def structural(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    """G1's structural facts (proofs/g1_finishes.py) without "at most one attempt in flight":
    counters in range, at most max_parallel in flight, and a node that has started in its
    activation has every ancestor DONE."""
    g, a = enc.graph, enc.params.attempts
    cs: list[z3.BoolRef] = [enc.in_flight(s) <= enc.max_parallel]
    for v in g.names:
        st, i = s.st(v), s.att(v)
        cs += [i >= 0, i <= a[v], z3.Implies(st == S_PENDING, i < a[v]),
               z3.Implies(st == S_RUNNING, i >= 1)]
        for w in g.desc(v):
            cs.append(z3.Implies(z3.Or(s.st(w) != S_PENDING, s.att(w) > 0), st == S_DONE))
    cs += [s["repairs_used"] >= 0, s["repairs_used"] <= enc.params.repair_budget]
    return z3.And(cs)


def attempt_invariant(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    lhs = s["attempts_total"] + z3.Sum([remaining(enc, s, v) for v in enc.graph.names])
    rhs = z3.Sum(list(enc.params.attempts.values())) + s["repairs_used"] * per_repair(enc)
    return z3.And(structural(enc, s), lhs <= rhs)


def within_w(enc: ConcurrentEncoding, s: State) -> z3.BoolRef:
    return s["attempts_total"] <= closed_form(enc)


# ---- the obligations on the family -------------------------------------------------------------

def attempt_bound_family() -> Found:
    def one(graph: LoopGraph) -> Found:
        enc = encoding(graph)
        return check_inductive(enc, lambda s: attempt_invariant(enc, s),
                               lambda s: within_w(enc, s), "attempts_total <= W")
    return first(one(g) for g in shapes())


class BoundedConcurrent(ConcurrentRules):
    """The concurrent rules under G1's two termination assumptions (proofs/g1_finishes.py), the
    first kept per attempt: at most P metered operations and claims per attempt in flight (a ghost
    `ops:v` per node, reset by Begin(v)), and at most C recovered crashes in the run."""

    name = "concurrent model + at most P operations/claims per attempt + at most C crashes"
    COUNTED = ("Reserve", "Settle", "Claim")

    def extra_fields(self, enc):
        return {**super().extra_fields(enc), **{f"ops:{v}": z3.IntSort() for v in enc.graph.names}}

    def extra_init(self, enc, s):
        return [*super().extra_init(enc, s), *[s[f"ops:{v}"] == 0 for v in enc.graph.names]]

    def guard(self, enc, s, ev):
        g = super().guard(enc, s, ev)
        if ev.kind in self.COUNTED:
            return z3.And(g, s[f"ops:{ev.node}"] < P)
        return z3.And(g, s["abandoned"] < C) if ev.kind == "Abandon" else g

    def update(self, enc, s, ev):
        upd = super().update(enc, s, ev)
        if ev.kind in self.COUNTED:
            upd[f"ops:{ev.node}"] = s[f"ops:{ev.node}"] + 1
        elif ev.kind == "Begin":
            upd[f"ops:{ev.node}"] = z3.IntVal(0)
        return upd


def ranking_family() -> Found:
    """(live, K - repairs_used, C - abandoned, sum_v mu_v, sum_v (P - ops_v)) in N^5 decreases
    lexicographically on every transition of the concurrent model under both assumptions."""
    return first(check_ranking_of(g) for g in shapes())


def check_ranking_of(graph: LoopGraph, rules: Semantics | None = None) -> Found:
    enc = encoding(graph, rules or BoundedConcurrent(),
                   params=Params.symbolic(graph).with_constraints(P >= 0, C >= 0))
    names = graph.names

    def inv(s: State) -> z3.BoolRef:
        return z3.And(structural(enc, s), s["abandoned"] >= 0, s["abandoned"] <= C,
                      *[z3.And(s[f"ops:{v}"] >= 0, s[f"ops:{v}"] <= P) for v in names])

    def rank(s: State) -> list[z3.ArithRef]:
        return [z3.If(s["outcome"] == O_RUNNING, 1, 0),
                enc.params.repair_budget - s["repairs_used"], C - s["abandoned"],
                z3.Sum([mu(enc, s, v) for v in names]),
                z3.Sum([P - s[f"ops:{v}"] for v in names])]

    return check_inductive(enc, inv) or check_ranking(enc, inv, rank)


class AnyNumberInFlight(UnboundedRuns):
    """The unbounded encoding (every graph size) with its rules loosened, never tightened: any
    number of attempts in flight (no capacity check) and no spend condition anywhere (Begin,
    Refuse, Reserve, Overrun, Settle and Verdict need only what they need of the statuses). The
    control updates are the model's, and no guard left reads a spend field, so the statuses,
    activations and passes of every run of the concurrent model, whatever its max_parallel and
    amounts, are those of a run of this one: an invariant over them here holds for every limit."""

    def ready(self, s: UState, n: z3.ExprRef) -> z3.BoolRef:
        p = z3.Const("p", self.N)
        return z3.And(self.live(s), self.none_is(s, S_EXHAUSTED), s.status[n] == S_PENDING,
                      z3.ForAll([p], z3.Implies(self.needs(p, n), s.status[p] == S_DONE)))

    def fits(self, s: UState, n: z3.ExprRef) -> z3.BoolRef:
        return z3.BoolVal(True)

    def _refuse(self, s, ev):
        return self.ready(s, ev.node), super()._refuse(s, ev)[1]

    def reservation_fits(self, s: UState, r: z3.ExprRef, amount: z3.ArithRef) -> z3.BoolRef:
        return z3.BoolVal(True)

    def _settle(self, s, ev):
        return self.in_attempt(s, ev.node), super()._settle(s, ev)[1]

    def _verdict(self, s, ev):
        return self.in_attempt(s, ev.node), self.end_attempt(s, ev.node, ev.passed)

    def _overrun(self, s, ev):
        return self.in_attempt(s, ev.node), self.end_attempt(s, ev.node, False)


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
    return check_inductive(AnyNumberInFlight(claim_marks_done=True), no_drift)


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

class CheckThenReserve(ConcurrentRules):
    """Broken: each Begin checks settled + c_v <= B, as if nothing were in flight, and each
    reservation trusts admission (checked against its attempt's c_v only): the race of a budget
    proxy whose every request sees room."""

    name = "check then reserve: admission counts only settled spend"

    def guard_begin(self, enc, s, ev):
        return z3.And(enc.ready(s, ev.node),
                      enc.within_budget(s["settled"] + enc.params.ceilings[ev.node]))

    def guard_refuse(self, enc, s, ev):
        return z3.And(enc.ready(s, ev.node), enc.in_flight(s) == 0,
                      z3.Not(enc.within_budget(s["settled"] + enc.params.ceilings[ev.node])))

    def guard_reserve(self, enc, s, ev):
        return z3.And(enc.in_attempt(s, ev.node), ev.amount >= 0,
                      enc.attempt_fits(s, ev.node, ev.amount))

    def guard_overrun(self, enc, s, ev):
        return z3.And(enc.in_attempt(s, ev.node), ev.amount >= 0,
                      reserved_of(s, ev.node) <= enc.eps,
                      z3.Not(enc.attempt_fits(s, ev.node, ev.amount)))


class CheckThenReserveGuarded(ConcurrentRules):
    """Broken, more subtly: admission counts only settled spend, but every reservation is still
    checked against B. B holds; an admitted attempt may find its c_v gone."""

    name = "check then reserve, reservations checked against B"

    def guard_begin(self, enc, s, ev):
        return z3.And(enc.ready(s, ev.node),
                      enc.within_budget(s["settled"] + enc.params.ceilings[ev.node]))


class RepairDropsFlight(ConcurrentRules):
    """Broken: a repair resets S_u even while a node of it has an attempt in flight; that
    attempt is dropped from the run's accounts with its open reservation, though its worker
    still runs and spends it. A ghost `exposure` counts what is really committed: settled plus
    every reservation made and not yet released, dropped ones included."""

    name = "a repair resets an attempt in flight"

    def extra_fields(self, enc):
        return {**super().extra_fields(enc), "exposure": z3.RealSort()}

    def extra_init(self, enc, s):
        return [*super().extra_init(enc, s), s["exposure"] == 0]

    def update(self, enc, s, ev):
        upd = super().update(enc, s, ev)
        if ev.kind == "Repair":
            return upd  # the dropped reservations stay exposed
        after_settled = upd.get("settled", s["settled"])
        after_reserved = upd.get("reserved", s["reserved"])
        upd["exposure"] = s["exposure"] + (after_settled - s["settled"]) + (
            after_reserved - s["reserved"])
        return upd

    def guard_repair(self, enc, s, ev):
        return Semantics.guard_repair(self, enc, s, ev)

    def update_repair(self, enc, s, ev):
        upd = super().update_repair(enc, s, ev)
        for w in sorted(enc.graph.subtree(ev.target)):
            running = s.st(w) == S_RUNNING
            upd["reserved"] = upd.get("reserved", s["reserved"]) - z3.If(
                running, reserved_of(s, w), real(0))
            upd["attempt_spend"] = upd.get("attempt_spend", s["attempt_spend"]) - z3.If(
                running, spent_of(s, w), real(0))
            upd[f"reserved:{w}"] = real(0)
            upd[f"spent:{w}"] = real(0)
        return upd


# Two nodes side by side: either attempt fits B alone (c = 2, B = 3), both together do not.
PAIR = LoopGraph.build([NodeSpec("a", spend_ceiling=2.0), NodeSpec("b", spend_ceiling=2.0)],
                       spend_budget=3.0, max_parallel=2)
# x and y side by side under r; y's failure repairs r, whose subtree holds x.
FORK = LoopGraph.build([NodeSpec("r", spend_ceiling=1.0),
                        NodeSpec("x", spend_ceiling=1.0, needs=("r",)),
                        NodeSpec("y", spend_ceiling=0.0, needs=("r",), repairs=("r",))],
                       repair_budget=1, spend_budget=1.0, max_parallel=2)


def concrete(graph: LoopGraph, rules: Semantics, exact: bool = False) -> ConcurrentEncoding:
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


def run_repair_drops_flight(depth: int = 6) -> Found:
    """A run of the broken model from Init after which a reservation a worker still holds is
    no longer counted by G3 (exposure > settled + reserved; from there new attempts are admitted
    against B as if it were free: two steps later the exposure passes B). Searched among Begin,
    Verdict, Cancel, Reserve and Repair only, which keeps the search cheap; any run found is a
    run of the variant."""
    enc = concrete(FORK, RepairDropsFlight())
    enc.kinds = ("Begin", "Verdict", "Cancel", "Reserve", "Repair")
    return bmc(enc, lambda s: s["exposure"] > s["settled"] + s["reserved"], depth,
               "G3 counting every reservation a worker holds (exposure = settled + reserved)")
