"""Case files of the `calls` and `program` judge kinds: one JSON object a line.

Why read at load: a case line the engine cannot use is a bad spec, refused before anything is
written with one line naming the file, the line, the field and the fix (exit 2). The file is a
gate file: hashed at run start, re-checked before every gate run, hidden from the worker and
from the judged code (engine/run/confine.py), so what is read here is what every verdict used.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.run.judge.wire import NotStrict, strict_json
from loopproof.engine.system.errors import BadInput

MAX_CASE_FILE = 64 << 20
MAX_CASES = 100_000

CALL_FIELDS = {"args": "a list", "kwargs": "an object (optional)", "expect": "a JSON value"}
JSON_FIELDS = {"input": "a JSON value (sent as JSON on stdin)",
               "output": "a JSON value (its stdout, parsed as JSON)"}
TEXT_FIELDS = {"stdin": "a string (sent as is)", "stdout": "a string (its stdout, compared)"}


@dataclass(frozen=True)
class Case:
    """One case: what the judged code gets (`given`) and what it must give back (`expect`);
    `line` is where the file holds it, for details."""

    line: int
    given: Any
    expect: Any


def read_cases(path: Path, shape: dict[str, str], where: str,
               check: Callable[[dict[str, Any]], tuple[Any, Any]]) -> tuple[Case, ...]:
    """The cases of `path`, each line an object with the fields of `shape` (all required but
    ones described as optional); `check(row)` turns a row into (given, expect) or raises
    ValueError naming the field. `where` names the gate table in errors."""
    def bad(field: str, problem: str, fix: str) -> BadInput:
        return BadInput(str(path), field, problem, fix)

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise bad(where, "is not a regular file", "name a file of cases, one JSON object a line")
        if st.st_size > MAX_CASE_FILE:
            raise bad(where, f"is larger than {MAX_CASE_FILE} bytes", "split the cases")
        raw = path.read_bytes()
    except OSError as exc:
        raise bad(where, f"cannot read it: {exc.strerror or exc}",
                  "name an existing case file relative to the spec's folder") from None
    example = "{" + ", ".join(f'"{k}": ...' for k in shape) + "}"
    cases: list[Case] = []
    for n, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            row = strict_json(line)
        except NotStrict as exc:
            raise bad(f"line {n}", f"is not one strict JSON object ({exc})",
                      f"write one object a line, e.g. {example}") from None
        if type(row) is not dict:
            raise bad(f"line {n}", "is not a JSON object", f"write e.g. {example}")
        unknown = sorted(set(row) - set(shape))
        if unknown:
            raise bad(f"line {n}, field {unknown[0]!r}", "is not a field of a case",
                      f"use only {', '.join(shape)}")
        for key, what in shape.items():
            if key not in row and "optional" not in what:
                raise bad(f"line {n}, field {key!r}", "is missing", f"add {key!r}: {what}")
        try:
            given, expect = check(row)
        except ValueError as exc:
            field, problem = str(exc).split(": ", 1)
            raise bad(f"line {n}, field {field!r}", problem,
                      f"make {field!r} {shape[field]}") from None
        cases.append(Case(n, given, expect))
        if len(cases) > MAX_CASES:
            raise bad(f"line {n}", f"more than {MAX_CASES} cases", "split the cases")
    if not cases:
        raise bad(where, "holds no case", f"write at least one line, e.g. {example}")
    return tuple(cases)


def call_row(row: dict[str, Any]) -> tuple[Any, Any]:
    """A `calls` case: ([args, kwargs], expect)."""
    if type(row["args"]) is not list:
        raise ValueError("args: must be a list of arguments")
    kwargs = row.get("kwargs", {})
    if type(kwargs) is not dict:
        raise ValueError("kwargs: must be an object of keyword arguments")
    return [row["args"], kwargs], row["expect"]


def json_row(row: dict[str, Any]) -> tuple[Any, Any]:
    """A `program` case with compare = "json": (input, output)."""
    return row["input"], row["output"]


def text_row(row: dict[str, Any]) -> tuple[Any, Any]:
    """A `program` case with compare = "exact" or "lines": (stdin, stdout), both strings."""
    for key in ("stdin", "stdout"):
        if type(row[key]) is not str:
            raise ValueError(f"{key}: must be a string")
    return row["stdin"], row["stdout"]
