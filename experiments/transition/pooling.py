"""What the pooled figures of the transition study count once, and what a replay of the
recorded common-state branches says the guard would have stopped.

Why apart from study.py: both are readings of the rows the study already recorded (no run),
added so that identical conditions are not pooled as if independent and so that the source
paper's replay-intercepts analysis has a counterpart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def distinct_conditions(traj: list[dict], conditions: Sequence[str]
                        ) -> tuple[list[dict], dict[str, str]]:
    """The trajectories of the conditions that differ: a condition whose every trajectory (per
    task and seed: the states, correctness and verdicts) equals an earlier condition's is left out
    of the pooled analyses, so one arm is not counted two or three times (the search coder reads
    current binary, unavailable and nonactionable alike by design). Returns (rows, {left out:
    the condition it equals})."""
    def signature(c: str) -> list:
        rows = sorted((r for r in traj if r["condition"] == c),
                      key=lambda r: (str(r["task_id"]), r["seed"]))
        return [(r["task_id"], r["seed"], r["y"], r["state"], r["self"], r["visible"],
                 r["challenge"]) for r in rows]
    kept: dict[str, list] = {}
    same: dict[str, str] = {}
    for c in conditions:
        sig = signature(c)
        match = next((k for k, v in kept.items() if v == sig), None)
        if match is None:
            kept[c] = sig
        else:
            same[c] = match
    return [r for r in traj if r["condition"] in kept], same


def replay_intercepts(cs: list[dict]) -> dict[str, Any]:
    """The source paper's replay analysis on the common-state branches: of the harms (a correct
    start made wrong by one revision), how many the guarded loop would have stopped, replaying the
    recorded branch: by state binding (the evidence named another state, so the broker refuses
    and refreshes it before the coder sees it) or by the admission gate alone (the harmful patch
    fails the visible or the challenge suite, so it never becomes the checkpoint). A harm that
    passes both suites and came from current evidence is not intercepted: the residual risk the
    paper assigns to the verifiers."""
    out: dict[str, Any] = {}
    for cond in ("stale_trace", "current_trace"):
        harms = [r for r in cs if r["condition"] == cond and r["harm"]]
        binding = [bool(r["evidence_stale"][0]) for r in harms]
        gate = [not (r["visible"][0] and r["challenge"][0]) for r in harms]
        out[cond] = {"harms": len(harms), "by_state_binding": sum(binding),
                     "by_gate": sum(gate),
                     "intercepted": sum(b or g for b, g in zip(binding, gate, strict=True))}
    return out
