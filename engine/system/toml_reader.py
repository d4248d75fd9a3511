"""Parse a TOML document exactly as the standard library's `tomllib` does, faster and smaller.

Why: tomllib is pure Python. A 100,000-node graph.toml (12 MB) costs it ~3 CPU-s and a peak of
~500 MiB of parser bookkeeping; rtoml (Rust) parses the document whole in ~0.6 CPU-s but peaks
as high. Parsed one top-level table at a time, it takes ~0.35 CPU-s and a few MiB besides the
result.

How the answer stays tomllib's:
- rtoml follows TOML 1.1, which tomllib (1.0) refuses in part (\\e and \\xHH escapes, newlines
  and trailing commas in inline tables, times without seconds) and it folds CRLF inside
  multi-line strings. So rtoml reads a document only when none of that can be in it: no
  backslash, no `{`, no carriage return, nothing outside ASCII; and a part is kept only if every
  value in it has a JSON form (a date or time sends the document to tomllib).
- The document is cut before every line that starts with `[`. A cut inside a multi-line string
  or array leaves the part before it unterminated, so rtoml refuses it. Each part must hold
  exactly its header's table (one key per level down to it); the headers must be plain
  `[a.b.c]` keys, none equal to or a prefix of another (so no table is defined twice or reopened
  across parts) and none starting with a key of the part before the first header. Then the
  document is the parts put together in order, which is how tomllib builds it.
- Anything else, and every part rtoml refuses, sends the whole document to tomllib: what is
  accepted, every value and every error message are tomllib's. tests/test_toml_reader.py holds
  the two to that (values, types, key order) on spec-like documents and their mutations.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import rtoml

TOMLDecodeError = tomllib.TOMLDecodeError
# What rtoml (TOML 1.1) may read otherwise than tomllib (TOML 1.0): see the module docstring.
_TOMLLIB_ONLY = re.compile(r"[\\{\r]|[^\x00-\x7f]")
_CUT = re.compile(r"^\[", re.MULTILINE)
_KEY = r"(?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*')"
_HEADER = re.compile(rf"\[[ \t]*({_KEY}(?:[ \t]*\.[ \t]*{_KEY})*)[ \t]*\][ \t]*(?:#[^\n]*)?\n?")
_PART = re.compile(rf"[ \t]*({_KEY})[ \t]*\.?")


def loads(text: str) -> dict[str, Any]:
    """The table `tomllib.loads(text)` returns, or the `TOMLDecodeError` it raises."""
    if _TOMLLIB_ONLY.search(text) is None:
        table = _by_tables(text)
        if table is not None:
            return table
    return tomllib.loads(text)


def _by_tables(text: str) -> dict[str, Any] | None:
    """The document parsed one top-level table at a time by rtoml, or None when it cannot be
    vouched for (see the module docstring)."""
    cuts = [m.start() for m in _CUT.finditer(text)]
    ends = [*cuts, len(text)]
    root = _rtoml(text[:ends[0]])
    if root is None:
        return None
    paths: list[tuple[str, ...]] = []
    leaves: list[dict[str, Any]] = []
    for start, end in zip(cuts, ends[1:], strict=True):
        part = text[start:end]
        header = _HEADER.match(part)
        got = _rtoml(part) if header is not None else None
        if got is None:
            return None
        path = tuple(_key(m.group(1)) for m in _PART.finditer(header.group(1)))
        for key in path:  # exactly the header's table, one key per level
            if type(got) is not dict or len(got) != 1 or key not in got:
                return None
            got = got[key]
        if type(got) is not dict:
            return None
        paths.append(path)
        leaves.append(got)
    ordered = sorted(paths)
    if any(b[:len(a)] == a for a, b in zip(ordered, ordered[1:], strict=False)):  # equal or a prefix
        return None
    if any(p[0] in root for p in paths):
        return None
    for path, leaf in zip(paths, leaves, strict=True):
        table = root
        for key in path[:-1]:
            table = table.setdefault(key, {})
        table[path[-1]] = leaf
    return root


def _key(raw: str) -> str:
    """A header key as written: bare, or quoted (no escapes: a backslash never gets here)."""
    return raw[1:-1] if raw[0] in "\"'" else raw


def _rtoml(text: str) -> dict[str, Any] | None:
    try:
        table = rtoml.loads(text)
    except (ValueError, TypeError):  # rtoml.TomlParsingError is a ValueError
        return None
    return table if _plain(table) else None


def _plain(value: Any) -> bool:
    """Only tables, arrays, strings, numbers and booleans (no dates or times)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
        elif type(v) not in (str, int, float, bool):
            return False
    return True
