"""The transition study: the search coder beside the local model, one row per figure.
"""

from __future__ import annotations

from paper.tables.table import Lit, Table
from paper.tree import Results


def _pair(key: str) -> str:
    return f"{{{key}/0}}/{{{key}/1}}"


TRANSITION_ROWS: list[tuple[str, str]] = [
    ("tasks x seeds, revisions", "{S/trajectories} trajectories, T = {S/T}"),
    ("current correct, by revision", "{S/current_correct|list3}"),
    ("ever-correct, by revision", "{S/ever_correct|list3}"),
    ("lost after found (all conditions)", "{S/lost_after_found_pooled|pct}"),
    ("alpha / beta (current trace)", "{S/alpha/current_trace|f3} / {S/beta/current_trace|f3}"),
    ("harm from correct starts: stale vs current",
     "{S/stale_vs_current_harm/stale/0}/{S/stale_vs_current_harm/stale/1} vs "
     "{S/stale_vs_current_harm/current/0}/{S/stale_vs_current_harm/current/1}"),
    ("  difference [95% CI], Holm p",
     "{S/stale_vs_current_harm/difference|f3} {S/stale_vs_current_harm/ci95|ci3}, "
     "{S/stale_vs_current_harm/p_holm|f3}"),
    ("guarded vs baseline: harm from correct starts",
     _pair("S/guarded_vs_baseline/harm_from_correct_starts/guarded") + " vs " +
     _pair("S/guarded_vs_baseline/harm_from_correct_starts/baseline") +
     "; {S/guarded_vs_baseline/harm_from_correct_starts/difference|f3} "
     "{S/guarded_vs_baseline/harm_from_correct_starts/ci95|ci3}"),
    ("guarded vs baseline: repair from wrong starts",
     _pair("S/guarded_vs_baseline/repair_from_wrong_starts/guarded") + " vs " +
     _pair("S/guarded_vs_baseline/repair_from_wrong_starts/baseline") +
     "; {S/guarded_vs_baseline/repair_from_wrong_starts/difference|f3} "
     "{S/guarded_vs_baseline/repair_from_wrong_starts/ci95|ci3}"),
    ("guarded vs baseline: unsafe completion",
     _pair("S/guarded_vs_baseline/unsafe_completion/guarded") + " vs " +
     _pair("S/guarded_vs_baseline/unsafe_completion/baseline") +
     "; {S/guarded_vs_baseline/unsafe_completion/difference|f3} "
     "{S/guarded_vs_baseline/unsafe_completion/ci95|ci3}"),
    ("guarded vs baseline: sound completion",
     _pair("S/guarded_vs_baseline/sound_completion/guarded") + " vs " +
     _pair("S/guarded_vs_baseline/sound_completion/baseline") +
     "; {S/guarded_vs_baseline/sound_completion/difference|f3} "
     "{S/guarded_vs_baseline/sound_completion/ci95|ci3}"),
    ("pre-specified joint criterion passes", "{S/pre_specified/passes}"),
    ("  the same on BCa intervals (sensitivity)", "{S/pre_specified_on_bca/passes}"),
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


def transition(r: Results) -> Table:
    """The search coder beside the local model; the model's column says when it was not run. The
    search coder at paper scale (results/transition-paper) is a column of its own when kept."""
    paper = r.has("transition-paper/summary/scale")
    columns = ["figure", "search coder", *(["search coder, paper scale"] if paper else []),
               "local model"]
    # wrapped columns: an interval per cell in four columns is wider than the page
    ragged = r">{\raggedright\arraybackslash}p{%.2f\linewidth}"
    widths = [ragged % 0.19] + [ragged % (0.69 / (len(columns) - 1))] * (len(columns) - 1)
    t = Table("transition", columns, needs="transition/summary/scale", widths=widths)
    llm = r.has("transition-llm/summary/scale")
    for label, tmpl in TRANSITION_ROWS:
        t.rows.append([Lit(label), tmpl.replace("{S/", "{transition/summary/"),
                       *([tmpl.replace("{S/", "{transition-paper/summary/")] if paper else []),
                       tmpl.replace("{S/", "{transition-llm/summary/") if llm
                       else Lit("not run")])
    t.rows.append([Lit("scale, seed, coder"),
                   "{transition/summary/scale}, {transition/summary/seed}, "
                   "{transition/summary/coder}",
                   *(["{transition-paper/summary/scale}, {transition-paper/summary/seed}, "
                      "{transition-paper/summary/coder}"] if paper else []),
                   "{transition-llm/summary/scale}, {transition-llm/summary/seed}, "
                   "{transition-llm/summary/coder}" if llm else Lit("not run")])
    return t
