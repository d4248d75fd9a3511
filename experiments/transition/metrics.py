"""Transition metrics over trajectories (the paper's decomposition), as plain functions of rows.

A trajectory row holds `y` (executable correctness of the start and of the state after each
revision: y[0], y[1], ..., y[T]) and, per revision t >= 1, what each verifier said about the
state it produced: `self` (the coder's self-report), `visible`, `challenge` (each suite alone).

Why transitions: pass@k and ever-correct treat correctness as absorbing. The rates
alpha = P(Y_t+1 = 1 | Y_t = 0) and beta = P(Y_t+1 = 0 | Y_t = 1) give
q_t+1 - q_t = (1 - q_t) alpha - q_t beta, so continuing has a negative expected change once
q_t > alpha / (alpha + beta).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]
VERIFIERS = ("self", "visible", "challenge")
STOPPING_RULES = {"self_only": ("self",), "visible_gate": ("visible",),
                  "challenge_gate": ("visible", "challenge")}


def ratio(k: int, n: int) -> float | None:
    return None if n == 0 else round(k / n, 6)


def current_correct(rows: Sequence[Row]) -> list[float | None]:
    """q_t: the share of trajectories whose state after revision t is correct, t = 1..T."""
    if not rows:
        return []
    T = len(rows[0]["y"]) - 1
    return [ratio(sum(bool(r["y"][t]) for r in rows), len(rows)) for t in range(1, T + 1)]


def ever_correct(rows: Sequence[Row]) -> list[float | None]:
    """The share of trajectories that have been correct at some revision 1..t."""
    if not rows:
        return []
    T = len(rows[0]["y"]) - 1
    return [ratio(sum(any(r["y"][1:t + 1]) for r in rows), len(rows)) for t in range(1, T + 1)]


def transitions(rows: Iterable[Row], revision: int | None = None) -> dict[str, list[int]]:
    """Counts behind alpha and beta: {"alpha": [wrong->correct, from wrong], "beta":
    [correct->wrong, from correct]} over every revision (or only revision `revision`)."""
    a = [0, 0]
    b = [0, 0]
    for r in rows:
        y = r["y"]
        steps = range(1, len(y)) if revision is None else [revision]
        for t in steps:
            if y[t - 1]:
                b[1] += 1
                b[0] += int(not y[t])
            else:
                a[1] += 1
                a[0] += int(bool(y[t]))
    return {"alpha": a, "beta": b}


def expected_change(q: float, alpha: float, beta: float) -> float:
    """q_t+1 - q_t = (1 - q) alpha - q beta."""
    return (1 - q) * alpha - q * beta


def continuation_harmful(q: float, alpha: float, beta: float) -> bool:
    """The stop criterion: q > alpha / (alpha + beta) (never true when alpha + beta = 0)."""
    return alpha + beta > 0 and q > alpha / (alpha + beta)


def lost_after_found(rows: Sequence[Row]) -> float | None:
    """The share of trajectories that were correct at some revision and are wrong at the last."""
    lost = sum(any(r["y"][1:]) and not r["y"][-1] for r in rows)
    return ratio(lost, len(rows))


def condition_table(rows: Sequence[Row]) -> dict[str, Any]:
    """Per revision: q_t, ever-correct, alpha_t, beta_t; pooled alpha and beta; per revision the
    expected change from q_{t-1} with the pooled rates, and whether continuing was harmful."""
    T = len(rows[0]["y"]) - 1 if rows else 0
    pooled = transitions(rows)
    alpha, beta = ratio(*pooled["alpha"]), ratio(*pooled["beta"])
    q = current_correct(rows)
    q_prev = [ratio(sum(bool(r["y"][0]) for r in rows), len(rows)), *q[:-1]] if rows else []
    per_t = [transitions(rows, t) for t in range(1, T + 1)]
    out: dict[str, Any] = {
        "trajectories": len(rows), "current_correct": q, "ever_correct": ever_correct(rows),
        "alpha": alpha, "beta": beta, "alpha_counts": pooled["alpha"],
        "beta_counts": pooled["beta"],
        "alpha_by_revision": [ratio(*c["alpha"]) for c in per_t],
        "beta_by_revision": [ratio(*c["beta"]) for c in per_t],
        "lost_after_found": lost_after_found(rows),
    }
    if alpha is not None and beta is not None:
        out["expected_change"] = [round(expected_change(p, alpha, beta), 6) for p in q_prev]
        out["continuation_harmful"] = [continuation_harmful(p, alpha, beta) for p in q_prev]
        out["stop_threshold"] = round(alpha / (alpha + beta), 6) if alpha + beta > 0 else None
    return out


def candidates(rows: Iterable[Row]) -> list[dict[str, bool]]:
    """Every revised state with its correctness and verifier outcomes (the revision distribution)."""
    out = []
    for r in rows:
        for t in range(1, len(r["y"])):
            out.append({"y": bool(r["y"][t]), **{v: bool(r[v][t - 1]) for v in VERIFIERS}})
    return out


def verifier_table(rows: Iterable[Row]) -> dict[str, Any]:
    """Per verifier: coverage P(A=1) and selective risk P(Y=0 | A=1) over revised states; per pair,
    D_ij = P(A_i A_j | Y=0) - P(A_i | Y=0) P(A_j | Y=0) among incorrect candidates."""
    cands = candidates(rows)
    n = len(cands)
    wrong = [c for c in cands if not c["y"]]
    table: dict[str, Any] = {"candidates": n, "incorrect": len(wrong), "verifiers": {},
                             "dependence": {}}
    for v in VERIFIERS:
        acc = [c for c in cands if c[v]]
        table["verifiers"][v] = {
            "coverage": ratio(len(acc), n), "risk": ratio(sum(not c["y"] for c in acc), len(acc)),
            "false_accept": ratio(sum(c[v] for c in wrong), len(wrong))}
    for i, vi in enumerate(VERIFIERS):
        for vj in VERIFIERS[i + 1:]:
            key = f"{vi}~{vj}"
            if not wrong:
                table["dependence"][key] = {"D": None, "joint": None}
                continue
            m = len(wrong)
            fi = sum(c[vi] for c in wrong) / m
            fj = sum(c[vj] for c in wrong) / m
            joint = sum(c[vi] and c[vj] for c in wrong) / m
            table["dependence"][key] = {"D": round(joint - fi * fj, 6), "joint": round(joint, 6)}
    return table


def stopping_replay(rows: Sequence[Row]) -> dict[str, Any]:
    """Replay each fixed trajectory under a stopping rule: stop at the first revision whose state
    every verifier of the rule accepts. Coverage = share that stopped, risk = P(Y=0 | stopped),
    sound completion = P(stopped and Y=1) over all trajectories."""
    out: dict[str, Any] = {}
    for rule, verifiers in STOPPING_RULES.items():
        stopped = unsafe = 0
        for r in rows:
            for t in range(1, len(r["y"])):
                if all(r[v][t - 1] for v in verifiers):
                    stopped += 1
                    unsafe += int(not r["y"][t])
                    break
        out[rule] = {"coverage": ratio(stopped, len(rows)), "risk": ratio(unsafe, stopped),
                     "sound_completion": ratio(stopped - unsafe, len(rows)),
                     "stopped": stopped, "unsafe": unsafe, "n": len(rows)}
    return out


def validity(rows: Iterable[Row]) -> dict[str, Any]:
    """Replies and what became of them: how many were valid actions, why the others were mapped
    to Keep (engine.admission.actions fails closed), the actions taken, and the patches whose
    module does not even load (by exception; trajectory rows only). A malformed or
    DONE-only reply is a finding, not noise: it is a revision that silently did nothing."""
    replies = valid = 0
    why: dict[str, int] = {}
    actions: dict[str, int] = {}
    not_loading: dict[str, int] = {}
    for r in rows:
        for a, err in zip(r["action"], r.get("load_error", []), strict=False):
            if a == "patch" and err:
                not_loading[err] = not_loading.get(err, 0) + 1
        for ok, w, a in zip(r.get("valid", []), r.get("why", []), r["action"], strict=False):
            if a == "none":  # the guarded loop had already closed: no reply was asked for
                continue
            replies += 1
            valid += bool(ok)
            if not ok:
                why[w or "unknown"] = why.get(w or "unknown", 0) + 1
            actions[a] = actions.get(a, 0) + 1
    return {"replies": replies, "valid": valid, "valid_share": ratio(valid, replies),
            "invalid": dict(sorted(why.items())), "actions": dict(sorted(actions.items())),
            "patches_not_loading": dict(sorted(not_loading.items()))}
