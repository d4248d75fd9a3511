"""What the admission and policy models share: a piece of evidence, and how a declared rule is
asked and applied.

Why a module of its own: the evidence layer (model/evidence.py), the checkpoint
(model/checkpoint.py) and the policy pin (model/policy.py) are small state machines written
like model/transitions.py -- each event a frozen dataclass with a guard (`why_not`, the reason
it is disabled or None) and an effect (`apply`) -- but over their own states, with no graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from loopproof.model.transitions import Disabled

S = TypeVar("S")
VERDICTS = ("pass", "fail", "error")  # "error" is no verdict, and never counts as a pass


@dataclass(frozen=True)
class Item:
    """One execution of one check on one tree: the envelope a broker issues. `tree` is the
    tree the check ran on (hashed on the copy it saw), `suite` the hash of the check's identity
    as it was when it ran."""

    id: str
    check: str
    tree: str
    suite: str
    verdict: str = "pass"


class Rule(Protocol[S]):
    def why_not(self, s: S) -> str | None: ...

    def apply(self, s: S) -> S: ...


def step(s: S, rule: Rule[S]) -> S:
    """The successor of `s` under `rule`, or `Disabled` (the engine refuses what this refuses)."""
    reason = rule.why_not(s)
    if reason is not None:
        raise Disabled(f"{rule}: {reason}")
    return rule.apply(s)


def enabled(s: S, rule: Rule[S]) -> bool:
    return rule.why_not(s) is None


def pinned(pins: Iterable[tuple[str, str]], check: str) -> str | None:
    """The suite hash pinned for `check`, None for a check that was never pinned."""
    return dict(pins).get(check)


def admitted(items: Iterable[Item], tree: str, pins: Iterable[tuple[str, str]],
             required: Iterable[str]) -> str | None:
    """Why `items` do not admit `tree`, or None: every required check needs a PASS produced on
    exactly `tree` by its pinned suite. The one rule for a checkpoint's commit and for
    recertification (the broker asks it, and so does the checkpoint store)."""
    pins = tuple(pins)
    items = tuple(items)
    required = tuple(required)
    if not required:
        return "no admission checks: nothing can be admitted without a gate"
    for name in sorted(set(required)):
        suite = pinned(pins, name)
        if suite is None:
            return f"check {name!r} was never pinned"
        if not any(e.check == name and e.tree == tree and e.suite == suite and e.verdict == "pass"
                   for e in items):
            return (f"tree {tree[:12]} has no PASS from {name!r} bound to it; only an admitted "
                    f"candidate can become the checkpoint")
    return None
