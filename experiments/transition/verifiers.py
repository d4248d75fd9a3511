"""The verifier analysis of the paper, over the revision distribution of the trajectories: each
verifier's selective risk at a matched coverage, and the dependence of false acceptances among
incorrect candidates (phi and the excess joint false acceptance D_ij), with BCa task-cluster
bootstrap intervals; and the same over unique (task, code hash) candidates.

Why matched coverage: a verifier that accepts less looks safer; comparing risks at one coverage
(70%, as in the paper) removes that. The verifiers here have graded scores: the self-report
(1 when the coder says done, else 0), and the share of visible and of challenge assertions a
candidate passes. At a coverage c, a verifier accepts every candidate scoring above a threshold
and, at the threshold itself, the fraction of tied candidates that makes the coverage exactly c
(randomized tie-breaking, taken in expectation so the result is deterministic). Two verifiers
break ties independently, so their joint acceptance of a candidate is the product of their
acceptance probabilities.

Why among incorrect candidates: an AND of two verifiers falsely accepts with probability
f_i f_j + D_ij, so the product-of-errors argument needs D_ij = 0; phi is D_ij over the product of
the two acceptances' standard deviations.

Why two units: the revision distribution repeats candidates (a coder often keeps or returns to
the same code), so one candidate's verdict is counted many times. The unique level counts each
(task, code hash) once; its self-report score is the share of its revisions whose coder said done.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from experiments.stats import bounds

VERIFIERS = ("self", "visible", "challenge")
SCORES = {"self": "self", "visible": "visible_share", "challenge": "challenge_share"}
COVERAGE = 0.70


def candidates(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every revised state of every trajectory: task, code hash, correctness, verifier scores."""
    out = []
    for r in rows:
        for t in range(1, len(r["y"])):
            out.append({"task": str(r["task_id"]), "state": r["state"][t - 1],
                        "y": bool(r["y"][t]), "self": float(bool(r["self"][t - 1])),
                        "visible": float(r["visible_share"][t - 1]),
                        "challenge": float(r["challenge_share"][t - 1])})
    return out


def unique(cands: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One candidate per (task, code hash); the self-report score averages its revisions."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for c in cands:
        groups[(c["task"], c["state"])].append(c)
    out = []
    for (task, state), cs in sorted(groups.items()):
        first = cs[0]
        out.append({"task": task, "state": state, "y": first["y"],
                    "self": round(sum(c["self"] for c in cs) / len(cs), 6),
                    "visible": first["visible"], "challenge": first["challenge"]})
    return out


class _Tables:
    """Per task: candidate and incorrect-candidate counts by score level of each verifier, and
    incorrect-candidate counts by the joint levels of each pair. Every statistic below is a
    function of task weights (all ones for the sample, multinomial counts for a bootstrap draw)."""

    def __init__(self, cands: Sequence[Mapping[str, Any]]) -> None:
        self.tasks = sorted({c["task"] for c in cands})
        index = {t: i for i, t in enumerate(self.tasks)}
        self.levels = {v: np.array(sorted({c[v] for c in cands}, reverse=True)) for v in VERIFIERS}
        lvl = {v: {x: i for i, x in enumerate(self.levels[v])} for v in VERIFIERS}
        T = len(self.tasks)
        self.n = {v: np.zeros((T, len(self.levels[v]))) for v in VERIFIERS}
        self.wrong = {v: np.zeros((T, len(self.levels[v]))) for v in VERIFIERS}
        self.joint = {(a, b): np.zeros((T, len(self.levels[a]), len(self.levels[b])))
                      for a, b in combinations(VERIFIERS, 2)}
        for c in cands:
            t = index[c["task"]]
            for v in VERIFIERS:
                self.n[v][t, lvl[v][c[v]]] += 1
                if not c["y"]:
                    self.wrong[v][t, lvl[v][c[v]]] += 1
            if not c["y"]:
                for a, b in self.joint:
                    self.joint[(a, b)][t, lvl[a][c[a]], lvl[b][c[b]]] += 1


def _accept(counts: np.ndarray, coverage: float) -> np.ndarray:
    """Acceptance probability per score level (levels high to low) that accepts exactly
    `coverage` of the candidates: 1 above the threshold level, a fraction at it, 0 below.
    `counts` is (draws, levels); the result has the same shape."""
    total = counts.sum(axis=1, keepdims=True)
    target = coverage * total
    above = np.cumsum(counts, axis=1) - counts
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.clip((target - above) / counts, 0.0, 1.0)
    return np.where(counts > 0, frac, np.where(above < target, 1.0, 0.0))


def _stats(tab: _Tables, weights: np.ndarray, coverage: float) -> dict[str, np.ndarray]:
    """Risk per verifier, and f_i, joint, D, phi per pair, for each row of task weights."""
    out: dict[str, np.ndarray] = {}
    acc = {}
    for v in VERIFIERS:
        n = weights @ tab.n[v]
        w = weights @ tab.wrong[v]
        a = _accept(n, coverage)
        acc[v] = a
        accepted = (a * n).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"risk:{v}"] = (a * w).sum(axis=1) / accepted
            m = w.sum(axis=1)
            out[f"false_accept:{v}"] = (a * w).sum(axis=1) / m
    for a_, b_ in tab.joint:
        j = np.einsum("dt,tij->dij", weights, tab.joint[(a_, b_)])
        m = j.sum(axis=(1, 2))
        joint = np.einsum("di,dij,dj->d", acc[a_], j, acc[b_])
        with np.errstate(divide="ignore", invalid="ignore"):
            joint = joint / m
            fi, fj = out[f"false_accept:{a_}"], out[f"false_accept:{b_}"]
            d = joint - fi * fj
            phi = d / np.sqrt(fi * (1 - fi) * fj * (1 - fj))
        key = f"{a_}~{b_}"
        out[f"joint:{key}"], out[f"D:{key}"], out[f"phi:{key}"] = joint, d, phi
    return out


