"""Conformance cases, G5: the checkpoint only ever holds an admitted tree; restore is exact;
completion re-certifies.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from loopproof.engine.admission import revision  # noqa: F401  (registers the revision kind)
from loopproof.engine.admission.broker import (
    Disposition,
    load_receipt,
    verify_receipt,
)
from loopproof.engine.admission.checkpoint import CheckpointError, CheckpointStore
from loopproof.engine.admission.conformance.cases.registry import case, no_receipt, record_types
from loopproof.engine.admission.conformance.lab import (
    BROKEN,
    CORRECT,
    OVERFIT,
    WRONG,
    Lab,
    reply_patch,
)
from loopproof.engine.admission.evidence import Evidence
from loopproof.engine.record.ledger import Ledger
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load as load_spec
from loopproof.engine.system.trees import tree_hash


@case("CF010", "correct-then-regress",
      obligation="G5: after a regression the node restores the checkpoint exactly and completes",
      fault="a correct start; the worker regresses it with a patch and with direct edits plus "
            "an untracked file",
      expected="the regressing patch is rejected, the workspace restored (leftover removed), "
               "and completion recertifies the original checkpoint with a receipt")
def cf010(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    ckpt = b.checkpoint
    assert ckpt is not None
    d = b.submit(reply_patch({"calc.py": OVERFIT}), based_on=ev)
    assert d.outcome is Disposition.REJECTED and "challenge" in d.reason
    (lab.ws / "calc.py").write_text(BROKEN)
    (lab.ws / "notes.txt").write_text("scratch")
    c = b.complete()
    assert c.completed and c.receipt is not None
    assert c.receipt["checkpoint"]["tree_hash"] == ckpt == tree_hash(lab.ws)
    assert lab.program() == CORRECT and not (lab.ws / "notes.txt").exists()
    assert c.receipt["liveness"]["recovered"] is True
    assert c.receipt["liveness"]["restored_at_completion"] == ["notes.txt"]


@case("CF011", "a failed proposal cannot overwrite the checkpoint",
      obligation="G5: rejected proposals never become the checkpoint",
      fault="after a repair is admitted, a patch that fails the visible suite is proposed",
      expected="outcome rejected; HEAD on disk and in memory still names the admitted tree")
def cf011(tmp: Path) -> None:
    lab = Lab(tmp, WRONG)
    b = lab.broker()
    ev = b.start()
    b.submit(reply_patch({"calc.py": CORRECT}), based_on=ev)
    ckpt, gen = b.checkpoint, b.store.head().generation
    d = b.submit(reply_patch({"calc.py": BROKEN}), based_on=b.evidence())
    assert d.outcome is Disposition.REJECTED and d.checkpoint == ckpt
    head = b.store.head()
    assert head.tree_hash == ckpt and head.generation == gen and lab.program() == CORRECT


@case("CF012", "a failed challenge check cannot overwrite the checkpoint",
      obligation="G5: every admission check must pass, not just the visible one",
      fault="a patch passes the visible suite and fails the challenge suite",
      expected="outcome rejected naming challenge; both checks appear in the ledger for that "
               "candidate; the checkpoint stays")
def cf012(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    ckpt = b.checkpoint
    d = b.submit(reply_patch({"calc.py": OVERFIT}), based_on=ev)
    assert d.outcome is Disposition.REJECTED and d.reason.startswith("challenge: fail")
    assert [(e.check, e.verdict) for e in d.evidence] == [("visible", "pass"),
                                                          ("challenge", "fail")]
    assert b.checkpoint == ckpt and b.store.head().tree_hash == ckpt


@case("CF017", "recertification failure",
      obligation="G5: completion re-runs the completion checks on the checkpoint; a failing "
                 "recertification cannot complete",
      fault="the admitted checkpoint fails the hidden completion suite",
      expected="not completed, reason names recertification; no receipt file, no anchor")
def cf017(tmp: Path) -> None:
    lab = Lab(tmp, OVERFIT)
    b = lab.broker(admission=["visible"], completion=["visible", "hidden"])
    b.start()
    assert b.checkpoint is not None
    c = b.complete()
    assert not c.completed and "recertification failed" in c.reason and "hidden" in c.reason
    no_receipt(lab)
    assert "guard.recertification_failed" in record_types(lab)


@case("CF027", "untracked leftovers removed on restore",
      obligation="G5: restore reproduces the checkpoint exactly (contents, modes, no extra entries)",
      fault="after the checkpoint, files, a nested folder and a mode change appear in the workspace",
      expected="the restore lists every leftover, removes them, resets the mode, and the tree "
               "hash equals the checkpoint")
def cf027(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    b.start()
    (lab.ws / "build" / "deep").mkdir(parents=True)
    (lab.ws / "build" / "deep" / "o.bin").write_bytes(b"\0\1")
    (lab.ws / "stray.py").write_text("x")
    os.chmod(lab.ws / "calc.py", 0o755)
    ev = b.evidence()
    assert ev.state_hash == b.checkpoint == tree_hash(lab.ws)
    restore = [r for r in lab.ledger.records if r["type"] == "guard.restore"][-1]
    assert restore["removed"] == ["build", "build/deep", "build/deep/o.bin", "stray.py"]
    assert os.stat(lab.ws / "calc.py").st_mode & 0o777 != 0o755
    assert sorted(p.name for p in lab.ws.iterdir()) == ["calc.py"]


@case("CF035", "checkpoint snapshot tampered",
      obligation="G5: the checkpoint is content-addressed; an altered snapshot cannot complete",
      fault="a file inside the stored checkpoint snapshot is edited before completion",
      expected="completion refused naming the altered snapshot; no receipt")
def cf035(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    b.start()
    snap = b.store.objects / str(b.checkpoint)
    (snap / "calc.py").write_text(BROKEN)
    c = b.complete()
    assert not c.completed and "altered" in c.reason
    no_receipt(lab)


@case("CF039", "patch that deletes what the checks need",
      obligation="G5: a deletion is a patch like any other and must pass admission",
      fault="a patch deletes calc.py; another tries to delete a folder",
      expected="the first is rejected by the checks; the second cannot be applied (rejected)")
def cf039(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    (lab.ws / "data").mkdir()
    (lab.ws / "data" / "x.txt").write_text("x")
    b = lab.broker()
    ev = b.start()
    assert b.submit(reply_patch({"calc.py": None}), based_on=ev).outcome is Disposition.REJECTED
    d = b.submit(reply_patch({"data": None}), based_on=ev)
    assert d.outcome is Disposition.REJECTED and "cannot be applied" in d.reason
    assert lab.program() == CORRECT and (lab.ws / "data" / "x.txt").exists()


@case("CF040", "wrong start repaired, then regressed, then completed",
      obligation="G5 end to end: repair, regression, recovery, recertification, receipt",
      fault="a wrong start is repaired by an admitted patch; the next patch regresses it",
      expected="the repair is the checkpoint; the regression is rejected; the receipt names the "
               "repair, covers intermediate and terminal candidates, and verifies")
def cf040(tmp: Path) -> None:
    lab = Lab(tmp, WRONG)
    b = lab.broker()
    ev = b.start()
    fix = b.submit(reply_patch({"calc.py": CORRECT}), based_on=ev)
    assert fix.outcome is Disposition.ADMITTED
    bad = b.submit(reply_patch({"calc.py": OVERFIT}), based_on=b.evidence())
    assert bad.outcome is Disposition.REJECTED
    c = b.complete()
    assert c.completed and c.receipt["checkpoint"]["admitted_by"] == fix.proposal
    assert c.receipt["coverage"]["mode"] == "intermediate and terminal"
    assert c.receipt["coverage"]["checks"]["challenge"]["terminal"] is True
    assert c.receipt["liveness"]["admitted"] == 1 and c.receipt["liveness"]["rejected"] == 1
    assert verify_receipt(c.receipt, lab.ledger.records, b.store) == []


EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "regress-restore" / "graph.toml"


@case("CF041", "correct-then-regress through the runner (kind = revision)",
      obligation="G5 in a real run: a revision node keeps its checkpoint, completes with a "
                 "receipt, and the node's gate verifies that receipt",
      fault="examples/regress-restore: the worker repairs caesar.py, then regresses it with a "
            "patch plus direct edits and a leftover file, then replies 'STATUS: DONE'",
      expected="the run (spec.load + Runner, as `loopproof run`) ends DONE, exit 0; decisions admitted, rejected, invalid; the "
               "workspace holds the repaired code and no leftover; the receipt verifies; the "
               "node's gate then rejects a drifted workspace and a tampered receipt")
def cf041(tmp: Path) -> None:
    ledger = tmp / "run.jsonl"
    spec = load_spec(EXAMPLE)
    runner = Runner.start(spec, ledger)  # what `loopproof run` does
    try:
        code = runner.run()
        report = runner.report()
    finally:
        runner.close()
    assert code == 0 and report["outcome"] == "DONE", report
    claims = next(r for r in Ledger.open(ledger).records if r["type"] == "claim")["claims"]
    assert claims["revisions"] == ["admitted", "rejected", "invalid"], claims
    ws = Path(f"{ledger}.work") / "caesar"
    assert sorted(p.name for p in ws.iterdir()) == ["caesar.py"]
    assert "SHIFT = 4" in (ws / "caesar.py").read_text()
    state = Path(claims["receipt"]).parent
    receipt = load_receipt(Path(claims["receipt"]))
    assert receipt["checkpoint"]["tree_hash"] == tree_hash(ws) == claims["checkpoint"]
    assert verify_receipt(receipt, Ledger.open(state / "guard.jsonl").records,
                          CheckpointStore(state / "checkpoint")) == []
    restores = [r for r in Ledger.open(state / "guard.jsonl").records
                if r["type"] == "guard.restore"]
    assert any(r["removed"] == ["notes.txt"] for r in restores)
    # The node's gate is the runner's own judgement: it must refuse a drifted workspace and a
    # tampered receipt.
    gate = spec.nodes["caesar"].gate
    assert gate.judge(ws).verdict == "accept"
    (ws / "extra.py").write_text("x = 1\n")
    assert gate.judge(ws).verdict == "reject"
    (ws / "extra.py").unlink()
    receipt["liveness"]["rejected"] = 0
    Path(claims["receipt"]).write_text(json.dumps(receipt))
    verdict = gate.judge(ws)
    assert verdict.verdict == "reject" and "does not verify" in verdict.detail


@case("CF042", "checkpoint store damaged during revisions",
      obligation="G5: the checkpoint is only ever what was admitted; a damaged store fails closed",
      fault="after the checkpoint, something overwrites a file in its stored snapshot and "
            "edits the workspace so that a restore is needed",
      expected="the next submit is closed naming the altered snapshot; the broker is failed; "
               "completion is refused; no receipt")
def cf042(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    (b.store.objects / str(b.checkpoint) / "calc.py").write_text(BROKEN)
    (lab.ws / "calc.py").write_text(OVERFIT)
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v2\n"}), based_on=ev)
    assert d.outcome is Disposition.CLOSED and "altered" in d.reason and b.status == "failed"
    assert not b.complete().completed
    no_receipt(lab)


@case("CF052", "the checkpoint store alone refuses unadmitted trees",
      obligation="G5, the store's own layer: HEAD moves only with a PASS of every required check "
                 "on exactly that tree by its pinned suite (whatever the broker above it did)",
      fault="the store is asked directly to commit the workspace with: an error verdict on "
            "exactly its tree; a PASS of another tree; a PASS from another suite; a PASS of "
            "one of the two required checks only; no required check at all",
      expected="each commit is refused (CheckpointError); HEAD stays empty")
def cf052(tmp: Path) -> None:
    lab = Lab(tmp, WRONG)
    b = lab.broker(admission=["visible"])
    ev = b.start()
    assert b.checkpoint is None and ev.verdict == "fail"
    h = tree_hash(lab.ws)
    suite = b.pinned_suites["visible"]

    def forged(**change: object) -> Evidence:
        fields = {"state_hash": h, "suite_hash": suite, "verdict": "pass", **change}
        verdict = fields.pop("verdict")
        return replace(ev, state_hash=fields["state_hash"], suite_hash=fields["suite_hash"],
                       payload={**ev.payload, "verdict": verdict})

    store = CheckpointStore(tmp / "store")
    attempts = [([forged(verdict="error")], {"visible": suite}),
                ([forged(state_hash="0" * 64)], {"visible": suite}),
                ([forged(suite_hash="1" * 64)], {"visible": suite}),
                ([forged()], {"visible": suite, "challenge": suite}),
                ([forged()], {})]
    for evidence, required in attempts:
        try:
            store.commit(lab.ws, evidence, required)
        except CheckpointError:
            continue
        raise AssertionError(f"the store committed {evidence[0].to_json()} for {required}")
    assert store.head() is None
    store.commit(lab.ws, [forged()], {"visible": suite})  # and the real thing is taken
    assert store.head().tree_hash == h
