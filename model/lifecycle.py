"""The broker's lifecycle: its statuses and the declared moves between them.

Why a table: the status was a bare string set in four modules (state, broker, recertify, admit),
so nothing said which changes are possible and a new path could, say, reopen a failed broker.
Now the status changes only through `moved`, which refuses a move the table does not declare and
says why, as a model event's `why_not` does. FAILED and COMPLETED are final: `BrokerState._stop`
leaves a final broker as it is (a later stop is not news), and nothing moves out of one.
"""

from __future__ import annotations

from enum import StrEnum


class BrokerStatus(StrEnum):
    NEW = "new"  # configured; start() not called yet
    OPEN = "open"  # taking proposals
    ESCALATED = "escalated"  # revisions stopped: a person must look (the worker asked, stale)
    EXHAUSTED = "exhausted"  # revisions stopped: the candidate or wall-clock budget is spent
    FAILED = "failed"  # final: no receipt will be issued
    COMPLETED = "completed"  # final: the checkpoint was recertified and its receipt written


FINAL = frozenset({BrokerStatus.FAILED, BrokerStatus.COMPLETED})
_STOPS = frozenset({BrokerStatus.ESCALATED, BrokerStatus.EXHAUSTED, *FINAL})

# status -> the statuses it may move to. A stopped broker (escalated, exhausted) may still fail
# (its pins no longer hold) or complete (its checkpoint is recertified), or be stopped again.
TRANSITIONS: dict[BrokerStatus, frozenset[BrokerStatus]] = {
    BrokerStatus.NEW: frozenset({BrokerStatus.OPEN}),
    BrokerStatus.OPEN: _STOPS,
    BrokerStatus.ESCALATED: _STOPS,
    BrokerStatus.EXHAUSTED: _STOPS,
    BrokerStatus.FAILED: frozenset(),
    BrokerStatus.COMPLETED: frozenset(),
}


class UndeclaredTransition(RuntimeError):
    """A move the lifecycle does not declare: a bug in the broker, never the worker's doing."""


def why_not(old: BrokerStatus, new: BrokerStatus) -> str | None:
    """None if the table declares old -> new, else why not."""
    if new in TRANSITIONS[old]:
        return None
    allowed = ", ".join(sorted(TRANSITIONS[old])) or "nothing: it is final"
    return f"a broker that is {old} cannot become {new} (from {old} it may become {allowed})"


def moved(old: BrokerStatus, new: BrokerStatus) -> BrokerStatus:
    """`new`, if old -> new is declared; else UndeclaredTransition saying why not."""
    why = why_not(old, new)
    if why is not None:
        raise UndeclaredTransition(why)
    return new
