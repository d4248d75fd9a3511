"""The `pytest` judge kind on a project's own suite (issue 35, docs/gates.md "Judging a real
repository"), attacked as a hostile worker would, through the gate the run builds in the run's
sandbox views: conftest.py files (the pinned ones load, the tree's never, one the judged code
writes while the tests run is refused), where the judged code is imported from (`code`, the
default, vacuity), `select`, the pinned `ini`, `plugins` and the per-test timeout.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from loopproof.engine.cli import main
from loopproof.engine.run.judge import pytest_gate
from loopproof.engine.system.errors import BadInput
from tests.support.pytest_gates import PY, Gate
from tests.support.refusals import refused

CONFTEST = '''import pytest


@pytest.fixture
def three():
    return 3
'''
TEST_ADD = '''from mypkg.calc import add


def test_add(three):
    assert add(1, 2) == three


def test_add_zero():
    assert add(0, 0) == 0
'''
TEST_PLAIN = TEST_ADD.replace("(three)", "()").replace("== three", "== 3")
RIGHT = {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": "def add(a, b):\n    return a + b\n"}
WRONG = {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": "def add(a, b):\n    return a - b\n"}
HOOK = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Gate:
    """tests/ with its own conftest fixture and a helper package (tests/__init__.py)."""
    return Gate(tmp_path_factory.mktemp("suite"), {
        "tests/__init__.py": "", "tests/conftest.py": CONFTEST + "from tests.base import ONE\n",
        "tests/base.py": "ONE = 1\n", "tests/test_add.py": TEST_ADD})


def test_the_pinned_conftest_and_test_package_load_and_a_right_tree_passes(suite: Gate) -> None:
    result = suite.judge("right", RIGHT)
    assert result.verdict == "accept", result.detail
    assert result.facts["code"] == {"mypkg": "src/mypkg/__init__.py"}
    assert result.facts["loaded"] == ["src/mypkg/__init__.py", "src/mypkg/calc.py"]


def test_no_conftest_of_the_judged_tree_loads(suite: Gate) -> None:
    """A report hook in a conftest.py at each place pytest would look (the root, src/, inside
    the package, in the pinned folder's place and below it), all in one wrong tree: any one of
    them loaded would make the wrong tree's failing test pass (or, at the root, beside the
    canaries, forge them: an error)."""
    where = ["conftest.py", "src/conftest.py", "src/mypkg/conftest.py", "tests/conftest.py",
             "tests/zsub/conftest.py"]
    result = suite.judge("hooks", {**WRONG, **dict.fromkeys(where, HOOK)})
    assert result.verdict == "reject", result.detail
    assert "tests/test_add.py::test_add (failed)" in result.detail


def test_a_conftest_the_judged_code_writes_while_the_tests_run_is_refused(tmp_path) -> None:
    """The judged package, imported by tests/test_a.py, writes tests/zsub/conftest.py (a report
    hook, scoped to tests/zsub: the canaries never see it) before pytest collects tests/zsub
    (after test_a.py, by name). The harness refuses any conftest.py that is not pinned byte for byte; without that check the
    hook made the wrong tree's failing test pass (a planted fault: accept)."""
    writer = ("import pathlib\npathlib.Path('tests/zsub/conftest.py').write_text(" + repr(HOOK)
              + ")\n\ndef add(a, b):\n    return a - b\n")
    gate = Gate(tmp_path, {"tests/test_a.py": "import mypkg\n\ndef test_a():\n    pass\n",
                           "tests/zsub/test_b.py": "from mypkg import add\n\n"
                                                  "def test_b():\n    assert add(1, 2) == 3\n"})
    result = gate.judge("t", {"src/mypkg/__init__.py": writer})
    assert result.verdict == "reject", result.detail
    assert "tests/zsub/test_b.py::test_b" in result.detail


def test_a_shadow_package_at_the_root_is_not_the_judged_code(suite: Gate) -> None:
    shadow = {f"mypkg/{k.split('/')[-1]}": v for k, v in RIGHT.items()}
    assert suite.judge("shadow", {**WRONG, **shadow}).verdict == "reject"


