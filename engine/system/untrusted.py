"""Values a worker hands the engine, made safe to record.

Why: a ledger record must be canonical JSON in valid UTF-8, with finite floats and 64-bit
integers (engine/record/ledger.py refuses anything else, and must). A worker's claims, its meter
labels and facts, and the text of its exceptions are whatever the worker chose: a lone surrogate,
10**400, NaN, a list nested 100,000 deep, a 50 MB string, an object whose repr raises. Recording
any of those as given would crash the engine mid-attempt, and since the attempt's end is then
never recorded, every resume would re-run it and crash again. So each such value passes through
`record_value` (or `text`) first: the result is always recordable and always small.
"""

from __future__ import annotations

import math
from typing import Any

MAX_TEXT = 4000        # characters of one string kept (the tail is cut)
MAX_ITEMS = 200        # entries of one list or dict kept
MAX_DEPTH = 32         # nesting kept
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


def text(value: object, limit: int = MAX_TEXT) -> str:
    """`value` as valid UTF-8 text of at most `limit` characters: a str is kept (lone surrogates
    become backslash escapes), anything else is its `str()` (or a placeholder if that raises)."""
    if not isinstance(value, str):
        try:
            value = str(value)
        except Exception:  # a worker's __str__ may raise
            value = f"<{type(value).__name__} that cannot be printed>"
    s = value.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(s) > limit:
        s = s[:limit] + f"... ({len(s) - limit} more characters)"
    return s


def _repr(value: object) -> str:
    try:
        return text(repr(value), 200)
    except Exception:  # a worker's __repr__ may raise
        return f"<{type(value).__name__} that cannot be printed>"


def record_value(value: object, depth: int = 0) -> Any:
    """A JSON value the ledger can hold that says what `value` was: text as `text`, integers
    beyond 64 bits and non-finite floats as their repr, containers cut to MAX_ITEMS entries and
    MAX_DEPTH levels, anything else as its repr."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value) if _INT_MIN <= value <= _INT_MAX else _repr(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return text(value)
    if depth >= MAX_DEPTH and isinstance(value, list | tuple | dict):
        return f"<{type(value).__name__} nested more than {MAX_DEPTH} levels>"
    if isinstance(value, list | tuple):
        out = [record_value(v, depth + 1) for v in list(value)[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            out.append(f"... {len(value) - MAX_ITEMS} more")
        return out
    if isinstance(value, dict):
        items = list(value.items())
        out_d = {text(k, 200): record_value(v, depth + 1) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out_d["..."] = f"{len(items) - MAX_ITEMS} more"
        return out_d
    return _repr(value)


def amount(value: object) -> float | None:
    """A worker's spend amount as a finite float >= 0, or None (negative, NaN, infinite, too
    large for a float, a bool, a string, anything else)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) and f >= 0 else None
