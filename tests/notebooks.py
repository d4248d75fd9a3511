"""The shared harness that executes a notebook against results written at small scale.

Convention for every experiment and its notebook (also in docs/bounds.md):

- `python -m experiments.<name> --scale smoke --seed S --out DIR` writes its result files to DIR
  (default `results/<name>`);
- `notebooks/<name>.ipynb` reads `<root>/<name>/`, where `<root>` is the environment variable
  `LOOPPROOF_RESULTS` (default `../results`, relative to `notebooks/`), and saves its figure
  there too.

A test in tests/test_notebooks.py first runs the experiment at smoke scale with
`--out tmp_path/<name>`, then calls `execute_notebook(name, tmp_path)` and checks the figure file
exists. Adding a notebook is one such test.

The kernel is `python3`; jupyter_client replaces the kernel spec's `python` with `sys.executable`,
so the kernel runs on the interpreter running the tests (the project's .venv), with its imports.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"


def execute_notebook(name: str, results_dir: Path, timeout: int = 120) -> nbformat.NotebookNode:
    """Run every cell of notebooks/<name>.ipynb in notebooks/ with LOOPPROOF_RESULTS=results_dir
    (the results root: the notebook reads results_dir/<name>/).

    Raises nbclient's CellExecutionError on the first cell that fails (and on a timeout); returns
    the executed notebook for further checks. The notebook file on disk is left unchanged.
    """
    path = NOTEBOOKS / f"{name}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"no notebook {path}")
    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ, LOOPPROOF_RESULTS=str(Path(results_dir).resolve()), MPLBACKEND="Agg")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute(env=env, cwd=str(NOTEBOOKS))
    return nb
