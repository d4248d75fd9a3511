"""Load and validate a gate catalogue: one folder per loop with loop.toml, workspace/ and gate/.

Why strict: a catalogue entry that silently defaults a misspelt field would audit a different gate
from the one its author meant, so every problem is one BadInput line naming the loop and field.
loop.toml's tables are declared field by field (engine/system/fields.py; docs/audit.md prints
them).
"""

from __future__ import annotations

import math
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.fields import (
    ABSENT,
    Field,
    Refusal,
    Table,
    Verdict,
    bad_input,
    number,
    short,
    strings,
    table,
)

GATE_DIR = "gate"
REPAIRED_DIR = "gate.repaired"
DEFAULT_TIMEOUT_S = 10.0


def _said(v: Any) -> Verdict:
    return None if isinstance(v, str) and v.strip() else f"must be a non-empty string, got {short(v)}"


def _template(v: Any) -> Verdict:
    if (why := strings()(v)) is not None:
        return why
    for part in v:
        try:
            part.format(gate="", workspace="", python="")
        except (KeyError, IndexError, ValueError) as exc:
            return Refusal(f"unknown placeholder in {part!r} ({exc})",
                           "use only {gate}, {workspace} and {python}")
    return None


def _command(name: str, doc: str) -> Table:
    return Table(f"[{name}]", (
        Field("run", "a non-empty list of strings", doc + "; `{gate}`, `{workspace}` and "
              "`{python}` are filled in", _template,
              '["{python}", "{gate}/check.py", "{workspace}/file"]'),
        Field("timeout_s", "seconds > 0", "its time limit", number(0.0, math.inf, above=True),
              "10", default=DEFAULT_TIMEOUT_S),
    ), prefix=f"{name}.")


TABLES: dict[str, Table] = {
    "loop": Table("[loop]", (
        Field("id", "a non-empty string", "the loop's name, unique in the catalogue", _said,
              '"<loop name>"'),
        Field("description", "a non-empty string", "what the gate is meant to establish, in "
              "one sentence", _said, '"what the gate is meant to establish"'),
    ), prefix="loop."),
    "gate": _command("gate", "the gate's argv, run in a scratch copy of the workspace"),
    "artifact": Table("[artifact]", (
        Field("files", "a non-empty list of file names", "the files the loop is about (the "
              "rest of the workspace is what a worker says about them)", strings(what="file names"), '["solution.py"]', default=ABSENT,
              shown_default="every file in workspace/"),
    ), prefix="artifact."),
    "oracle": _command("oracle", "an oracle's argv, which confirms that a non-absence mutant "
                       "is really wrong"),
}
LOOP_FILE = Table("loop.toml", (
    Field("loop", "a table", "what the loop is", table, default={}),
    Field("gate", "a table", "the gate audited", table, add='add [gate] with run = [...]'),
    Field("artifact", "a table", "which files are the artifact", table, default={}),
    Field("oracle", "a table", "the optional oracle", table, default=ABSENT),
), noun="table")


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


def _read_command(path: Path, data: dict, name: str) -> Command:
    v = TABLES[name].read(data[name], bad_input(str(path)))
    return Command(tuple(v["run"]), float(v["timeout_s"]))


def load_loop(folder: Path, gate_dir: str = GATE_DIR) -> Loop:
    """Read one loop folder; `gate_dir` names the gate to audit, falling back to gate/."""
    path = folder / "loop.toml"
    if not path.is_file():
        raise _bad(folder, "loop.toml", "missing", "add a loop.toml with [loop], [gate], [artifact]")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _bad(path, "loop.toml", f"not valid TOML ({exc})", "fix the TOML syntax") from exc
    data = LOOP_FILE.read(data, bad_input(str(path), "[{}]"))
    loop = TABLES["loop"].read(data["loop"], bad_input(str(path)))
    loop_id, description = loop["id"], loop["description"]
    artifact = TABLES["artifact"].read(data["artifact"], bad_input(str(path)))
    gate = _read_command(path, data, "gate")
    oracle = _read_command(path, data, "oracle") if "oracle" in data else None
    workspace = folder / "workspace"
    if not workspace.is_dir():
        raise _bad(folder, "workspace", "missing folder", "add workspace/ holding a correct artifact")
    present = workspace_files(workspace)
    files = artifact.get("files", list(present))
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
