"""What crosses back from a process that ran judged code: strict JSON lines, parsed here.

Why strict: the judged code shares its process with the harness, so anything it can write, it
may write. The engine therefore trusts no object and no exit status, only bytes it parses
itself: one JSON object per line, `{"case": K, "value": V}` or `{"case": K, "raised": "..."}` (K a case number or a
test ID),
with JSON's types exactly (no NaN, no Infinity, no duplicate keys), at most `MAX_LINE` bytes a
line, nested at most `MAX_DEPTH` deep. A line that is not such an object, a case number that
was not asked or comes twice, makes the whole stream `garbled`: every case of it then has no
result (the judged code wrote on the results channel; it cannot have meant well).

The `pytest` harness (engine/run/judge/pytest_harness.py) keeps four integer cases of its own
beside the test IDs: `IDS` (a collection run's collected test IDs, lists of strings, one or more lines),
`EXCUSED` (those of them whose own skip, skipif or xfail mark holds at that collection, a list
of strings), `PROBLEM` (what keeps the pinned tests from collecting, a string), `TOOLS` (the import names of
pytest, its plugins and their requirements, a list of strings) and `LOADED`,
written once at
the end of a run: `{"code": {NAME: FILE | null}, "modules": {MODULE: FILE}}`, the absolute file
(in the scratch copy, or wherever it came from) each judged import name was loaded from (null:
never imported; for a name whose import failed, the place it was sought) and every module the
run loaded from the scratch copy, the laid tests and the canary among them. The engine reads it
as any case (once, strictly); the verdict's facts keep it tree-relative as `code` and `loaded`
(the judged files alone), so the audit can place mutants only where the gate's run looked.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from loopproof.model.judging import CaseReport, NoResult, Returned, is_json_value

MAX_LINE = 1 << 20  # bytes of one result line
MAX_STREAM = 16 << 20  # bytes of all result lines of one batch
MAX_DEPTH = 64
IDS, PROBLEM, LOADED, EXCUSED, TOOLS = 0, 1, 2, 3, 4  # the pytest harness's own


class NotStrict(ValueError):
    """Bytes that are not one strict JSON value."""


def _constant(name: str) -> Any:
    raise NotStrict(f"{name} is not a JSON value")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise NotStrict(f"duplicate key {k[:40]!r}")
        out[k] = v
    return out


def _depth(v: Any) -> int:
    depth, frontier = 0, [v]
    while frontier:
        depth += 1
        if depth > MAX_DEPTH:
            return depth
        nxt: list[Any] = []
        for x in frontier:
            if type(x) is list:
                nxt.extend(x)
            elif type(x) is dict:
                nxt.extend(x.values())
        frontier = nxt
    return depth


def strict_json(text: str | bytes) -> Any:
    """One JSON value, strictly (see the module's docstring); NotStrict otherwise."""
    if len(text) > MAX_LINE:
        raise NotStrict(f"longer than {MAX_LINE} bytes")
    try:
        value = json.loads(text, parse_constant=_constant, object_pairs_hook=_pairs)
    except NotStrict:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, too deep
        raise NotStrict(f"not JSON: {str(exc)[:80]}") from None
    if _depth(value) > MAX_DEPTH:
        raise NotStrict(f"nested deeper than {MAX_DEPTH}")
    if not is_json_value(value):
        raise NotStrict("not a plain JSON value")
    return value


@dataclass(frozen=True)
class Stream:
    """The reports of one batch, and why the stream was refused whole (`garbled`)."""

    reports: dict[Hashable, CaseReport]
    garbled: str = ""


def read_stream(data: bytes, asked: Iterable[Hashable]) -> Stream:
    """The case reports in `data` (the harness's results channel) for the cases `asked`."""
    asked = set(asked)
    reports: dict[Hashable, CaseReport] = {}
    if len(data) > MAX_STREAM:
        return Stream({}, f"more than {MAX_STREAM} bytes of results")
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for n, line in enumerate(lines, 1):
        try:
            row = strict_json(line)
        except NotStrict as exc:
            return Stream({}, f"result line {n}: {exc}")
        if type(row) is not dict or type(row.get("case")) not in (int, str) or len(row) != 2 \
                or not ("value" in row or type(row.get("raised")) is str):
            return Stream({}, f"result line {n}: not a case report")
        case = row["case"]
        if case not in asked or case in reports:
            return Stream({}, f"result line {n}: case {case} "
                              f"{'reported twice' if case in reports else 'was not asked'}")
        reports[case] = (Returned(row["value"]) if "value" in row
                         else NoResult(f"raised {row['raised'][:200]}"))
    return Stream(reports)
