"""`loopproof audit` end to end: a malformed catalogue is exit 2 naming the loop and the field;
a real audit is exit 0 with the documented JSON, on a few loops of the shipped catalogue."""

from __future__ import annotations

import json
import shutil

import pytest

from loopproof.engine.audit.catalogue import load_catalogue
from loopproof.engine.cli import main
from tests.support.audit_helpers import SOUND, make_loop
from tests.support.paths import REPO

CATALOG = REPO / "examples" / "catalog"


def audit_json(capsys, *argv: str) -> dict:
    assert main(["audit", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_shipped_catalogue_loads_with_forty_loops_each_with_an_oracle():
    loops = load_catalogue(CATALOG)
    assert len(loops) >= 40
    assert all(lp.oracle is not None and lp.description for lp in loops)
    kinds = {lp.artifact_files[0].rsplit(".", 1)[-1] for lp in loops}
    assert {"py", "json", "md", "csv"} <= kinds


def test_real_loops_are_classified(tmp_path, capsys):
    chosen = ("he000-full-check", "he005-imports", "config-validation-report", "readme-sections")
    for name in chosen:
        shutil.copytree(CATALOG / name, tmp_path / name)
    out = audit_json(capsys, str(tmp_path), "--tier", "1", "--jobs", "2")
    gates = {g["gate"]: g for g in out["gates"]}
    assert set(gates) == set(chosen)
    for sound in ("he000-full-check", "readme-sections"):
        assert (gates[sound]["vacuous"], gates[sound]["self_attesting"]) == (False, False)
        assert gates[sound]["tiers"]["1"]["false_accepts"] == 0
    assert gates["he005-imports"]["vacuous"] and not gates["he005-imports"]["self_attesting"]
    report = gates["config-validation-report"]
    assert report["vacuous"] and report["self_attesting"]
    assert any(t.startswith("validation.json") for t in report["self_attesting_on"])
    tier = gates["he000-full-check"]["tiers"]["1"]
    assert set(tier) >= {"mutants", "destroying", "false_accepts", "alpha", "alpha_upper95"}
    summary = out["summary"]
    assert summary["loops"] == 4 and summary["vacuous"] == 2 and summary["self_attesting"] == 1
    assert summary["wall_s"] > 0 and summary["mutants_per_s"] > 0


def test_tier_two_only_still_reports_vacuity(tmp_path, capsys):
    make_loop(tmp_path, "lax", 'verdict(True)\n')
    out = audit_json(capsys, str(tmp_path), "--tier", "2", "--max-tier2", "3")
    g = out["gates"][0]
    assert g["vacuous"] and set(g["tiers"]) == {"2"} and g["tiers"]["2"]["mutants"] == 3


@pytest.mark.parametrize(("edit", "field"), [
    (lambda t: t.replace('timeout_s = 5', 'timeout_s = -1'), "gate.timeout_s"),
    (lambda t: t.replace('run = ["{python}", "-I", "-S", "{gate}/check.py", "{workspace}"]',
                         'run = "check.py"'), "gate.run"),
    (lambda t: t.replace('files = ["solution.py"]', 'files = ["missing.py"]'), "artifact.files"),
    (lambda t: t.replace("[artifact]", "[artifact]\nfile = 1"), "artifact.file"),
    (lambda t: t.replace('id = "bad"', ""), "loop.id"),
    (lambda t: t.replace("{workspace}", "{workdir}", 1), "gate.run"),
    (lambda t: t + "[extra]\n", "extra"),
])
def test_malformed_catalogue_is_exit_2_naming_loop_and_field(tmp_path, capsys, edit, field):
    make_loop(tmp_path, "good", SOUND)
    bad = make_loop(tmp_path, "bad", SOUND)
    toml = bad / "loop.toml"
    toml.write_text(edit(toml.read_text()))
    assert main(["audit", str(tmp_path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    message = captured.err.strip()
    assert "\n" not in message and "bad" in message and field in message and "fix:" in message


def test_duplicate_ids_and_empty_folders_are_bad_input(tmp_path, capsys):
    assert main(["audit", str(tmp_path)]) == 2
    make_loop(tmp_path, "one", SOUND)
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    assert main(["audit", str(tmp_path)]) == 2
    assert "duplicate id" in capsys.readouterr().err
