"""Hand-off: where node workspaces and judged snapshots live, and how an accepted tree reaches
the node's successors.

Why never the live workspace: a worker can keep editing its workspace after its gate accepted
(an escaped process, a later activation). So the gate judges a *copy* (the judged snapshot,
outside the workers' folder), the accepting verdict records that copy's tree hash, and each
successor receives the snapshot, read-only, only after its copy hashes to the recorded value.
What was handed off is hashed again, and the judged copy's inputs/ must still be exactly that
when the successor's gate runs (`check_inputs`).

Every path here is built from a checked node name (engine/run/values.py) and, for judged
snapshots, two integers; every deletion stays inside the folder it belongs to and never goes
through a symlink a worker planted (engine/system/trees.py `remove_tree`, `ensure_dir`);
copies follow the judged-tree rules (engine/system/judged.py).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from loopproof.engine.run.integrity import PinChanged
from loopproof.engine.run.journal import Journal
from loopproof.engine.system.errors import LedgerCorrupt
from loopproof.engine.system.judged import Limits, TreeRefused, copy_judged, scan
from loopproof.engine.system.trees import (
    ensure_dir,
    make_read_only,
    remove_tree,
    shown,
    tree_digest,
)

INPUTS = "inputs"


def workspace_root(ledger_path: Path) -> Path:
    """Node workspaces live next to the ledger: <ledger>.work/<node>/."""
    return Path(f"{ledger_path}.work")


def accepted_root(ledger_path: Path) -> Path:
    """Judged snapshots live next to the ledger, outside the workers' folder:
    <ledger>.accepted/<node>/<activation>-<attempt>/. The one a gate accepted is what the node's
    successors receive (never the live workspace)."""
    return Path(f"{ledger_path}.accepted")


def stage_snapshot(workspace: Path, dst: Path, limits: Limits | None = None
                   ) -> tuple[str | None, str]:
    """Copy the workspace to `dst` and hash it (`tree_digest`): the tree the gate judges and, if
    it accepts, the tree successors receive. The workspace is first checked against `limits`
    without copying a byte (engine/system/judged.py `scan`); a symlink in it, too many entries
    or bytes, or an unreadable entry refuses it. Modes are kept as the worker left them (a
    receipt gate compares the tree, modes included, with its checkpoint); what protects the
    copy is its hash, checked after the gate and again at every hand-off. Returns (hash, "") or
    (None, why it was not staged)."""
    parent = dst.parent
    ensure_dir(parent.parent)
    ensure_dir(parent)
    remove_tree(dst, within=parent)  # an attempt given back after a crash runs again
    limits = limits or Limits()
    try:
        scan(workspace, limits)
        copy_judged(workspace, dst, limits)
        return tree_digest(dst), ""
    except (OSError, TreeRefused) as exc:
        remove_tree(dst, within=parent)
        return None, shown(str(exc))


def digest_or_why(root: Path) -> str:
    """The tree hash of `root`, or a marker naming why it cannot be read."""
    try:
        return tree_digest(root)
    except OSError as exc:
        return f"unreadable: {shown(str(exc))}"


def _real_dir(p: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(p).st_mode)
    except OSError:
        return False


class HandOff:
    """The workspaces (<ledger>.work/) and judged snapshots (<ledger>.accepted/) of one run."""

    def __init__(self, ledger_path: Path, journal: Journal, *,
                 read_only_by_mode: bool = True) -> None:
        # under a sandbox the worker's inputs/ is a read-only mount (engine/run/confine.py), so
        # its files keep their modes and a copy the worker makes is an ordinary file of its
        # own; only without a sandbox are they made read-only by mode (which a copy keeps)
        self.read_only_by_mode = read_only_by_mode
        self.root = workspace_root(ledger_path)
        self.accepted = accepted_root(ledger_path)
        self.journal = journal
        self.handed: dict[str, dict[str, str]] = {}  # node -> predecessor -> hash handed off

    def judged_path(self, node: str, activation: object, attempt: object) -> Path:
        """<ledger>.accepted/<node>/<activation>-<attempt>; the two numbers come from ledger
        records, so they are checked to be integers before they become a path."""
        if not (type(activation) is int and type(attempt) is int and activation >= 0
                and attempt >= 1):
            raise LedgerCorrupt(f"{self.journal.ledger.path}: a verdict of {node!r} names "
                                f"activation {activation!r}, attempt {attempt!r}: not "
                                f"integers; fix: restore the ledger from a trusted copy")
        return self.accepted / node / f"{activation}-{attempt}"

    def prepare_workspace(self, node: str) -> Path:
        """The node's workspace persists across its attempts and activations. Before each
        attempt, every predecessor's *accepted* snapshot (the tree its gate judged and accepted,
        without its own inputs/) is copied to inputs/<predecessor>/ (read-only: by a mount
        under a sandbox, by mode without one), replacing any
        older copy (or whatever the worker left at inputs: a file, a symlink). The copy is
        hashed and must match the snapshot hash in the accepting verdict record; a mismatch (or
        a missing snapshot) is recorded and stops the run (exit 5), before any Begin. A
        workspace folder a worker replaced by a symlink is replaced by a real folder."""
        ws = ensure_dir(ensure_dir(self.root) / node)
        inputs = ws / INPUTS
        remove_tree(inputs, within=ws)
        self.handed[node] = {}
        preds = self.journal.graph.predecessors(node)
        if preds:
            os.mkdir(inputs)
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
        if (expected and _real_dir(self.accepted) and _real_dir(src.parent)
                and _real_dir(src)):
            try:
                copy_judged(src, dst)
                found = tree_digest(dst)
            except (OSError, TreeRefused) as exc:
                found = f"unreadable: {shown(str(exc))}"
        if not expected or found != expected:
            remove_tree(dst, within=dst.parent)
            self.journal.note({"type": "pin_changed", "what": "accepted_snapshot", "node": node,
                               "predecessor": pred, "file": str(src), "expected": expected,
                               "found": found})
            raise PinChanged(f"{src}: the snapshot {pred!r}'s gate accepted is not what its "
                             f"verdict recorded (sha256 {expected[:12] or 'none'}... -> "
                             f"{found[:12]}...); fix: restore it from a trusted copy, or start "
                             f"the run again")
        remove_tree(dst / INPUTS, within=dst)  # the predecessor's own inputs are not handed on
        if self.read_only_by_mode:
            make_read_only(dst)
        self.handed[node][pred] = tree_digest(dst)

    def check_inputs(self, node: str, judged: Path) -> str | None:
        """Why the judged copy's inputs/ is not exactly what was handed off before this attempt
        (None: it is). A worker can write to its own inputs/ (permissions do not stop its user,
        and not root at all); its gate must not judge edited inputs."""
        handed = self.handed.get(node) or {}
        if not handed:
            return None
        inputs = judged / INPUTS
        try:
            names = sorted(os.listdir(inputs))
        except OSError:
            names = []
        if names != sorted(handed):
            return (f"inputs/ holds {[shown(n) for n in names][:10]}, but "
                    f"{sorted(handed)} were handed off")
        for pred, digest in sorted(handed.items()):
            found = digest_or_why(inputs / pred)
            if found != digest:
                return (f"inputs/{pred} changed since it was handed off (sha256 "
                        f"{digest[:12]}... -> {found[:12]}...); the worker must not edit its "
                        f"inputs")
        return None

    def keep_only(self, node: str, judged: Path) -> None:
        """After an accepting verdict: older accepted snapshots of `node` are no longer handed
        off, so they are removed (only inside <ledger>.accepted/<node>/, which must be a real
        folder)."""
        base = self.accepted / node
        if not (_real_dir(self.accepted) and _real_dir(base)):
            return
        for name in os.listdir(base):
            if name != judged.name:
                remove_tree(base / name, within=base)