def _r(x: float) -> float | None:
    return None if not np.isfinite(x) else round(float(x), 6)


def _ci(draws: np.ndarray) -> list[float | None] | None:
    """The percentile interval of the task-cluster draws; None (reported as "no variation") when
    the draws do not vary, never a degenerate [x, x]."""
    ok = draws[np.isfinite(draws)]
    if len(ok) < 2:
        return None
    lo, hi = np.percentile(ok, [2.5, 97.5])
    return bounds(lo, hi)


CI_BCA = "BCa task-cluster bootstrap"
CI_PERCENTILE = "percentile task-cluster bootstrap (BCa undefined here)"
NO_VARIATION = "no variation"


def _bca(draws: np.ndarray, point: float, jack: np.ndarray) -> tuple[list | None, str]:
    """The 95% BCa interval from the bootstrap draws, the point estimate and the leave-one-task-
    out estimates (Efron's bias correction z0 and jackknife acceleration a, as scipy.stats
    computes them); the percentile interval where BCa is undefined (z0 infinite: every draw on
    one side of the point; a undefined: the leave-one-out values do not vary); None, "no
    variation", when the draws do not vary. Why: with 5-30 task clusters the percentile
    interval under-covers, and the counts behind these rates are small."""
    ok = draws[np.isfinite(draws)]
    if len(ok) < 2 or not np.ptp(ok) > 0 or not np.isfinite(point):
        return None, NO_VARIATION
    jk = jack[np.isfinite(jack)]
    below = np.mean(ok < point)
    if len(jk) == len(jack) and np.ptp(jk) > 0 and 0 < below < 1:
        from scipy.stats import norm  # on first use: scipy.stats's import is ~2 CPU-s

        z0 = norm.ppf(below)
        d = jk.mean() - jk
        a = (d ** 3).sum() / (6.0 * ((d ** 2).sum()) ** 1.5)
        z = norm.ppf([0.025, 0.975])
        q = norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
        if np.all(np.isfinite(q)):
            lo, hi = np.percentile(ok, 100 * q)
            if (b := bounds(lo, hi)) is not None:
                return b, CI_BCA
    ci = _ci(draws)
    return (ci, CI_PERCENTILE) if ci is not None else (None, NO_VARIATION)


