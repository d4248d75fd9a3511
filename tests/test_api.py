"""The public API of `loopproof/__init__.py`: what `loopproof run`, `bound`, `verify` and
`resume` do, from Python, with the shipped node kinds registered (a revision node runs) and bad
input raised as `loopproof.BadInput`, one line naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

import loopproof
from tests.support.launchers import python_asked_once  # noqa: F401  (a fixture)
from tests.support.paths import REPO

# examples' `python3` (pyenv's shim, ~0.2 CPU-s a question) asked once (tests/support/launchers.py)
pytestmark = pytest.mark.usefixtures("python_asked_once")


def test_bound_run_verify_resume_from_python(tmp_path: Path) -> None:
    assert loopproof.bound(REPO / "examples" / "repair" / "graph.toml") == {
        "W": 8, "W_c": 24.0, "B": 30.0, "fits": True}
    ledger = tmp_path / "regress.jsonl"
    report = loopproof.run(REPO / "examples" / "regress-restore" / "graph.toml", ledger)
    assert (report["outcome"], report["exit"]) == ("DONE", 0)
    assert loopproof.verify(ledger).status == "verified"
    again = loopproof.resume(ledger)  # a finished run is reported as it is
    assert (again["outcome"], again["records"]) == ("DONE", report["records"])


def test_bad_input_is_one_line_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(loopproof.BadInput) as err:
        loopproof.bound(missing)
    assert str(missing) in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "l.jsonl").exists()


def test_the_api_names_are_all_there() -> None:
    assert sorted(loopproof.__all__) == sorted(
        ["BadInput", "GraphError", "LoopGraph", "NodeSpec", "Outcome", "attempt_bound", "bound",
         "resume", "run", "spend_bound", "verify"])
    for name in loopproof.__all__:
        assert getattr(loopproof, name) is not None
