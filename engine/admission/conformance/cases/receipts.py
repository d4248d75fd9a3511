"""Conformance cases, receipts and replay: digests anchored in the right ledger; the proposal
store.
"""

from __future__ import annotations

import json
from pathlib import Path

from loopproof.engine.admission.broker import (
    load_receipt,
    replay_outcomes,
    stored_proposals,
    verify_receipt,
)
from loopproof.engine.admission.conformance.cases.registry import case
from loopproof.engine.admission.conformance.lab import (
    BROKEN,
    CORRECT,
    OVERFIT,
    WRONG,
    Lab,
    reply_patch,
)
from loopproof.engine.record.ledger import Ledger
from loopproof.engine.system.canonical import digest
from loopproof.engine.system.errors import LedgerCorrupt


@case("CF007", "receipt tampered",
      obligation="receipt: its digest covers its content and is anchored in the ledger",
      fault="a verdict in receipt.json is edited; then the digest is recomputed to match",
      expected="verification fails: first 'does not match its digest', then 'not anchored'")
def cf007(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    b.start()
    c = b.complete()
    assert c.completed and c.receipt_path is not None
    records = Ledger.open(lab.ledger.path).records
    receipt = load_receipt(c.receipt_path)
    assert verify_receipt(receipt, records, b.store) == []
    receipt["verdicts"][0]["verdict"] = "fail" if receipt["verdicts"][0]["verdict"] == "pass" \
        else "pass"
    c.receipt_path.write_text(json.dumps(receipt))
    problems = verify_receipt(load_receipt(c.receipt_path), records, b.store)
    assert any("does not match its digest" in p for p in problems), problems
    body = {k: v for k, v in receipt.items() if k != "digest"}
    receipt["digest"] = digest(body)
    problems = verify_receipt(receipt, records, b.store)
    assert any("not anchored" in p for p in problems), problems
    assert any("ledger says" in p for p in problems), problems


@case("CF034", "every proposal kept content-addressed for replay",
      obligation="typed actions: every proposal, admitted or not, is kept for replay",
      fault="a session mixing invalid, rejected, stale and admitted proposals",
      expected="each proposal digest is in the ledger and names a stored file whose content "
               "hashes to it and holds the raw reply; the receipt lists them in order")
def cf034(tmp: Path) -> None:
    lab = Lab(tmp, WRONG)
    b = lab.broker()
    ev = b.start()
    replies = ["garbage", reply_patch({"calc.py": BROKEN}), reply_patch({"calc.py": CORRECT})]
    for r in replies:
        b.submit(r, based_on=ev)
    b.submit(reply_patch({"calc.py": OVERFIT}), based_on=ev)  # stale now
    recs = [r for r in lab.ledger.records if r["type"] == "guard.proposal"]
    assert len(recs) == 4
    for rec, raw in zip(recs, [*replies, None], strict=True):
        stored = json.loads((b.proposals_dir / f"{rec['digest']}.json").read_text())
        body = {k: v for k, v in stored.items() if k != "digest"}
        assert digest(body) == rec["digest"] == stored["digest"]
        if raw is not None:
            assert stored["raw"] == raw
    c = b.complete()
    assert c.receipt["proposals"] == [r["digest"] for r in recs]


@case("CF036", "receipt checked against another ledger",
      obligation="receipt: the anchor is in this run's ledger, not any ledger",
      fault="a genuine receipt is verified against the ledger of a different run",
      expected="verification reports 'not anchored'")
def cf036(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b1 = lab.broker()
    b1.start()
    c1 = b1.complete()
    other = Ledger.create(tmp / "other.jsonl", {"type": "guard.run"})
    problems = verify_receipt(c1.receipt, other.records)
    assert any("not anchored" in p for p in problems)
    assert verify_receipt(c1.receipt, Ledger.open(lab.ledger.path).records) == []


@case("CF043", "stored proposals replay to the same decisions",
      obligation="typed actions: every proposal is kept content-addressed so a run can be replayed",
      fault="a session of invalid, admitted, rejected and kept replies is replayed from the "
            "proposal store into a fresh broker on the same start",
      expected="the replayed outcomes equal the recorded ones, and the replay ends on the same "
               "checkpoint")
def cf043(tmp: Path) -> None:
    lab = Lab(tmp, WRONG)
    b = lab.broker()
    replies = ["STATUS: DONE", reply_patch({"calc.py": CORRECT}), reply_patch({"calc.py": OVERFIT}),
               '{"action": "keep"}']
    ev = b.start()
    recorded = []
    for r in replies:
        recorded.append(b.submit(r, based_on=ev).outcome)
        ev = b.evidence()
    proposals = stored_proposals(b.state_dir, lab.ledger.records)
    assert [p["raw"] for p in proposals] == replies
    (lab.ws / "calc.py").write_text(WRONG)  # the same start
    fresh = lab.broker()
    assert replay_outcomes(fresh, proposals) == recorded
    assert fresh.checkpoint == b.checkpoint


@case("CF044", "altered stored proposal",
      obligation="typed actions: the proposal store is content-addressed; an edit is detected",
      fault="a stored proposal's raw reply is edited after the run",
      expected="reading the proposals for replay raises LedgerCorrupt naming the proposal")
def cf044(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    d = b.submit(reply_patch({"calc.py": BROKEN}), based_on=ev)
    path = b.proposals_dir / f"{d.proposal}.json"
    stored = json.loads(path.read_text())
    stored["raw"] = reply_patch({"calc.py": CORRECT})
    path.write_text(json.dumps(stored))
    try:
        stored_proposals(b.state_dir, lab.ledger.records)
        raise AssertionError("an altered proposal was read back")
    except LedgerCorrupt as exc:
        assert str(d.proposal)[:12] in str(exc)
