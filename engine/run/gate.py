"""Gates: the independent judge of an attempt. One protocol, two adapters (a command, a callable).

Why a snapshot: the worker must have no write path to what the gate sees while it judges, and a
gate must not change what it judges. The gate runs on a *copy* of the workspace, made read-only
and content-hashed before and after the gate runs; any change makes the verdict an error. (Under
root, permissions do not stop a write; the hash comparison still catches it.)

Why a sandbox too: the copy is read-only to the gate, but the gate is a program started in the
worker's tree. It runs in its own sandbox (engine/system/sandbox/) that sees the copy read-only,
its pinned files and a fresh private HOME, with the gate environment of engine/system/process.py
(fixed PATH, no per-user site-packages, no `sys.path` entry for the working directory), so no
file the worker left can run inside the gate's interpreter.

Verdicts: exit 0 accept, 1 reject, 2 error, anything else error; a timeout is an error; a
snapshot change is an error. An error is never an accept.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from engine.system.judged import TreeRefused, copy_judged
from engine.system.process import ProcessError, gate_environment, run_command
from engine.system.sandbox import UNSANDBOXED, Confinement
from engine.system.trees import make_read_only, remove_tree, tree_digest

ACCEPT, REJECT, ERROR = "accept", "reject", "error"
VERDICTS = (ACCEPT, REJECT, ERROR)
DETAIL_LIMIT = 2000


@dataclass(frozen=True)
class GateResult:
    """A gate's verdict on one snapshot. `detail` is the gate's own words, for the ledger."""

    verdict: str
    detail: str
    seconds: float
    snapshot: str = ""  # content hash of the snapshot the gate judged
    facts: dict[str, Any] = field(default_factory=dict)  # e.g. `output`: its recorded streams
    copied: str = ""  # content hash of that snapshot as copied (before it was made read-only)

    @property
    def accepted(self) -> bool:
        return self.verdict == ACCEPT


class Gate(Protocol):
    """Judge a workspace. Implementations must never write to `workspace`. A command gate runs
    its commands in `confine` (the judged copy is added to its view)."""

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult: ...

    def pinned_files(self) -> tuple[Path, ...]: ...


# ---- the snapshot judge, shared by both adapters -------------------------------------------------

# (verdict, detail) or (verdict, detail, facts for the verdict record)
Judge = Callable[[Path, float], tuple[str, str] | tuple[str, str, dict[str, Any]]]


def judge_snapshot(workspace: Path, timeout_s: float, inner: Judge) -> GateResult:
    """Copy `workspace` to a fresh read-only snapshot, hash it, let `inner` judge the snapshot,
    hash again; a change, or a verdict outside accept|reject, is an error. The copy follows the
    judged-tree rules (engine/system/judged.py: a symlink is refused), and its hash as copied is
    returned too (`copied`), so the runner can check that the gate saw the staged tree."""
    start = time.monotonic()
    snap_parent = Path(tempfile.mkdtemp(prefix="loopproof-snapshot-"))
    snap = snap_parent / "workspace"
    try:
        try:
            copy_judged(workspace, snap)
            copied = tree_digest(snap)
            make_read_only(snap)
            before = tree_digest(snap)
        except (OSError, TreeRefused) as exc:  # e.g. a file the worker made unreadable
            return GateResult(ERROR, f"cannot snapshot the workspace: {exc}"[:DETAIL_LIMIT],
                              time.monotonic() - start)
        facts: dict[str, Any] = {}
        try:
            verdict, detail, *more = inner(snap, timeout_s)
            facts = dict(more[0]) if more else {}
        except Exception as exc:  # a gate that crashes gives no verdict
            verdict, detail = ERROR, f"gate raised {type(exc).__name__}: {exc}"
        after = tree_digest(snap)
        if after != before:
            verdict, detail = ERROR, f"the gate's snapshot changed while it judged; {detail}"
        elif verdict not in VERDICTS:
            verdict, detail = ERROR, f"not a verdict: {verdict!r}; {detail}"
        return GateResult(verdict, cut_detail(detail), time.monotonic() - start, before, facts,
                          copied)
    finally:
        remove_tree(snap_parent)


def cut_detail(detail: str) -> str:
    """At most DETAIL_LIMIT characters: the first clause (how the gate ended: "exit 1", a
    timeout) and the end of what it said."""
    if len(detail) <= DETAIL_LIMIT:
        return detail
    head = detail.split("; ", 1)[0][:200]
    return f"{head}; ...{detail[-(DETAIL_LIMIT - len(head) - 5):]}"


# ---- adapters ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CommandGate:
    """A gate command: exit 0 accept, 1 reject, 2 error, anything else error; timeout error."""

    argv: tuple[str, ...]
    timeout_s: float = 60.0

    def pinned_files(self) -> tuple[Path, ...]:
        return tuple(Path(a) for a in self.argv if Path(a).is_absolute() and Path(a).is_file())

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        box = confine if confine is not None else UNSANDBOXED
        return judge_snapshot(workspace, self.timeout_s,
                              lambda snap, t: self._run(snap, t, box.seeing(readable=[snap])))

    def _run(self, snapshot: Path, timeout_s: float, box: Confinement
             ) -> tuple[str, str, dict[str, Any]]:
        try:
            res = run_command(self.argv, snapshot, timeout_s, env=gate_environment(),
                              confine=box)
        except ProcessError as exc:
            return ERROR, str(exc), {}
        out, err = res.stream("stdout"), res.stream("stderr")
        # the detail ends with the real end of what the gate printed (detail keeps its tail)
        words = "\n".join(t for t in (out.text().strip(), err.text().strip()) if t)
        facts = {"output": {"stdout": out.record(), "stderr": err.record()},
                 "exit": res.returncode}
        if res.timed_out:
            return ERROR, f"gate timed out after {timeout_s:g} s; {words}", facts
        if res.killed:
            return ERROR, f"gate killed ({res.killed}); {words}", facts
        verdict = {0: ACCEPT, 1: REJECT}.get(res.returncode, ERROR)
        return verdict, f"exit {res.returncode}; {words}", facts


@dataclass(frozen=True)
class CallableGate:
    """A Python gate: `fn(snapshot_dir) -> "accept" | "reject" | "error" | (verdict, detail)`.
    It judges the same read-only snapshot a command gate would; it has no timeout of its own."""

    fn: Callable[[Path], object]
    files: tuple[Path, ...] = ()

    def pinned_files(self) -> tuple[Path, ...]:
        return self.files

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        return judge_snapshot(workspace, 0.0, self._run)  # runs in this process: no sandbox

    def _run(self, snapshot: Path, timeout_s: float) -> tuple[str, str]:
        out = self.fn(snapshot)
        if isinstance(out, tuple):
            verdict, detail = out
            return str(verdict), str(detail)
        return str(out), ""
