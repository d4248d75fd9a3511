"""The prospective guarded-vs-baseline comparison judged by a pre-specified criterion, and what
strict freshness costs on the liveness side.

Why pre-specified: with four outcomes and a choice of margins after the fact, some reading always
favours the guard. The criterion below is written in the protocol file (protocol.md beside this
module), committed before the run it judges and applied unchanged to every coder; the summary
carries its text, the protocol file's SHA-256 and the verdict. "Pre-specified", not
"preregistered": the criterion arrived with the model coder, and the prompt and scales changed
after model outputs were seen (protocol.md says so).

Why a liveness side: a guard that refuses stale evidence, rejects patches and recertifies can be
safe by never finishing. The paper saw strict freshness cut coverage to 38.4% and lose 311 sound
completions. So the cost is reported twice:

- in the stopping replay over the fixed trajectories, a `fresh_gate` rule stops only on evidence
  bound to the state it describes that says pass (the conditions whose evidence is a verdict on
  the current state; a stale, missing or filler payload can never license a stop), next to the
  self-report rule: coverage, sound completions lost and gained, mean revisions to the stop;
- in the paired rollouts, where the broker enforces freshness for real: completion coverage per
  arm, baseline sound completions the guarded arm lost and gained, and revisions taken.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.stats import NO_VARIATION

MARGIN = 0.05
PROTOCOL = Path(__file__).with_name("protocol.md")
PRE_SPECIFIED = (
    "Guarded passes iff all four hold, each judged on the task-cluster 95% interval of guarded "
    "minus baseline: (1) superiority on harm from correct starts: the upper end is below 0; "
    "non-inferiority with margin 0.05 on (2) repair from wrong starts: the lower end is above "
    "-0.05, (3) sound completion: the lower end is above -0.05, and (4) unsafe completion: the "
    "upper end is below +0.05.")

# the evidence conditions whose payload is a verdict on the state it is bound to
BOUND_VERDICT = {"current_binary": ("visible",), "current_trace": ("visible",),
                 "current_trace_full": ("visible", "challenge")}


def protocol_sha256() -> str:
    return hashlib.sha256(PROTOCOL.read_bytes()).hexdigest()


def verdict(gvb: Mapping[str, Any], interval: str = "ci95_percentile") -> dict[str, Any]:
    """Apply PRE_SPECIFIED to the guarded_vs_baseline block of the summary: each part on the end
    of its `interval` (the percentile interval, the one in force when the criterion was fixed;
    "ci95", the BCa interval, only as a sensitivity analysis), or on the difference itself when
    every task gave the same difference ("no variation"); no interval and no difference fails."""

    def end(key: str, i: int) -> float | None:
        ci = gvb[key].get(interval)
        if ci is None:
            return (gvb[key].get("difference") if gvb[key].get("ci_method") == NO_VARIATION
                    else None)
        return ci[i]

    def check(key: str, i: int, passes: Any) -> dict[str, Any]:
        x = end(key, i)
        return {"bound": x, "passes": x is not None and bool(passes(x))}

    parts = {
        "harm_superiority": check("harm_from_correct_starts", 1, lambda x: x < 0),
        "repair_non_inferiority": check("repair_from_wrong_starts", 0, lambda x: x > -MARGIN),
        "sound_completion_non_inferiority": check("sound_completion", 0, lambda x: x > -MARGIN),
        "unsafe_completion_non_inferiority": check("unsafe_completion", 1, lambda x: x < MARGIN),
    }
    return {"criterion": PRE_SPECIFIED, "margin": MARGIN, "parts": parts, "interval": interval,
            "passes": all(p["passes"] for p in parts.values()),
            "protocol": "experiments/transition/protocol.md", "protocol_sha256": protocol_sha256()}


def _ratio(k: int, n: int) -> float | None:
    return None if n == 0 else round(k / n, 6)


def _stop(flags: Sequence[bool]) -> int | None:
    """The first revision (1-based) a rule accepts, or None."""
    return next((t for t, ok in enumerate(flags, 1) if ok), None)


def fresh_replay(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Strict freshness in the stopping replay, against the self-report rule on the same rows."""
    n = len(rows)
    fresh_stops = self_stops = lost = gained = fresh_sound = self_sound = 0
    fresh_revisions: list[int] = []
    for r in rows:
        suites = BOUND_VERDICT.get(r["condition"])
        T = len(r["y"]) - 1
        fresh = [bool(suites) and all(r[s][t] for s in suites) for t in range(T)] if suites \
            else [False] * T
        t_f, t_s = _stop(fresh), _stop([bool(x) for x in r["self"]])
        f_ok = t_f is not None and bool(r["y"][t_f])
        s_ok = t_s is not None and bool(r["y"][t_s])
        fresh_stops += t_f is not None
        self_stops += t_s is not None
        fresh_sound += f_ok
        self_sound += s_ok
        lost += s_ok and not f_ok
        gained += f_ok and not s_ok
        if t_f is not None:
            fresh_revisions.append(t_f)
    return {"n": n, "fresh_gate_coverage": _ratio(fresh_stops, n),
            "self_only_coverage": _ratio(self_stops, n),
            "fresh_gate_sound": fresh_sound, "self_only_sound": self_sound,
            "sound_lost_vs_self_only": lost, "sound_gained_vs_self_only": gained,
            "mean_revisions_to_stop": (round(sum(fresh_revisions) / len(fresh_revisions), 6)
                                       if fresh_revisions else None)}


def fresh_rollouts(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Strict freshness as the broker enforces it: per arm completion coverage and revisions
    taken; baseline sound completions the guarded arm lost and gained (paired by task, seed,
    start)."""
    arms: dict[str, dict[tuple[str, int, str], Mapping[str, Any]]] = {"guarded": {},
                                                                       "baseline": {}}
    for r in rows:
        arms[r["arm"]][(str(r["task_id"]), int(r["seed"]), str(r["start"]))] = r
    out: dict[str, Any] = {}
    for arm, runs in arms.items():
        taken = [sum(o != "closed" for o in r["outcome"]) for r in runs.values()]
        out[arm] = {"rollouts": len(runs),
                    "coverage": _ratio(sum(bool(r["completed"]) for r in runs.values()),
                                       len(runs)),
                    "sound": sum(bool(r["sound_completion"]) for r in runs.values()),
                    "mean_revisions": round(sum(taken) / len(taken), 6) if taken else None}
    pairs = [(arms["guarded"][k], b) for k, b in arms["baseline"].items() if k in arms["guarded"]]
    out["sound_lost"] = sum(b["sound_completion"] and not g["sound_completion"] for g, b in pairs)
    out["sound_gained"] = sum(g["sound_completion"] and not b["sound_completion"]
                              for g, b in pairs)
    out["stale_refused"] = sum(sum(r.get("refused_stale", [])) for r in arms["guarded"].values())
    return out
