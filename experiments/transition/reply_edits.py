"""The edit forms a model's reply may take, each turned into the whole new solution.py or refused
with a reason before anything moves.

Why more than a whole file: a 0.5B model asked for the complete file returned it unchanged (or
with only its docstrings changed) in every one of its 75 distinct patches at `llm` scale, so no
rate of the experiment could move. A small model can produce a short edit more easily than a
whole file, so two short forms are accepted besides it:

- **functions**: a ```python block holding imports and function definitions only. Each function
  replaces the file's top-level function of the same name (or is added before the task's entry
  point when the file has none); each import the file lacks is added at the top; everything
  else in the file is kept. A whole file made only of imports and functions is this form too.
- **diff**: a ```diff block, a unified diff of solution.py (`--- a/solution.py`,
  `+++ b/solution.py`, `@@` hunks). Each hunk's old lines (context and removals) must occur
  exactly once in the file, after the previous hunk; hunk line numbers are not trusted.

Refusals, each with its class (`Refused.why`) and a reason: `wrong_file` (a diff naming any
other path, /dev/null, or two files), `odd_bytes` (NUL or other control characters, a lone
surrogate), `not_applicable` (a hunk whose old lines are not found once, no hunk, a malformed
hunk), `syntax_error` (the block or the result does not parse), `malformed_action` (a block
holding a statement other than an import or a def).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

SOLUTION = "solution.py"
# Tab, newline and carriage return are the only control characters a reply may hold.
_ODD = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_HUNK = re.compile(r"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@.*")
_PATH = re.compile(r"(?:---|\+\+\+) (?P<path>\S+)(?:\s.*)?")


@dataclass(frozen=True)
class Refused(Exception):
    """A reply whose edit cannot be applied: its class and why."""

    why: str
    reason: str

    def __str__(self) -> str:
        return f"{self.why}: {self.reason}"


def check_bytes(text: str) -> None:
    """Refuse control characters other than tab and newline, and text that is not UTF-8."""
    m = _ODD.search(text)
    if m is not None:
        raise Refused("odd_bytes", f"the reply holds the control character {m.group()!r} at "
                      f"offset {m.start()}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Refused("odd_bytes", f"the reply is not UTF-8 ({exc.reason} at offset "
                      f"{exc.start})") from None


def _parse(code: str, what: str) -> ast.Module:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Refused("syntax_error", f"{what} does not parse "
                      f"({type(exc).__name__}: {getattr(exc, 'msg', exc)})") from None


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
        and isinstance(node.value.value, str)


def replace_functions(current: str, block: str, entry: str | None = None) -> str:
    """`current` with each function of `block` replacing its namesake (or added) and the
    block's missing imports added; Refused when `block` holds anything else."""
    new = _parse(block, "the block")
    cur = _parse(current, "the current file")
    defs: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    imports: list[ast.Import | ast.ImportFrom] = []
    for i, node in enumerate(new.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defs.append(node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            imports.append(node)
        elif not (i == 0 and _is_docstring(node)):
            raise Refused("malformed_action", f"line {node.lineno} of the block is a "
                          f"{type(node).__name__} statement; only imports and function "
                          "definitions may be given")
    if not defs:
        raise Refused("malformed_action", "the block defines no function")
    names = [d.name for d in defs]
    if len(set(names)) != len(names):
        raise Refused("malformed_action", "the block defines a function twice")
    body = list(cur.body)
    have = {ast.unparse(n) for n in body if isinstance(n, ast.Import | ast.ImportFrom)}
    by_name = {d.name: d for d in defs}
    for i, node in enumerate(body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in by_name:
            body[i] = by_name.pop(node.name)
    if by_name:  # new helpers go before the entry point (or at the end)
        at = next((i for i, n in enumerate(body) if isinstance(n, ast.FunctionDef)
                   and n.name == entry), len(body))
        body[at:at] = list(by_name.values())
    lead = 1 if body and _is_docstring(body[0]) else 0
    body[lead:lead] = [n for n in imports if ast.unparse(n) not in have]
    return ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n"


def _hunks(diff: str) -> list[tuple[list[str], list[str]]]:
    """The (old lines, new lines) of each hunk of a unified diff of solution.py."""
    lines = diff.splitlines()
    paths = [m.group("path") for ln in lines if (m := _PATH.fullmatch(ln)) is not None
             and not _HUNK.fullmatch(ln)]
    for p in paths:
        if p.removeprefix("a/").removeprefix("b/") != SOLUTION:
            raise Refused("wrong_file", f"the diff names {p!r}; only {SOLUTION} may be edited")
    if len(paths) > 2:
        raise Refused("wrong_file", "the diff has more than one file header")
    hunks: list[tuple[list[str], list[str]]] = []
    cur: tuple[list[str], list[str]] | None = None
    for ln in lines:
        if _PATH.fullmatch(ln) and cur is None:
            continue
        if _HUNK.fullmatch(ln):
            cur = ([], [])
            hunks.append(cur)
        elif cur is None:
            if ln.strip():
                raise Refused("not_applicable", f"text before the first hunk: {ln[:60]!r}")
        elif ln.startswith("-"):
            cur[0].append(ln[1:])
        elif ln.startswith("+"):
            cur[1].append(ln[1:])
        elif ln.startswith(" ") or ln == "":
            cur[0].append(ln[1:])
            cur[1].append(ln[1:])
        elif ln.startswith("\\"):
            continue  # "\ No newline at end of file"
        else:
            raise Refused("not_applicable", f"a hunk line starts with {ln[:1]!r}, not ' ', "
                          "'-' or '+'")
    if not hunks:
        raise Refused("not_applicable", "the diff has no @@ hunk")
    return hunks


def apply_diff(current: str, diff: str) -> str:
    """`current` with the unified diff applied, or Refused."""
    text = current.splitlines()
    at = 0
    for n, (old, new) in enumerate(_hunks(diff), 1):
        if not old:
            raise Refused("not_applicable", f"hunk {n} has no context or removed line")
        found = [i for i in range(at, len(text) - len(old) + 1) if text[i:i + len(old)] == old]
        if len(found) != 1:
            raise Refused("not_applicable", f"hunk {n}'s old lines occur {len(found)} times in "
                          f"{SOLUTION} (must be exactly once)")
        i = found[0]
        text[i:i + len(old)] = new
        at = i + len(new)
    out = "\n".join(text) + "\n"
    _parse(out, "the patched file")
    return out
