"""Red team: code planted in the gate interpreter's own installation.

`PYTHONNOUSERSITE=1` keeps per-user site-packages out of a gate, and pins cover the interpreter
file itself, but every `.pth` file in the interpreter's *own* site-packages runs at start-up,
and nothing pins that folder. A gate interpreter in a venv the engine's user owns (the common
case) is therefore writable by an unsandboxed worker. Under the default sandbox the whole host
is read-only, so the plant fails and the wrong answer is rejected. Under `sandbox = "none"` it
succeeds, and the warning and docs/threat-model.md must say so (they do: this test reads both).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopproof.engine.commands._report import UNSANDBOXED_WARNING
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load

ROOT = Path(__file__).resolve().parents[2]

PLANT = """
import glob, os, sys
open("answer.txt", "w").write("41\\n")
for site in glob.glob(os.path.join(sys.argv[1], "lib", "python*", "site-packages")):
    try:
        open(os.path.join(site, "zz-worker.pth"), "w").write(
            "import os; os.path.exists('answer.txt') and os._exit(0)\\n")
    except OSError as exc:
        print("denied", site, exc)
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of the engine's user: the gate's interpreter."""
    path = tmp_path_factory.mktemp("gate-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


@pytest.mark.parametrize("backend", ["default", "none"])
def test_a_pth_file_in_the_gate_interpreters_site_packages(tmp_path: Path, venv: Path,
                                                          backend: str) -> None:
    for old in venv.glob("lib/python*/site-packages/zz-worker.pth"):
        old.unlink()
    (tmp_path / "plant.py").write_text(PLANT)
    (tmp_path / "check.py").write_text(
        "import sys\nsys.exit(0 if open('answer.txt').read().strip() == '42' else 1)\n")
    sandbox = "" if backend == "default" else 'sandbox = "none"\n'
    py = str(venv / "bin" / "python")
    path = tmp_path / "graph.toml"
    path.write_text(f"[graph]\nspend_budget = 60.0\n{sandbox}[node.a]\n"
                    f"worker = {json.dumps([sys.executable, 'plant.py', str(venv)])}\n"
                    f"gate = {json.dumps([py, 'check.py'])}\n"
                    "spend_ceiling = 20.0\ntimeout_s = 20\ngate_timeout_s = 20\n")
    runner = Runner.start(load(path), tmp_path / "L.jsonl")
    try:
        code = runner.run()
    finally:
        runner.close()
    records = [json.loads(x) for x in (tmp_path / "L.jsonl").read_text().splitlines()]
    verdicts = [r["verdict"] for r in records if r["type"] == "verdict"]
    planted = list(venv.glob("lib/python*/site-packages/zz-worker.pth"))
    for p in planted:
        p.unlink()
    if backend == "default":
        assert verdicts == ["reject"] and code == 3 and planted == []
    else:  # given up, and said so where the operator reads it
        assert verdicts == ["accept"] and planted
        assert "interpreter" in UNSANDBOXED_WARNING
        doc = (ROOT / "docs" / "threat-model.md").read_text()
        assert "site-packages" in doc[doc.index("## What `sandbox = \"none\"` gives up"):]
