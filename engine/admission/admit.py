"""Admission: one worker reply becomes a decision, and only a gated candidate becomes the
checkpoint.

`submit` re-checks the pins, restores the workspace to the current candidate, stores the reply
(engine/admission/proposals.py) and parses it into Keep | Patch | Escalate before anything is
touched. A Patch must cite evidence that binds (engine/admission/binding.py); it is applied to an
isolated copy (protected paths refused), every admission check runs on a fresh copy of that, and
only if all pass does `CheckpointStore.commit` (which checks the evidence again) move HEAD.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from loopproof.engine.admission.actions import (
    Escalate,
    Keep,
    Patch,
    action_record,
    apply_patch,
    parse_reply,
    patch_violations,
)
from loopproof.engine.admission.binding import Binding
from loopproof.engine.admission.checkpoint import CheckpointError
from loopproof.engine.admission.evidence import Evidence
from loopproof.engine.admission.guard import Decision, Disposition
from loopproof.engine.admission.proposals import store_proposal
from loopproof.engine.policy.guards import refuse
from loopproof.engine.system.trees import copy_tree, remove_tree, tree_hash
from loopproof.model import checkpoint as mc
from loopproof.model import evidence as me
from loopproof.model.lifecycle import BrokerStatus


class Admission(Binding):
    """`submit` and the checkpoint commit (see the module docstring)."""

    def submit(self, reply: bytes | str | None, based_on: Evidence | None = None) -> Decision:
        """Parse, store and (for a Patch) evaluate one worker reply. See the module docstring.
        A damaged checkpoint store stops the broker (fail closed) instead of raising."""
        self._require_started()
        try:
            return self._submit(reply, based_on)
        except CheckpointError as exc:
            self._stop(BrokerStatus.FAILED, f"checkpoint store damaged: {exc}")
            return self._decide(Disposition.CLOSED, self.status_reason)

    def _submit(self, reply: bytes | str | None, based_on: Evidence | None) -> Decision:
        if self.closed:
            return self._decide(Disposition.CLOSED, f"revisions stopped: {self.status_reason}")
        if not self._pins_hold():
            return self._decide(Disposition.CLOSED, self.status_reason)
        restored = self._ensure_base()
        parsed = parse_reply(reply, on_invalid=self.policy.on_invalid)
        proposal = self._store_proposal(action_record(parsed, reply))
        self.counts["proposals"] += 1
        extra = {"proposal": proposal, "restored": restored}
        if not parsed.valid:
            self.counts["invalid"] += 1
            if isinstance(parsed.action, Escalate):
                self._stop(BrokerStatus.ESCALATED, parsed.action.reason)
                return self._decide(Disposition.ESCALATED, parsed.action.reason, **extra)
            return self._decide(Disposition.INVALID, f"kept: {parsed.problem}", **extra)
        if isinstance(parsed.action, Keep):
            self.counts["kept"] += 1
            return self._decide(Disposition.KEPT, parsed.action.reason, **extra)
        if isinstance(parsed.action, Escalate):
            self._stop(BrokerStatus.ESCALATED, f"worker escalated: {parsed.action.reason}")
            return self._decide(Disposition.ESCALATED, parsed.action.reason, **extra)
        return self._patch(parsed.action, based_on, extra)

    def _patch(self, patch: Patch, based_on: Evidence | None, extra: dict) -> Decision:
        if (why := self._budget_spent()) is not None:
            self._stop(BrokerStatus.EXHAUSTED, why)
            return self._decide(Disposition.EXHAUSTED, why, **extra)
        why = self._binding(based_on)
        if why is not None:
            fresh, stopped = self._stale(based_on, why, "submit", extra["proposal"])
            if stopped and self.status is BrokerStatus.ESCALATED:
                return self._decide(Disposition.ESCALATED, why, **extra)
            return self._decide(Disposition.STALE, why, refreshed=fresh, **extra)
        problems = patch_violations(patch, self.workspace, self.protected)
        if refuse("patch.paths", "; ".join(problems) or None):
            self.counts["unsafe"] += 1
            self.counts["rejected"] += 1
            return self._decide(Disposition.REJECTED, "unsafe patch: " + "; ".join(problems), **extra)
        parent = Path(tempfile.mkdtemp(prefix="candidate-", dir=self.scratch))
        copy = parent / "candidate"
        try:
            copy_tree(self.store.path_of(self.base), copy)
            try:
                apply_patch(patch, copy, self.protected)
            except (OSError, ValueError) as exc:
                self.counts["rejected"] += 1
                return self._decide(Disposition.REJECTED, f"patch cannot be applied: {exc}", **extra)
            candidate = tree_hash(copy)
            if refuse("patch.changes", "the patch changes nothing"
                      if candidate == self.base else None):
                self.counts["kept"] += 1
                return self._decide(Disposition.KEPT, "the patch changes nothing", candidate=candidate,
                                    **extra)
            seen = self._rejected.get(candidate, 0)
            if refuse("repeat.limit", "rejected before" if seen >= self.policy.repeat_limit
                      else None):
                why = (f"tree {candidate[:12]} was already rejected {seen} time(s); "
                       f"escalating instead of spending the budget on it again")
                self._stop(BrokerStatus.ESCALATED, why)
                return self._decide(Disposition.ESCALATED, why, candidate=candidate, **extra)
            self.counts["evaluated"] += 1
            evidence = self._evaluate(copy, candidate, "admission")
            commit = mc.Commit(candidate, tuple(e.id for e in evidence))
            why_not = refuse("admission.admitted", commit.why_not(self._model()[1]))
            if why_not is None and not self.closed:
                self._commit(copy, evidence, extra["proposal"], commit, based_on)
                self.counts["admitted"] += 1
                return self._decide(Disposition.ADMITTED, "every admission check passed",
                                    candidate=candidate, evidence=tuple(evidence), **extra)
            self.counts["rejected"] += 1
            self._rejected[candidate] = seen + 1
            failing = next((e for e in evidence if e.verdict != "pass"), None)
            why = (f"{failing.check}: {failing.verdict} ({failing.payload.get('detail', '')})"
                   if failing else self.status_reason or str(why_not))
            return self._decide(Disposition.REJECTED, why, candidate=candidate,
                                evidence=tuple(evidence), **extra)
        finally:
            remove_tree(parent, best_effort=True)

    def _commit(self, source: Path, evidence: Sequence[Evidence], proposal: str,
                commit: mc.Commit | None = None, based_on: Evidence | None = None) -> None:
        """`source` becomes the checkpoint: the store's own check first, then the model's
        events (the checkpoint's Commit, and -- for a patch -- the evidence's Admit, driven by
        the evidence it cited)."""
        required = {c.name: self.pinned_suites[c.name] for c in self.admission}
        info = self.store.commit(source, evidence, required)
        g4, g5 = self._model()
        commit = commit or mc.Commit(info.tree_hash, tuple(e.id for e in evidence))
        self.g5 = commit.apply(g5)
        if based_on is not None:
            self.g4 = me.Admit(self._item(based_on), info.tree_hash).apply(g4)
        self.checkpoint, self.generation, self.base = info.tree_hash, info.generation, info.tree_hash
        self._checkpoint_by = proposal
        self._proposals_at_checkpoint = self.counts["proposals"]
        for ev in evidence:
            if ev.check == self.feedback.name:
                self._feedback_cache = ev
        self._record({"type": "guard.checkpoint", "tree": info.tree_hash,
                      "generation": info.generation, "evidence_ids": list(info.evidence_ids),
                      "proposal": proposal})
        self._ensure_base(advance=True)

    def _store_proposal(self, record: dict) -> str:
        d = store_proposal(self.proposals_dir, record)
        self._proposals.append(d)
        self._record({"type": "guard.proposal", "digest": d, "kind": record["action"]["kind"],
                      "valid": record["valid"], "problem": record["problem"]})
        return d
