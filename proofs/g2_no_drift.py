"""G2 (no drift): no node is DONE without a PASS, for its current activation, in the ledger.

Proved as an inductive invariant over an unbounded set of nodes (proofs/unbounded.py), so for
every graph of every size and every repair relation. Broken variant: a worker's self-report
(Claim) marks its node DONE -- refuted both as a failed induction step over the unbounded model
and as a concrete run from Init on a two-node graph.
"""

from __future__ import annotations

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RunRules
from loopproof.proofs.checks import (
    Found,
    bmc,
    check_enabled,
    check_inductive,
    check_init_satisfiable,
    first,
)
from loopproof.proofs.encoding import S_DONE, S_RUNNING, Params, RunEncoding, State
from loopproof.proofs.family import shapes
from loopproof.proofs.unbounded import UnboundedRuns, UState


def no_drift(s: UState) -> z3.BoolRef:
    """Every DONE node has a PASS for its current activation."""
    x = z3.Const("x", s.status.domain())
    return z3.ForAll([x], z3.Implies(s.status[x] == S_DONE, s.passes[x, s.activation[x]]))


def one_running(s: UState) -> z3.BoolRef:
    x, y = z3.Consts("x y", s.status.domain())
    return z3.ForAll([x, y], z3.Implies(z3.And(s.status[x] == S_RUNNING,
                                               s.status[y] == S_RUNNING), x == y))


def check_no_drift() -> Found:
    return check_inductive(UnboundedRuns(), no_drift)


def check_no_drift_self_report() -> Found:
    """The broken variant; must be refuted."""
    return check_inductive(UnboundedRuns(SelfReportMarksDone()), no_drift)


def check_sanity() -> Found:
    """Init is satisfiable and every transition can fire from a state satisfying the invariant
    (with at most one attempt in flight, as on every reachable state)."""
    sys = UnboundedRuns()

    def inv(s: UState) -> z3.BoolRef:
        return z3.And(no_drift(s), one_running(s))

    return check_init_satisfiable(sys, inv) or check_enabled(sys, inv)


# ---- the broken variant as a run from Init on a concrete graph ---------------------------------

class SelfReportMarksDone(RunRules):
    """Broken: a worker's "done" is taken at its word (and its attempt ends there)."""

    name = "self-report marks DONE"

    def effect_claim(self, s, ev, u):
        u.set_status(ev.node, s.DONE)
        u.close(s.attempt(ev.node))


CHAIN = LoopGraph.build([NodeSpec("a", attempts=2), NodeSpec("b", attempts=1, needs=("a",))],
                        repair_budget=0, spend_budget=10.0)


def drift(enc: RunEncoding, s: State) -> z3.BoolRef:
    return z3.Or([z3.And(s.status(v) == S_DONE, z3.Not(s.passes(v)[s.activation(v)]))
                  for v in enc.graph.names])


def run_self_report(depth: int = 4) -> Found:
    enc = RunEncoding(CHAIN, Params.of(CHAIN), SelfReportMarksDone())
    return bmc(enc, lambda s: drift(enc, s), depth, "G2 (DONE without a current PASS)")


# ---- the same invariant on the run encoding of the family --------------------------------------

def no_drift_run(enc: RunEncoding, s: State) -> z3.BoolRef:
    return z3.Not(drift(enc, s))


def check_no_drift_family() -> Found:
    def one(graph: LoopGraph) -> Found:
        enc = RunEncoding(graph, Params.symbolic(graph))
        return check_inductive(enc, lambda s: no_drift_run(enc, s))
    return first(one(g) for g in shapes())
