"""The policy's budget rule (model/budget.py): its Z3 encoding equals it, the engine asks it, and
the broken variant's counterexample is a real run of a graph the real rule refuses.

The differential test draws the policy's numbers and a graph's (binary fractions, so a float
comparison and Z3's rational one see the same numbers; an unbounded B, which the encoding leaves
out, is checked on the rule alone) and requires the encoding (proofs/g6_budgets.py) to admit
exactly what the rule admits.
"""

from __future__ import annotations

import math

import z3
from hypothesis import event, given
from hypothesis import strategies as st

from loopproof.engine.policy.pin import Policy
from loopproof.model import budget as mb
from loopproof.model.bounds import attempt_bound
from loopproof.model.transitions import step
from loopproof.proofs import g6_budgets as g6b
from tests.support.discharged import counterexample

SPENDS = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 60.0, 60.25])
COUNTS = st.integers(0, 4)
CAPS = st.one_of(st.none(), st.integers(1, 5))


@given(policy=st.builds(mb.Budgets, SPENDS, COUNTS, CAPS),
       asked=st.builds(mb.Asked, SPENDS, COUNTS, CAPS))
def test_the_encoding_admits_exactly_what_the_rule_admits(policy, asked):
    ok = mb.refusals(policy, asked) == []
    event(f"admitted: {ok}")
    assert z3.is_true(z3.simplify(g6b.rule_admits(policy, asked))) == ok, (policy, asked)


def test_each_refusal_is_named_and_an_unbounded_budget_never_fits():
    policy = mb.Budgets(spend=2.0, repairs=1, attempts=3)
    assert mb.refusals(policy, mb.Asked(2.0, 1, 3)) == []
    said = mb.refusals(policy, mb.Asked(2.5, 2, 4))
    assert [s.split()[0] for s in said] == ["spend_budget", "repair_budget", "attempt"]
    assert mb.refusals(policy, mb.Asked(math.inf, 0, 1)) != []
    assert mb.refusals(mb.Budgets(2.0, 1), mb.Asked(1.0, 1, 99)) == []  # no cap: no attempts check


def test_the_engine_asks_the_rule(tmp_path):
    """Policy.admits is the rule on the policy's fields: changing the rule changes the engine."""
    policy = Policy(tmp_path / "p.toml", {"budget.spend": 2.0, "budget.repairs": 1,
                                          "budget.attempts": 3})
    asked = dict(spend_budget=2.5, repair_budget=2, attempt_bound=4)
    assert policy.admits(**asked) == mb.refusals(mb.Budgets(2.0, 1, 3), mb.Asked(2.5, 2, 4))
    real = mb.refusals
    try:
        mb.refusals = lambda p, a: ["planted"]
        assert policy.admits(spend_budget=0.0, repair_budget=0, attempt_bound=1) == ["planted"]
    finally:
        mb.refusals = real


def test_the_broken_cap_admits_a_graph_the_rule_refuses_and_its_run_is_real(tmp_path_factory):
    graph, cap = g6b.SELF_REPAIR, g6b.CAP
    w = attempt_bound(graph)
    assert w == 2 and sum(n.attempts for n in graph.nodes) == 1
    assert mb.refusals(cap, mb.Asked(graph.spend_budget, graph.repair_budget, w)) != []
    tr = counterexample(tmp_path_factory, "G6-broken-cap-ignores-repairs")
    s = tr.steps[0].state_obj
    for st_ in tr.steps[1:]:
        s = step(graph, s, st_.event_obj)
    assert s.attempts_total == 2 > cap.attempts
