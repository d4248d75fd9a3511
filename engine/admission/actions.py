"""Typed revision actions: `Keep | Patch(files) | Escalate(reason)`, parsed before anything moves.

A worker's free-form reply is ambiguous: "STATUS: DONE" with no code, a half-written JSON object,
an empty patch. The paper saw correct candidates lost to exactly these. So a reply is parsed,
fail closed, into one of three actions before the workspace is touched; anything that is not a
well-formed Patch becomes Keep (or Escalate, per policy), and only a Patch can change a candidate.

Reply schema (one JSON object, UTF-8, nothing else):

    {"action": "patch", "files": {"src/shift.py": "new content\\n", "old.py": null}, "note": "..."}
    {"action": "keep", "note": "..."}
    {"action": "escalate", "reason": "the spec contradicts the tests", "note": "..."}

`files` maps workspace-relative POSIX paths to the full new text of the file, or null to delete
it. `note` is optional free text; it is recorded and never read by control flow (a worker's
self-report authorises nothing). Any other key, any other type, or an empty `files` is malformed.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Literal

from loopproof.engine.policy.guards import refuse
from loopproof.engine.system.canonical import digest

MAX_REPLY_BYTES = 4 << 20  # a reply larger than this is malformed, not parsed
InvalidPolicy = Literal["keep", "escalate"]


@dataclass(frozen=True)
class Keep:
    """Leave the candidate as it is. `reason` says why (the worker asked, or the reply was invalid)."""

    reason: str = "the worker asked to keep the current state"
    kind: str = field(default="keep", init=False)


@dataclass(frozen=True)
class Patch:
    """Replace the named files (None deletes). Only this action can change a candidate."""

    files: Mapping[str, str | None]
    kind: str = field(default="patch", init=False)


@dataclass(frozen=True)
class Escalate:
    """Stop and ask for help; nothing is committed."""

    reason: str
    kind: str = field(default="escalate", init=False)


Action = Keep | Patch | Escalate


@dataclass(frozen=True)
class Parsed:
    """A parsed reply: the action to take, whether the reply was well formed, and what was wrong."""

    action: Action
    valid: bool
    problem: str | None = None
    note: str | None = None


def _text(raw: bytes | str | None) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    if len(raw) > MAX_REPLY_BYTES:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _unicode(obj: object) -> bool:
    """Is every string (and key) in the parsed reply encodable as UTF-8?"""
    stack = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True


def _looks_done_only(text: str) -> bool:
    words = "".join(ch if ch.isalnum() else " " for ch in text.upper()).split()
    return bool(words) and set(words) <= {"STATUS", "DONE", "COMPLETE", "FINISHED", "OK", "ALL",
                                          "TESTS", "PASS", "PASSED"}


def _invalid(problem: str, on_invalid: InvalidPolicy) -> Parsed:
    action: Action = (Escalate(f"invalid reply: {problem}") if on_invalid == "escalate"
                      else Keep(f"invalid reply: {problem}"))
    return Parsed(action=action, valid=False, problem=problem)


def parse_reply(raw: bytes | str | None, *, on_invalid: InvalidPolicy = "keep") -> Parsed:
    """Parse a worker's reply into an action; never raises. Invalid replies map to `on_invalid`."""
    text = _text(raw)
    if text is None:
        return _invalid("missing, oversized or not UTF-8", on_invalid)
    if not text.strip():
        return _invalid("empty reply", on_invalid)
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        if _looks_done_only(text):
            return _invalid("a DONE-only reply carries no action", on_invalid)
        return _invalid("not a JSON object", on_invalid)
    if not isinstance(obj, dict):
        return _invalid("not a JSON object", on_invalid)
    if not _unicode(obj):  # "\ud800": JSON can say it, no file system or ledger can hold it
        return _invalid("holds a lone surrogate escape (text that is not Unicode)", on_invalid)
    kind = obj.get("action")
    note = obj.get("note")
    if note is not None and not isinstance(note, str):
        return _invalid("'note' must be a string", on_invalid)
    allowed = {"keep": {"action", "note"}, "escalate": {"action", "reason", "note"},
               "patch": {"action", "files", "note"}}
    if not isinstance(kind, str) or kind not in allowed:
        return _invalid(f"'action' must be one of keep, patch, escalate (got {kind!r})", on_invalid)
    extra = sorted(set(obj) - allowed[kind])
    if extra:
        return _invalid(f"unexpected keys {extra} for action {kind!r}", on_invalid)
    if kind == "keep":
        return Parsed(Keep(), valid=True, note=note)
    if kind == "escalate":
        reason = obj.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            return _invalid("'escalate' needs a non-empty 'reason'", on_invalid)
        return Parsed(Escalate(reason), valid=True, note=note)
    files = obj.get("files")
    if not isinstance(files, dict) or not files:
        return _invalid("'patch' needs a non-empty 'files' object", on_invalid)
    for path, content in files.items():
        if not isinstance(path, str) or not (content is None or isinstance(content, str)):
            return _invalid("'files' maps path strings to text or null", on_invalid)
    return Parsed(Patch(dict(files)), valid=True, note=note)


