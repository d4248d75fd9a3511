"""tests/support/launchers.py keeps one answer per Python launcher only where the launcher has
nothing else to pick by: a folder holding a version file is asked again, every time."""

from __future__ import annotations

import sys
from pathlib import Path

from loopproof.engine.system import programs
from tests.support.launchers import launchers_asked_once

# a version manager's shim: the version file in the working directory picks the interpreter;
# each question is counted
SHIM = """#!/bin/sh
echo asked >> {log}
if [ -f .python-version ]; then exec {versioned} "$@"; fi
exec {default} "$@"
"""


def test_one_question_per_launcher_unless_a_version_file_can_change_the_answer(
        tmp_path: Path) -> None:
    bin_, log = tmp_path / "bin", tmp_path / "asked.log"
    bin_.mkdir()
    versioned = Path(sys.executable).resolve()
    shim = bin_ / "python3"
    shim.write_text(SHIM.format(log=log, versioned=versioned, default=sys.executable))
    shim.chmod(0o755)
    plain = [tmp_path / f"plain{i}" for i in range(3)]
    pinned = tmp_path / "pinned"
    for d in (*plain, pinned):
        d.mkdir()
    (pinned / ".python-version").write_text("3.11\n")

    def asked() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    with launchers_asked_once() as kept:
        first = [programs.resolve("python3", d, path=str(bin_)) for d in plain]
        assert asked() == 1 and kept == {str(shim): first[0]} and len(set(first)) == 1
        for n in (2, 3):
            assert programs.resolve("python3", pinned, path=str(bin_)) == str(versioned)
            assert asked() == n  # a version file: asked each time
    programs.resolve("python3", plain[0], path=str(bin_))
    assert asked() == 4  # outside the block: the engine's own behaviour, asked at every load
