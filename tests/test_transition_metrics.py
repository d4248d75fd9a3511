"""Transition metrics, statistics and the edit family on hand-made inputs."""

from __future__ import annotations

import ast

import pytest

from experiments.stats import holm, paired_contrast, task_means
from experiments.transition import metrics
from experiments.transition.edits import EXAMPLES, enumerate_edits, normalize, restorations


def row(y, self_=None, visible=None, challenge=None, task="t", cond="c"):
    n = len(y) - 1
    return {"task_id": task, "condition": cond, "y": y,
            "self": self_ or [True] * n, "visible": visible or [False] * n,
            "challenge": challenge or [False] * n}


# Four trajectories from wrong starts, three revisions each.
ROWS = [
    row([0, 1, 0, 0], visible=[1, 1, 0], challenge=[1, 0, 0]),  # found, then lost
    row([0, 1, 1, 1], visible=[1, 1, 1], challenge=[1, 1, 1]),  # found and kept
    row([0, 0, 0, 1], self_=[False, True, True], visible=[1, 0, 1], challenge=[0, 0, 1]),
    row([0, 0, 0, 0], visible=[0, 1, 0], challenge=[0, 1, 0]),  # never; fools both gates once
]


def test_current_and_ever_correct_differ_when_correctness_is_lost():
    assert metrics.current_correct(ROWS) == [0.5, 0.25, 0.5]
    assert metrics.ever_correct(ROWS) == [0.5, 0.5, 0.75]
    assert metrics.lost_after_found(ROWS) == 0.25


def test_transition_counts_alpha_beta_and_the_stop_criterion():
    counts = metrics.transitions(ROWS)
    # from wrong: r0 t1 (0->1), r1 t1 (0->1), r2 t1,t2 (0->0),(0->1), r3 x3, r0 t3 (0->0)
    assert counts["alpha"] == [3, 9]
    # from correct: r0 t2 (1->0), r1 t2,t3 (1->1)
    assert counts["beta"] == [1, 3]
    assert metrics.transitions(ROWS, revision=2) == {"alpha": [0, 2], "beta": [1, 2]}
    a, b = 3 / 9, 1 / 3
    assert metrics.expected_change(0.5, a, b) == pytest.approx(0.5 * a - 0.5 * b)
    assert metrics.continuation_harmful(0.6, a, b)       # 0.6 > a / (a + b) = 0.5
    assert not metrics.continuation_harmful(0.4, a, b)
    assert not metrics.continuation_harmful(0.9, 0.0, 0.0)
    table = metrics.condition_table(ROWS)
    assert table["alpha"] == round(a, 6) and table["beta"] == round(b, 6)
    assert table["expected_change"][0] == pytest.approx(a, abs=1e-6)  # q_0 = 0


def test_verifier_risk_coverage_and_excess_joint_false_acceptance():
    table = metrics.verifier_table(ROWS)
    assert table["candidates"] == 12 and table["incorrect"] == 7
    vis = table["verifiers"]["visible"]
    # visible accepts 8 states, 3 of them incorrect
    assert vis["coverage"] == round(8 / 12, 6) and vis["risk"] == round(3 / 8, 6)
    # among the 7 incorrect: visible accepts 3, challenge 1, both 1
    d = table["dependence"]["visible~challenge"]
    assert d["joint"] == round(1 / 7, 6)
    assert d["D"] == round(1 / 7 - (3 / 7) * (1 / 7), 6)


def test_stopping_replay_stops_at_the_first_accepted_state():
    replay = metrics.stopping_replay(ROWS)
    # self-only stops at revision 1 for r0, r1, r3 and at revision 2 for r2 (y=0 there)
    assert replay["self_only"] == {"coverage": 1.0, "risk": 0.5, "sound_completion": 0.5,
                                   "stopped": 4, "unsafe": 2, "n": 4}
    # visible: r0 t1 (ok), r1 t1 (ok), r2 t1 (wrong), r3 t2 (wrong)
    assert replay["visible_gate"]["risk"] == 0.5
    # challenge gate needs visible and challenge: r0 t1, r1 t1, r2 t3 correct; r3 t2 wrong
    assert replay["challenge_gate"] == {"coverage": 1.0, "risk": 0.25, "sound_completion": 0.75,
                                        "stopped": 4, "unsafe": 1, "n": 4}


def test_holm_matches_the_textbook_step_down():
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert holm([None, 0.02]) == [None, 0.02]


def test_paired_contrast_averages_seeds_within_tasks_and_flips_signs_exactly():
    rows_a = [{"task_id": f"t{i}", "v": v} for i in range(6) for v in (1, 1)]
    rows_b = [{"task_id": f"t{i}", "v": v} for i in range(6) for v in (0, 1)]
    a = task_means(rows_a, lambda r: r["v"])
    b = task_means(rows_b, lambda r: r["v"])
    c = paired_contrast(a, b, seed=0, n_boot=500, n_flips=1000)
    assert c["tasks"] == 6 and c["difference"] == 0.5
    assert c["ci95"] == [0.5, 0.5]          # every task differs by exactly 0.5
    assert c["p"] == pytest.approx(2 / 64)  # exact: only the all-positive/all-negative flips
    null = paired_contrast(a, a, seed=0)
    assert null["difference"] == 0.0 and null["p"] == 1.0


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_each_edit_kind_produces_its_own_example(kind):
    before, after = EXAMPLES[kind]
    src = f"def f(x):\n    {before}\n"
    produced = {e.source for e in enumerate_edits(src, "f") if e.kind == kind}
    assert normalize(f"def f(x):\n    {after}\n") in produced


def test_edits_stay_inside_the_entry_point_and_keep_the_docstring():
    src = 'def helper(y):\n    return y + 1\n\ndef f(x):\n    """Doc 1 + 1."""\n    return x < 2\n'
    for e in enumerate_edits(src, "f"):
        tree = ast.parse(e.source)
        assert ast.unparse(tree.body[0]) == "def helper(y):\n    return y + 1"
        assert ast.get_docstring(tree.body[1]) == "Doc 1 + 1."


def test_restoration_puts_back_a_deleted_statement():
    old = normalize("def f(x):\n    x = x + 1\n    return x\n")
    now = normalize("def f(x):\n    return x\n")
    assert old in {e.source for e in restorations(now, [old])}
