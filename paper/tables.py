"""Every table of the paper and of docs/results.md, each cell a template over results/ keys.

Why cells are templates: a table is then rendered twice (LaTeX, markdown) from one definition,
and every number in it names its key. Tables over a dict in results/ (crash sites, integrity
kinds, obligations, sweep budgets, benchmarks) take their rows from what the file holds, so a
site, a kind or an obligation a helper adds appears without an edit here. A table whose study
was not run renders as one "not run" row, never as an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from paper import fmt, template
from paper.tree import MissingResult, Results


@dataclass(frozen=True)
class Lit:
    """A cell that is text, not a template (names from results/, which may hold braces)."""

    text: str


Cell = str | Lit


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    needs: str = ""            # a file (key prefix) without which the table is "not run"
    widths: list[str] | None = None  # LaTeX column types; default l then r
    long: bool = False         # a longtable with its caption (\setcaption{name}{...}) and label


def _cell_latex(c: Cell, results: Results) -> str:
    if isinstance(c, Lit):
        return fmt.latex_text(c.text)
    out = template.latex(c, results)
    return "--" if out is None else out


def _cell_md(c: Cell, results: Results) -> str:
    if isinstance(c, Lit):
        text = c.text
    else:
        out = template.render(c, results)
        text = "-" if out is None else out
    return text.replace("|", "\\|")


def latex(t: Table, results: Results) -> str:
    cols = t.widths or (["l"] + ["r"] * (len(t.columns) - 1))
    long = t.long
    env = "longtable" if long else "tabular"
    head = " & ".join(fmt.latex_text(c) for c in t.columns) + r" \\"
    out = [f"\\begin{{{env}}}{{@{{}}{''.join(cols)}@{{}}}}"]
    if long:  # the caption is set in the section's text: \setcaption{name}{...}
        out += [f"\\caption{{\\csname lpcap@{t.name}\\endcsname}}\\label{{tab:{t.name}}}"
                r"\\", r"\toprule", head, r"\midrule", r"\endfirsthead",
                r"\caption[]{(continued)}\\", r"\toprule", head, r"\midrule", r"\endhead"]
    else:
        out += [r"\toprule", head, r"\midrule"]
    if t.needs and not results.has(t.needs):
        out.append(f"\\multicolumn{{{len(cols)}}}{{l}}{{\\emph{{not run: results/"
                   f"{fmt.latex_text(t.needs.split('/')[0])}/ is absent}}}} \\\\")
    else:
        for r in t.rows:
            out.append(" & ".join(_cell_latex(c, results) for c in r) + r" \\")
    out += [r"\bottomrule", f"\\end{{{env}}}"]
    return "\n".join(out) + "\n"


def markdown(t: Table, results: Results) -> str:
    out = ["| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    if t.needs and not results.has(t.needs):
        out.append(f"| not run: `results/{t.needs.split('/')[0]}/` is absent |"
                   + " |" * (len(t.columns) - 1))
    else:
        out += ["| " + " | ".join(_cell_md(c, results) for c in r) + " |" for r in t.rows]
    return "\n".join(out) + "\n"


def _keys(results: Results, key: str) -> list[str]:
    try:
        v = results.get(key)
    except MissingResult:
        return []
    if isinstance(v, list) and v and all(isinstance(x, dict) and "id" in x for x in v):
        return [x["id"] for x in v]
    return sorted(v, key=_natural) if isinstance(v, dict) else []


def _natural(k: str) -> tuple:
    return (0, float(k), "") if k.replace(".", "", 1).isdigit() else (1, 0.0, k)


def _pair(key: str) -> str:
    return f"{{{key}/0}}/{{{key}/1}}"


# ---------------------------------------------------------------- one builder per table

def proofs(r: Results) -> Table:
    t = Table("proofs", ["obligation", "expected", "result", "s", "what it states"],
              needs="proofs/proofs", long=True,
              widths=[r">{\raggedright\arraybackslash}p{0.27\linewidth}", "l", "l", "r", r">{\raggedright\arraybackslash}p{0.47\linewidth}"])
    for oid in _keys(r, "proofs/proofs"):
        k = f"proofs/proofs/{oid}"
        t.rows.append([Lit(oid), f"{{{k}/expect}}", f"{{{k}/result}}", f"{{{k}/seconds|f2}}",
                       Lit(str(r.get(f"{k}/statement")) if r.has(f"{k}/statement") else "")])
    return t


def counterexamples(r: Results) -> Table:
    t = Table("counterexamples", ["broken variant", "kind", "steps", "what Z3 found"],
              needs="proofs/proofs", long=True, widths=[r">{\raggedright\arraybackslash}p{0.3\linewidth}", "l", "r",
                                             r">{\raggedright\arraybackslash}p{0.5\linewidth}"])
    for oid in _keys(r, "proofs/proofs"):
        k = f"proofs/proofs/{oid}"
        if not r.has(f"{k}/counterexample/kind"):
            continue
        steps = r.get(f"{k}/counterexample/steps")
        events = [s.get("event") for s in steps if isinstance(s, dict) and s.get("event")]
        note = r.get(f"{k}/counterexample/note") if r.has(f"{k}/counterexample/note") else ""
        t.rows.append([Lit(oid), f"{{{k}/counterexample/kind}}", Lit(str(len(steps))),
                       Lit(f"{', '.join(events)}" + (f" -- {note}" if note else ""))])
    return t


def proof_counts(r: Results) -> Table:
    t = Table("proof_counts", ["guarantee", "obligations", "broken variants", "as expected",
                               "solver seconds"], needs="proofs/counts/obligations")
    for g in _keys(r, "proofs/counts/guarantees"):
        k = f"proofs/counts/guarantees/{g}"
        t.rows.append([Lit(g), f"{{{k}/obligations}}", f"{{{k}/broken_variants}}",
                       f"{{{k}/as_expected}}", f"{{{k}/seconds|f1}}"])
    t.rows.append([Lit("all"), "{proofs/counts/obligations}", "{proofs/counts/broken_variants}",
                   "{proofs/counts/as_expected}", "{proofs/counts/seconds|f1}"])
    return t


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
         "[{growth/summary/contrasts/round_attainment/ci95/0|f2}, "
         "{growth/summary/contrasts/round_attainment/ci95/1|f2}]"),
        ("round growth: GPU-hours to target [95% CI]",
         "{growth/summary/contrasts/round_to_target/difference|f2} "
         "[{growth/summary/contrasts/round_to_target/ci95/0|f2}, "
         "{growth/summary/contrasts/round_to_target/ci95/1|f2}]"),
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
    for s in _keys(r, "crash/summary/by_site"):
        k = f"crash/summary/by_site/{s}"
        t.rows.append([Lit(s), f"{{{k}/cases}}", f"{{{k}/outcome_recovered}}",
                       f"{{{k}/trace_identical}}", f"{{{k}/repeated_calls}}"])
    return t


def integrity_kinds(r: Results) -> Table:
    t = Table("integrity_kinds", ["attack", "trials", "as expected"],
              needs="integrity/summary/by_kind", long=True)
    for s in _keys(r, "integrity/summary/by_kind"):
        k = f"integrity/summary/by_kind/{s}"
        t.rows.append([Lit(s), f"{{{k}/trials}}", f"{{{k}/ok}}"])
    return t


def mutants(r: Results) -> Table:
    t = Table("mutants", ["gates", "tier", "mutants", "destroying", "false accepts",
                          "alpha", "Wilson 95%"], needs="mutants/summary/before")
    for phase, label in (("before", "as shipped"), ("after", "repaired, frozen")):
        for tier in ("tier1", "tier2"):
            k = f"mutants/summary/{phase}/{tier}"
            t.rows.append([Lit(label), Lit(tier[-1]), f"{{{k}/mutants}}", f"{{{k}/destroying}}",
                           f"{{{k}/false_accepts}}", f"{{{k}/alpha|f3}}",
                           f"[{{{k}/wilson95/0|f3}}, {{{k}/wilson95/1|f3}}]"])
    return t


def mutant_flags(r: Results) -> Table:
    t = Table("mutant_flags", ["gates", "vacuous", "self-attesting", "flagged"],
              needs="mutants/summary/before")
    t.rows = [[Lit("as shipped"), "{mutants/summary/before/vacuous}",
               "{mutants/summary/before/self_attesting}", "{mutants/summary/before/flagged}"],
              [Lit("repaired"), "{mutants/summary/after/vacuous}",
               "{mutants/summary/after/self_attesting}", "{mutants/summary/after/flagged_tier1}"]]
    return t


TRANSITION_ROWS: list[tuple[str, str]] = [
    ("tasks x seeds, revisions", "{S/trajectories} trajectories, T = {S/T}"),
    ("current correct, revisions 1-3",
     "{S/current_correct/0|f3}, {S/current_correct/1|f3}, {S/current_correct/2|f3}"),
    ("ever-correct, revisions 1-3",
     "{S/ever_correct/0|f3}, {S/ever_correct/1|f3}, {S/ever_correct/2|f3}"),
    ("lost after found (all conditions)", "{S/lost_after_found_pooled|pct}"),
    ("alpha / beta (current trace)", "{S/alpha/current_trace|f3} / {S/beta/current_trace|f3}"),
    ("harm from correct starts: stale vs current",
     "{S/stale_vs_current_harm/stale/0}/{S/stale_vs_current_harm/stale/1} vs "
     "{S/stale_vs_current_harm/current/0}/{S/stale_vs_current_harm/current/1}"),
    ("  difference [95% CI], Holm p",
     "{S/stale_vs_current_harm/difference|f3} [{S/stale_vs_current_harm/ci95/0|f3}, "
     "{S/stale_vs_current_harm/ci95/1|f3}], {S/stale_vs_current_harm/p_holm|f3}"),
    ("guarded vs baseline: harm from correct starts",
     _pair("S/guarded_vs_baseline/harm_from_correct_starts/guarded") + " vs " +
     _pair("S/guarded_vs_baseline/harm_from_correct_starts/baseline")),
    ("guarded vs baseline: repair from wrong starts",
     _pair("S/guarded_vs_baseline/repair_from_wrong_starts/guarded") + " vs " +
     _pair("S/guarded_vs_baseline/repair_from_wrong_starts/baseline")),
    ("guarded vs baseline: unsafe completion",
     _pair("S/guarded_vs_baseline/unsafe_completion/guarded") + " vs " +
     _pair("S/guarded_vs_baseline/unsafe_completion/baseline")),
    ("guarded vs baseline: sound completion",
     _pair("S/guarded_vs_baseline/sound_completion/guarded") + " vs " +
     _pair("S/guarded_vs_baseline/sound_completion/baseline")),
    ("preregistered joint criterion passes", "{S/preregistered/passes}"),
    ("stopping, self-only: coverage / risk / sound",
     "{S/stopping_replay/self_only/coverage|f3} / {S/stopping_replay/self_only/risk|f3} / "
     "{S/stopping_replay/self_only/sound_completion|f3}"),
    ("stopping, visible gate",
     "{S/stopping_replay/visible_gate/coverage|f3} / {S/stopping_replay/visible_gate/risk|f3} / "
     "{S/stopping_replay/visible_gate/sound_completion|f3}"),
    ("stopping, challenge gate",
     "{S/stopping_replay/challenge_gate/coverage|f3} / "
     "{S/stopping_replay/challenge_gate/risk|f3} / "
     "{S/stopping_replay/challenge_gate/sound_completion|f3}"),
    ("strict freshness: coverage, sound lost",
     "{S/freshness_cost/stopping_replay/fresh_gate_coverage|f3}, "
     "{S/freshness_cost/stopping_replay/sound_lost_vs_self_only}"),
    ("reply validity", "{S/validity/all/valid} of {S/validity/all/replies}"),
]


def examples(r: Results) -> Table:
    """The examples `make reproduce` runs (results/examples/<name>.json, each run's report)."""
    names = sorted(p.stem for p in (r.root / "examples").glob("*.json")
                   if r.has(f"examples/{p.stem}/outcome"))
    t = Table("examples", ["example", "outcome", "attempts", "W", "spend", "B", "W_c"],
              needs=f"examples/{names[0]}/outcome" if names else "examples/pipeline/outcome")
    for name in names:
        k = f"examples/{name}"
        t.rows.append([Lit(name), f"{{{k}/outcome}}", f"{{{k}/attempts_total}}", f"{{{k}/W}}",
                       f"{{{k}/spend/settled|f2}}", f"{{{k}/spend/budget|f2}}", f"{{{k}/W_c|f2}}"])
    return t


AUDIT = "audit/median"


def audit_median(r: Results) -> Table:
    """The audit of examples/median's own gate against the tree it accepted, per tier."""
    t = Table("audit_median", ["tier", "mutants", "destroying", "equivalent", "undetermined",
                               "errors", "false accepts", "alpha", "Wilson upper 95%"],
              needs=f"{AUDIT}/summary/tiers")
    for tier in _keys(r, f"{AUDIT}/summary/tiers"):
        k = f"{AUDIT}/summary/tiers/{tier}"
        t.rows.append([Lit(tier), f"{{{k}/mutants}}", f"{{{k}/destroying}}",
                       f"{{{k}/equivalent}}", f"{{{k}/undetermined}}", f"{{{k}/errors}}",
                       f"{{{k}/false_accepts}}", f"{{{k}/alpha|f3}}",
                       f"{{{k}/alpha_upper95|f3}}"])
    return t


def audit_median_accepts(r: Results) -> Table:
    """Each false accept of that audit with the input on which the differential oracle saw the
    mutant differ from the accepted reference."""
    t = Table("audit_median_accepts", ["mutant", "what the differential oracle found"],
              needs=f"{AUDIT}/gates/0/tiers", long=True,
              widths=[r">{\raggedright\arraybackslash}p{0.25\linewidth}",
                      r">{\raggedright\arraybackslash}p{0.7\linewidth}"])
    for tier in _keys(r, f"{AUDIT}/gates/0/tiers"):
        why = r.get(f"{AUDIT}/gates/0/tiers/{tier}/false_accept_why")
        if isinstance(why, dict):
            t.rows += [[Lit(label), Lit(str(text))] for label, text in
                       sorted(why.items(), key=lambda kv: _natural_label(kv[0]))]
    return t


def _natural_label(label: str) -> tuple:
    head, _, num = label.rpartition("#")
    return (head, int(num)) if num.isdigit() else (label, 0)


def transition(r: Results) -> Table:
    """The search coder beside the local model; the model's column says when it was not run."""
    t = Table("transition", ["figure", "search coder", "local model"],
              needs="transition/summary/scale")
    llm = r.has("transition-llm/summary/scale")
    for label, tmpl in TRANSITION_ROWS:
        t.rows.append([Lit(label), tmpl.replace("{S/", "{transition/summary/"),
                       tmpl.replace("{S/", "{transition-llm/summary/") if llm
                       else Lit("not run")])
    t.rows.append([Lit("scale, seed, coder"),
                   "{transition/summary/scale}, {transition/summary/seed}, "
                   "{transition/summary/coder}",
                   "{transition-llm/summary/scale}, {transition-llm/summary/seed}, "
                   "{transition-llm/summary/coder}" if llm else Lit("not run")])
    return t


def growth_arms(r: Results) -> Table:
    t = Table("growth_arms", ["arm", "runs", "target hits", "GPU-hours to target"],
              needs="growth/summary/arms")
    for a in _keys(r, "growth/summary/arms"):
        k = f"growth/summary/arms/{a}"
        t.rows.append([Lit(a), f"{{{k}/runs}}", f"{{{k}/hits}}",
                       f"{{{k}/restricted_mean_to_target|f2}}"])
    return t


def growth_sweep(r: Results) -> Table:
    t = Table("growth_sweep", ["budget (GPU-hours)", "runs", "target hits", "mean spent",
                               "max prefix excess"], needs="growth/summary/sweep")
    for b in _keys(r, "growth/summary/sweep"):
        k = f"growth/summary/sweep/{b}"
        t.rows.append([Lit(b), f"{{{k}/runs}}", f"{{{k}/hits}}", f"{{{k}/mean_spent|f2}}",
                       f"{{{k}/max_prefix_excess|sci}}"])
    return t


def growth_calibration(r: Results) -> Table:
    """The simulator's calibration on the planner's path (experiments/growth/calibration.py)."""
    t = Table("growth_calibration", ["evaluation", "GPU-hours", "levels merged", "expected rate",
                                     "P(meets target)", "no growth"],
              needs="growth/summary/calibration")
    n = r.get("growth/summary/calibration/@len") if r.has("growth/summary/calibration") else 0
    for i in range(n):
        k = f"growth/summary/calibration/{i}"
        t.rows.append([f"{{{k}/evaluation}}", f"{{{k}/hours|f0}}", f"{{{k}/levels|f0}}",
                       f"{{{k}/expected_rate|f3}}", f"{{{k}/p_meets_target|f4}}",
                       f"{{{k}/expected_rate_no_growth|f3}}"])
    return t


def growth_controls(r: Results) -> Table:
    t = Table("growth_controls", ["planted fault", "caught"],
              needs="growth/summary/negative_controls")
    for c in _keys(r, "growth/summary/negative_controls"):
        t.rows.append([Lit(c), f"{{growth/summary/negative_controls/{c}}}"])
    return t


def bench(r: Results) -> Table:
    """Every scalar figure of bench.json: timings of the reproducing machine, not claims."""
    t = Table("bench", ["benchmark", "figure", "value"], needs="bench/bench", long=True,
              widths=[r">{\raggedright\arraybackslash}p{0.3\linewidth}", r">{\raggedright\arraybackslash}p{0.4\linewidth}", "r"])
    for name in _keys(r, "bench/bench"):
        for fig in _keys(r, f"bench/bench/{name}"):
            k = f"bench/bench/{name}/{fig}"
            v = r.get(k)
            if isinstance(v, bool | int | float) and "{" not in fig and "}" not in fig:
                t.rows.append([Lit(name), Lit(fig), f"{{{k}}}"])
    return t


BUILDERS: dict[str, Callable[[Results], Table]] = {
    "proofs": proofs, "proof_counts": proof_counts, "counterexamples": counterexamples,
    "bounds": summary("bounds"), "crash": summary("crash"), "crash_sites": crash_sites,
    "integrity": summary("integrity"), "integrity_kinds": integrity_kinds,
    "mutants": mutants, "mutant_flags": mutant_flags, "transition": transition,
    "growth": summary("growth"), "growth_arms": growth_arms, "growth_sweep": growth_sweep,
    "growth_controls": growth_controls, "growth_calibration": growth_calibration,
    "bench": bench, "examples": examples,
    "audit_median": audit_median, "audit_median_accepts": audit_median_accepts,
}


def build_all(results: Results) -> dict[str, Table]:
    return {name: b(results) for name, b in BUILDERS.items()}
