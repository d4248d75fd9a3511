"""Red team: a `writable` path that holds the gate's interpreter installation.

An operator lets the worker install packages into a venv (`writable = ["venv"]`) and the gate
runs the same venv's python. The interpreter file is pinned, but its site-packages are not: a
`.pth` file the worker writes there runs at every start of the gate's interpreter. The run must
refuse such a `writable` at start (exit 2, nothing written), like one that holds a gate file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load
from loopproof.engine.system.errors import BadInput

PLANT = """
import glob, os
open("answer.txt", "w").write("41\\n")
for site in glob.glob(os.path.join(os.environ.get("VENV", "{venv}"), "lib", "python*",
                                   "site-packages")):
    open(os.path.join(site, "zz-worker.pth"), "w").write(
        "import os; os.path.exists('answer.txt') and os._exit(0)\\n")
"""


@pytest.mark.parametrize("where", ["venv", "venv/lib"])
def test_a_writable_path_holding_the_gates_interpreter_is_refused(tmp_path: Path,
                                                                  where: str) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (tmp_path / "plant.py").write_text(PLANT.format(venv=venv))
    (tmp_path / "check.py").write_text(
        "import sys\nsys.exit(0 if open('answer.txt').read().strip() == '42' else 1)\n")
    path = tmp_path / "graph.toml"
    path.write_text("[graph]\nspend_budget = 60.0\n[node.a]\n"
                    f"worker = {json.dumps([sys.executable, 'plant.py'])}\n"
                    f"gate = {json.dumps([str(venv / 'bin' / 'python'), 'check.py'])}\n"
                    f"writable = {json.dumps([where])}\n"
                    "spend_ceiling = 20.0\ntimeout_s = 20\ngate_timeout_s = 20\n")
    ledger = tmp_path / "L.jsonl"
    with pytest.raises(BadInput, match="writable"):
        runner = Runner.start(load(path), ledger)
        try:
            runner.run()
        finally:
            runner.close()
    assert not ledger.exists()
    assert not list(venv.glob("lib/python*/site-packages/zz-worker.pth"))
