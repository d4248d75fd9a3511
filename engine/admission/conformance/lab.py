"""The conformance lab: a tiny program under repair, its checks, and a broker wired to a real ledger.

The program is `calc.py` with `add(a, b)`. Three suites judge it: *visible* (2 + 3), *challenge*
(-2 + 5 and 0 + 0) and *hidden* (-3 + 4). One gate script serves all three; marker files in the
candidate inject verifier faults (SLOW sleeps past the timeout, CRASH dies by SIGSEGV, ERR exits
3, FORK leaves a grandchild behind and hangs, FORKEXIT leaves one and exits, SECRET fails if a
secret-looking variable reached it, RACE appends to the broker's own copy of the candidate, which
lies beside the check's copy).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from loopproof.engine.admission.broker import AdmissionBroker, GuardPolicy, file_policy
from loopproof.engine.admission.evidence import CommandCheck
from loopproof.engine.record.ledger import Ledger

CORRECT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
OVERFIT = "def add(a, b):\n    return a + b if a > 0 else 0\n"  # passes visible, fails challenge
BROKEN = "def add(a, b):\n    return a * b\n"  # fails every suite

GATE = '''\
import os, sys
sys.path.insert(0, os.getcwd())
if os.path.exists("SLOW"):
    import time
    time.sleep(30)
if os.path.exists("CRASH"):
    import signal
    os.kill(os.getpid(), signal.SIGSEGV)
if os.path.exists("ERR"):
    sys.exit(3)
for marker in ("FORK", "FORKEXIT"):
    if os.path.exists(marker):
        import subprocess, time
        child = subprocess.Popen(["sleep", "60"])
        with open(os.environ["PIDFILE"], "w") as fh:
            fh.write(str(child.pid))
        if marker == "FORKEXIT":
            sys.exit(0)  # leaves the grandchild behind
        time.sleep(30)
if os.path.exists("RACE"):  # rewrite the broker's own copy of the candidate, beside this one
    import glob
    for other in glob.glob(os.path.join(os.getcwd(), "..", "..", "candidate-*", "candidate")):
        with open(os.path.join(other, "calc.py"), "a") as fh:
            fh.write("# raced\\n")
if os.path.exists("SECRET"):
    leaked = [k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k]
    sys.exit(1 if leaked else 0)
from calc import add
CASES = {"visible": [((2, 3), 5)], "challenge": [((-2, 5), 3), ((0, 0), 0)],
         "hidden": [((-3, 4), 1)]}
sys.exit(0 if all(add(*a) == r for a, r in CASES[sys.argv[1]]) else 1)
'''


def reply_patch(files: dict[str, str | None], **extra: object) -> str:
    return json.dumps({"action": "patch", "files": files, **extra})


class Lab:
    """One isolated set-up under `root`: workspace, gates, policy file, ledger, state folder."""

    def __init__(self, root: Path, program: str = CORRECT) -> None:
        self.root = Path(root)
        self.ws = self.root / "ws"
        self.ws.mkdir(parents=True)
        (self.ws / "calc.py").write_text(program)
        self.gates = self.root / "gates"
        self.gates.mkdir()
        self.gate_file = self.gates / "check.py"
        self.gate_file.write_text(GATE)
        self.policy_file = self.root / "policy.toml"
        self.policy_file.write_text('goal = "add two numbers"\n')
        self.outside = self.root / "outside"
        self.outside.mkdir()
        self._n = 0

    def check(self, suite: str, *, timeout_s: float = 10.0, cwd: str = ".",
              env: dict[str, str] | None = None) -> CommandCheck:
        return CommandCheck(suite, (sys.executable, "-S", str(self.gate_file), suite), cwd=cwd,
                            timeout_s=timeout_s, env=env)

    def broker(self, *, admission: list[str] | None = None, completion: list[str] | None = None,
               timeout_s: float = 10.0, checks: list | None = None, policy_pin: bool = True,
               clock: Callable[[], float] = time.monotonic, **policy: object) -> AdmissionBroker:
        """A broker guarding `ws`, its own state folder and a fresh real ledger."""
        self._n += 1
        adm = checks or [self.check(s, timeout_s=timeout_s)
                         for s in (admission or ["visible", "challenge"])]
        comp = ([self.check(s, timeout_s=timeout_s) for s in completion]
                if completion is not None else None)
        ledger = Ledger.create(self.root / f"ledger{self._n}.jsonl", {"type": "guard.run"})
        self.ledger = ledger
        self.state = self.root / f"state{self._n}"
        return AdmissionBroker(self.ws, self.state, admission=adm, completion=comp,
                               policy=GuardPolicy(**policy),  # type: ignore[arg-type]  # a case's fields; GuardPolicy checks them
                               policy_digest=file_policy(self.policy_file) if policy_pin else None,
                               protected=["policy.toml"], ledger=ledger, clock=clock)

    def program(self) -> str:
        return (self.ws / "calc.py").read_text()
