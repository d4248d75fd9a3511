"""`[node.NAME.gate]` tables and their case files: every bad table or case line is one line
naming the file, the field and the fix, exit 2, nothing written; the case and test files are gate
files (pinned at run start, hidden from the worker and from the judged code)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from loopproof.engine.cli import main
from loopproof.engine.run.confine import RunSandbox
from loopproof.engine.run.judge import CallsGate, ProgramGate, PytestGate
from loopproof.engine.run.spec import load
from loopproof.engine.system.sandbox import backend
from tests.support.refusals import refused

PY = sys.executable
CASES = '{"args": [[3, 1, 2]], "expect": 2}\n{"args": [[0, 1]], "kwargs": {}, "expect": 0.5}\n'
IO = '{"input": [3, 1, 2], "output": 2}\n'
TEXT = '{"stdin": "3 1 2\\n", "stdout": "2\\n"}\n'


def spec(tmp_path: Path, table: str, files: dict[str, str] | None = None) -> Path:
    for name, text in {"cases.jsonl": CASES, "io.jsonl": IO, "text.jsonl": TEXT, "check.sh": "",
                       "test_m.py": "def test_m():\n    assert True\n", **(files or {})}.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "graph.toml"
    path.write_text(f'[graph]\nspend_budget = 10.0\n\n[node.solve]\nworker = ["{PY}", "-c", '
                    f'"pass"]\nspend_ceiling = 1.0\n\n[node.solve.gate]\n{table}')
    return path


CALLS = f'kind = "calls"\nmodule = "m"\nfunction = "f"\ncases = "cases.jsonl"\npython = "{PY}"\n'
BAD_TABLES = {
    "unknown kind": ('kind = "oracle"\n', "gate.kind", "unknown judge kind"),
    "no kind": ('module = "m"\n', "gate.kind", "unknown judge kind"),
    "unknown field": (CALLS + 'expect = 2\n', "gate.expect", "not a field"),
    "no module": (CALLS.replace('module = "m"\n', ""), "gate.module",
                  "missing"),
    "module not importable": (CALLS.replace('"m"', '"m-1"'), "gate.module", "not valid"),
    "function not a name": (CALLS.replace('"f"', '"f()"'), "gate.function", "not valid"),
    "no case file": (CALLS.replace("cases.jsonl", "none.jsonl"), "gate.cases", "not a file"),
    "bad compare": (CALLS + 'compare = "close"\n', "gate.compare", "exact"),
    "tolerance without approx": (CALLS + "rel = 1e-3\n", "gate.rel", "approx"),
    "negative tolerance": (CALLS + 'compare = "approx"\nabs = -1.0\n', "gate.abs", ">= 0"),
    "python not found": (CALLS.replace(PY, "no-such-python-3"), "gate.python", "not on PATH"),
    "program run not a list": ('kind = "program"\nrun = "python3 s.py"\ncases = "io.jsonl"\n',
                               "gate.run", "non-empty list"),
    "program compare": (f'kind = "program"\nrun = ["{PY}"]\ncases = "io.jsonl"\n'
                        'compare = "xml"\n', "gate.compare", "json"),
    "program run starts a gate file": ('kind = "program"\nrun = ["check.sh", "s.py"]\n'
                                       'cases = "io.jsonl"\n', "gate.run",
                                       "not an installed program"),
    "pytest no tests": (f'kind = "pytest"\ntests = []\npython = "{PY}"\n', "gate.tests", "non-empty list"),
    "pytest missing test": (f'kind = "pytest"\ntests = ["test_none.py"]\npython = "{PY}"\n', "gate.tests",
                            "not a file or folder"),
}
BAD_LINES = {
    "not JSON": ("{args: [1]}\n", "line 1", "strict JSON"),
    "NaN": ('{"args": [1], "expect": NaN}\n', "line 1", "strict JSON"),
    "duplicate key": ('{"args": [1], "expect": 1, "expect": 2}\n', "line 1", "duplicate"),
    "not an object": ('[1, 2]\n', "line 1", "not a JSON object"),
    "no expect": ('{"args": [1]}\n', "field 'expect'", "missing"),
    "args not a list": ('{"args": 1, "expect": 1}\n', "field 'args'", "list"),
    "kwargs not an object": ('{"args": [], "kwargs": [1], "expect": 1}\n', "field 'kwargs'",
                             "object"),
    "unknown field": (CASES + '{"args": [], "expected": 1}\n', "line 3, field 'expected'",
                      "not a field"),
    "no case": ("\n\n", "cases", "holds no case"),
}


@pytest.mark.parametrize("name", sorted(BAD_TABLES))
def test_a_bad_gate_table_is_one_line_naming_the_field(name, tmp_path, capsys) -> None:
    table, field, problem = BAD_TABLES[name]
    path = spec(tmp_path, table)
    refused(capsys, ["run", str(path), "--ledger", str(tmp_path / "L.jsonl")], tmp_path,
            str(path), "node 'solve'", field, problem)


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_a_bad_case_line_is_one_line_naming_the_file_line_and_field(name, tmp_path,
                                                                    capsys) -> None:
    text, field, problem = BAD_LINES[name]
    path = spec(tmp_path, CALLS, {"cases.jsonl": text})
    refused(capsys, ["run", str(path), "--ledger", str(tmp_path / "L.jsonl")], tmp_path,
            str(tmp_path / "cases.jsonl"), field, problem)


def test_a_text_case_must_hold_strings(tmp_path, capsys) -> None:
    path = spec(tmp_path, f'kind = "program"\nrun = ["{PY}", "s.py"]\ncases = "text.jsonl"\n'
                          'compare = "lines"\n', {"text.jsonl": '{"stdin": "1", "stdout": 1}\n'})
    refused(capsys, ["run", str(path), "--ledger", str(tmp_path / "L.jsonl")], tmp_path,
            "text.jsonl", "line 1, field 'stdout'", "must be a string")


def test_each_table_builds_its_kind_and_the_array_stays_a_command_gate(tmp_path) -> None:
    s = load(spec(tmp_path, CALLS + 'compare = "approx"\nrel = 1e-6\n'))
    gate = s.nodes["solve"].gate
    assert isinstance(gate, CallsGate) and gate.tolerance is not None
    assert gate.tolerance.rel == 1e-6 and gate.tolerance.abs == 1e-12
    assert [c.given for c in gate.cases] == [[[[3, 1, 2]], {}], [[[0, 1]], {}]]
    assert [c.expect for c in gate.cases] == [2, 0.5] and gate.python.startswith("/")
    other = tmp_path / "p"
    other.mkdir()
    prog = load(spec(other, f'kind = "program"\nrun = ["{PY}", "s.py"]\ncases = "text.jsonl"'
                            '\ncompare = "lines"\n')).nodes["solve"].gate
    assert isinstance(prog, ProgramGate) and prog.run[1] == "s.py" and prog.run[0].startswith("/")
    third = tmp_path / "t"
    third.mkdir()
    pyt = load(spec(third, f'kind = "pytest"\ntests = ["test_m.py"]\npython = "{PY}"\n')).nodes["solve"].gate
    assert isinstance(pyt, PytestGate) and pyt.laid == (("test_m.py", third / "test_m.py"),)


def test_case_and_test_files_are_pinned_and_hidden_from_worker_and_judged_code(tmp_path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "p.ini").write_text("[pytest]\nmarkers =\n    slow: a slow test\n")
    text = (f'[graph]\nspend_budget = 10.0\n\n[node.c]\nworker = ["{PY}", "-c", "pass"]\n'
            f'spend_ceiling = 1.0\n[node.c.gate]\n{CALLS}\n[node.t]\nworker = ["{PY}", "-c", '
            f'"pass"]\nspend_ceiling = 1.0\n[node.t.gate]\nkind = "pytest"\ntests = ["tests"]\n'
            f'python = "{PY}"\nini = "p.ini"\ncode = []\n')
    path = spec(tmp_path, "", {})
    path.write_text(text)
    s = load(path)
    cases, test = tmp_path / "cases.jsonl", tmp_path / "tests" / "test_a.py"
    ini = tmp_path / "p.ini"  # a pytest gate's pinned configuration is a gate file too
    py = Path(s.nodes["c"].gate.python)
    assert set(s.nodes["c"].pinned_files()) == {cases, py}  # the interpreter is pinned too
    assert set(s.nodes["t"].pinned_files()) == {test, ini, py}
    run = RunSandbox(s, backend("none"), ledger=tmp_path / "L.jsonl", stop_file=tmp_path / "s")
    for name in ("c", "t"):
        box = run.node(name, tmp_path)
        for view in (box.worker.view, box.gate.candidate):
            assert {cases, test, ini, path} <= set(view.hidden), (name, view)
        assert box.gate.candidate.writable == () and not box.gate.candidate.network
    assert main(["run", str(path), "--ledger", str(tmp_path / "L.jsonl")]) in (3, 0)
    pins = json.loads((tmp_path / "L.jsonl").read_text().splitlines()[0])["pins"]
    assert {str(cases), str(test), str(ini)} <= set(pins)
