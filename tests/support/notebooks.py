"""The shared harness that executes a notebook against results written at small scale.

Convention for every experiment and its notebook (also in docs/bounds.md):

- `python -m experiments.<name> --scale smoke --seed S --out DIR` writes its result files to DIR
  (default `results/<name>`);
- `notebooks/<name>.ipynb` reads `<root>/<name>/`, where `<root>` is the environment variable
  `LOOPPROOF_RESULTS` (default `../results`, relative to `notebooks/`), and saves its figure
  there too.

A test in tests/experiments/test_notebooks.py first runs the experiment at smoke scale with
`--out tmp_path/<name>`, then calls `execute_notebook(name, tmp_path)` and checks the figure file
exists. Adding a notebook is one such test.

The kernel is the project's (`loopproof`, installed into the running environment by
experiments/figures.py): the interpreter running the tests, with its imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.paths import REPO

if TYPE_CHECKING:  # nbformat's import costs ~3 CPU-s (jsonschema builds 38 Earley parsers):
    import nbformat  # paid only by the worker that executes a notebook, not at collection

NOTEBOOKS = REPO / "notebooks"


def execute_notebook(name: str, results_dir: Path, timeout: int = 120) -> nbformat.NotebookNode:
    """Run every cell of notebooks/<name>.ipynb in notebooks/ with LOOPPROOF_RESULTS=results_dir
    (the results root: the notebook reads results_dir/<name>/), on the project's kernel, as
    `make reproduce` does (experiments/figures.py); the executed copy goes to
    results_dir/notebooks/<name>.ipynb, the notebook in git is left unchanged.

    Raises nbclient's CellExecutionError on the first cell that fails (and on a timeout); returns
    the executed notebook for further checks.
    """
    from experiments.figures import execute

    if not (NOTEBOOKS / f"{name}.ipynb").is_file():
        raise FileNotFoundError(f"no notebook {NOTEBOOKS / f'{name}.ipynb'}")
    return execute(name, Path(results_dir), timeout=timeout)
