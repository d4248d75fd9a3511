"""Tier 1, the development family: absence (the thing checked is not there) and structural
destroyers. Absence variants are wrong by construction; a gate that accepts one is vacuous."""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import textwrap

from loopproof.engine.audit.operators.base import DELETED, Example, Operator, kind_of, operator

FILLER = {
    "python": '"""TODO: write the solution."""\n',
    "json": '"TODO"\n',
    "markdown": "Lorem ipsum dolor sit amet. TODO: write this.\n",
    "csv": "TODO\n",
    "text": "Lorem ipsum dolor sit amet. TODO: write this.\n",
}
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


@operator(name="delete", tier=1, family="absence", by_construction=True,
          examples=(Example("x = 1\n", DELETED, "a.py"),))
def delete(path: str, text: str) -> list[str | None]:
    """Remove the file."""
    return [DELETED]


@operator(name="empty", tier=1, family="absence", by_construction=True,
          examples=(Example("x = 1\n", "", "a.py"),))
def empty(path: str, text: str) -> list[str | None]:
    """Leave the file in place with no bytes in it."""
    return [""]


@operator(name="whitespace", tier=1, family="absence", by_construction=True,
          examples=(Example("# Title\n", "\n  \n\t\n", "a.md"),))
def whitespace(path: str, text: str) -> list[str | None]:
    """Whitespace only: present, non-empty, and saying nothing."""
    return ["\n  \n\t\n"]


@operator(name="filler", tier=1, family="absence", by_construction=True,
          examples=(Example("def f():\n    return 1\n", FILLER["python"], "a.py"),
                    Example("a,b\n1,2\n", "TODO\n", "a.csv")))
def filler(path: str, text: str) -> list[str | None]:
    """Placeholder text in the file's own syntax where it has one."""
    return [FILLER[kind_of(path)]]


def stub_bodies(text: str, stub: str) -> str:
    """Every function's statements replaced by `stub` (its lines indented as the body was); signatures, docstrings and comments are
    kept, so the file keeps its shape and loses its content."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                body = body[1:]
            if body:
                spans.append((body[0].lineno, body[-1].end_lineno, body[0].col_offset))
    # Outermost spans only (a nested function goes with its parent's body), applied bottom-up.
    spans.sort()
    outer: list[tuple[int, int, int]] = []
    for span in spans:
        if not outer or span[0] > outer[-1][1]:
            outer.append(span)
    for start, end, col in reversed(outer):
        lines[start - 1:end] = [textwrap.indent(stub, " " * col) + "\n"]
    return "".join(lines)


def _heading_lines(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True)
                   if _HEADING.match(line) or not line.strip())


def _emptied(value):
    if isinstance(value, dict):
        return {k: _emptied(v) for k, v in value.items()}
    if isinstance(value, list):
        return []
    if isinstance(value, str):
        return ""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return 0
    return value


@operator(name="shape-only", tier=1, family="absence", by_construction=True,
          examples=(
              Example('def f(x):\n    """Doc."""\n    # keep\n    return x + 1\n',
                      'def f(x):\n    """Doc."""\n    # keep\n    pass\n', "a.py"),
              Example("# Title\nbody\n## Links\n- [a](http://a)\n", "# Title\n## Links\n", "a.md"),
              Example("id,name\n1,a\n2,b\n", "id,name\n", "a.csv"),
              Example('{"a": [1, 2], "b": "x"}', '{}', "a.json"),
              Example('{"a": [1, 2], "b": "x"}', '{\n  "a": [],\n  "b": ""\n}\n', "a.json")))
def shape_only(path: str, text: str) -> list[str | None]:
    """Keep the shape, drop the content: bodies that `pass`, headings without bodies, a header
    row without rows, collections emptied (keys kept and not)."""
    kind = kind_of(path)
    if kind == "python":
        try:
            return [stub_bodies(text, "pass"), stub_bodies(text, "raise NotImplementedError")]
        except SyntaxError:
            return []
    if kind == "markdown":
        return [_heading_lines(text)]
    if kind == "csv":
        first = text.splitlines(keepends=True)[:1]
        return ["".join(first)]
    if kind == "json":
        try:
            data = json.loads(text)
        except ValueError:
            return []
        top = "{}" if isinstance(data, dict) else "[]"
        return [top, json.dumps(_emptied(data), indent=2) + "\n"]
    return [text.splitlines(keepends=True)[0]] if text.strip() else []


@operator(name="truncate-half", tier=1, family="structural", by_construction=False,
          examples=(Example("a\nb\nc\nd\n", "a\nb\n"),))
def truncate_half(path: str, text: str) -> list[str | None]:
    """The first half of the lines: a write cut off midway."""
    lines = text.splitlines(keepends=True)
    return ["".join(lines[: len(lines) // 2])] if len(lines) > 1 else []


@operator(name="break-syntax", tier=1, family="structural", kinds=("python", "json"),
          by_construction=True,
          examples=(Example("x = 1\n", "x = 1\n)(\n", "a.py"), Example('{"a": 1}', '{"a": 1', "a.json")))
def break_syntax(path: str, text: str) -> list[str | None]:
    """A file that no longer parses in its own language."""
    if kind_of(path) == "python":
        return [text + ("" if text.endswith("\n") else "\n") + ")(\n"]
    return [text.rstrip()[:-1]] if text.strip() else []


@operator(name="rename-defs", tier=1, family="structural", kinds=("python",), by_construction=False,
          examples=(Example("def area(r):\n    return r\n", "def area_(r):\n    return r\n", "a.py"),))
def rename_defs(path: str, text: str) -> list[str | None]:
    """Every top-level function renamed: the code is there, the entry point is not."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    out = text
    for name in names:
        out = re.sub(rf"\bdef {re.escape(name)}\(", f"def {name}_(", out)
    return [out] if names else []


@operator(name="type-swap", tier=1, family="structural", kinds=("json",), by_construction=False,
          examples=(Example('{"a": 1, "b": 2}', "[\n  1,\n  2\n]\n", "a.json"),))
def type_swap(path: str, text: str) -> list[str | None]:
    """A JSON object replaced by the list of its values: same data, wrong structure."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    return [json.dumps(list(data.values()), indent=2) + "\n"] if isinstance(data, dict) else []


@operator(name="drop-column", tier=1, family="structural", kinds=("csv",), by_construction=False,
          examples=(Example("id,name\n1,a\n", "id\n1\n", "a.csv"),))
def drop_column(path: str, text: str) -> list[str | None]:
    """The last column of every row removed."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or len(rows[0]) < 2:
        return []
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        writer.writerow(row[:-1])
    return [out.getvalue()]


@operator(name="flatten-headings", tier=1, family="structural", kinds=("markdown",),
          by_construction=False,
          examples=(Example("# Title\ntext\n## Usage\nmore\n", "Title\ntext\nUsage\nmore\n", "a.md"),))
def flatten_headings(path: str, text: str) -> list[str | None]:
    """Headings turned into plain lines: the words stay, the structure goes."""
    return [re.sub(r"(?m)^\s{0,3}#{1,6}\s+", "", text)]


OPERATORS: tuple[Operator, ...] = (delete, empty, whitespace, filler, shape_only, truncate_half,
                                   break_syntax, rename_defs, type_swap, drop_column,
                                   flatten_headings)
