"""The "revision" node kind: a code-repair node whose attempts go through the admission broker.

In graph.toml (`kind = "revision"`), one attempt of the node is a guarded revision loop in the
node's workspace: the broker checkpoints the workspace if it passes; then, up to `revisions`
times, the worker command is shown bound evidence (a JSON file named by LOOPPROOF_EVIDENCE) and
replies on stdout with a typed action (see engine/admission/actions.py); the broker admits a Patch only if
the gate (and `challenge`, if given) pass on an isolated copy, and restores the workspace to the
checkpoint whenever anything else changed it. The attempt ends with recertification (the gate,
`challenge` and `hidden` re-run on the checkpoint) and a receipt.

The node's gate is the runner's own, independent judgement of the attempt: it accepts only if
the receipt verifies against the attempt's guard ledger, the workspace is exactly the receipt's
checkpoint, and every completion check passes again on a fresh copy. On acceptance the runner's
own ledger anchors the receipt too: the accepting `verdict` record carries `receipt` (digest,
guard ledger path, head hash and length), and `loopproof receipt R --ledger RUN_LEDGER` checks
against that. The worker's claims (its
decisions, the receipt digest) are recorded in the run ledger and never read by control flow.

Each attempt keeps its state next to the workspace, outside the worker's tree:
`<ledger>.work/<node>.guard/a<activation>.<attempt>/` (checkpoint store, proposals,
guard.jsonl, receipt.json); an attempt re-run after a crash gets `...rerun<n>/` and the old
folder stays, so repeated execution is visible.

Sandboxes: the worker command runs in the node's worker sandbox, which sees the evidence file
read-only and not the guard folder (checkpoint store, guard ledger, receipt), nor the
challenge's and hidden check's files; every admission and completion check runs in the node's
gate sandbox on its own scratch copy (engine/run/confine.py).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.admission.broker import (
    AdmissionBroker,
    Completion,
    GuardPolicy,
    verify_receipt,
)
from loopproof.engine.admission.checkpoint import CheckpointError, CheckpointStore
from loopproof.engine.admission.evidence import CommandCheck, run_check
from loopproof.engine.record.ledger import Ledger, canonical
from loopproof.engine.record.record_types import GUARD_RECORDS
from loopproof.engine.run.gate import ACCEPT, ERROR, REJECT, Gate, GateResult
from loopproof.engine.run.kinds import NodeTable, argv_field, register_kind, seconds_field
from loopproof.engine.run.meter import BudgetOverrun
from loopproof.engine.run.worker import AttemptContext
from loopproof.engine.system.canonical import digest
from loopproof.engine.system.fields import ABSENT, Field, integer, one_of, strings, text
from loopproof.engine.system.process import ProcessError, safe_environment
from loopproof.engine.system.sandbox import Confinement
from loopproof.engine.system.trees import UnsafeTree, tree_digest, tree_hash

REVISION_FIELDS: tuple[Field, ...] = (
    argv_field("worker", "the worker's argv; reads the evidence JSON named by LOOPPROOF_EVIDENCE, "
               "prints a typed action"),
    argv_field("gate", "the admission check whose evidence the worker sees (exit 0 pass, 1 "
               "fail)"),
    argv_field("challenge", "a second admission check the worker never sees", required=False),
    argv_field("hidden", "a completion-only check, run at recertification", required=False),
    Field("revisions", "an integer >= 1", "worker replies per attempt", integer(1), "3",
          default=3),
    Field("candidate_budget", "an integer >= 0", "patches evaluated per attempt", integer(0),
          "3", default=ABSENT, shown_default="`revisions`"),
    Field("on_stale", '`"refresh"`, `"keep"` or `"escalate"`', "what stale evidence does",
          one_of(("refresh", "keep", "escalate")), '"refresh"', default="refresh"),
    Field("on_invalid", '`"keep"` or `"escalate"`', "what a malformed reply does",
          one_of(("keep", "escalate")), '"keep"', default="keep"),
    Field("repeat_limit", "an integer >= 1", "a tree rejected this many times escalates when "
          "proposed again", integer(1), "1", default=1),
    seconds_field("wall_budget_s", "seconds for an attempt's revisions (checks are cut at what "
                  "is left)", ABSENT),
    Field("seed", "a folder relative to the spec", "copied into the workspace when it is empty",
          text(), '"seed"', fix="give a folder, relative to the spec, holding the starting code",
          default=ABSENT),
    Field("protected", "a list of globs", "workspace paths a Patch may not write",
          strings(empty=True, what="path globs"), '["tests/*"]', default=[]),
)
REPLY_LIMIT = 1 << 20  # a reply longer than this (truncated by the process layer) is invalid


@dataclass
class _Attempt:
    """What the worker leaves for the gate: the attempt's state folder and its completion."""

    state: Path
    ledger_path: Path
    completion: Completion


