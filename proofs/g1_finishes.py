"""G1 (finishes): the attempt bound W is an inductive invariant; a lexicographic ranking function
decreases on every transition; and per-activation repair counters (the broken variant) loop.

Family: every DAG with up to 3 nodes and every repair relation (proofs/family.py), with a_v, c_v,
K and B symbolic, so each shape's proof covers all numbers at once.

Termination, precisely: Claim, Reserve and Settle change no control state (Claim changes nothing
at all), so nothing in the model itself stops a worker from calling them forever; and Abandon (the
recovery of an attempt a crash interrupted) gives the attempt back, so nothing in the model stops
crashes from repeating an attempt forever. We prove termination under two stated environmental
assumptions: at most P (symbolic, any P >= 0) metered operations and claims per attempt, a ghost
counter `ops` reset by Begin; and at most C (symbolic, any C >= 0) crashes recovered in the run,
read off the model's own counter `abandoned`. Under them the tuple
(live, K - repairs_used, C - abandoned, sum_v mu_v, P - ops) lies in N^5 and strictly decreases,
lexicographically, on every transition. Without the first the ranking fails on Claim, without the
second on Abandon, and a run that crashes in every attempt repeats a state (refuted obligations).

How the spend budget bounds recoveries, precisely: an Abandon charges only the open reservation,
which may be 0 (a crash before the first metered operation), so B alone bounds nothing -- the
crash lasso below runs with B = 1. If every recovered crash was charged at least delta > 0 in its
attempt (what it settled plus its open reservation; delta symbolic), then settled >= delta *
abandoned is inductive, and with G3 abandoned <= (B + EPS) / delta (G1-paid-crashes-bounded).

The attempt bound W needs neither: an abandoned attempt leaves `attempts_total` (attempts_total
- 1, remaining + 1), so W bounds the attempts that count; real executions are attempts_total +
abandoned.

Why one module: just over 400 lines on purpose, since the invariant, the ranking function and
their broken variants are one obligation (G1) and share the family of shapes they are proved on.
"""

from __future__ import annotations

import z3

from loopproof.model.bounds import attempt_bound, rerun_set
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import (
    not_exhausted,
    not_in_relation,
    repair_available,
    repairs_spent,
)
from loopproof.proofs.checks import (
    Found,
    NotRefuted,
    bmc,
    check_enabled,
    check_inductive,
    check_init_satisfiable,
    check_ranking,
    find_lasso,
    first,
)
from loopproof.proofs.encoding import (
    EPS,
    O_RUNNING,
    S_DONE,
    S_EXHAUSTED,
    S_PENDING,
    S_RUNNING,
    Ev,
    Ghosts,
    Params,
    RunEncoding,
    State,
    assumed,
)
from loopproof.proofs.family import shapes
from loopproof.proofs.g3_no_overspend import spend_invariant
from loopproof.proofs.trace import Trace

# ---- the invariant ------------------------------------------------------------------------------


def structural(enc: RunEncoding, s: State) -> z3.BoolRef:
    """What every reachable state satisfies whatever the property: attempt counters in range,
    at most one attempt in flight, and (J) a node that has started in its activation has every
    ancestor DONE -- so when d is exhausted, none of desc(d) has started."""
    g, a = enc.graph, enc.params.attempts
    cs: list[z3.BoolRef] = []
    for v in g.names:
        st, i = s.status(v), s.attempts(v)
        cs += [i >= 0, i <= a[v],  # EXHAUSTED: i = a_v, or fewer when an operator cancelled
               z3.Implies(st == S_PENDING, i < a[v]),
               z3.Implies(st == S_RUNNING, i >= 1)]
        for w in g.names:
            if w != v:
                cs.append(z3.Not(z3.And(st == S_RUNNING,
                                        z3.Or(s.status(w) == S_RUNNING, s.status(w) == S_EXHAUSTED))))
        for w in g.desc(v):
            started = z3.Or(s.status(w) != S_PENDING, s.attempts(w) > 0)
            cs.append(z3.Implies(started, st == S_DONE))
    cs += [s.repairs_used >= 0, s.repairs_used <= enc.params.repair_budget]
    return z3.And(cs)


def remaining(enc: RunEncoding, s: State, v: str) -> z3.ArithRef:
    """Attempts v may still start in its current activation."""
    a = enc.params.attempts[v]
    return z3.If(z3.Or(s.status(v) == S_DONE, s.status(v) == S_EXHAUSTED), 0, a - s.attempts(v))


