"""State hash, suite hash, evidence binding and the two check adapters."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.engine.admission.evidence import (
    CallableCheck,
    CheckResult,
    CommandCheck,
    Evidence,
    run_check,
    stale_reason,
    suite_hash,
)
from loopproof.engine.system.trees import UnsafeTree, tree_hash


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("a = 1\n")
    (root / "b.txt").write_text("b")
    return root


def test_tree_hash_is_stable_under_copy(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    shutil.copytree(src, tmp_path / "dst", symlinks=True)
    assert tree_hash(src) == tree_hash(tmp_path / "dst")


@pytest.mark.parametrize("change", ["content", "mode", "rename", "empty_dir", "inner_link"])
def test_tree_hash_sees_every_kind_of_change(tmp_path: Path, change: str) -> None:
    root = _tree(tmp_path / "w")
    before = tree_hash(root)
    if change == "content":
        (root / "b.txt").write_text("c")
    elif change == "mode":
        os.chmod(root / "b.txt", 0o700)
    elif change == "rename":
        (root / "b.txt").rename(root / "c.txt")
    elif change == "empty_dir":
        (root / "new").mkdir()
    else:
        os.symlink("b.txt", root / "link")
    assert tree_hash(root) != before


@pytest.mark.parametrize("target", ["../../outside", "/etc/passwd", "../pkg/../../x"])
def test_escaping_symlinks_are_refused(tmp_path: Path, target: str) -> None:
    root = _tree(tmp_path / "w")
    os.symlink(target, root / "pkg" / "l")
    with pytest.raises(UnsafeTree) as err:
        tree_hash(root)
    assert err.value.field == "pkg/l" and "leaves the workspace" in str(err.value)


@settings(max_examples=30)
@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.binary(max_size=20),
                       min_size=1, max_size=5),
       st.data())
def test_tree_hash_differs_when_any_file_differs(tmp_path_factory, files, data) -> None:
    root = tmp_path_factory.mktemp("h")
    for name, body in files.items():
        (root / name).write_bytes(body)
    h = tree_hash(root)
    name = data.draw(st.sampled_from(sorted(files)))
    (root / name).write_bytes(files[name] + b"!")
    assert tree_hash(root) != h


def test_suite_hash_covers_argv_files_and_cwd(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("print(1)\n")
    base = CommandCheck("t", ("python3", str(script)))
    h = suite_hash(base.identity())
    assert suite_hash(CommandCheck("t", ("python3", str(script), "-x")).identity()) != h
    assert suite_hash(CommandCheck("t", ("python3", str(script)), cwd="sub").identity()) != h
    script.write_text("print(2)\n")
    assert suite_hash(base.identity()) != h


def test_stale_reason_binds_tree_and_suite() -> None:
    ev = Evidence("t1", "s1", "x1", {"check": "c", "verdict": "pass"})
    assert stale_reason(ev, "t1", "s1") is None
    assert "describes tree" in stale_reason(ev, "t2", "s1")
    assert "suite" in stale_reason(ev, "t1", "s2")
    assert stale_reason(None, "t1", "s1") == "no evidence was cited"


def test_evidence_id_covers_the_payload() -> None:
    ev = Evidence("t", "s", "x", {"verdict": "fail"})
    assert Evidence.from_json(ev.to_json()) == ev
    assert Evidence("t", "s", "x", {"verdict": "pass"}).id != ev.id


@pytest.mark.parametrize("code,verdict", [("0", "pass"), ("1", "fail"), ("7", "error")])
def test_command_check_maps_exit_codes(tmp_path: Path, code: str, verdict: str) -> None:
    check = CommandCheck("c", (sys.executable, "-S", "-c", f"raise SystemExit({code})"))
    ev = run_check(check, _tree(tmp_path / "w"), "x1")
    assert ev.verdict == verdict and ev.check == "c" and ev.execution_id == "x1"


def test_command_check_that_cannot_start_is_an_error(tmp_path: Path) -> None:
    check = CommandCheck("c", (str(tmp_path / "no-such-program"),))
    assert run_check(check, _tree(tmp_path / "w"), "x").verdict == "error"


def test_run_check_leaves_the_source_alone(tmp_path: Path) -> None:
    root = _tree(tmp_path / "w")
    before = tree_hash(root)
    check = CommandCheck("c", (sys.executable, "-S", "-c",
                               "open('b.txt','w').write('changed'); open('new','w')"))
    ev = run_check(check, root, "x")
    assert ev.verdict == "pass" and ev.state_hash == before == tree_hash(root)


def test_callable_check_adapter(tmp_path: Path) -> None:
    root = _tree(tmp_path / "w")

    def has_b(candidate: Path) -> bool:
        return (candidate / "b.txt").exists()

    def boom(candidate: Path) -> bool:
        raise RuntimeError("verifier bug")

    assert run_check(CallableCheck("b", has_b), root, "x").verdict == "pass"
    assert run_check(CallableCheck("b", boom), root, "x").verdict == "error"
    detailed = CallableCheck("d", lambda c: CheckResult("fail", "why", {"n": 1}))
    ev = run_check(detailed, root, "x")
    assert ev.verdict == "fail" and ev.payload["n"] == 1
    assert suite_hash(CallableCheck("b", has_b, version="2").identity()) != \
        suite_hash(CallableCheck("b", has_b).identity())
