"""Pins checked by a stat fast path: an unchanged file is not re-read, a rewritten one is caught
even with its size and mtime restored, and an attempt checks only its own node's files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loopproof.engine.run import integrity as integrity_mod
from loopproof.engine.run.integrity import Integrity, PinChanged
from loopproof.engine.system.trees import file_digest


class Notes:
    def __init__(self) -> None:
        self.records: list[dict] = []

    def note(self, record: dict) -> None:
        self.records.append(record)


def _pins(tmp_path: Path) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    files = {}
    for name in ("a1", "a2", "b1"):
        p = tmp_path / f"{name}.py"
        p.write_text(f"# gate file {name}\n")
        files[name] = str(p)
    pins = {path: file_digest(Path(path)) for path in files.values()}
    return pins, {"a": (files["a1"], files["a2"]), "b": (files["b1"],)}


def _counting(monkeypatch) -> list[str]:
    read: list[str] = []
    real = integrity_mod.file_digest
    monkeypatch.setattr(integrity_mod, "file_digest", lambda p: read.append(str(p)) or real(p))
    return read


def test_an_unchanged_file_is_hashed_once_then_stat_checked(tmp_path, monkeypatch):
    pins, per_node = _pins(tmp_path)
    read = _counting(monkeypatch)
    check = Integrity(Notes(), pins, None, None, per_node)
    for _ in range(50):
        check.check_pins("a")
    assert sorted(read) == sorted(per_node["a"])  # each once, then the fast path


def test_an_attempt_checks_only_its_own_nodes_files(tmp_path, monkeypatch):
    pins, per_node = _pins(tmp_path)
    read = _counting(monkeypatch)
    Integrity(Notes(), pins, None, None, per_node).check_pins("b")
    assert read == list(per_node["b"])
    read.clear()
    Integrity(Notes(), pins, None, None, per_node).check_pins()  # a release check: every file
    assert sorted(read) == sorted(pins)


def test_a_rewrite_with_size_and_mtime_restored_is_caught(tmp_path):
    """The forger keeps the length and puts mtime back with utime; ctime still moves."""
    pins, per_node = _pins(tmp_path)
    notes = Notes()
    check = Integrity(notes, pins, None, None, per_node)
    check.check_pins("a")
    target = Path(per_node["a"][0])
    before = target.stat()
    target.write_text(target.read_text().replace("a1", "ZZ"))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    assert target.stat().st_mtime_ns == before.st_mtime_ns
    with pytest.raises(PinChanged, match="changed since the run started"):
        check.check_pins("a")
    assert notes.records[-1]["type"] == "pin_changed" and notes.records[-1]["file"] == str(target)


def test_a_file_replaced_by_another_inode_is_rehashed(tmp_path):
    pins, per_node = _pins(tmp_path)
    check = Integrity(Notes(), pins, None, None, per_node)
    check.check_pins("b")
    target = Path(per_node["b"][0])
    other = tmp_path / "other"
    other.write_text("# gate file b1\n")   # same content: still pinned, so no change
    os.replace(other, target)
    check.check_pins("b")
    other.write_text("# gate file XX\n")   # a different file moved into place
    os.replace(other, target)
    with pytest.raises(PinChanged):
        check.check_pins("b")
