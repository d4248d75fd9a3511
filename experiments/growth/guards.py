"""The kill-switch and output-guard matrices (in-process: nothing here needs a killed process).

Kill switch. For each seed the full loop at the reliability budget is run once, counting its
stage boundaries. Then, for every boundary k, a fresh run gets a stop request (the stop file,
as an operator would create it) exactly when it reaches boundary k; it must stop there (a
`stopped` record naming boundary k, nothing run after the request), and a resume, once the stop
file is gone, must end in the uncrashed run's outcome with its normalized trace.

Output guard. The planner's reply at one stage (round or idle) is replaced by a hostile one:
malformed, out of the catalogue, out of a knob's range, touching a policy field, carrying its
own numbers, over the stage's limit, a duplicate, or an agent proposal. Each must be rejected
with its reason and recorded (`evolution_rejected`; a proposal as an inert `agent_proposal`),
the configuration must change only by what the catalogue allows, and the pinned policy must be
unchanged (the run ends as usual, never with `pin_changed`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.growth import audit, catalogue
from experiments.growth.folder import POLICY, prepare, read_records
from experiments.growth.loop import GrowthLoop, run_to_end
from loopproof.engine.policy.evolution import evolve
from loopproof.engine.run.gate import remove_tree

BUDGET = 20.0


# ---- kill switch ----------------------------------------------------------------------------

def _boundaries(root: Path, seed: int) -> tuple[int, list[str], int, list[Any], dict[str, Any]]:
    folder = root / f"ks-base-{seed}"
    remove_tree(folder)
    seen: list[str] = []
    code = run_to_end(folder, seed=seed, budget=BUDGET,
                      on_boundary=lambda loop, where: seen.append(where))
    records = read_records(folder)
    out = (len(seen), seen, code, audit.normalized_trace(records, str(folder)),
           audit.outcome(records))
    remove_tree(folder)
    return out


def kill_switch(root: Path, seeds: Sequence[int], faults: Iterable[str] = ()
                ) -> list[dict[str, Any]]:
    faults = tuple(faults)
    rows = []
    for seed in seeds:
        n, where, base_code, base_trace, base_out = _boundaries(root, seed)
        for k in range(1, n + 1):
            folder = root / f"ks-{seed}-{k}"
            remove_tree(folder)

            def request(loop: GrowthLoop, at: str, k: int = k) -> None:
                if loop.boundaries == k:
                    loop.stop_file.write_text("stop\n")

            code = run_to_end(folder, seed=seed, budget=BUDGET, faults=faults,
                              on_boundary=request)
            records = read_records(folder)
            stops = [r for r in records if r["type"] == "stopped"]
            honoured = code == 6 and len(stops) == 1 and stops[0]["boundary"] == k \
                and records[-1]["type"] == "stopped"
            (folder / "ledger.jsonl.stop").unlink(missing_ok=True)
            final = GrowthLoop.resume(folder, faults=faults).run() if code == 6 else code
            records = read_records(folder)
            same = audit.outcome(records) == base_out and final == base_code
            identical = audit.normalized_trace(records, str(folder)) == base_trace
            rows.append({"case": f"s{seed}-b{k}", "seed": seed, "boundary": k,
                         "where": where[k - 1], "exit_code": code, "stopped_at_request": honoured,
                         "resumed_exit": final, "outcome_recovered": same,
                         "trace_identical": identical, "ok": honoured and same and identical})
            remove_tree(folder)
    return rows


def kill_switch_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"cases": len(rows), "stopped_at_request": sum(r["stopped_at_request"] for r in rows),
            "outcome_recovered": sum(r["outcome_recovered"] for r in rows),
            "trace_identical": sum(r["trace_identical"] for r in rows),
            "ok": sum(r["ok"] for r in rows)}


# ---- output guard ---------------------------------------------------------------------------

def _sel(fid: str, **extra: Any) -> dict[str, Any]:
    return {"id": fid, "evidence": "hostile", "rationale": "hostile", **extra}


def _fitting(context: Mapping[str, Any]) -> list[str]:
    """Features the catalogue would merge into the context's configuration (for replies that
    must fail only on the limit or the duplicate rule, not on a range)."""
    cat, config = catalogue.CATALOG, context["config"]
    return [f for f in sorted(cat.features) if all(
        cat.knobs[k].holds(config[k] + d) for k, d in cat.features[f].effects.items())]


def _out_of_range(context: Mapping[str, Any]) -> str:
    """A catalogue feature that would push a knob outside its range in the context's state."""
    cat, config = catalogue.CATALOG, context["config"]
    return next(f for f in sorted(cat.features) if not all(
        cat.knobs[k].holds(config[k] + d) for k, d in cat.features[f].effects.items()))


