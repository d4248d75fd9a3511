"""Execute the notebooks against a results folder: each draws its figures into results/<name>/,
and its executed copy, outputs and figures included, is written to results/notebooks/<name>.ipynb.

    python -m experiments.figures [--results results] [--only NAME ...]

Why here and not jupyter-execute: the kernel is this interpreter (the project's .venv, which can
import `experiments`), its start-up chatter (the debugger's frozen-modules warning) is turned off
at the source, and the notebooks in git stay unexecuted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
KERNEL = "loopproof"


def install_kernel() -> Path:
    """The project's kernel, in this environment (`<prefix>/share/jupyter/kernels/loopproof`):
    this interpreter with the checkout on its path, so `import experiments` works (experiments/
    is not installed, only `loopproof` is), with frozen modules off (else the debugger
    warns on every start) and the debugger's file check quiet. Idempotent."""
    folder = Path(sys.prefix) / "share" / "jupyter" / "kernels" / KERNEL
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f",
                     "{connection_file}"],
            "display_name": "loopproof (.venv)", "language": "python",
            "env": {"PYDEVD_DISABLE_FILE_VALIDATION": "1", "PYTHONPATH": str(REPO)}, "metadata": {"debugger": True}}
    text = json.dumps(spec, indent=1) + "\n"
    target = folder / "kernel.json"
    if not target.is_file() or target.read_text() != text:
        target.write_text(text)
    return folder


# jsonschema imports this package whenever it is installed (jupyter-events asks for it, through
# jsonschema[format-nongpl]) and its import builds an Earley parser of RFC 3987: 2.6 CPU-s, for
# the draft-7 "iri" format checks that no schema nbformat or JupyterLab validates has (notebooks
# are draft 4; jupyter-events' schemas name "uri" and "datetime"). Kept out of the processes
# that import jsonschema only for those: nbformat's here, the JupyterLab server's
# (experiments/lab.py).
IRI_GRAMMAR = "rfc3987_syntax"


def nbformat() -> Any:
    """The nbformat module, imported without IRI_GRAMMAR (2.6 of the 3.3 CPU-s its import took).
    Where jsonschema is already imported, this is a plain import."""
    if "jsonschema" in sys.modules or IRI_GRAMMAR in sys.modules:
        import nbformat as module
        return module
    sys.modules[IRI_GRAMMAR] = None  # type: ignore[assignment]  # ImportError: not loaded
    try:
        import nbformat as module
    finally:
        del sys.modules[IRI_GRAMMAR]  # a later import of it works as usual
    return module


def execute(name: str, results: Path, out: Path | None = None, timeout: int = 600) -> Any:
    """Run notebooks/<name>.ipynb with LOOPPROOF_RESULTS=results (cwd notebooks/); write the
    executed copy to `out` (default results/notebooks/<name>.ipynb). Returns the notebook;
    raises nbclient's CellExecutionError on the first failing cell."""
    nbf = nbformat()
    from nbclient import NotebookClient
    from traitlets.config import Config

    nb = nbf.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    install_kernel()
    # the inline backend: each figure is also kept in the executed copy
    env = dict(os.environ, LOOPPROOF_RESULTS=str(Path(results).resolve()),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    with tempfile.TemporaryDirectory(prefix="loopproof-kernel-") as sockets:
        # IPC over Unix sockets in a private folder, not TCP on localhost (which ipykernel warns
        # about, rightly: any local user could connect)
        config = Config()
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(Path(sockets) / "kernel")
        client = NotebookClient(nb, kernel_name=KERNEL, config=config, timeout=timeout,
                                allow_errors=False,
                                resources={"metadata": {"path": str(NOTEBOOKS)}})
        client.execute(env=env, cwd=str(NOTEBOOKS))
    target = out or Path(results) / "notebooks" / f"{name}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbf.write(nb, target)
    return nb


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.figures", description=__doc__.split(
        "\n")[0])
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--only", action="append", default=None, metavar="NAME")
    args = p.parse_args(argv)
    names = args.only or sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    for name in names:
        start = time.perf_counter()
        execute(name, args.results)
        print(f"{name}: executed in {time.perf_counter() - start:.1f} s -> "
              f"{args.results / 'notebooks' / (name + '.ipynb')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
