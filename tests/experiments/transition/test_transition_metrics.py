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
    # every task differs by exactly 0.5: no interval, said in words, never [0.5, 0.5]
    assert c["ci95"] is None and c["ci_method"] == "no variation"
    assert c["p"] == pytest.approx(2 / 64)  # exact: only the all-positive/all-negative flips
    null = paired_contrast(a, a, seed=0)
    assert null["difference"] == 0.0 and null["p"] == 1.0


def test_intervals_are_bca_over_clusters_and_never_degenerate():
    """Planted fault (seen failing): the percentile method instead of BCa, and [x, x] for a
    cluster set without variation."""
    from experiments.stats import CI_BCA, NO_VARIATION, cluster_mean, interval

    skewed = [0.0] * 8 + [1.0, 0.5]
    got = interval(skewed, seed=0, n_boot=2000)
    assert got["ci_method"] == CI_BCA
    lo, hi = got["ci95"]
    assert 0.0 <= lo < 0.15 < hi <= 1.0
    for flat in ([0.3] * 5, [1.0], []):
        assert interval(flat, seed=0) == {"ci95": None, "ci_method": NO_VARIATION}
    m = cluster_mean({"t1": 0.0, "t2": 1.0, "t3": 0.5, "t4": 0.25}, seed=0, n_boot=2000)
    assert m["clusters"] == 4 and m["mean"] == 0.4375 and m["ci95"][0] < 0.4375 < m["ci95"][1]


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


def test_identical_conditions_are_pooled_once_and_the_replay_counts_intercepts():
    """Planted faults (seen failing): pooling every condition (the search coder's three blind
    conditions then count three times); an intercept counted for a harm that passed both suites
    on current evidence."""
    from experiments.transition import pooling

    def row(cond, task, y, state):
        return {"condition": cond, "task_id": task, "seed": 0, "y": y, "state": state,
                "self": [True], "visible": [True], "challenge": [False]}
    traj = [row(c, t, [0, 1], [f"{t}-s"]) for c in ("a", "b", "c") for t in ("t1", "t2")]
    traj += [row("c", "t3", [0, 0], ["x"])]  # c differs from a on one trajectory
    rows, same = pooling.distinct_conditions(traj, ("a", "b", "c"))
    assert same == {"b": "a"} and {r["condition"] for r in rows} == {"a", "c"}

    def branch(cond, harm, stale, vis, chal):
        return {"condition": cond, "harm": harm, "evidence_stale": [stale], "visible": [vis],
                "challenge": [chal]}
    cs = [branch("stale_trace", True, True, True, True),      # binding stops it
          branch("stale_trace", False, True, True, True),     # not a harm
          branch("current_trace", True, False, True, False),  # the gate stops it
          branch("current_trace", True, False, True, True)]   # passes both: not stopped
    out = pooling.replay_intercepts(cs)
    assert out["stale_trace"] == {"harms": 1, "by_state_binding": 1, "by_gate": 0,
                                  "intercepted": 1}
    assert out["current_trace"] == {"harms": 2, "by_state_binding": 0, "by_gate": 1,
                                    "intercepted": 1}
