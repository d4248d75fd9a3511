"""Where a judge kind runs the judged code: a scratch copy of the judged tree, in a sandbox that
sees no gate file.

Why a copy: the judged code may write where it runs (a cache, a temp file, its own sources);
the judged snapshot must stay as it was hashed, so the code gets a writable copy of its own,
removed afterwards. Why its own view: the gate's view shows the gate's files (it needs them);
the judged code must see no more than the worker that wrote it: the run gives that view as
`Confinement.candidate` (every gate's files and the spec hidden, no network, a fresh HOME), and
without one the gate's view is used with this gate's own files and their traces hidden.

Why no bytecode: Python loads a `.pyc` the tree ships (an unchecked-hash one whatever the
source says, a sourceless `mod.pyc` with no source at all), and a compiled extension module
(`mod.cpython-311-x86_64-linux-gnu.so`) ahead of the `mod.py` beside it, so a tree could be
judged on code no reader of it sees and no mutant of the audit touches. The copy holds no
`.pyc` and no extension module beside a source of the same name: what runs is compiled from the
tree's sources. (An extension module with no source beside it stays: it is how a project with
C code ships it, and it is the judged code.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.judged import copy_judged
from loopproof.engine.system.process import (
    ProcessError,
    ProcessResult,
    gate_environment,
    run_command,
)
from loopproof.engine.system.sandbox import UNSANDBOXED, Confinement, View
from loopproof.engine.system.trees import remove_tree

MAX_OUTPUT = 16 << 20  # bytes kept of a stream (the wire's own caps are tighter per line)


def candidate_box(confine: Confinement | None, secrets: Sequence[Path], scratch: Path
                  ) -> Confinement:
    """The confinement of judged code that runs in `scratch` (writable), with `secrets` (the
    gate's files) hidden even when the caller's view would show them."""
    box = confine if confine is not None else UNSANDBOXED
    base = box.candidate if box.candidate is not None else View(
        readable=box.view.readable, hidden=box.view.hidden, private_home=True)
    hidden = (*base.hidden, *map(Path, secrets), *_traces(secrets))
    view = View(writable=(scratch,), readable=base.readable, hidden=hidden, private_home=True)
    return Confinement(box.sandbox, view, hold=box.hold)  # held to the gate's limits


def _traces(files: Sequence[Path]) -> list[Path]:
    """Bytecode caches of the gate's Python files (a `__pycache__/<name>.*.pyc` beside them)."""
    out: list[Path] = []
    for f in map(Path, files):
        if f.suffix == ".py":
            out += sorted((f.parent / "__pycache__").glob(f"{f.stem}.*.pyc"))
    return out


@contextlib.contextmanager
def scratch_copy(snapshot: Path) -> Iterator[Path]:
    """A writable copy of the judged snapshot without its bytecode, removed on leaving."""
    parent = Path(tempfile.mkdtemp(prefix="loopproof-judged-"))
    tree = parent / "tree"
    try:
        copy_judged(snapshot, tree)
        _drop_bytecode(tree)
        yield tree
    finally:
        remove_tree(parent)


def _drop_bytecode(tree: Path) -> None:
    """Remove every `__pycache__` folder and `.pyc` file of `tree`, and every extension module
    beside a source of its name (see the module's docstring)."""
    for folder, dirs, files in os.walk(tree):
        for name in files:
            shadows = name.endswith((".so", ".pyd")) and f"{name.split('.')[0]}.py" in files
            if name.endswith(".pyc") or shadows:
                os.unlink(os.path.join(folder, name))
        for name in [d for d in dirs if d == "__pycache__"]:
            shutil.rmtree(os.path.join(folder, name))
        dirs[:] = [d for d in dirs if d != "__pycache__"]


@dataclass(frozen=True)
class Ran:
    """One run of judged code: its result, or why it could not start."""

    result: ProcessResult | None
    problem: str = ""


def run_judged(argv: Sequence[str], tree: Path, timeout_s: float, box: Confinement,
               stdin: bytes, extra_env: dict[str, str] | None = None) -> Ran:
    """Run `argv` in `tree` inside `box` with `stdin`: the gate environment, nothing else."""
    try:
        res = run_command(argv, tree, timeout_s, env=gate_environment(extra_env), stdin=stdin,
                          confine=box, max_output=MAX_OUTPUT)
    except ProcessError as exc:
        return Ran(None, str(exc))
    return Ran(res)
