"""Binding: evidence is issued by the broker, for one tree and one pinned suite, and only
evidence that still binds may drive a revision.

Why: a worker shown evidence about an older tree, another run, or an edited copy would patch
against facts that no longer hold. Every check run here gets an id this broker issued and is
recorded (`guard.evidence`); `_binding` names why cited evidence does not bind (forged, unknown
check, another tree, another suite), and `deliver` gives a worker only evidence that binds. The
suites and policy pinned at `start` are re-checked before each revision: a change fails closed.
"""

from __future__ import annotations

from pathlib import Path

from loopproof.engine.admission.evidence import Check, Evidence, run_check, suite_hash
from loopproof.engine.admission.state import BrokerState
from loopproof.engine.policy.guards import refuse
from loopproof.model import checkpoint as mc
from loopproof.model import evidence as me
from loopproof.model import policy as mp
from loopproof.model.lifecycle import BrokerStatus


class Binding(BrokerState):
    """Issuing, binding and delivering evidence (see the module docstring). Every decision is
    the evidence model's (model/evidence.py), asked through a named guard
    (engine/policy/guards.py); every event is applied to the broker's model states."""

    def _observe_suites(self) -> None:
        """Tell the model what each pinned suite hashes to now (the environment's ChangeSuite)."""
        g4, _ = self._model()
        for name in self.pinned_suites:
            now = suite_hash(self.checks[name].identity())
            if g4.suite_now(name) != now:
                g4 = me.ChangeSuite(name, now).apply(g4)
        self.g4 = g4

    def _pins_hold(self) -> bool:
        """Re-check the pinned suites and policy; a change stops everything (fail closed)."""
        self._observe_suites()
        g4, _ = self._model()
        why = refuse("evidence.pins", me.why_pins_changed(g4))
        if why is not None:
            if g4.open:
                self.g4 = me.Halt().apply(g4)
            self._stop(BrokerStatus.FAILED, why)
            return False
        if self.policy_digest is not None:
            now_p = self.policy_digest()
            # G6's rule for a stage (model/policy.py): it runs only under the pinned policy
            changed = mp.Stage("revision").why_not(mp.PolicyState(
                current=now_p, pinned=str(self.pinned_policy)))
            if refuse("policy.digest", changed) is not None:
                self._stop(BrokerStatus.FAILED, str(changed))
                return False
        return True

    def _next_id(self, check: Check) -> str:
        self._seq += 1
        return f"x{self._seq:05d}.{check.name}"

    def _run(self, check: Check, source: Path, candidate: str, phase: str,
             timeout_s: float | None = None) -> Evidence:
        ev = run_check(check, source, self._next_id(check), scratch=self.scratch,
                       timeout_s=timeout_s)
        self._issued[ev.id] = ev
        item = self._item(ev)
        g4, g5 = self._model()
        if g4.suite_now(ev.check) != ev.suite_hash:  # the suite changed under the check
            g4 = me.ChangeSuite(ev.check, ev.suite_hash).apply(g4)
        self.g4, self.g5 = me.Issue(item).apply(g4), mc.Issue(item).apply(g5)
        self._verdicts.append({"phase": phase, "check": check.name, "candidate": ev.state_hash,
                               "verdict": ev.verdict, "evidence_id": ev.id,
                               "execution_id": ev.execution_id})
        self._record({"type": "guard.evidence", "id": ev.id, "phase": phase,
                      **ev.to_json()})
        other = (f"check {check.name!r} saw tree {ev.state_hash[:12]}, not {candidate[:12]}"
                 if ev.state_hash != candidate else None)
        if refuse("evidence.same_tree", other) is not None:  # fail closed
            self._fail(str(other))
        return ev

    def _evaluate(self, source: Path, candidate: str, phase: str) -> list[Evidence]:
        """Run the admission checks in order on fresh copies of `source`; stop at the first
        non-pass (a later check cannot rescue an earlier failure)."""
        out = []
        for check in self.admission:
            ev = self._run(check, source, candidate, phase, self._time_left())
            out.append(ev)
            if ev.verdict != "pass":
                break
        return out

    def evidence(self) -> Evidence:
        """Evidence from the feedback check bound to the current candidate (run if needed).
        Raises CheckpointError (and stops the broker) if the checkpoint store was damaged."""
        self._require_started()
        self._ensure_base()
        cached = self._feedback_cache
        if cached is not None and self._binding(cached) is None:
            return cached
        ev = self._run(self.feedback, self.store.path_of(self.base), self.base, "feedback",
                       self._time_left())
        self._feedback_cache = ev
        return ev

    def _binding(self, evidence: Evidence | None) -> str | None:
        """Why `evidence` may not drive a revision of the current candidate, or None: the
        model's `why_unbound` (issued by this broker, this tree, the pinned suite)."""
        g4, _ = self._model()
        cited = None if evidence is None else self._item(evidence)
        return refuse("evidence.bound", me.why_unbound(g4, cited))

    def _stale(self, evidence: Evidence | None, why: str, where: str,
               proposal: str | None = None) -> tuple[Evidence | None, bool]:
        """Cited evidence that does not bind, answered as the guard policy says (the model's
        Refresh, Keep or Escalate): (the fresh evidence, or None; whether revisions stopped)."""
        self.counts["stale"] += 1
        self._record({"type": "guard.stale", "where": where, "reason": why,
                      **({"proposal": proposal} if proposal else {})})
        cited = None if evidence is None else self._item(evidence)
        g4, _ = self._model()
        if self.policy.on_stale == "refresh" and not self.closed:
            fresh = self.evidence()
            refresh = me.Refresh(cited, self._item(fresh))
            if (not_fresh := refresh.why_not(self._model()[0])) is not None:
                self._fail(f"no fresh evidence binds: {not_fresh}")  # fail closed
                return None, True
            self.g4 = refresh.apply(self._model()[0])
            return fresh, False
        if self.policy.on_stale == "escalate":
            self.g4 = me.Escalate(cited).apply(g4)
            self._stop(BrokerStatus.ESCALATED, f"stale evidence: {why}")
            return None, True
        self.g4 = me.Keep(cited).apply(g4)
        return None, False

    def deliver(self, evidence: Evidence | None) -> Evidence | None:
        """The gate between evidence and a worker: `evidence` itself (the same object) if it
        binds to the current tree and suite; otherwise, per policy, fresh evidence (refresh),
        None (keep) or None with revisions stopped (escalate)."""
        self._require_started()
        self._ensure_base()
        if not self.closed:
            self._pins_hold()
        why = self._binding(evidence)
        if why is None and evidence is not None:
            self.g4 = me.Bind(self._item(evidence)).apply(self._model()[0])
            return evidence
        fresh, _ = self._stale(evidence, why or "no evidence was cited", "deliver")
        return fresh