def test_by_default_a_src_tree_with_a_package_at_its_root_too_is_unclear(tmp_path) -> None:
    gate = Gate(tmp_path, {"tests/test_add.py": TEST_PLAIN}, table="")
    result = gate.judge("shadow", {**WRONG, "mypkg/__init__.py": "", "mypkg/calc.py":
                                   RIGHT["src/mypkg/calc.py"]})
    assert result.verdict == "error" and "cannot tell which packages" in result.detail, \
        result.detail
    assert 'code = ["src/mypkg"]' in result.detail
    assert gate.judge("wrong", WRONG).verdict == "reject"
    result = gate.judge("right", RIGHT)
    assert result.verdict == "accept", result.detail
    assert result.facts["code"] == {"mypkg": "src/mypkg/__init__.py"}


def test_a_declared_package_the_tests_never_import_is_an_error_never_a_pass(tmp_path) -> None:
    """Vacuity by construction: `code` names mypkg, the tests import nothing of it (they pass
    on their own): the verdict is an error, not an accept."""
    gate = Gate(tmp_path, {"tests/test_x.py": "def test_x():\n    assert 1 + 2 == 3\n"})
    result = gate.judge("t", RIGHT)
    assert result.verdict == "error", result.detail
    assert "did not import the judged code: mypkg was never imported" in result.detail


def test_a_declared_package_missing_from_the_tree_fails_its_tests(suite: Gate) -> None:
    """The name is not looked up anywhere else (an installed copy): the import fails, the
    tests fail, the verdict is a reject naming where it was sought."""
    result = suite.judge("missing", {"README": "no package here\n"})
    assert result.verdict == "reject", result.detail
    assert result.facts["code"]["mypkg"] == "src/mypkg"


def test_select_asks_only_the_named_tests(tmp_path) -> None:
    gate = Gate(tmp_path, {"tests/test_add.py": TEST_PLAIN}, table='code = ["src/mypkg"]\n'
                'select = ["tests/test_add.py::test_add_zero"]\n')
    result = gate.judge("t", WRONG)  # test_add fails, test_add_zero passes: only it is asked
    assert result.verdict == "accept", result.detail
    assert result.facts["cases"] == 1


def _run_refused(tmp_path: Path, capsys, table: str, tests: dict[str, str], field: str,
                 problem: str) -> None:
    spec = tmp_path / "spec"
    for name, text in tests.items():
        (spec / name).parent.mkdir(parents=True, exist_ok=True)
        (spec / name).write_text(text)
    graph = spec / "graph.toml"
    graph.write_text(f'[graph]\nspend_budget = 10.0\n\n[node.p]\nworker = ["{PY}", "-c", '
                     f'"pass"]\nspend_ceiling = 1.0\n\n[node.p.gate]\nkind = "pytest"\n'
                     f'tests = ["tests"]\npython = "{PY}"\n{table}')
    refused(capsys, ["run", str(graph), "--ledger", str(tmp_path / "L.jsonl")], tmp_path,
            field, problem)


