"""One attempt of one node: Begin, the worker, its claims, the gate on a judged copy, the verdict.

Why this order: the hand-off is checked before `Begin`, so a bad predecessor snapshot stops the
run with no attempt open. The worker runs under a meter that reserves before and settles after
every metered operation, in the node's sandbox (engine/run/confine.py): it sees its workspace,
never the ledger, the run's other folders or the gate's files, and every process it starts dies
with it. Its claims are recorded and never trusted: the gate judges a copy of
the workspace staged outside the workers' folder (engine/run/handoff.py), paid for from the same
ceiling, and the copy must hash the same after the gate. Pins and policy are re-checked just
before the verdict, so no verdict is recorded against a changed gate. Each crash site named in
`engine.run.runner.CRASH_SITES` lies between two of these steps.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.run.confine import NodeSandbox, RunSandbox
from loopproof.engine.run.gate import ERROR, Gate, GateResult
from loopproof.engine.run.handoff import HandOff, digest_or_why, stage_snapshot
from loopproof.engine.run.integrity import Integrity, PinChanged
from loopproof.engine.run.journal import Journal
from loopproof.engine.run.meter import BudgetOverrun, Meter
from loopproof.engine.run.planner import RunPlanner
from loopproof.engine.run.proxy.access import model_access
from loopproof.engine.run.recovery import give_back
from loopproof.engine.run.spec import NodeConfig, Spec
from loopproof.engine.run.worker import AttemptContext, OutcomeUnknown
from loopproof.engine.system import faults
from loopproof.engine.system.sandbox import Confinement
from loopproof.engine.system.trees import remove_tree
from loopproof.model import Begin, Claim, Status, Verdict


def judge_within(gate: Gate, workspace: Path, limit_s: float,
                 confine: Confinement | None = None) -> GateResult:
    """Run the gate with at most `limit_s` seconds of wall clock (its evaluation reservation at
    the current price), its commands in `confine`. A command or judge gate is killed there (a timeout: an
    `error` verdict); a Python gate cannot be killed and is charged at most its reservation."""
    return gate.within(limit_s).judge(workspace, confine)


def verdict_facts(result: GateResult, where: dict[str, int]) -> dict[str, Any]:
    """The verdict record's facts (beside its node and `passed`), judged or not."""
    return {**result.facts, **where, "verdict": result.verdict, "detail": result.detail,
            "seconds": round(result.seconds, 6), "snapshot": result.snapshot}


@dataclass(frozen=True)
class Begun:
    """An attempt whose `Begin` is recorded: what the rest of it (`finish_attempt`) needs."""

    node: str
    activation: int
    attempt: int
    workspace: Path
    box: NodeSandbox


def begin_attempt(node: str, *, journal: Journal, integrity: Integrity, handoff: HandOff,
                  sandbox: RunSandbox) -> Begun | None:
    """Prepare `node`'s workspace and record its `Begin`, in the scheduler's thread (so begins
    are recorded in the order they are decided). None when the model no longer admits the Begin
    (another attempt's reservation took the room meanwhile): nothing is recorded."""
    g = journal.graph
    integrity.check_policy()
    faults.crashpoint("runner.before_begin")
    ws = handoff.prepare_workspace(node)  # before Begin: a bad hand-off stops with no attempt open
    box = sandbox.node(node, ws)
    with journal.lock:  # the guard and the record in one step
        s = journal.state
        if Begin(node).why_not(g, s) is not None:
            return None
        e, i = s.activation_of(g, node), s.attempts_of(g, node) + 1
        journal.commit(Begin(node), {"activation": e, "attempt": i})
    return Begun(node, e, i, ws, box)


def run_attempt(node: str, *, spec: Spec, journal: Journal, integrity: Integrity,
                handoff: HandOff, planner: RunPlanner, sandbox: RunSandbox) -> None:
    """Run the next attempt of `node` to its end (a verdict, or an Overrun inside it)."""
    begun = begin_attempt(node, journal=journal, integrity=integrity, handoff=handoff,
                          sandbox=sandbox)
    if begun is None:
        raise RuntimeError(f"engine bug: {node!r} was scheduled but its Begin is not enabled")
    finish_attempt(begun, spec=spec, journal=journal, integrity=integrity, handoff=handoff,
                   planner=planner)


