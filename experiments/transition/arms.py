"""The loops the experiment runs: forced-revision trajectories, common-state branches, and the
prospective paired comparison of the baseline loop against the guarded loop.

The baseline loop commits whatever Patch the coder proposes, acting on whatever evidence it was
handed. The guarded loop is `engine.admission.broker.AdmissionBroker` (the evidence layer): evidence
must be issued by the broker for the current tree and suite (stale evidence is refreshed), the
reply is parsed fail-closed into Keep | Patch | Escalate, a Patch becomes the last-known-good
checkpoint only if the visible and challenge suites pass on it, and completion re-certifies the
checkpoint. Nothing in this module re-implements that layer; it only adapts the suites to it.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

from experiments.transition.coders import SOLUTION, Coder, Reply, Request, patched_source
from experiments.transition.conditions import evidence_for, trace
from experiments.transition.tasks import Task, code_hash, evaluate
from loopproof.engine.admission.broker import AdmissionBroker, GuardPolicy
from loopproof.engine.admission.evidence import CallableCheck, CheckResult, Evidence
from loopproof.engine.system.trees import remove_tree

STALE_SHARE = 0.5  # in the prospective comparison, the share of revisions handed stale evidence


def _share(rows: tuple[tuple[bool, str], ...]) -> float:
    return round(sum(ok for ok, _ in rows) / len(rows), 6) if rows else 1.0


def _load_error(rows: tuple[tuple[bool, str], ...]) -> str:
    """The exception that stopped the module from loading at all ("" when it loads): a patch
    that drops an import or a helper fails every case before any assertion runs."""
    actual = rows[0][1] if rows else ""
    return actual.removeprefix("load error: ") if actual.startswith("load error: ") else ""


def _state_record(task: Task, source: str) -> dict[str, Any]:
    """Y and each suite's verdict on `source`, and the share of visible and challenge cases it
    passes (the graded scores the verifier analysis thresholds at matched coverage)."""
    res = evaluate(task, source)
    return {"visible": res["visible"].passed, "challenge": res["challenge"].passed,
            "hidden": res["hidden"].passed,
            "visible_share": _share(res["visible"].rows),
            "load_error": _load_error(res["visible"].rows),
            "challenge_share": _share(res["challenge"].rows),
            "y": all(r.passed for r in res.values())}


def starts(task: Task, seed: int) -> tuple[str, str]:
    """(wrong start, its frozen previous state) for `seed`: two different frozen mutants."""
    n = len(task.wrong)
    return task.wrong[seed % n], task.wrong[(seed + 1) % n]


def _action_kind(reply: Reply) -> str:
    return str(getattr(reply.action, "kind", "keep"))


def trajectory(task: Task, condition: str, seed: int, revisions: int, coder: Coder,
               start: str | None = None, previous: str | None = None) -> dict[str, Any]:
    """One forced-revision trajectory under one evidence condition (baseline loop: every Patch
    is committed). Defaults to the seed's wrong start."""
    wrong, prev_wrong = starts(task, seed)
    start = wrong if start is None else start
    previous = prev_wrong if previous is None else previous
    states = [start]
    rec0 = _state_record(task, start)
    row: dict[str, Any] = {"task_id": task.task_id, "condition": condition, "seed": seed,
                           "start_hash": code_hash(start), "y": [rec0["y"]], "self": [],
                           "visible": [], "challenge": [], "hidden": [], "visible_share": [],
                           "challenge_share": [], "load_error": [], "action": [], "mode": [],
                           "valid": [],
                           "why": [], "state": [], "evidence_stale": []}
    for t in range(1, revisions + 1):
        current = states[-1]
        before = states[-2] if len(states) > 1 else previous
        ev = evidence_for(condition, task, current, before)
        reply = coder.revise(Request(task, current, ev, tuple(states[:-1]), seed, t))
        new = patched_source(reply.action) or current
        states.append(new)
        rec = _state_record(task, new)
        row["y"].append(rec["y"])
        row["self"].append(reply.claims_done)
        for k in ("visible", "challenge", "hidden", "visible_share", "challenge_share",
                  "load_error"):
            row[k].append(rec[k])
        row["action"].append(_action_kind(reply))
        row["mode"].append(reply.mode)
        row["valid"].append(reply.valid)
        row["why"].append(reply.why)
        row["state"].append(code_hash(new)[:12])
        row["evidence_stale"].append(ev is not None and ev.state_hash != code_hash(current))
    row["ever_correct"] = any(row["y"][1:])
    row["lost_after_found"] = row["ever_correct"] and not row["y"][-1]
    return row


