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
from loopproof.engine.run.judge.pytest_config import engine_ini
from loopproof.engine.run.judge.pytest_gate import PytestGate
from loopproof.engine.run.judge.pytest_tree import check_code, pinned_tests
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
    "pytest": {
        "kind": "",
        "tests": "pinned test files or folders (relative to the spec), laid over a scratch copy "
                 "of the judged tree; their own conftest.py files load, the tree's never",
        "python": "the interpreter that runs them (must have pytest; default python3)",
        "code": "the judged packages or modules as paths in the tree (\"src/mypkg\", "
                "\"mod.py\"): imported from there ahead of any installed copy, and each must "
                "be imported; default: the tree's top-level packages (under src/ if it has "
                "one); [] when the tests only run it as a program",
        "select": "the test IDs that must pass (e.g. FAIL_TO_PASS + PASS_TO_PASS); each must "
                  "be collected from the pinned tests alone (checked at run start); default "
                  "every collected ID",
        "ini": "a pinned pytest.ini ([pytest]: markers, filterwarnings, addopts that load no "
               "code, ...) used instead of the engine's",
        "plugins": "installed pytest plugins allowed to load (distribution or entry point "
                   "names, e.g. \"hypothesis\"); none else loads",
        "test_timeout_s": "seconds one test may run (default 30): past it that test fails "
                          "as \"timeout\" and the others go on; 0: no limit per test (a suite "
                          "that uses SIGALRM itself)",
    },
}
EXAMPLE = ('[node.NAME.gate] with kind = "calls", module = "solution", function = "f", '
           'cases = "cases.jsonl"')


class Table(Protocol):
    """What a node table offers the reader (engine/run/kinds.py's NodeTable)."""

    name: str
    spec_path: Path
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


def _python(node: Table, raw: Mapping[str, Any], spec_dir: Path) -> str:
    """`python`: an installed interpreter, or a path relative to the spec's folder (a venv
    beside it, "../.venv/bin/python"), resolved once per load."""
    name = _text(node, raw, "python", None, 'write python = "python3"', "python3")
    if "/" in name and not Path(name).is_absolute() and (spec_dir / name).is_file():
        name = str((spec_dir / name).absolute())
    return _program(node, name, "python", spec_dir)


def _file(node: Table, raw: Mapping[str, Any], key: str, spec_dir: Path,
          example: str = "cases.jsonl") -> Path:
    v = _text(node, raw, key, None, f'write {key} = "{example}" (relative to the spec)')
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
    python = _python(node, raw, spec_dir)
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
    python = _python(node, raw, spec_dir)
    try:
        laid = pinned_tests(spec_dir, tests)
    except ValueError as exc:
        raise node.error("gate.tests", str(exc), fix) from None
    names = {n.split("/", 1)[0].removesuffix(".py") for n, _ in laid}
    code = None
    if "code" in raw:
        try:
            code = check_code(_strings(node, raw, "code", 'write code = ["src/mypkg"]',
                                       empty=True), names)
        except ValueError as exc:
            raise node.error("gate.code", str(exc), 'name packages as paths in the judged tree '
                             'whose last part is the import name: code = ["src/mypkg"]'
                             ) from None
    select = None
    if "select" in raw:
        select = _strings(node, raw, "select", 'write select = ["tests/test_x.py::test_y"]')
        if len(set(select)) != len(select):
            raise node.error("gate.select", "names a test ID twice", "name each ID once")
    ini_file = _file(node, raw, "ini", spec_dir, "pytest.ini") if "ini" in raw else None
    try:
        ini = engine_ini(ini_file)
    except ValueError as exc:
        raise node.error("gate.ini", f"{ini_file} {exc}", "keep to what loads no code: "
                         "markers, filterwarnings, xfail_strict, addopts such as -r or "
                         "--strict-markers; plugins go in plugins") from None
    plugins = _strings(node, raw, "plugins", 'write plugins = ["hypothesis"]', empty=True) \
        if "plugins" in raw else ()
    test_timeout = _number(node, raw, "test_timeout_s", 30.0)  # 0: none (the suite's own
    # SIGALRM is then its own), the gate's timeout alone
    return PytestGate(python, laid, timeout, code=code, select=select and tuple(select),
                      ini=ini, ini_file=ini_file, plugins=tuple(plugins),
                      test_timeout_s=test_timeout, spec_path=str(node.spec_path),
                      node=node.name)


def _strings(node: Table, raw: Mapping[str, Any], key: str, fix: str, empty: bool = False
             ) -> list[str]:
    v = raw.get(key)
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v) \
            or (not v and not empty):
        raise node.error(f"gate.{key}", f"must be a {'' if empty else 'non-empty '}list of "
                         f"non-empty strings, got {v!r}", fix)
    return list(v)


BUILDERS: dict[str, Callable[[Table, Mapping[str, Any], Path, float], Gate]] = {
    "calls": _calls, "program": _program_gate, "pytest": _pytest}
