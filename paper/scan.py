"""Find numbers typed by hand: digit sequences in the paper's .tex and in README.md and docs/*.md
that come neither from results/ (a macro, a generated table or block) nor from the explicit list
of numbers that are not results (paper/allowed_numbers.toml: section numbers, exit codes, sizes,
thresholds, each with its reason).

Why a scanner and not review: a figure typed into prose is right the day it is typed and wrong
after the next run; this makes it a test failure instead.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ALLOWED = Path(__file__).with_name("allowed_numbers.toml")

DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
# A digit run glued to a letter or underscore is part of a name (G1, CF001, sha256, x86_64).
NAME_DIGITS = re.compile(r"(?:[A-Za-z_][A-Za-z_]*\d[\w]*|\d+[A-Za-z_]\w*)")

# LaTeX: commands whose (optional and) mandatory arguments are keys, labels or file names.
TEX_KEY_COMMANDS = ("R", "Rp", "Rpz", "Rsci", "Src", "IfResult", "IfResults", "IfFigure",
                    "label", "ref", "eqref", "autoref", "cref", "cite", "citet", "citep",
                    "input", "include", "includegraphics", "url", "href", "bibliography",
                    "bibliographystyle", "documentclass", "usepackage", "begin", "end",
                    "file", "cmd", "key")
TEX_LENGTH = re.compile(r"-?\d*\.?\d+\s*(?:pt|em|ex|cm|mm|in|bp|sp)\b|\d*\.?\d+\\(?:line|text)"
                        r"width|\\Rf\{\d\}")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    number: str
    context: str

    def __str__(self) -> str:
        return (f"{self.path}:{self.line}: {self.number!r} typed by hand in "
                f"\"{self.context.strip()}\"; fix: use a macro or a generated table "
                "(\\R{key}), or add it to paper/allowed_numbers.toml with why it is not a result")


def load_allowed(path: Path = ALLOWED) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _blank(text: str, start: int, end: int) -> str:
    """Replace text[start:end] by spaces, keeping newlines so line numbers stay right."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _blank_all(text: str, pattern: re.Pattern[str] | str, flags: int = 0) -> str:
    rx = re.compile(pattern, flags) if isinstance(pattern, str) else pattern
    for m in reversed(list(rx.finditer(text))):
        text = _blank(text, m.start(), m.end())
    return text


def _blank_phrases(text: str, phrases: list[str]) -> str:
    for ph in sorted(phrases, key=len, reverse=True):
        text = _blank_all(text, re.escape(ph))
    return text


def _blank_rules(text: str, rules: list[dict]) -> str:
    for rule in rules:
        text = _blank_all(text, rule["pattern"])
    return text


def _braced_end(text: str, i: int) -> int:
    """Index after the brace group starting at text[i] == '{' (or i if there is none)."""
    if i >= len(text) or text[i] != "{":
        return i
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{" and (j == 0 or text[j - 1] != "\\"):
            depth += 1
        elif text[j] == "}" and text[j - 1] != "\\":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def strip_tex(text: str) -> str:
    """The .tex with comments, key/label/file arguments and lengths blanked out."""
    text = _blank_all(text, r"(?<!\\)%[^\n]*")
    text = _blank_all(text, r"\\Rf\{\d\}\{[^{}]*\}")
    cmd = re.compile(r"\\(" + "|".join(TEX_KEY_COMMANDS) + r")\*?(?![A-Za-z])")
    pos = 0
    while (m := cmd.search(text, pos)) is not None:
        j = m.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "[":
            k = text.find("]", j)
            j = len(text) if k < 0 else k + 1
        end = _braced_end(text, j)
        if m.group(1) in ("begin",) and end < len(text) and text[end] == "{":
            end = _braced_end(text, end)  # \begin{tabular}{colspec}
        if m.group(1) in ("begin",) and end < len(text) and text[end] == "[":
            k = text.find("]", end)
            end = end if k < 0 else k + 1
        text = _blank(text, m.start(), end)
        pos = m.start() + 1
    return _blank_all(text, TEX_LENGTH)


GENERATED_BLOCK = re.compile(r"<!--\s*([\w.-]+):begin\b.*?-->.*?<!--\s*\1:end\s*-->", re.S)


def strip_markdown(text: str) -> str:
    """Markdown prose only: code (fenced, indented, inline), link targets, HTML comments and
    generated blocks blanked out."""
    text = GENERATED_BLOCK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    text = _blank_all(text, r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
    text = _blank_all(text, r"^(?: {4}|\t)[^\n]*$", re.M)
    text = _blank_all(text, r"`[^`\n]*`")
    text = _blank_all(text, r"\]\([^)\s]*\)")
    text = _blank_all(text, r"<!--.*?-->", re.S)
    text = _blank_all(text, r"https?://\S+")
    return text


def findings(path: Path, text: str, stripped: str, phrases: list[str],
             rules: list[dict], rel: str) -> Iterator[Finding]:
    s = _blank_rules(stripped, rules)
    s = _blank_phrases(s, phrases)
    s = _blank_all(s, NAME_DIGITS)
    lines = text.splitlines()
    for m in DIGITS.finditer(s):
        line = s.count("\n", 0, m.start()) + 1
        yield Finding(rel, line, m.group(0), lines[line - 1] if line <= len(lines) else "")


def scan_tex(root: Path, allowed: dict | None = None) -> list[Finding]:
    """Hand-typed numbers in paper/*.tex and paper/sections/*.tex (generated/ excluded)."""
    allowed = allowed if allowed is not None else load_allowed()
    tex = allowed.get("tex", {})
    phrases = [a["text"] for a in tex.get("allow", [])]
    rules = tex.get("rule", [])
    out: list[Finding] = []
    for p in sorted((root / "paper").rglob("*.tex")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(("paper/generated/", "paper/build/")):
            continue
        text = p.read_text(encoding="utf-8")
        out += findings(p, text, strip_tex(_blank_rules(text, rules)), phrases, [], rel)
    return out


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def scan_docs(root: Path, allowed: dict | None = None,
              generated: tuple[str, ...] = ("docs/results.md",)) -> list[Finding]:
    """Hand-typed numbers in README.md and docs/*.md prose (fully generated files excluded)."""
    allowed = allowed if allowed is not None else load_allowed()
    docs = allowed.get("docs", {})
    rules = docs.get("rule", [])
    out: list[Finding] = []
    for p in doc_files(root):
        rel = p.relative_to(root).as_posix()
        if rel in generated or not p.is_file():
            continue
        phrases = [a["text"] for a in docs.get("allow", [])
                   if a.get("file", rel) == rel]
        text = p.read_text(encoding="utf-8")
        out += findings(p, text, strip_markdown(text), phrases, rules, rel)
    return out
