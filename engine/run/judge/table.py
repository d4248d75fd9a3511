"""`[node.NAME.gate]` as a table: which judge kind, and its fields, declared and read.

The argv array form (`gate = ["python3", "check.py"]`) stays the command gate; a table names a
judge kind (`kind = "calls" | "program" | "pytest"`) whose fields are declared here, one `Table`
per kind (engine/system/fields.py; docs/gates.md prints them). Every problem is one line naming
the spec, the node, the field (`gate.module`, ...) and the fix (exit 2); a case file's own
problems name that file and its line (engine/run/judge/cases.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
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
from loopproof.engine.system.fields import (
    ABSENT,
    Field,
    Refusal,
    Verdict,
    anything,
    number,
    one_of,
    strings,
    text,
)
from loopproof.engine.system.fields import Table as FieldTable
from loopproof.engine.system.programs import installed
from loopproof.model.judging import Tolerance

DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _kind_field(kind: str) -> Field:
    return Field("kind", f'`"{kind}"`', "the judge kind", anything, f'"{kind}"')


def _cases(doc: str) -> Field:
    return Field("cases", "a path relative to the spec", doc, text(), '"cases.jsonl"',
                 fix='write cases = "cases.jsonl" (relative to the spec)')


def _unique(v: Any) -> Verdict:
    if (why := strings()(v)) is not None:
        return why
    return Refusal("names a test ID twice", "name each ID once") if len(set(v)) != len(v) else None


PYTHON = Field("python", "an installed program, or a path relative to the spec",
               "the interpreter the judged code runs under; resolved and pinned like a program",
               text(), '"python3"', default="python3")
TABLES: dict[str, FieldTable] = {
    "calls": FieldTable('[node.NAME.gate] kind = "calls"', (
        _kind_field("calls"),
        Field("module", "a dotted module name", "the module to import, from the judged tree's "
              "root", text(DOTTED), '"solution"',
              fix='write module = "solution" (importable from the judged tree\'s root)'),
        Field("function", "a name", "the function called on each case", text(NAME), '"f"',
              fix='write function = "name_of_the_function"'),
        _cases('each line {"args": [...], "kwargs": {...}, "expect": value}'),
        PYTHON,
        Field("compare", '`"exact"` or `"approx"`', 'how a result meets its case: "approx" '
              "compares floats by math.isclose with rel and abs", one_of(("exact", "approx")),
              fix='write compare = "exact" (or "approx" for floats)', default="exact"),
        Field("rel", "a number >= 0", 'relative tolerance of compare = "approx"',
              number(0.0, math.inf), "1e-9", default=ABSENT, shown_default="`1e-9`"),
        Field("abs", "a number >= 0", 'absolute tolerance of compare = "approx"',
              number(0.0, math.inf), "1e-12", default=ABSENT, shown_default="`1e-12`"),
    ), prefix="gate."),
    "program": FieldTable('[node.NAME.gate] kind = "program"', (
        _kind_field("program"),
        Field("run", "a non-empty list of strings", "an installed program (an interpreter, a "
              "tool), then the judged program after it, relative to the judged tree",
              strings(), '["python3", "solution.py"]',
              fix='write run = ["python3", "solution.py"] (its working folder is a copy of the '
                  "judged tree)"),
        _cases('each line {"input": v, "output": v} (json) or {"stdin": "...", "stdout": '
               '"..."} (exact, lines)'),
        Field("compare", " or ".join(f'`"{c}"`' for c in COMPARES), "how a case's stdout is "
              "read: parsed strictly as JSON, compared as text, or line by line without "
              "trailing whitespace", one_of(COMPARES), fix='write compare = "json" (cases '
              '{"input": v, "output": v}) or "exact" / "lines" (cases {"stdin": "...", '
              '"stdout": "..."})', default="json"),
    ), prefix="gate."),
    "pytest": FieldTable('[node.NAME.gate] kind = "pytest"', (
        _kind_field("pytest"),
        Field("tests", "a non-empty list of paths relative to the spec", "pinned test files or "
              "folders, laid over a scratch copy of the judged tree; their own conftest.py "
              "files load, the tree's never", strings(what="paths"), '["test_solution.py"]',
              fix='write tests = ["test_solution.py"] (files or folders relative to the spec)'),
        replace(PYTHON, doc="the interpreter that runs them (must have pytest)"),
        Field("code", "a list of paths in the judged tree", 'the judged packages or modules '
              '("src/mypkg", "mod.py"); the last part is the import name; each must be '
              "imported by the run, from the tree, ahead of any installed copy. Not a standard "
              "module's name, pytest's, or a pinned folder's. `[]`: the tests only run it as a "
              "program", strings(empty=True), '["src/mypkg"]', default=ABSENT,
              shown_default="the tree's top-level packages (under src/ if it has one)"),
        Field("select", "a list of test IDs", "the test IDs that must pass (SWE-bench's "
              "FAIL_TO_PASS + PASS_TO_PASS); only they run. Each must be collected from the "
              "pinned tests alone: checked at run start", _unique,
              '["tests/test_x.py::test_y"]', default=ABSENT,
              shown_default="every ID collected from the pinned tests"),
        Field("ini", "a path relative to the spec", "a pinned pytest.ini (a gate file: hashed, "
              "hidden) used instead of the engine's: markers, filterwarnings, xfail_strict, "
              "addopts that load no code (-q, -r, --strict-markers, -p no:NAME, ...); "
              "pythonpath, -p NAME, --pyargs, -o, -c, --rootdir, --confcutdir, --import-mode "
              "are refused", text(), '"pytest.ini"',
              fix='write ini = "pytest.ini" (relative to the spec)', default=ABSENT,
              shown_default="the engine's"),
        Field("plugins", "a list of names", 'installed pytest plugins allowed to load, by '
              'distribution or entry point name ("hypothesis", "pytest-asyncio"); none else '
              "loads; one not installed is refused at run start", strings(empty=True),
              '["hypothesis"]', default=ABSENT, shown_default="none"),
        Field("test_timeout_s", "seconds >= 0", "seconds one test may run: past it the test "
              "gets SIGALRM and fails as timeout, and the next one runs; 0: no limit per test "
              "(a suite that uses SIGALRM itself). The node's gate_timeout_s bounds the whole",
              number(0.0, math.inf), "30", default=30.0),
    ), prefix="gate."),
}
FIELDS = {kind: tuple(t.by_name) for kind, t in TABLES.items()}  # kind -> its field names


class Table(Protocol):
    """What a node table offers the reader (engine/run/kinds.py's NodeTable)."""

    name: str
    spec_path: Path
    programs: dict[str, str]
    values: Mapping[str, Any]

    def error(self, field_name: str, problem: str, fix: str) -> BadInput: ...


def gate_from_table(node: Table, raw: Mapping[str, Any], spec_dir: Path) -> Gate:
    """The judge gate `[node.NAME.gate]` declares."""
    kind = raw.get("kind")
    if kind not in TABLES:
        raise node.error("gate.kind", f"unknown judge kind {kind!r}",
                         f'use one of {sorted(TABLES)} (or write gate = ["program", ...] for a '
                         "command gate)")
    values = TABLES[kind].read(raw, node.error, title=f"[node.{node.name}.gate]")
    return BUILDERS[kind](node, values, spec_dir, float(node.values["gate_timeout_s"]))


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


def _python(node: Table, v: Mapping[str, Any], spec_dir: Path) -> str:
    """`python`: an installed interpreter, or a path relative to the spec's folder (a venv
    beside it, "../.venv/bin/python"), resolved once per load."""
    name = v["python"]
    if "/" in name and not Path(name).is_absolute() and (spec_dir / name).is_file():
        name = str((spec_dir / name).absolute())
    return _program(node, name, "python", spec_dir)


def _file(node: Table, v: Mapping[str, Any], key: str, spec_dir: Path) -> Path:
    p = Path(v[key]) if Path(v[key]).is_absolute() else spec_dir / v[key]
    if not p.is_file():
        raise node.error(f"gate.{key}", f"{p} is not a file",
                         "name an existing file relative to the spec's folder")
    return Path(p.absolute())


def _calls(node: Table, v: Mapping[str, Any], spec_dir: Path, timeout: float) -> Gate:
    python = _python(node, v, spec_dir)
    if v["compare"] == "exact" and ("rel" in v or "abs" in v):
        raise node.error("gate.rel" if "rel" in v else "gate.abs", "applies only to "
                         'compare = "approx"', 'remove it, or write compare = "approx"')
    tolerance = (Tolerance(float(v.get("rel", 1e-9)), float(v.get("abs", 1e-12)))
                 if v["compare"] == "approx" else None)
    path = _file(node, v, "cases", spec_dir)
    cases = read_cases(path, CALL_FIELDS, "cases", call_row)
    return CallsGate(python, v["module"], v["function"], path, cases, tolerance, timeout)


def _run_argv(node: Table, run: list[str], spec_dir: Path) -> tuple[str, ...]:
    first = run[0] if Path(run[0]).is_absolute() or not (spec_dir / run[0]).is_file() \
        else str((spec_dir / run[0]).absolute())  # a file beside the spec, as argv items are
    program = _program(node, first, "run", spec_dir)
    if not installed(program):  # a file of the gate's: hidden from the judged code
        raise node.error("gate.run", f"{run[0]!r} resolves to {program}, not an installed "
                         "program", 'start an installed interpreter or tool and name the '
                         'judged program after it, relative to the judged tree: run = '
                         '["python3", "solution.py"]')
    return (program, *run[1:])


def _program_gate(node: Table, v: Mapping[str, Any], spec_dir: Path, timeout: float) -> Gate:
    run = _run_argv(node, v["run"], spec_dir)
    path = _file(node, v, "cases", spec_dir)
    shape, row = (JSON_FIELDS, json_row) if v["compare"] == "json" else (TEXT_FIELDS, text_row)
    return ProgramGate(run, path, read_cases(path, shape, "cases", row), v["compare"], timeout)


def _pytest(node: Table, v: Mapping[str, Any], spec_dir: Path, timeout: float) -> Gate:
    python = _python(node, v, spec_dir)
    try:
        laid = pinned_tests(spec_dir, v["tests"])
    except ValueError as exc:
        raise node.error("gate.tests", str(exc), TABLES["pytest"].by_name["tests"].fix
                         ) from None
    names = {n.split("/", 1)[0].removesuffix(".py") for n, _ in laid}
    code = None
    if "code" in v:
        try:
            code = check_code(list(v["code"]), names)
        except ValueError as exc:
            raise node.error("gate.code", str(exc), 'name packages as paths in the judged tree '
                             'whose last part is the import name: code = ["src/mypkg"]'
                             ) from None
    ini_file = _file(node, v, "ini", spec_dir) if "ini" in v else None
    try:
        ini = engine_ini(ini_file)
    except ValueError as exc:
        raise node.error("gate.ini", f"{ini_file} {exc}", "keep to what loads no code: "
                         "markers, filterwarnings, xfail_strict, addopts such as -r or "
                         "--strict-markers; plugins go in plugins") from None
    select = v.get("select")
    return PytestGate(python, laid, timeout, code=code, select=select and tuple(select),
                      ini=ini, ini_file=ini_file, plugins=tuple(v.get("plugins", ())),
                      test_timeout_s=float(v["test_timeout_s"]), spec_path=str(node.spec_path),
                      node=node.name)


BUILDERS: dict[str, Callable[[Table, Mapping[str, Any], Path, float], Gate]] = {
    "calls": _calls, "program": _program_gate, "pytest": _pytest}
