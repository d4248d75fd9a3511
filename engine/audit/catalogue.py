"""Load and validate a gate catalogue: one folder per loop with loop.toml, workspace/ and gate/.

Why strict: a catalogue entry that silently defaults a misspelt field would audit a different gate
from the one its author meant, so every problem is one BadInput line naming the loop and field.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.errors import BadInput

GATE_DIR = "gate"
REPAIRED_DIR = "gate.repaired"
DEFAULT_TIMEOUT_S = 10.0
_TABLES = {"loop": {"id", "description"}, "gate": {"run", "timeout_s"},
           "artifact": {"files"}, "oracle": {"run", "timeout_s"}}


@dataclass(frozen=True)
class Command:
    """A command template: `{gate}`, `{workspace}` and `{python}` are filled in per run; a
    `literal` one (a graph's own gate, which runs in its workspace) is run as written."""

    argv: tuple[str, ...]
    timeout_s: float
    literal: bool = False

    def render(self, gate: Path, workspace: Path) -> list[str]:
        if self.literal:
            return list(self.argv)
        values = {"gate": str(gate), "workspace": str(workspace), "python": sys.executable}
        return [part.format(**values) for part in self.argv]


# A gate the audit hands a tree to, as the run would judge it (a graph node's own gate, whatever
# its kind: engine/commands/_graph_loops.py builds it): (tree, at most this many seconds or None)
# -> (verdict "accept" | "reject" | "error", the gate's own words).
GateCall = Callable[[Path, float | None], tuple[str, str]]


@dataclass(frozen=True)
class Loop:
    """One catalogue entry. `gate_dir` is the gate actually audited (gate/ or gate.repaired/).
    `gate` is a command template (a catalogue's) or a `GateCall` (a graph node's own gate);
    `kind` names the gate's kind for the report; `loaded` says how the artifact was chosen
    (engine/audit/loaded.py), when it is not the loop's declaration."""

    id: str
    description: str
    root: Path
    workspace: Path
    gate_dir: Path
    gate: Command | GateCall
    artifact_files: tuple[str, ...]
    oracle: Command | None
    # the gate's own code, for the differential oracle: its files (default: the .py files of
    # gate_dir) and inline `-c` programs
    gate_files: tuple[Path, ...] = ()
    gate_code: tuple[str, ...] = ()
    kind: str = "command"
    loaded: dict | None = None

    @property
    def claim_files(self) -> tuple[str, ...]:
        """Workspace files that are not the artifact: what a worker says about its work."""
        return tuple(p for p in workspace_files(self.workspace) if p not in self.artifact_files)

    @property
    def repaired(self) -> bool:
        return self.gate_dir.name == REPAIRED_DIR


def workspace_files(workspace: Path) -> tuple[str, ...]:
    """Every regular file under `workspace`, as sorted POSIX paths relative to it."""
    return tuple(sorted(p.relative_to(workspace).as_posix()
                        for p in workspace.rglob("*") if p.is_file()))


def _bad(path: Path, field: str, problem: str, fix: str) -> BadInput:
    return BadInput(str(path), field, problem, fix)


def _command(path: Path, table: dict, name: str) -> Command:
    run = table.get("run")
    if not isinstance(run, list) or not run or not all(isinstance(a, str) and a for a in run):
        raise _bad(path, f"{name}.run", "must be a non-empty list of non-empty strings",
                   'write e.g. run = ["{python}", "{gate}/check.py", "{workspace}/file"]')
    for part in run:
        try:
            part.format(gate="", workspace="", python="")
        except (KeyError, IndexError, ValueError) as exc:
            raise _bad(path, f"{name}.run", f"unknown placeholder in {part!r} ({exc})",
                       "use only {gate}, {workspace} and {python}") from exc
    timeout = table.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise _bad(path, f"{name}.timeout_s", f"must be a positive number, got {timeout!r}",
                   "give the gate's time limit in seconds, e.g. timeout_s = 10")
    return Command(tuple(run), float(timeout))


def load_loop(folder: Path, gate_dir: str = GATE_DIR) -> Loop:
    """Read one loop folder; `gate_dir` names the gate to audit, falling back to gate/."""
    path = folder / "loop.toml"
    if not path.is_file():
        raise _bad(folder, "loop.toml", "missing", "add a loop.toml with [loop], [gate], [artifact]")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _bad(path, "loop.toml", f"not valid TOML ({exc})", "fix the TOML syntax") from exc
    for table, value in data.items():
        if table not in _TABLES or not isinstance(value, dict):
            raise _bad(path, table, "unknown table", f"use only [{'], ['.join(_TABLES)}]")
        for key in value:
            if key not in _TABLES[table]:
                raise _bad(path, f"{table}.{key}", "unknown field",
                           f"[{table}] takes only {', '.join(sorted(_TABLES[table]))}")
    loop = data.get("loop", {})
    loop_id = loop.get("id")
    if not isinstance(loop_id, str) or not loop_id.strip():
        raise _bad(path, "loop.id", "missing or not a non-empty string", 'add id = "<loop name>"')
    description = loop.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _bad(path, "loop.description", "missing or empty",
                   "say in one sentence what the gate is meant to establish")
    if "gate" not in data:
        raise _bad(path, "gate", "missing table", "add [gate] with run = [...]")
    gate = _command(path, data["gate"], "gate")
    oracle = _command(path, data["oracle"], "oracle") if "oracle" in data else None
    workspace = folder / "workspace"
    if not workspace.is_dir():
        raise _bad(folder, "workspace", "missing folder", "add workspace/ holding a correct artifact")
    present = workspace_files(workspace)
    files = data.get("artifact", {}).get("files", list(present))
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise _bad(path, "artifact.files", "must be a non-empty list of file names",
                   'list the files the loop is about, e.g. files = ["solution.py"]')
    for name in files:
        if name not in present:
            raise _bad(path, "artifact.files", f"{name!r} is not a file in workspace/",
                       "name files that exist in the reference workspace")
    chosen = folder / gate_dir
    if not chosen.is_dir():
        chosen = folder / GATE_DIR
    if not chosen.is_dir():
        raise _bad(folder, "gate", "missing folder", "add gate/ holding the gate's own files")
    return Loop(id=loop_id, description=description.strip(), root=folder.resolve(),
                workspace=workspace.resolve(), gate_dir=chosen.resolve(), gate=gate,
                artifact_files=tuple(files), oracle=oracle)


def load_catalogue(directory: Path, gate_dir: str = GATE_DIR) -> list[Loop]:
    """Every loop under `directory` (a folder per loop), sorted by folder name; ids are unique."""
    directory = Path(directory)
    if not directory.is_dir():
        raise _bad(directory, "CATALOG_DIR", "not a directory", "give the catalogue folder")
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
    folders = [p for p in folders if (p / "loop.toml").exists()]
    if not folders:
        raise _bad(directory, "CATALOG_DIR", "holds no <loop>/loop.toml",
                   "point at a folder of loop folders")
    loops = [load_loop(folder, gate_dir) for folder in folders]
    seen: dict[str, Path] = {}
    for loop in loops:
        if loop.id in seen:
            raise _bad(loop.root / "loop.toml", "loop.id", f"duplicate id {loop.id!r} "
                       f"(also in {seen[loop.id]})", "give every loop its own id")
        seen[loop.id] = loop.root
    return loops
