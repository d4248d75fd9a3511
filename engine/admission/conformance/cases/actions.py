"""Conformance cases, typed actions: replies are parsed before anything is touched; protected
paths, links and escalation.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from loopproof.engine.admission.actions import Escalate, Keep, Patch, apply_patch, parse_reply
from loopproof.engine.admission.broker import (
    Disposition,
)
from loopproof.engine.admission.conformance.cases.registry import case, no_receipt
from loopproof.engine.admission.conformance.lab import BROKEN, CORRECT, WRONG, Lab, reply_patch
from loopproof.engine.admission.evidence import CommandCheck
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.trees import UnsafeTree, file_sha256, tree_hash


@case("CF018", "write to a protected path",
      obligation="typed actions: a Patch touching protected paths (policy, ledger) is rejected",
      fault="a patch writes policy.toml inside the workspace (protected glob)",
      expected="outcome rejected as unsafe, before any check runs; no file written")
def cf018(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    d = b.submit(reply_patch({"calc.py": CORRECT, "policy.toml": "x"}), based_on=ev)
    assert d.outcome is Disposition.REJECTED and "protected path" in d.reason
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
        assert d.outcome is Disposition.REJECTED and "unsafe patch" in d.reason, (bad, d)
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
    assert d.outcome is Disposition.REJECTED and "symlink" in d.reason
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
        assert d.outcome is Disposition.INVALID, (reply, d)
    assert b.counts["evaluated"] == 0 and lab.program() == CORRECT
    lab2 = Lab(tmp / "esc", CORRECT)
    b2 = lab2.broker(on_invalid="escalate")
    ev2 = b2.start()
    assert b2.submit(bad[0], based_on=ev2).outcome is Disposition.ESCALATED and b2.closed


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
    assert d.outcome is Disposition.INVALID and "DONE-only" in d.reason
    assert b.counts["evaluated"] == 0
    c = b.complete()
    assert not c.completed and "no candidate passed admission" in c.reason
    no_receipt(lab)


@case("CF025", "empty patch",
      obligation="typed actions: an empty Patch is malformed; a no-op Patch changes nothing",
      fault="a patch with files = {}, then a patch rewriting calc.py with its current content",
      expected="the first is invalid; the second is kept ('changes nothing'); neither is "
               "evaluated nor spends the candidate budget")
def cf025(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker(candidate_budget=1)
    ev = b.start()
    assert b.submit(reply_patch({}), based_on=ev).outcome is Disposition.INVALID
    d = b.submit(reply_patch({"calc.py": CORRECT}), based_on=ev)
    assert d.outcome is Disposition.KEPT and "changes nothing" in d.reason
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
    assert d.outcome is Disposition.REJECTED and "protected path" in d.reason
    assert file_sha256(inner) == before and b.counts["evaluated"] == 0


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
    assert d.outcome is Disposition.REJECTED
    assert b.submit('{"action": "keep", "admit": true}', based_on=ev).outcome is Disposition.INVALID
    assert b.checkpoint is None and not b.complete().completed


@case("CF037", "escalation stops revisions but keeps the checkpoint",
      obligation="typed actions: Escalate commits nothing; later replies cannot act",
      fault="the worker escalates, then sends a patch",
      expected="outcome escalated, then closed; the checkpoint is recertified on completion")
def cf037(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    d = b.submit(json.dumps({"action": "escalate", "reason": "spec unclear"}), based_on=ev)
    assert d.outcome is Disposition.ESCALATED
    d = b.submit(reply_patch({"calc.py": BROKEN}), based_on=ev)
    assert d.outcome is Disposition.CLOSED and lab.program() == CORRECT
    c = b.complete()
    assert c.completed and c.receipt["liveness"]["ended"] == "escalated"


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
    assert d.outcome is Disposition.REJECTED and "protected path" in d.reason
    assert b.counts["evaluated"] == 0 and lab.program() == CORRECT


@case("CF053", "applying a patch refuses unsafe paths on its own",
      obligation="typed actions, the applier's own layer: apply_patch writes nothing when a "
                 "path is protected, leaves the workspace or goes through a link (whatever the "
                 "broker's check above it did)",
      fault="apply_patch is called directly with a patch writing policy.toml (protected), "
            "../outside.txt and a path through an in-workspace link to a folder outside",
      expected="each is refused (ValueError) before any file is written")
def cf053(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    (lab.ws / "link").symlink_to(lab.outside, target_is_directory=True)
    before = sorted(os.listdir(lab.ws))
    for files in ({"policy.toml": "x", "calc.py": BROKEN}, {"../outside.txt": "x"},
                  {"link/planted.py": "x"}):
        try:
            apply_patch(Patch(files), lab.ws, ["policy.toml"])
        except ValueError:
            pass
        else:
            raise AssertionError(f"apply_patch wrote {files}")
        assert sorted(os.listdir(lab.ws)) == before and lab.program() == CORRECT
        assert not os.listdir(lab.outside) and not (tmp / "outside.txt").exists()
