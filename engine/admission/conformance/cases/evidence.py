"""Conformance cases, G4 and G6: evidence binds to the tree and suite it describes; suites and
policy are pinned.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from loopproof.engine.admission.broker import (
    Disposition,
)
from loopproof.engine.admission.conformance.cases.registry import case, no_receipt, record_types
from loopproof.engine.admission.conformance.lab import (
    BROKEN,
    CORRECT,
    OVERFIT,
    WRONG,
    Lab,
    reply_patch,
)
from loopproof.engine.admission.evidence import stale_reason
from loopproof.engine.system.trees import tree_hash


@case("CF001", "stale evidence replayed",
      obligation="G4: evidence drives a revision only while its tree and suite hashes are current",
      fault="after a patch moved the checkpoint, a second patch cites the evidence of the old tree",
      expected="outcome stale; the patch is not applied; the checkpoint stays; fresh evidence "
               "bound to the new tree is returned")
def cf001(tmp: Path) -> None:
    lab = Lab(tmp, WRONG)
    b = lab.broker()
    old = b.start()
    assert old.verdict == "fail" and b.checkpoint is None
    d1 = b.submit(reply_patch({"calc.py": CORRECT}), based_on=old)
    assert d1.outcome is Disposition.ADMITTED
    ckpt = b.checkpoint
    d2 = b.submit(reply_patch({"calc.py": BROKEN}), based_on=old)
    assert d2.outcome is Disposition.STALE, d2
    assert b.checkpoint == ckpt and lab.program() == CORRECT
    assert d2.refreshed is not None and d2.refreshed.state_hash == ckpt
    assert b.counts["evaluated"] == 1


@case("CF002", "edit after verify",
      obligation="G4/G5: evidence names the tree it verified; only a parsed Patch changes the candidate",
      fault="after the workspace was verified, something edits a file in it behind the broker",
      expected="the old evidence does not bind to the edited tree; the workspace is restored to "
               "the checkpoint before the next action; the edit never reaches the checkpoint")
def cf002(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    ckpt = b.checkpoint
    assert ckpt == ev.state_hash
    (lab.ws / "calc.py").write_text(BROKEN)
    edited = tree_hash(lab.ws)
    assert stale_reason(ev, edited, ev.suite_hash) is not None
    d = b.submit(json.dumps({"action": "keep"}), based_on=ev)
    assert d.outcome is Disposition.KEPT
    assert lab.program() == CORRECT and tree_hash(lab.ws) == ckpt
    assert "guard.restore" in record_types(lab)
    assert b.store.head().tree_hash == ckpt


@case("CF003", "evidence from another tree",
      obligation="G4: only evidence this broker issued for this tree can drive a revision",
      fault="a patch cites evidence produced by another run on another workspace, and a forged "
            "copy of it relabelled with the current tree hash",
      expected="both are refused as stale; nothing is evaluated; the checkpoint stays")
def cf003(tmp: Path) -> None:
    other = Lab(tmp / "other", WRONG)
    foreign = other.broker().start()
    lab = Lab(tmp / "main", WRONG)
    b = lab.broker()
    own = b.start()
    for cited in (foreign, replace(foreign, state_hash=own.state_hash)):
        d = b.submit(reply_patch({"calc.py": CORRECT}), based_on=cited)
        assert d.outcome is Disposition.STALE, d
        assert "not issued by this broker" in d.reason
    assert b.counts["evaluated"] == 0 and b.checkpoint is None and lab.program() == WRONG


@case("CF004", "evidence payload edited",
      obligation="G4: an evidence id covers the whole envelope",
      fault="the payload of issued evidence is edited from fail to pass before it is cited",
      expected="the edited evidence has another id and is refused; the checkpoint stays empty")
def cf004(tmp: Path) -> None:
    lab = Lab(tmp, WRONG)
    b = lab.broker()
    ev = b.start()
    forged = replace(ev, payload={**ev.payload, "verdict": "pass"})
    assert forged.id != ev.id
    d = b.submit(reply_patch({"calc.py": OVERFIT}), based_on=forged)
    assert d.outcome is Disposition.STALE and b.checkpoint is None
    assert b.deliver(forged) != forged


@case("CF005", "suite changed after pass",
      obligation="G4/G6: the suite hash covers the check's argv, files and working directory, "
                 "pinned at start",
      fault="after the checkpoint passed, the gate script is edited so that everything passes",
      expected="the next revision and completion fail closed naming the changed suite; no receipt")
def cf005(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    assert b.checkpoint is not None
    lab.gate_file.write_text("import sys\nsys.exit(0)\n")
    d = b.submit(reply_patch({"calc.py": BROKEN}), based_on=ev)
    assert d.outcome is Disposition.CLOSED and "suite" in d.reason and "changed" in d.reason
    c = b.complete()
    assert not c.completed and "changed" in c.reason
    assert lab.program() == CORRECT
    no_receipt(lab)


@case("CF006", "policy changed after pass",
      obligation="G6: the policy is hash-pinned at start and re-checked before every stage",
      fault="after the checkpoint passed, the policy file is edited",
      expected="completion fails closed naming the policy; no receipt")
def cf006(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    b.start()
    assert b.checkpoint is not None
    lab.policy_file.write_text('goal = "anything goes"\n')
    c = b.complete()
    assert not c.completed and "policy changed" in c.reason
    no_receipt(lab)


@case("CF008", "stale evidence under keep and escalate policies",
      obligation="G4: on a mismatch the engine refreshes, keeps or escalates; never patches",
      fault="a patch cites stale evidence with on_stale = keep, then (another run) escalate",
      expected="keep: outcome stale, no refreshed evidence, revisions continue; escalate: "
               "outcome escalated and revisions stop; neither applies the patch")
def cf008(tmp: Path) -> None:
    for policy, outcome in (("keep", Disposition.STALE), ("escalate", Disposition.ESCALATED)):
        lab = Lab(tmp / policy, WRONG)
        b = lab.broker(on_stale=policy)
        old = b.start()
        assert b.submit(reply_patch({"calc.py": CORRECT}), based_on=old).outcome \
            is Disposition.ADMITTED
        d = b.submit(reply_patch({"calc.py": BROKEN}), based_on=old)
        assert d.outcome is outcome, (policy, d)
        assert d.refreshed is None and lab.program() == CORRECT
        assert b.closed == (policy == "escalate")


@case("CF009", "stale evidence never reaches the worker",
      obligation="G4: evidence reaches a worker only if both hashes equal the current ones",
      fault="evidence of an older tree is offered to the worker through deliver()",
      expected="refresh policy: fresh evidence bound to the current tree; keep policy: nothing")
def cf009(tmp: Path) -> None:
    for policy in ("refresh", "keep"):
        lab = Lab(tmp / policy, WRONG)
        b = lab.broker(on_stale=policy)
        old = b.start()
        b.submit(reply_patch({"calc.py": CORRECT}), based_on=old)
        got = b.deliver(old)
        if policy == "refresh":
            assert got is not None and got.state_hash == b.checkpoint and got.verdict == "pass"
        else:
            assert got is None
        assert b.deliver(b.evidence()) is not None
