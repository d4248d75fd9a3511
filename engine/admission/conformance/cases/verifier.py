"""Conformance cases, the verifier: its protocol, its isolation (working directory, environment,
process group) and its copy.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from loopproof.engine.admission.broker import (
    Disposition,
)
from loopproof.engine.admission.conformance.cases.registry import case
from loopproof.engine.admission.conformance.lab import CORRECT, Lab, reply_patch
from loopproof.engine.system.trees import tree_hash


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
    assert d.outcome is Disposition.REJECTED
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
    assert d.outcome is Disposition.REJECTED
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
    assert d.outcome is Disposition.REJECTED and d.evidence[0].verdict == "error"
    assert "exit 3" in d.evidence[0].payload["detail"]


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


@case("CF051", "a verifier rewrites the broker's copy between two checks",
      obligation="G4: evidence is of exactly the tree the check was asked to judge; a "
                 "difference fails closed",
      fault="a patch adds a RACE marker: the visible check, unsandboxed, appends to the broker's "
            "own copy of the candidate (beside its own copy) and exits 0, so the challenge check "
            "sees another tree",
      expected="the broker fails closed naming the tree the check saw; nothing is admitted; the "
               "checkpoint stays the start")
def cf051(tmp: Path) -> None:
    lab = Lab(tmp, CORRECT)
    b = lab.broker()
    ev = b.start()
    ckpt = b.checkpoint
    d = b.submit(reply_patch({"calc.py": CORRECT + "# v2\n", "RACE": ""}), based_on=ev)
    assert b.status == "failed" and "saw tree" in b.status_reason, (b.status, b.status_reason)
    assert d.outcome is not Disposition.ADMITTED and b.checkpoint == ckpt
    assert b.store.head().tree_hash == ckpt and lab.program() == CORRECT
