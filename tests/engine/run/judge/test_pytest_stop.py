"""The audit's `pytest` runs stop at the first test that does not pass (`stop_at_failure`,
engine/run/judge/pytest_gate.py): the verdict must be the one the full run gives. A reject
stays a reject, an accept still runs every test, and with `select` a test not selected (deselected, never run)
does not stop the run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loopproof.engine.commands._graph_loops import _deciding_early
from loopproof.engine.run.gate import GateResult
from tests.support.pytest_gates import Gate

TESTS = '''from mypkg.calc import add


def test_first():
    assert add(1, 2) == 3


def test_second():
    assert add(2, 2) == 4


def test_third():
    assert add(0, 5) == 5
'''
RIGHT = {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": "def add(a, b):\n    return a + b\n"}
WRONG = {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": "def add(a, b):\n    return a - b\n"}
CUT = "not run after a test that failed"


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Gate:
    return Gate(tmp_path_factory.mktemp("stop"), {"tests/test_calc.py": TESTS})


def _judge(gate: Gate, name: str, files: dict[str, str], *, stop: bool) -> GateResult:
    return gate.judge(name, files, replace(gate.gate, stop_at_failure=stop))


def test_a_wrong_tree_is_rejected_at_its_first_failure_and_the_rest_is_not_run(suite: Gate):
    full = _judge(suite, "wrong-full", WRONG, stop=False)
    cut = _judge(suite, "wrong-cut", WRONG, stop=True)
    assert full.verdict == cut.verdict == "reject", (full.detail, cut.detail)
    assert "3 of 3 cases fail" in full.detail and CUT not in full.detail
    # the first test failed; the two after it never started
    assert "tests/test_calc.py::test_first (failed)" in cut.detail, cut.detail
    assert f"tests/test_calc.py::test_second ({CUT})" in cut.detail, cut.detail
    assert f"tests/test_calc.py::test_third ({CUT})" in cut.detail, cut.detail


def test_a_run_that_never_reached_a_test_does_not_say_a_test_failed(suite: Gate):
    """The judged package exits at import (collection fails): nothing was cut, nothing ran."""
    result = _judge(suite, "exits", {**WRONG, "src/mypkg/calc.py": "raise SystemExit(0)\n"},
                    stop=True)
    assert result.verdict != "accept" and CUT not in result.detail, result.detail


def test_a_right_tree_is_accepted_with_every_test_run(suite: Gate):
    result = _judge(suite, "right", RIGHT, stop=True)
    assert result.verdict == "accept", result.detail
    assert result.detail.startswith("pytest: all 3 cases match")


def test_with_select_only_a_selected_test_s_failure_stops_the_run(tmp_path: Path):
    """test_other fails on every tree but is not selected: it must not cut test_chosen."""
    tests = ("from mypkg.calc import add\n\n\ndef test_other():\n    assert add(1, 1) == 3\n\n\n"
             "def test_chosen():\n    assert add(1, 2) == 3\n")
    gate = Gate(tmp_path, {"tests/test_sel.py": tests},
                table='code = ["src/mypkg"]\nselect = ["tests/test_sel.py::test_chosen"]\n')
    right = _judge(gate, "right", RIGHT, stop=True)
    assert right.verdict == "accept", right.detail
    wrong = _judge(gate, "wrong", WRONG, stop=True)
    assert wrong.verdict == "reject" and "test_chosen (failed)" in wrong.detail, wrong.detail


def test_the_audit_judges_with_a_pytest_gate_that_stops_and_the_run_with_one_that_does_not(
        suite: Gate):
    cfg = suite.spec.nodes["p"]
    assert cfg.gate.stop_at_failure is False  # the run's gate: every failure is reported
    assert _deciding_early(cfg).gate.stop_at_failure is True
