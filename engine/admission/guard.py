"""The terms of a guarded run: the policy a broker is given, what it answers, and where it logs.

Why apart from the broker: callers (experiments, the revision node kind, the conformance cases)
build policies and read decisions without needing the transaction that produces them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol

from loopproof.engine.admission.evidence import Evidence
from loopproof.engine.system.canonical import canonical
from loopproof.engine.system.trees import file_sha256


@dataclass(frozen=True)
class GuardPolicy:
    """How the broker answers each kind of trouble. Each field: its default and why."""

    on_stale: Literal["refresh", "keep", "escalate"] = "refresh"  # stale evidence: what instead
    on_invalid: Literal["keep", "escalate"] = "keep"  # malformed / empty / DONE-only replies
    candidate_budget: int = 10  # patches evaluated by the admission checks, at most
    wall_budget_s: float | None = None  # seconds for revisions after start(); None: unlimited
    repeat_limit: int = 1  # a tree rejected this many times escalates when proposed again

    def __post_init__(self) -> None:
        if self.on_stale not in ("refresh", "keep", "escalate"):
            raise ValueError("GuardPolicy.on_stale: use 'refresh', 'keep' or 'escalate'")
        if self.on_invalid not in ("keep", "escalate"):
            raise ValueError("GuardPolicy.on_invalid: use 'keep' or 'escalate'")
        if self.candidate_budget < 0 or self.repeat_limit < 1:
            raise ValueError("GuardPolicy: candidate_budget >= 0 and repeat_limit >= 1")
        if self.wall_budget_s is not None and self.wall_budget_s <= 0:
            raise ValueError("GuardPolicy.wall_budget_s: a positive number of seconds, or None")


class Disposition(StrEnum):
    """What one `submit` did."""

    ADMITTED = "admitted"  # the patch passed every admission check: it is the new checkpoint
    REJECTED = "rejected"  # evaluated (or refused as unsafe) and not admitted; checkpoint stays
    KEPT = "kept"  # the worker asked to keep, or the patch changed nothing
    INVALID = "invalid"  # the reply did not parse; mapped to Keep
    STALE = "stale"  # the patch cited evidence that does not bind; not applied
    ESCALATED = "escalated"  # revisions stop; nothing committed
    EXHAUSTED = "exhausted"  # the candidate or wall budget is spent; revisions stop
    CLOSED = "closed"  # revisions had already stopped


@dataclass(frozen=True)
class Decision:
    """The result of one `submit`."""

    outcome: Disposition
    reason: str
    proposal: str | None = None  # digest of the stored proposal
    candidate: str | None = None  # tree hash of the evaluated candidate, if one was built
    checkpoint: str | None = None  # the checkpoint after this decision
    evidence: tuple[Evidence, ...] = ()  # admission evidence on the candidate
    refreshed: Evidence | None = None  # fresh evidence, when stale evidence was refreshed
    restored: tuple[str, ...] = ()  # leftovers removed by restoring the workspace first


@dataclass(frozen=True)
class Completion:
    """The result of `complete`: a receipt, or the reason there is none."""

    completed: bool
    reason: str
    receipt: dict[str, Any] | None = None
    receipt_path: Path | None = None


class EventLog(Protocol):
    """Where the broker appends its records: an `engine.record.ledger.Ledger` or a `MemoryLog`."""

    def append(self, record: dict) -> dict: ...

    @property
    def records(self) -> Sequence[dict]: ...


class MemoryLog:
    """An in-memory hash chain with the ledger's record shape (seq, prev, hash), for experiments
    that drive many short revisions and keep no file."""

    def __init__(self) -> None:
        self._records: list[dict] = []
        self.head = ""

    @property
    def records(self) -> Sequence[dict]:
        return tuple(self._records)

    def append(self, record: dict) -> dict:
        stored = dict(record)
        stored["seq"], stored["prev"] = len(self._records), self.head
        stored["hash"] = hashlib.sha256(canonical(stored)).hexdigest()
        self._records.append(stored)
        self.head = stored["hash"]
        return stored


def file_policy(path: Path) -> Callable[[], str]:
    """A policy digest source for a policy file: the SHA-256 of its bytes, read on every check."""
    def current() -> str:
        try:
            return file_sha256(Path(path))
        except OSError:
            return "missing"
    return current