CURVE = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def held_out(cands: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Thresholds chosen on one half of the tasks and applied to the other (two folds: the tasks
    at even and at odd positions in sorted order, each fold's thresholds applied to the other,
    the held-out counts added up): per verifier, the risk-coverage curve at CURVE's target
    coverages, as achieved on held-out tasks. Why: a threshold chosen on the candidates it is
    judged on fits their ties; a held-out one says what the verifier does on tasks it was not
    tuned on. None with fewer than two tasks."""
    tab = _Tables(cands)
    T = len(tab.tasks)
    if T < 2:
        return None
    folds = [np.array([i % 2 == k for i in range(T)], dtype=float) for k in (0, 1)]
    curves: dict[str, list[dict[str, Any]]] = {}
    for v in VERIFIERS:
        points = []
        for c in CURVE:
            accepted = wrong = total = 0.0
            for tune, judge in ((folds[0], folds[1]), (folds[1], folds[0])):
                a = _accept((tune @ tab.n[v])[None, :], c)[0]
                accepted += float(a @ (judge @ tab.n[v]))
                wrong += float(a @ (judge @ tab.wrong[v]))
                total += float((judge @ tab.n[v]).sum())
            points.append({"target": c, "coverage": _r(accepted / total) if total else None,
                           "risk": _r(wrong / accepted) if accepted else None})
        curves[v] = points
    return {"folds": "tasks at even / odd positions (sorted); each fold's thresholds judged on "
                     "the other", "tasks": T, "risk_coverage": curves}


def matched(cands: Sequence[Mapping[str, Any]], *, seed: int, n_boot: int,
            coverage: float = COVERAGE) -> dict[str, Any]:
    """Risk at matched coverage per verifier; false acceptance, joint, D_ij and phi per pair among
    incorrect candidates (only when there are correct and incorrect candidates:
    `dependence_undefined` says which side is missing); each with a 95% task-cluster bootstrap
    interval (BCa over multinomial task weights, percentile where BCa is undefined, None when the
    draws do not vary: `*_ci_method` says which); and the
    held-out risk-coverage curve (`held_out`)."""
    out: dict[str, Any] = {"coverage": coverage, "candidates": len(cands),
                           "incorrect": sum(not c["y"] for c in cands), "verifiers": {},
                           "dependence": {}, "n_boot": n_boot}
    if not cands:
        return out
    tab = _Tables(cands)
    point = _stats(tab, np.ones((1, len(tab.tasks))), coverage)
    rng = np.random.default_rng(seed)
    T = len(tab.tasks)
    draws = _stats(tab, rng.multinomial(T, [1.0 / T] * T, size=n_boot).astype(float), coverage)
    jack = _stats(tab, np.ones((T, T)) - np.eye(T), coverage)  # each task left out once

    def ci(name: str) -> tuple[list | None, str]:
        return _bca(draws[name], float(point[name][0]), jack[name])

    out["tasks"] = T
    out["interval_method"] = (f"{CI_BCA} (tasks resampled with replacement, thresholds re-chosen "
                              "in every draw); percentile where BCa is undefined; per interval in "
                              "its *_ci_method")
    out["held_out"] = held_out(cands)
    for v in VERIFIERS:
        risk_ci, risk_method = ci(f"risk:{v}")
        out["verifiers"][v] = {
            "risk": _r(point[f"risk:{v}"][0]), "risk_ci95": risk_ci,
            "risk_ci_method": risk_method,
            "false_accept": _r(point[f"false_accept:{v}"][0])}
    correct = len(cands) - out["incorrect"]
    if not correct or not out["incorrect"]:  # D needs correct and incorrect candidates
        out["dependence_undefined"] = ("no correct candidate" if not correct else
                                       "no incorrect candidate")
        return out
    for a, b in combinations(VERIFIERS, 2):
        key = f"{a}~{b}"
        d_ci, d_method = ci(f"D:{key}")
        phi_ci, phi_method = ci(f"phi:{key}")
        out["dependence"][key] = {
            "joint": _r(point[f"joint:{key}"][0]),
            "D": _r(point[f"D:{key}"][0]), "D_ci95": d_ci, "D_ci_method": d_method,
            "phi": _r(point[f"phi:{key}"][0]), "phi_ci95": phi_ci, "phi_ci_method": phi_method}
    return out


def analysis(rows: Sequence[Mapping[str, Any]], *, seed: int, n_boot: int) -> dict[str, Any]:
    """The matched-coverage analysis at the revision level and at the unique (task, code) level."""
    cands = candidates(rows)
    return {"revisions": matched(cands, seed=seed, n_boot=n_boot),
            "unique_task_code": matched(unique(cands), seed=seed, n_boot=n_boot)}
