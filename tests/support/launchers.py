"""Ask each Python launcher once for a module whose tests load many copies of one spec.

`programs.resolve` asks a Python launcher (pyenv's `python3` shim here: bash, `pyenv exec`, a
Python: ~0.2 CPU-s) which interpreter it starts, in the spec's folder, at every load. A module
that loads a fresh copy of one example per test gets the same answer each time: its copies hold
no version file (`.python-version`, `.tool-versions`), so the launcher picks by the same things.
This fixture helper keeps the first answer per launcher for such folders and asks again for any
folder that does hold a version file. How a launcher is asked is tested where it is the point
(tests/adversarial/test_gate_runs_worker_code.py, tests/engine/system/test_worker_env.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from loopproof.engine.system import programs

VERSION_FILES = (".python-version", ".tool-versions")


@contextmanager
def launchers_asked_once() -> Iterator[dict[str, str | None]]:
    """Within the block, `programs._interpreter` answers from the first answer per launcher
    for a folder without a version file; yields the answers kept."""
    real = programs._interpreter
    kept: dict[str, str | None] = {}

    def once(launcher: str, spec_dir: Path) -> str | None:
        folders = [Path(spec_dir), *Path(spec_dir).parents]
        if any((d / name).exists() for d in folders for name in VERSION_FILES):
            return real(launcher, spec_dir)
        if launcher not in kept:
            kept[launcher] = real(launcher, spec_dir)
        return kept[launcher]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(programs, "_interpreter", once)
        yield kept


@pytest.fixture(scope="module")
def python_asked_once() -> Iterator[dict[str, str | None]]:
    """`launchers_asked_once` for a whole module: `pytestmark = pytest.mark.usefixtures(...)`."""
    with launchers_asked_once() as kept:
        yield kept
