"""Statistics with the cluster (the task, or the gate) as the inferential unit: seeds are averaged
within a cluster, intervals come from a cluster bootstrap (scipy.stats.bootstrap over clusters,
BCa: bias-corrected and accelerated, which covers better than the percentile interval over the
8-30 clusters these studies have), p-values from a paired sign-flip test
(scipy.stats.permutation_test, exact when the flips can be enumerated), and the declared
contrasts are Holm-corrected (statsmodels multipletests).

Never a degenerate interval: when every cluster gives the same value there is nothing to
resample, and the interval is None with `ci_method` "no variation" (the reports print those
words), not [x, x]. When BCa is undefined (its jackknife acceleration needs the leave-one-out
means to vary) the percentile interval is given and `ci_method` says so."""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

N_BOOT = 10_000
N_FLIPS = 100_000


def task_means(rows: Iterable[Mapping[str, Any]], value: Callable[[Mapping[str, Any]], float]
               ) -> dict[str, float]:
    """Per task, the mean of `value(row)` over its rows (its seeds)."""
    acc: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        acc[str(r["task_id"])].append(float(value(r)))
    return {t: float(np.mean(v)) for t, v in sorted(acc.items())}


CI_BCA = "BCa cluster bootstrap"
CI_PERCENTILE = "percentile cluster bootstrap (BCa undefined here)"
NO_VARIATION = "no variation"


def bounds(lo: float, hi: float) -> list[float] | None:
    """[lo, hi] at the 6 decimals the result files keep, or None when that is not an interval:
    a bootstrap whose draws differ by rounding noise (-1e-17 against 1e-17) rounds to [-0.0, 0.0],
    which is as degenerate as [x, x]."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    r_lo, r_hi = round(float(lo), 6) + 0.0, round(float(hi), 6) + 0.0  # + 0.0: no -0.0
    return [r_lo, r_hi] if r_hi > r_lo else None


def _scipy_stats() -> Any:
    """scipy.stats, imported on first use: its import (with statsmodels's) is ~2 CPU-s, paid by
    the study that computes an interval, not by every process that imports a study's module."""
    from scipy import stats

    return stats


def interval(values: Sequence[float], *, seed: int, n_boot: int = N_BOOT) -> dict[str, Any]:
    """A 95% bootstrap interval for the mean of one value per cluster: {"ci95": [lo, hi] or None,
    "ci_method": CI_BCA, CI_PERCENTILE or NO_VARIATION}."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        return {"ci95": None, "ci_method": NO_VARIATION}
    for method, name in (("BCa", CI_BCA), ("percentile", CI_PERCENTILE)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy's DegenerateDataWarning: handled below
            ci = _scipy_stats().bootstrap((x,), np.mean, n_resamples=n_boot, method=method,
                                 random_state=np.random.default_rng(seed)).confidence_interval
        if (b := bounds(float(ci.low), float(ci.high))) is not None:
            return {"ci95": b, "ci_method": name}
    return {"ci95": None, "ci_method": NO_VARIATION}


def percentile_interval(values: Sequence[float], *, seed: int, n_boot: int = N_BOOT
                        ) -> list[float] | None:
    """The 95% percentile cluster-bootstrap interval (None when the clusters do not vary)."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        return None
    ci = _scipy_stats().bootstrap((x,), np.mean, n_resamples=n_boot, method="percentile",
                         random_state=np.random.default_rng(seed)).confidence_interval
    return bounds(float(ci.low), float(ci.high))


def cluster_mean(per_cluster: Mapping[str, float], *, seed: int, n_boot: int = N_BOOT
                 ) -> dict[str, Any]:
    """The mean over clusters of a per-cluster rate, with its cluster bootstrap interval (where a
    pooled Wilson interval would treat correlated runs of one task as independent)."""
    x = [per_cluster[k] for k in sorted(per_cluster)]
    if not x:
        return {"mean": None, "clusters": 0, "ci95": None, "ci_method": NO_VARIATION}
    return {"mean": round(float(np.mean(x)), 6), "clusters": len(x),
            **interval(x, seed=seed, n_boot=n_boot)}


def paired_contrast(a: Mapping[str, float], b: Mapping[str, float], *, seed: int,
                    n_boot: int = N_BOOT, n_flips: int = N_FLIPS) -> dict[str, Any]:
    """Mean over tasks of a - b, a 95% task-cluster bootstrap interval (`interval`: BCa, or "no
    variation" when every task's difference is the same) and a two-sided paired sign-flip
    p-value. Only tasks present in both are used."""
    tasks = sorted(set(a) & set(b))
    d = np.array([a[t] - b[t] for t in tasks], dtype=float)
    out: dict[str, Any] = {"tasks": len(tasks)}
    if len(d) == 0:
        return {**out, "difference": None, "ci95": None, "ci_method": NO_VARIATION,
                "ci95_percentile": None, "p": None}
    out["difference"] = round(float(d.mean()), 6)
    out.update(interval(d, seed=seed, n_boot=n_boot))
    # the percentile interval as well: the pre-specified criterion of the transition study was
    # fixed when the intervals were percentile ones, and it is judged on those
    out["ci95_percentile"] = percentile_interval(d, seed=seed, n_boot=n_boot)
    if np.all(d == 0) or len(d) < 2:  # one task: both sign flips are as extreme, p = 1
        out["p"] = 1.0
    else:
        perm = _scipy_stats().permutation_test((d,), np.mean, permutation_type="samples",
                                      n_resamples=n_flips, alternative="two-sided",
                                      random_state=np.random.default_rng(seed + 1))
        out["p"] = round(float(min(1.0, perm.pvalue)), 6)
    return out


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values; a missing p stays missing and is not counted as a contrast."""
    present = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if present:
        from statsmodels.stats.multitest import multipletests

        _, adj, _, _ = multipletests([pvalues[i] for i in present], method="holm")
        for i, p in zip(present, adj, strict=True):
            out[i] = round(float(p), 6)
    return out


def wilson(k: int, n: int) -> list[float] | None:
    """A 95% Wilson interval for k/n, for counts of independent trials only; a rate over
    clustered runs gets `cluster_mean`. statsmodels' figures in closed form (the audit report's
    `wilson_score`): importing statsmodels for it cost each notebook's kernel ~3 CPU-s."""
    if n == 0:
        return None
    from loopproof.engine.audit.report import wilson_score

    lo, hi = wilson_score(k, n)
    return [round(lo, 6), round(hi, 6)]
