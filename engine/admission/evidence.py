"""State-bound evidence: a verifier's result is only as good as the state and suite it describes.

An `Evidence` envelope carries `(state_hash, suite_hash, execution_id, payload)`. The state hash
covers the workspace tree (sorted relative paths, entry kinds, modes and contents); the suite hash
covers the check's identity (argv, the files it names, its working directory, its timeout). A
payload can hold true facts and still be invalid: if its envelope names an older tree or another
suite, it describes something that no longer exists (the paper's Caesar-shift example: a trace
from shift 12 reused after shift 4 restores shift 12). `stale_reason` says why an envelope does
not bind; the admission broker refuses to let such evidence drive a patch.

Hashes prove identity, not correctness: a hash-matched patch can still be wrong; that residual
risk belongs to the checks themselves.

The state hash itself (`tree_hash`, refusing unsafe trees) is engine/system/trees.py.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from loopproof.engine.policy.guards import refuse
from loopproof.engine.system.canonical import digest
from loopproof.engine.system.process import ProcessError, gate_environment, run_command
from loopproof.engine.system.sandbox import UNSANDBOXED, Confinement
from loopproof.engine.system.secrets import redact_text, secret_values
from loopproof.engine.system.trees import (
    copy_tree,
    file_sha256,
    inside,
    remove_tree,
    tree_hash,
)


def suite_hash(identity: Mapping[str, Any]) -> str:
    """The suite hash: one digest over a check's identity (see `Check.identity`)."""
    return digest(dict(identity))


