"""The read-answer payload (engine/audit/exploits/finder.py) reads each text near the gate once
per process, whatever the number of calls and of modules it is planted in: a 100-test suite
calling it 300 times once held the gate to its 60 s limit (a timeout: an error, never a false
accept, so the audit missed that the pinned tests' own files give the answers away)."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest

from loopproof.engine.audit.exploits.finder import SOURCE

TEST_FILE = "def test_it():\n    assert m.double(21) == 42\n    assert m.double(5) == 10\n"
DATA = '{"input": [7], "expected": 14}\n'


def _planted(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(SOURCE, name, "exec"), module.__dict__)  # noqa: S102 - the payload's own text
    return module


@pytest.fixture
def fresh_process(monkeypatch):
    """The payload's state lives on `sys` (as in the gate's process): start each test without
    it, and count the parses of any text."""
    for name in ("_lp_facts_cache", "_lp_missing"):
        monkeypatch.delitem(sys.__dict__, name, raising=False)
    parsed: list[str] = []
    real = ast.parse

    def counting(text, *args, **kwargs):
        parsed.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    yield parsed
    for name in ("_lp_facts_cache", "_lp_missing"):
        sys.__dict__.pop(name, None)


def test_many_calls_from_many_modules_parse_each_text_once(tmp_path: Path, fresh_process):
    (tmp_path / "test_m.py").write_text(TEST_FILE)
    (tmp_path / "cases.jsonl").write_text(DATA)
    near = [str(tmp_path / "test_m.py")]
    modules = [_planted(f"planted{i}") for i in range(5)]
    for _ in range(40):
        for m in modules:
            assert m._lp_search(near, [21], "-") == 42
            assert m._lp_search(near, [5], "-") == 10
            assert m._lp_search(near, [7], "-") == 14  # from the JSON beside it
    texts = [t for t in fresh_process if isinstance(t, str)]
    assert sorted(texts) == sorted({TEST_FILE, DATA}), "a text was parsed more than once"


def test_a_text_that_changes_is_read_again(tmp_path: Path, fresh_process):
    """The facts are keyed by the text itself: a file the gate rewrites between calls is
    searched as it is now, never as it was."""
    planted = _planted("planted")
    path = tmp_path / "test_m.py"
    path.write_text(TEST_FILE)
    assert planted._lp_search([str(path)], [21], "-") == 42
    path.write_text(TEST_FILE.replace("42", "43"))
    assert planted._lp_search([str(path)], [21], "-") == 43


def test_facts_found_by_one_planted_module_answer_in_another(tmp_path: Path, fresh_process):
    """Every planted module shares the cache, so they must share its 'nothing found' marker: a
    pair whose answer is no literal is no answer in any module."""
    (tmp_path / "test_m.py").write_text("CASES = [(4, x)]\n\n\ndef test_it():\n"
                                        "    assert m.triple(3) == 9\n")
    near = [str(tmp_path / "test_m.py")]
    first, second = _planted("first"), _planted("second")
    assert first._lp_search(near, [3], "-") == 9
    assert second._lp_search(near, [3], "-") == 9
    assert first._lp_search(near, [4], "-") is first._LP_MISSING
    assert second._lp_search(near, [4], "-") is second._LP_MISSING
