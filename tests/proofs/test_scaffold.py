"""`python -m loopproof.proofs new NAME --guarantee Gk`: the skeleton fails until it is filled in, and
passes once it is -- run on a copy of the tree, as a newcomer would run it on theirs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.extending import BEGIN, END, STEPS, copy_tree, fill_in
from loopproof.proofs import scaffold
from tests.support.paths import REPO

RUFF = Path(sys.executable).parent / "ruff"


def py(root: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=root, capture_output=True, text=True,
                          timeout=300, check=False)


def results(root: Path) -> dict[str, str]:
    done = py(root, "-m", "loopproof.proofs", "--json", "--only", "G3-node-cap", "G3-broken-node-cap")
    return {r["id"]: r["result"] for r in json.loads(done.stdout)} | {"exit": done.returncode}


def test_the_fresh_scaffold_fails_and_filling_it_in_passes(tmp_path):
    root = tmp_path / "repo"
    copy_tree(root)
    made = py(root, "-m", "loopproof.proofs", "new", "node_cap", "--guarantee", "G3")
    assert made.returncode == 0, made.stderr
    module, test = root / "proofs" / "g3_node_cap.py", root / "tests" / "proofs" / "test_g3_node_cap.py"
    assert module.is_file() and test.is_file()
    lint = subprocess.run([str(RUFF), "check", "proofs", "tests"], cwd=root,
                          capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout  # what it writes is clean, registry included
    # fresh: both obligations fail ("unwritten", never "proved"), and so does the test
    assert results(root) == {"G3-node-cap": "unwritten", "G3-broken-node-cap": "unwritten",
                             "exit": 1}
    assert py(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)).returncode == 1
    # filled in: proved, refuted, and the written test passes
    module.write_text(fill_in(module.read_text()))
    assert results(root) == {"G3-node-cap": "proved", "G3-broken-node-cap": "refuted",
                             "exit": 0}
    passed = py(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test))
    assert passed.returncode == 0, passed.stdout


@pytest.mark.parametrize(("name", "guarantee", "field"), [
    ("Bad-Name", "G3", "NAME"), ("node_cap", "G", "--guarantee"),
    ("attempt_ceiling", "G3", "NAME"),  # proofs/g3_attempt_ceiling.py exists
])
def test_bad_arguments_are_one_line_and_write_nothing(tmp_path, capsys, name, guarantee, field):
    root = tmp_path / "repo"
    copy_tree(root)
    before = (root / "proofs" / "obligations.py").read_bytes()
    assert scaffold.main([name, "--guarantee", guarantee, "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert f": {field}: " in err and "fix:" in err and err.count("\n") == 1, err
    assert (root / "proofs" / "obligations.py").read_bytes() == before
    assert not list((root / "proofs").glob("g3_node*")) and not list(
        (root / "tests" / "proofs").glob("test_g3*"))


def test_an_obligations_file_without_its_marker_is_one_line_and_writes_nothing(tmp_path, capsys):
    """Found by mypy (make lint): this error was raised with one argument too many, a
    TypeError traceback instead of the line."""
    root = tmp_path / "repo"
    copy_tree(root)
    obligations = root / "proofs" / "obligations.py"
    obligations.write_text(obligations.read_text().replace(scaffold.MARK, ""))
    before = obligations.read_bytes()
    assert scaffold.main(["node_cap", "--guarantee", "G3", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "proofs/obligations.py, OBLIGATIONS: " in err and "marker" in err, err
    assert "fix:" in err and err.count("\n") == 1, err
    assert obligations.read_bytes() == before and not list((root / "proofs").glob("g3_node*"))


def test_the_readme_timings_block_is_the_benchmarks_steps():
    """The README's block is written by `python -m bench.extending --write README.md`: one row
    per step it times, in its order, each with a wall clock and a CPU time."""
    text = (REPO / "README.md").read_text()
    shown = text[text.index(BEGIN):text.index(END)]
    rows = [line for line in shown.splitlines() if line.startswith("| ") and " s |" in line]
    assert [r.split(" | ")[0][2:] for r in rows] == [what for _, what, _, _ in STEPS]


def test_the_copied_tree_holds_every_test_helper_the_differential_test_imports(tmp_path):
    """bench/extending.py times the differential test on its copy: a tests/ helper module it
    imports but the copy lacks fails make reproduce's bench step (encoding_steps.py did)."""
    root = tmp_path / "repo"
    copy_tree(root)
    done = py(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
              "tests/proofs/test_encoding.py")
    assert done.returncode == 0, done.stdout[-2000:]
