"""Family: the gate runs the worker's code. A hostile worker leaves files that a gate's
interpreter would pick up on its own (a `.pth` file in the gate's per-user site-packages, a
module shadowing what `python -m` imports, a fake `python3` earlier on PATH, a version file a
Python shim reads in the working directory). Each worker writes a wrong answer; the node must
not end DONE, under the default sandbox and under `sandbox = "none"`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load

# An interpreter outside the venv: a venv's python never reads per-user site-packages.
BASE_PY = str(Path(sys.base_prefix) / "bin" / "python3")
CHECK = "import sys\nsys.exit(0 if open('answer.txt').read().strip() == '42' else 1)\n"
BACKENDS = ["default", "none"]


def spec(tmp_path: Path, worker: list[str], gate: list[str], backend: str,
         extra: str = "") -> Path:
    sandbox = "" if backend == "default" else f'sandbox = "{backend}"\n'
    (tmp_path / "check.py").write_text(CHECK)
    path = tmp_path / "graph.toml"
    path.write_text(f"[graph]\nspend_budget = 60.0\n{sandbox}{extra}[node.a]\n"
                    f"worker = {json.dumps(worker)}\ngate = {json.dumps(gate)}\n"
                    "spend_ceiling = 20.0\ntimeout_s = 20\ngate_timeout_s = 20\n")
    return path


def run(path: Path, ledger: Path) -> tuple[int, list[dict]]:
    runner = Runner.start(load(path), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    return code, [json.loads(x) for x in ledger.read_text().splitlines()]


def verdicts(records: list[dict]) -> list[str]:
    return [r["verdict"] for r in records if r["type"] == "verdict"]


@pytest.fixture
def engine_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The engine's temp folder, inside the test's folder (what a worker writes there on an
    unprotected engine cannot reach other tests)."""
    tmp = tmp_path / "engine-tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp


WRITE_PTH = """
import os, sys
open("answer.txt", "w").write("41\\n")
ver = "python%d.%d" % sys.version_info[:2]
payload = "import os; os.path.exists('answer.txt') and os._exit(0)\\n"
for base in {os.environ.get("HOME", ""), os.environ.get("TMPDIR", "")}:
    site = os.path.join(base, ".local", "lib", ver, "site-packages")
    try:
        os.makedirs(site, exist_ok=True)
        open(os.path.join(site, "zz-worker.pth"), "w").write(payload)
    except OSError:
        pass
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pth_file_in_the_gates_home_does_not_run_in_the_gate(tmp_path: Path, engine_tmp: Path,
                                                               backend: str) -> None:
    (tmp_path / "worker.py").write_text(WRITE_PTH)
    path = spec(tmp_path, [BASE_PY, "worker.py"], [BASE_PY, "check.py"], backend)
    code, records = run(path, tmp_path / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3


SHADOW = """
import os
open("answer.txt", "w").write("forty-one\\n")
os.makedirs("json", exist_ok=True)
open("json/__init__.py", "w").write("raise SystemExit(0)\\n")
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_module_in_the_workspace_does_not_shadow_what_python_m_imports(
        tmp_path: Path, backend: str) -> None:
    (tmp_path / "worker.py").write_text(SHADOW)
    # the gate: `python -m json.tool answer.txt` fails (exit 1) on a file that is not JSON;
    # the worker's json/ package would exit 0 first
    path = spec(tmp_path, [sys.executable, "worker.py"],
                [sys.executable, "-m", "json.tool", "answer.txt"], backend)
    code, records = run(path, tmp_path / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fake_python3_earlier_on_path_is_not_the_gates_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    userbin = tmp_path / "userbin"  # a folder on the engine's PATH the worker's user can write
    userbin.mkdir()
    monkeypatch.setenv("PATH", f"{userbin}{os.pathsep}{os.environ['PATH']}")
    fake = userbin / "python3"
    worker = ["sh", "-c", f"echo 41 > answer.txt; printf '#!/bin/sh\\nexit 0\\n' > {fake}; "
                          f"chmod +x {fake}"]
    path = spec(tmp_path, worker, ["python3", "check.py"], backend)
    code, records = run(path, tmp_path / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3


SHIM = """#!/bin/sh
# a Python version manager's shim: the version file in the working directory picks the version
if [ -f .python-version ]; then
  v=$(cat .python-version)
  if [ -x "{root}/versions/$v/bin/python3" ]; then exec "{root}/versions/$v/bin/python3" "$@"; fi
fi
exec {real} "$@"
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_version_file_in_the_workspace_does_not_pick_the_gates_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    root = tmp_path / "pyenv"  # the version manager's folder, writable by the engine's user
    (root / "shims").mkdir(parents=True)
    (root / "versions").mkdir()
    shim = root / "shims" / "python3"
    shim.write_text(SHIM.format(root=root, real=sys.executable))
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{root / 'shims'}{os.pathsep}{os.environ['PATH']}")
    evil = root / "versions" / "evil" / "bin" / "python3"
    worker = ["sh", "-c", f"echo 41 > answer.txt; echo evil > .python-version; "
                          f"mkdir -p {evil.parent}; printf '#!/bin/sh\\nexit 0\\n' > {evil}; "
                          f"chmod +x {evil}"]
    path = spec(tmp_path, worker, ["python3", "check.py"], backend)
    code, records = run(path, tmp_path / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3
