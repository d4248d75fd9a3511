"""One name for the bounds: W and W_c, with one gloss, in `bound`, in the run report and in
`show` (they were `attempts`/`spend`, `attempt_bound` and W/W_c)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.model.bounds import GLOSS
from tests.support.launchers import python_asked_once  # noqa: F401  (a fixture)
from tests.support.paths import REPO

REPAIR = REPO / "examples" / "repair" / "graph.toml"

# examples' `python3` (pyenv's shim, ~0.2 CPU-s a question) asked once (tests/support/launchers.py)
pytestmark = pytest.mark.usefixtures("python_asked_once")


def out(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_w_and_w_c_everywhere(tmp_path: Path, capsys) -> None:
    code, text = out(capsys, "bound", str(REPAIR), "--json")
    assert code == 0 and json.loads(text) == {"W": 8, "W_c": 24.0, "B": 30.0, "fits": True}
    code, text = out(capsys, "bound", str(REPAIR))
    assert "W = 8 attempts, W_c = 24 spend units" in text and GLOSS in text
    ledger = tmp_path / "L.jsonl"
    code, text = out(capsys, "run", str(REPAIR), "--ledger", str(ledger), "--json")
    report = json.loads(text)
    assert (report["W"], report["W_c"]) == (8, 24.0) and "attempt_bound" not in report
    code, text = out(capsys, "resume", "--ledger", str(ledger))
    assert "attempts of W = 8" in text and "bound" not in text
    code, text = out(capsys, "show", str(ledger))
    assert "bound: W = 8 attempts, W_c = 24 spend units" in text and GLOSS in text
    first = json.loads(ledger.read_text().splitlines()[0])
    assert first["bounds"] == {"W": 8, "W_c": 24.0, "B": 30.0, "fits": True}
    assert "attempt_bound" not in first


def test_a_ledger_written_with_the_old_names_still_reads(tmp_path: Path, capsys) -> None:
    from loopproof.engine.record.replay import run_bounds
    old = {"attempt_bound": 8, "bounds": {"attempts": 8, "spend": 24.0, "budget": 30.0,
                                          "fits": True}}
    assert run_bounds(old) == {"W": 8, "W_c": 24.0}
