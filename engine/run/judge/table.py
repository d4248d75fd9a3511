"""`[node.NAME.gate]` as a table: which judge kind, read and checked field by field.

The argv array form (`gate = ["python3", "check.py"]`) stays the command gate; a table names a
judge kind (`kind = "calls" | "program" | "pytest"`) whose fields are read here. Every problem is
one line naming the spec, the node, the field (`gate.module`, ...) and the fix (exit 2); a case
file's own problems name that file and its line (engine/run/judge/cases.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from loopproof.engine.run.gate import Gate
from loopproof.engine.run.judge.calls import CallsGate
from loopproof.engine.run.judge.cases import (
    CALL_FIELDS,
    JSON_FIELDS,
    TEXT_FIELDS,
    call_row,
    json_row,
    read_cases,
    text_row,
)
from loopproof.engine.run.judge.program import COMPARES, ProgramGate
from loopproof.engine.run.judge.pytest_gate import PytestGate, pinned_tests
from loopproof.engine.system import programs as programs_mod
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.programs import installed
from loopproof.model.judging import Tolerance

DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FIELDS: dict[str, dict[str, str]] = {
    "calls": {"kind": "", "module": "", "function": "", "cases": "", "python": "",
              "compare": "", "rel": "", "abs": ""},
    "program": {"kind": "", "run": "", "cases": "", "compare": ""},
    "pytest": {"kind": "", "tests": "", "python": ""},
}
EXAMPLE = ('[node.NAME.gate] with kind = "calls", module = "solution", function = "f", '
           'cases = "cases.jsonl"')


class Table(Protocol):
    """What a node table offers the reader (engine/run/kinds.py's NodeTable)."""

    name: str
    programs: dict[str, str]

    def error(self, field_name: str, problem: str, fix: str) -> BadInput: ...

    def seconds(self, key: str, default: float = ...) -> float: ...


def gate_from_table(node: Table, raw: Mapping[str, Any], spec_dir: Path) -> Gate:
    """The judge gate `[node.NAME.gate]` declares."""
    kind = raw.get("kind")
    if kind not in FIELDS:
        raise node.error("gate.kind", f"unknown judge kind {kind!r}",
                         f'use one of {sorted(FIELDS)} (or write gate = ["program", ...] for a '
                         "command gate)")
    unknown = sorted(set(raw) - set(FIELDS[kind]))
    if unknown:
        raise node.error(f"gate.{unknown[0]}", f"is not a field of a {kind!r} gate",
                         f"use only {', '.join(FIELDS[kind])}")
    timeout = node.seconds("gate_timeout_s")
    return BUILDERS[kind](node, raw, spec_dir, timeout)


def _text(node: Table, raw: Mapping[str, Any], key: str, rule: re.Pattern[str] | None,
          fix: str, default: str | None = None) -> str:
    v = raw.get(key, default)
    if v is None:
        raise node.error(f"gate.{key}", "is missing", fix)
    if not isinstance(v, str) or not v or (rule is not None and not rule.fullmatch(v)):
        raise node.error(f"gate.{key}", f"is not valid here: {v!r}", fix)
    return v


def _program(node: Table, name: str, key: str, spec_dir: Path) -> str:
    """`name` resolved once per load like a command's program (engine/system/programs.py)."""
    if name not in node.programs:
        try:
            node.programs[name] = programs_mod.resolve(name, spec_dir)
        except programs_mod.ProgramNotFound:
            raise node.error(f"gate.{key}", f"program {name!r} is not on PATH or under "
                             f"{spec_dir}", "give an installed program or a path relative to "
                             "the spec's folder") from None
    return node.programs[name]


def _file(node: Table, raw: Mapping[str, Any], key: str, spec_dir: Path) -> Path:
    v = _text(node, raw, key, None, f'write {key} = "cases.jsonl" (relative to the spec)')
    p = Path(v) if Path(v).is_absolute() else spec_dir / v
    if not p.is_file():
        raise node.error(f"gate.{key}", f"{p} is not a file",
                         "name an existing file relative to the spec's folder")
    return Path(p.absolute())


def _number(node: Table, raw: Mapping[str, Any], key: str, default: float) -> float:
    v = raw.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise node.error(f"gate.{key}", f"must be a number >= 0, got {v!r}", f"write {key} = "
                         f"{default:g}")
    return float(v)


def _calls(node: Table, raw: Mapping[str, Any], spec_dir: Path, timeout: float) -> Gate:
    module = _text(node, raw, "module", DOTTED, 'write module = "solution" (importable from '
                   "the judged tree's root)")
    function = _text(node, raw, "function", NAME, 'write function = "name_of_the_function"')
    python = _program(node, _text(node, raw, "python", None, 'write python = "python3"',
                                  "python3"), "python", spec_dir)
    compare = _text(node, raw, "compare", None, 'write compare = "exact" or "approx"', "exact")
    if compare not in ("exact", "approx"):
        raise node.error("gate.compare", f"must be \"exact\" or \"approx\", got {compare!r}",
                         'write compare = "exact" (or "approx" for floats)')
    if compare == "exact" and ("rel" in raw or "abs" in raw):
        raise node.error("gate.rel" if "rel" in raw else "gate.abs", "applies only to "
                         'compare = "approx"', 'remove it, or write compare = "approx"')
    tolerance = (Tolerance(_number(node, raw, "rel", 1e-9), _number(node, raw, "abs", 1e-12))
                 if compare == "approx" else None)
    path = _file(node, raw, "cases", spec_dir)
    cases = read_cases(path, CALL_FIELDS, "cases", call_row)
    return CallsGate(python, module, function, path, cases, tolerance, timeout)


def _run_argv(node: Table, raw: Mapping[str, Any], spec_dir: Path) -> tuple[str, ...]:
    run = raw.get("run")
    if not isinstance(run, list) or not run or not all(isinstance(a, str) and a for a in run):
        raise node.error("gate.run", f"must be a non-empty list of non-empty strings, got "
                         f"{run!r}", 'write run = ["python3", "solution.py"] (its working '
                         "folder is a copy of the judged tree)")
    first = run[0] if Path(run[0]).is_absolute() or not (spec_dir / run[0]).is_file() \
        else str((spec_dir / run[0]).absolute())  # a file beside the spec, as argv items are
    program = _program(node, first, "run", spec_dir)
    if not installed(program):  # a file of the gate's: hidden from the judged code
        raise node.error("gate.run", f"{run[0]!r} resolves to {program}, not an installed "
                         "program", 'start an installed interpreter or tool and name the '
                         'judged program after it, relative to the judged tree: run = '
                         '["python3", "solution.py"]')
    return (program, *run[1:])


def _program_gate(node: Table, raw: Mapping[str, Any], spec_dir: Path, timeout: float) -> Gate:
    run = _run_argv(node, raw, spec_dir)
    compare = _text(node, raw, "compare", None, 'write compare = "json"', "json")
    if compare not in COMPARES:
        raise node.error("gate.compare", f"must be one of {list(COMPARES)}, got {compare!r}",
                         'write compare = "json" (cases {"input": v, "output": v}) or "exact" '
                         '/ "lines" (cases {"stdin": "...", "stdout": "..."})')
    path = _file(node, raw, "cases", spec_dir)
    shape, row = (JSON_FIELDS, json_row) if compare == "json" else (TEXT_FIELDS, text_row)
    return ProgramGate(run, path, read_cases(path, shape, "cases", row), compare, timeout)


def _pytest(node: Table, raw: Mapping[str, Any], spec_dir: Path, timeout: float) -> Gate:
    tests = raw.get("tests")
    fix = 'write tests = ["test_solution.py"] (files or folders relative to the spec)'
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t
                                                           for t in tests):
        raise node.error("gate.tests", f"must be a non-empty list of paths, got {tests!r}", fix)
    python = _program(node, _text(node, raw, "python", None, 'write python = "python3"',
                                  "python3"), "python", spec_dir)
    try:
        laid = pinned_tests(spec_dir, tests)
    except ValueError as exc:
        raise node.error("gate.tests", str(exc), fix) from None
    return PytestGate(python, laid, timeout)


BUILDERS: dict[str, Callable[[Table, Mapping[str, Any], Path, float], Gate]] = {
    "calls": _calls, "program": _program_gate, "pytest": _pytest}
