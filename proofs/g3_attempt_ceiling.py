"""G3, the attempt's ceiling: no attempt of v ever holds more than c_v (settled in the attempt plus
its open reservations), because every reservation is checked against what is left of c_v.

The worked example of docs/extending.md and the README: a new invariant over the existing rules,
with its broken variant (reservations checked against the run's budget B only) refuted by a run
from Init.
"""

from __future__ import annotations

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RunRules
from loopproof.proofs.checks import Found, bmc, check_inductive, first
from loopproof.proofs.encoding import EPS, S_RUNNING, Params, RunEncoding, State
from loopproof.proofs.family import shapes
from loopproof.proofs.g1_finishes import structural


def within_ceiling(enc: RunEncoding, s: State) -> z3.BoolRef:
    """The attempt in flight has spent and reserved at most its node's c_v; none: nothing."""
    running = z3.Or([s.status(v) == S_RUNNING for v in enc.graph.names])
    return z3.And(s.attempt_spend <= enc.running_ceiling(s) + EPS,
                  z3.Implies(z3.Not(running), s.attempt_spend == 0))


def check_within_ceiling() -> Found:
    """Proved: inductive on every DAG of the family, every number and R symbolic. Alone it is
    not inductive (a Repair from an unreachable state with a node RUNNING and another EXHAUSTED
    ends that attempt with its spend kept), so it is conjoined with G1's `structural` facts."""
    def one(graph: LoopGraph) -> Found:
        enc = RunEncoding(graph, Params.symbolic(graph))
        return check_inductive(enc, lambda s: z3.And(structural(enc, s), within_ceiling(enc, s)))
    return first(one(g) for g in shapes())


class CeilingUnchecked(RunRules):
    """Broken: a reservation is checked against the run's budget B, not against c_v."""

    name = "reservations checked against B only"

    def reservation_fits(self, s, a, amount):
        return s.within_budget(s.settled + s.reserved + amount)


ONE = LoopGraph.build([NodeSpec("a", attempts=1, spend_ceiling=1.0)], spend_budget=10.0)


def run_ceiling_unchecked(depth: int = 4) -> Found:
    """Refuted: Begin(a), Reserve(more than c_a) -- 2 steps; searched up to 4."""
    enc = RunEncoding(ONE, Params.of(ONE), CeilingUnchecked())
    return bmc(enc, lambda s: z3.Not(within_ceiling(enc, s)), depth, "the attempt's ceiling")
