"""The cyclic garbage collector paused around work that builds millions of objects at once.

Why: CPython starts a collection every few hundred new container objects, and every tenth of
those looks at older ones too; loading a 100,000-node spec or verifying a 100,000-record ledger
creates millions of dicts, lists and strings that hold no cycles, so dozens of full collections
would find nothing to free (half of a large spec's load). Reference counting still frees
everything as usual; only cycles wait until the collector runs again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
