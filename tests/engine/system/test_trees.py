"""engine/system/trees.py as a hostile worker meets it: the engine clears and copies folders a
worker could have replaced with symlinks, made read-only or filled with odd entries. Removing
must never follow a link out of the tree, and must get through read-only folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loopproof.engine.system.trees import (
    UnsafeTree,
    copy_tree,
    make_read_only,
    remove_tree,
    tree_digest,
    tree_hash,
)


def _outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    (out / "sub").mkdir(parents=True)
    (out / "keep.txt").write_text("mine")
    os.chmod(out / "sub", 0o750)
    os.chmod(out, 0o751)
    return out


def _modes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_mode & 0o777
            for p in [root, *root.rglob("*")]}


@pytest.mark.parametrize("best_effort", [False, True])
def test_removing_a_symlinked_root_removes_the_link_only(tmp_path: Path,
                                                         best_effort: bool) -> None:
    out = _outside(tmp_path)
    before = _modes(out)
    link = tmp_path / "ws" / "inputs"
    link.parent.mkdir()
    link.symlink_to(out)
    remove_tree(link, best_effort=best_effort)
    assert not link.exists() and not link.is_symlink()
    assert _modes(out) == before and (out / "keep.txt").read_text() == "mine"


def test_a_dangling_link_is_removed_too(tmp_path: Path) -> None:
    link = tmp_path / "inputs"
    link.symlink_to(tmp_path / "gone")
    remove_tree(link)
    assert not link.is_symlink()


def test_links_inside_a_tree_are_removed_not_followed(tmp_path: Path) -> None:
    out = _outside(tmp_path)
    before = _modes(out)
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / "out").symlink_to(out)
    (tree / "file").symlink_to(out / "keep.txt")
    make_read_only(tree)
    remove_tree(tree)
    assert not tree.exists()
    assert _modes(out) == before and (out / "keep.txt").read_text() == "mine"


def test_read_only_trees_are_removed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("x")
    make_read_only(tree)
    os.chmod(tree / "a", 0o000)  # a worker that locked a folder
    remove_tree(tree)
    assert not tree.exists()


def test_copy_keeps_links_as_links_and_both_digests_agree_on_a_copy(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_text("x")
    os.chmod(src / "d" / "f", 0o600)
    (src / "l").symlink_to("d/f")
    os.mkfifo(src / "fifo")  # left out of the copy: reading it would block
    dst = tmp_path / "dst"
    copy_tree(src, dst)
    assert (dst / "l").is_symlink() and os.readlink(dst / "l") == "d/f"
    assert not (dst / "fifo").exists()
    os.unlink(src / "fifo")
    assert tree_digest(dst) == tree_digest(src) and tree_hash(dst) == tree_hash(src)


def test_the_state_hash_refuses_what_the_snapshot_digest_only_records(tmp_path: Path) -> None:
    out = _outside(tmp_path)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "escape").symlink_to(out)
    before = tree_digest(tree)  # records the link's target string, never follows it
    (out / "keep.txt").write_text("changed")
    assert tree_digest(tree) == before
    with pytest.raises(UnsafeTree):
        tree_hash(tree)


# ---- ensure_dir: a folder another thread makes at the same moment -----------------------------

def test_a_folder_made_between_the_look_and_the_mkdir_is_used_not_an_error(tmp_path, monkeypatch):
    """Two attempts in flight that end together both stage into L.jsonl.accepted: one looks,
    finds nothing, and the other's mkdir lands before its own (seen in make check: the parallel
    stateful test failed with FileExistsError). Played here without threads: the look itself
    makes the folder, as the other thread would have, then reports it missing."""
    from loopproof.engine.system import trees

    target = tmp_path / "accepted"
    real = os.lstat
    raced = []

    def look_then_lose_the_race(path, *args, **kwargs):
        if Path(path) == target and not raced:
            raced.append(True)
            os.mkdir(target)  # the other attempt
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(trees.os, "lstat", look_then_lose_the_race)
    assert trees.ensure_dir(target) == target and target.is_dir() and raced


def test_a_symlink_in_place_of_the_folder_is_replaced_not_followed(tmp_path):
    from loopproof.engine.system import trees

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "accepted"
    link.symlink_to(elsewhere)
    assert trees.ensure_dir(link) == link
    assert link.is_dir() and not link.is_symlink() and elsewhere.is_dir()
