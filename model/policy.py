"""G6's rules: the policy is pinned at start, checked before every stage, and a change stops the
run until the pinned policy is back.

State: the digest of the policy as the files hash now (`current`: its fields, its file's bytes,
every pinned gate, suite and key file), the digest pinned at start (None before), whether the
run stopped on a change, and the digest each stage ran under. `Pin` takes the digest at start;
`Edit` is the environment changing the files; `PolicyCheck` is the check before a stage finding a
change (the run stops: PolicyChanged, exit 5); `Stage` runs a stage, only with the pinned digest
current; `Resume` lifts the stop once the pinned policy is back. A worker's event
(`WorkerWrite`) has no way to change any of it. The engine's pin (engine/policy/pin.py) holds one
of these and asks it before every stage.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class PolicyState:
    current: str                    # the digest of the policy as its files hash now
    pinned: str | None = None       # the digest pinned at start
    stopped: bool = False
    stages: tuple[str, ...] = ()    # the digest current when each stage ran


def why_changed(s: PolicyState) -> str | None:
    """Why a stage may not run now, or None: the run must be pinned, not stopped, and the
    policy must hash to its pin."""
    if s.pinned is None:
        return "the policy was never pinned"
    if s.stopped:
        return "the run stopped on a policy change"
    if s.current != s.pinned:
        return f"the policy changed since it was pinned ({s.pinned[:12]} -> {s.current[:12]})"
    return None


@dataclass(frozen=True)
class Pin:
    def why_not(self, s: PolicyState) -> str | None:
        return "the policy is pinned already" if s.pinned is not None else None

    def apply(self, s: PolicyState) -> PolicyState:
        return replace(s, pinned=s.current)


@dataclass(frozen=True)
class Edit:
    """The environment: anyone with access to the files changes the policy (any time)."""

    digest: str

    def why_not(self, s: PolicyState) -> str | None:
        return None

    def apply(self, s: PolicyState) -> PolicyState:
        return replace(s, current=self.digest)


@dataclass(frozen=True)
class PolicyCheck:
    """The check before a stage sees a change: the run stops (fail closed)."""

    def why_not(self, s: PolicyState) -> str | None:
        if s.pinned is None:
            return "the policy was never pinned"
        if s.stopped:
            return "the run has stopped already"
        return "the policy hashes to its pin" if s.current == s.pinned else None

    def apply(self, s: PolicyState) -> PolicyState:
        return replace(s, stopped=True)


@dataclass(frozen=True)
class Stage:
    """A stage runs (an attempt begins, a gate judges, a node is released), checked first."""

    name: str = "stage"

    def why_not(self, s: PolicyState) -> str | None:
        return why_changed(s)

    def apply(self, s: PolicyState) -> PolicyState:
        return replace(s, stages=s.stages + (s.current,))


@dataclass(frozen=True)
class Resume:
    """A stopped run resumes only once the pinned policy is back (the pin comes from the
    record made at start, so it cannot follow the change)."""

    def why_not(self, s: PolicyState) -> str | None:
        if not s.stopped:
            return "the run has not stopped"
        return "the policy still differs from its pin" if s.current != s.pinned else None

    def apply(self, s: PolicyState) -> PolicyState:
        return replace(s, stopped=False)


@dataclass(frozen=True)
class WorkerWrite:
    """A worker writes its workspace or replies: nothing of the policy or its pin changes."""

    def why_not(self, s: PolicyState) -> str | None:
        return None

    def apply(self, s: PolicyState) -> PolicyState:
        return s


EVENT_TYPES = (Pin, Edit, PolicyCheck, Stage, Resume, WorkerWrite)


def pinned_stages(s: PolicyState) -> str | None:
    """G6 on a state, None when it holds: every stage ran under the pinned digest, and none
    ran before the pin."""
    if s.pinned is None:
        return "a stage ran before the pin" if s.stages else None
    bad = [i for i, d in enumerate(s.stages) if d != s.pinned]
    return f"stage {bad[0]} ran under {s.stages[bad[0]][:12]}, not the pin" if bad else None


# ---- release: what must hold before a run's result is released (the policy's
# `release.conditions`; engine/policy/pin.py reads the policy, engine/run/finish.py asks this)

RELEASE_CONDITIONS: dict[str, str] = {
    "all_done": "the run ended DONE (every node has a PASS for its current activation)",
    "ledger_verified": "the ledger's hash chain verifies",
    "pins_unchanged": "the policy and every pinned file are unchanged at the end of the run",
    "signed": "the ledger head is signed with the policy's signing key",
    "approved": "a named human approver (release.approver) signed off",
}


@dataclass(frozen=True)
class RunEnd:
    """What the release check reads at the end of a run."""

    outcome: str                    # the model's Outcome, by name
    ledger_status: str              # "verified", "torn-tail" or "broken"
    pins_unchanged: bool
    signed: bool
    approved_by: str | None = None  # who signed off, if anyone


def release_unmet(conditions: tuple[str, ...] | list[str], approver: str | None,
                  end: RunEnd) -> list[str]:
    """The conditions of `conditions` that do not hold at `end`, in their order ([] means the
    result may be released). `approved` holds only for the policy's own `approver`."""
    holds = {
        "all_done": end.outcome == "DONE",
        "ledger_verified": end.ledger_status == "verified",
        "pins_unchanged": end.pins_unchanged,
        "signed": end.signed,
        "approved": end.approved_by is not None and end.approved_by == approver,
    }
    return [c for c in conditions if not holds[c]]
