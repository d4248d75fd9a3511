"""G4's rules: which evidence may drive a revision, and what happens to evidence that may not.

Evidence binds when this broker issued it, it was produced on the current candidate tree and by
the suite pinned for its check. A worker is given only evidence that binds (`Bind`); cited
evidence that does not bind is answered by the guard policy, `on_stale`: fresh evidence for the
current tree (`Refresh`), nothing (`Keep`) or the end of revisions (`Escalate`). A patch drives
a revision (`Admit`: the candidate moves to the patched tree) only on evidence that binds and
only while every suite still hashes to its pin; a changed suite stops everything (`Halt`).

State: the current tree and the tree revisions started from, the pins and the suites as they
hash now, the issued evidence, whether revisions are open, and two histories the invariant
speaks about: what was delivered (evidence id, tree then) and what drove a commit (evidence
id, tree it started from, tree it gave). The engine's broker holds one of these and asks it
before every delivery and every patch (engine/admission/binding.py, admit.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from loopproof.model.rules import Item, pinned

STALE_POLICIES = ("refresh", "keep", "escalate")


@dataclass(frozen=True)
class EvidenceState:
    start: str                               # the tree revisions started from
    tree: str                                # the current candidate
    pins: tuple[tuple[str, str], ...]        # (check, suite hash) pinned at start
    suites: tuple[tuple[str, str], ...]      # (check, suite hash) as each check hashes now
    on_stale: str = "refresh"
    issued: tuple[Item, ...] = ()
    open: bool = True
    delivered: tuple[tuple[str, str], ...] = ()      # (evidence id, tree when delivered)
    driven: tuple[tuple[str, str, str], ...] = ()    # (evidence id, from tree, to tree)
    stale: int = 0                                   # cited evidence that did not bind

    def item(self, evidence_id: str) -> Item | None:
        return next((e for e in self.issued if e.id == evidence_id), None)

    def suite_now(self, check: str) -> str | None:
        return pinned(self.suites, check)


def initial_evidence(tree: str, pins: dict[str, str], on_stale: str = "refresh"
                     ) -> EvidenceState:
    """Revisions of `tree` with `pins` just taken (every suite hashes to its pin)."""
    p = tuple(sorted(pins.items()))
    return EvidenceState(start=tree, tree=tree, pins=p, suites=p, on_stale=on_stale)


def why_unbound(s: EvidenceState, cited: Item | None) -> str | None:
    """Why `cited` may not drive a revision of the current tree, or None when it binds: it was
    issued by this broker (the whole envelope: an edited payload is another item), it was
    produced on the current tree, and by the suite pinned for its check."""
    if cited is None:
        return "no evidence was cited"
    if cited not in s.issued:
        return (f"evidence {cited.id!r} was not issued by this broker (edited, forged or from "
                f"another run)")
    suite = pinned(s.pins, cited.check)
    if suite is None:
        return f"evidence names unknown check {cited.check!r}"
    if cited.tree != s.tree:
        return (f"evidence {cited.id} describes tree {cited.tree[:12]}, the current tree is "
                f"{s.tree[:12]}")
    if cited.suite != suite:
        return (f"evidence {cited.id} came from suite {cited.suite[:12]}, the current suite is "
                f"{suite[:12]}")
    return None


def why_pins_changed(s: EvidenceState) -> str | None:
    """Which pinned suite hashes to something else now, or None when every pin holds."""
    for check, suite in s.pins:
        now = s.suite_now(check)
        if now != suite:
            return f"suite {check!r} changed after it was pinned ({suite[:12]} -> {str(now)[:12]})"
    return None


def _open(s: EvidenceState) -> str | None:
    return None if s.open else "revisions have stopped"


def _issuable(s: EvidenceState, item: Item) -> str | None:
    if any(e.id == item.id for e in s.issued):
        return f"evidence id {item.id!r} was issued already"
    now = s.suite_now(item.check)
    if now is None:
        return f"check {item.check!r} is not one of the pinned checks"
    if item.suite != now:
        return f"evidence of {item.check!r} carries the suite hash the check has now ({now[:12]})"
    return None


# ---- the events -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Issue:
    """A check ran (on any tree: the candidate, a patched copy, the checkpoint): the broker
    issues its evidence, which names the tree it ran on and the suite it ran with."""

    item: Item

    def why_not(self, s: EvidenceState) -> str | None:
        return _issuable(s, self.item)

    def apply(self, s: EvidenceState) -> EvidenceState:
        return replace(s, issued=s.issued + (self.item,))


@dataclass(frozen=True)
class ChangeSuite:
    """The environment: a check's files or command change, so its suite hashes to `suite`."""

    check: str
    suite: str

    def why_not(self, s: EvidenceState) -> str | None:
        if s.suite_now(self.check) is None:
            return f"check {self.check!r} is not one of the pinned checks"
        return None

    def apply(self, s: EvidenceState) -> EvidenceState:
        suites = tuple((c, self.suite if c == self.check else h) for c, h in s.suites)
        return replace(s, suites=suites)


