"""The `none` backend: no sandbox, only what `run_command` always does (own process group,
allow-listed environment, kill at the deadline). Chosen with `sandbox = "none"`; the run records
it in its first ledger record and warns, because every promise that rests on confinement
(docs/threat-model.md) is then given up.

It still gives a command with `View.private_home` a fresh empty HOME and TMPDIR, removed when
the command ends, so a gate never starts with a worker's `.pth` file or config in its HOME.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from loopproof.engine.system.sandbox.base import Launch, View


class NoSandbox:
    name = "none"

    def problem(self) -> str | None:
        return None

    @contextlib.contextmanager
    def launch(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str],
               view: View) -> Iterator[Launch]:
        child_env = dict(env)
        home = None
        if view.private_home:
            home = tempfile.mkdtemp(prefix="loopproof-home-")
            child_env["HOME"] = child_env["TMPDIR"] = home
        try:
            yield Launch(tuple(argv), child_env, Path(cwd))
        finally:
            if home is not None:
                shutil.rmtree(home, ignore_errors=True)