def path_violation(rel: str, workspace: Path, protected: Iterable[str] = ()) -> str | None:
    """Why a Patch may not write `rel` inside `workspace`, or None when it may.

    Refused: empty, absolute or non-normal paths, any `..`, NUL bytes, backslashes, paths matching
    a protected glob (gate files, policy, ledger), paths that pass through or land on a symlink,
    and paths that resolve outside the workspace.
    """
    if not rel or "\x00" in rel or "\\" in rel:
        return f"{rel!r}: empty path, NUL byte or backslash"
    pure = PurePosixPath(rel)
    if pure.is_absolute() or rel.startswith("~"):
        return f"{rel!r}: absolute path"
    if ".." in pure.parts or pure.as_posix() != rel or "." in pure.parts:
        return f"{rel!r}: not a normal relative path (no '..', '.', or doubled slashes)"
    if not pure.parts:  # "." is normal and stays inside, but it names the workspace, not a file
        return f"{rel!r}: names the workspace itself, not a file in it"
    for pattern in protected:
        if fnmatchcase(rel, pattern) or any(fnmatchcase(p.as_posix(), pattern)
                                            for p in pure.parents if str(p) != "."):
            return f"{rel!r}: protected path (matches {pattern!r})"
    root = Path(workspace)
    walk = root
    for part in pure.parts:
        walk = walk / part
        try:
            st = os.lstat(walk)
        except FileNotFoundError:
            break
        except OSError as exc:  # a name too long, a component that is a file, ...
            return f"{rel!r}: cannot be a path in the workspace ({exc.strerror})"
        if stat.S_ISLNK(st.st_mode):
            return f"{rel!r}: goes through a symlink ({walk.relative_to(root).as_posix()})"
    try:
        (root.resolve() / pure).resolve().relative_to(root.resolve())
    except ValueError:
        return f"{rel!r}: resolves outside the workspace"
    except OSError as exc:
        return f"{rel!r}: cannot be resolved ({exc.strerror})"
    return None


def patch_violations(patch: Patch, workspace: Path, protected: Iterable[str] = ()) -> list[str]:
    """Every reason `patch` may not be applied to `workspace` (empty list: it may)."""
    protected = tuple(protected)
    return [why for rel in sorted(patch.files)
            if (why := path_violation(rel, workspace, protected)) is not None]


def apply_patch(patch: Patch, workspace: Path, protected: Iterable[str] = ()) -> None:
    """Write `patch` into `workspace` (normally an isolated copy). Refuses any violation first."""
    problems = patch_violations(patch, workspace, protected)
    if refuse("patch.applied_paths", "; ".join(problems) or None):
        raise ValueError("; ".join(problems))
    root = Path(workspace)
    for rel, content in sorted(patch.files.items()):
        target = root / rel
        if content is None:
            if target.is_dir():
                raise ValueError(f"{rel!r}: a patch deletes files, not folders")
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            raise ValueError(f"{rel!r}: is a folder; a patch writes files")
        target.write_text(content, encoding="utf-8")


def action_record(parsed: Parsed, raw: bytes | str | None) -> dict:
    """The content-addressed form of one proposal: the raw reply and what it was parsed into."""
    raw_text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    action = parsed.action
    body: dict = {"kind": action.kind}
    if isinstance(action, Patch):
        body["files"] = dict(action.files)
    else:
        body["reason"] = action.reason
    rec = {"raw": raw_text, "action": body, "valid": parsed.valid, "problem": parsed.problem,
           "note": parsed.note}
    rec["digest"] = digest({k: v for k, v in rec.items()})
    return rec