def per_repair(enc: RunEncoding) -> z3.ArithRef:
    """M = max over (d, u) in R of sum_{w in S_u minus desc(d)} a_w (0 when R is empty)."""
    a = enc.params.attempts
    m: z3.ArithRef = z3.IntVal(0)
    for (d, u), in_r in enc.params.repairs.items():
        x = z3.Sum([a[w] for w in sorted(rerun_set(enc.graph, d, u))])
        m = z3.If(z3.And(in_r, x > m), x, m)
    return m


def closed_form(enc: RunEncoding) -> z3.ArithRef:
    """W = sum_v a_v + K * M, as in model/bounds.py."""
    return z3.Sum(list(enc.params.attempts.values())) + enc.params.repair_budget * per_repair(enc)


def attempt_invariant(enc: RunEncoding, s: State) -> z3.BoolRef:
    """structural and attempts_total + sum_v remaining(v) <= sum_v a_v + repairs_used * M."""
    a = enc.params.attempts
    lhs = s.attempts_total + z3.Sum([remaining(enc, s, v) for v in enc.graph.names])
    rhs = z3.Sum(list(a.values())) + s.repairs_used * per_repair(enc)
    return z3.And(structural(enc, s), lhs <= rhs)


def within_w(enc: RunEncoding, s: State) -> z3.BoolRef:
    return s.attempts_total <= closed_form(enc)


def check_attempt_bound(graph: LoopGraph) -> Found:
    enc = RunEncoding(graph, Params.symbolic(graph))
    return check_inductive(enc, lambda s: attempt_invariant(enc, s), lambda s: within_w(enc, s),
                           "attempts_total <= W")


# ---- ranking ------------------------------------------------------------------------------------

P = z3.Int("P")  # the assumed bound on metered operations and claims per attempt
C = z3.Int("C")  # the assumed bound on crashes recovered (Abandon) in the whole run


class OpsBound(Ghosts):
    """The model plus the termination assumption: a ghost `ops` counts Reserve, Settle and Claim
    in the current attempt (Begin resets it) and they are enabled only while ops < P."""

    name = "model + at most P metered operations/claims per attempt"
    COUNTED = ("Reserve", "Settle", "Claim")

    def extra_fields(self, enc):
        return {("ops", None): z3.IntSort()}

    def extra_init(self, enc, s):
        return [s.ghost("ops") == 0]

    def guard(self, s, ev: Ev, g):
        super().guard(s, ev, g)
        if ev.kind in self.COUNTED:
            g.need(s.ghost("ops") < P, assumed)

    def effect(self, s, ev: Ev, u):
        super().effect(s, ev, u)
        if ev.kind in self.COUNTED:
            u.set_ghost("ops", s.ghost("ops") + 1)
        elif ev.kind == "Begin":
            u.set_ghost("ops", z3.IntVal(0))


class CrashBound(Ghosts):
    """The model plus the second termination assumption: Abandon is enabled only while
    abandoned < C (a run sees finitely many crashes)."""

    name = "model + at most C recovered crashes"

    def guard(self, s, ev: Ev, g):
        super().guard(s, ev, g)
        if ev.kind == "Abandon":
            g.need(s.abandoned < C, assumed)


class OpsAndCrashBound(CrashBound, OpsBound):
    """Both termination assumptions."""

    name = ("model + at most P metered operations/claims per attempt + at most C recovered "
            "crashes")


def mu(enc: RunEncoding, s: State, v: str) -> z3.ArithRef:
    """Per node: 0 once DONE or EXHAUSTED, else 2 * (a_v - attempts) + (1 if RUNNING)."""
    a = enc.params.attempts[v]
    open_ = 2 * (a - s.attempts(v)) + z3.If(s.status(v) == S_RUNNING, 1, 0)
    return z3.If(z3.Or(s.status(v) == S_DONE, s.status(v) == S_EXHAUSTED), 0, open_)


def control_rank(enc: RunEncoding, s: State) -> list[z3.ArithRef]:
    return [z3.If(s.outcome == O_RUNNING, 1, 0),
            enc.params.repair_budget - s.repairs_used,
            z3.Sum([mu(enc, s, v) for v in enc.graph.names])]


def crash_rank(enc: RunEncoding, s: State) -> list[z3.ArithRef]:
    """(live, K - repairs_used, C - abandoned, sum_v mu_v)."""
    live, repairs, nodes = control_rank(enc, s)
    return [live, repairs, C - s.abandoned, nodes]


def rank(enc: RunEncoding, s: State) -> list[z3.ArithRef]:
    """(live, K - repairs_used, C - abandoned, sum_v mu_v, P - ops)."""
    return crash_rank(enc, s) + [P - s.ghost("ops")]


def rank_without_crash_bound(enc: RunEncoding, s: State) -> list[z3.ArithRef]:
    return control_rank(enc, s) + [P - s.ghost("ops")]


