"""The checkpoint store: commit only with bound PASS evidence; exact restore; tamper detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.engine.admission.checkpoint import CheckpointError, CheckpointStore
from loopproof.engine.admission.evidence import Evidence
from loopproof.engine.system.trees import tree_hash

SUITES = {"visible": "S", "challenge": "C"}


def _ws(root: Path, body: str = "x") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.py").write_text(body)
    return root


def _ev(tree: str, check: str, verdict: str = "pass", suite: str | None = None) -> Evidence:
    return Evidence(tree, suite or SUITES[check], f"x.{check}", {"check": check,
                                                                   "verdict": verdict})


def test_commit_needs_pass_evidence_from_every_suite_bound_to_the_tree(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    ws = _ws(tmp_path / "w")
    h = tree_hash(ws)
    refused = [[_ev(h, "visible")],
               [_ev(h, "visible"), _ev(h, "challenge", "fail")],
               [_ev(h, "visible"), _ev(h, "challenge", "error")],
               [_ev(h, "visible"), _ev("other", "challenge")],
               [_ev(h, "visible"), _ev(h, "challenge", suite="old-suite")]]
    for evidence in refused:
        with pytest.raises(CheckpointError):
            store.commit(ws, evidence, SUITES)
        assert store.head() is None
    with pytest.raises(CheckpointError):
        store.commit(ws, [_ev(h, "visible")], {})
    info = store.commit(ws, [_ev(h, "visible"), _ev(h, "challenge")], SUITES)
    assert store.head() == info and info.tree_hash == h and info.generation == 0


@given(st.lists(st.tuples(st.sampled_from(["x", "y", "z"]),
                          st.sampled_from(["pass", "fail", "error"]),
                          st.sampled_from(["pass", "fail", "error"])), max_size=6))
@settings(max_examples=25)
def test_head_only_ever_names_a_tree_with_bound_passes(tmp_path_factory, steps) -> None:
    root = tmp_path_factory.mktemp("p")
    store = CheckpointStore(root / "store")
    expected = None
    for i, (body, v1, v2) in enumerate(steps):
        ws = _ws(root / f"w{i}", body)
        h = tree_hash(ws)
        ev = [_ev(h, "visible", v1), _ev(h, "challenge", v2)]
        try:
            store.commit(ws, ev, SUITES)
            assert v1 == v2 == "pass"
            expected = h
        except CheckpointError:
            assert (v1, v2) != ("pass", "pass")
        head = store.head()
        assert (head.tree_hash if head else None) == expected


def test_restore_is_exact_and_lists_leftovers(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    ws = _ws(tmp_path / "w")
    (ws / "pkg").mkdir()
    (ws / "pkg" / "m.py").write_text("m")
    os.chmod(ws / "a.py", 0o640)
    h = store.snapshot(ws)
    (ws / "a.py").write_text("regressed")
    os.chmod(ws / "a.py", 0o777)
    (ws / "pkg" / "extra.py").write_text("e")
    (ws / "tmp" / "deep").mkdir(parents=True)
    os.symlink("/etc", ws / "escape")
    (ws / "pkg" / "m.py").unlink()
    leftovers = store.restore(h, ws)
    assert leftovers == ["escape", "pkg/extra.py", "tmp", "tmp/deep"]
    assert tree_hash(ws) == h and (ws / "a.py").read_text() == "x"
    assert os.stat(ws / "a.py").st_mode & 0o777 == 0o640


def test_altered_snapshot_is_refused(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    ws = _ws(tmp_path / "w")
    h = store.snapshot(ws)
    (store.objects / h / "a.py").write_text("tampered")
    with pytest.raises(CheckpointError, match="altered"):
        store.restore(h, ws)
    with pytest.raises(CheckpointError, match="no snapshot"):
        store.path_of("0" * 64)
