"""One exit-code enum (engine/system/exits.py): the docs' table, the CLI's epilog and every
entry point agree with it, and no module defines an exit code of its own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from loopproof.engine.system.exits import WORDS, Exit, epilog
from tests.support.paths import REPO

# a name for an exit code bound to a number, or a bare number returned by a command's main
DEFINED = re.compile(r"^[ \t]*(EXIT\w*(\s*,\s*EXIT\w*)*)\s*=\s*[\d{(]", re.M)
# programs the engine runs as text in a child (they cannot import the package)
CHILD_PROGRAMS = {"engine/run/proxy/bridge.py"}


def test_the_docs_list_each_code_once_and_only_the_enums() -> None:
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    conventions = text[text.index("Exit\n  codes:") if "Exit\n  codes:" in text
                       else text.index("Exit codes:"):]
    conventions = conventions[:conventions.index("Every reporting command")]
    listed = [int(n) for n in re.findall(r"(?:^|[;:]\s+)(\d) ", conventions, re.M)]
    assert listed == [int(e) for e in Exit], listed


def test_the_cli_prints_the_enums_words() -> None:
    help_text = subprocess.run([sys.executable, "-m", "loopproof.engine.cli", "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert " ".join(epilog().split()) in " ".join(help_text.split())
    assert set(WORDS) == set(Exit)


def test_no_module_defines_an_exit_code_of_its_own() -> None:
    """The engine's codes come from the enum; a study may add its own only above them (the
    growth loop's 7: a planted fault broke the loop)."""
    found = []
    for top in ("engine", "model", "proofs", "experiments", "bench"):
        for path in sorted((REPO / top).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            if rel == "engine/system/exits.py" or rel in CHILD_PROGRAMS:
                continue
            for m in DEFINED.finditer(path.read_text(encoding="utf-8")):
                line = path.read_text(encoding="utf-8")[m.start():].split("\n", 1)[0]
                if "Exit." in line or "EXIT_CODES" in line:
                    continue
                numbers = [int(n) for n in re.findall(r"\b\d+\b", line.split("#")[0])]
                if top == "experiments" and numbers and min(numbers) > max(Exit):
                    continue  # a study's own code, above every code the engine gives
                found.append(f"{rel}: {line.strip()}")
    assert found == [], found


def test_the_finder_finds_a_planted_code(tmp_path: Path) -> None:
    planted = "EXIT_OK, EXIT_CORRUPT = 0, 5\n"
    assert DEFINED.search(planted) and "Exit." not in planted
