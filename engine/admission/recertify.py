"""Completion: the checkpoint is re-certified on a fresh copy before any receipt is issued.

Why again: admission judged the candidate when it was proposed; the checkpoint store, the
workspace or the suites may have changed since. `complete()` re-checks the pins, restores the
workspace, re-runs the completion checks on a fresh copy of the checkpoint snapshot and, only if
every one passes on exactly that tree under the pinned suite (the model's Recertify,
model/checkpoint.py, asked through the guard "recertify.admitted"), writes the receipt
(engine/admission/receipt.py) and anchors its digest in the ledger (`guard.receipt`).
"""

from __future__ import annotations

from loopproof.engine.admission.admit import Admission
from loopproof.engine.admission.checkpoint import CheckpointError
from loopproof.engine.admission.guard import Completion
from loopproof.engine.admission.receipt import build_receipt
from loopproof.engine.policy.guards import refuse
from loopproof.engine.record.ledger import canonical
from loopproof.model import checkpoint as mc
from loopproof.model.lifecycle import BrokerStatus, moved


class Recertification(Admission):
    """`complete()` (see the module docstring)."""

    def complete(self) -> Completion:
        """Recertify the checkpoint on a fresh copy and, if every completion check passes,
        write the receipt and anchor its digest in the ledger."""
        self._require_started()
        if self._completion is not None:
            return self._completion
        if self.status is BrokerStatus.FAILED or not self._pins_hold():
            return Completion(False, f"cannot complete: {self.status_reason}")
        try:
            restored = self._ensure_base()
        except CheckpointError:
            return Completion(False, f"cannot complete: {self.status_reason}")
        if self.checkpoint is None:
            self._stop(BrokerStatus.FAILED, "no candidate passed admission; nothing to complete")
            return Completion(False, self.status_reason)
        try:
            source = self.store.path_of(self.checkpoint)
        except CheckpointError as exc:
            self._stop(BrokerStatus.FAILED, f"checkpoint snapshot unusable: {exc}")
            return Completion(False, self.status_reason)
        recert = [self._run(c, source, self.checkpoint, "recertification")
                  for c in self.completion]
        bad = [e for e in recert if e.verdict != "pass" or e.state_hash != self.checkpoint
               or e.suite_hash != self.pinned_suites[e.check]]
        certify = mc.Recertify(tuple(e.id for e in recert))
        why_not = refuse("recertify.admitted", certify.why_not(self._model()[1]))
        if why_not is not None or self.status is BrokerStatus.FAILED:
            why = "; ".join(f"{e.check}: {e.verdict} ({e.payload.get('detail', '')})"
                            for e in bad) or self.status_reason or str(why_not)
            self._stop(BrokerStatus.FAILED, f"recertification failed: {why}")
            self._record({"type": "guard.recertification_failed", "reason": why})
            return Completion(False, self.status_reason)
        self.g5 = certify.apply(self._model()[1])
        receipt = build_receipt(self, recert, restored)
        path = self.state_dir / "receipt.json"
        path.write_bytes(canonical(receipt))
        self._record({"type": "guard.receipt", "digest": receipt["digest"],
                      "checkpoint": self.checkpoint})
        previous = self.status_reason
        self.status = moved(self.status, BrokerStatus.COMPLETED)
        self.status_reason = "recertified"
        self._completion = Completion(True, "recertified" + (f" after: {previous}" if previous
                                                             else ""), receipt, path)
        return self._completion
