"""The transition study's six declared contrasts (Holm over all six), each declared once: the
rows on each side, the per-row value compared and, for the guarded-vs-baseline ones, the row field
the report counts per arm (experiments/transition/study.py `analyse` reads both from here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from experiments.stats import paired_contrast, task_means


@dataclass(frozen=True)
class Contrast:
    """One of the six declared contrasts, declared once: its rows on each side, the per-row
    value compared, and the row field that value is (counted per arm in the report), if any."""

    name: str
    a: list[dict]
    b: list[dict]
    value: Callable[[dict], float]
    key: str | None = None

    def test(self, seed: int, n_boot: int, n_flips: int) -> dict[str, Any]:
        """The paired contrast over tasks (the unit), before Holm's adjustment."""
        return paired_contrast(task_means(self.a, self.value), task_means(self.b, self.value),
                               seed=seed, n_boot=n_boot, n_flips=n_flips)


def declared_contrasts(by_cond: dict[str, list[dict]], cs: list[dict], pro: list[dict]
                       ) -> list[Contrast]:
    """The six declared contrasts (Holm over all six), in their declared order."""
    def arm(name: str, start: str | None = None) -> list[dict]:
        return [r for r in pro if r["arm"] == name and (start is None or r["start"] == start)]

    def on(key: str) -> Callable[[dict], float]:
        return lambda r: r[key]

    stale = [r for r in cs if r["condition"] == "stale_trace"]
    current = [r for r in cs if r["condition"] == "current_trace"]
    return [
        Contrast("stale_vs_current_harm", stale, current, on("harm"), "harm"),
        Contrast("current_trace_vs_nonactionable_repair_r1", by_cond["current_trace"],
                 by_cond["nonactionable"], lambda r: r["y"][1]),
        Contrast("guarded_vs_baseline_harm", arm("guarded", "correct"),
                 arm("baseline", "correct"), on("harm"), "harm"),
        Contrast("guarded_vs_baseline_repair", arm("guarded", "wrong"), arm("baseline", "wrong"),
                 on("repair"), "repair"),
        Contrast("guarded_vs_baseline_unsafe_completion", arm("guarded"), arm("baseline"),
                 on("unsafe_completion"), "unsafe_completion"),
        Contrast("guarded_vs_baseline_sound_completion", arm("guarded"), arm("baseline"),
                 on("sound_completion"), "sound_completion"),
    ]
