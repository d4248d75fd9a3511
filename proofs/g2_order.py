"""G2, needs respected: a node that has started in its current activation has every predecessor
DONE -- no node works on inputs that are not gated. (The worked example in docs/proofs.md.)

Broken variant: Begin ignores `needs` -- refuted by a run from Init on a -> b.
"""

from __future__ import annotations

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RunRules, exhausted, no_room, not_pending, unfit
from loopproof.proofs.checks import Found, bmc, check_inductive, first
from loopproof.proofs.encoding import (
    S_DONE,
    S_PENDING,
    Params,
    RunEncoding,
    State,
)
from loopproof.proofs.family import shapes


def needs_done(enc: RunEncoding, s: State) -> z3.BoolRef:
    """started(v) => every predecessor of v is DONE."""
    return z3.And([z3.Implies(z3.Or(s.status(v) != S_PENDING, s.attempts(v) > 0), s.status(p) == S_DONE)
                   for v in enc.graph.names for p in enc.graph.predecessors(v)] or [True])


def check_needs_done() -> Found:
    def one(graph: LoopGraph) -> Found:
        enc = RunEncoding(graph, Params.symbolic(graph))
        return check_inductive(enc, lambda s: needs_done(enc, s))
    return first(one(g) for g in shapes())


class BeginIgnoresNeeds(RunRules):
    """Broken: an attempt may start before its predecessors are DONE (the real guard, copied,
    without its check of needs)."""

    def guard_begin(self, s, ev, g):
        v = ev.node
        self.live(s, g)
        g.need_room(s.none(s.RUNNING), no_room)
        g.need(s.none(s.EXHAUSTED), exhausted)
        g.need(s.status(v) == s.PENDING, not_pending, v)
        g.need_spend(self.fits(s, v), unfit)  # no check of needs


PAIR = LoopGraph.build([NodeSpec("a"), NodeSpec("b", needs=("a",))])


def run_begin_ignores_needs(depth: int = 2) -> Found:
    enc = RunEncoding(PAIR, Params.of(PAIR), BeginIgnoresNeeds())
    return bmc(enc, lambda s: z3.Not(needs_done(enc, s)), depth, "needs respected")
