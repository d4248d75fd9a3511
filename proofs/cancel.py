"""The operator's Cancel (model/transitions.py): a cancelled activation ends without a verdict,
and a cancel never adds attempts.

Guarantee (G2): while a node is in an activation an operator cancelled, it is EXHAUSTED and the
ledger holds no PASS for that activation -- a cancelled activation is never DONE; only a Repair
(a new activation) or Fail follows. The attempt bound W (G1) needs nothing new: Cancel is a
declared transition, so G1-attempt-bound and G1-ranking cover it already.

Broken variants, each refuted by a run from Init:
- "cancel leaves the node PENDING": the activation goes on, and a later attempt passes in it (G2);
- "cancel after DONE": a node that has passed may be cancelled, and the repair that follows re-runs
  descendants that have already run -- more attempts than W (G1).

The worked example of a new rule, end to end, in docs/extending.md.
"""

from __future__ import annotations

import z3

from loopproof.model.bounds import attempt_bound
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RunRules, exhausted, no_room, not_pending
from loopproof.proofs.checks import Found, bmc, check_inductive, first
from loopproof.proofs.encoding import (
    S_DONE,
    S_EXHAUSTED,
    Params,
    RunEncoding,
    State,
)
from loopproof.proofs.family import shapes
from loopproof.proofs.g1_finishes import ControlRuns


def cancelled_now(enc: RunEncoding, s: State, v: str) -> z3.BoolRef:
    """The current activation of `v` was cancelled."""
    return s.cancelled(v)[s.activation(v)]


def cancel_never_done(enc: RunEncoding, s: State) -> z3.BoolRef:
    """A cancelled activation: its node is EXHAUSTED and the ledger has no PASS for it."""
    return z3.And([z3.Implies(cancelled_now(enc, s, v),
                              z3.And(s.status(v) == S_EXHAUSTED, z3.Not(s.passes(v)[s.activation(v)])))
                   for v in enc.graph.names])


def done_in_cancelled(enc: RunEncoding, s: State) -> z3.BoolRef:
    """The harm itself: a node DONE, or a PASS in the ledger, in a cancelled activation."""
    return z3.Or([z3.And(cancelled_now(enc, s, v),
                         z3.Or(s.status(v) == S_DONE, s.passes(v)[s.activation(v)]))
                  for v in enc.graph.names])


def history_is_past(enc: RunEncoding, s: State) -> z3.BoolRef:
    """What makes it inductive: a PASS in the current activation only once DONE, and nothing
    recorded for an activation that has not begun (a repair's new one starts clean)."""
    e = z3.Int("e")
    cs: list[z3.BoolRef] = []
    for v in enc.graph.names:
        cs.append(z3.Implies(s.status(v) != S_DONE, z3.Not(s.passes(v)[s.activation(v)])))
        cs.append(z3.ForAll([e], z3.Implies(e > s.activation(v), z3.And(z3.Not(s.passes(v)[e]),
                                                                  z3.Not(s.cancelled(v)[e])))))
    return z3.And(cs)


def check_cancel_never_done() -> Found:
    """Proved: inductive on every DAG of the family, every number and R symbolic."""
    def one(graph: LoopGraph) -> Found:
        enc = RunEncoding(graph, Params.symbolic(graph))
        return check_inductive(enc, lambda s: z3.And(history_is_past(enc, s),
                                                     cancel_never_done(enc, s)),
                               lambda s: cancel_never_done(enc, s), "a cancel is never DONE")
    return first(one(g) for g in shapes())


# ---- broken: the cancel leaves the activation open ---------------------------------------------

class CancelLeavesPending(RunRules):
    """Broken: a cancel is recorded, but the node stays PENDING and its activation goes on."""

    name = "cancel leaves the node PENDING"

    def effect_cancel(self, s, ev, u):
        super().effect_cancel(s, ev, u)
        u.set_status(ev.node, s.PENDING)


ONE = LoopGraph.build([NodeSpec("a", attempts=2)])


def run_cancel_leaves_pending(depth: int = 5) -> Found:
    """Refuted: Cancel(a), Begin(a), Verdict(a, PASS) -- 3 steps; searched up to 5 (the
    docs' margin of two: the search stops at the shortest run, so a margin costs nothing)."""
    enc = RunEncoding(ONE, Params.of(ONE), CancelLeavesPending())
    return bmc(enc, lambda s: done_in_cancelled(enc, s), depth,
               "a cancelled activation is never DONE")


# ---- broken: a node that has passed may be cancelled --------------------------------------------

class CancelAfterDone(RunRules):
    """Broken: Cancel is also allowed on a DONE node (no attempt in flight, nothing exhausted)."""

    name = "cancel after DONE"

    def guard_cancel(self, s, ev, g):
        v = ev.node
        self.live(s, g)
        g.need_room(s.none(s.RUNNING), no_room)
        g.need(s.none(s.EXHAUSTED), exhausted)
        g.need(s.or_(s.and_(s.status(v) == s.PENDING,
                            s.and_(*[s.status(p) == s.DONE for p in s.predecessors(v)])),
                     s.status(v) == s.DONE), not_pending, v)


CHAIN = LoopGraph.build([NodeSpec("a", repairs=("a",)), NodeSpec("b", needs=("a",))],
                        repair_budget=1)


class CancelRuns(ControlRuns):
    """Control events and Cancel only: the runs W is about, plus the operator."""

    def events(self, tag: str):
        return [ev for ev in RunEncoding.events(self, tag)
                if ev.kind in ("Begin", "Verdict", "Cancel", "Repair", "Fail", "Finish")]


def run_cancel_after_done(depth: int = 11) -> Found:
    """Refuted: a, b pass; Cancel(a); Repair(a -> a) re-runs a and b: 4 attempts > W = 3 --
    9 steps; searched up to 11."""
    enc = CancelRuns(CHAIN, Params.of(CHAIN), CancelAfterDone())
    w = attempt_bound(CHAIN)
    return bmc(enc, lambda s: s.attempts_total > w, depth, f"attempts_total <= W = {w}")
