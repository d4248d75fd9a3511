"""The admission transaction: only a gated candidate becomes the checkpoint, and completion
re-certifies it.

One revision goes through `AdmissionBroker.submit`:

1. the pinned suites and policy are re-checked (a change fails closed: no more revisions, no
   completion); the workspace is compared with the current candidate and, if anything edited it
   behind the broker's back, restored exactly (untracked leftovers removed);
2. the worker's reply is stored content-addressed and parsed into Keep | Patch | Escalate before
   anything is touched; an invalid reply is Keep (or Escalate, per policy);
3. a Patch must cite evidence this broker issued for the current tree and suite; stale evidence is
   refreshed, kept or escalated per policy and never drives a patch;
4. the Patch is applied to an isolated copy (protected paths refused), every admission check runs
   on a fresh copy of that, and only if all pass does the candidate become the checkpoint;
5. `complete()` re-runs the completion checks on a fresh copy of the checkpoint and, only if all
   pass, writes a receipt whose digest is anchored in the ledger.

A worker's self-report (the reply's `note`, files it writes) is recorded and never read.

Example (the guarded arm of an experiment, no runner needed)::

    from loopproof.engine.admission.broker import AdmissionBroker, GuardPolicy
    from loopproof.engine.admission.evidence import CommandCheck

    visible = CommandCheck("visible", ("python3", "/abs/tests/visible.py"))
    challenge = CommandCheck("challenge", ("python3", "/abs/tests/challenge.py"))
    broker = AdmissionBroker(workspace, state_dir, admission=[visible, challenge],
                             policy=GuardPolicy(candidate_budget=3))
    evidence = broker.start()               # the initial tree is checkpointed if it passes
    for _ in range(3):
        reply = coder(evidence.payload)     # any function of the evidence; returns JSON text
        decision = broker.submit(reply, based_on=evidence)
        if broker.closed:
            break
        evidence = broker.evidence()        # fresh, bound evidence for the current candidate
    completion = broker.complete()          # recertify; completion.receipt is the receipt

`run_revisions(broker, coder, revisions)` wraps that loop.

The transaction is split by step, each module readable knowing only those before it:
engine/admission/guard.py (policy, outcomes, logs), state.py (the broker's state), binding.py
(steps 1 and 3), admit.py (steps 2 and 4), recertify.py and receipt.py (step 5), proposals.py
(the proposal store). This module adds `start` and the loops that drive a broker.

Every decision is a rule of the executable model -- model/evidence.py (G4) and
model/checkpoint.py (G5) -- asked through a named guard (engine/policy/guards.py), as the runner
asks `model.step`; the broker keeps the model's states (`g4`, `g5`) and applies to them each
event that happens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from loopproof.engine.admission.evidence import Evidence, suite_hash
from loopproof.engine.admission.guard import (
    Completion,
    Decision,
    Disposition,
    EventLog,
    GuardPolicy,
    MemoryLog,
    file_policy,
)
from loopproof.engine.admission.proposals import stored_proposals
from loopproof.engine.admission.receipt import (
    RECEIPT_VERSION,
    load_receipt,
    verify_receipt,
    verify_receipt_in_run,
)
from loopproof.engine.admission.recertify import Recertification
from loopproof.engine.policy.guards import refuse
from loopproof.engine.system.errors import BadInput
from loopproof.model import checkpoint as mc
from loopproof.model import evidence as me
from loopproof.model.lifecycle import BrokerStatus, moved

__all__ = [  # the broker's public names (most defined in the modules named above)
    "RECEIPT_VERSION", "AdmissionBroker", "Completion", "Decision", "EventLog", "GuardPolicy",
    "MemoryLog", "Disposition", "file_policy", "load_receipt", "replay_outcomes", "run_revisions",
    "stored_proposals", "verify_receipt", "verify_receipt_in_run",
]


class AdmissionBroker(Recertification):
    """Guards one workspace: state-bound evidence, typed actions, a checkpoint, recertification.

    `admission` checks must all pass for a candidate to be admitted; `feedback` (default: the
    first admission check) is the check whose evidence a worker sees; `completion` (default: the
    admission checks) is re-run on the checkpoint by `complete()`. `protected` are globs of
    workspace-relative paths a Patch may not write; check files inside the workspace are added.
    """

    def start(self) -> Evidence:
        """Pin suites and policy, snapshot the initial tree, admit it if it passes, and return
        the first feedback evidence for it."""
        if self.status is not BrokerStatus.NEW:
            raise RuntimeError("AdmissionBroker.start: already started")
        if self.store.head() is not None:
            raise BadInput(str(self.state_dir), "state_dir", "already holds a checkpoint",
                           "give every guarded run its own empty state folder")
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.proposals_dir.mkdir(parents=True, exist_ok=True)
        self._t0 = self.clock()
        self.pinned_suites = {n: suite_hash(c.identity()) for n, c in sorted(self.checks.items())}
        self.pinned_policy = self.policy_digest() if self.policy_digest else None
        self.base = self.store.snapshot(self.workspace)  # raises UnsafeTree on an escaping link
        self.g4 = me.initial_evidence(self.base, self.pinned_suites, self.policy.on_stale)
        self.g5 = mc.initial_checkpoint(self.base, self.pinned_suites,
                                        tuple(c.name for c in self.admission),
                                        tuple(c.name for c in self.completion))
        self.status = moved(self.status, BrokerStatus.OPEN)
        self._record({"type": "guard.start", "tree": self.base, "suites": self.pinned_suites,
                      "policy": self.pinned_policy, "guard": asdict(self.policy),
                      "protected": list(self.protected)})
        evidence = self._evaluate(self.store.path_of(self.base), self.base, "initial")
        for e in evidence:  # the feedback check may already have judged the initial tree
            if e.check == self.feedback.name:
                self._feedback_cache = e
        commit = mc.Commit(self.base, tuple(e.id for e in evidence))
        if refuse("admission.admitted", commit.why_not(self.g5)) is None:
            self._commit(self.store.path_of(self.base), evidence, "initial", commit)
        return self.evidence()


# ---- the loops, for callers without a runner ----------------------------------------------------

def run_revisions(broker: AdmissionBroker, coder: Callable[[Evidence], bytes | str | None],
                  revisions: int) -> tuple[list[Decision], Completion]:
    """Start `broker`, ask `coder` for up to `revisions` replies (each given bound evidence for
    the current candidate), then complete. Returns every decision and the completion."""
    evidence: Evidence | None = broker.start()
    decisions: list[Decision] = []
    for _ in range(revisions):
        if broker.closed or evidence is None:
            break
        d = broker.submit(coder(evidence), based_on=evidence)
        decisions.append(d)
        evidence = None if broker.closed else broker.evidence()
    return decisions, broker.complete()


def replay_outcomes(broker: AdmissionBroker, proposals: Sequence[Mapping[str, Any]]
                    ) -> list[Disposition]:
    """Feed stored proposals (`stored_proposals`), in order, to a fresh `broker` (same workspace
    start, same checks), each citing the evidence current at that moment; return the outcomes.
    With deterministic checks, a guarded run's patch decisions replay identically (stale
    citations excepted: replay cites current evidence)."""
    evidence: Evidence | None = broker.start()
    outcomes = []
    for p in proposals:
        d = broker.submit(p.get("raw"), based_on=evidence)
        outcomes.append(d.outcome)
        evidence = None if broker.closed else broker.evidence()
    return outcomes
