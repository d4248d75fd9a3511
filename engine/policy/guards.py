"""Every admission and policy guard, by name: what it refuses, where it sits, and a way to
switch one off (for tests only) to show that something notices.

Why a registry: defence in depth hides faults. A guard whose twin further down refuses the same
thing can be broken without any test failing (counting an `error` as a pass in the broker is
caught by the checkpoint store's own check). With every guard named here and asked through
`refuse`, tests/engine/admission/conformance/test_guards.py switches each off alone and requires at least one
conformance case to fail; where one layer masks another, the cases check each layer alone.

A guard is asked as `refuse(name, why)`: `why` is the reason it refuses (None: it lets the
thing through), usually what a model rule said (model/evidence.py, checkpoint.py, policy.py).
`switched_off(name)` makes `refuse` let everything through for that name; nothing in the
engine calls it, and no environment variable or option reaches it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Guard:
    name: str
    layer: str               # where it is asked (a module of the engine)
    refuses: str             # what it refuses
    caught_by: tuple[str, ...] = ()  # conformance cases to try first when it is switched off


GUARDS: tuple[Guard, ...] = (
    # ---- evidence (G4): engine/admission/binding.py asks model/evidence.py
    Guard("evidence.bound", "engine/admission/binding.py",
          "evidence not issued by this broker, of another tree, or of another suite drives "
          "a patch or reaches the worker", ("CF001", "CF003", "CF004", "CF009")),
    Guard("evidence.pins", "engine/admission/binding.py",
          "a revision or completion after a pinned suite changed", ("CF005",)),
    Guard("evidence.same_tree", "engine/admission/binding.py",
          "evidence of a tree other than the one the check was asked to judge",
          ("CF051", "CF038")),
    Guard("policy.digest", "engine/admission/binding.py",
          "a revision or completion after the guarded run's policy file changed", ("CF006",)),
    # ---- admission and the checkpoint (G5): admit.py, checkpoint.py ask model/checkpoint.py
    Guard("admission.admitted", "engine/admission/admit.py",
          "a candidate becomes the checkpoint without a PASS of every admission check on "
          "exactly its tree by the pinned suite (the broker's own check)",
          ("CF011", "CF012", "CF015", "CF016")),
    Guard("store.admitted", "engine/admission/checkpoint.py",
          "the checkpoint store moves HEAD without such evidence (its own check)",
          ("CF052",)),
    Guard("store.intact", "engine/admission/checkpoint.py",
          "a stored snapshot whose content no longer hashes to its name is used",
          ("CF035", "CF042")),
    Guard("workspace.restored", "engine/admission/state.py",
          "a revision or completion reads a workspace edited behind the broker",
          ("CF002", "CF027", "CF010")),
    Guard("recertify.admitted", "engine/admission/recertify.py",
          "a receipt for a checkpoint that fresh completion checks did not pass",
          ("CF017",)),
    # ---- actions: engine/admission/actions.py, admit.py
    Guard("patch.paths", "engine/admission/admit.py",
          "a patch writes a protected path, outside the workspace or through a link",
          ("CF019", "CF018", "CF026", "CF045", "CF021")),
    Guard("patch.applied_paths", "engine/admission/actions.py",
          "applying a patch that writes a protected path, outside the workspace or through a "
          "link (apply_patch's own check, under the broker's)", ("CF053",)),
    Guard("patch.changes", "engine/admission/admit.py",
          "a patch that changes nothing is evaluated as a candidate", ("CF025",)),
    Guard("budget.candidates", "engine/admission/state.py",
          "more candidates evaluated than the candidate budget", ("CF013",)),
    Guard("budget.wall", "engine/admission/state.py",
          "revisions go on after the wall budget", ("CF031",)),
    Guard("repeat.limit", "engine/admission/admit.py",
          "a tree already rejected is evaluated again", ("CF032",)),
    # ---- verifiers: engine/admission/evidence.py
    Guard("verifier.cwd", "engine/admission/evidence.py",
          "a check runs in a working directory outside the candidate", ("CF028",)),
    # ---- receipts: engine/admission/receipt.py
    Guard("receipt.digest", "engine/admission/receipt.py",
          "a receipt edited after it was issued verifies", ("CF007",)),
    Guard("receipt.anchored", "engine/admission/receipt.py",
          "a receipt not anchored in the ledger verifies", ("CF007", "CF036")),
    # ---- proposals: engine/admission/proposals.py
    Guard("proposal.digest", "engine/admission/proposals.py",
          "a stored proposal that does not match its digest is replayed", ("CF044",)),
    # ---- the policy (G6): engine/policy/pin.py asks model/policy.py
    Guard("policy.pinned", "engine/policy/pin.py",
          "a stage runs after the pinned policy, or a file it pins, changed",
          ("CF046",)),
    Guard("policy.outside", "engine/policy/pin.py",
          "a policy, pinned file or key inside a worker's folder", ("CF047",)),
    Guard("policy.budgets", "engine/run/integrity.py",
          "a graph that asks for more spend, repairs or attempts than the policy allows",
          ("CF048",)),
    Guard("run.gate_files", "engine/run/integrity.py",
          "an attempt or verdict after a file a gate depends on changed", ("CF049",)),
    Guard("policy.release", "engine/run/finish.py",
          "a result released while a release condition does not hold", ("CF050",)),
)
BY_NAME: dict[str, Guard] = {g.name: g for g in GUARDS}
assert len(BY_NAME) == len(GUARDS), "two guards share a name"

_off: set[str] = set()


def refuse(name: str, why: str | None) -> str | None:
    """The guard `name` asked: `why` (the reason it refuses, or None), unless switched off."""
    if name not in BY_NAME:
        raise KeyError(f"unknown guard {name!r}: add it to engine/policy/guards.py")
    return None if name in _off else why


@contextmanager
def switched_off(name: str) -> Iterator[None]:
    """For tests: guard `name` lets everything through inside the block."""
    if name not in BY_NAME:
        raise KeyError(f"unknown guard {name!r}")
    _off.add(name)
    try:
        yield
    finally:
        _off.discard(name)

