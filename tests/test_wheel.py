"""`pip install .` installs one package, `loopproof`, and it works away from the checkout.

The wheel is built from the tree (its subpackages are the checkout's model/, engine/ and proofs/
through the links in loopproof/), installed with no dependencies into a fresh venv whose
dependencies come from this environment's site-packages by path (a path in a .pth file is not a
site directory, so this environment's editable install of the checkout is not seen there). From a
folder outside the checkout, the proofs (a Coq obligation among them: its sources are package data)
and `loopproof run` of an example must work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.support.paths import REPO


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_the_wheel_installs_only_loopproof_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w",
                  str(wheels)], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("loopproof-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"loopproof", "loopproof-0.1.0.dist-info"}
    tops = {n.split("/")[1] for n in names if n.startswith("loopproof/") and n.count("/") >= 2}
    assert tops == {"model", "engine", "proofs"}, tops
    assert "loopproof/proofs/coq/Loopproof.v" in names

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                      "--no-deps", "--no-index", str(wheel)], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    ours = sorted(p.name for p in site.iterdir() if not p.name.endswith((".pth", "-info"))
                  and p.name != "__pycache__")
    assert ours == ["loopproof"], ours

    away = tmp_path / "elsewhere"
    away.mkdir()
    # the Coq build is cached per source hash: the checkout's build serves the wheel's sources too
    env = dict(os.environ, LOOPPROOF_CACHE=str(REPO / "build"))
    where = _run([str(python), "-c", "import loopproof.proofs.coq as c, loopproof.engine as e; "
                  "print(c.SOURCE_DIR); print(e.__file__)"], cwd=away, env=env)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout

    proofs = _run([str(python), "-m", "loopproof.proofs", "--json", "--only", "G6-policy-pinned",
                   "G1-coq-W-bound"], cwd=away, env=env)
    assert proofs.returncode == 0, proofs.stdout[-2000:] + proofs.stderr[-2000:]
    report = json.loads(proofs.stdout)
    assert {r["prover"] for r in report} == {"z3", "coq"}, report
    assert all(r["result"] == r["expect"] for r in report), report

    ledger = tmp_path / "repair.jsonl"
    ran = _run([str(venv / "bin" / "loopproof"), "run", str(REPO / "examples" / "repair" / "graph.toml"),
                "--ledger", str(ledger), "--json"], cwd=away, env=env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert json.loads(ran.stdout)["outcome"] == "DONE"
