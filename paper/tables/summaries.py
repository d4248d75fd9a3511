"""One "figure, value" table per study (bounds, crash, integrity, growth), and the per-site and
per-kind breakdowns of the crash and integrity studies.
"""

from __future__ import annotations

from collections.abc import Callable

from paper.tables.table import Lit, Table, keys
from paper.tree import Results

SUMMARY_ROWS: dict[str, list[tuple[str, str]]] = {
    "bounds": [
        ("explorer: graphs, cases (every DAG up to the explored size)",
         "{bounds/explorer/graphs} graphs, {bounds/explorer/cases} cases"),
        ("explorer: states searched", "{bounds/explorer/states}"),
        ("explorer: cases where the search disagrees with W", "{bounds/explorer/mismatches}"),
        ("random graphs", "{bounds/summary/random_graphs}"),
        ("worst case found equals W", "{bounds/summary/worst_equals_w}"),
        ("worst case found exceeds W", "{bounds/summary/worst_exceeds_w}"),
        ("peer bound looser than W", "{bounds/summary/peer_looser_than_w}"),
        ("peer bound / W: mean, max",
         "{bounds/summary/mean_peer_over_w|f2}, {bounds/summary/max_peer_over_w|f2}"),
    ],
    "crash": [
        ("crash cases (real SIGKILL)", "{crash/summary/cases}"),
        ("outcome recovered", "{crash/summary/outcome_recovered}"),
        ("normalized trace identical", "{crash/summary/trace_identical}"),
        ("cases that repeated a worker call", "{crash/summary/repeated_calls}"),
        ("budget violations at any prefix", "{crash/summary/budget_violations}"),
        ("gate verdicts lost", "{crash/summary/lost_verdicts}"),
    ],
    "integrity": [
        ("attack trials", "{integrity/summary/trials}"),
        ("detected at a verification boundary", "{integrity/summary/detected}"),
        ("full rewrites: undetectable without signing",
         "{integrity/summary/undetectable_without_signing} of {integrity/summary/rewrite_trials}"),
        ("full rewrites: caught with a signed head",
         "{integrity/summary/caught_with_signing} of {integrity/summary/rewrite_trials}"),
        ("torn tails recovered", "{integrity/summary/torn_recovered} of "
                                 "{integrity/summary/torn_trials}"),
    ],
    "growth": [
        ("round growth: attainment difference [95% CI]",
         "{growth/summary/contrasts/round_attainment/difference|f2} "
         "{growth/summary/contrasts/round_attainment/ci95|ci2}"),
        ("round growth: GPU-hours to target [95% CI]",
         "{growth/summary/contrasts/round_to_target/difference|f2} "
         "{growth/summary/contrasts/round_to_target/ci95|ci2}"),
        ("idle growth: attainment difference", "{growth/summary/contrasts/idle_attainment/"
                                               "difference|f2}"),
        ("interaction: attainment difference", "{growth/summary/contrasts/"
                                               "interaction_attainment/difference|f2}"),
        ("accounting: runs within policy", "{growth/summary/accounting/within_policy} of "
                                           "{growth/summary/accounting/runs}"),
        ("accounting: max prefix excess (GPU-hours)",
         "{growth/summary/accounting/max_prefix_excess|sci}"),
        ("accounting: reconciliation error", "{growth/summary/accounting/reconciliation_error"
                                             "|sci}"),
        ("crash: outcome recovered", "{growth/summary/crash/outcome_recovered} of "
                                     "{growth/summary/crash/cases}"),
        ("crash: trace identical", "{growth/summary/crash/trace_identical} of "
                                   "{growth/summary/crash/cases}"),
        ("crash: cases repeating a planner call",
         "{growth/summary/crash/cases_repeating_a_planner_call}"),
        ("crash: repeated planner calls, repeated evaluations",
         "{growth/summary/crash/repeated_planner_calls}, "
         "{growth/summary/crash/repeated_evaluations}"),
        ("crash: within the policy at every prefix", "{growth/summary/crash/within_policy} of "
                                                     "{growth/summary/crash/cases}"),
        ("resource drift: runs within budget", "{growth/summary/drift/within_budget} of "
                                               "{growth/summary/drift/runs}"),
        ("kill switch: stopped at request", "{growth/summary/kill_switch/stopped_at_request} of "
                                            "{growth/summary/kill_switch/cases}"),
        ("output guard: rejected and recorded",
         "{growth/summary/output_guard/rejected_and_recorded} of "
         "{growth/summary/output_guard/cases}"),
    ],
}


def summary(study: str) -> Callable[[Results], Table]:
    def build(r: Results) -> Table:
        t = Table(study, ["figure", "value"], needs=f"{study}/summary/scale")
        t.rows = [[Lit(label), tmpl] for label, tmpl in SUMMARY_ROWS[study]]
        t.rows.append([Lit("scale, seed"), f"{{{study}/summary/scale}}, "
                                           f"{{{study}/summary/seed}}"])
        return t
    return build


def crash_sites(r: Results) -> Table:
    t = Table("crash_sites", ["crash site", "cases", "recovered", "trace identical",
                              "repeated calls"], needs="crash/summary/by_site", long=True)
    for s in keys(r, "crash/summary/by_site"):
        k = f"crash/summary/by_site/{s}"
        t.rows.append([Lit(s), f"{{{k}/cases}}", f"{{{k}/outcome_recovered}}",
                       f"{{{k}/trace_identical}}", f"{{{k}/repeated_calls}}"])
    return t


def integrity_kinds(r: Results) -> Table:
    t = Table("integrity_kinds", ["attack", "trials", "as expected"],
              needs="integrity/summary/by_kind", long=True)
    for s in keys(r, "integrity/summary/by_kind"):
        k = f"integrity/summary/by_kind/{s}"
        t.rows.append([Lit(s), f"{{{k}/trials}}", f"{{{k}/ok}}"])
    return t