def common_state(task: Task, condition: str, seed: int, coder: Coder) -> dict[str, Any]:
    """One revision of the correct start (the reference) under `condition`; the stale trace comes
    from the seed's frozen wrong state (the state before the bug was fixed)."""
    wrong, _ = starts(task, seed)
    row = trajectory(task, condition, seed, 1, coder, start=task.reference, previous=wrong)
    row["harm"] = not row["y"][-1]
    return row


def _lag(task: Task, seed: int, kind: str, t: int) -> bool:
    """Is revision t of this paired run handed stale evidence? Same coin for both arms."""
    return random.Random(f"lag|{task.task_id}|{seed}|{kind}|{t}").random() < STALE_SHARE


def _start_pair(task: Task, seed: int, kind: str) -> tuple[str, str]:
    wrong, prev_wrong = starts(task, seed)
    return (task.reference, wrong) if kind == "correct" else (wrong, prev_wrong)


def baseline_run(task: Task, seed: int, kind: str, revisions: int, coder: Coder
                 ) -> dict[str, Any]:
    """The baseline loop: each revision is handed the visible trace of the current state, or of
    the previous state when the lag coin says so; every Patch is committed; at the end the loop
    accepts its state if the visible suite passes (its own gate)."""
    start, previous = _start_pair(task, seed, kind)
    states = [start]
    row = _paired_row(task, seed, kind, "baseline", start)
    for t in range(1, revisions + 1):
        current = states[-1]
        stale = _lag(task, seed, kind, t)
        ev = trace(task, (states[-2] if len(states) > 1 else previous) if stale else current)
        reply = coder.revise(Request(task, current, ev, tuple(states[:-1]), seed, t))
        new = patched_source(reply.action) or current
        states.append(new)
        row["y"].append(_state_record(task, new)["y"])
        row["action"].append(_action_kind(reply))
        row["valid"].append(reply.valid)
        row["why"].append(reply.why)
        row["offered_stale"].append(stale and ev.state_hash != code_hash(current))
        row["outcome"].append("committed" if new != current else _action_kind(reply))
    final = _state_record(task, states[-1])
    return _finish(row, accepted=final["visible"], final_y=final["y"])


def _paired_row(task: Task, seed: int, kind: str, arm: str, start: str) -> dict[str, Any]:
    return {"task_id": task.task_id, "seed": seed, "start": kind, "arm": arm,
            "start_hash": code_hash(start), "y": [_state_record(task, start)["y"]],
            "action": [], "valid": [], "why": [], "offered_stale": [], "outcome": []}


def _finish(row: dict[str, Any], *, accepted: bool, final_y: bool) -> dict[str, Any]:
    row["completed"] = accepted
    row["final_y"] = final_y
    row["unsafe_completion"] = accepted and not final_y
    row["sound_completion"] = accepted and final_y
    row["harm"] = row["start"] == "correct" and not final_y
    row["repair"] = row["start"] == "wrong" and final_y
    return row