@dataclass(frozen=True)
class Evidence:
    """What one execution of one check said about one state of one workspace.

    `payload` holds the check's name, its verdict ("pass" | "fail" | "error") and details (exit
    code, a bounded tail of its output). The envelope fields bind it: a worker may be shown this
    evidence, and a patch may cite it, only while `state_hash` and `suite_hash` are current.
    """

    state_hash: str
    suite_hash: str
    execution_id: str
    payload: Mapping[str, Any] = field(default_factory=dict)

    @property
    def check(self) -> str:
        return str(self.payload.get("check", ""))

    @property
    def verdict(self) -> str:
        return str(self.payload.get("verdict", "error"))

    @property
    def id(self) -> str:
        """The evidence id: a digest over the whole envelope, so any edit gives another id."""
        return digest(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {"state_hash": self.state_hash, "suite_hash": self.suite_hash,
                "execution_id": self.execution_id, "payload": dict(self.payload)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Evidence:
        return cls(state_hash=str(obj["state_hash"]), suite_hash=str(obj["suite_hash"]),
                   execution_id=str(obj["execution_id"]), payload=dict(obj.get("payload", {})))


def stale_reason(evidence: Evidence | None, state_hash: str, suite_hash_now: str) -> str | None:
    """Why `evidence` does not describe the current state and suite, or None when it binds."""
    if evidence is None:
        return "no evidence was cited"
    if evidence.state_hash != state_hash:
        return (f"evidence {evidence.execution_id} describes tree {evidence.state_hash[:12]}, "
                f"the current tree is {state_hash[:12]}")
    if evidence.suite_hash != suite_hash_now:
        return (f"evidence {evidence.execution_id} came from suite {evidence.suite_hash[:12]}, "
                f"the current suite is {suite_hash_now[:12]}")
    return None


# ---- checks: the things that produce evidence ------------------------------------------------

TAIL_BYTES = 2000  # how much of a check's stdout/stderr an evidence payload keeps


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict on one candidate. "error" is no verdict, and never counts as a pass."""

    verdict: str  # "pass" | "fail" | "error"
    detail: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


class Check(Protocol):
    """One protocol, two adapters (`CommandCheck`, `CallableCheck`). `identity()` is what the
    suite hash covers; `run(candidate)` is called on an isolated copy the check may scribble on."""

    name: str

    def identity(self) -> dict[str, Any]: ...

    def run(self, candidate: Path, timeout_s: float | None = None) -> CheckResult: ...


def _file_identity(paths: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in sorted(set(paths)):
        try:
            out[p] = file_sha256(Path(p))
        except OSError:
            out[p] = "missing"
    return out


def _tail(data: bytes) -> str:
    """The last TAIL_BYTES of a check's output, with the engine's secrets redacted."""
    return redact_text(data[-TAIL_BYTES:].decode("utf-8", errors="replace"), secret_values())


def working_dir_violation(candidate: Path, cwd: str) -> str | None:
    """Why `cwd` is not a valid working directory for a check inside `candidate`, or None."""
    pure = PurePosixPath(cwd)
    if pure.is_absolute() or ".." in pure.parts:
        return f"working directory {cwd!r} must be a relative path inside the candidate"
    target = (Path(candidate) / pure).resolve()
    if not inside(Path(candidate).resolve(), target):
        return f"working directory {cwd!r} leaves the candidate"
    if not target.is_dir():
        return f"working directory {cwd!r} does not exist in the candidate"
    return None


@dataclass(frozen=True)
class CommandCheck:
    """A command run in the candidate copy (`cwd` relative to it): exit 0 pass, 1 fail, anything
    else (another code, a signal, a timeout, a command that cannot start) is an error. The
    child gets the gate environment of `engine.system.process` (no secrets, fixed PATH, no
    per-user site-packages) plus `env`, runs in `confine` (a gate's sandbox, with its candidate
    copy added read-write) when given, and its whole process group is killed when it ends or
    times out."""

    name: str
    argv: tuple[str, ...]
    cwd: str = "."
    files: tuple[str, ...] = ()
    timeout_s: float = 30.0
    env: Mapping[str, str] | None = None
    confine: Confinement | None = field(default=None, compare=False)

    def named_files(self) -> tuple[str, ...]:
        """The files the suite hash covers: `files`, plus absolute argv items that name existing
        files: the program (an interpreter resolved at run start) and the test scripts."""
        from_argv = [a for a in self.argv if os.path.isabs(a) and os.path.isfile(a)]
        return tuple(sorted(set(self.files) | set(from_argv)))

    def identity(self) -> dict[str, Any]:
        return {"kind": "command", "name": self.name, "argv": list(self.argv), "cwd": self.cwd,
                "timeout_s": self.timeout_s, "env": dict(self.env or {}),
                "files": _file_identity(self.named_files())}

    def run(self, candidate: Path, timeout_s: float | None = None) -> CheckResult:
        why = refuse("verifier.cwd", working_dir_violation(candidate, self.cwd))
        if why is not None:
            return CheckResult("error", f"invalid verifier: {why}", {"returncode": None})
        limit = self.timeout_s if timeout_s is None else max(0.01, min(self.timeout_s, timeout_s))
        try:
            box = (self.confine or UNSANDBOXED).seeing(writable=[Path(candidate)])
            res = run_command(self.argv, Path(candidate) / self.cwd, limit,
                              env=gate_environment(self.env), confine=box)
        except ProcessError as exc:
            return CheckResult("error", f"verifier could not start: {exc}", {"returncode": None})
        data = {"returncode": res.returncode, "killed": res.killed,
                "stdout": _tail(res.stdout), "stderr": _tail(res.stderr)}
        if res.killed:
            return CheckResult("error", f"verifier killed ({res.killed} after {limit:g}s)", data)
        if res.returncode == 0:
            return CheckResult("pass", "exit 0", data)
        if res.returncode == 1:
            return CheckResult("fail", "exit 1", data)
        if res.returncode is not None and res.returncode < 0:
            return CheckResult("error", f"verifier crashed (signal {-res.returncode})", data)
        return CheckResult("error", f"verifier error (exit {res.returncode})", data)


@dataclass(frozen=True)
class CallableCheck:
    """A Python function `fn(candidate_dir) -> bool | CheckResult` as a check. Its identity is
    the function's qualified name, `version` and the digests of `files`; bump `version` when its
    logic changes. An exception is an error, not a fail. The function enforces its own time
    limit (run candidate code through `engine.system.process.run_command`)."""

    name: str
    fn: Callable[[Path], bool | CheckResult]
    version: str = "1"
    files: tuple[str, ...] = ()

    def identity(self) -> dict[str, Any]:
        fn_name = f"{getattr(self.fn, '__module__', '?')}.{getattr(self.fn, '__qualname__', '?')}"
        return {"kind": "callable", "name": self.name, "function": fn_name,
                "version": self.version, "files": _file_identity(self.files)}

    def run(self, candidate: Path, timeout_s: float | None = None) -> CheckResult:
        try:
            out = self.fn(Path(candidate))
        except Exception as exc:  # a crashing verifier gives no verdict
            return CheckResult("error", f"verifier raised {type(exc).__name__}: {exc}")
        if isinstance(out, CheckResult):
            return out
        if isinstance(out, bool):
            return CheckResult("pass" if out else "fail", "callable returned " + str(out))
        return CheckResult("error", f"verifier returned {type(out).__name__}, not bool")


def run_check(check: Check, source: Path, execution_id: str, *, scratch: Path | None = None,
              timeout_s: float | None = None) -> Evidence:
    """Run `check` on a fresh copy of `source` and wrap the result in a bound envelope.

    The state hash is taken on the copy before the check runs, so the evidence names exactly the
    tree the check saw; the copy is deleted afterwards, so a check cannot change `source`.
    """
    parent = Path(tempfile.mkdtemp(prefix="check-", dir=scratch))
    copy = parent / "candidate"
    try:
        copy_tree(source, copy)
        state = tree_hash(copy)
        suite = suite_hash(check.identity())
        result = check.run(copy, timeout_s)
    finally:
        remove_tree(parent, best_effort=True)
    payload = {"check": check.name, "verdict": result.verdict, "detail": result.detail,
               **{k: v for k, v in result.data.items() if k not in ("check", "verdict", "detail")}}
    return Evidence(state_hash=state, suite_hash=suite, execution_id=execution_id, payload=payload)
