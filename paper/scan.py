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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ALLOWED = Path(__file__).with_name("allowed_numbers.toml")

DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
# Digits that are part of a name: after a letter or underscore (G1, CF001, sha256, x86_64,
# Qwen2.5), a model's size (0.5B, 14B), an HTTP status class (4xx) and a number in e-notation
# (1e-9, a tolerance). A digit run glued to anything else (33s, 10x, 5MB) is a number, not a name.
NAME_DIGITS = re.compile(r"[A-Za-z_][A-Za-z_]*\d\w*(?:\.\d+\w*)*|(?<![\w.])\d+(?:\.\d+)?B\b|\b\dxx\b|"
                         r"(?<![\w.])\d+e-?\d+\b")

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
        fix = ("use a macro or a generated table (\\R{key}), or add it to paper/allowed_numbers"
               ".toml ([[tex.allow]]) with why it is not a result" if self.path.endswith(".tex")
               else "a result goes in docs/results.md (paper/docs.py) and the prose points "
               "there; a number that is not a result (a default, a limit, a definition) goes "
               f"in paper/allowed_numbers.toml as a phrase of [[docs.allow]] for {self.path}, "
               "with its kind and why")
        return (f"{self.path}:{self.line}: {self.number!r} typed by hand in "
                f"\"{self.context.strip()}\"; fix: {fix}")


def load_allowed(path: Path = ALLOWED) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _blank(text: str, start: int, end: int) -> str:
    """Replace text[start:end] by spaces, keeping newlines so line numbers stay right."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _blank_spans(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """Blank every (start, end) span of text in one pass (spans may overlap and come in any
    order). Why not _blank per span: each call copies the whole file, and a docs page has
    thousands of spans (the scan was seconds, most of it copying)."""
    out, at = [], 0
    for start, end in sorted(spans):
        start = max(start, at)
        if end <= start:
            continue
        out += [text[at:start], re.sub(r"[^\n]", " ", text[start:end])]
        at = end
    out.append(text[at:])
    return "".join(out)


def _blank_all(text: str, pattern: re.Pattern[str] | str, flags: int = 0) -> str:
    rx = re.compile(pattern, flags) if isinstance(pattern, str) else pattern
    return _blank_spans(text, (m.span() for m in rx.finditer(text)))


def _blank_phrases(text: str, phrases: list[str], source: str | None = None) -> str:
    """Blank every occurrence of each phrase; found in `source` (the file as written, so a
    phrase may hold inline code) and blanked at the same place in `text` (its stripped form)."""
    source = text if source is None else source
    return _blank_spans(text, (m.span() for ph in set(phrases)
                               for m in re.finditer(re.escape(ph), source)))


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


def _code_block(m: re.Match[str]) -> str:
    """A fenced block is code, blanked, except the output of a `$ command` shown in it: what a
    command printed is a result typed by hand like any other."""
    lines = m.group(0).split("\n")
    shell = any(ln.startswith("$ ") for ln in lines)
    keep = [shell and 0 < i < len(lines) - 1 and not ln.startswith("$ ")
            for i, ln in enumerate(lines)]
    return "\n".join(ln if k else re.sub(r".", " ", ln) for ln, k in zip(lines, keep, strict=True))


def strip_markdown(text: str) -> str:
    """Markdown prose only: code (fenced, indented, inline), link targets, HTML comments and
    generated blocks blanked out."""
    text = GENERATED_BLOCK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", _code_block, text, flags=re.S | re.M)
    text = _blank_all(text, r"^(?: {4}|\t)[^\n]*$", re.M)
    text = _blank_all(text, r"`[^`\n]*`")
    text = _blank_all(text, r"\]\([^)\s]*\)")
    text = _blank_all(text, r"<!--.*?-->", re.S)
    text = _blank_all(text, r"https?://\S+")
    return text


def findings(path: Path, text: str, stripped: str, phrases: list[str],
             rules: list[dict], rel: str) -> Iterator[Finding]:
    s = _blank_rules(stripped, rules)
    s = _blank_phrases(s, phrases, text)
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


KINDS = ("definition", "parameter", "limit", "protocol", "source", "fact", "target")


def _texts(entry: dict) -> list[str]:
    t = entry["text"]
    return [t] if isinstance(t, str) else list(t)


def stale(root: Path, allowed: dict | None = None) -> list[str]:
    """Allow-list entries that no longer hold: a phrase its file no longer contains, a file that
    is gone, a kind not in KINDS, an entry without a why, a rule that matches nothing. A stale
    entry would otherwise keep allowing a number that has since changed or moved."""
    allowed = allowed if allowed is not None else load_allowed()
    out = []
    docs = allowed.get("docs", {})
    texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
             for p in doc_files(root) if p.is_file()}
    for i, a in enumerate(docs.get("allow", [])):
        where = f"paper/allowed_numbers.toml: docs.allow[{i}] ({a.get('file')})"
        if a.get("kind") not in KINDS:
            out.append(f"{where}: kind {a.get('kind')!r} is not one of {', '.join(KINDS)}")
        if not str(a.get("why", "")).strip():
            out.append(f"{where}: no why")
        if a.get("file") not in texts:
            out.append(f"{where}: no such file")
            continue
        out += [f"{where}: {t!r} is no longer in the file; fix: remove it from the list"
                for t in _texts(a) if t not in texts[a["file"]]]
    tex = "\n".join(p.read_text(encoding="utf-8") for p in sorted((root / "paper").rglob("*.tex"))
                    if not p.relative_to(root).as_posix().startswith(("paper/generated/",
                                                                       "paper/build/")))
    out += [f"paper/allowed_numbers.toml: tex.allow {a['text']!r} is in no .tex of paper/; fix: "
            "remove it" for a in allowed.get("tex", {}).get("allow", [])
            if (root / "paper").is_dir() and a["text"] not in tex]
    prose_all = "\n".join(strip_markdown(t) for t in texts.values())
    out += [f"paper/allowed_numbers.toml: docs.rule {r['pattern']!r} matches nothing; fix: "
            "remove it" for r in docs.get("rule", []) if not re.search(r["pattern"], prose_all)]
    return out


def size(allowed: dict | None = None) -> dict[str, int]:
    """How much the list allows: rules and phrases, for the docs and the paper's .tex."""
    allowed = allowed if allowed is not None else load_allowed()
    docs, tex = allowed.get("docs", {}), allowed.get("tex", {})
    return {"docs_rules": len(docs.get("rule", [])),
            "docs_phrases": sum(len(_texts(a)) for a in docs.get("allow", [])),
            "tex_rules": len(tex.get("rule", [])), "tex_phrases": len(tex.get("allow", []))}


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
        phrases = [t for a in docs.get("allow", []) if a.get("file", rel) == rel
                   for t in _texts(a)]
        text = p.read_text(encoding="utf-8")
        out += findings(p, text, strip_markdown(text), phrases, rules, rel)
    return out
