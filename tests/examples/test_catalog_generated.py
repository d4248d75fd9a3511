"""The committed gate catalogue (examples/catalog/<loop>/, 400-odd files) is exactly what
examples/catalog/build_catalog.py writes: regenerated into a scratch folder and compared file by
file, so a hand edit of a committed loop, or a change of the script not rerun, fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.support.paths import REPO as ROOT

CATALOG = ROOT / "examples" / "catalog"
SCRIPT = CATALOG / "build_catalog.py"


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by relative path, but for the script and bytecode."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p != SCRIPT and "__pycache__" not in p.parts}


def test_the_committed_catalogue_is_what_the_script_writes(tmp_path: Path, capsys) -> None:
    """The script's main in this process (its own process is not what is tested: its output
    is), as `python build_catalog.py DIR` runs it, with this tree's engine."""
    out = tmp_path / "catalog"
    spec = importlib.util.spec_from_file_location("build_catalog", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main([str(out)])
    said = capsys.readouterr().out
    assert said.startswith("wrote ") and said.endswith(f" loops to {out}\n"), said
    made, committed = tree(out), tree(CATALOG)
    assert len(committed) > 400
    assert sorted(set(made) ^ set(committed)) == [], "files only on one side"
    differ = [name for name in committed if made[name] != committed[name]]
    assert differ == [], f"regenerate with: python {SCRIPT.relative_to(ROOT)} ({differ[:5]})"
