"""What a sandboxed command may see, and the one interface every sandbox backend implements.

Why a `View` and not backend flags: the runner knows *what* must be visible (the node's
workspace, the judged copy, the gate's files) and what must not (the ledger, the run's other
folders, the signing key); a backend only knows *how* (bubblewrap mounts today, Landlock or
macOS later). Keeping the two apart lets a second backend be added without touching the runner.

A backend turns (argv, cwd, env, view) into a `Launch`: the argv to exec (e.g. `bwrap ... --
argv`), the environment of that process, and, after it has exited, whether the sandbox really
started the command (bubblewrap fails before exec when a mount cannot be made; that must be an
error, never read as the command's own exit code 1 = reject).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from loopproof.engine.system.limits import Hold


@dataclass(frozen=True)
class View:
    """What one command may see and touch, besides the read-only system.

    writable: bound read-write (a worker's workspace; a check's scratch copy).
    readable: visible read-only even where the backend masks (the private temp folder, the
              engine user's home): the spec's folder, the programs' installations, a judged copy.
    hidden:   invisible even inside a visible folder: the ledger, its side folders, the stop file,
              keys, the gate's files (for a worker). A path both hidden and readable is hidden.
    sockets:  Unix sockets bound in, so a service outside (a metered model proxy) stays reachable
              when the network is off.
    network:  share the host's network (a node's `network = true`); off by default.
    private_home: a fresh empty HOME and TMPDIR for this command only (gates: a `.pth` file or a
              config dropped by the worker is never in the gate's HOME).
    tmp_bytes: the size of each private temp folder the backend makes (None: its default).
    """

    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    sockets: tuple[Path, ...] = ()
    network: bool = False
    private_home: bool = False
    tmp_bytes: int | None = None

    def seeing(self, *, writable: Sequence[Path] = (), readable: Sequence[Path] = (),
               sockets: Sequence[Path] = ()) -> View:
        """This view plus more paths (the judged copy of one gate run, an evidence file)."""
        return replace(self, writable=(*self.writable, *map(Path, writable)),
                       readable=(*self.readable, *map(Path, readable)),
                       sockets=(*self.sockets, *map(Path, sockets)))


@dataclass
class Launch:
    """How to start one sandboxed command. `started()` is asked after the process has exited:
    True if the sandbox exec'd the command, False if it failed before (then `why` says how),
    None if the backend cannot tell (then the exit code is the command's)."""

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    pass_fds: tuple[int, ...] = ()
    status: Mapping[str, object] = field(default_factory=dict)
    # the private temp folders made at `View.tmp_bytes`, as the command sees them
    tmpfs: tuple[str, ...] = ()
    # after a failed start: which file the command needed and could not see, and why (None:
    # the backend cannot tell)
    explain: Callable[[], str | None] | None = None
    # when set, the sandbox waits after its mounts, before the command, until this is called
    # (so `tmpfs` can be opened before the command could fill and leave them); idempotent
    release: Callable[[], None] | None = None

    def started(self) -> bool | None:
        value = self.status.get("started")
        return None if value is None else bool(value)


class Unavailable(Exception):
    """The backend cannot run on this machine (bwrap missing or not permitted): exit 2."""


class Sandbox(Protocol):
    """One sandbox backend. `name` is what `sandbox = "..."` in graph.toml says."""

    name: str

    def problem(self) -> str | None:
        """Why this backend cannot run here (None when it can); cheap after the first call."""
        ...

    def launch(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str],
               view: View) -> contextlib.AbstractContextManager[Launch]:
        """A context around one command: enter before Popen, leave after the process was reaped
        (the backend cleans up what it made, and fills `Launch.status`)."""
        ...


@dataclass(frozen=True)
class Confinement:
    """A backend and a view: everything `run_command` needs to sandbox one command; and
    (optionally) the command's resource limits, which hold it (engine/system/limits/).

    `candidate`, on a gate's confinement: the view a judge kind (engine/run/judge/) runs the
    judged code in, which must see no more than the worker that wrote it (every gate's files
    and the spec hidden, no network); None: the gate's view with the gate's own files hidden."""

    sandbox: Sandbox
    view: View
    candidate: View | None = None
    hold: Hold | None = None

    def seeing(self, **paths: Sequence[Path]) -> Confinement:
        return Confinement(self.sandbox, self.view.seeing(**paths), self.candidate, self.hold)

    @contextlib.contextmanager
    def launch(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> Iterator[Launch]:
        view = self.view
        if self.hold is not None and self.hold.limits.tmp_bytes is not None:
            view = replace(view, tmp_bytes=self.hold.limits.tmp_bytes)
        with self.sandbox.launch(argv, cwd, env, view) as launch:
            yield launch