REFUSALS = {
    "select not collected": ('select = ["tests/test_a.py::test_nope"]\n', "gate.select",
                             "is not collected"),
    "plugin not installed": ('plugins = ["pytest-no-such-plugin"]\n', "gate.tests",
                             "is not installed"),
    "code a standard module": ('code = ["src/json"]\n', "gate.code", "standard library"),
    "code outside the tree": ('code = ["../mypkg"]\n', "gate.code", "not a path inside"),
    "code the tests folder": ('code = ["tests"]\n', "gate.code", "pinned test folder"),
    "ini pythonpath": ('ini = "bad.ini"\n', "gate.ini", "pythonpath"),
    "ini addopts plugin": ('ini = "plug.ini"\n', "gate.ini", "loads the plugin"),
    "ini addopts rootdir": ('ini = "root.ini"\n', "gate.ini", "--rootdir"),
    "select twice": ('select = ["a", "a"]\n', "gate.select", "twice"),
    "test timeout negative": ("test_timeout_s = -1\n", "gate.test_timeout_s", ">= 0"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_a_gate_that_cannot_work_is_refused_at_run_start(tmp_path, capsys, name) -> None:
    table, field, problem = REFUSALS[name]
    _run_refused(tmp_path, capsys, table, {
        "tests/test_a.py": "def test_a():\n    pass\n",
        "bad.ini": "[pytest]\npythonpath = src\n",
        "plug.ini": "[pytest]\naddopts = -p mypkg.plugin\n",
        "root.ini": "[pytest]\naddopts = --rootdir=/tmp\n"}, field, problem)


def test_a_pinned_ini_with_markers_and_strict_markers_is_used(tmp_path) -> None:
    gate = Gate(tmp_path, {"tests/test_m.py": "import pytest\nfrom mypkg.calc import add\n\n\n"
                           "@pytest.mark.slow\ndef test_m():\n    assert add(1, 2) == 3\n"},
                table='code = ["src/mypkg"]\nini = "p.ini"\n', spec_files={
                    "p.ini": "[pytest]\nmarkers =\n    slow: a slow test\n"
                             "addopts = --strict-markers -p no:warnings\n"})
    assert gate.judge("right", RIGHT).verdict == "accept"
    with pytest.raises(BadInput, match="do not collect"):  # the marker undeclared: refused
        Gate(tmp_path / "b", {"tests/test_m.py": "import pytest\n\n\n@pytest.mark.slow\n"
                              "def test_m():\n    pass\n"}, table='code = []\nini = "p.ini"\n',
             spec_files={"p.ini": "[pytest]\naddopts = --strict-markers\n"})


def test_only_the_named_plugins_load(tmp_path) -> None:
    """pytest-xdist is installed (its `worker_id` fixture): without `plugins` it does not
    load and the test errors; named, it loads."""
    test = {"tests/test_w.py": "def test_w(worker_id):\n    assert worker_id == 'master'\n"}
    without = Gate(tmp_path / "a", test, table="code = []\n")
    result = without.judge("t", RIGHT)
    assert result.verdict == "reject" and "(error)" in result.detail, result.detail
    named = Gate(tmp_path / "b", test, table='code = []\nplugins = ["pytest-xdist"]\n')
    result = named.judge("t", RIGHT)
    assert result.verdict == "accept", result.detail


HANG = '''import signal
import time

from mypkg.calc import add


def test_hangs():
    time.sleep(600)


def test_after():
    assert add(1, 2) == 3


def test_blocks_the_alarm_and_hangs():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    time.sleep(600)
'''


def test_a_hung_test_is_that_tests_failure_and_the_others_are_reported(tmp_path) -> None:
    """`test_hangs` gets the alarm at its time and fails as "timeout"; the next test runs and
    passes (it is not in the detail); the one that blocks the alarm, last, is ended by the
    watchdog, reported "timeout" too. The gate itself ends long before its own timeout."""
    gate = Gate(tmp_path, {"tests/test_h.py": HANG},
                table='code = ["src/mypkg"]\ntest_timeout_s = 1\n')
    result = gate.judge("t", RIGHT)
    assert result.verdict == "reject", result.detail
    assert result.detail.startswith(
        "pytest: 2 of 3 cases fail: tests/test_h.py::test_hangs (timeout), "
        "tests/test_h.py::test_blocks_the_alarm_and_hangs (timeout)"), result.detail
    assert result.seconds < 40


def test_the_load_report_is_in_the_ledger(tmp_path, capsys) -> None:
    """A real run: the verdict record keeps where the judged code came from (`code`) and the
    judged files the run loaded (`loaded`), for the audit."""
    gate = Gate(tmp_path, {"tests/test_add.py": TEST_PLAIN}, start=False)  # the run starts it
    (gate.graph.parent / "w.py").write_text(
        "import pathlib\n" + "".join(f"pathlib.Path({k!r}).parent.mkdir(parents=True, "
                                     f"exist_ok=True)\npathlib.Path({k!r}).write_text({v!r})\n"
                                     for k, v in RIGHT.items()))
    ledger = tmp_path / "run.jsonl"
    assert main(["run", str(gate.graph), "--ledger", str(ledger), "--json"]) == 0
    verdict = [json.loads(x) for x in ledger.read_text().splitlines()
               if json.loads(x)["type"] == "verdict"][-1]
    assert verdict["code"] == {"mypkg": "src/mypkg/__init__.py"}
    assert verdict["loaded"] == ["src/mypkg/__init__.py", "src/mypkg/calc.py"]


MARKED = '''import sys

import pytest

from mypkg.calc import add


@pytest.mark.xfail(reason="the project's own known failure")
def test_known_bug():
    assert add(1, 1) == 3


@pytest.mark.xfail(reason="fixed since, still marked")
def test_known_bug_fixed():
    assert add(1, 1) == 2


@pytest.mark.skipif(sys.platform == "linux", reason="not here")
def test_elsewhere():
    assert False


@pytest.mark.skipif(sys.platform == "no-such-os", reason="runs here")
def test_here():
    assert add(2, 2) == 4
'''


def test_the_suites_own_skip_and_xfail_marks_excuse_their_tests_and_nothing_else(
        tmp_path) -> None:
    """A real suite has xfail-marked tests (one xfails, one xpasses) and platform skips; the
    marks are the pinned tests' own, evaluated at the collection of the pinned tests alone:
    those tests are not asked. A skipif that does not hold here leaves its test asked, and a
    test the judged code skips at run time (outcome-forge) is still a failure."""
    gate = Gate(tmp_path, {"tests/test_m.py": MARKED})
    result = gate.judge("right", RIGHT)
    assert result.verdict == "accept", result.detail
    assert result.facts["cases"] == 1 and "3 tests the pinned suite marks" in result.detail
    skipper = "def add(a, b):\n    import pytest\n    pytest.skip('forged')\n"
    result = gate.judge("skips", {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": skipper})
    assert result.verdict == "reject", result.detail
    assert "tests/test_m.py::test_here (skipped)" in result.detail


def test_a_package_the_suite_marks_for_assertion_rewriting_is_still_the_judged_one(
        tmp_path, monkeypatch) -> None:
    """A pinned conftest that calls `pytest.register_assert_rewrite("mypkg")` (projects do, for
    their own helpers): pytest's rewriting import hook, first on sys.meta_path, looked mypkg up
    on sys.path itself and took the copy it found there (here a shadow at the tree's root; in
    a real gate, the installed one). The judged code's finder now goes first again.

    The two trees are judged at once by a gate not yet started (as the audit judges a node's
    reference and control on a thread pool): one collection of the pinned tests serves both."""
    gate = Gate(tmp_path, {"tests/conftest.py": "import pytest\n\npytest.register_assert_rewrite"
                                                "('mypkg')\n", "tests/test_add.py": TEST_PLAIN},
                start=False)
    wrong = {**WRONG, **{f"mypkg/{k.split('/')[-1]}": v for k, v in RIGHT.items()}}
    right = {**RIGHT, **{f"mypkg/{k.split('/')[-1]}": v for k, v in WRONG.items()}}
    collections = []
    run_judged = pytest_gate.run_judged

    def counted(argv, tree, timeout_s, box, stdin, extra_env=None):
        collections.extend([1] if json.loads(stdin)["collect"] else [])
        return run_judged(argv, tree, timeout_s, box, stdin, extra_env)

    monkeypatch.setattr(pytest_gate, "run_judged", counted)
    with ThreadPoolExecutor(max_workers=2) as pool:
        result, other = pool.map(lambda t: gate.judge(*t), [("wrong", wrong), ("right", right)])
    assert result.verdict == "reject", result.detail
    assert other.verdict == "accept", other.detail
    assert len(collections) == 1
