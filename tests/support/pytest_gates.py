"""A `pytest` judge gate as the run builds it, in the run's own sandbox views, over pinned tests
written into a spec folder: shared by the tests that attack the kind
(tests/engine/run/judge/test_pytest_judge.py, tests/adversarial/test_pytest_judge_redteam.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from loopproof.engine.run.confine import RunSandbox
from loopproof.engine.run.gate import GateResult
from loopproof.engine.run.spec import load
from loopproof.engine.system.sandbox import backend

PY = sys.executable


class Gate:
    """A spec with one pytest gate over `tests` (files by name, under the spec's folder; the
    gate's `tests` field is `pinned`), as the run builds it, and its sandbox; `start`: checked
    as at run start (the collection of the pinned tests), else only the spec is written."""

    def __init__(self, root: Path, tests: dict[str, str], table: str = 'code = ["src/mypkg"]\n',
                 spec_files: dict[str, str] | None = None, python: str = PY,
                 pinned: tuple[str, ...] = ("tests",), start: bool = True) -> None:
        self.root = root
        spec = root / "spec"
        for name, text in {**tests, **(spec_files or {})}.items():
            (spec / name).parent.mkdir(parents=True, exist_ok=True)
            (spec / name).write_text(text)
        (spec / "w.py").write_text("print(1)\n")
        self.graph = spec / "graph.toml"
        self.graph.write_text(
            f'[graph]\nspend_budget = 1000.0\n\n[node.p]\nworker = ["{PY}", "w.py"]\n'
            f'spend_ceiling = 100.0\ngate_timeout_s = 60\n\n[node.p.gate]\nkind = "pytest"\n'
            f'tests = {json.dumps(list(pinned))}\npython = "{python}"\n{table}')
        self.spec = load(self.graph)
        run = RunSandbox(self.spec, backend("bwrap"), ledger=root / "L.jsonl",
                         stop_file=root / "L.stop")
        (root / "ws").mkdir()
        self.box = run.node("p", root / "ws").gate
        self.gate = self.spec.nodes["p"].gate
        if start:
            self.gate.check_start(self.box)  # as the run does

    def judge(self, name: str, files: dict[str, str], gate: Any = None) -> GateResult:
        """Judge a tree written under root/name from `files` (path in the tree -> text), by
        this spec's gate or `gate` (a variant of it, e.g. the audit's: `stop_at_failure`)."""
        tree = self.root / name
        for rel, text in files.items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text)
        return (gate or self.gate).judge(tree, self.box)


def installed_python(venv: Path, files: dict[str, str] | None = None) -> tuple[Path, Path]:
    """(python, site-packages) of a new venv made for a gate: `files` (path under
    site-packages -> text) installed in it, as pip leaves a project, and after them this
    checkout's site folders (pytest and the plugins may sit in either), by a .pth file."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], check=True, text=True,
                               capture_output=True).stdout.strip())
    for rel, text in (files or {}).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    here = dict.fromkeys([sysconfig.get_paths()["purelib"],
                          *(p for p in sys.path if "site-packages" in p)])
    (site / "zz_loopproof_dev.pth").write_text("".join(f"{p}\n" for p in here))
    return python, site