def suite_checks(task: Task) -> tuple[CallableCheck, CallableCheck]:
    """The visible and challenge suites as checks the admission broker can run on a workspace.
    The visible check's evidence carries the same trace the coder reads in the baseline loop."""

    def visible(candidate: Path) -> CheckResult:
        source = (candidate / SOLUTION).read_text(encoding="utf-8")
        payload = dict(trace(task, source).payload)
        verdict = str(payload.pop("verdict"))
        payload.pop("check", None)
        return CheckResult(verdict, f"visible suite {verdict}", payload)

    def challenge(candidate: Path) -> CheckResult:
        source = (candidate / SOLUTION).read_text(encoding="utf-8")
        ok = evaluate(task, source)["challenge"].passed
        return CheckResult("pass" if ok else "fail", f"challenge suite {'pass' if ok else 'fail'}")

    return (CallableCheck("visible", visible, version=task.visible.hash),
            CallableCheck("challenge", challenge, version=task.challenge.hash))


def _reply_json(reply: Reply) -> str:
    """The coder's typed action in the reply schema the broker parses (engine.admission.actions)."""
    a = reply.action
    note = "done" if reply.claims_done else ""
    if getattr(a, "kind", "") == "patch":
        return json.dumps({"action": "patch", "files": dict(a.files), "note": note})
    if getattr(a, "kind", "") == "escalate":
        return json.dumps({"action": "escalate", "reason": a.reason, "note": note})
    return json.dumps({"action": "keep", "note": note})


def guarded_run(task: Task, seed: int, kind: str, revisions: int, coder: Coder,
                policy: GuardPolicy | None = None) -> dict[str, Any]:
    """The guarded loop on the same starts and the same lag coins as `baseline_run`: the harness
    offers the previous revision's evidence when the coin says stale; the broker refuses to let
    it drive a patch and refreshes it; a patch is admitted only through the visible and challenge
    checks; completion re-certifies the checkpoint."""
    start, previous = _start_pair(task, seed, kind)
    row = _paired_row(task, seed, kind, "guarded", start)
    row["refused_stale"] = []
    root = Path(tempfile.mkdtemp(prefix="guarded-"))
    try:
        ws, state_dir = root / "ws", root / "state"
        ws.mkdir()
        (ws / SOLUTION).write_text(start, encoding="utf-8")
        broker = AdmissionBroker(ws, state_dir, admission=list(suite_checks(task)),
                                 policy=policy or GuardPolicy(candidate_budget=revisions))
        current_ev = broker.start()
        # At revision 1 the "previous" evidence describes the frozen previous state; it was not
        # issued by this broker for this tree, so it cannot bind either.
        issued_prev: Evidence = trace(task, previous)
        history: list[str] = []
        for t in range(1, revisions + 1):
            if broker.closed:
                row["y"].append(row["y"][-1])
                row["action"].append("none")
                row["valid"].append(True)
                row["why"].append("")
                row["offered_stale"].append(False)
                row["refused_stale"].append(False)
                row["outcome"].append("closed")
                continue
            current = _base_source(broker)
            stale = _lag(task, seed, kind, t)
            offered = issued_prev if stale else current_ev
            delivered = broker.deliver(offered)
            refused = delivered is not offered
            reply = coder.revise(Request(task, current, delivered, tuple(history), seed, t))
            decision = broker.submit(_reply_json(reply), based_on=delivered)
            new = _base_source(broker)
            if new != current:
                history.append(current)
            row["y"].append(_state_record(task, new)["y"])
            row["action"].append(_action_kind(reply))
            row["valid"].append(reply.valid)
            row["why"].append(reply.why)
            row["offered_stale"].append(offered is not current_ev
                                        and offered.state_hash != current_ev.state_hash)
            row["refused_stale"].append(refused)
            row["outcome"].append(decision.outcome.value)
            issued_prev = current_ev if delivered is None else delivered
            if not broker.closed:
                current_ev = broker.evidence()
        completion = broker.complete()
        final = _base_source(broker) if broker.checkpoint is None else \
            (broker.store.path_of(broker.checkpoint) / SOLUTION).read_text(encoding="utf-8")
        return _finish(row, accepted=completion.completed, final_y=_state_record(task, final)["y"])
    finally:
        remove_tree(root, best_effort=True)


def _base_source(broker: AdmissionBroker) -> str:
    return (broker.store.path_of(broker.base) / SOLUTION).read_text(encoding="utf-8")
