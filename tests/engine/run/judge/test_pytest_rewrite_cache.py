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

from loopproof.engine.run.judge.pytest_tree import Rewritten, lay_rewritten
from tests.support.pytest_gates import Gate

TEST_ADD = "from mypkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
RIGHT = {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": "def add(a, b):\n    return a + b\n"}
WRONG = {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": "def add(a, b):\n    return a - b\n"}


def _pyc_of(source: str, filename: str) -> bytes:
    """A checked-hash pyc of `source`, as pytest 9 writes its rewrites."""
    code = compile(source, filename, "exec")
    return (importlib.util.MAGIC_NUMBER + b"\x03\x00\x00\x00"
            + importlib.util.source_hash(TEST_ADD.encode())[:8] + marshal.dumps(code))


def test_the_collection_makes_one_rewrite_per_pinned_test_module(tmp_path: Path) -> None:
    gate = Gate(tmp_path, {"tests/__init__.py": "", "tests/test_add.py": TEST_ADD,
                           "tests/test_more.py": TEST_ADD.replace("test_add", "test_more")})
    made = gate.gate.collected["rewritten"]
    assert sorted(r.source for r in made) == ["tests/test_add.py", "tests/test_more.py"]
    for r in made:
        assert r.pyc.startswith("tests/__pycache__/") and "-pytest-" in r.pyc
    assert gate.judge("right", RIGHT).verdict == "accept"
    assert gate.judge("wrong", WRONG).verdict == "reject"


def test_a_run_reads_the_laid_rewrite(tmp_path: Path) -> None:
    """Swap the collection's rewrite of tests/test_add.py for the code of a test that always
    passes (same source hash): the wrong tree is then accepted, so the run executed the laid
    module and not the source. (The engine makes these files itself, from the pinned bytes, in
    a run with no judged code: only a fault in the engine could swap them.)"""
    gate = Gate(tmp_path, {"tests/test_add.py": TEST_ADD})
    (made,) = gate.gate.collected["rewritten"]
    assert gate.judge("wrong", WRONG).verdict == "reject"
    always = _pyc_of("import mypkg\n\n\ndef test_add():\n    pass\n", "tests/test_add.py")
    gate.gate.collected["rewritten"] = (dataclasses.replace(made, data=always),)
    assert gate.judge("wrong-again", WRONG).verdict == "accept"


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
