"""Each notebook runs end to end against results its experiment writes at smoke scale.

To add a notebook: run its experiment with `--scale smoke --out tmp_path/<name>`, then
`execute_notebook("<name>", tmp_path)`, then check the figure file it saves (tests/support/notebooks.py)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

from experiments import figures
from tests.support.notebooks import REPO, execute_notebook


def smoke(name: str, root: Path, *extra: str) -> Path:
    """Run experiments.<name>'s command line (what `python -m experiments.<name>` runs) at smoke
    scale into root/<name>, in this process (a child would import it all again); return that
    directory."""
    out = root / name
    main = importlib.import_module(f"experiments.{name}.study").main
    assert main(["--scale", "smoke", "--seed", "0", "--out", str(out), *extra]) == 0
    return out


def test_bounds_notebook(tmp_path: Path) -> None:
    out = smoke("bounds", tmp_path, "--workers", "1")
    execute_notebook("bounds", tmp_path)
    figure = out / "bounds.png"
    assert figure.is_file() and figure.stat().st_size > 10_000
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_integrity_notebook_its_executed_copy_and_no_noise_on_stderr(
        tmp_path: Path, integrity_smoke: tuple[Path, dict]) -> None:
    """Through `python -m experiments.figures` (what make figures runs): no kernel noise on
    stderr (the debugger's frozen-modules warning, ipykernel's plain-TCP warning), the figure
    saved, the executed copy holding it, the notebook in git left unexecuted. (One smoke run and
    one execution for all four: they were two tests that did both twice. The smoke run is the
    session's, tests/experiments/conftest.py, copied here: the notebook writes into it.)"""
    out = tmp_path / "integrity"
    shutil.copytree(integrity_smoke[0] / "integrity", out)
    done = subprocess.run([sys.executable, "-m", "experiments.figures", "--results",
                           str(tmp_path), "--only", "integrity"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("integrity: executed in ")
    figure = out / "integrity.png"
    assert figure.is_file() and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    nbformat = figures.nbformat()
    copy = nbformat.read(tmp_path / "notebooks" / "integrity.ipynb", as_version=4)
    images = [o for c in copy.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert images  # the executed copy holds the figure
    assert nbformat.read(REPO / "notebooks" / "integrity.ipynb", as_version=4).cells[2].outputs == []
