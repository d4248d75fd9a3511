"""Every proof obligation, tagged with its guarantee id (docs/design.md) and the result it must give.

An obligation's `check` returns None (no counterexample: "proved"), a `Trace` ("refuted"), or
`NotRefuted` (a bounded search found no counterexample: "not refuted within depth d", which is
never "proved"). For a sanity obligation, "proved" means every satisfiability question was
answered sat. A broken variant expects "refuted"; if Z3 ever proves it, or a bounded search
does not refute it, the proof machinery did not show it can fail and `python -m proofs` exits
non-zero. `unknown`, "not refuted" and "unwritten" (a skeleton of `python -m proofs new` whose
placeholders are still there) never match an expectation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from proofs import cancel, family, g2_order, sanity
from proofs import g1_finishes as g1
from proofs import g2_no_drift as g2
from proofs import g3_attempt_ceiling as g3c
from proofs import g3_no_overspend as g3
from proofs import g4_evidence as g4
from proofs import g5_checkpoint as g5
from proofs import g6_policy as g6
from proofs.checks import Found, NotRefuted
from proofs.solver import Unknown
from proofs.trace import Trace

Expect = Literal["proved", "refuted"]  # nothing may expect "not refuted": it proves nothing

FAMILY = "{family}"  # filled in with proofs.family.describe() when reported


@dataclass(frozen=True)
class Obligation:
    id: str
    guarantee: str
    expect: Expect
    statement: str
    check: Callable[[], Found]

    @property
    def broken(self) -> bool:
        return self.expect == "refuted"


OBLIGATIONS: tuple[Obligation, ...] = (
    # ---- G1 finishes
    Obligation("G1-attempt-bound", "G1", "proved",
               "attempts_total + sum_v remaining_v <= sum_v a_v + repairs_used * M is inductive "
               f"and implies attempts_total <= W ({FAMILY})", g1.attempt_bound_family),
    Obligation("G1-bound-attained", "G1", "proved",
               "the bound is reached: a run of a->b (a_a=2, a_b=1, b repairs a, K=1) makes "
               "exactly W = 6 attempts (bounded model checking)", g1.bound_attained),
    Obligation("G1-ranking", "G1", "proved",
               "(live, K - repairs_used, C - abandoned, sum_v mu_v, P - ops) in N^5 decreases "
               "lexicographically on every transition, assuming at most P metered "
               "operations/claims per attempt and at most C recovered crashes (Abandon) per run "
               f"({FAMILY}, P and C symbolic)", g1.ranking_family),
    Obligation("G1-ranking-needs-ops-bound", "G1", "refuted",
               "without the per-attempt bound on metered operations/claims the control ranking "
               "does not decrease (Claim changes nothing): the assumption is needed",
               g1.ranking_without_ops_bound_family),
    Obligation("G1-ranking-needs-crash-bound", "G1", "refuted",
               "without the bound on recovered crashes the ranking (live, K - repairs_used, "
               "sum_v mu_v, P - ops) does not decrease (Abandon gives the attempt back): the "
               f"assumption is needed ({FAMILY})", g1.ranking_without_crash_bound_family),
    Obligation("G1-unbounded-crashes-loop", "G1", "refuted",
               "without the bound on recovered crashes a run repeats a state: a (a_a = 1) "
               "crashes in every attempt, Begin(a), Abandon(a) forever (lasso)",
               g1.lasso_unbounded_crashes),
    Obligation("G1-paid-crashes-bounded", "G1", "proved",
               "if every recovered crash was charged at least delta > 0 (settled in its attempt "
               "plus its open reservation), settled >= delta * abandoned is inductive (with G3's "
               "invariant) and implies abandoned <= (B + EPS) / delta; Init and every transition "
               f"satisfiable under it ({FAMILY}, delta symbolic)", g1.paid_crashes_family),
    Obligation("G1-broken-per-activation-repairs", "G1", "refuted",
               "broken: per-activation repair counters reset by a repair -- a reachable state "
               "repeats (lasso over control events)", g1.lasso_per_activation_repairs),
    Obligation("G1-broken-cancel-after-done", "G1", "refuted",
               "broken: an operator may cancel a node that is DONE -- the repair that follows "
               "re-runs descendants that already ran, and a run from Init makes more than W "
               "attempts", cancel.run_cancel_after_done),
    Obligation("G1-sanity", "G1", "proved",
               "Init and every transition are satisfiable under the G1 invariants "
               f"({FAMILY})", sanity.check_g1_sanity),
    # ---- G2 no drift
    Obligation("G2-no-drift-unbounded", "G2", "proved",
               "every DONE node has a PASS for its current activation: inductive over an "
               "unbounded uninterpreted sort of nodes (any graph, any size, any R)",
               g2.check_no_drift),
    Obligation("G2-no-drift-family", "G2", "proved",
               f"the same invariant on the run encoding the differential test checks ({FAMILY})",
               g2.check_no_drift_family),
    Obligation("G2-broken-self-report-step", "G2", "refuted",
               "broken: a worker's self-report (Claim) marks DONE -- the induction step fails "
               "over unbounded nodes", g2.check_no_drift_self_report),
    Obligation("G2-broken-self-report-run", "G2", "refuted",
               "broken: a worker's self-report (Claim) marks DONE -- a run from Init drifts",
               g2.run_self_report),
    Obligation("G2-needs-before-start", "G2", "proved",
               "a node that has started in its current activation has every predecessor DONE "
               f"({FAMILY})", g2_order.check_needs_done),
    Obligation("G2-broken-begin-ignores-needs", "G2", "refuted",
               "broken: Begin does not check needs -- a run from Init starts b before a is DONE",
               g2_order.run_begin_ignores_needs),
    Obligation("G2-cancel-never-done", "G2", "proved",
               "an activation an operator cancelled (Cancel) keeps its node EXHAUSTED and has no "
               f"PASS in the ledger: it is never DONE ({FAMILY})", cancel.check_cancel_never_done),
    Obligation("G2-broken-cancel-leaves-pending", "G2", "refuted",
               "broken: Cancel leaves the node PENDING -- a run from Init passes in the cancelled "
               "activation", cancel.run_cancel_leaves_pending),
    Obligation("G2-sanity-unbounded", "G2", "proved",
               "Init and every transition of the unbounded encoding are satisfiable under the "
               "invariant", g2.check_sanity),
    # ---- G3 no overspend
    Obligation("G3-no-overspend", "G3", "proved",
               "settled + reserved <= B + EPS (EPS = model's float tolerance 1e-9) is inductive "
               f"when admission and every reservation are checked ({FAMILY})",
               g3.no_overspend_family),
    Obligation("G3-broken-between-attempts", "G3", "refuted",
               "broken: spend checked only between attempts -- a run from Init overspends",
               g3.run_between_attempts),
    Obligation("G3-broken-check-then-spend", "G3", "refuted",
               "broken: a concurrent reservation is checked against the settled spend, not "
               "against the reservations in flight -- a run from Init overspends",
               g3.run_check_then_spend),
    Obligation("G3-attempt-ceiling", "G3", "proved",
               "the attempt in flight has settled and reserved at most its node's c_v (+ EPS), "
               f"none in flight: nothing ({FAMILY})", g3c.check_within_ceiling),
    Obligation("G3-broken-ceiling-unchecked", "G3", "refuted",
               "broken: a reservation is checked against B only, not against c_v -- a run from "
               "Init spends more than c_v in one attempt", g3c.run_ceiling_unchecked),
    Obligation("G3-sanity", "G3", "proved",
               f"Init and every transition are satisfiable under the G3 invariant ({FAMILY})",
               sanity.check_g3_sanity),
    # ---- G4 evidence is bound
    Obligation("G4-evidence-bound", "G4", "proved",
               "every commit was driven by evidence whose state hash and suite hash equalled "
               "the current ones (hashes uninterpreted)", g4.check_bound),
    Obligation("G4-broken-stale-accepted", "G4", "refuted",
               "broken: a commit accepts evidence whose hashes differ -- a run from Init commits "
               "on stale evidence", g4.run_stale_accepted),
    Obligation("G4-broken-suite-unchecked", "G4", "refuted",
               "broken: only the state hash is compared -- evidence from a changed suite "
               "commits", g4.run_suite_unchecked),
    Obligation("G4-sanity", "G4", "proved",
               "Init and every transition of the evidence model are satisfiable",
               g4.check_sanity),
    # ---- G5 checkpoint
    Obligation("G5-checkpoint-gated", "G5", "proved",
               "the checkpoint only holds an admitted, gate-passing state; a completed node's "
               "receipt names it and it passed recertification", g5.check_gated),
    Obligation("G5-checkpoint-frame", "G5", "proved",
               "rejected proposals, malformed actions, Keep, regressions, restores and "
               "completion never change the checkpoint; only an admitted Patch does",
               g5.check_frame),
    Obligation("G5-broken-malformed-overwrites", "G5", "refuted",
               "broken: a malformed action overwrites the checkpoint -- a run from Init puts an "
               "ungated state in it", g5.run_malformed_overwrites),
    Obligation("G5-broken-complete-unchecked", "G5", "refuted",
               "broken: completion issues a receipt without recertifying the checkpoint",
               g5.run_completes_unchecked),
    Obligation("G5-sanity", "G5", "proved",
               "Init and every transition of the checkpoint model are satisfiable",
               g5.check_sanity),
    # ---- G6 policy pinned
    Obligation("G6-policy-pinned", "G6", "proved",
               "every stage (Begin, Judge) that ran, ran under a policy whose digest equals the "
               "one pinned at start (inductive); a stopped run, or one whose policy differs from "
               "the pin, runs no stage, stays stopped until the pinned policy is back, and the "
               "pin never changes (fail closed; digests uninterpreted)", g6.check_pinned),
    Obligation("G6-worker-no-write-path", "G6", "proved",
               "from any state, no worker event (Write, Reply) changes the policy digest, the "
               "pin or whether there is one (frame condition)", g6.check_worker_frame),
    Obligation("G6-broken-check-at-start-only", "G6", "refuted",
               "broken: the policy is checked only at run start -- a run from Init changes it "
               "after the pin and a stage runs under the changed policy",
               g6.run_check_at_start_only),
    Obligation("G6-broken-worker-writes-policy", "G6", "refuted",
               "broken: a worker event may write the policy -- a run from Init in which a "
               "worker changes it", g6.run_worker_writes_policy),
    Obligation("G6-sanity", "G6", "proved",
               "Init and every transition of the policy model are satisfiable under the "
               "invariant", g6.check_sanity),
    # ---- new obligations (`python -m proofs new`) are added above this line
)


@dataclass
class Result:
    obligation: Obligation
    result: str
    seconds: float
    counterexample: Trace | None = None
    error: str = ""
    depth: int | None = None  # the depth a bounded search reached without a counterexample
    hint: str = ""  # what to do about a result that is not the expected one

    @property
    def ok(self) -> bool:
        return self.result == self.obligation.expect

    def to_json(self) -> dict[str, Any]:
        ob = self.obligation
        out: dict[str, Any] = {"id": ob.id, "guarantee": ob.guarantee, "expect": ob.expect,
                               "result": self.result, "seconds": self.seconds,
                               "statement": ob.statement.replace(FAMILY, family.describe())}
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample.to_json()
        if self.depth is not None:
            out["depth"] = self.depth
        if self.hint:
            out["hint"] = self.hint
        if self.error:
            out["error"] = self.error
        return out


def discharge(ob: Obligation) -> Result:
    """Run one obligation; a Z3 `unknown` (timeout included) is the result "unknown", a bounded
    search without a counterexample "not refuted within depth d" (with a hint to go deeper)."""
    start = time.perf_counter()
    depth, hint = None, ""
    try:
        found = ob.check()
        if isinstance(found, NotRefuted):
            cex, result, error, depth = None, found.result, "", found.depth
            hint = found.hint().replace("--only ID", f"--only {ob.id}")
        else:
            cex, result, error = found, ("proved" if found is None else "refuted"), ""
    except Unknown as e:
        cex, result, error = None, "unknown", str(e)
    except NotImplementedError as e:  # a skeleton of `python -m proofs new`, not filled in
        cex, result, error = None, "unwritten", str(e)
    return Result(ob, result, round(time.perf_counter() - start, 3), cex, error, depth, hint)


def select(only: list[str] | None) -> list[Obligation]:
    """The obligations whose id or guarantee starts with one of `only` (all when empty)."""
    if not only:
        return list(OBLIGATIONS)
    return [ob for ob in OBLIGATIONS if any(ob.id.startswith(p) or ob.guarantee == p
                                            for p in only)]
