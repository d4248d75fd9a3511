"""G5's rules: the last-known-good checkpoint only ever holds an admitted tree, the workspace is
restored to the candidate before anything reads it, and completion re-certifies the checkpoint.

State: the pins and the admission and completion checks (fixed at start), the tree revisions
started from, the candidate (the checkpoint once there is one, else the start), the workspace
as it is on disk, the checkpoint and its generation, the evidence issued so far, the history
of commits (tree, evidence ids) and, once completed, the receipt's tree and the evidence that
re-certified it.

`Commit(tree, ids)` is the only event that moves the checkpoint, and only when the cited
evidence (one per admission check, in order) admits the tree: each was issued, and is a PASS of
its check produced on exactly that tree by the check's pinned suite; `Restore` makes the workspace the candidate again;
`Recertify(ids)` completes, only when fresh evidence of every completion check admits the
checkpoint. The engine's broker and its checkpoint store ask these rules
(engine/admission/admit.py, recertify.py, checkpoint.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from loopproof.model.rules import Item, admitted, pinned


@dataclass(frozen=True)
class CheckpointState:
    pins: tuple[tuple[str, str], ...]       # (check, suite hash) pinned at start
    admission: tuple[str, ...]              # the checks a commit needs
    completion: tuple[str, ...]             # the checks recertification needs
    start: str                              # the tree revisions started from
    candidate: str                          # the checkpoint, or the start before any commit
    workspace: str                          # the workspace as it is on disk
    checkpoint: str | None = None
    generation: int = -1
    issued: tuple[Item, ...] = ()
    history: tuple[tuple[str, tuple[str, ...]], ...] = ()   # (tree, evidence ids) per commit
    done: bool = False
    receipt: str | None = None
    recertified_by: tuple[str, ...] = ()

    def item(self, evidence_id: str) -> Item | None:
        return next((e for e in self.issued if e.id == evidence_id), None)


def initial_checkpoint(tree: str, pins: dict[str, str], admission: tuple[str, ...],
                       completion: tuple[str, ...] | None = None) -> CheckpointState:
    return CheckpointState(pins=tuple(sorted(pins.items())), admission=tuple(admission),
                           completion=tuple(admission if completion is None else completion),
                           start=tree, candidate=tree, workspace=tree)


def _live(s: CheckpointState) -> str | None:
    return "the node has completed" if s.done else None


def why_unadmitted(s: CheckpointState, tree: str, ids: tuple[str, ...],
                   checks: tuple[str, ...]) -> str | None:
    """Why the evidence `ids` (one per check of `checks`, in order) does not admit `tree`, or
    None: each was issued, is of its check, was produced on exactly `tree` by the check's
    pinned suite, and says pass."""
    if len(ids) != len(checks):
        return f"{len(checks)} checks need one piece of evidence each, {len(ids)} were cited"
    for evidence_id, check in zip(ids, checks, strict=True):
        e = s.item(evidence_id)
        if e is None:
            return f"evidence {evidence_id!r} was not issued"
        if (why := admitted((e,), tree, s.pins, (check,))) is not None:
            return why
    return None


@dataclass(frozen=True)
class Issue:
    """A check ran on some tree; its evidence is kept (a rejected candidate's too)."""

    item: Item

    def why_not(self, s: CheckpointState) -> str | None:
        if any(e.id == self.item.id for e in s.issued):
            return f"evidence id {self.item.id!r} was issued already"
        if pinned(s.pins, self.item.check) is None:
            return f"check {self.item.check!r} is not one of the pinned checks"
        return None

    def apply(self, s: CheckpointState) -> CheckpointState:
        return replace(s, issued=s.issued + (self.item,))


@dataclass(frozen=True)
class Commit:
    """`tree` becomes the checkpoint (and the candidate, and the workspace), admitted by the
    evidence `ids`."""

    tree: str
    ids: tuple[str, ...]

    def why_not(self, s: CheckpointState) -> str | None:
        return _live(s) or why_unadmitted(s, self.tree, self.ids, s.admission)

    def apply(self, s: CheckpointState) -> CheckpointState:
        return replace(s, checkpoint=self.tree, candidate=self.tree, workspace=self.tree,
                       generation=s.generation + 1,
                       history=s.history + ((self.tree, tuple(self.ids)),))


@dataclass(frozen=True)
class Drift:
    """The environment: something edits the workspace behind the broker (any new tree)."""

    tree: str

    def why_not(self, s: CheckpointState) -> str | None:
        return _live(s)

    def apply(self, s: CheckpointState) -> CheckpointState:
        return replace(s, workspace=self.tree)


@dataclass(frozen=True)
class Restore:
    """The workspace is not the candidate: make it the candidate again, exactly."""

    def why_not(self, s: CheckpointState) -> str | None:
        if s.workspace == s.candidate:
            return "the workspace is the candidate already"
        return None

    def apply(self, s: CheckpointState) -> CheckpointState:
        return replace(s, workspace=s.candidate)


@dataclass(frozen=True)
class Recertify:
    """Completion: fresh evidence `ids` of every completion check admits the checkpoint; the
    receipt names it."""

    ids: tuple[str, ...]

    def why_not(self, s: CheckpointState) -> str | None:
        if (why := _live(s)) is not None:
            return why
        if s.checkpoint is None:
            return "no candidate passed admission; nothing to complete"
        if s.workspace != s.checkpoint:
            return "the workspace must be restored to the checkpoint first"
        return why_unadmitted(s, s.checkpoint, self.ids, s.completion)

    def apply(self, s: CheckpointState) -> CheckpointState:
        return replace(s, done=True, receipt=s.checkpoint, recertified_by=tuple(self.ids))


EVENT_TYPES = (Issue, Commit, Drift, Restore, Recertify)


def gated(s: CheckpointState) -> str | None:
    """G5 on a state, None when it holds: the checkpoint is the last committed tree (nothing
    else ever moved it) and the candidate is the checkpoint (or the start); every committed
    checkpoint, the current one and each before it, was admitted by evidence this broker
    issued, produced on exactly that tree by the pinned suite of every admission check; and a
    completed node's receipt names the checkpoint, re-certified the same way by every
    completion check."""
    last = s.history[-1][0] if s.history else None
    if s.checkpoint != last:
        return f"the checkpoint {s.checkpoint} is not the last committed tree {last}"
    if s.candidate != (s.start if last is None else last):
        return "the candidate is neither the checkpoint nor the start"
    if s.generation != len(s.history) - 1:
        return "the generation does not count the commits"
    for tree, ids in s.history:
        if (why := why_unadmitted(s, tree, ids, s.admission)) is not None:
            return f"committed tree {tree[:12]}: {why}"
    if s.done:
        if s.receipt != s.checkpoint or s.checkpoint is None:
            return "the receipt does not name the checkpoint"
        if (why := why_unadmitted(s, s.checkpoint, s.recertified_by, s.completion)):
            return f"receipt: {why}"
    return None
