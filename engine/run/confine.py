"""What each command of a run may see: the sandbox views of a node's worker and of its gate.

Why here, not in the backend: only the run knows which paths are its own. Invisible to every
command: the ledger and each of its side folders (`<ledger>.work`, `.accepted`, `.stop`, `.sig`,
...), the stop file, the policy file and its signing key. Invisible to a worker, in addition:
every gate's files (its argv files and `gate_files`), except a file the worker's own argv names
(a shared input such as `text.txt`) and the programs. A worker sees its own workspace
read-write (`<ledger>.work/<node>`, so never another node's); a gate sees its judged copy, added
per run by the gate (engine/run/gate.py), read-only, and a fresh private HOME.

Readable everywhere: the spec's folder, each program's installation (the folder above its
`bin/`, and the same for the file its symlinks lead to, so a venv's python and the pyenv
interpreter behind it both work) and the absolute files and folders named in argv.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine.run.spec import Spec
from engine.system.sandbox import Confinement, Sandbox, View


@dataclass(frozen=True)
class NodeSandbox:
    """The confinements of one node: its worker's, and its gate's (without the judged copy,
    which each gate run adds; a revision node's admission checks use it too, with their
    scratch copy added read-write)."""

    worker: Confinement
    gate: Confinement


def installation(program: str) -> list[Path]:
    """The folders a program needs to start: the one above its bin/ folder, for the path as
    given (a venv) and for the file its symlinks lead to (the interpreter the venv wraps)."""
    out = []
    for p in (os.path.abspath(program), os.path.realpath(program)):
        parent = Path(p).parent
        out.append(parent.parent if parent.name in ("bin", "sbin") else parent)
    return out


def argv_paths(argv: Iterable[str]) -> list[Path]:
    """Absolute existing files and folders named in argv (a worker script, a data file)."""
    return [Path(a) for a in argv if os.path.isabs(a) and os.path.exists(a)]


def _argv_of(obj: object) -> tuple[str, ...]:
    argv = getattr(obj, "argv", ())
    return tuple(argv) if isinstance(argv, tuple | list) else ()


class RunSandbox:
    """Builds the `NodeSandbox` of every node of one run."""

    def __init__(self, spec: Spec, backend: Sandbox, *, ledger: Path, stop_file: Path,
                 secret_files: Iterable[Path] = (), sockets: Iterable[Path] = ()) -> None:
        self.spec, self.backend = spec, backend
        self.ledger, self.stop_file = Path(ledger), Path(stop_file)
        self.secret_files = tuple(Path(p) for p in secret_files)
        self.sockets = tuple(Path(p) for p in sockets)  # bound into every worker's sandbox
        programs = set(spec.programs.values())
        readable: list[Path] = [spec.dir]
        for prog in sorted(programs):
            readable += installation(prog)
        self.readable = tuple(dict.fromkeys(readable))
        worker_named = {p for cfg in spec.nodes.values() for p in argv_paths(_argv_of(cfg.worker))}
        gate_files = {Path(p) for cfg in spec.nodes.values() for p in cfg.pinned_files()}
        self.gate_files = tuple(sorted(gate_files - worker_named - {Path(p) for p in programs}))

    def run_paths(self) -> tuple[Path, ...]:
        """The ledger, its side folders as they exist now, the stop file, the policy's keys."""
        siblings = glob.glob(glob.escape(str(self.ledger)) + ".*")
        return (self.ledger, *map(Path, sorted(siblings)), self.stop_file, *self.secret_files)

    def node(self, name: str, workspace: Path) -> NodeSandbox:
        cfg = self.spec.nodes[name]
        hidden = self.run_paths()
        worker = View(writable=(Path(workspace),),
                      readable=(*self.readable, *argv_paths(_argv_of(cfg.worker))),
                      hidden=(*hidden, *self.gate_files), sockets=self.sockets,
                      network=cfg.network)
        gate = View(readable=(*self.readable, *cfg.pinned_files()), hidden=hidden,
                    private_home=True)
        return NodeSandbox(Confinement(self.backend, worker), Confinement(self.backend, gate))
