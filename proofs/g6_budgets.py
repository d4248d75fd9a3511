"""G6 (the policy's budgets): the Z3 encoding of model/budget.py's rule, and what it buys.

The rule compares three numbers before a run starts: the graph's B, K and closed-form W against
the policy's budget.spend, budget.repairs and budget.attempts. Restated, that is all the guard
says. What it is for is a claim about every run it admits, at every step: settled + reserved <=
budget.spend + EPS, repairs_used <= budget.repairs and attempts_total <= budget.attempts. That
holds because G1's attempt-bound invariant (attempts_total <= W, G1-attempt-bound) and G3's spend
invariant (G3-no-overspend) hold on every reachable state: the obligation shows those invariants,
with the rule as an axiom on the parameters (a_v, c_v, K, B, R and the policy's numbers, all
symbolic), imply the policy's bounds, on every DAG of the family. B is finite here (the rule
refuses an unbounded B: a policy's spend is a finite number); with no budget.attempts the rule
says nothing of attempts, and neither does the claim.

Broken variant: the attempt cap compared with the attempts the nodes declare (sum of a_v), as if
no repair re-opened any: one node with one attempt that repairs itself once is admitted under a
cap of 1, and a run from Init makes 2 attempts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import z3

from loopproof.model import budget as mb
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.proofs.checks import Found, bmc, check_implies, first
from loopproof.proofs.encoding import EPS, Params, RunEncoding, State, real
from loopproof.proofs.family import shapes
from loopproof.proofs.g1_finishes import attempt_invariant, closed_form
from loopproof.proofs.g3_no_overspend import spend_invariant

Num: TypeAlias = z3.ArithRef | int | float


def admits(policy_spend: Num, policy_repairs: Num, policy_attempts: Num | None, b: Num, k: Num,
           w: Num | None) -> z3.BoolRef:
    """`model.budget.refusals(...) == []`, for finite numbers (a None cap or W: not compared)."""
    cs = [real(b) <= real(policy_spend) if isinstance(b, float | int) else b <= policy_spend,
          k <= policy_repairs]
    if policy_attempts is not None and w is not None:
        cs.append(w <= policy_attempts)
    return z3.And([z3.BoolVal(c) if isinstance(c, bool) else c for c in cs])


def rule_admits(policy: mb.Budgets, asked: mb.Asked) -> z3.BoolRef:
    """The encoding on concrete numbers (the differential test compares it with the rule)."""
    return admits(real(policy.spend), z3.IntVal(policy.repairs),
                  None if policy.attempts is None else z3.IntVal(policy.attempts),
                  real(asked.spend_budget), z3.IntVal(asked.repair_budget),
                  None if asked.attempt_bound is None else z3.IntVal(asked.attempt_bound))


SPEND, REPAIRS, ATTEMPTS = z3.Real("budget.spend"), z3.Int("budget.repairs"), z3.Int("budget.attempts")


def admitted(graph: LoopGraph,
             cap: Callable[[RunEncoding], z3.ArithRef] = closed_form) -> RunEncoding:
    """The run encoding of `graph` with symbolic numbers, the policy's among them, and the rule
    (comparing `cap(enc)` with budget.attempts) as an axiom."""
    enc = RunEncoding(graph, Params.symbolic(graph))
    p = enc.params
    return RunEncoding(graph, p.with_constraints(
        REPAIRS >= 0, SPEND >= 0, ATTEMPTS >= 1,
        admits(SPEND, REPAIRS, ATTEMPTS, p.spend_budget, p.repair_budget, cap(enc))))


def within_policy(s: State) -> z3.BoolRef:
    return z3.And(s.settled + s.reserved <= SPEND + EPS, s.repairs_used <= REPAIRS,
                  s.attempts_total <= ATTEMPTS)


def check_budgets_bound_the_run(graph: LoopGraph) -> Found:
    enc = admitted(graph)
    return check_implies(enc, lambda s: z3.And(attempt_invariant(enc, s), spend_invariant(enc, s)),
                         within_policy, "the policy's budgets")


def budgets_family() -> Found:
    return first(check_budgets_bound_the_run(g) for g in shapes())


def declared_attempts(enc: RunEncoding) -> z3.ArithRef:
    """Broken: the attempts the nodes declare, no repair counted."""
    return z3.Sum(list(enc.params.attempts.values()))


SELF_REPAIR = LoopGraph.build([NodeSpec("a", attempts=1, spend_ceiling=0.0, repairs=("a",))],
                              repair_budget=1, spend_budget=1.0)
CAP = mb.Budgets(spend=1.0, repairs=1, attempts=1)


def run_cap_ignores_repairs(depth: int = 4) -> Found:
    """The broken rule admits SELF_REPAIR under CAP (sum of a_v = 1); a run exceeds the cap."""
    enc = RunEncoding(SELF_REPAIR, Params.of(SELF_REPAIR))
    p = enc.params
    admitted_by_broken = admits(real(CAP.spend), CAP.repairs, CAP.attempts, p.spend_budget,
                                p.repair_budget, declared_attempts(enc))
    assert z3.is_true(z3.simplify(admitted_by_broken)), "the broken rule must admit the graph"
    return bmc(enc, lambda s: s.attempts_total > CAP.attempts, depth,
               "attempts_total <= the policy's budget.attempts")