def finish_attempt(begun: Begun, *, spec: Spec, journal: Journal, integrity: Integrity,
                   handoff: HandOff, planner: RunPlanner) -> None:
    """The rest of an attempt after its Begin: the worker under its meter, its claims, the gate
    and the verdict (or an Overrun inside it). Runs on an attempt thread of its own when several
    attempts are in flight; every record goes through the journal, the run's one writer."""
    g = journal.graph
    node, e, i, ws, box = begun.node, begun.activation, begun.attempt, begun.workspace, begun.box
    cfg = spec.nodes[node]
    meter = Meter(g, node, journal.commit, lambda: journal.state, sync=journal.sync,
                  price=journal.replayed.price, eval_reserve=cfg.eval_reserve, note=journal.note,
                  lock=journal.lock)
    env = {**dict(cfg.env),  # the node's own variables first: the engine's names win
           "LOOPPROOF_NODE": node, "LOOPPROOF_ACTIVATION": str(e), "LOOPPROOF_ATTEMPT": str(i)}
    worker = planner.worker_for(node)
    access = (model_access(cfg.llm, meter, ledger=journal.ledger.path,
                           where={"node": node, "activation": e, "attempt": i})
              if cfg.llm is not None and worker.behind_proxy(tuple) is not None  # can it be?
              else contextlib.nullcontext())
    try:
        with access as llm:  # the attempt's model-call proxy, stopped (every call settled)
            sockets: tuple[Path, ...] = ()  # after, before anything below is recorded
            stop = None
            if llm is not None:
                worker = worker.behind_proxy(llm.wrap) or worker
                env |= llm.env
                sockets, stop = (llm.socket,), llm.stop
            ctx = AttemptContext(node, e, i, ws, meter, env=env, sockets=sockets,
                                 worker_sandbox=box.worker, gate_sandbox=box.gate, stop=stop)
            faults.crashpoint("runner.before_worker")
            try:
                claims = worker.run(ctx)
            except BudgetOverrun as exc:  # an adapter that lets the overrun through
                claims = {"overrun": str(exc)}
    except OutcomeUnknown as exc:  # where it ran is lost (engine/run/remote/)
        give_back(journal, node, str(exc))
        return
    faults.crashpoint("runner.after_worker")
    meter.close()
    where = {"activation": e, "attempt": i}
    if journal.state.status_of(g, node) is not Status.RUNNING:  # ended inside the worker
        # (an Overrun)
        journal.note({"type": "worker_output", "node": node, **where, "claims": claims})
        return
    journal.commit(Claim(node), {**where, "claims": claims})
    if meter.broken is not None:  # a settle claim above its reservation: fails, unjudged
        journal.commit(Verdict(node, False),
                       verdict_facts(GateResult.not_judged(meter.broken), where))
        return
    try:
        integrity.check_pins(node)
    except PinChanged as exc:
        journal.commit(Verdict(node, False), verdict_facts(GateResult.not_judged(str(exc)), where))
        raise
    integrity.check_policy()
    faults.crashpoint("runner.before_verdict")
    try:
        judge(node, ws, cfg, meter, where, journal=journal, handoff=handoff, confine=box.gate,
              unstaged=ctx.unstaged)
    except OutcomeUnknown as exc:  # lost mid-gate: its judged copy goes, the attempt is given back
        judged = handoff.judged_path(node, e, i)
        remove_tree(judged, within=judged.parent)
        give_back(journal, node, str(exc))
        return
    faults.crashpoint("runner.after_verdict")


def judge(node: str, ws: Path, cfg: NodeConfig, meter: Meter, where: dict[str, int], *,
          journal: Journal, handoff: HandOff, confine: Confinement | None = None,
          unstaged: str | None = None) -> None:
    """Reserve the evaluation, stage the workspace, run the gate on the staged copy within what
    is left of the reservation, and commit the verdict. The staging (limits checked before a
    byte is copied, then the copy and its hash) is the engine's work on the worker's behalf, so
    it is paid from the same reservation: settled with the gate's time. Staged = judged =
    handed off: the staged copy's inputs/ must be what was handed off, the gate's own snapshot
    must hash like the staged copy, and the staged copy must hash the same after the gate; any
    difference is an `error` verdict, never a PASS. An accepted copy is kept for the successors
    (its hash recorded as `accepted_tree`); a refused one is removed. `unstaged`: why the
    workspace could not be staged before (it never came back from a remote worker): not judged."""
    judged = handoff.judged_path(node, where["activation"], where["attempt"])
    try:  # paid from c_v too: reserved after the worker's settlement, before any copying
        limit = meter.reserve_evaluation(cfg.gate_timeout_s)
    except BudgetOverrun:  # recorded as an Overrun: the attempt has ended, no verdict
        return
    start = time.monotonic()
    staged, why = (None, unstaged) if unstaged else stage_snapshot(ws, judged, cfg.limits)
    if staged is not None and (why := handoff.check_inputs(node, judged) or ""):
        staged = None
    staging_s = time.monotonic() - start
    if staged is None:
        result = GateResult.not_judged(why)
    elif staging_s >= limit:
        result = GateResult.not_judged(f"staging the workspace took {staging_s:.3f} s, all of "
                                       f"the evaluation's {limit:.3f} s")
    else:
        result = judge_within(cfg.gate, judged, limit - staging_s, confine)
        after = digest_or_why(judged)
        if result.accepted and after != staged:
            result = GateResult(ERROR, "the judged copy changed while the gate judged it "
                                f"({staged[:12]}... -> {after[:12]}...)",
                                result.seconds, result.snapshot,
                                {**result.facts, "error": "snapshot changed"})
        elif result.accepted and result.copied != staged:  # every gate: it saw the staged tree
            result = GateResult(ERROR, "the gate's snapshot is not the staged tree "
                                f"({staged[:12]}... -> {result.copied[:12] or 'none'}...)",
                                result.seconds, result.snapshot,
                                {**result.facts, "error": "snapshot changed"})
    if not result.accepted:
        remove_tree(judged, within=judged.parent)
    meter.settle_evaluation(time.monotonic() - start, staging={"seconds": round(staging_s, 6)})
    facts = verdict_facts(result, where)
    if result.accepted:  # the tree successors receive (`hand_off` checks it)
        facts["accepted_tree"] = staged
    if result.accepted and (receipt := cfg.gate.receipt_anchor()) is not None:
        facts["receipt"] = receipt  # the receipt's digest, anchored in the run ledger
    journal.commit(Verdict(node, result.accepted), facts)
    if result.accepted:  # older accepted snapshots of this node are no longer handed off
        handoff.keep_only(node, judged)
