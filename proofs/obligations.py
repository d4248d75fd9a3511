"""Every proof obligation, tagged with its guarantee id (docs/design.md) and the result it must give.

An obligation's `check` returns None (no counterexample: "proved"), a `Trace` ("refuted"), or
`NotRefuted` (a bounded search found no counterexample: "not refuted within depth d", which is
never "proved"). For a sanity obligation, "proved" means every satisfiability question was
answered sat. A broken variant expects "refuted"; if Z3 ever proves it, or a bounded search
does not refute it, the proof machinery did not show it can fail and `python -m loopproof.proofs` exits
non-zero. `unknown`, "not refuted" and "unwritten" (a skeleton of `python -m loopproof.proofs new` whose
placeholders are still there) never match an expectation.

Why one module: just over 400 lines on purpose, since the registry is one ordered list (the
command line, `--json`, the kept report and docs/results.md print it in this order) and each
entry is a statement beside its check; `discharge`, which gives every entry its result, is the
only code here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from loopproof.proofs import cancel, checks, family, g2_order, sanity
from loopproof.proofs import concurrent as par
from loopproof.proofs import coq_theorems as coq
from loopproof.proofs import g1_finishes as g1
from loopproof.proofs import g2_no_drift as g2
from loopproof.proofs import g3_attempt_ceiling as g3c
from loopproof.proofs import g3_no_overspend as g3
from loopproof.proofs import g4_evidence as g4
from loopproof.proofs import g5_checkpoint as g5
from loopproof.proofs import g5_receipts as g5r
from loopproof.proofs import g6_budgets as g6b
from loopproof.proofs import g6_policy as g6
from loopproof.proofs.checks import Found, NotRefuted
from loopproof.proofs.solver import Unknown
from loopproof.proofs.trace import Trace

Expect = Literal["proved", "refuted"]  # nothing may expect "not refuted": it proves nothing

FAMILY = "{family}"  # filled in with proofs.family.describe() when reported


@dataclass(frozen=True)
class Obligation:
    id: str
    guarantee: str
    expect: Expect
    statement: str
    check: Callable[[], Found]
    prover: str = "z3"  # "coq": a theorem of proofs/coq/, checked by coqc and Print Assumptions

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
    Obligation("G1-coq-W-bound", "G1", "proved",
               "for every finite DAG (any number of nodes, any a_v >= 1, c_v, K, B and repair "
               "relation with u = d or an ancestor of d), every state reachable from Init by the "
               "model's events has attempts_total <= W, W = sum_v a_v + K * max over R of "
               "sum_{S_u \\ desc(d)} a_w as model/bounds.py computes it (Coq: loopproof_W_bound)",
               coq.theorem("loopproof_W_bound"), "coq"),
    Obligation("G1-coq-structural", "G1", "proved",
               "for every finite DAG, every reachable state has every counter in range "
               "(attempts_v <= a_v, < a_v while PENDING, >= 1 while RUNNING), at most one node "
               "RUNNING, repairs_used <= K, and every node that has started in its activation "
               "has every ancestor DONE (Coq: loopproof_structural)",
               coq.theorem("loopproof_structural"), "coq"),
    Obligation("G1-coq-W-tight", "G1", "proved",
               "for every finite DAG with an unbounded B, some run from Init makes exactly W "
               "attempts: the schedule of docs/bounds.md that repeats the maximising repair "
               "pair K times (Coq: loopproof_W_tight)", coq.theorem("loopproof_W_tight"), "coq"),
    Obligation("G1-coq-broken-cancel-after-done", "G1", "refuted",
               "broken: Cancel also on a DONE node -- Coq proves a run from Init with more than "
               "W attempts (broken_cancel_done_exceeds_W)", coq.refuted("cancel_done"), "coq"),
    Obligation("G1-coq-broken-begin-ignores-needs", "G1", "refuted",
               "broken: Begin without the needs check -- Coq proves a run from Init that starts "
               "a node whose ancestor is not DONE (broken_begin_ignores_needs_starts_early)",
               coq.refuted("begin_ignores_needs"), "coq"),
    Obligation("G1-coq-W-bound-concurrent", "G1", "proved",
               "for every finite DAG and every max_parallel, every state reachable from Init by "
               "the concurrent model's events (each attempt in flight with its own account, "
               "spend events naming their attempt) has attempts_total <= W, at most "
               "max_parallel attempts in flight, every counter in range, repairs_used <= K and "
               "every started node's ancestors DONE (Coq: loopproof_W_bound_concurrent)",
               coq.theorem("loopproof_W_bound_concurrent"), "coq"),
    Obligation("G1-coq-W-tight-concurrent", "G1", "proved",
               "for every finite DAG with an unbounded B and every max_parallel >= 1, some run "
               "from Init makes exactly W attempts: every serial run is a run with any "
               "max_parallel >= 1 (Coq: loopproof_W_tight_concurrent)",
               coq.theorem("loopproof_W_tight_concurrent"), "coq"),
    Obligation("G1-coq-serial-instance", "G1", "proved",
               "for every finite DAG, the serial model is the concurrent one with max_parallel "
               "= 1: the same states are reachable, and on each the concurrent step of every "
               "event (spend events naming no attempt) admits what the serial step admits and "
               "reaches the same state (Coq: loopproof_serial_instance)",
               coq.theorem("loopproof_serial_instance"), "coq"),
    Obligation("G1-coq-terminates", "G1", "proved",
               "for every finite DAG, every max_parallel and the serial model: under at most P "
               "metered operations/claims per attempt (a ghost counter per attempt) and at most "
               "C recovered crashes, (live, K - repairs_used, C - abandoned, sum_v mu_v, sum_v "
               "(P - ops_v)) decreases lexicographically on every event from every reachable "
               "state, the order is well founded, and every run is finite "
               "(Coq: loopproof_terminates)", coq.theorem("loopproof_terminates"), "coq"),
    Obligation("G1-coq-broken-per-node-repairs", "G1", "refuted",
               "broken: repair budgets per node, each started afresh by the repair that "
               "re-opens its node -- Coq proves a run from Init that never ends under the same "
               "two assumptions, looping back to Init on every field a guard reads with the "
               "measure unchanged (broken_per_node_repairs_runs_forever)",
               coq.refuted("per_node_repairs"), "coq"),
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
    Obligation("G3-coq-no-overspend", "G3", "proved",
               "for every finite DAG with a finite B, every reachable state has 0 <= settled, "
               "0 <= reserved and settled + reserved <= B, spend counted exactly in quanta "
               "(Coq: loopproof_G3)", coq.theorem("loopproof_G3"), "coq"),
    Obligation("G3-coq-broken-settle-tolerant", "G3", "refuted",
               "broken: Settle may charge one quantum more than it releases -- Coq proves a run "
               "from Init with settled + reserved > B (broken_settle_tolerant_overspends)",
               coq.refuted("settle_tolerant"), "coq"),
    Obligation("G3-coq-attempt-ceiling", "G3", "proved",
               "for every finite DAG, on every reachable state the attempt in flight has "
               "reserved <= attempt_spend <= its node's c_v (what it settled plus what it holds), "
               "and with none in flight nothing is reserved or charged to one "
               "(Coq: loopproof_G3_ceiling)", coq.theorem("loopproof_G3_ceiling"), "coq"),
    Obligation("G3-coq-broken-ceiling-unchecked", "G3", "refuted",
               "broken: a reservation is checked against B only, not c_v -- Coq proves a run "
               "from Init whose attempt holds more than c_v (broken_ceiling_unchecked_exceeds_c)",
               coq.refuted("ceiling_unchecked"), "coq"),
    Obligation("G3-coq-no-overspend-concurrent", "G3", "proved",
               "for every finite DAG and every max_parallel, every reachable state has 0 <= "
               "settled, each attempt in flight 0 <= reserved <= spent <= its c_v and a node "
               "not in flight nothing, the totals the sums of the accounts, and for a finite B "
               "settled + every open reservation <= B and the held bound admission promises, "
               "settled + sum over the attempts in flight of (c_w - what w settled) <= B, spend "
               "exact in quanta (Coq: loopproof_G3_concurrent)",
               coq.theorem("loopproof_G3_concurrent"), "coq"),
    Obligation("G3-coq-broken-check-then-reserve", "G3", "refuted",
               "broken: Begin checks only settled + c_v <= B and reservations trust admission "
               "-- Coq proves a run from Init where two attempts in flight hold more than B, "
               "and that the real model refuses it (broken_check_then_reserve_overspends)",
               coq.refuted("check_then_reserve"), "coq"),
    Obligation("G3-coq-broken-check-then-admit", "G3", "refuted",
               "broken: Begin checks only settled + c_v <= B, reservations still against B -- "
               "Coq proves a run from Init whose attempts in flight are promised more than B "
               "(the held bound fails) and that one of them is then starved "
               "(broken_check_then_admit_overcommits)", coq.refuted("check_then_admit"), "coq"),
    Obligation("G3-coq-broken-repair-in-flight", "G3", "refuted",
               "broken: a Repair does not wait for the attempts in flight in S_u -- Coq proves "
               "a run from Init that re-opens a node whose attempt still holds a reservation "
               "and then admits another attempt on it, settled + every open reservation + what "
               "the attempts in flight may reserve > B, and that the real model refuses it "
               "(broken_repair_in_flight_overcommits)", coq.refuted("repair_in_flight"), "coq"),
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
    # ---- several attempts in flight (proofs/concurrent.py; max_parallel symbolic, >= 1)
    Obligation("G1-concurrent-attempt-bound", "G1", "proved",
               "with up to max_parallel attempts in flight (symbolic, every limit >= 1): the "
               "attempt-bound invariant without 'at most one in flight' is inductive and implies "
               f"attempts_total <= W ({FAMILY})", par.attempt_bound_family),
    Obligation("G1-concurrent-ranking", "G1", "proved",
               "with up to max_parallel attempts in flight: (live, K - repairs_used, C - "
               "abandoned, sum_v mu_v, sum_v (P - ops_v)) in N^5 decreases lexicographically on "
               "every transition, assuming at most P metered operations/claims per attempt "
               f"(a ghost counter per node) and at most C recovered crashes ({FAMILY})",
               par.ranking_family),
    Obligation("G1-concurrent-sanity", "G1", "proved",
               "with up to max_parallel attempts in flight: Init and every transition (spend "
               "events naming their node) satisfiable under the G1 and G3 invariants "
               f"({FAMILY})", par.sanity_family),
    Obligation("G2-concurrent-no-drift-unbounded", "G2", "proved",
               "every DONE node has a PASS for its current activation, inductive over an "
               "unbounded sort of nodes (any graph, any size, any R) with any number of "
               "attempts in flight and no spend condition (a loosening whose control runs "
               "include those of every max_parallel); Init and every transition satisfiable "
               "under it", par.no_drift_any_graph_and_sanity),
    Obligation("G2-concurrent-broken-self-report-step", "G2", "refuted",
               "broken: with any number of attempts in flight, a worker's Claim marks DONE -- "
               "the induction step fails over unbounded nodes",
               par.no_drift_any_graph_self_report),
    Obligation("G3-concurrent-no-overspend", "G3", "proved",
               "with up to max_parallel attempts in flight: settled + every open reservation "
               "<= B + EPS, each attempt's 0 <= reserved <= spent <= c_v + EPS and the totals "
               f"their sums, inductive ({FAMILY})", par.no_overspend_family),
    Obligation("G3-concurrent-held", "G3", "proved",
               "with up to max_parallel attempts in flight and exact amounts (EPS = 0): settled "
               "+ sum over attempts in flight of (c_w - what w settled) <= B is inductive, so "
               "every attempt in flight may still reserve up to its c_v within B "
               f"({FAMILY})", par.held_family),
    Obligation("G3-concurrent-broken-check-then-reserve", "G3", "refuted",
               "broken: each Begin checks only settled + c_v <= B and reservations trust "
               "admission (c_v only) -- two attempts in flight overspend B (a run from Init)",
               par.run_check_then_reserve),
    Obligation("G3-concurrent-broken-check-then-reserve-starves", "G3", "refuted",
               "broken: each Begin checks only settled + c_v <= B, reservations still checked "
               "against B -- B holds, but an admitted attempt can no longer reserve its c_v "
               "(a run from Init)", par.run_check_then_reserve_starves),
    Obligation("G3-concurrent-broken-repair-in-flight", "G3", "refuted",
               "broken: a repair resets S_u while a node of it has an attempt in flight -- the "
               "attempt's open reservation, which its worker still holds, drops out of settled "
               "+ reserved (a run from Init)", par.run_repair_drops_flight),
    # ---- G4 evidence is bound (model/evidence.py, encoded in proofs/g4_evidence.py)
    Obligation("G4-evidence-bound", "G4", "proved",
               "the executable evidence rules (issue, change suite, halt, bind, refresh, keep, "
               "escalate, commit): every commit was driven by evidence this broker issued, "
               "produced on exactly the tree the commit started from -- the tree the commit "
               "before it gave -- by the pinned suite of its check, the candidate is the tree the "
               "last commit gave, and everything delivered to a worker was bound the same way "
               "when it was delivered (inductive; hashes and checks uninterpreted)",
               g4.check_bound),
    Obligation("G4-broken-stale-accepted", "G4", "refuted",
               "broken: evidence binds whatever tree it describes -- a run from Init delivers "
               "evidence of another tree", g4.run_stale_accepted),
    Obligation("G4-broken-suite-unchecked", "G4", "refuted",
               "broken: only the tree is compared -- a run from Init delivers evidence of a "
               "changed suite", g4.run_suite_unchecked),
    Obligation("G4-broken-forged-accepted", "G4", "refuted",
               "broken: evidence need not be issued by this broker -- a forged envelope with the "
               "current hashes is delivered", g4.run_forged_accepted),
    Obligation("G4-broken-deliver-unbound", "G4", "refuted",
               "broken: evidence is delivered without the binding check", g4.run_deliver_unbound),
    Obligation("G4-sanity", "G4", "proved",
               "Init and every transition of the evidence rules are satisfiable under the "
               "invariant", g4.check_sanity),
    # ---- G5 checkpoint (model/checkpoint.py, encoded in proofs/g5_checkpoint.py)
    Obligation("G5-checkpoint-gated", "G5", "proved",
               "the executable checkpoint rules (issue, commit, drift, restore, recertify), with "
               "1 or 2 admission and 1 or 2 completion checks: the checkpoint is the last "
               "committed tree and the candidate is it (or the start); every committed tree, the "
               "current one and each before it, was admitted by evidence this broker issued, "
               "produced on exactly that tree by the pinned suite of every admission check, "
               "PASS; a receipt names the checkpoint, re-certified the same way (inductive)",
               g5.check_gated),
    Obligation("G5-checkpoint-frame", "G5", "proved",
               "from any state, every event but Commit leaves the checkpoint unchanged: drift, "
               "restore, new evidence and completion never move it", g5.check_frame),
    Obligation("G5-broken-commits-any-tree", "G5", "refuted",
               "broken: admission evidence need not be of the committed tree -- a run from Init "
               "commits a tree nothing was run on", g5.run_commits_any_tree),
    Obligation("G5-broken-error-counts-as-pass", "G5", "refuted",
               "broken: a check's error (no verdict) counts as a pass -- a run from Init commits "
               "on an error", g5.run_error_counts_as_pass),
    Obligation("G5-broken-malformed-overwrites", "G5", "refuted",
               "broken: a drifted workspace (a malformed action's files) is taken as the "
               "checkpoint -- one step from Init", g5.run_drift_overwrites),
    Obligation("G5-broken-complete-unchecked", "G5", "refuted",
               "broken: completion issues a receipt without recertifying the checkpoint",
               g5.run_completes_unchecked),
    # ---- G5 receipts and stored proposals (model/receipts.py, encoded in proofs/g5_receipts.py)
    Obligation("G5-receipt-binds-content", "G5", "proved",
               "the receipt and proposal digest rules, with the digest injective on bodies (no "
               "collisions, assumed) and the ledger anchoring only digests of issued bodies: a "
               "receipt the rule accepts has exactly a body that was issued and anchored, and a "
               "stored proposal it accepts is exactly the reply the ledger named",
               g5r.check_binds),
    Obligation("G5-broken-receipt-anchor-only", "G5", "refuted",
               "broken: a receipt is accepted when its stated digest is anchored, its body not "
               "hashed -- an edited body beside the original digest is accepted",
               g5r.receipt_anchor_only),
    Obligation("G5-broken-proposal-digest-field-only", "G5", "refuted",
               "broken: a stored proposal is accepted when its digest field is the named one, its "
               "body not hashed -- an edited reply is replayed", g5r.proposal_stated_only),
    Obligation("G5-sanity", "G5", "proved",
               "Init and every transition of the checkpoint rules are satisfiable under the "
               "invariant", g5.check_sanity),
    # ---- G6 policy pinned (model/policy.py, encoded in proofs/g6_policy.py)
    Obligation("G6-policy-pinned", "G6", "proved",
               "the executable policy rules (pin, edit, check, stage, resume, worker write): "
               "every stage ran under the digest pinned at start and none before it "
               "(inductive); from any state a stopped run, or one whose policy differs from "
               "the pin, runs no stage, stays stopped until the pinned policy is back, and the "
               "pin never changes (fail closed; digests uninterpreted)", g6.check_pinned),
    Obligation("G6-worker-no-write-path", "G6", "proved",
               "from any state, no worker event changes the policy digest, the pin or whether "
               "there is one (frame condition)", g6.check_worker_frame),
    Obligation("G6-broken-check-at-start-only", "G6", "refuted",
               "broken: the policy is checked only when it is pinned -- a run from Init changes "
               "it and a stage runs under the changed policy", g6.run_check_at_start_only),
    Obligation("G6-broken-repin-on-resume", "G6", "refuted",
               "broken: a stopped run resumes by pinning the policy as it is now -- the pin "
               "changes", g6.run_repin_on_resume),
    Obligation("G6-broken-worker-writes-policy", "G6", "refuted",
               "broken: a worker event may write the policy", g6.run_worker_writes_policy),
    Obligation("G6-sanity", "G6", "proved",
               "Init and every transition of the policy rules are satisfiable under the "
               "invariant", g6.check_sanity),
    # ---- G6 the policy's budgets (model/budget.py, encoded in proofs/g6_budgets.py)
    Obligation("G6-budgets-bound-the-run", "G6", "proved",
               "a graph the budget rule admits (B <= budget.spend, K <= budget.repairs, "
               "W <= budget.attempts) keeps every run within the policy: G1's attempt-bound "
               "and G3's spend invariants imply settled + reserved <= budget.spend + EPS, "
               f"repairs_used <= budget.repairs, attempts_total <= budget.attempts ({FAMILY})",
               g6b.budgets_family),
    Obligation("G6-broken-cap-ignores-repairs", "G6", "refuted",
               "broken: the attempt cap is compared with the attempts the nodes declare (sum "
               "of a_v), not W -- an admitted self-repairing node makes 2 attempts under a cap "
               "of 1", g6b.run_cap_ignores_repairs),
    # ---- new obligations (`python -m loopproof.proofs new`) are added above this line
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
                               "prover": ob.prover, "result": self.result,
                               "seconds": self.seconds,
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
    search without a counterexample "not refuted within depth d" (with a hint to go deeper),
    and so is a check that says "proved" after one of its bounded searches found nothing."""
    start = time.perf_counter()
    depth, hint = None, ""
    made = len(checks.MADE)
    try:
        found = ob.check()
        if found is None and len(checks.MADE) > made:
            # a proof never rests on a bounded search that found nothing: that proves nothing
            found = checks.MADE[-1]
        if isinstance(found, NotRefuted):
            cex, result, error, depth = None, found.result, "", found.depth
            hint = found.hint().replace("--only ID", f"--only {ob.id}")
        else:
            cex, result, error = found, ("proved" if found is None else "refuted"), ""
    except Unknown as e:
        cex, result, error = None, "unknown", str(e)
    except NotImplementedError as e:  # a skeleton of `python -m loopproof.proofs new`, not filled in
        cex, result, error = None, "unwritten", str(e)
    return Result(ob, result, round(time.perf_counter() - start, 3), cex, error, depth, hint)


def select(only: list[str] | None) -> list[Obligation]:
    """The obligations whose id or guarantee starts with one of `only` (all when empty)."""
    if not only:
        return list(OBLIGATIONS)
    return [ob for ob in OBLIGATIONS if any(ob.id.startswith(p) or ob.guarantee == p
                                            for p in only)]
