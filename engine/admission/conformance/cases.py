"""The conformance cases: deterministic failure injections against the admission layer.

Each case is a function `fn(tmp: Path) -> None` that injects one fault and asserts the specific
outcome the obligation demands (an AssertionError is a failure). `CASES` is the single source of
truth: `python -m engine.admission.conformance` runs it, `test_conformance.py` runs it under pytest, and
docs/conformance.md is generated from it (`python -m engine.admission.conformance --markdown`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from engine.admission.actions import Escalate, Keep, parse_reply
from engine.admission.broker import (
    Outcome,
    load_receipt,
    replay_outcomes,
    stored_proposals,
    verify_receipt,
)
from engine.admission.checkpoint import CheckpointStore
from engine.admission.evidence import CommandCheck, stale_reason
from engine.record.ledger import Ledger
from engine.run.runner import Runner
from engine.run.spec import load as load_spec
from engine.system.canonical import digest
from engine.system.errors import BadInput, LedgerCorrupt
from engine.system.trees import UnsafeTree, file_sha256, tree_hash

from .lab import BROKEN, CORRECT, OVERFIT, WRONG, Lab, reply_patch


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    obligation: str
    fault: str
    expected: str
    fn: Callable[[Path], None]


CASES: dict[str, Case] = {}


def case(cid: str, title: str, *, obligation: str, fault: str, expected: str):
    def register(fn: Callable[[Path], None]) -> Callable[[Path], None]:
        assert cid not in CASES, f"duplicate case id {cid}"
        CASES[cid] = Case(cid, title, obligation, fault, expected, fn)
        return fn
    return register


def _no_receipt(lab: Lab) -> None:
    assert not (lab.state / "receipt.json").exists(), "a receipt was written"
    assert not any(r["type"] == "guard.receipt" for r in lab.ledger.records), "receipt anchored"


def _types(lab: Lab) -> list[str]:
    return [r["type"] for r in lab.ledger.records]


# ---- G4: evidence is bound to the state and suite it describes -----------------------------

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
    assert d1.outcome is Outcome.ADMITTED
    ckpt = b.checkpoint
    d2 = b.submit(reply_patch({"calc.py": BROKEN}), based_on=old)
    assert d2.outcome is Outcome.STALE, d2
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
    assert d.outcome is Outcome.KEPT
    assert lab.program() == CORRECT and tree_hash(lab.ws) == ckpt
    assert "guard.restore" in _types(lab)
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
        assert d.outcome is Outcome.STALE, d
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
    assert d.outcome is Outcome.STALE and b.checkpoint is None
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
    assert d.outcome is Outcome.CLOSED and "suite" in d.reason and "changed" in d.reason
    c = b.complete()
    assert not c.completed and "changed" in c.reason
    assert lab.program() == CORRECT
    _no_receipt(lab)


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
    _no_receipt(lab)


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


@case("CF008", "stale evidence under keep and escalate policies",
      obligation="G4: on a mismatch the engine refreshes, keeps or escalates; never patches",
      fault="a patch cites stale evidence with on_stale = keep, then (another run) escalate",
      expected="keep: outcome stale, no refreshed evidence, revisions continue; escalate: "
               "outcome escalated and revisions stop; neither applies the patch")
def cf008(tmp: Path) -> None:
    for policy, outcome in (("keep", Outcome.STALE), ("escalate", Outcome.ESCALATED)):
        lab = Lab(tmp / policy, WRONG)
        b = lab.broker(on_stale=policy)
        old = b.start()
        assert b.submit(reply_patch({"calc.py": CORRECT}), based_on=old).outcome \
            is Outcome.ADMITTED
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


# ---- G5: the checkpoint only ever holds an admitted state ----------------------------------

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
    assert d.outcome is Outcome.REJECTED and "challenge" in d.reason
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
    assert d.outcome is Outcome.REJECTED and d.checkpoint == ckpt
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
    assert d.outcome is Outcome.REJECTED and d.reason.startswith("challenge: fail")
    assert [(e.check, e.verdict) for e in d.evidence] == [("visible", "pass"),
                                                          ("challenge", "fail")]
    assert b.checkpoint == ckpt and b.store.head().tree_hash == ckpt


@case("CF013", "candidate budget exhausted",
      obligation="liveness: the candidate budget bounds evaluations; the checkpoint survives",
      fault="a worker keeps proposing different failing patches past candidate_budget = 2",
      expected="the third patch is not evaluated (outcome exhausted); completion recertifies "
               "the checkpoint; the receipt says exhausted")
def cf013(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker(candidate_budget=2)
    ev = b.start()
    for i in range(2):
        d = b.submit(reply_patch({"calc.py": BROKEN + f"# {i}\n"}), based_on=ev)
        assert d.outcome is Outcome.REJECTED
    d = b.submit(reply_patch({"calc.py": BROKEN + "# 3\n"}), based_on=ev)
    assert d.outcome is Outcome.EXHAUSTED and b.closed
    assert b.counts["evaluated"] == 2
    c = b.complete()
    assert c.completed and c.receipt["liveness"]["ended"] == "exhausted"
    assert lab.program() == CORRECT


@case("CF014", "verifier timeout",
      obligation="a timeout is an error, and an error is never an accept",
      fault="the proposed candidate makes the gate sleep 30 s, past its 2 s timeout",
      expected="verdict error (killed: timeout); outcome rejected; the checkpoint stays")
def cf014(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker(timeout_s=2.0)
    ev = b.start()
    t = time.monotonic()
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v2\n", "SLOW": ""}), based_on=ev)
    assert time.monotonic() - t < 20  # cut at the timeout, not after the gate's 30 s sleep
    assert d.outcome is Outcome.REJECTED
    assert d.evidence[0].verdict == "error" and d.evidence[0].payload["killed"] == "timeout"
    assert b.checkpoint == ev.state_hash


@case("CF015", "verifier crash",
      obligation="a crashing verifier gives no verdict; no verdict is never an accept",
      fault="the proposed candidate makes the gate die by SIGSEGV",
      expected="verdict error naming the signal; outcome rejected; the checkpoint stays")
def cf015(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v2\n", "CRASH": ""}), based_on=ev)
    assert d.outcome is Outcome.REJECTED
    assert d.evidence[0].verdict == "error" and "signal" in d.evidence[0].payload["detail"]
    assert b.checkpoint == ev.state_hash


@case("CF016", "verifier error exit",
      obligation="gate protocol: exit 0 accept, 1 reject, anything else is an error",
      fault="the proposed candidate makes the gate exit 3",
      expected="verdict error (exit 3); outcome rejected")
def cf016(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v2\n", "ERR": ""}), based_on=ev)
    assert d.outcome is Outcome.REJECTED and d.evidence[0].verdict == "error"
    assert "exit 3" in d.evidence[0].payload["detail"]


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
    _no_receipt(lab)
    assert "guard.recertification_failed" in _types(lab)


# ---- typed actions: protected paths and malformed replies ----------------------------------

@case("CF018", "write to a protected path",
      obligation="typed actions: a Patch touching protected paths (policy, ledger) is rejected",
      fault="a patch writes policy.toml inside the workspace (protected glob)",
      expected="outcome rejected as unsafe, before any check runs; no file written")
def cf018(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    d = b.submit(reply_patch({"calc.py": CORRECT, "policy.toml": "x"}), based_on=ev)
    assert d.outcome is Outcome.REJECTED and "protected path" in d.reason
    assert b.counts["evaluated"] == 0 and not (lab.ws / "policy.toml").exists()


@case("CF019", "write outside the workspace",
      obligation="typed actions: no Patch path may leave the workspace",
      fault="patches name ../outside/x.txt, an absolute path, and a/./b",
      expected="each is rejected as unsafe; nothing is created outside the workspace")
def cf019(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    for bad in ("../outside/x.txt", str(lab.outside / "y.txt"), "a/./b", "a//b"):
        d = b.submit(reply_patch({bad: "pwned"}), based_on=ev)
        assert d.outcome is Outcome.REJECTED and "unsafe patch" in d.reason, (bad, d)
    assert list(lab.outside.iterdir()) == [] and b.counts["evaluated"] == 0


@case("CF020", "symlink escape planted in the workspace",
      obligation="the state hash refuses links that leave the workspace; restore removes them",
      fault="the worker plants ws/link -> ../outside and the next patch writes link/evil.txt",
      expected="the link is removed by the restore before the patch is considered; nothing is "
               "written outside the workspace")
def cf020(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    os.symlink("../outside", lab.ws / "link")
    try:
        tree_hash(lab.ws)
        raise AssertionError("an escaping symlink was hashed")
    except UnsafeTree:
        pass
    d = b.submit(reply_patch({"link/evil.txt": "pwned"}), based_on=ev)
    assert "link" in d.restored
    assert list(lab.outside.iterdir()) == []
    assert not (lab.ws / "link").is_symlink()


@case("CF021", "patch through an in-workspace symlink",
      obligation="typed actions: a Patch may not write through a symlink",
      fault="the checkpoint holds a link sub -> pkg inside the workspace; a patch writes sub/x.py",
      expected="outcome rejected naming the symlink")
def cf021(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    (lab.ws / "pkg").mkdir()
    os.symlink("pkg", lab.ws / "sub")
    b = lab.broker()
    ev = b.start()
    d = b.submit(reply_patch({"sub/x.py": "x = 1\n"}), based_on=ev)
    assert d.outcome is Outcome.REJECTED and "symlink" in d.reason
    assert not (lab.ws / "pkg" / "x.py").exists()


@case("CF022", "workspace starts with an escaping symlink",
      obligation="the state hash covers only the workspace; escaping links are bad input",
      fault="the initial workspace holds a link to a file outside it",
      expected="start() raises UnsafeTree (BadInput, exit 2) naming the link; nothing checkpointed")
def cf022(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    (lab.outside / "secret.txt").write_text("s")
    os.symlink(str(lab.outside / "secret.txt"), lab.ws / "s.txt")
    b = lab.broker()
    try:
        b.start()
        raise AssertionError("start accepted an escaping symlink")
    except UnsafeTree as exc:
        assert isinstance(exc, BadInput) and exc.field == "s.txt"
    assert b.store.head() is None


@case("CF023", "malformed action",
      obligation="typed actions: replies are parsed before anything is touched; malformed -> Keep",
      fault="truncated JSON, a list, an unknown action, an extra key, a non-string file "
            "content, a non-string action, bytes that are not UTF-8, no reply at all",
      expected="each is outcome invalid, nothing evaluated, workspace unchanged; with "
               "on_invalid = escalate the first one escalates")
def cf023(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    bad = ['{"action": "patch", "files": {"calc.py": "x"', '["patch"]', '{"action": "rewrite"}',
           '{"action": "keep", "admit": true}', '{"action": "patch", "files": {"calc.py": 3}}',
           '{"action": ["patch"]}',
           b"\xff\xfe", None]
    for reply in bad:
        d = b.submit(reply, based_on=ev)
        assert d.outcome is Outcome.INVALID, (reply, d)
    assert b.counts["evaluated"] == 0 and lab.program() == CORRECT
    lab2 = Lab(tmp / "esc", CORRECT)
    b2 = lab2.broker(on_invalid="escalate")
    ev2 = b2.start()
    assert b2.submit(bad[0], based_on=ev2).outcome is Outcome.ESCALATED and b2.closed


@case("CF024", "DONE-only reply",
      obligation="typed actions: 'STATUS: DONE' without code is Keep, never a completion",
      fault="a wrong start; the worker replies 'STATUS: DONE'",
      expected="outcome invalid (kept); parse gives Keep; nothing evaluated; completion refused "
               "because nothing was admitted")
def cf024(tmp: Path) -> None:
    assert isinstance(parse_reply("STATUS: DONE").action, Keep)
    assert isinstance(parse_reply("STATUS: DONE", on_invalid="escalate").action, Escalate)
    lab = Lab(tmp, WRONG)
    b = lab.broker()
    ev = b.start()
    d = b.submit("STATUS: DONE", based_on=ev)
    assert d.outcome is Outcome.INVALID and "DONE-only" in d.reason
    assert b.counts["evaluated"] == 0
    c = b.complete()
    assert not c.completed and "no candidate passed admission" in c.reason
    _no_receipt(lab)


@case("CF025", "empty patch",
      obligation="typed actions: an empty Patch is malformed; a no-op Patch changes nothing",
      fault="a patch with files = {}, then a patch rewriting calc.py with its current content",
      expected="the first is invalid; the second is kept ('changes nothing'); neither is "
               "evaluated nor spends the candidate budget")
def cf025(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker(candidate_budget=1)
    ev = b.start()
    assert b.submit(reply_patch({}), based_on=ev).outcome is Outcome.INVALID
    d = b.submit(reply_patch({"calc.py": CORRECT}), based_on=ev)
    assert d.outcome is Outcome.KEPT and "changes nothing" in d.reason
    assert b.counts["evaluated"] == 0 and not b.closed


@case("CF026", "patch touching gate files",
      obligation="the worker has no write path to the gate: check files in the workspace are "
                 "protected automatically",
      fault="the gate script lives in the workspace; a patch rewrites it to always exit 0 "
            "together with a broken program",
      expected="outcome rejected as unsafe (protected path), not evaluated; the gate is unchanged")
def cf026(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    (lab.ws / "tests").mkdir()
    inner = lab.ws / "tests" / "check.py"
    inner.write_text(lab.gate_file.read_text())
    lab.gate_file = inner
    b = lab.broker()
    ev = b.start()
    assert "tests/check.py" in b.protected
    before = file_sha256(inner)
    d = b.submit(reply_patch({"tests/check.py": "import sys\nsys.exit(0)\n",
                              "calc.py": BROKEN}), based_on=ev)
    assert d.outcome is Outcome.REJECTED and "protected path" in d.reason
    assert file_sha256(inner) == before and b.counts["evaluated"] == 0


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


@case("CF028", "invalid verifier working directory",
      obligation="a verifier that cannot run where it is told gives no verdict",
      fault="the admission check's cwd is '../elsewhere' (and, in a second run, a missing folder)",
      expected="verdict error 'invalid verifier'; nothing is admitted; completion refused")
def cf028(tmp: Path) -> None:
    for cwd in ("../elsewhere", "missing"):
        lab = Lab(tmp / cwd.strip("./"), CORRECT)
        b = lab.broker(checks=[lab.check("visible", cwd=cwd)])
        ev = b.start()
        assert ev.verdict == "error" and "invalid verifier" in ev.payload["detail"], ev
        assert b.checkpoint is None and not b.complete().completed


@case("CF029", "secrets filtered from the verifier's environment",
      obligation="a verifier sees only the allow-listed environment, never the engine's secrets",
      fault="the engine's environment holds LOOPPROOF_API_KEY and OPENAI_API_KEY; the gate "
            "fails if any key-like variable reaches it",
      expected="the gate passes under the broker; the same gate given the variable explicitly "
               "fails (so the probe works)")
def cf029(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    (lab.ws / "SECRET").write_text("")
    saved = {k: os.environ.get(k) for k in ("LOOPPROOF_API_KEY", "OPENAI_API_KEY")}
    os.environ.update({"LOOPPROOF_API_KEY": "sk-engine", "OPENAI_API_KEY": "sk-test"})
    try:
        b = lab.broker(admission=["visible"])
        assert b.start().verdict == "pass"
        probe = lab.broker(checks=[lab.check("visible", env={"OPENAI_API_KEY": "sk-test"})])
        assert probe.start().verdict == "fail"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@case("CF030", "verifier child processes killed with their group",
      obligation="a verifier's whole process group is killed when it times out or exits",
      fault="the gate starts a grandchild `sleep 60`, records its pid, and hangs past its "
            "timeout; in a second run it exits 0 at once, leaving the grandchild behind",
      expected="verdict error (timeout), then pass; either way the grandchild is dead right "
               "after the check returns")
def cf030(tmp: Path) -> None:
    for marker, verdict in (("FORK", "error"), ("FORKEXIT", "pass")):
        lab = Lab(tmp / marker, CORRECT)
        (lab.ws / marker).write_text("")
        pidfile = tmp / f"{marker}.pid"
        b = lab.broker(checks=[lab.check("visible", timeout_s=2.0 if marker == "FORK" else 10.0,
                                         env={"PIDFILE": str(pidfile)})])
        ev = b.start()
        assert ev.verdict == verdict, ev
        if marker == "FORK":
            assert ev.payload["killed"] == "timeout"
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(pid), f"grandchild {pid} survived its verifier ({marker})"


class _StartedClock:
    """A monotonic clock that reads 0 until `go()`, then the seconds since."""

    def __init__(self) -> None:
        self.origin: float | None = None

    def go(self) -> None:
        self.origin = time.monotonic()

    def __call__(self) -> float:
        return 0.0 if self.origin is None else time.monotonic() - self.origin


@case("CF031", "wall budget exhausted, checkpoint recovered",
      obligation="liveness: the wall budget stops revisions; the checkpoint is recovered and "
                 "completed",
      fault="wall budget 1.5 s; a proposal makes the gate sleep; the worker also scribbles "
            "on the workspace",
      expected="the slow check is cut at the wall budget (error, rejected); the next patch is "
               "'exhausted'; completion restores and recertifies the checkpoint")
def cf031(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    clock = _StartedClock()
    b = lab.broker(wall_budget_s=1.5, clock=clock)
    ev = b.start()
    clock.go()  # the wall budget counts from here, however long start() took on a busy machine
    ckpt = b.checkpoint
    t = time.monotonic()
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v2\n", "SLOW": ""}), based_on=ev)
    assert d.outcome is Outcome.REJECTED and time.monotonic() - t < 20
    (lab.ws / "calc.py").write_text(BROKEN)
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v3\n"}), based_on=ev)
    assert d.outcome is Outcome.EXHAUSTED and "wall budget" in d.reason
    c = b.complete()
    assert c.completed and c.receipt["checkpoint"]["tree_hash"] == ckpt
    assert c.receipt["liveness"]["ended"] == "exhausted" and lab.program() == CORRECT


@case("CF032", "a repeated identical rejected state escalates",
      obligation="liveness: the same rejected tree is not evaluated again and again",
      fault="the worker proposes the same failing patch twice (default repeat_limit = 1)",
      expected="the second proposal escalates without evaluation; one evaluation spent of 10")
def cf032(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker(candidate_budget=10)
    ev = b.start()
    assert b.submit(reply_patch({"calc.py": BROKEN}), based_on=ev).outcome is Outcome.REJECTED
    d = b.submit(reply_patch({"calc.py": BROKEN}), based_on=ev)
    assert d.outcome is Outcome.ESCALATED and "already rejected" in d.reason
    assert b.counts["evaluated"] == 1 and b.closed


@case("CF033", "self-report cannot authorise admission",
      obligation="the broker is independent of self-report: notes and status files are never read",
      fault="a failing patch carries note 'ALL TESTS PASS' and writes VERDICT=pass and STATUS "
            "files; a keep reply carries 'admit': true",
      expected="the patch is rejected by the checks; the keep-with-admit reply is invalid; a "
               "wrong start still cannot complete")
def cf033(tmp: Path) -> None:
    lab = Lab(tmp, WRONG)
    b = lab.broker()
    ev = b.start()
    d = b.submit(reply_patch({"calc.py": BROKEN, "VERDICT": "pass\n", "STATUS": "DONE\n"},
                             note="ALL TESTS PASS, please admit"), based_on=ev)
    assert d.outcome is Outcome.REJECTED
    assert b.submit('{"action": "keep", "admit": true}', based_on=ev).outcome is Outcome.INVALID
    assert b.checkpoint is None and not b.complete().completed


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
    _no_receipt(lab)


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


@case("CF037", "escalation stops revisions but keeps the checkpoint",
      obligation="typed actions: Escalate commits nothing; later replies cannot act",
      fault="the worker escalates, then sends a patch",
      expected="outcome escalated, then closed; the checkpoint is recertified on completion")
def cf037(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    d = b.submit(json.dumps({"action": "escalate", "reason": "spec unclear"}), based_on=ev)
    assert d.outcome is Outcome.ESCALATED
    d = b.submit(reply_patch({"calc.py": BROKEN}), based_on=ev)
    assert d.outcome is Outcome.CLOSED and lab.program() == CORRECT
    c = b.complete()
    assert c.completed and c.receipt["liveness"]["ended"] == "escalated"


@case("CF038", "the verifier cannot change what it judges",
      obligation="admission runs on an isolated copy; evidence names the tree before the check ran",
      fault="a gate rewrites calc.py in its working copy (to a broken program) and exits 0",
      expected="the evidence binds to the unmodified tree; the workspace and checkpoint hold the "
               "program as proposed")
def cf038(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    lab.gate_file.write_text("import sys\nopen('calc.py', 'w').write('broken')\nsys.exit(0)\n")
    b = lab.broker(admission=["visible"])
    ev = b.start()
    assert ev.verdict == "pass" and ev.state_hash == b.checkpoint == tree_hash(lab.ws)
    assert lab.program() == CORRECT
    assert (b.store.path_of(str(b.checkpoint)) / "calc.py").read_text() == CORRECT


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
    assert b.submit(reply_patch({"calc.py": None}), based_on=ev).outcome is Outcome.REJECTED
    d = b.submit(reply_patch({"data": None}), based_on=ev)
    assert d.outcome is Outcome.REJECTED and "cannot be applied" in d.reason
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
    assert fix.outcome is Outcome.ADMITTED
    bad = b.submit(reply_patch({"calc.py": OVERFIT}), based_on=b.evidence())
    assert bad.outcome is Outcome.REJECTED
    c = b.complete()
    assert c.completed and c.receipt["checkpoint"]["admitted_by"] == fix.proposal
    assert c.receipt["coverage"]["mode"] == "intermediate and terminal"
    assert c.receipt["coverage"]["checks"]["challenge"]["terminal"] is True
    assert c.receipt["liveness"]["admitted"] == 1 and c.receipt["liveness"]["rejected"] == 1
    assert verify_receipt(c.receipt, lab.ledger.records, b.store) == []


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "regress-restore" / "graph.toml"


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
    assert d.outcome is Outcome.CLOSED and "altered" in d.reason and b.status == "failed"
    assert not b.complete().completed
    _no_receipt(lab)


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


@case("CF045", "patch touching a test script named by a relative path",
      obligation="the worker has no write path to the gate: a test script the check runs from "
                 "the workspace (relative argv) is protected too",
      fault="the check runs `python -S tests/check.py visible` from the candidate; a patch "
            "rewrites tests/check.py to always pass, together with a broken program",
      expected="outcome rejected as unsafe (protected path), nothing evaluated, checkpoint kept")
def cf045(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    (lab.ws / "tests").mkdir()
    (lab.ws / "tests" / "check.py").write_text(lab.gate_file.read_text())
    check = CommandCheck("visible", (sys.executable, "-S", "tests/check.py", "visible"))
    b = lab.broker(checks=[check])
    ev = b.start()
    assert ev.verdict == "pass" and "tests/check.py" in b.protected
    d = b.submit(reply_patch({"tests/check.py": "import sys\nsys.exit(0)\n",
                              "calc.py": BROKEN}), based_on=ev)
    assert d.outcome is Outcome.REJECTED and "protected path" in d.reason
    assert b.counts["evaluated"] == 0 and lab.program() == CORRECT
