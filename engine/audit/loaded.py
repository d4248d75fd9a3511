"""Which files of a judged tree a gate's run loaded: where the audit places its mutants.

Why: on a real tree most files are never touched by the gate's run (a README, a setup.py, a
module no test imports). A mutant there is accepted by every gate, sound or not, and would be
counted as the gate's false accept, and its `delete` as vacuity. So the audit mutates only the
files the gate's run on the accepted tree actually opened.

Why the kernel and not the judged process: an import-time hook, `python -X importtime`, an audit
hook or `sys.modules` all live in the process the judged code shares with the gate's harness, so
the judged code could say what it likes there. Here the engine, outside the sandbox, asks the
kernel (inotify, through `inotify_simple`) to report every open of a file in the folder each of
the gate's processes starts in (the judged snapshot of a command gate, the scratch copy of a
judge kind: the same inodes the sandbox binds in), and reads the reports after the process is
reaped. The judged code can add opens (more mutants: a slower audit, never a wrong one); it
cannot take one back. A module loaded from its bytecode cache counts as its source.

What it cannot see: a file only listed or `stat`ed (a gate that checks that a file exists
without reading it). When the run opened no file of the tree, or the kernel's queue overflowed,
or inotify is not there, the answer is "unknown" and the audit mutates every file, as it did.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from loopproof.engine.system.sandbox import Confinement, Launch, Sandbox, View


@dataclass
class Opened:
    """What the kernel reported: files opened under each watched folder (relative POSIX paths),
    and whether the report is whole (`lost`: the queue overflowed or a watch failed)."""

    files: set[str] = field(default_factory=set)
    lost: str = ""


def _source_of(rel: str) -> str:
    """`pkg/__pycache__/m.cpython-311.pyc` is `pkg/m.py` (the module it was loaded as)."""
    p = PurePosixPath(rel)
    if p.suffix == ".pyc" and p.parent.name == "__pycache__":
        return str(p.parent.parent / (p.name.split(".", 1)[0] + ".py")).removeprefix("./")
    return rel


@contextlib.contextmanager
def watching(root: Path, into: Opened) -> Iterator[None]:
    """Report into `into` every file under `root` opened while the block runs (folders that
    exist at its start; a folder the run makes holds only what the run wrote itself)."""
    try:
        from inotify_simple import INotify, flags
    except (ImportError, OSError) as exc:  # not Linux, or no inotify: unknown, never wrong
        into.lost = f"inotify is not available ({exc})"
        yield
        return
    watcher = INotify()
    folders: dict[int, str] = {}
    try:
        for here, dirs, _ in os.walk(root):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]
            try:
                wd = watcher.add_watch(here, flags.OPEN | flags.ONLYDIR | flags.DONT_FOLLOW)
            except OSError as exc:  # e.g. the user's watch limit
                into.lost = f"cannot watch {here}: {exc}"
                break
            folders[wd] = os.path.relpath(here, root)
        yield
        while True:
            events = watcher.read(timeout=0)
            if not events:
                break
            for e in events:
                if e.mask & flags.Q_OVERFLOW:
                    into.lost = "the kernel's event queue overflowed"
                elif e.name and not e.mask & flags.ISDIR and e.wd in folders:
                    rel = os.path.normpath(os.path.join(folders[e.wd], e.name))
                    into.files.add(_source_of(PurePosixPath(rel).as_posix()))
    finally:
        watcher.close()


@dataclass
class Watched:
    """A sandbox backend that reports what each command opened in its working folder (a
    wrapper: the command runs in `inner` exactly as it would)."""

    inner: Sandbox
    opened: Opened = field(default_factory=Opened)

    @property
    def name(self) -> str:
        return self.inner.name

    def problem(self) -> str | None:
        return self.inner.problem()

    @contextlib.contextmanager
    def launch(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str],
               view: View) -> Iterator[Launch]:
        with watching(Path(cwd), self.opened), self.inner.launch(argv, cwd, env, view) as launch:
            yield launch


@dataclass(frozen=True)
class Loaded:
    """The files of the accepted tree the gate's run loaded (None: unknown, so every file), how
    that was learnt, and the gate's verdict on that run."""

    files: frozenset[str] | None
    how: str
    verdict: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"files": sorted(self.files) if self.files is not None else None, "how": self.how}


def reported(facts: dict[str, Any]) -> set[str]:
    """The judged files a judge kind's harness says its run loaded (a `pytest` gate's verdict
    facts, `loaded`: tree-relative paths), when it says so. Said from inside the process the
    judged code shares, so it may only add to what the kernel saw, never take away."""
    files = facts.get("loaded")
    if isinstance(files, list) and all(isinstance(f, str) for f in files):
        return {f.removeprefix("./") for f in files}
    return set()


def loaded_files(judge: Any, confine: Confinement, tree: Path, candidates: Sequence[str],
                 gate_files: Sequence[str] = ()) -> Loaded:
    """Run `judge(tree, confine) -> (verdict, facts)` (the node's gate, as the run judges) once
    under a watching sandbox and return which of `candidates` (the accepted tree's own files)
    its processes opened or its harness reports loaded, less `gate_files` (what the gate lays
    over the tree itself: a `pytest` gate's pinned tests). The same for every gate kind: each
    runs its processes in a copy of the tree."""
    watched = Watched(confine.sandbox)
    verdict, facts = judge(tree, replace(confine, sandbox=watched))
    opened, lost = watched.opened.files | reported(facts), watched.opened.lost
    files = frozenset(f for f in candidates if f in opened and f not in set(gate_files))
    if lost:
        return Loaded(None, f"unknown ({lost}): every file", verdict)
    if not files:
        return Loaded(None, "the gate's run opened no file of the tree (it may only look at "
                            "names): every file", verdict)
    return Loaded(files, f"opened by the gate's run on the accepted tree ({len(files)} of "
                         f"{len(candidates)} files; reported by the kernel)", verdict)
