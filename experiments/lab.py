"""`make notebook`: JupyterLab on notebooks/, from this environment, as root or as a user.

    python -m experiments.lab [--results results] [--port 8888] [--no-browser]

Why a launcher and not one Make line: JupyterLab refuses to start as root ("Running as root is
not recommended. Use --allow-root to bypass.") and a container or CI runs as root, so the flag
depends on who runs it; the server listens on the loopback address only; the notebooks need
LOOPPROOF_RESULTS and the project's kernel (experiments.figures.install_kernel); and the test
starts this same command, lists the notebooks over the server's API and stops it
(tests/experiments/test_lab.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from experiments.figures import IRI_GRAMMAR, NOTEBOOKS, install_kernel

LOOPBACK = "127.0.0.1"
# What `jupyter lab` runs (the jupyter-lab script: jupyterlab.labapp.main), in this interpreter,
# with IRI_GRAMMAR kept out (experiments/figures.py): half of the server's start-up CPU.
SERVER = (f"import sys; sys.modules[{IRI_GRAMMAR!r}] = None; "
          "from jupyterlab.labapp import main; sys.exit(main())")


def argv(port: int, browser: bool, uid: int | None = None) -> list[str]:
    """The JupyterLab server's command line: loopback only, notebooks/ as its root,
    --allow-root when run as root (uid 0)."""
    uid = os.getuid() if uid is None else uid
    cmd = [sys.executable, "-c", SERVER, f"--ServerApp.ip={LOOPBACK}",
           f"--ServerApp.port={port}", f"--ServerApp.root_dir={NOTEBOOKS}"]
    if not browser:
        cmd.append("--no-browser")
    if uid == 0:
        cmd.append("--allow-root")
    return cmd


def main(args_in: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.lab", description=__doc__.split(
        "\n")[0])
    p.add_argument("--results", type=Path, default=NOTEBOOKS.parent / "results",
                   help="the results root the notebooks read (LOOPPROOF_RESULTS)")
    p.add_argument("--port", type=int, default=8888, help="0: any free port")
    p.add_argument("--no-browser", action="store_true")
    args = p.parse_args(args_in)
    if importlib.util.find_spec("jupyterlab") is None:
        print(f"python -m experiments.lab: JupyterLab is not installed in {sys.prefix}; fix: "
              "make notebook (it installs the [notebook] extra)", file=sys.stderr)
        return 2
    results = args.results.resolve()
    try:
        studies = sorted(p.name for p in results.iterdir() if p.is_dir())
    except OSError:  # absent (a fresh clone) or not readable by this user
        studies = []
    print(f"kernel: {install_kernel()}")
    print(f"notebooks: {NOTEBOOKS}; they read {results}/"
          + (f" ({', '.join(studies)})" if studies else
             " (empty: run make reproduce first, or the notebooks say what is missing)"),
          flush=True)
    cmd = argv(args.port, browser=not args.no_browser)
    os.chdir(NOTEBOOKS)
    os.execve(cmd[0], cmd, dict(os.environ, LOOPPROOF_RESULTS=str(results)))
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
