"""Hand-off: where node workspaces and judged snapshots live, and how an accepted tree reaches
the node's successors.

Why never the live workspace: a worker can keep editing its workspace after its gate accepted
(an escaped process, a later activation). So the gate judges a *copy* (the judged snapshot,
outside the workers' folder), the accepting verdict records that copy's tree hash, and each
successor receives the snapshot, read-only, only after its copy hashes to the recorded value.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.run.integrity import PinChanged
from engine.run.journal import Journal
from engine.system.trees import copy_tree, make_read_only, remove_tree, tree_digest

INPUTS = "inputs"


def workspace_root(ledger_path: Path) -> Path:
    """Node workspaces live next to the ledger: <ledger>.work/<node>/."""
    return Path(f"{ledger_path}.work")


def accepted_root(ledger_path: Path) -> Path:
    """Judged snapshots live next to the ledger, outside the workers' folder:
    <ledger>.accepted/<node>/<activation>-<attempt>/. The one a gate accepted is what the node's
    successors receive (never the live workspace)."""
    return Path(f"{ledger_path}.accepted")


def stage_snapshot(workspace: Path, dst: Path) -> tuple[str | None, str]:
    """Copy the workspace to `dst` and hash it (`tree_digest`): the tree the gate judges and, if
    it accepts, the tree successors receive. Modes are kept as the worker left them (a receipt
    gate compares the tree, modes included, with its checkpoint); what protects the copy is
    its hash, checked after the gate and again at every hand-off. Returns (hash, "") or
    (None, why it failed)."""
    remove_tree(dst)  # an attempt given back after a crash runs again under the same name
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        copy_tree(workspace, dst)
        return tree_digest(dst), ""
    except (OSError, shutil.Error) as exc:  # e.g. a file the worker made unreadable
        remove_tree(dst)
        return None, str(exc)


def digest_or_why(root: Path) -> str:
    """The tree hash of `root`, or a marker naming why it cannot be read."""
    try:
        return tree_digest(root)
    except OSError as exc:
        return f"unreadable: {exc}"


class HandOff:
    """The workspaces (<ledger>.work/) and judged snapshots (<ledger>.accepted/) of one run."""

    def __init__(self, ledger_path: Path, journal: Journal) -> None:
        self.root = workspace_root(ledger_path)
        self.accepted = accepted_root(ledger_path)
        self.journal = journal

    def judged_path(self, node: str, activation: int, attempt: int) -> Path:
        return self.accepted / node / f"{activation}-{attempt}"

    def prepare_workspace(self, node: str) -> Path:
        """The node's workspace persists across its attempts and activations. Before each
        attempt, every predecessor's *accepted* snapshot (the tree its gate judged and accepted,
        without its own inputs/) is copied, read-only, to inputs/<predecessor>/, replacing any
        older copy. The copy is hashed and must match the snapshot hash in the accepting
        verdict record; a mismatch (or a missing snapshot) is recorded and stops the run
        (exit 5), before any Begin."""
        ws = self.root / node
        ws.mkdir(parents=True, exist_ok=True)
        inputs = ws / INPUTS
        remove_tree(inputs)
        preds = self.journal.graph.predecessors(node)
        if preds:
            inputs.mkdir()
            for p in preds:
                self.hand_off(node, p, inputs / p)
        return ws

    def hand_off(self, node: str, pred: str, dst: Path) -> None:
        """Copy `pred`'s accepted snapshot to `dst` and check the copy against the verdict."""
        rec = self.journal.replayed.accepted.get(pred)
        expected = "" if rec is None else str(rec.get("accepted_tree") or "")
        src = (self.judged_path(pred, rec["activation"], rec["attempt"]) if rec is not None
               else self.accepted / pred)
        found = "missing"
        if expected and src.is_dir():
            try:
                copy_tree(src, dst)
                found = tree_digest(dst)
            except (OSError, shutil.Error) as exc:
                found = f"unreadable: {exc}"
        if not expected or found != expected:
            remove_tree(dst)
            self.journal.note({"type": "pin_changed", "what": "accepted_snapshot", "node": node,
                               "predecessor": pred, "file": str(src), "expected": expected,
                               "found": found})
            raise PinChanged(f"{src}: the snapshot {pred!r}'s gate accepted is not what its "
                             f"verdict recorded (sha256 {expected[:12] or 'none'}... -> "
                             f"{found[:12]}...); fix: restore it from a trusted copy, or start "
                             f"the run again")
        remove_tree(dst / INPUTS)  # the predecessor's own inputs are not handed on
        make_read_only(dst)

    def keep_only(self, node: str, judged: Path) -> None:
        """After an accepting verdict: older accepted snapshots of `node` are no longer handed
        off, so they are removed."""
        for old in self.accepted.joinpath(node).iterdir():
            if old.name != judged.name:
                remove_tree(old)
