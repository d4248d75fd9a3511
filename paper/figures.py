"""The figures the notebooks saved (results/<study>/<name>.png), found and copied beside the
macros, so the paper shows the same picture `make figures` drew from the same files.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def found(results: Path) -> dict[str, Path]:
    """`study/name` -> the PNG file, for every results/<study>/<name>.png."""
    if not results.is_dir():
        return {}
    return {f"{p.parent.name}/{p.stem}": p for p in sorted(results.glob("*/*.png"))}


def copy(results: Path, out: Path) -> dict[str, str]:
    """Copy each figure to out/figures/; key -> path relative to paper/ for \\includegraphics."""
    dest = out / "figures"
    dest.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, src in found(results).items():
        name = key.replace("/", "--") + ".png"
        shutil.copyfile(src, dest / name)
        paths[key] = f"generated/figures/{name}"
    return paths
