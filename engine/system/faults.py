"""Crash injection at named commit boundaries, for the crash experiment and crash tests.

Code at a commit boundary calls `crashpoint("site")`. When the environment variable
LOOPPROOF_CRASH_AT is "site:n", the n-th call (1-based) at that site kills this process with
SIGKILL: no cleanup, no flush, exactly like a power cut from the process's point of view.
Unset (the normal case), a crashpoint costs one comparison: the variable is read and parsed
once, at the first crashpoint (it is set before the process starts; `reset` forgets it).
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "LOOPPROOF_CRASH_AT"
_counts: dict[str, int] = {}
_lock = threading.Lock()
_UNREAD = ("", 0)
_target_cache: tuple[str, int] | None = _UNREAD


def _target() -> tuple[str, int] | None:
    global _target_cache
    if _target_cache is _UNREAD:
        _target_cache = _parse()
    return _target_cache


def _parse() -> tuple[str, int] | None:
    spec = os.environ.get(ENV)
    if not spec:
        return None
    site, _, n = spec.rpartition(":")
    if not site or not n.isdigit() or int(n) < 1:
        raise ValueError(f"{ENV}={spec!r}: expected SITE:N with N >= 1")
    return site, int(n)


def crashpoint(site: str) -> None:
    """Die here, by SIGKILL, if this is the call LOOPPROOF_CRASH_AT names."""
    target = _target()
    if target is None or target[0] != site:
        return
    with _lock:  # attempts in flight on several threads cross a site: each crossing counts once
        _counts[site] = _counts.get(site, 0) + 1
        if _counts[site] == target[1]:
            os.kill(os.getpid(), signal.SIGKILL)


def reset() -> None:
    """Forget the per-site counts and the parsed variable (for tests that crash a child, not
    this process, or change the variable)."""
    global _target_cache
    _counts.clear()
    _target_cache = _UNREAD
