"""The mutant experiment at smoke scale: repaired gates pass tier 1, the run is byte-identical for a
seed on a small synthetic catalogue, and the notebook draws its figure from the smoke results."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.mutants import study as mutants
from tests.support.audit_helpers import SOUND, make_loop
from tests.support.notebooks import execute_notebook


def test_smoke_experiment_and_notebook(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mutants"
    assert mutants.main(["--scale", "smoke", "--seed", "0", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["before"]["flagged"] >= 2 and summary["repaired"]
    assert summary["after"]["tier1"]["false_accepts"] == 0
    assert summary["after"]["tier1_false_accepts_remaining"] == []
    assert summary["after"]["tier2"]["destroying"] > 0
    assert (out / "timing.json").is_file()
    execute_notebook("mutants", tmp_path)
    figure = out / "mutants.png"
    assert figure.is_file() and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_protocol_repairs_then_holds_out_tier_two_byte_identically(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog"
    make_loop(catalog, "sound", SOUND)
    make_loop(catalog, "lax", 'verdict(read("solution.py") is not None)\n',
              repaired='ns = {}\nexec(read("solution.py"), ns)\nverdict(ns["add"](0, 0) == 0)\n')
    runs = []
    for name in ("one", "two"):
        summary, timing = mutants.run("default", 3, tmp_path / name, jobs=2, catalog=catalog)
        runs.append(summary)
        assert timing["gate_runs"] > 0
    first, second = (tmp_path / "one", tmp_path / "two")
    for name in ("summary.json", "gates.csv", "audit_before.json", "audit_after.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    summary = runs[0]
    assert summary["repaired"] == ["lax"] and summary["before"]["vacuous"] == 1
    assert summary["after"]["vacuous"] == 0 and summary["after"]["tier1"]["false_accepts"] == 0
    # The repair checks one input; the held-out family finds what it lets through.
    assert summary["after"]["tier2"]["false_accepts"] >= 1