def ops_encoding(graph: LoopGraph) -> RunEncoding:
    """The model under both termination assumptions (P and C symbolic, >= 0)."""
    return RunEncoding(graph, Params.symbolic(graph).with_constraints(P >= 0, C >= 0),
                       OpsAndCrashBound())


def ops_invariant(enc: RunEncoding, s: State) -> z3.BoolRef:
    return z3.And(structural(enc, s), s.ghost("ops") >= 0, s.ghost("ops") <= P,
                  s.abandoned >= 0, s.abandoned <= C)


def check_ranking_with_ops_bound(graph: LoopGraph) -> Found:
    enc = ops_encoding(graph)

    def inv(s: State) -> z3.BoolRef:
        return ops_invariant(enc, s)

    return check_inductive(enc, inv) or check_ranking(enc, inv, lambda s: rank(enc, s))


def check_ranking_without_crash_bound(graph: LoopGraph) -> Found:
    """The ops bound alone: Abandon gives an attempt back, so sum_v mu_v grows and the ranking
    (live, K - repairs_used, sum_v mu_v, P - ops) does not decrease."""
    enc = RunEncoding(graph, Params.symbolic(graph).with_constraints(P >= 0), OpsBound())

    def inv(s: State) -> z3.BoolRef:
        return z3.And(structural(enc, s), s.ghost("ops") >= 0, s.ghost("ops") <= P, s.abandoned >= 0)

    return check_ranking(enc, inv, lambda s: rank_without_crash_bound(enc, s))


def check_ranking_without_ops_bound(graph: LoopGraph) -> Found:
    """The crash bound alone: Claim (Reserve(0), Settle(0)) changes no control state, so
    (live, K - repairs_used, C - abandoned, sum_v mu_v) does not decrease."""
    enc = RunEncoding(graph, Params.symbolic(graph).with_constraints(C >= 0), CrashBound())

    def inv(s: State) -> z3.BoolRef:
        return z3.And(structural(enc, s), s.abandoned >= 0, s.abandoned <= C)

    return check_ranking(enc, inv, lambda s: crash_rank(enc, s))


# ---- the broken variant: per-activation repair counters -----------------------------------------

class PerActivationRepairs(Ghosts):
    """Broken: each activation carries its own repair counter (`repairs_of`), checked against K;
    a repair starts fresh activations for S_u -- with fresh counters. There is no global count."""

    name = "per-activation repair counters"

    def extra_fields(self, enc):
        return {("repairs_of", v): z3.IntSort() for v in enc.graph.names}

    def extra_init(self, enc, s):
        return [s.ghost("repairs_of", v) == 0 for v in enc.graph.names]

    def guard_repair(self, s, ev, g):
        d = ev.node
        self.live(s, g)
        g.need(s.in_relation(d, ev.target), not_in_relation, d, ev.target)
        g.need(s.status(d) == s.EXHAUSTED, not_exhausted, d)
        g.need(s.ghost("repairs_of", d) < s.repair_budget, repairs_spent)

    def effect_repair(self, s, ev, u):
        u.for_each(s.subtree(ev.target), lambda w: self.reset(s, u, w))
        u.set_ghost("repairs_of", s.ghost("repairs_of", ev.node) + 1, ev.node)
        for w in s.subtree(ev.target):
            u.set_ghost("repairs_of", z3.IntVal(0), w)  # a fresh activation, a fresh counter

    def guard_fail(self, s, ev, g):
        d = ev.node
        self.live(s, g)
        g.need(s.status(d) == s.EXHAUSTED, not_exhausted, d)
        g.need(s.or_(s.no_pair(d), s.ghost("repairs_of", d) >= s.repair_budget),
               repair_available)


def guard_relevant(enc: RunEncoding, s: State) -> list[z3.ExprRef]:
    """Every field a guard reads, or an update of such a field reads: all but activation,
    passes, attempts_total and abandoned (history that no guard of the model consults). A
    repeat on these fields therefore repeats forever."""
    skip = ("activation", "passes", "attempts_total", "abandoned")
    return [x for (name, _), x in s.terms.items() if name not in skip]


LASSO_GRAPH = LoopGraph.build([NodeSpec("a", attempts=1, spend_ceiling=1.0),
                               NodeSpec("b", attempts=1, spend_ceiling=1.0, needs=("a",),
                                        repairs=("a",))],
                              repair_budget=1, spend_budget=float("inf"))


CONTROL = ("Begin", "Refuse", "Verdict", "Repair", "Fail", "Finish")