@dataclass
class _Shared:
    last: _Attempt | None = None


@dataclass
class RevisionWorker:
    """Runs one guarded revision loop per attempt (see the module docstring)."""

    argv: tuple[str, ...]
    checks: tuple[CommandCheck, ...]
    completion: tuple[CommandCheck, ...]
    policy: GuardPolicy
    revisions: int
    timeout_s: float
    protected: tuple[str, ...]
    seed: Path | None
    shared: _Shared = field(default_factory=_Shared)
    # The receipt's policy hash: the node's table and guard policy as loaded (the run's human
    # policy file, if any, is pinned and re-checked by the runner itself, engine/policy/pin.py).
    policy_digest: str = ""

    def run(self, ctx: AttemptContext) -> dict[str, Any]:
        ws = ctx.workspace
        self.shared.last = None
        if self.seed is not None and not any(p.name != "inputs" for p in ws.iterdir()):
            shutil.copytree(self.seed, ws, dirs_exist_ok=True, symlinks=True)
        state = ws.parent / f"{ctx.node}.guard" / f"a{ctx.activation}.{ctx.attempt}"
        rerun = 0
        while state.exists():  # a re-run after a crash: keep the old state for audit
            rerun += 1
            state = state.with_name(f"a{ctx.activation}.{ctx.attempt}.rerun{rerun}")
        state.mkdir(parents=True)
        ledger_path = state / "guard.jsonl"
        first = {"type": "guard.run", "node": ctx.node, "activation": ctx.activation,
                 "attempt": ctx.attempt}
        GUARD_RECORDS.check_append(first, ledger_path)
        ledger = Ledger.create(ledger_path, first)
        try:
            pin = self.policy_digest
            checks = confined(self.checks, ctx.gate_sandbox)
            broker = AdmissionBroker(ws, state, admission=checks,
                                     completion=confined(self.completion, ctx.gate_sandbox),
                                     policy=self.policy, ledger=ledger,
                                     policy_digest=lambda: pin,
                                     protected=(*self.protected, "inputs", "inputs/*"))
            try:
                evidence = broker.start()
            except UnsafeTree as exc:
                return {"started": False, "error": str(exc)}
            outcomes: list[str] = []
            for r in range(self.revisions):
                if broker.closed:
                    break
                ev_file = state / "evidence.json"
                ev_file.write_bytes(canonical({**evidence.to_json(), "revision": r}))
                env = safe_environment(extra={**ctx.env, "LOOPPROOF_EVIDENCE": str(ev_file)},
                                       home=ws)
                box = (ctx.worker_sandbox.seeing(readable=[ev_file])
                       if ctx.worker_sandbox is not None else None)
                try:
                    m = ctx.meter.run_command(self.argv, ws, self.timeout_s, env=env,
                                              confine=box)
                    res = m.result
                    reply = (None if res.killed or res.output_truncated or res.returncode != 0
                             else res.stdout)
                except ProcessError:
                    reply = None
                except BudgetOverrun as exc:
                    return {"overrun": str(exc), "revisions": outcomes}
                decision = broker.submit(reply, based_on=evidence)
                outcomes.append(decision.outcome.value)
                if not broker.closed:
                    try:
                        evidence = broker.evidence()
                    except CheckpointError:
                        break  # the broker has stopped, fail closed; complete() says why
            completion = broker.complete()
        finally:
            ledger.close()
        self.shared.last = _Attempt(state, ledger_path, completion)
        receipt = completion.receipt or {}
        return {"revisions": outcomes, "completed": completion.completed,
                "reason": completion.reason, "receipt_digest": receipt.get("digest"),
                "checkpoint": receipt.get("checkpoint", {}).get("tree_hash"),
                "receipt": str(completion.receipt_path) if completion.receipt_path else None}


