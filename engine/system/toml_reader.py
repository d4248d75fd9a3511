"""Parse a TOML document exactly as the standard library's `tomllib` does, faster and smaller.

Why: tomllib is pure Python. A 100,000-node graph.toml (12 MB) costs it ~3 CPU-s and a peak of
~500 MiB of parser bookkeeping; rtoml (Rust) parses the document whole in ~0.6 CPU-s but peaks
as high. Parsed a few hundred top-level tables at a time, it takes less and a few MiB besides
the result (one rtoml call per table cost 100,000 calls and a type walk of every value).

How the answer stays tomllib's:
- rtoml follows TOML 1.1, which tomllib (1.0) refuses in part (\\e and \\xHH escapes, newlines
  and trailing commas in inline tables, times without seconds) and it folds CRLF inside
  multi-line strings. So rtoml reads a document only when none of that can be in it: no
  backslash, no `{`, no carriage return, nothing outside ASCII; and a part is kept only if every
  value in it has a JSON form (a date or time sends the document to tomllib; the values are
  looked at only if the text has a digit, "-" or ":", and a digit in a row).
- The document is cut before every line that starts with `[`; the parts are read `_BATCH` at a
  time. A cut inside a multi-line string or array leaves the batch before it unterminated, so
  rtoml refuses it, or makes a header of a line that is none, which the batch then lacks. Each
  batch must hold exactly its headers' tables (one key per level down to each); the headers must
  be plain `[a.b.c]` keys, none equal to or a prefix of another (so no table is defined twice or
  reopened across parts) and none starting with a key of the part before the first header. Then
  the document is the parts put together in order, which is how tomllib builds it.
- Anything else, and every part rtoml refuses, sends the whole document to tomllib: what is
  accepted, every value and every error message are tomllib's. tests/engine/system/test_toml_reader.py holds
  the two to that (values, types, key order) on spec-like documents and their mutations.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import rtoml

TOMLDecodeError = tomllib.TOMLDecodeError
# What rtoml (TOML 1.1) may read otherwise than tomllib (TOML 1.0): see the module docstring.
# (A character search each: a regex scan of a 12 MB document costs a quarter of a second.)
_TOMLLIB_ONLY_CHARS = "\\{\r"  # and anything outside ASCII
_CUT = re.compile(r"^\[", re.MULTILINE)
_KEY = r"(?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*')"
_HEADER = re.compile(rf"\[[ \t]*({_KEY}(?:[ \t]*\.[ \t]*{_KEY})*)[ \t]*\][ \t]*(?:#[^\n]*)?\n?")
_PART = re.compile(rf"[ \t]*({_KEY})[ \t]*\.?")
_BATCH = 512  # top-level tables per rtoml call: fewer calls, and still a few MiB besides the result


def loads(text: str) -> dict[str, Any]:
    """The table `tomllib.loads(text)` returns, or the `TOMLDecodeError` it raises."""
    if text.isascii() and not any(c in text for c in _TOMLLIB_ONLY_CHARS):
        table = _by_tables(text)
        if table is not None:
            return table
    return tomllib.loads(text)


def _by_tables(text: str) -> dict[str, Any] | None:
    """The document parsed `_BATCH` top-level tables at a time by rtoml, or None when it cannot
    be vouched for (see the module docstring)."""
    cuts = [m.start() for m in _CUT.finditer(text)]
    ends = [*cuts, len(text)]
    plain = _no_dates(text)
    root = _rtoml(text[:ends[0]], plain)
    if root is None:
        return None
    paths: list[tuple[str, ...]] = []
    for start in cuts:
        header = _HEADER.match(text, start)
        if header is None:
            return None
        raw = header.group(1)
        paths.append(tuple(k.strip(" \t") for k in raw.split(".")) if "'" not in raw
                     and '"' not in raw else tuple(_key(m.group(1)) for m in _PART.finditer(raw)))
    ordered = sorted(paths)
    if any(b[:len(a)] == a for a, b in zip(ordered, ordered[1:], strict=False)):  # equal or a prefix
        return None
    if any(p[0] in root for p in paths):
        return None
    leaves: list[dict[str, Any]] = []
    for k in range(0, len(cuts), _BATCH):
        batch = paths[k:k + _BATCH]
        got = _rtoml(text[cuts[k]:ends[k + len(batch)]], plain)
        if got is None or not _holds_exactly(got, batch):
            return None
        for path in batch:
            leaf = got
            for key in path:
                leaf = leaf[key]
            leaves.append(leaf)
    for path, leaf in zip(paths, leaves, strict=True):
        table = root
        for key in path[:-1]:
            table = table.setdefault(key, {})
        table[path[-1]] = leaf
    return root


def _holds_exactly(got: dict[str, Any], paths: list[tuple[str, ...]]) -> bool:
    """`got` holds the tables at `paths` and nothing else (one key per level down to each; no
    path equal to or a prefix of another): so every cut was a real header, and each table is
    what its part alone reads as."""
    tree: dict[str, Any] = {}
    for path in paths:
        t = tree
        for key in path[:-1]:
            t = t.setdefault(key, {})
            if type(t) is not dict:
                return False
        if path[-1] in t:
            return False
        t[path[-1]] = None  # a table of the document: its contents are its part's

    def same(g: Any, want: dict[str, Any]) -> bool:
        return type(g) is dict and g.keys() == want.keys() and all(
            type(g[k]) is dict if w is None else same(g[k], w) for k, w in want.items())
    return same(got, tree)


def _key(raw: str) -> str:
    """A header key as written: bare, or quoted (no escapes: a backslash never gets here)."""
    return raw[1:-1] if raw[0] in "\"'" else raw


def _rtoml(text: str, plain: bool) -> dict[str, Any] | None:
    """rtoml's table, if it holds only tables, arrays, strings, numbers and booleans (`plain`:
    the document can hold no date or time, so nothing to look for)."""
    try:
        table = rtoml.loads(text)
    except (ValueError, TypeError):  # rtoml.TomlParsingError is a ValueError
        return None
    return table if plain or _plain(table) else None


# A TOML date or time has a digit, then "-" or ":", then a digit (1979-05-27, 07:32:00): a
# document without one holds none (found with bytes.translate, faster than a regex scan).
_DATE_MARK = bytes(48 if 48 <= b <= 57 else 45 if b in b"-:" else 32 for b in range(256))


def _no_dates(text: str) -> bool:
    return b"0-0" not in text.encode("ascii").translate(_DATE_MARK)


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
