"""bench/audit.py's subject has the shape issue 35 names (17 modules, about 12,000 lines, a
100-test suite), the same bytes for a seed, and its suite passes on the tree it was made from
and fails on a mutant of it (so the audit's gate is a real judge, not a vacuous one). The timed
audit itself is `make bench` (minutes); its figure is reported against TARGET_S."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.audit import TARGET_S, subject
from bench.audit_tree import write


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _suite(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(folder / "tests")], cwd=folder / "tree", capture_output=True,
                          text=True, check=False,
                          env={"PYTHONPATH": str(folder / "tree"), "PATH": "/usr/bin:/bin",
                               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})


def test_the_bench_subject_has_the_shape_and_a_suite_that_judges_it(tmp_path: Path) -> None:
    graph, size = subject(tmp_path / "a")
    assert size["modules"] == 17 and 11_000 <= size["lines"] <= 14_000 and size["tests"] == 100
    modules = sorted((tmp_path / "a" / "tree" / "kit").glob("m*.py"))
    assert len(modules) == 17
    tests = "".join(p.read_text() for p in (tmp_path / "a" / "tests").glob("test_*.py"))
    assert tests.count("\ndef test_") == 100
    assert all(f"from kit import {m.stem}" in tests for m in modules)  # every module imported
    assert 'kind = "pytest"' in graph.read_text() and TARGET_S == 180.0
    write(tmp_path / "b")
    assert _tree_bytes(tmp_path / "a" / "tree") == _tree_bytes(tmp_path / "b" / "tree")
    assert _tree_bytes(tmp_path / "a" / "tests") == _tree_bytes(tmp_path / "b" / "tests")
    ran = _suite(tmp_path / "a")
    assert ran.returncode == 0 and "100 passed" in ran.stdout, ran.stdout[-500:]
    first = modules[0]
    first.write_text(first.read_text().replace("    return ", "    return 1 + ", 3))
    ran = _suite(tmp_path / "a")
    assert ran.returncode == 1 and "failed" in ran.stdout
