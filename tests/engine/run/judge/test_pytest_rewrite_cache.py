"""The `pytest` kind lays pytest's own rewrite of each pinned test module, made by the collection
(where no judged code runs), beside the pinned file in each run (engine/run/judge/pytest_tree.py,
`rewritten_tests` and `lay_rewritten`): a run skips the rewrite, about a third of a 100-test
suite's start. What must hold: a rewrite is laid only for the bytes it was made from, the run
really reads it (else it saves nothing), and verdicts are what they were without it."""

from __future__ import annotations

import dataclasses
import importlib.util
import marshal
from pathlib import Path
from typing import Any

import pytest

from loopproof.engine.run.judge import pytest_gate
from loopproof.engine.run.judge.pytest_tree import PYCACHE, Rewritten, lay_rewritten
from tests.support.pytest_gates import Gate

TEST_ADD = "from mypkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
TEST_MORE = "import colorsys\n\n" + TEST_ADD.replace("test_add", "test_more")
CONFTEST = "import pytest\n"
RIGHT = {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": "def add(a, b):\n    return a + b\n"}
WRONG = {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": "def add(a, b):\n    return a - b\n"}


def _pyc_of(source: str, filename: str, pinned: str) -> bytes:
    """A checked-hash pyc of `source` for the pinned text `pinned`, as pytest 9 writes its
    rewrites."""
    code = compile(source, filename, "exec")
    return (importlib.util.MAGIC_NUMBER + b"\x03\x00\x00\x00"
            + importlib.util.source_hash(pinned.encode())[:8] + marshal.dumps(code))


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> tuple[Gate, list[str]]:
    """A gate over a tests package with a conftest and two test modules (one imports a module
    of the standard library that nothing else does), and every file its collection left under
    the rewrites' folder (read by the tests; the one that swaps a rewrite puts it back)."""
    left: list[str] = []
    real = pytest_gate.rewritten_tests

    def seen(tree: Path, laid: Any) -> Any:
        left.extend(sorted(str(p.relative_to(tree / PYCACHE)) for p in
                           (tree / PYCACHE).rglob("*") if p.is_file()))
        return real(tree, laid)

    pytest_gate.rewritten_tests = seen  # type: ignore[assignment]  # the collection at start
    try:
        gate = Gate(tmp_path_factory.mktemp("rewrites"), {
            "tests/__init__.py": "", "tests/conftest.py": CONFTEST,
            "tests/test_add.py": TEST_ADD, "tests/test_more.py": TEST_MORE})
    finally:
        pytest_gate.rewritten_tests = real
    return gate, left


def test_the_collection_makes_one_rewrite_per_pinned_test_module(collected) -> None:
    """One rewrite per pinned module pytest rewrites (the test modules, the conftest), and
    nothing else written: what pytest and the tests import (here `colorsys`) is read from its
    own bytecode, never compiled again into the rewrites' folder (before: the whole
    collection ran with that folder as `sys.pycache_prefix`, so pytest's plugins and the
    standard library were compiled from source there, about half its time)."""
    gate, left = collected
    made = gate.gate.collected["rewritten"]
    assert sorted(r.source for r in made) == ["tests/conftest.py", "tests/test_add.py",
                                              "tests/test_more.py"]
    for r in made:
        assert r.pyc.startswith("tests/__pycache__/") and "-pytest-" in r.pyc
    assert len(left) == 3 and all("/tests/__pycache__/" not in f and "-pytest-" in f
                                  and f.split("/")[-2] == "tests" for f in left), left
    assert gate.judge("right", RIGHT).verdict == "accept"


def test_a_run_reads_the_laid_rewrite(collected) -> None:
    """Swap the collection's rewrites of the test modules for the code of tests that always
    pass (same source hashes): the wrong tree, rejected with them, is then accepted, so the run
    executed the laid modules and not the sources. (The engine makes these files itself, from
    the pinned bytes, in a run with no judged code: only a fault in the engine could swap
    them.)"""
    gate, _ = collected
    assert gate.judge("wrong", WRONG).verdict == "reject"
    made = gate.gate.collected["rewritten"]
    always = {"tests/test_add.py": ("test_add", TEST_ADD),
              "tests/test_more.py": ("test_more", TEST_MORE)}
    swapped = tuple(dataclasses.replace(r, data=_pyc_of(
        f"import mypkg\n\n\ndef {always[r.source][0]}():\n    pass\n", r.source,
        always[r.source][1])) if r.source in always else r for r in made)
    gate.gate.collected["rewritten"] = swapped
    try:
        assert gate.judge("wrong-again", WRONG).verdict == "accept"
    finally:
        gate.gate.collected["rewritten"] = made


def test_a_rewrite_of_other_bytes_is_never_laid(tmp_path: Path) -> None:
    """A pinned file that no longer has the bytes the rewrite was made from gets no rewrite:
    pytest rewrites it itself, so the run judges with the file as it is."""
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_add.py").write_text(TEST_ADD.replace("== 3", "== 4"))
    stale = Rewritten("tests/test_add.py", "tests/__pycache__/test_add.x-pytest-0.pyc",
                      b"stale", "0" * 64, 0)
    lay_rewritten(tree, [stale])
    assert not (tree / "tests" / "__pycache__").exists()


def test_a_laid_rewrite_keeps_its_source_time(tmp_path: Path) -> None:
    """A pytest whose cache checks the source's time and size finds them as at the collection."""
    import hashlib

    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    source = tree / "tests" / "test_add.py"
    source.write_text(TEST_ADD)
    good = Rewritten("tests/test_add.py", "tests/__pycache__/test_add.x-pytest-0.pyc", b"pyc",
                     hashlib.sha256(TEST_ADD.encode()).hexdigest(), 1_234_567_890_000_000_000)
    lay_rewritten(tree, [good])
    assert (tree / good.pyc).read_bytes() == b"pyc"
    assert source.stat().st_mtime_ns == good.mtime_ns
