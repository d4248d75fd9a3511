"""The gate instrument's tables: the mutants study (false accepts per tier, vacuous and
self-attesting gates) and the audit of examples/median's own gate.
"""

from __future__ import annotations

from paper.tables.table import Lit, Table, keys
from paper.tree import Results


def mutants(r: Results) -> Table:
    """Per phase and tier: the pooled rate with its Wilson interval (every mutant an independent
    trial) beside the mean of the per-gate rates with a BCa bootstrap over gates (the gate is
    the cluster: a gate's mutants share its blind spots)."""
    t = Table("mutants", ["gates", "tier", "mutants", "destroying", "false accepts",
                          "alpha", "Wilson 95% (pooled)", "mean over gates, BCa 95%"],
              needs="mutants/summary/before")
    for phase, label in (("before", "as shipped"), ("after", "repaired, frozen")):
        for tier in ("tier1", "tier2"):
            k = f"mutants/summary/{phase}/{tier}"
            t.rows.append([Lit(label), Lit(tier[-1]), f"{{{k}/mutants}}", f"{{{k}/destroying}}",
                           f"{{{k}/false_accepts}}", f"{{{k}/alpha|f3}}",
                           f"[{{{k}/wilson95/0|f3}}, {{{k}/wilson95/1|f3}}]",
                           f"{{{k}/by_gate/mean|f3}} {{{k}/by_gate/ci95|ci3}}"])
    return t


def mutant_flags(r: Results) -> Table:
    t = Table("mutant_flags", ["gates", "vacuous", "self-attesting", "flagged"],
              needs="mutants/summary/before")
    t.rows = [[Lit("as shipped"), "{mutants/summary/before/vacuous}",
               "{mutants/summary/before/self_attesting}", "{mutants/summary/before/flagged}"],
              [Lit("repaired"), "{mutants/summary/after/vacuous}",
               "{mutants/summary/after/self_attesting}", "{mutants/summary/after/flagged_tier1}"]]
    return t


AUDIT = "audit/median"


def audit_median(r: Results) -> Table:
    """The audit of examples/median's own gate against the tree it accepted, per tier."""
    t = Table("audit_median", ["tier", "mutants", "destroying", "equivalent", "undetermined",
                               "errors", "false accepts", "alpha", "Wilson upper 95%"],
              needs=f"{AUDIT}/summary/tiers")
    for tier in keys(r, f"{AUDIT}/summary/tiers"):
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
    for tier in keys(r, f"{AUDIT}/gates/0/tiers"):
        why = r.get(f"{AUDIT}/gates/0/tiers/{tier}/false_accept_why")
        if isinstance(why, dict):
            t.rows += [[Lit(label), Lit(str(text))] for label, text in
                       sorted(why.items(), key=lambda kv: _natural_label(kv[0]))]
    return t


def _natural_label(label: str) -> tuple:
    head, _, num = label.rpartition("#")
    return (head, int(num)) if num.isdigit() else (label, 0)
