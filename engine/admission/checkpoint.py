"""The last-known-good checkpoint: the latest candidate that passed the admission gate.

The store keeps content-addressed snapshots (`objects/<tree hash>/`) and one HEAD file naming the
checkpoint and the evidence that admitted it. `commit` is the only way HEAD moves, and it checks
the admission itself: every admission check must have PASS evidence bound to exactly this tree,
so a rejected proposal, an invalid action or a failed challenge check has no way to become the
checkpoint. `restore` makes a workspace byte-for-byte equal to a snapshot (modes included) and
removes anything else in it, so a regression leaves no untracked leftovers behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.admission.evidence import Evidence
from loopproof.engine.policy.guards import refuse
from loopproof.engine.system.canonical import canonical
from loopproof.engine.system.trees import (
    clear_dir,
    copy_tree,
    make_writable,
    relative_paths,
    remove_tree,
    tree_hash,
)
from loopproof.model.rules import Item, admitted


class CheckpointError(Exception):
    """A commit without admission, or a stored snapshot whose content no longer matches its hash."""


@dataclass(frozen=True)
class CheckpointInfo:
    """HEAD: which tree is the checkpoint, and the ids of the PASS evidence that admitted it."""

    tree_hash: str
    evidence_ids: tuple[str, ...]
    generation: int  # how many commits HEAD has seen (0 for the first)


class CheckpointStore:
    """Snapshots by tree hash, plus HEAD. One store per guarded workspace."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.objects = self.root / "objects"
        self.objects.mkdir(parents=True, exist_ok=True)
        self.head_path = self.root / "HEAD.json"

    # ---- snapshots ------------------------------------------------------------------------------
    def snapshot(self, workspace: Path) -> str:
        """Store `workspace` as a content-addressed snapshot; return its tree hash."""
        h = tree_hash(workspace)
        target = self.objects / h
        if not target.exists():
            tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=self.objects))
            tmp.rmdir()
            copy_tree(workspace, tmp)
            if tree_hash(tmp) != h:  # the workspace changed while it was being copied
                remove_tree(tmp)
                raise CheckpointError(f"{workspace}: changed while being snapshotted; retry")
            os.replace(tmp, target)
        return h

    def path_of(self, h: str) -> Path:
        """The stored snapshot for tree `h`, checked: its content must still hash to `h`."""
        path = self.objects / h
        if not path.is_dir():
            raise CheckpointError(f"{path}: no snapshot for tree {h[:12]}")
        actual = tree_hash(path)
        altered = f"{path}: snapshot was altered (now hashes to {actual[:12]})"
        if refuse("store.intact", altered if actual != h else None):
            raise CheckpointError(altered)
        return path

    # ---- HEAD ---------------------------------------------------------------------------------
    def head(self) -> CheckpointInfo | None:
        if not self.head_path.exists():
            return None
        try:
            obj = json.loads(self.head_path.read_text(encoding="utf-8"))
            return CheckpointInfo(str(obj["tree_hash"]), tuple(obj["evidence_ids"]),
                                  int(obj["generation"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{self.head_path}: unreadable HEAD ({exc})") from None

    def commit(self, candidate: Path, evidence: Sequence[Evidence],
               required_suites: Mapping[str, str]) -> CheckpointInfo:
        """Make `candidate` the checkpoint. Refused unless, for every required check name, there
        is PASS evidence from that check's suite hash bound to exactly this candidate's tree (the
        model's rule, model/rules.py `admitted`: the store checks it again, on its own)."""
        h = self.snapshot(candidate)
        items = [Item(e.id, e.check, e.state_hash, e.suite_hash, e.verdict) for e in evidence]
        why = refuse("store.admitted", admitted(items, h, sorted(required_suites.items()),
                                                sorted(required_suites)))
        if why is not None:
            raise CheckpointError(why)
        previous = self.head()
        info = CheckpointInfo(h, tuple(sorted(e.id for e in evidence)),
                              0 if previous is None else previous.generation + 1)
        tmp = self.head_path.with_suffix(".tmp")
        tmp.write_bytes(canonical({"tree_hash": info.tree_hash,
                                   "evidence_ids": list(info.evidence_ids),
                                   "generation": info.generation}))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.head_path)
        return info

    # ---- restore --------------------------------------------------------------------------------
    def restore(self, h: str, workspace: Path) -> list[str]:
        """Make `workspace` exactly snapshot `h`; return the paths that were not in the snapshot
        (the untracked leftovers that were removed), sorted."""
        source = self.path_of(h)
        workspace = Path(workspace)
        workspace.mkdir(parents=True, exist_ok=True)
        leftovers = sorted(relative_paths(workspace) - relative_paths(source))
        make_writable(workspace)
        clear_dir(workspace)
        for entry in sorted(os.scandir(source), key=lambda e: e.name):
            dst = workspace / entry.name
            if entry.is_dir(follow_symlinks=False):
                copy_tree(Path(entry.path), dst)
            else:
                shutil.copy2(entry.path, dst, follow_symlinks=False)
        shutil.copystat(source, workspace)
        if tree_hash(workspace) != h:
            raise CheckpointError(f"{workspace}: restore did not reproduce tree {h[:12]}")
        return leftovers
