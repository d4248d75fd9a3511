"""The verifier analysis on candidates whose answers are known by hand: risk at matched coverage
with fractional ties, D_ij and phi among incorrect candidates, the unique (task, code) collapse,
the pre-specified criterion, the freshness cost and reply validity."""

from __future__ import annotations

import pytest

from experiments.transition import metrics, prospective, verifiers


def cand(task, state, y, self_, vis, chal):
    return {"task": task, "state": state, "y": y, "self": float(self_), "visible": vis,
            "challenge": chal}


def test_matched_coverage_accepts_a_fraction_of_the_tied_level():
    # 10 candidates; visible scores: 4 at 1.0 (3 correct), 6 at 0.5 (1 correct).
    cs = [cand("A", f"s{i}", i < 3, 0, 1.0, 1.0) for i in range(4)]
    cs += [cand("A", f"t{i}", i < 1, 0, 0.5, 0.0) for i in range(6)]
    out = verifiers.matched(cs, seed=0, n_boot=50, coverage=0.7)
    # accept all 4 at 1.0 and 3 of the 6 at 0.5 (half of them): 7 accepted,
    # wrong accepted = 1 + 0.5 * 5 = 3.5 -> risk 0.5
    assert out["verifiers"]["visible"]["risk"] == pytest.approx(0.5)
    # self-report is 0 everywhere: it accepts 70% of everything, risk = base rate 6/10
    assert out["verifiers"]["self"]["risk"] == pytest.approx(0.6)
    assert out["candidates"] == 10 and out["incorrect"] == 6


def test_dependence_among_incorrect_candidates():
    # incorrect candidates only matter; build two verifiers that fail together
    cs = [cand("A", "c", True, 1, 1.0, 1.0), cand("B", "c", True, 1, 1.0, 1.0)]
    cs += [cand("A", f"w{i}", False, 0, 1.0 if i < 2 else 0.0, 1.0 if i < 2 else 0.0)
           for i in range(4)]
    cs += [cand("B", f"w{i}", False, 0, 1.0 if i < 2 else 0.0, 1.0 if i < 2 else 0.0)
           for i in range(4)]
    out = verifiers.matched(cs, seed=1, n_boot=200, coverage=0.6)
    # 10 candidates, coverage 0.6 -> 6 accepted: the 6 scoring 1.0 (2 correct, 4 wrong)
    dep = out["dependence"]["visible~challenge"]
    # among the 8 incorrect: both accept the same 4 -> f = 0.5 each, joint 0.5
    assert dep["joint"] == pytest.approx(0.5) and dep["D"] == pytest.approx(0.25)
    assert dep["phi"] == pytest.approx(1.0)
    # tasks A and B are identical, so no bootstrap draw differs: no interval, not [0.25, 0.25]
    assert dep["D_ci95"] is None
    # the self-report ties everything among incorrect candidates (all 0): no dependence
    assert out["dependence"]["self~visible"]["D"] == pytest.approx(0.0, abs=1e-9)


def test_dependence_needs_both_sides_and_thresholds_are_judged_on_held_out_tasks():
    """Planted faults (seen failing): D tabulated with no correct candidate; thresholds chosen on
    the tasks they are judged on (the held-out curve then equals the in-sample one)."""
    wrong_only = [cand(t, f"w{i}", False, 1, i / 4, 0.0) for t in "AB" for i in range(4)]
    out = verifiers.matched(wrong_only, seed=0, n_boot=20)
    assert out["dependence"] == {} and out["dependence_undefined"] == "no correct candidate"
    # task A: scores 1.0 are correct; task B: scores 1.0 are wrong. A threshold tuned on A
    # (accept the top half) and judged on B accepts B's wrong ones, and the other way round
    cs = [cand("A", f"a{i}", i < 2, 1, 1.0 if i < 2 else 0.0, 0.0) for i in range(4)]
    cs += [cand("B", f"b{i}", i >= 2, 1, 1.0 if i < 2 else 0.0, 0.0) for i in range(4)]
    h = verifiers.held_out(cs)
    assert h is not None and h["tasks"] == 2
    at = {p["target"]: p for p in h["risk_coverage"]["visible"]}
    assert at[0.5]["coverage"] == pytest.approx(0.5)
    assert at[0.5]["risk"] == pytest.approx(0.5)  # half of what it accepts is wrong
    assert at[1.0]["coverage"] == pytest.approx(1.0) and at[1.0]["risk"] == pytest.approx(0.5)
    assert verifiers.held_out(cs[:4]) is None  # one task: nothing to hold out