class ControlRuns(RunEncoding):
    """Runs of control events only (as `model.control_events`): no metering, no claims, so a
    loop found here is not the stutter the ranking's assumption excludes."""

    def events(self, tag: str) -> list[Ev]:
        return [ev for ev in super().events(tag) if ev.kind in CONTROL]


def lasso_per_activation_repairs(depth: int = 8) -> Found:
    enc = ControlRuns(LASSO_GRAPH, Params.of(LASSO_GRAPH), PerActivationRepairs())
    return find_lasso(enc, lambda s: guard_relevant(enc, s), depth,
                      "per-activation repair counters")


class RecoveryRuns(RunEncoding):
    """Control events plus Abandon (a crash recovered), with no bound on crashes."""

    def events(self, tag: str) -> list[Ev]:
        return [ev for ev in super().events(tag) if ev.kind in (*CONTROL, "Abandon")]


CRASH_GRAPH = LoopGraph.build([NodeSpec("a", attempts=1, spend_ceiling=1.0)], spend_budget=1.0)


def lasso_unbounded_crashes(depth: int = 4) -> Found:
    """Without a bound on crashes, a run that crashes in every attempt never ends: Begin(a),
    Abandon(a) returns to the state it started from (a_a = 1; B = 1, but a crash before any
    metered operation is charged nothing, so the budget does not stop it)."""
    enc = RecoveryRuns(CRASH_GRAPH, Params.of(CRASH_GRAPH))
    return find_lasso(enc, lambda s: guard_relevant(enc, s), depth, "unbounded crashes")


DELTA = z3.Real("delta")  # the assumed least charge of an attempt recovered after a crash


class PaidCrashes(Ghosts):
    """The model plus: every recovered crash was charged at least delta (settled during its
    attempt plus its open reservation). A ghost `base` holds settled at the attempt's Begin."""

    name = "model + every recovered crash charged at least delta"

    def extra_fields(self, enc):
        return {("base", None): z3.RealSort()}

    def extra_init(self, enc, s):
        return [s.ghost("base") == 0]

    def guard_abandon(self, s, ev, g):
        super().guard_abandon(s, ev, g)
        g.need(s.settled + s.reserved - s.ghost("base") >= DELTA, assumed)

    def effect(self, s, ev: Ev, u):
        super().effect(s, ev, u)
        if ev.kind in ("Begin", "Abandon"):
            u.set_ghost("base", u.current(("settled", None)))


def check_paid_crashes_bounded(graph: LoopGraph) -> Found:
    enc = RunEncoding(graph, Params.symbolic(graph).with_constraints(DELTA > 0), PaidCrashes())
    b = enc.params.spend_budget
    assert b is not None

    def inv(s: State) -> z3.BoolRef:
        return z3.And(spend_invariant(enc, s), s.settled >= s.ghost("base"),
                      s.ghost("base") >= DELTA * s.abandoned)

    def bounded(s: State) -> z3.BoolRef:
        return DELTA * s.abandoned <= b + EPS

    return (check_inductive(enc, inv, bounded, "delta * abandoned <= B + EPS")
            or check_init_satisfiable(enc, inv) or check_enabled(enc, inv))


def paid_crashes_family() -> Found:
    return first(check_paid_crashes_bounded(g) for g in shapes())


def attempt_bound_family() -> Found:
    return first(check_attempt_bound(g) for g in shapes())


def ranking_family() -> Found:
    return first(check_ranking_with_ops_bound(g) for g in shapes())


def ranking_without_ops_bound_family() -> Found:
    return first(check_ranking_without_ops_bound(g) for g in shapes())


def ranking_without_crash_bound_family() -> Found:
    return first(check_ranking_without_crash_bound(g) for g in shapes())


# ---- the bound is reached ---------------------------------------------------------------------

TIGHT_GRAPH = LoopGraph.build([NodeSpec("a", attempts=2),
                               NodeSpec("b", attempts=1, needs=("a",), repairs=("a",))],
                              repair_budget=1, spend_budget=float("inf"))


def bound_attained(depth: int = 14) -> Found:
    """Some run of TIGHT_GRAPH makes exactly W attempts (W = 3 + 1 * 3 = 6): the proved bound is
    not loose there. None when such a run exists; a 'vacuous' trace when none is found."""
    enc = ControlRuns(TIGHT_GRAPH, Params.of(TIGHT_GRAPH))
    w = attempt_bound(TIGHT_GRAPH)
    found = bmc(enc, lambda s: s.attempts_total == w, depth, f"attempts_total = W = {w}")
    if isinstance(found, NotRefuted):  # no witness: the bound is not shown to be reached
        return Trace("vacuous", f"no run of {found.depth} control steps reaches W = {w}")
    return None  # a run reaching W exists: proved by its witness
