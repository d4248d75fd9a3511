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

Why an error says what kind it is (`error` in the verdict record: "exit N", "signal NAME",
"timeout", "killed (...)", "cannot start", "raised", "snapshot changed", "not a verdict",
"cannot snapshot"): an error is the gate not judging, a reject is the gate judging no, and the
node's `gate_errors` ("retry" | "stop") treats them apart. A Python gate that raises exits 1,
which the protocol reads as reject; its traceback's last line is kept as `raised`, so a crash
that looks like a reject can still be told apart (docs/engine.md, "What a gate sees").
"""

from __future__ import annotations

import dataclasses
import os
import signal
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopproof.engine.system.judged import TreeRefused, copy_judged
from loopproof.engine.system.process import ProcessError, gate_environment, run_command
from loopproof.engine.system.sandbox import UNSANDBOXED, Confinement
from loopproof.engine.system.trees import file_digest, make_read_only, remove_tree, tree_digest

ACCEPT, REJECT, ERROR = "accept", "reject", "error"
VERDICTS = (ACCEPT, REJECT, ERROR)
DETAIL_LIMIT = 2000
CHANGES_SHOWN = 10  # changed paths named in the detail (the record keeps up to CHANGES_KEPT)
CHANGES_KEPT = 50


@dataclass(frozen=True)
class GateResult:
    """A gate's verdict on one snapshot. `detail` is the gate's own words, for the ledger.
    `copied` is what every accepting gate must report: the `tree_digest` of the tree it judged,
    as it found it (the attempt accepts a PASS only when that is the staged copy)."""

    verdict: str
    detail: str
    seconds: float
    snapshot: str = ""  # content hash of the snapshot the gate judged
    facts: dict[str, Any] = field(default_factory=dict)  # e.g. `output`: its recorded streams
    copied: str = ""  # content hash of that snapshot as copied (before it was made read-only)

    @property
    def accepted(self) -> bool:
        return self.verdict == ACCEPT

    @classmethod
    def not_judged(cls, why: str) -> GateResult:
        """The verdict of an attempt whose gate never judged it (its copy could not be staged,
        a pinned file changed, the worker broke its meter contract): an error, never a PASS."""
        return cls(ERROR, f"not judged: {why}", 0.0, facts={"error": "not judged"})


class Gate(Protocol):
    """Judge a workspace: what the attempt (engine/run/attempt.py) relies on, and all it asks.

    - `judge` never writes to `workspace`, runs its commands in `confine` (the judged copy is
      added to its view), and on an accept reports `GateResult.copied`, the tree it judged; an
      accept whose `copied` is not the staged copy is an error, whatever the gate's class;
    - `pinned_files`: the files it depends on, pinned for the run;
    - `within(limit_s)`: this gate stopped after `limit_s` seconds (the evaluation's
      reservation); a gate that runs in the engine's process cannot be stopped: itself;
    - `receipt_anchor()`: what an accepting verdict record anchors (a revision node's
      receipt, engine/admission/revision.py); None for every other gate;
    - `check_start(confine)`: what the gate checks of its own files once, at run start, before
      anything is written (a `pytest` gate: its pinned tests collect, its `select` IDs are
      among them); BadInput (exit 2) when they cannot work. Nothing for most gates.
    Gate classes subclass this protocol for the last two's defaults (`TimedGate`: the `within`
    of a gate with a `timeout_s`)."""

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult: ...

    def pinned_files(self) -> tuple[Path, ...]: ...

    def within(self, limit_s: float) -> Gate:
        return self

    def receipt_anchor(self) -> dict[str, Any] | None:
        return None

    def check_start(self, confine: Confinement | None) -> None:
        return None


class TimedGate(Gate):
    """A gate (a dataclass with a `timeout_s` field) whose commands are killed at their timeout:
    `within` cuts the timeout to the limit (killed there: a timeout, an error verdict)."""

    timeout_s: float

    def within(self, limit_s: float) -> Gate:
        me: Any = self  # every TimedGate is a dataclass
        return dataclasses.replace(me, timeout_s=limit_s) if limit_s < self.timeout_s else self


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
                              time.monotonic() - start, facts={"error": "cannot snapshot"})
        facts: dict[str, Any] = {}
        try:
            verdict, detail, *more = inner(snap, timeout_s)
            facts = dict(more[0]) if more else {}
        except Exception as exc:  # a gate that crashes gives no verdict
            verdict, detail = ERROR, f"gate raised {type(exc).__name__}: {exc}"
            facts = {"error": "raised", "raised": f"{type(exc).__name__}: {exc}"[:300]}
        after = tree_digest(snap)
        if after != before:
            changed = snapshot_changes(workspace, snap)
            named = ", ".join(changed[:CHANGES_SHOWN]) + (
                f" and {len(changed) - CHANGES_SHOWN} more" if len(changed) > CHANGES_SHOWN
                else "")
            verdict, detail = ERROR, (f"the gate's snapshot changed while it judged: "
                                      f"{named or 'the tree hash differs'}; {detail}")
            facts.update(error="snapshot changed", changed=changed[:CHANGES_KEPT])
        elif verdict not in VERDICTS:
            verdict, detail = ERROR, f"not a verdict: {verdict!r}; {detail}"
            facts["error"] = "not a verdict"
        return GateResult(verdict, cut_detail(detail), time.monotonic() - start, before, facts,
                          copied)
    finally:
        remove_tree(snap_parent)


def snapshot_changes(source: Path, snap: Path) -> list[str]:
    """What the gate changed in its snapshot, as paths: `+ p` added, `- p` removed, `~ p` its
    bytes, link target or kind changed, `mode p 444->644` its permission bits changed. The
    snapshot was copied from `source` and made read-only (files 0o444, folders 0o555), so that
    is what each entry must still be."""
    def entries(root: Path, read_only: bool) -> dict[str, tuple[str, str, int]]:
        out: dict[str, tuple[str, str, int]] = {}
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in [".", *dirnames, *filenames] if dirpath == str(root) else [
                    *dirnames, *filenames]:
                p = os.path.join(dirpath, name)
                rel = os.path.normpath(os.path.relpath(p, root))
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    out[rel] = ("link", os.readlink(p), 0)
                elif stat.S_ISDIR(st.st_mode):
                    out[rel] = ("dir", "", 0o555 if read_only else stat.S_IMODE(st.st_mode))
                elif stat.S_ISREG(st.st_mode):
                    out[rel] = ("file", file_digest(Path(p)),
                                0o444 if read_only else stat.S_IMODE(st.st_mode))
                else:
                    out[rel] = ("other", "", 0)
        return out

    was, now = entries(Path(source), True), entries(Path(snap), False)
    changes = [f"+ {p}{'/' if now[p][0] == 'dir' else ''}" for p in sorted(set(now) - set(was))]
    changes += [f"- {p}" for p in sorted(set(was) - set(now))]
    for p in sorted(set(was) & set(now)):
        if was[p][:2] != now[p][:2]:
            changes.append(f"~ {p}")
        elif was[p][2] != now[p][2]:
            changes.append(f"mode {p} {was[p][2]:o}->{now[p][2]:o}")
    return changes


def cut_detail(detail: str) -> str:
    """At most DETAIL_LIMIT characters: the first clause (how the gate ended: "exit 1", a
    timeout) and the end of what it said."""
    if len(detail) <= DETAIL_LIMIT:
        return detail
    head = detail.split("; ", 1)[0][:200]
    return f"{head}; ...{detail[-(DETAIL_LIMIT - len(head) - 5):]}"


def python_raised(stderr: Any) -> str | None:
    """The last line of a Python traceback at the end of `stderr` ("FileNotFoundError: ..."),
    or None when it does not end with one."""
    text = stderr.text() if hasattr(stderr, "text") else str(stderr)
    if "Traceback (most recent call last):" not in text:
        return None
    last = text.rstrip().rsplit("\n", 1)[-1].strip()
    name = last.split(":", 1)[0]
    return last[:300] if name.replace(".", "").replace("_", "").isalnum() else None


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return str(n)


# ---- adapters ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CommandGate(TimedGate):
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
            return ERROR, str(exc), {"error": "cannot start"}
        out, err = res.stream("stdout"), res.stream("stderr")
        # the detail ends with the real end of what the gate printed (detail keeps its tail)
        words = "\n".join(t for t in (out.text().strip(), err.text().strip()) if t)
        facts: dict[str, Any] = {"output": {"stdout": out.record(), "stderr": err.record()},
                                 "exit": res.returncode}
        if (raised := python_raised(err)) is not None:
            facts["raised"] = raised
        if res.held is not None:
            facts["held_by"] = dict(res.held)
        if res.timed_out:
            return ERROR, f"gate timed out after {timeout_s:g} s; {words}", {
                **facts, "error": "timeout"}
        if res.limit is not None:  # a resource limit (engine/system/limits/): never a verdict
            return ERROR, f"gate killed at its {res.limit}; {words}", {
                **facts, "error": "limit", "limit": res.limit}
        if res.killed:
            return ERROR, f"gate killed ({res.killed}); {words}", {
                **facts, "error": f"killed ({res.killed})"}
        code = res.returncode
        verdict = {0: ACCEPT, 1: REJECT}.get(code, ERROR)
        if verdict == ERROR:
            facts["error"] = f"signal {_signal_name(-code)}" if code is not None and code < 0 \
                else f"exit {code}"
        return verdict, f"exit {code}; {words}", facts


@dataclass(frozen=True)
class CallableGate(Gate):
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
