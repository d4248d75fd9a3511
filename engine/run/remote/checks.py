"""What the engine checks of a Dask worker's host before it sends it an attempt, and of a
gate's installed program before each gate run there: the host runs the same engine code, has the
graph's programs at the same paths, the gates' interpreters as pinned, and a sandbox that works.

Why apart from far.py: these are questions the engine asks of a host (engine/run/remote/
cluster.py probes every worker before its first attempt); far.py is what runs an attempt.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from loopproof.engine.system.sandbox import backend
from loopproof.engine.system.trees import file_digest

_PINS: dict[str, tuple[tuple[int, ...], str]] = {}


def pinned_digest(path: str) -> str:
    """A program's sha256 here, hashed again only when its identity changed (as the engine's
    pins are: device, inode, size, modification and change time)."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _PINS.get(path)
    if known is None or known[0] != ident:
        known = _PINS[path] = (ident, file_digest(Path(path)))
    return known[1]



_CODE: list[str] = []


def code_digest() -> str:
    """One digest of the engine's and the model's source files here: an engine and its workers
    must run the same code (a far side of another version would judge otherwise)."""
    if not _CODE:
        package = Path(__file__).resolve().parents[3]  # loopproof/
        h = hashlib.sha256()
        for sub in ("engine", "model"):
            for f in sorted((package / sub).rglob("*.py")):
                h.update(f.relative_to(package).as_posix().encode() + b"\0")
                h.update(f.read_bytes() + b"\0")
        _CODE.append(h.hexdigest())
    return _CODE[0]


def probe(programs: Iterable[str], pins: dict[str, str], sandbox: str) -> dict[str, Any]:
    """What the engine checks of a host before it sends it an attempt: the same code, the
    programs the graph runs (at the same paths), the gates' installed programs as pinned, and a
    sandbox that works."""
    try:
        problem = backend(sandbox).problem()
    except KeyError:
        problem = f"no sandbox backend {sandbox!r}"
    return {"code": code_digest(), "python": sys.version.split()[0], "sandbox": problem,
            "missing": sorted(p for p in programs if not os.path.exists(p)),
            "changed": sorted(p for p, sha in pins.items() if pinned_digest(p) != sha)}