def test_unique_collapse_counts_each_task_and_code_once():
    cs = [cand("A", "good", True, 1, 1.0, 1.0)] * 8 + [cand("A", "bad", False, 1, 1.0, 0.0),
                                                      cand("A", "bad", False, 0, 1.0, 0.0)]
    u = verifiers.unique(cs)
    assert len(u) == 2 and [c["self"] for c in u] == [0.5, 1.0]
    rev = verifiers.matched(cs, seed=0, n_boot=20, coverage=0.7)
    uni = verifiers.matched(u, seed=0, n_boot=20, coverage=0.7)
    # repeated correct code dilutes the risk at the revision level, not at the unique level
    assert rev["verifiers"]["challenge"]["risk"] == pytest.approx(0.0)
    assert uni["verifiers"]["challenge"]["risk"] > rev["verifiers"]["challenge"]["risk"]


def test_candidates_come_from_every_revision_of_every_row():
    row = {"task_id": "T", "y": [False, True, False], "self": [True, True],
           "visible_share": [1.0, 0.5], "challenge_share": [1.0, 0.0], "state": ["a", "b"]}
    cs = verifiers.candidates([row])
    assert [(c["y"], c["visible"], c["state"]) for c in cs] == [(True, 1.0, "a"),
                                                                (False, 0.5, "b")]


def gvb(harm, repair, sound, unsafe):
    def both(ci):
        return {"ci95": ci, "ci95_percentile": ci}
    return {"harm_from_correct_starts": both(harm), "repair_from_wrong_starts": both(repair),
            "sound_completion": both(sound), "unsafe_completion": both(unsafe)}


def test_the_pre_specified_criterion_and_its_protocol_file():
    ok = prospective.verdict(gvb([-0.3, -0.1], [-0.04, 0.1], [-0.02, 0.2], [-0.1, 0.04]))
    assert ok["passes"] and ok["margin"] == 0.05
    # the paper's outcome: harm superior, repair fell beyond the margin -> fails
    bad = prospective.verdict(gvb([-0.15, -0.05], [-0.12, 0.0], [-0.08, 0.02], [-0.01, 0.0]))
    assert not bad["passes"] and not bad["parts"]["repair_non_inferiority"]["passes"]
    assert bad["parts"]["harm_superiority"]["passes"]
    # no interval (e.g. a single task) is never a pass
    assert not prospective.verdict(gvb(None, [0, 0], [0, 0], [0, 0]))["passes"]
    # harm that did not fall is not superiority, even at the edge
    assert not prospective.verdict(gvb([-0.2, 0.0], [0, 0], [0, 0], [0, 0]))["passes"]
    # "no variation" (every task the same difference) is judged on that difference
    flat = {k: {"ci95": None, "ci95_percentile": None, "ci_method": "no variation",
                "difference": d} for k, d in (
        ("harm_from_correct_starts", -0.1), ("repair_from_wrong_starts", 0.0),
        ("sound_completion", 0.0), ("unsafe_completion", 0.0))}
    assert prospective.verdict(flat)["passes"]
    flat["harm_from_correct_starts"]["difference"] = 0.0  # no harm removed: not superior
    assert not prospective.verdict(flat)["passes"]
    # judged on the percentile interval it was fixed with; the BCa one only when asked
    # (planted fault, seen failing: judging on "ci95" made the search coder's verdict pass)
    mixed = gvb([-0.3, -0.1], [-0.04, 0.1], [-0.02, 0.2], [-0.1, 0.04])
    mixed["harm_from_correct_starts"]["ci95_percentile"] = [-0.5, 0.0]
    assert not prospective.verdict(mixed)["passes"]
    assert prospective.verdict(mixed, "ci95")["passes"]
    # the criterion applied is the one in the protocol file, whose hash the summary carries
    import hashlib
    text = prospective.PROTOCOL.read_text(encoding="utf-8")
    assert prospective.PRE_SPECIFIED in text
    assert ok["protocol_sha256"] == hashlib.sha256(text.encode()).hexdigest()


def traj(cond, y, self_, vis, chal):
    return {"condition": cond, "y": y, "self": self_, "visible": vis, "challenge": chal}


def test_fresh_gate_stops_only_on_evidence_bound_to_the_state():
    rows = [traj("current_trace", [0, 0, 1], [1, 1], [0, 1], [0, 1]),   # stops at 2, sound
            traj("stale_trace", [0, 1, 1], [1, 1], [1, 1], [1, 1]),     # never (stale)
            traj("unavailable", [0, 1, 1], [1, 1], [1, 1], [1, 1]),     # never (no verdict)
            traj("current_trace_full", [0, 1, 0], [1, 1], [1, 1], [0, 1])]  # stops at 2, unsound
    out = prospective.fresh_replay(rows)
    assert out["fresh_gate_coverage"] == 0.5 and out["self_only_coverage"] == 1.0
    assert out["fresh_gate_sound"] == 1 and out["self_only_sound"] == 3
    assert out["sound_lost_vs_self_only"] == 3 and out["sound_gained_vs_self_only"] == 1
    assert out["mean_revisions_to_stop"] == 2.0


