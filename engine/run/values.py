"""What a graph.toml value may be: numbers within ranges, one-component node names, strings
without NUL bytes, paths that may be too long to exist.

Why a module of its own: every number the spec gives reaches the model's bounds and the ledger
(whose integers are 64-bit and whose floats must be finite), and every node name becomes a
folder under the run's folders. A careless or hostile spec must be refused here, with one line
naming the field, before anything is written: not by an overflow, a traceback or a deleted
folder later.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.fields import short

# Ranges: wide enough for any real run, narrow enough that every bound stays a finite float and
# every count a 64-bit integer in the ledger.
MAX_SPEND = 1e12        # spend units (budgets, ceilings, eval_reserve)
MAX_COUNT = 1_000_000   # attempts per activation, repair budget
MAX_SECONDS = 1e7       # wall-clock limits (about 115 days)
MIN_PRICE, MAX_PRICE = 1e-9, 1e9
# A graph.toml larger than this is refused unread: a hand-written one is a few lines, so a larger
# file is almost surely the wrong one. A generated graph of many thousand nodes (the benchmarks'
# 100,000) asks for more on the command line, never in the file it limits.
MAX_SPEC_BYTES = 1 << 20
SIZE_FLAG = "--max-spec-bytes"
# A node name is one path component: letters, digits, "_", "-" and ".", not starting with "."
# (so never "." or ".."), at most 64 characters.
NAME_RULE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")
NAME_FIX = ("use letters, digits, '_', '-' and '.', not starting with '.', at most 64 "
            "characters")


def exists(p: Path) -> bool:
    """Does `p` exist? False also when it cannot be a path at all (too long, a NUL byte): an
    inline `sh -c` script is a literal, not a file."""
    try:
        os.stat(p)
    except (OSError, ValueError):
        return False
    return True


def name_problem(name: object) -> str | None:
    """Why `name` cannot be a node name (None: it can)."""
    if isinstance(name, str) and NAME_RULE.fullmatch(name):
        return None
    if not isinstance(name, str) or not name:
        return "is not a safe node name (empty)"
    if len(name) > 64:
        return f"is not a safe node name ({len(name)} characters, more than 64)"
    if name.startswith("."):
        return "is not a safe node name (it starts with '.')"
    odd = next(ch for ch in name if not NAME_RULE.fullmatch("a" + ch))
    return f"is not a safe node name (it holds {odd!r})"


def file_or_none(p: Path) -> Path | None:
    """`p` resolved, if it is an existing regular file (None for anything else, including a
    path that cannot exist: too long, a NUL byte)."""
    try:
        r = p.resolve()
        return r if stat.S_ISREG(os.stat(r).st_mode) else None
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop (3.11)
        return None


def _no_json_form(table: Any) -> str | None:
    """The dotted name of the first date, time, inf or nan in `table` (None: none found), so
    the error names the field, not just the file."""
    stack: list[tuple[str, Any]] = [("", table)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{where}.{k}" if where else str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
        elif not isinstance(v, (str, int, bool, float)) or (isinstance(v, float)
                                                            and not math.isfinite(v)):
            return where
    return None


# In a table's JSON text (ASCII: json.dumps escapes the rest) a NUL byte in a key or a string is
# escaped as \u0000, and an integer beyond 64 bits is a run of 19 digits or more (a float's repr
# may hold such a run too, so a hit means "look", not "refuse"). Neither: nothing for the walk
# to find. Digits are mapped to "0" and all else to " " (bytes.translate: a regex scan of a
# 12 MB text is slower than the walk it spares).
_DIGITS_AS_ZERO = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_RUN = b"0" * 19


def _nothing_to_find(text: str) -> bool:
    return "\\u0000" not in text and _LONG_RUN not in text.encode("ascii").translate(
        _DIGITS_AS_ZERO)


def check_table(table: Any, file: str) -> None:
    """TOML dates, times, inf and nan have no canonical JSON form, integers beyond 64 bits do
    not survive the ledger's reader, and a NUL byte cannot be part of a path or an argument:
    the ledger stores the spec, and the engine builds paths and commands from it. (The walk
    that names the field runs only when the JSON text shows something it may find: it costs
    seconds on a 100,000-node spec.)"""
    try:
        text = json.dumps(table, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        where = _no_json_form(table)
        raise BadInput(file, short(where) if where else "(toml)",
                       f"{'is' if where else 'a value has'} no JSON form ({exc})",
                       "use finite numbers, strings, booleans, lists and tables only "
                       "(no inf, nan, dates or times)") from None
    if _nothing_to_find(text):
        return
    stack: list[tuple[str, Any]] = [("", table)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{where}.{k}" if where else str(k), x) for k, x in v.items())
            bad_keys = [k for k in v if "\x00" in str(k)]
            if bad_keys and where != "node":  # node names: the name rule says what is wrong
                raise BadInput(file, short(where or "(top level)"), "a key holds a NUL byte",
                               "remove the \\u0000 escape from the key")
        elif isinstance(v, list):
            stack.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
        elif isinstance(v, str) and "\x00" in v:
            raise BadInput(file, short(where), "holds a NUL byte", "remove the \\u0000 escape")
        elif isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < (1 << 63):
            raise BadInput(file, short(where), f"integer {short(v)} does not fit 64 bits",
                           "use a smaller number")


def add_size_argument(parser: argparse.ArgumentParser) -> None:
    """`--max-spec-bytes N` for a command that reads a graph.toml (run, bound, audit)."""
    parser.add_argument(SIZE_FLAG, type=_size, default=MAX_SPEC_BYTES, metavar="BYTES",
                        dest="max_spec_bytes",
                        help=f"refuse a graph.toml larger than this (default {MAX_SPEC_BYTES}, "
                             "1 MiB; raise it only for a generated graph of many thousand nodes)")


def _size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of bytes")
    return value
