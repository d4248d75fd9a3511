"""Every node kind this engine ships, registered in the run layer's registry (engine/run/kinds.py):
the run layer's own `command` kind and the admission layer's `revision` kind.

Why above both: a kind defined in a higher layer registers itself from above
(`engine/admission/revision.py` calls `register_kind` when imported), so the run layer never names
a module of the admission layer, not even by string, and the import contracts see every
dependency. The entry points that load a spec (the `loopproof` command, the API in
`loopproof/__init__.py`) call `register_builtin()` first; a library user who loads a spec with a
revision node through `engine.run.spec.load` directly does the same.
"""

from __future__ import annotations


def register_builtin() -> None:
    """Make every shipped kind available to spec loading. Idempotent and cheap after the first."""
    from loopproof.engine.admission import revision  # noqa: F401  (registers "revision")
