"""The policy's budgets against what a graph asks for: the rule the engine asks before a run
starts (engine/policy/pin.py, `Policy.admits`, through the guard "policy.budgets").

A graph may ask for at most the policy's run-wide spend (its B <= budget.spend; an unbounded B
never fits a policy, whose spend is a finite number), at most its repairs (K <= budget.repairs),
and, when the policy caps attempts, a closed-form attempt bound W (model/bounds.py) within the
cap: W counts the attempts every repair can re-open, so a graph whose nodes' attempts fit the
cap but whose repairs do not is refused. Why a model rule: with G1 (attempts_total <= W) and G3
(settled + reserved <= B + EPS) it is what makes the policy's numbers bound every run it admits
(proofs/g6_budgets.py), not only the numbers the graph declares.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budgets:
    """The policy's: budget.spend, budget.repairs and the optional budget.attempts."""

    spend: float
    repairs: int
    attempts: int | None = None


@dataclass(frozen=True)
class Asked:
    """What a graph asks for: its B, its K and its closed-form W (None: not computed)."""

    spend_budget: float
    repair_budget: int
    attempt_bound: int | None = None


def refusals(policy: Budgets, asked: Asked) -> list[str]:
    """Every way the graph asks for more than the policy allows ([] when it is admitted)."""
    out = []
    if asked.spend_budget > policy.spend:
        out.append(f"spend_budget {asked.spend_budget:g} exceeds policy budget.spend "
                   f"{policy.spend:g}")
    if asked.repair_budget > policy.repairs:
        out.append(f"repair_budget {asked.repair_budget} exceeds policy budget.repairs "
                   f"{policy.repairs}")
    if policy.attempts is not None and asked.attempt_bound is not None \
            and asked.attempt_bound > policy.attempts:
        out.append(f"attempt bound W = {asked.attempt_bound} exceeds policy budget.attempts "
                   f"{policy.attempts}")
    return out
