"""Take a secret out of the engine's environment, so no process the engine starts can read it.

Why more than `os.environ.pop`: /proc/<pid>/environ shows the environment block the process
was started with, not Python's copy of it, and a worker running as the engine's user (no
sandbox) may read its parent's. `take` keeps the value in memory, removes it from `os.environ`
(no child inherits it, even one started without an explicit environment) and overwrites its
bytes in the original block, so /proc/<engine>/environ no longer holds it. What it cannot do:
stop a process allowed to ptrace the engine from reading its memory; the sandbox's own PID
namespace does that.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_taken: dict[str, str] = {}


def take(name: str) -> str | None:
    """The value of `name` (None if unset), from now on held only by this process's memory."""
    if name in _taken:
        return _taken[name]
    value = os.environ.get(name)
    if value is None:
        return None
    _taken[name] = value
    _scrub(name)  # first: os.environ.pop unsets the C variable, and getenv then finds nothing
    os.environ.pop(name, None)
    return value


def peek(name: str) -> str | None:
    """The value of `name`, taken or not (without taking it)."""
    return _taken.get(name, os.environ.get(name))


def _scrub(name: str) -> None:
    """Overwrite the value in the C environment block, then drop the variable from it."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    except OSError:
        return
    libc.getenv.restype = ctypes.c_void_p
    libc.getenv.argtypes = [ctypes.c_char_p]
    while (addr := libc.getenv(name.encode())) is not None:
        size = len(ctypes.string_at(addr))
        ctypes.memset(addr, ord("*"), size)
        libc.unsetenv(name.encode())
