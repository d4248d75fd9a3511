"""The fail-closed reply parser and the patch path rules."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loopproof.engine.admission.actions import (
    Escalate,
    Keep,
    Patch,
    action_record,
    apply_patch,
    parse_reply,
    path_violation,
)

INVALID = [None, "", "   ", "STATUS: DONE", "All tests pass. DONE", "{", "[]", "null", "42",
           '{"action": "patch"}', '{"action": "patch", "files": {}}',
           '{"action": "patch", "files": []}', '{"action": "patch", "files": {"a": 1}}',
           '{"action": "escalate"}', '{"action": "escalate", "reason": "  "}',
           '{"action": "keep", "verdict": "pass"}', '{"action": "KEEP"}', '{"files": {"a": "b"}}',
           '{"action": "keep", "note": 3}', '{"action": []}', '{"action": {"a": 1}}', b"\xff",
           b"x" * (5 << 20)]


@pytest.mark.parametrize("reply", INVALID)
def test_invalid_replies_are_keep_or_escalate(reply) -> None:
    parsed = parse_reply(reply)
    assert not parsed.valid and isinstance(parsed.action, Keep) and parsed.problem
    assert isinstance(parse_reply(reply, on_invalid="escalate").action, Escalate)


def test_valid_replies() -> None:
    p = parse_reply(json.dumps({"action": "patch", "files": {"a.py": "x", "b": None},
                                "note": "fixed"}))
    assert p.valid and isinstance(p.action, Patch) and p.action.files == {"a.py": "x", "b": None}
    assert p.note == "fixed"
    assert isinstance(parse_reply('{"action": "keep"}').action, Keep)
    e = parse_reply('{"action": "escalate", "reason": "stuck"}')
    assert isinstance(e.action, Escalate) and e.action.reason == "stuck"


@settings()  # the ci profile: 50 examples (was 200); `make fuzz` draws 300
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200),
                 st.recursive(st.none() | st.booleans() | st.text(max_size=5),
                              lambda c: st.lists(c, max_size=3) |
                              st.dictionaries(st.sampled_from(["action", "files", "reason",
                                                               "note", "x"]), c, max_size=4),
                              max_leaves=8).map(json.dumps)))
def test_parser_never_raises_and_only_a_well_formed_patch_is_a_patch(reply) -> None:
    parsed = parse_reply(reply)
    if isinstance(parsed.action, Patch):
        obj = json.loads(reply)
        assert obj["action"] == "patch" and obj["files"] and parsed.valid
    assert parsed.valid or parsed.problem


@pytest.mark.parametrize("rel,why", [("/etc/passwd", "absolute"), ("../x", "normal"),
                                     ("a/../../x", "normal"), ("./a", "normal"),
                                     ("a//b", "normal"), ("", "empty"), ("a\\b", "backslash"),
                                     ("gate/check.py", "protected"), ("ledger.jsonl", "protected"),
                                     ("link/x", "symlink"), (".", "workspace itself")])
def test_path_violations(tmp_path: Path, rel: str, why: str) -> None:
    os.symlink(".", tmp_path / "link")
    problem = path_violation(rel, tmp_path, ["gate/*", "*.jsonl"])
    assert problem is not None and why in problem


def test_ordinary_paths_are_allowed(tmp_path: Path) -> None:
    for rel in ("a.py", "src/pkg/b.py", "new/dir/c.txt"):
        assert path_violation(rel, tmp_path, ["gate/*"]) is None


def test_apply_patch_writes_and_deletes(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text("x")
    apply_patch(Patch({"new/a.py": "a\n", "old.py": None}), tmp_path)
    assert (tmp_path / "new" / "a.py").read_text() == "a\n" and not (tmp_path / "old.py").exists()
    with pytest.raises(ValueError):
        apply_patch(Patch({"../escape": "x"}), tmp_path)
    assert not (tmp_path.parent / "escape").exists()


def test_action_record_is_content_addressed() -> None:
    reply = '{"action": "keep"}'
    a, b = action_record(parse_reply(reply), reply), action_record(parse_reply(reply), reply)
    assert a["digest"] == b["digest"]
    assert action_record(parse_reply("DONE"), "DONE")["digest"] != a["digest"]


@settings(max_examples=80)
@given(st.text(max_size=300) | st.just("a" * 300) | st.just("d/" * 3000))
@example(".")  # the workspace itself: once allowed, then apply_patch raised "is a folder"
def test_path_violation_never_raises(tmp_path_factory, rel: str) -> None:
    root = tmp_path_factory.mktemp("p")
    (root / "f").write_text("x")
    why = path_violation(rel, root, ["gate/*"])
    assert why is None or isinstance(why, str)
    if why is None:  # an allowed path can be written inside the workspace
        apply_patch(Patch({rel: "x"}), root)
        assert (root / rel).resolve().is_relative_to(root.resolve())
