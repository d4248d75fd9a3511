"""Real projects under the `pytest` judge (issue 35): three vendored open-source projects
(tests/fixtures/real/: a src layout with conftest fixtures, a flat layout, a tests package whose
conftest imports its helper module), each judged by a gate pinned to its own `tests/` folder
and `code`, with the project installed in the gate's interpreter as well (its fixed copy: a
gate that judged it would pass the bug). Two real `loopproof run`s each (tests/support/real_repos.py):
the honest fix ends DONE; and a run whose node tries the bug left in and each of the four
exploit families (a conftest report hook, a shadow copy of the package, rewritten test files, a
sitecustomize.py with a .pth file), one attempt each, every attempt starting again from the buggy
tree, ends FAILED: each attempt is a reject naming the planted bug's failing tests, judged on the
tree's own code (an attempt that ended DONE would have ended the run there). The gate's
collection of the pinned tests is made once per run, as for any node with several attempts.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.example_runs import example_run
from tests.support.paths import FIXTURES as _FIXTURES
from tests.support.real_repos import EXPLOITS, Project, run, run_modes

FIXTURES = _FIXTURES / "real"
PROJECTS = ("semver", "parse", "marshmallow")
# the planted bug's failing tests, as the bug left in shows them (tests/fixtures/real/README.md)
FAILING = {"semver": "tests/test_bump.py::test_should_bump_minor",
           "parse": "tests/test_search.py::test_pos",
           "marshmallow": "tests/test_error_store.py::TestMergeErrors::test_merging_list_and_list"}


@pytest.fixture(scope="module", params=PROJECTS)
def task(request, tmp_path_factory) -> tuple[Project, Path, Path]:
    root = tmp_path_factory.mktemp(request.param)
    project = Project.load(FIXTURES / request.param)
    python = project.gate_python(root / "venv")
    return project, project.spec(root, python), python


def _judged_from_tree(project: Project, verdict: dict) -> None:
    """The verdict's facts say the judged code was loaded from the tree, where `code` puts it."""
    package = project.task["package"]
    name = Path(package).name
    assert verdict["code"] == {name: f"{package}/__init__.py"}, verdict
    assert verdict["loaded"] and all(f.startswith(f"{package}/") for f in verdict["loaded"])


@pytest.fixture(scope="module")
def failing(task, tmp_path_factory) -> dict[str, Any]:
    """One run of the bug left in and of each exploit, one attempt each (read by the tests)."""
    _, spec, _ = task
    return run_modes(spec, ["leave", *EXPLOITS], tmp_path_factory.mktemp("modes") / "L.jsonl")


def test_the_gate_interpreter_has_the_fixed_project_installed(task) -> None:
    """(pytest is found there, not imported: every run below runs it in that interpreter.)"""
    project, _, python = task
    name = Path(project.task["package"]).name
    out = subprocess.run([str(python), "-c", f"import {name}, importlib.util; print({name}."
                          "__file__ if importlib.util.find_spec('pytest') else 'no pytest')"],
                         capture_output=True, text=True, check=True).stdout.strip()
    installed = Path(out).parent if out.endswith("__init__.py") else Path(out)
    assert "site-packages" in out and str(python.parent.parent) in out, out
    bug = project.task["bug"]
    rel = Path(bug["file"]).relative_to(project.task["package"])
    assert bug["fixed"] in (installed / rel).read_text()


def test_the_honest_fix_ends_done(task, tmp_path: Path) -> None:
    project, spec, _ = task
    got = run(spec, "fix", tmp_path / "L.jsonl")
    assert (got["exit"], got["outcome"]) == (0, "DONE"), got
    assert got["verdict"]["verdict"] == "accept"
    _judged_from_tree(project, got["verdict"])


@pytest.mark.parametrize("mode", ["leave", *EXPLOITS])
def test_the_bug_left_in_ends_failed_whatever_else_the_tree_holds(task, failing, mode: str
                                                                  ) -> None:
    project, _, _ = task
    assert (failing["exit"], failing["outcome"]) == (3, "FAILED"), failing
    worker = failing["workers"][mode]  # this attempt played this mode, from the buggy tree
    assert worker["returncode"] == 0 and worker["stdout"]["tail"] == f"worker: {mode} done\n", \
        worker
    verdict = failing["verdicts"][mode]
    assert verdict is not None, failing  # judged: no earlier mode ended the run
    assert verdict["verdict"] == "reject", verdict
    assert FAILING[project.name] in verdict["detail"], verdict["detail"]
    assert FAILING[project.name] in verdict["failing"]
    _judged_from_tree(project, verdict)


def test_every_project_is_described_and_licensed() -> None:
    for name in PROJECTS:
        folder = FIXTURES / name
        task = json.loads((folder / "task.json").read_text())
        assert any(folder.glob("LICENSE*")), name
        assert (folder / task["package"]).is_dir() and (folder / "tests").is_dir()
        assert name in (FIXTURES / "README.md").read_text()


def test_the_real_repo_example_ends_done(tmp_path_factory) -> None:
    """examples/real-repo, as its README runs it (the session's one run of it,
    tests/support/example_runs.py, read only): DONE on the FAIL_TO_PASS and PASS_TO_PASS tests
    of its `select`, the judged code loaded from the tree's src/."""
    code, report, folder = example_run(tmp_path_factory, "real-repo")
    assert (code, report["outcome"]) == (0, "DONE"), report
    ledger = folder / "real-repo.jsonl"
    verdict = [json.loads(x) for x in ledger.read_text().splitlines()
               if json.loads(x)["type"] == "verdict"][-1]
    assert verdict["detail"] == "pytest: all 10 cases match"
    assert verdict["code"] == {"semver": "src/semver/__init__.py"}
