"""Each notebook runs end to end against results its experiment writes at smoke scale.

To add a notebook: run its experiment with `--scale smoke --out tmp_path/<name>`, then
`execute_notebook("<name>", tmp_path)`, then check the figure file it saves (tests/notebooks.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from notebooks import REPO, execute_notebook


def smoke(name: str, root: Path, *extra: str) -> Path:
    """Run `python -m experiments.<name>` at smoke scale into root/<name>; return that directory."""
    out = root / name
    subprocess.run([sys.executable, "-m", f"experiments.{name}", "--scale", "smoke", "--seed", "0",
                    "--out", str(out), *extra], check=True, cwd=REPO, capture_output=True, timeout=300)
    return out


def test_bounds_notebook(tmp_path: Path) -> None:
    out = smoke("bounds", tmp_path, "--workers", "1")
    execute_notebook("bounds", tmp_path)
    figure = out / "bounds.png"
    assert figure.is_file() and figure.stat().st_size > 10_000
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
