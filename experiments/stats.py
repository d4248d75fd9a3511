"""Statistics with the task as the inferential unit: seeds are averaged within a task, intervals
come from a task-cluster bootstrap (scipy.stats.bootstrap over tasks), p-values from a paired
sign-flip test (scipy.stats.permutation_test, exact when the flips can be enumerated), and the
declared contrasts are Holm-corrected (statsmodels multipletests)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

N_BOOT = 10_000
N_FLIPS = 100_000


def task_means(rows: Iterable[Mapping[str, Any]], value: Callable[[Mapping[str, Any]], float]
               ) -> dict[str, float]:
    """Per task, the mean of `value(row)` over its rows (its seeds)."""
    acc: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        acc[str(r["task_id"])].append(float(value(r)))
    return {t: float(np.mean(v)) for t, v in sorted(acc.items())}


def paired_contrast(a: Mapping[str, float], b: Mapping[str, float], *, seed: int,
                    n_boot: int = N_BOOT, n_flips: int = N_FLIPS) -> dict[str, Any]:
    """Mean over tasks of a - b, a 95% task-cluster bootstrap interval (percentile) and a two-sided
    paired sign-flip p-value. Only tasks present in both are used."""
    tasks = sorted(set(a) & set(b))
    d = np.array([a[t] - b[t] for t in tasks], dtype=float)
    out: dict[str, Any] = {"tasks": len(tasks)}
    if len(d) == 0:
        return {**out, "difference": None, "ci95": None, "p": None}
    out["difference"] = round(float(d.mean()), 6)
    if len(d) < 2 or np.ptp(d) == 0:
        out["ci95"] = [out["difference"], out["difference"]]
    else:
        boot = stats.bootstrap((d,), np.mean, n_resamples=n_boot, method="percentile",
                               random_state=np.random.default_rng(seed))
        ci = boot.confidence_interval
        out["ci95"] = [round(float(ci.low), 6), round(float(ci.high), 6)]
    if np.all(d == 0) or len(d) < 2:  # one task: both sign flips are as extreme, p = 1
        out["p"] = 1.0
    else:
        perm = stats.permutation_test((d,), np.mean, permutation_type="samples",
                                      n_resamples=n_flips, alternative="two-sided",
                                      random_state=np.random.default_rng(seed + 1))
        out["p"] = round(float(min(1.0, perm.pvalue)), 6)
    return out


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values; a missing p stays missing and is not counted as a contrast."""
    present = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if present:
        _, adj, _, _ = multipletests([pvalues[i] for i in present], method="holm")
        for i, p in zip(present, adj, strict=True):
            out[i] = round(float(p), 6)
    return out


def wilson(k: int, n: int) -> list[float] | None:
    """A 95% Wilson interval for k/n."""
    if n == 0:
        return None
    from statsmodels.stats.proportion import proportion_confint
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return [round(float(lo), 6), round(float(hi), 6)]