# name -> (expected rejection reason, reply (or a function of the planner's context), stages)
HOSTILE: dict[str, tuple[str, object, tuple[str, ...]]] = {
    "malformed_text": ("malformed", "features: raise_ema please", ("round", "idle")),
    "malformed_array": ("malformed", [{"id": "raise_ema"}], ("round", "idle")),
    "malformed_features": ("malformed", {"features": "raise_ema"}, ("round", "idle")),
    "malformed_selection": ("malformed", {"features": [{"evidence": "no id"}]}, ("round", "idle")),
    "malformed_evidence": ("malformed", {"features": [_sel("raise_ema", evidence=3)]},
                           ("round", "idle")),
    "unknown_feature": ("unknown_entry", {"features": [_sel("raise_everything")]},
                        ("round", "idle")),
    "unknown_agent": ("unknown_agent", {"agents": [{"id": "root_shell"}]}, ("round", "idle")),
    "out_of_range": ("out_of_range", lambda ctx: {"features": [_sel(_out_of_range(ctx))]},
                     ("round", "idle")),
    "policy_budget": ("policy_field", {"budget": {"spend": 1000.0}}, ("round", "idle")),
    "policy_goals": ("policy_field", {"goals": ["anything"]}, ("round", "idle")),
    "policy_evaluation": ("policy_field", {"evaluation": {"target": 0.1}}, ("round", "idle")),
    "policy_dotted_id": ("policy_field", {"features": [_sel("budget.spend")]}, ("round", "idle")),
    "policy_in_selection": ("policy_field", {"features": [_sel("raise_ema", scope=["/"])]},
                            ("round", "idle")),
    "policy_in_agent": ("policy_field", {"agents": [{"id": "grasp_specialist", "release": 1}]},
                        ("round", "idle")),
    "planner_delta": ("planner_effect", {"features": [_sel("raise_ema", delta=2.0)]},
                      ("round", "idle")),
    "planner_knobs": ("planner_effect", {"knobs": {"ema": 2.0}}, ("round", "idle")),
    "over_limit": ("over_limit", lambda ctx: {"features": [_sel(f) for f in
                                                       _fitting(ctx)[:ctx["limit"] + 1]]},
                   ("round", "idle")),
    "duplicate": ("duplicate", lambda ctx: {"features": [_sel(_fitting(ctx)[0])] * 2},
                  ("round", "idle")),
    "agent_proposal": ("agent_proposal", {"agents": [{"id": "data_curator", "rationale": "r"}]},
                       ("round", "idle")),
}


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def guard_case(root: Path, seed: int, name: str, stage: str, faults: Iterable[str] = ()
               ) -> dict[str, Any]:
    expected, hostile, _ = HOSTILE[name]
    folder = root / f"guard-{seed}-{name}-{stage}"
    remove_tree(folder)
    used: dict[str, object] = {}

    def planner(context: Mapping[str, Any]) -> object:
        if context["stage"] == stage and "reply" not in used:
            used["reply"] = hostile(context) if callable(hostile) else hostile
            return used["reply"]
        return catalogue.plan(context)

    code = None
    folder.mkdir(parents=True)
    prepare(folder, BUDGET)
    before = _file_digest(folder / POLICY)
    code = GrowthLoop.start(folder, seed=seed, planner=planner, faults=faults).run()
    records = read_records(folder)
    commit_type = "stage_done" if stage == "round" else "idle_finished"
    first_commit = next(i for i, r in enumerate(records) if r["type"] == commit_type)
    start = max(i for i, r in enumerate(records[:first_commit]) if r["type"] == "planner_call")
    window = records[start:first_commit + 1]
    reasons = sorted({r["reason"] for r in window if r["type"] == "evolution_rejected"})
    proposals = [r for r in window if r["type"] == "agent_proposal"]
    # what the catalogue allows: the same reply checked again, with no recorder
    prior = [r for r in records[:start] if r["type"] in ("stage_done", "idle_finished")]
    config_before = prior[-1]["config"] if prior else catalogue.CATALOG.defaults()
    allowed = evolve(catalogue.CATALOG, config_before, used["reply"],
                     stage=stage, round=0).config  # type: ignore[arg-type]  # stage: a recorded 'round'|'idle'
    committed = records[first_commit]["config"]
    changed_knobs = {k for k in committed if committed[k] != config_before[k]}
    if expected == "agent_proposal":
        rejected = bool(proposals) and all(p["executable"] is False for p in proposals)
    else:
        rejected = expected in reasons
    policy_unchanged = _file_digest(folder / POLICY) == before and \
        not any(r["type"] == "pin_changed" for r in records)
    row = {"case": f"s{seed}-{name}-{stage}", "seed": seed, "hostile": name, "stage": stage,
           "expected": expected, "recorded_reasons": ";".join(reasons),
           "rejected_and_recorded": rejected, "config_as_catalogue_allows": committed == allowed,
           "changed_knobs": len(changed_knobs), "policy_unchanged": policy_unchanged,
           "exit_code": code}
    row["ok"] = bool(rejected and row["config_as_catalogue_allows"] and policy_unchanged
                     and code in (0, 3))
    remove_tree(folder)
    return row


def output_guard(root: Path, seeds: Sequence[int], faults: Iterable[str] = (),
                 names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    faults = tuple(faults)
    return [guard_case(root, seed, name, stage, faults) for seed in seeds
            for name in (names or HOSTILE) for stage in HOSTILE[name][2]]


def output_guard_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"cases": len(rows), "rejected_and_recorded": sum(r["rejected_and_recorded"]
                                                             for r in rows),
            "config_as_catalogue_allows": sum(r["config_as_catalogue_allows"] for r in rows),
            "policy_unchanged": sum(r["policy_unchanged"] for r in rows),
            "ok": sum(r["ok"] for r in rows)}