def test_fresh_rollouts_pairs_arms():
    def run(arm, seed, sound, completed, outcome):
        return {"arm": arm, "task_id": "T", "seed": seed, "start": "wrong",
                "sound_completion": sound, "completed": completed, "outcome": outcome,
                "refused_stale": [True, False]}
    rows = [run("baseline", 0, True, True, ["committed"] * 3),
            run("guarded", 0, False, False, ["rejected", "closed", "closed"]),
            run("baseline", 1, False, True, ["committed"] * 3),
            run("guarded", 1, True, True, ["admitted"] * 3)]
    out = prospective.fresh_rollouts(rows)
    assert out["sound_lost"] == 1 and out["sound_gained"] == 1
    assert out["guarded"]["coverage"] == 0.5 and out["baseline"]["coverage"] == 1.0
    assert out["guarded"]["mean_revisions"] == 2.0 and out["stale_refused"] == 2


def test_validity_counts_invalid_classes_and_skips_closed_revisions():
    rows = [{"valid": [True, False, False, True], "why": ["", "done_only", "syntax_error", ""],
             "action": ["patch", "keep", "keep", "none"],
             "load_error": ["NameError", "NameError", "", ""]}]
    v = metrics.validity(rows)
    assert v == {"replies": 3, "valid": 1, "valid_share": round(1 / 3, 6),
                 "invalid": {"done_only": 1, "syntax_error": 1},
                 "actions": {"keep": 2, "patch": 1},
                 "patches_not_loading": {"NameError": 1}}  # a kept state is no patch


def test_the_verifier_intervals_are_bca_and_agree_with_scipy_on_a_mean():
    """The verifier analysis computes BCa from its own task-weight draws (the thresholds are
    re-chosen in every draw, so scipy.stats.bootstrap cannot be called on it); on a plain mean
    over 12 skewed clusters it must agree with scipy's BCa, and differ from the percentile
    interval, which a percentile-only _bca would return."""
    import numpy as np
    from scipy import stats

    from experiments.transition.verifiers import CI_BCA, CI_PERCENTILE, NO_VARIATION, _bca

    x = np.random.default_rng(1).exponential(size=12)
    T = len(x)
    W = np.random.default_rng(2).multinomial(T, [1 / T] * T, size=20_000).astype(float)
    jack = (np.ones((T, T)) - np.eye(T)) @ x / (T - 1)
    ci, method = _bca(W @ x / T, float(x.mean()), jack)
    ref = stats.bootstrap((x,), np.mean, n_resamples=20_000, method="BCa",
                          random_state=3).confidence_interval
    pct = stats.bootstrap((x,), np.mean, n_resamples=20_000, method="percentile",
                          random_state=3).confidence_interval
    assert method == CI_BCA
    assert abs(ci[0] - ref.low) < 0.05 and abs(ci[1] - ref.high) < 0.1
    assert abs(ci[1] - pct.high) > 0.2            # not the percentile interval
    # every draw on one side of the point: BCa undefined, the percentile interval, said so
    ci, method = _bca(np.linspace(1, 2, 100), 0.5, jack)
    assert method == CI_PERCENTILE and ci is not None and ci[0] < ci[1]
    # draws that do not vary: no interval, never [x, x]
    assert _bca(np.full(100, 0.3), 0.3, jack) == (None, NO_VARIATION)
    # draws that differ by rounding noise only (a D of 0 computed two ways): the file would
    # read [-0.0, 0.0], as degenerate as [x, x] (the 1.5B model's run printed it so)
    noise = np.tile([-1e-17, 0.0, 1e-17], 40)
    assert _bca(noise, 0.0, jack) == (None, NO_VARIATION)


def test_no_interval_rounds_to_a_point():
    from experiments import stats

    assert stats.bounds(-1e-17, 1e-17) is None and stats.bounds(0.2, 0.2) is None
    assert stats.bounds(0.1, 0.3) == [0.1, 0.3]
    assert str(stats.bounds(-1e-9, 0.5)) == "[0.0, 0.5]"  # no -0.0 in a result file
    assert stats.bounds(float("nan"), 1.0) is None


def test_every_verifier_interval_names_its_method():
    cs = [cand(t, f"{t}{i}", (i + k) % 3 == 0, i % 2, (i % 4) / 3, ((i + k) % 5) / 4)
          for k, t in enumerate("ABCDEF") for i in range(6 + k)]
    m = verifiers.matched(cs, seed=0, n_boot=500)
    assert "BCa" in m["interval_method"]
    methods = [v["risk_ci_method"] for v in m["verifiers"].values()]
    methods += [d[k] for d in m["dependence"].values() for k in ("D_ci_method", "phi_ci_method")]
    assert verifiers.CI_BCA in methods
    for v in m["verifiers"].values():
        assert (v["risk_ci95"] is None) == (v["risk_ci_method"] == verifiers.NO_VARIATION)
        assert v["risk_ci95"] is None or v["risk_ci95"][0] < v["risk_ci95"][1]
