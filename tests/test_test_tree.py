"""The tests' tree mirrors the checkout's: each folder of tests/ names a folder that exists
(tests/engine/run/proxy/ for engine/run/proxy/), is a package (two test files of one name in two
folders stay two modules), only the checks of the whole tree sit at the top, and no module under
tests/ imports a test file: what tests share lives in tests/support/."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from tests.support.paths import REPO

TESTS = REPO / "tests"
APART = {"support", "adversarial", "fixtures"}  # folders of tests/ that mirror nothing


def _folders(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__"
                  and APART.isdisjoint(p.relative_to(root).parts[:1]))


def _test_imports(path: Path) -> list[str]:
    """The modules named `test_*` that the file at `path` imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] + [a.name for a in node.names]
                 if isinstance(node, ast.ImportFrom) else [])
        found += [n for n in names if any(part.startswith("test_") for part in n.split("."))]
    return found


def misplaced(root: Path, repo: Path) -> list[str]:
    """Each folder of tests/ that names no folder of the checkout, or is not a package."""
    wrong = []
    for folder in _folders(root):
        rel = folder.relative_to(root)
        if not (repo / rel).is_dir():
            wrong.append(f"tests/{rel}/ mirrors no folder {rel}/ of the checkout")
        if not (folder / "__init__.py").is_file():
            wrong.append(f"tests/{rel}/ has no __init__.py")
    return wrong


def importing(root: Path) -> list[str]:
    return [f"{p.relative_to(root.parent)} imports {', '.join(names)}"
            for p in sorted(root.rglob("*.py")) if (names := _test_imports(p))]


# The test files at the top of tests/: checks of the whole tree or of the installed package,
# which mirror no one folder.
WHOLE_TREE = {"test_layout.py", "test_type_ignores.py", "test_wheel.py", "test_core_only.py",
              "test_test_tree.py", "test_api.py"}


def at_the_top(root: Path) -> list[str]:
    """Each test file at the top of `root` that is not a check of the whole tree."""
    return [f"tests/{p.name}: put it in the folder of what it tests (tests/engine/run/ for "
            f"engine/run/), or name it in WHOLE_TREE if it checks the whole tree"
            for p in sorted(root.glob("test_*.py")) if p.name not in WHOLE_TREE]


def test_every_folder_mirrors_one_of_the_checkout_and_is_a_package() -> None:
    assert misplaced(TESTS, REPO) == []


def test_only_the_whole_trees_checks_sit_at_the_top() -> None:
    assert at_the_top(TESTS) == []
    assert all((TESTS / name).is_file() for name in WHOLE_TREE)


def test_no_module_of_the_tests_imports_a_test_file() -> None:
    assert importing(TESTS) == []


def test_a_planted_stray_folder_and_a_test_importing_a_test_are_caught(tmp_path: Path) -> None:
    repo, root = tmp_path, tmp_path / "tests"
    (repo / "model").mkdir()
    for folder in ("model", "modle"):
        (root / folder).mkdir(parents=True)
    (root / "model" / "__init__.py").write_text("")
    (root / "model" / "test_a.py").write_text("from tests.model.test_b import helper\n")
    (root / "model" / "test_c.py").write_text("def f():\n    from test_b import x\n")
    assert misplaced(root, repo) == ["tests/modle/ mirrors no folder modle/ of the checkout",
                                     "tests/modle/ has no __init__.py"]
    assert importing(root) == ["tests/model/test_a.py imports tests.model.test_b",
                               "tests/model/test_c.py imports test_b"]
    (root / "test_proxy_new.py").write_text("")
    assert at_the_top(root) == [
        "tests/test_proxy_new.py: put it in the folder of what it tests (tests/engine/run/ for "
        "engine/run/), or name it in WHOLE_TREE if it checks the whole tree"]


# Paths of tests/ that text outside tests/ names on purpose though no such file is in the tree:
# a judged workspace's own test (docs/conformance.md) and what `python -m loopproof.proofs new`
# writes (bench/extending.py).
NOT_OURS = {"tests/check.py", "tests/proofs/test_g3_node_cap.py",
            # a judged project's tests, named by the pytest judge kind's docs and messages
            "tests/base.py", "tests/test_x.py"}
# folders that hold a judged project of their own: their tests/ paths are that project's
OWN_PROJECTS = ("examples/real-repo/",)
_NAMED = re.compile(r"(?<![\w./-])tests/[\w/.-]*\.py")


def stale(repo: Path, files: list[str]) -> list[str]:
    """Each `tests/...py` that a file of `files` (outside tests/) names and the tree lacks."""
    out = []
    for rel in files:
        if rel.startswith(("tests/", "reference-results/", *OWN_PROJECTS)):
            continue
        try:
            text = (repo / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        out += [f"{rel}: names {p}, which is not in the tree" for p in sorted(set(
            _NAMED.findall(text))) if p not in NOT_OURS and not (repo / p).is_file()]
    return out


def test_every_test_file_the_docs_and_the_code_name_exists() -> None:
    """After a test moves, a comment, a doc or a Makefile line naming its old path fails here."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    assert stale(REPO, tracked) == []


def test_a_planted_stale_path_is_caught(tmp_path: Path) -> None:
    (tmp_path / "tests" / "model").mkdir(parents=True)
    (tmp_path / "tests" / "model" / "test_here.py").write_text("")
    (tmp_path / "doc.md").write_text("see tests/test_gone.py and tests/model/test_here.py; "
                                     "a/tests/x.py is another tree's\n")
    assert stale(tmp_path, ["doc.md"]) == ["doc.md: names tests/test_gone.py, which is not in "
                                           "the tree"]
