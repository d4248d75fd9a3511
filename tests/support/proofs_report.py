"""The report of a full `python -m loopproof.proofs` run on today's sources, for the tests that read it.

make check's proofs step keeps it (`--keep build/proofs`, proofs/kept.py); a pytest run without
that step, or after any change to model/ or proofs/, finds no report under the new digest and
runs the proofs once here, in a child, under a lock that pytest's other workers wait on.
"""

from __future__ import annotations

import fcntl
import functools
import subprocess
import sys
from typing import Any

from loopproof.proofs import kept
from tests.support.notebooks import REPO

DIRECTORY = REPO / "build" / "proofs"


@functools.cache
def full_report() -> dict[str, dict[str, Any]]:
    """Obligation id -> its row of the report."""
    DIRECTORY.mkdir(parents=True, exist_ok=True)
    with open(DIRECTORY / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = kept.load(DIRECTORY)
        if rows is None:
            done = subprocess.run([sys.executable, "-m", "loopproof.proofs", "--json", "--keep",
                                   str(DIRECTORY)], cwd=REPO, capture_output=True, text=True,
                                  timeout=900)
            rows = kept.load(DIRECTORY)
            assert rows is not None, f"python -m loopproof.proofs kept no report: {done.stderr[-2000:]}"
    return {row["id"]: row for row in rows}
