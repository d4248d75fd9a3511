"""notebooks/growth.ipynb runs end to end on the results `python -m experiments.growth` writes at
smoke scale, and the study's command line keeps its contract (--json, exit codes, bad --out)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from experiments.growth import study as growth
from tests.support.notebooks import REPO, execute_notebook


def test_growth_smoke_cli_and_notebook(tmp_path: Path, capsys) -> None:
    # the command line in process (its child processes are the study's own); the exit code of
    # `python -m experiments.growth` itself is the next test's
    out = tmp_path / "growth"
    code = growth.main(["--scale", "smoke", "--seed", "0", "--out", str(out), "--json"])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    summary = json.loads(printed.out.strip().splitlines()[-1])
    assert summary["ok"] and all(summary["negative_controls"].values())
    assert "growth: crash matrix done" in printed.err  # progress is shown
    for name in ("summary.json", "arms.csv", "sweep.csv", "crash.csv", "drift.csv",
                 "killswitch.csv", "guard.csv", "negatives.csv", "timings.json"):
        assert (out / name).is_file(), name
    assert "seconds" not in (out / "summary.json").read_text()  # timings live apart
    execute_notebook("growth", tmp_path, timeout=300)
    figure = out / "growth.png"
    assert figure.is_file() and figure.stat().st_size > 10_000
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_growth_out_that_is_a_file_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "file"
    bad.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "experiments.growth", "--scale", "smoke",
                           "--out", str(bad)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "is a file" in proc.stderr and bad.read_text() == "x"
