"""G3 (no overspend): at every step settled + reserved <= B (+ the model's float tolerance EPS),
because admission checks settled + c_v <= B and every metered operation reserves first.

Proved as an inductive invariant over the family (every DAG up to 3 nodes, every repair relation,
symbolic a_v, c_v, K, B). Several reservations may be outstanding at once (the concurrent model
calls of one attempt), so each is checked against settled + every outstanding one. Broken
variants, each refuted by a run from Init that overspends: spend checked only between attempts
(admission checks settled <= B; reservations are not checked); and check-then-spend, where a
concurrent reservation is checked against what is settled, not against what is in flight.
"""

from __future__ import annotations

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RunRules, negative, the_reservation_fits
from loopproof.proofs.checks import Found, bmc, check_inductive, first
from loopproof.proofs.encoding import EPS, Params, RunEncoding, State
from loopproof.proofs.family import shapes


def within_budget(enc: RunEncoding, s: State) -> z3.BoolRef:
    b = enc.params.spend_budget
    assert b is not None, "G3 is about a finite budget B"
    return s.settled + s.reserved <= b + EPS


def spend_invariant(enc: RunEncoding, s: State) -> z3.BoolRef:
    return z3.And(s.settled >= 0, s.reserved >= 0, within_budget(enc, s))


def check_no_overspend(graph: LoopGraph) -> Found:
    enc = RunEncoding(graph, Params.symbolic(graph))
    return check_inductive(enc, lambda s: spend_invariant(enc, s))


def no_overspend_family() -> Found:
    return first(check_no_overspend(g) for g in shapes())


class BetweenAttempts(RunRules):
    """Broken: the budget is checked only when an attempt is admitted (settled <= B), and the
    metered operations inside an attempt reserve without any check."""

    name = "spend checked only between attempts"

    def fits(self, s, v):
        return s.within_budget(s.settled)

    def guard_reserve(self, s, ev, g):
        self.in_attempt(s, g, ev.node)
        g.need_spend(ev.amount >= 0, negative)

    def guard_overrun(self, s, ev, g):
        g.need(False, the_reservation_fits)  # every reservation "fits"


class CheckThenSpend(RunRules):
    """Broken: each reservation is checked against the settled spend only, as if the other
    calls in flight had not reserved (the race of a proxy that checks the budget, then
    forwards, then charges)."""

    name = "concurrent reservations checked against settled spend only"

    def reservation_fits(self, s, a, amount):
        return s.and_(a.spent - a.reserved + amount <= a.ceiling + s.eps,
                      s.within_budget(s.settled + amount))


ONE_NODE = LoopGraph.build([NodeSpec("a", attempts=2, spend_ceiling=1.0)], spend_budget=1.0)


def run_between_attempts(depth: int = 3) -> Found:
    enc = RunEncoding(ONE_NODE, Params.of(ONE_NODE), BetweenAttempts())
    return bmc(enc, lambda s: z3.Not(within_budget(enc, s)), depth,
               "G3 (settled + reserved <= B)")


def run_check_then_spend(depth: int = 3) -> Found:
    enc = RunEncoding(ONE_NODE, Params.of(ONE_NODE), CheckThenSpend())
    return bmc(enc, lambda s: z3.Not(within_budget(enc, s)), depth,
               "G3 (settled + reserved <= B)")
