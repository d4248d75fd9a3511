"""The growth study: per arm, per budget of the sweep, the calibration and the negative controls.
"""

from __future__ import annotations

from paper.tables.table import Lit, Table, keys
from paper.tree import Results


def growth_arms(r: Results) -> Table:
    t = Table("growth_arms", ["arm", "runs", "target hits", "GPU-hours to target"],
              needs="growth/summary/arms")
    for a in keys(r, "growth/summary/arms"):
        k = f"growth/summary/arms/{a}"
        t.rows.append([Lit(a), f"{{{k}/runs}}", f"{{{k}/hits}}",
                       f"{{{k}/restricted_mean_to_target|f2}}"])
    return t


def growth_sweep(r: Results) -> Table:
    t = Table("growth_sweep", ["budget (GPU-hours)", "runs", "target hits", "mean spent",
                               "max prefix excess"], needs="growth/summary/sweep")
    for b in keys(r, "growth/summary/sweep"):
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
    for c in keys(r, "growth/summary/negative_controls"):
        t.rows.append([Lit(c), f"{{growth/summary/negative_controls/{c}}}"])
    return t
