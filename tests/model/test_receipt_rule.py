"""The receipt and proposal digest rule (model/receipts.py): its Z3 encoding equals it, the engine
asks it with its messages unchanged, the broken variants' counterexamples are refused by the real
rule, and the proof needs its one assumption (an injective digest).

The differential test draws digests from a small alphabet (so equal and unequal ones both occur)
and an anchor set, and requires the encoding (proofs/g5_receipts.py), on string terms, to accept
exactly what the rule accepts.
"""

from __future__ import annotations

import json

import pytest
import z3
from hypothesis import event, given
from hypothesis import strategies as st

from loopproof.engine.admission.proposals import store_proposal, stored_proposals
from loopproof.engine.admission.receipt import verify_receipt
from loopproof.engine.policy.guards import switched_off
from loopproof.engine.system.canonical import digest
from loopproof.engine.system.errors import LedgerCorrupt
from loopproof.model import receipts as mr
from loopproof.proofs import g5_receipts as g5r
from tests.support.discharged import counterexample

DIGESTS = st.sampled_from(["h0", "h1", "h2"])


def _anchored(anchors):
    return lambda d: z3.Or([d == z3.StringVal(a) for a in sorted(anchors)] or [z3.BoolVal(False)])


def _true(f: z3.BoolRef) -> bool:
    v = z3.simplify(f)
    assert z3.is_true(v) or z3.is_false(v), v
    return z3.is_true(v)


@given(body=DIGESTS, stated=DIGESTS, anchors=st.frozensets(DIGESTS))
def test_the_receipt_encoding_accepts_exactly_what_the_rule_accepts(body, stated, anchors):
    said = mr.receipt_problems(body, stated, anchors)
    event(f"refused for: {sorted(r for r, _ in said)}")
    enc = g5r.receipt_accepts(z3.StringVal(body), z3.StringVal(stated), _anchored(anchors))
    assert _true(enc) == (said == []), (body, stated, anchors)


@given(body=DIGESTS, stated=DIGESTS, named=DIGESTS)
def test_the_proposal_encoding_accepts_exactly_what_the_rule_accepts(body, stated, named):
    said = mr.proposal_problems(body, stated, named)
    event(f"accepted: {said == []}")
    enc = g5r.proposal_accepts(z3.StringVal(body), z3.StringVal(stated), z3.StringVal(named))
    assert _true(enc) == (said == []), (body, stated, named)


def test_each_refusal_is_named():
    assert mr.receipt_problems("h0", "h0", {"h0"}) == []
    assert mr.receipt_problems("h1", "h0", {"h0"}) == [("digest", mr.EDITED)]
    assert mr.receipt_problems("h0", "h0", set()) == [("anchored", mr.UNANCHORED)]
    assert [r for r, _ in mr.receipt_problems("h1", "h0", ())] == ["digest", "anchored"]
    assert mr.proposal_problems("h0", "h0", "h0") == []
    assert mr.proposal_problems("h1", "h0", "h0") == [("digest", mr.ALTERED)]  # body edited
    assert mr.proposal_problems("h0", "h1", "h0") == [("digest", mr.ALTERED)]  # field edited


def _receipt() -> tuple[dict, list[dict]]:
    body = {"version": 1, "checkpoint": {"tree_hash": "t0"}, "verdicts": []}
    receipt = {**body, "digest": digest(body)}
    return receipt, [{"type": "guard.receipt", "digest": receipt["digest"]}]


def test_the_engine_asks_the_receipt_rule_with_its_messages_unchanged(monkeypatch):
    receipt, records = _receipt()
    assert verify_receipt(receipt, records) == []
    edited = {**receipt, "checkpoint": {"tree_hash": "t1"}}  # the original digest kept
    assert verify_receipt(edited, records) == [
        "receipt content does not match its digest (edited after issue)"]
    assert verify_receipt(receipt, []) == ["receipt digest is not anchored in the ledger"]
    with switched_off("receipt.digest"):
        assert verify_receipt(edited, records) == []
    with switched_off("receipt.anchored"):
        assert verify_receipt(receipt, []) == []
    monkeypatch.setattr(mr, "receipt_problems", lambda *a: [("anchored", "planted")])
    assert verify_receipt(receipt, records) == ["planted"]


def test_the_engine_asks_the_proposal_rule(tmp_path, monkeypatch):
    (tmp_path / "proposals").mkdir()
    body = {"type": "action", "files": {"a.py": "x = 1\n"}}
    d = store_proposal(tmp_path / "proposals", {**body, "digest": digest(body)})
    records = [{"type": "guard.proposal", "digest": d}]
    assert stored_proposals(tmp_path, records) == [{**body, "digest": d}]
    path = tmp_path / "proposals" / f"{d}.json"
    path.write_text(json.dumps({**body, "files": {"a.py": "x = 2\n"}, "digest": d}))
    with pytest.raises(LedgerCorrupt, match="does not match its digest"):
        stored_proposals(tmp_path, records)
    with switched_off("proposal.digest"):
        assert len(stored_proposals(tmp_path, records)) == 1
    path.write_text(json.dumps({**body, "digest": d}))
    monkeypatch.setattr(mr, "proposal_problems", lambda *a: [("digest", "planted")])
    with pytest.raises(LedgerCorrupt):
        stored_proposals(tmp_path, records)


@pytest.mark.parametrize("ob_id", ["G5-broken-receipt-anchor-only",
                                   "G5-broken-proposal-digest-field-only"])
def test_each_broken_counterexample_is_refused_by_the_real_rule(tmp_path_factory, ob_id):
    """The trace's labels are digests and bodies; the real rule on them refuses the content."""
    tr = counterexample(tmp_path_factory, ob_id)
    start, shown = tr.steps[0].state, tr.steps[1].state
    assert shown["digest_of_body"] != shown["stated_digest"]
    if ob_id.startswith("G5-broken-receipt"):
        assert shown["body"] != start["issued"]
        said = mr.receipt_problems(shown["digest_of_body"], shown["stated_digest"],
                                   {start["anchored"]})
    else:
        assert shown["stored"] != start["reply"]
        said = mr.proposal_problems(shown["digest_of_body"], shown["stated_digest"],
                                    start["named"])
    assert [r for r, _ in said] == ["digest"]


def test_the_proof_needs_an_injective_digest(monkeypatch):
    """Without the assumption two bodies may share a digest, and the proved obligation fails."""
    assert g5r.check_binds() is None
    monkeypatch.setattr(g5r, "injective", lambda: z3.BoolVal(True))
    assert g5r.check_binds() is not None
