"""The broker's configuration and run state, and the small moves every part of it makes (stop,
decide, budgets, restoring the workspace to the current candidate).

Why a base of its own: binding, admission and recertification (engine/admission/binding.py,
admit.py, recertify.py) each add one step of the transaction on top of this state, in that
order, so each can be read knowing only what lies below it. Every field is declared here,
including the executable model's states (`g4`, `g5`) that every step asks before it acts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loopproof.engine.admission.checkpoint import CheckpointError, CheckpointStore
from loopproof.engine.admission.evidence import Check, Evidence
from loopproof.engine.admission.guard import (
    Completion,
    Decision,
    Disposition,
    EventLog,
    GuardPolicy,
    MemoryLog,
)
from loopproof.engine.policy.guards import refuse
from loopproof.engine.record.record_types import GUARD_RECORDS
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.trees import UnsafeTree, tree_hash
from loopproof.model import checkpoint as mc
from loopproof.model import evidence as me
from loopproof.model.lifecycle import FINAL, BrokerStatus, moved
from loopproof.model.rules import Item


class BrokerState:
    """The fields of one broker; the arguments are described on `AdmissionBroker`."""

    def __init__(self, workspace: Path, state_dir: Path, *, admission: Sequence[Check],
                 feedback: Check | None = None, completion: Sequence[Check] | None = None,
                 policy: GuardPolicy | None = None, protected: Sequence[str] = (),
                 policy_digest: Callable[[], str] | None = None, ledger: EventLog | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not admission:
            raise ValueError("AdmissionBroker: at least one admission check (nothing is admitted "
                             "without a gate)")
        self.workspace = Path(workspace)
        self.state_dir = Path(state_dir)
        ws, sd = self.workspace.resolve(), self.state_dir.resolve()
        if sd == ws or ws in sd.parents:
            raise BadInput(str(state_dir), "state_dir", "is inside the guarded workspace",
                           "keep the broker's state outside the workspace the worker edits")
        self.admission = tuple(admission)
        self.feedback = feedback if feedback is not None else self.admission[0]
        self.completion = tuple(completion) if completion is not None else self.admission
        self.policy = policy or GuardPolicy()
        self.policy_digest = policy_digest
        self.log: EventLog = ledger if ledger is not None else MemoryLog()
        self.clock = clock
        checks: dict[str, Check] = {}
        for c in (*self.admission, self.feedback, *self.completion):
            if c.name in checks and checks[c.name].identity() != c.identity():
                raise ValueError(f"two different checks are both named {c.name!r}")
            checks[c.name] = c
        self.checks = checks
        self.protected = tuple(protected) + self._protected_check_files()
        self.store = CheckpointStore(self.state_dir / "checkpoint")
        self.proposals_dir = self.state_dir / "proposals"
        self.scratch = self.state_dir / "scratch"
        # run state
        self.status = BrokerStatus.NEW  # changed only by `moved` (model/lifecycle.py)
        self.status_reason = ""
        self.base: str = ""  # the current candidate: the checkpoint, or the initial tree
        self.checkpoint: str | None = None
        self.generation = -1
        self.pinned_suites: dict[str, str] = {}
        self.pinned_policy: str | None = None
        self._t0 = 0.0
        self._seq = 0
        self._issued: dict[str, Evidence] = {}
        self._feedback_cache: Evidence | None = None
        self._rejected: dict[str, int] = {}
        self._verdicts: list[dict[str, Any]] = []
        self._proposals: list[str] = []
        self._checkpoint_by: str = ""
        self.counts = {"proposals": 0, "evaluated": 0, "admitted": 0, "rejected": 0,
                       "unsafe": 0, "invalid": 0, "stale": 0, "kept": 0, "restores": 0}
        self._proposals_at_checkpoint = 0
        self._completion: Completion | None = None
        # the model's states (model/evidence.py, model/checkpoint.py), set at start: every
        # decision below is asked of them, and each event that happens is applied to them
        self.g4: me.EvidenceState | None = None
        self.g5: mc.CheckpointState | None = None

    def _protected_check_files(self) -> tuple[str, ...]:
        """Workspace paths a check depends on: its named files that lie in the workspace, and
        relative argv items naming files in the workspace (a test script kept in the repo)."""
        ws = self.workspace.resolve()
        out = set()
        for c in self.checks.values():
            named = [Path(f).resolve() for f in c.identity().get("files", {})]
            cwd = ws / str(c.identity().get("cwd", "."))
            for a in c.identity().get("argv", [])[1:]:
                if isinstance(a, str) and not a.startswith("-") and not Path(a).is_absolute():
                    named.append((cwd / a).resolve())
            for p in named:
                if ws in p.parents and p.is_file():
                    out.add(p.relative_to(ws).as_posix())
        return tuple(sorted(out))

    @property
    def closed(self) -> bool:
        """True once revisions have stopped (escalated, exhausted, failed or completed)."""
        return self.status not in (BrokerStatus.NEW, BrokerStatus.OPEN)

    @property
    def records(self) -> Sequence[dict]:
        return self.log.records

    def _record(self, record: dict[str, Any]) -> None:
        """Append to the guard ledger a record of a declared type with its declared fields
        (engine/record/record_types.py `GUARD_TYPES`); anything else is the broker's bug."""
        GUARD_RECORDS.check_append(record, "the guard ledger")
        self.log.append(record)

    def _require_started(self) -> None:
        if self.status is BrokerStatus.NEW:
            raise RuntimeError("AdmissionBroker: call start() first")

    def _decide(self, outcome: Disposition, reason: str, *, proposal: str | None = None,
                candidate: str | None = None, evidence: tuple[Evidence, ...] = (),
                refreshed: Evidence | None = None, restored: Sequence[str] = ()) -> Decision:
        d = Decision(outcome, reason, proposal, candidate, self.checkpoint, evidence, refreshed,
                     tuple(restored))
        self._record({"type": "guard.decision", "outcome": outcome.value, "reason": reason,
                      "proposal": proposal, "candidate": candidate,
                      "checkpoint": self.checkpoint,
                      "evidence_ids": [e.id for e in evidence]})
        return d

    def _stop(self, status: BrokerStatus, reason: str) -> None:
        if self.status in FINAL:
            return
        self.status, self.status_reason = moved(self.status, status), reason
        self._record({"type": "guard.stop", "status": status.value, "reason": reason})

    def _fail(self, reason: str) -> None:
        self._stop(BrokerStatus.FAILED, reason)

    def _time_left(self) -> float | None:
        if self.policy.wall_budget_s is None:
            return None
        return max(0.01, self.policy.wall_budget_s - (self.clock() - self._t0))

    def _budget_spent(self) -> str | None:
        cap = self.policy.candidate_budget
        why = (f"candidate budget exhausted ({cap} evaluated)"
               if self.counts["evaluated"] >= cap else None)
        if refuse("budget.candidates", why):
            return why
        wall = self.policy.wall_budget_s
        why = (f"wall budget exhausted ({wall:g}s)"
               if wall is not None and self.clock() - self._t0 >= wall else None)
        return refuse("budget.wall", why)

    @staticmethod
    def _item(ev: Evidence) -> Item:
        """Evidence as the model sees it: its id covers the whole envelope."""
        return Item(ev.id, ev.check, ev.state_hash, ev.suite_hash, ev.verdict)

    def _model(self) -> tuple[me.EvidenceState, mc.CheckpointState]:
        assert self.g4 is not None and self.g5 is not None, "the broker has not started"
        return self.g4, self.g5

    def _ensure_base(self, advance: bool = False) -> list[str]:
        """If the workspace is not exactly the current candidate, restore it (exactly): the
        model's Restore (model/checkpoint.py), asked through the guard "workspace.restored".
        `advance`: the candidate just moved to a newly admitted checkpoint (not a recovery)."""
        try:
            now: str | None = tree_hash(self.workspace)
        except UnsafeTree:
            now = None  # e.g. a symlink out of the workspace was planted: restore removes it
        _, g5 = self._model()
        if now != g5.workspace:  # drifted behind the broker (model: Drift)
            self.g5 = g5 = mc.Drift(now or "<unsafe tree>").apply(g5)
        drifted = "the workspace is not the candidate" if now != self.base else None
        if refuse("workspace.restored", drifted) is None:
            return []
        self.g5 = mc.Restore().apply(g5)
        try:
            leftovers = self.store.restore(self.base, self.workspace)
        except CheckpointError as exc:
            self._stop(BrokerStatus.FAILED, f"cannot restore the current candidate: {exc}")
            raise
        if not advance:
            self.counts["restores"] += 1
        self._record({"type": "guard.advance" if advance else "guard.restore", "found": now,
                      "restored": self.base, "removed": leftovers})
        return leftovers