@dataclass
class ReceiptGate(Gate):
    """Accept an attempt only if its receipt verifies, the workspace is exactly the receipt's
    checkpoint, and every completion check passes again on a fresh copy. Never writes."""

    completion: tuple[CommandCheck, ...]
    shared: _Shared
    accepted: dict[str, Any] | None = None  # the anchor of the last accepted receipt

    def receipt_anchor(self) -> dict[str, Any] | None:
        """What the runner puts in the accepting verdict record, so the run ledger anchors the
        receipt: its digest and the guard ledger's path, head hash and length."""
        return self.accepted

    def pinned_files(self) -> tuple[Path, ...]:
        files = {Path(f) for c in self.completion for f in c.named_files()}
        return tuple(sorted(files))

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        start = time.monotonic()
        self.accepted = None
        try:  # it judges the staged copy in place: that copy, as it found it, is what it saw
            copied = tree_digest(Path(workspace))
        except OSError:
            copied = ""
        verdict, detail, tree = self._judge(Path(workspace), confined(self.completion, confine))
        return GateResult(verdict, detail, time.monotonic() - start, tree, copied=copied)

    def _judge(self, workspace: Path, completion: tuple[CommandCheck, ...]
               ) -> tuple[str, str, str]:
        try:
            tree = tree_hash(workspace)
        except UnsafeTree as exc:
            return REJECT, str(exc), ""
        last = self.shared.last
        if last is None:
            return ERROR, "no guarded attempt ran before this gate", tree
        if not last.completion.completed or last.completion.receipt_path is None:
            return REJECT, f"no receipt: {last.completion.reason}", tree
        try:
            receipt = json.loads(last.completion.receipt_path.read_text(encoding="utf-8"))
            records = Ledger.open(last.ledger_path).records
        except Exception as exc:  # a damaged receipt or guard ledger: no acceptance
            return REJECT, f"receipt or guard ledger unreadable: {exc}", tree
        problems = verify_receipt(receipt, records, CheckpointStore(last.state / "checkpoint"))
        if problems:
            return REJECT, "receipt does not verify: " + "; ".join(problems), tree
        if receipt["checkpoint"]["tree_hash"] != tree:
            return REJECT, (f"workspace tree {tree[:12]} is not the receipt's checkpoint "
                            f"{receipt['checkpoint']['tree_hash'][:12]}"), tree
        scratch = last.state / "gate-scratch"
        scratch.mkdir(exist_ok=True)
        for i, check in enumerate(completion):
            ev = run_check(check, workspace, f"gate.{i}.{check.name}", scratch=scratch)
            if ev.verdict != "pass":
                return (REJECT if ev.verdict == "fail" else ERROR,
                        f"{check.name}: {ev.verdict} ({ev.payload.get('detail')})", tree)
        self.accepted = {"digest": receipt["digest"], "guard_ledger": str(last.ledger_path),
                         "guard_head": records[-1]["hash"], "guard_records": len(records),
                         "receipt_file": str(last.completion.receipt_path)}
        return ACCEPT, (f"receipt {receipt['digest'][:12]} verified; checkpoint "
                        f"{tree[:12]} re-checked by "
                        f"{', '.join(c.name for c in self.completion)}"), tree


def confined(checks: tuple[CommandCheck, ...], box: Confinement | None
             ) -> tuple[CommandCheck, ...]:
    """The checks, each running in `box` (a gate sandbox), or as they are without one."""
    if box is None:
        return checks
    return tuple(dataclasses.replace(c, confine=box) for c in checks)


def revision_factory(node: NodeTable, spec_dir: Path) -> tuple[RevisionWorker, ReceiptGate]:
    """Build the worker and gate of one `kind = "revision"` node from its (checked) table."""
    v = node.values
    check_timeout = float(v["gate_timeout_s"])
    checks = [CommandCheck("gate", node.argv("gate", spec_dir), timeout_s=check_timeout)]
    challenge = node.argv("challenge", spec_dir)
    if challenge:
        checks.append(CommandCheck("challenge", challenge, timeout_s=check_timeout))
    completion = list(checks)
    hidden = node.argv("hidden", spec_dir)
    if hidden:
        completion.append(CommandCheck("hidden", hidden, timeout_s=check_timeout))
    policy = GuardPolicy(on_stale=v["on_stale"], on_invalid=v["on_invalid"],
                         candidate_budget=v.get("candidate_budget", v["revisions"]),
                         repeat_limit=v["repeat_limit"],
                         wall_budget_s=(float(v["wall_budget_s"]) if "wall_budget_s" in v
                                        else None))
    seed = None
    if "seed" in v:
        seed = (spec_dir / v["seed"]).resolve()
        if not seed.is_dir():
            raise node.error("seed", f"{v['seed']!r} is not a folder under {spec_dir}",
                             "give a folder, relative to the spec, holding the starting code")
    shared = _Shared()
    worker = RevisionWorker(node.argv("worker", spec_dir), tuple(checks), tuple(completion),
                            policy, v["revisions"], float(v["timeout_s"]),
                            tuple(v["protected"]), seed, shared,
                            digest({"node": dict(node), "guard": asdict(policy)}))
    return worker, ReceiptGate(tuple(completion), shared)


register_kind("revision", revision_factory, REVISION_FIELDS)
