"""The layout rule "no module over about 400 lines without a stated reason in its docstring"
(docs/design.md), checked instead of hoped for: every .py under the product's folders longer
than LIMIT lines has a paragraph of its module docstring that starts with MARKER and says, in
words, why it stays one module. A long module without one fails here with its path and size;
split it by idea, or state the reason."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import REPO

FOLDERS = ("engine", "model", "proofs", "experiments", "bench", "paper", "notebooks", "examples")
LIMIT = 400  # lines, as `wc -l` counts them
MARKER = "Why one module:"
MIN_WORDS = 12  # a reason, not a marker with "on purpose" after it


def reason(source: str) -> str | None:
    """The text after MARKER in the first docstring paragraph that starts with it, or None."""
    try:
        doc = ast.get_docstring(ast.parse(source))
    except SyntaxError:
        return None
    for paragraph in re.split(r"\n\s*\n", doc or ""):
        if paragraph.startswith(MARKER):
            return " ".join(paragraph[len(MARKER):].split())
    return None


def unexplained(root: Path) -> list[str]:
    """One line per module over LIMIT lines under `root`'s FOLDERS that does not say why."""
    bad = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            source = path.read_text(encoding="utf-8")
            lines = source.count("\n")
            if lines <= LIMIT:
                continue
            why = reason(source)
            if why is None or len(why.split()) < MIN_WORDS:
                bad.append(f"{path.relative_to(root)}: {lines} lines, and its docstring has no "
                           f"paragraph starting {MARKER!r} that says why (split it by idea, or "
                           "state the reason)")
    return bad


def test_every_module_over_400_lines_says_why_it_is_one():
    assert unexplained(REPO) == []


def _module(doc: str, lines: int) -> str:
    head = f'"""{doc}"""\n'
    return head + "x = 1\n" * (lines - head.count("\n"))


def test_the_rule_catches_a_long_module_that_does_not_say_why(tmp_path: Path):
    real = ("A module.\n\nWhy one module: the writer and the reader are one byte format, so they "
            "change together and are read together.\n")
    planted = {
        "engine/run/long.py": _module("A module that grew and never said why.\n", LIMIT + 1),
        "model/empty_reason.py": _module("A module.\n\nWhy one module: on purpose.\n", LIMIT + 1),
        "proofs/buried.py": _module("A module. Why one module: the writer and the reader are "
                                    "one byte format, so they change together.\n", LIMIT + 1),
        "paper/tables/comment.py": "# Why one module: the writer and the reader are one byte "
                                   "format, so they change together and are read together.\n"
                                   + _module("A module.\n", LIMIT + 1),
    }
    fine = {
        "engine/record/ok.py": _module(real, LIMIT + 300),
        "experiments/at_limit.py": _module("A module.\n", LIMIT),
        "bench/__pycache__/cached.py": _module("A module.\n", LIMIT + 1),
    }
    for rel, text in {**planted, **fine}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    flagged = sorted(line.split(":")[0] for line in unexplained(tmp_path))
    assert flagged == sorted(planted)
