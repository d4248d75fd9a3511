"""Sandboxes for worker and gate commands, behind one interface (engine/system/sandbox/base.py):
a `View` says what one command may see, a backend says how. Backends, one adapter each:

- "bwrap" (engine/system/sandbox/bwrap.py): bubblewrap namespaces on Linux; the default.
- "none" (engine/system/sandbox/none.py): no confinement; recorded and warned about.

A second backend (Landlock, macOS sandbox-exec) is one more module and one line in `BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Callable

from loopproof.engine.system.sandbox.base import Confinement, Launch, Sandbox, Unavailable, View
from loopproof.engine.system.sandbox.bwrap import Bwrap
from loopproof.engine.system.sandbox.none import NoSandbox

BACKENDS: dict[str, Callable[[], Sandbox]] = {"bwrap": Bwrap, "none": NoSandbox}
DEFAULT = "bwrap"

# What a gate-like command runs in when the caller gives no sandbox: none, but a fresh HOME.
UNSANDBOXED = Confinement(NoSandbox(), View(private_home=True))

_cache: dict[str, Sandbox] = {}


def backend(name: str = DEFAULT) -> Sandbox:
    """The backend called `name` (one instance per process: its availability probe runs once)."""
    if name not in BACKENDS:
        raise KeyError(name)
    if name not in _cache:
        _cache[name] = BACKENDS[name]()
    return _cache[name]


__all__ = ["BACKENDS", "DEFAULT", "UNSANDBOXED", "Confinement", "Launch", "Sandbox", "Unavailable", "View",
           "backend"]
