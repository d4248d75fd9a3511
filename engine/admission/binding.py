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

from engine.admission.evidence import Check, Evidence, run_check, stale_reason, suite_hash
from engine.admission.state import BrokerState


class Binding(BrokerState):
    """Issuing, binding and delivering evidence (see the module docstring)."""

    def _pins_hold(self) -> bool:
        """Re-check the pinned suites and policy; a change stops everything (fail closed)."""
        for name, pinned in self.pinned_suites.items():
            now = suite_hash(self.checks[name].identity())
            if now != pinned:
                self._stop("failed", f"suite {name!r} changed after it was pinned "
                                     f"({pinned[:12]} -> {now[:12]})")
                return False
        if self.policy_digest is not None:
            now_p = self.policy_digest()
            if now_p != self.pinned_policy:
                self._stop("failed", f"policy changed after it was pinned "
                                     f"({str(self.pinned_policy)[:12]} -> {now_p[:12]})")
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
        self._verdicts.append({"phase": phase, "check": check.name, "candidate": ev.state_hash,
                               "verdict": ev.verdict, "evidence_id": ev.id,
                               "execution_id": ev.execution_id})
        self.log.append({"type": "guard.evidence", "id": ev.id, "phase": phase,
                         **ev.to_json()})
        if ev.state_hash != candidate:  # the copy differs from what was asked: fail closed
            self._fail(f"check {check.name!r} saw tree {ev.state_hash[:12]}, "
                       f"not {candidate[:12]}")
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
        """Why `evidence` may not drive a revision of the current candidate, or None."""
        if evidence is None:
            return "no evidence was cited"
        if self._issued.get(evidence.id) != evidence:
            return (f"evidence {evidence.execution_id!r} was not issued by this broker "
                    f"(edited, forged or from another run)")
        pinned = self.pinned_suites.get(evidence.check)
        if pinned is None:
            return f"evidence names unknown check {evidence.check!r}"
        return stale_reason(evidence, self.base, pinned)

    def deliver(self, evidence: Evidence | None) -> Evidence | None:
        """The gate between evidence and a worker: `evidence` itself (the same object) if it
        binds to the current tree and suite; otherwise, per policy, fresh evidence (refresh),
        None (keep) or None with revisions stopped (escalate)."""
        self._require_started()
        self._ensure_base()
        why = self._binding(evidence)
        if why is None:
            return evidence
        self.counts["stale"] += 1
        self.log.append({"type": "guard.stale", "where": "deliver", "reason": why})
        if self.policy.on_stale == "refresh" and not self.closed:
            return self.evidence()
        if self.policy.on_stale == "escalate":
            self._stop("escalated", f"stale evidence: {why}")
        return None