@dataclass(frozen=True)
class Halt:
    """A pinned suite no longer hashes to its pin: revisions stop (fail closed)."""

    def why_not(self, s: EvidenceState) -> str | None:
        if (why := _open(s)) is not None:
            return why
        return None if why_pins_changed(s) is not None else "every suite still has its pin"

    def apply(self, s: EvidenceState) -> EvidenceState:
        return replace(s, open=False)


@dataclass(frozen=True)
class Bind:
    """Evidence that binds is given to the worker as it is."""

    cited: Item

    def why_not(self, s: EvidenceState) -> str | None:
        return _open(s) or why_unbound(s, self.cited)

    def apply(self, s: EvidenceState) -> EvidenceState:
        return replace(s, delivered=s.delivered + ((self.cited.id, s.tree),))


def _stale(s: EvidenceState, cited: Item | None, policy: str) -> str | None:
    if (why := _open(s)) is not None:
        return why
    if why_unbound(s, cited) is None:
        return "the cited evidence binds"
    if s.on_stale != policy:
        return f"the guard policy answers stale evidence with {s.on_stale!r}, not {policy!r}"
    return None


@dataclass(frozen=True)
class Refresh:
    """Cited evidence does not bind (policy "refresh"): fresh evidence of the current tree (the
    feedback check run again, or its latest run if that still binds) is given instead."""

    cited: Item | None
    fresh: Item

    def why_not(self, s: EvidenceState) -> str | None:
        if (why := _stale(s, self.cited, "refresh")) is not None:
            return why
        if (why := why_unbound(s, self.fresh)) is not None:
            return f"the fresh evidence does not bind either: {why}"
        return None

    def apply(self, s: EvidenceState) -> EvidenceState:
        return replace(s, stale=s.stale + 1, delivered=s.delivered + ((self.fresh.id, s.tree),))


@dataclass(frozen=True)
class Keep:
    """Cited evidence does not bind (policy "keep"): nothing is given, nothing is patched."""

    cited: Item | None

    def why_not(self, s: EvidenceState) -> str | None:
        return _stale(s, self.cited, "keep")

    def apply(self, s: EvidenceState) -> EvidenceState:
        return replace(s, stale=s.stale + 1)


@dataclass(frozen=True)
class Escalate:
    """Cited evidence does not bind (policy "escalate"): revisions stop."""

    cited: Item | None

    def why_not(self, s: EvidenceState) -> str | None:
        return _stale(s, self.cited, "escalate")

    def apply(self, s: EvidenceState) -> EvidenceState:
        return replace(s, stale=s.stale + 1, open=False)


@dataclass(frozen=True)
class Admit:
    """A patch citing `cited` is admitted: the candidate moves to `tree`. Only evidence that
    binds may drive it, and only while every suite still has its pin."""

    cited: Item
    tree: str

    def why_not(self, s: EvidenceState) -> str | None:
        if (why := _open(s) or why_unbound(s, self.cited) or why_pins_changed(s)) is not None:
            return why
        return "the patch changes nothing" if self.tree == s.tree else None

    def apply(self, s: EvidenceState) -> EvidenceState:
        return replace(s, tree=self.tree,
                       driven=s.driven + ((self.cited.id, s.tree, self.tree),))


def answer(s: EvidenceState, cited: Item | None, fresh: Item | None = None
           ) -> Bind | Refresh | Keep | Escalate:
    """The one event that may follow a citation: Bind when it binds, else what the policy says
    (Refresh needs the fresh evidence the feedback check gave, issued already)."""
    if cited is not None and why_unbound(s, cited) is None:
        return Bind(cited)
    if s.on_stale == "refresh":
        assert fresh is not None, "refresh needs fresh evidence"
        return Refresh(cited, fresh)
    return Keep(cited) if s.on_stale == "keep" else Escalate(cited)


EVENT_TYPES = (Issue, ChangeSuite, Halt, Bind, Refresh, Keep, Escalate, Admit)


# ---- the invariant ----------------------------------------------------------------------------

def bound_history(s: EvidenceState) -> str | None:
    """G4 on a state, None when it holds: every commit was driven by evidence this broker
    issued, produced on exactly the tree the commit started from (which is the tree the
    commit before it gave: stale evidence can never drive a later commit) by the pinned suite;
    the candidate is the tree the last commit gave; and everything given to a worker was
    issued on the tree current when it was given, by the pinned suite."""
    at = s.start
    for evidence_id, frm, to in s.driven:
        e = s.item(evidence_id)
        if frm != at:
            return f"commit from {frm[:12]} but the candidate was {at[:12]}"
        if e is None or e.tree != frm or e.suite != pinned(s.pins, e.check):
            return f"commit from {frm[:12]} driven by evidence {evidence_id!r} not bound to it"
        at = to
    if at != s.tree:
        return f"the candidate {s.tree[:12]} is not the tree the last commit gave ({at[:12]})"
    for evidence_id, tree in s.delivered:
        e = s.item(evidence_id)
        if e is None or e.tree != tree or e.suite != pinned(s.pins, e.check):
            return f"evidence {evidence_id!r} given to the worker on tree {tree[:12]} unbound"
    return None
