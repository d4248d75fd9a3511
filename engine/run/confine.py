"""What each command of a run may see: the sandbox views of a node's worker and of its gate.

Why here, not in the backend: only the run knows which paths are its own. Invisible to every
command: the ledger and each of its side folders (`<ledger>.work`, `.accepted`, `.stop`, `.sig`,
...), the stop file, the policy file and its signing key. Invisible to a worker, in addition:
every gate's files (its argv files, `gate_files`, its own script run as its program), the spec
file (an inline gate's command line is in it) and where
else their bytes are kept (bytecode caches, the git repository), except a file that worker's own
argv names (a shared input such as `text.txt`) and installed programs (interpreters, tools). A worker sees its own workspace
read-write (`<ledger>.work/<node>`, so never another node's) but its `inputs/` (what its
predecessors handed off) read-only, by a mount: its files keep their modes, so a copy the
worker makes of one is an ordinary file it can overwrite in a later activation; a gate sees its
judged copy, added per run by the gate (engine/run/gate.py), read-only, and a fresh private
HOME. Both are held to the node's resource limits (`NodeConfig.resources`,
engine/system/limits/).

Readable everywhere: the spec's folder, each program's installation (the folder above its
`bin/`, and the same for the file its symlinks lead to, so a venv's python and the pyenv
interpreter behind it both work) and the absolute files and folders named in argv.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loopproof.engine.run.spec import Spec
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.limits import Hold, owner_of
from loopproof.engine.system.programs import installed
from loopproof.engine.system.sandbox import Confinement, Sandbox, View, backend

if TYPE_CHECKING:  # imported where the policy is read (below), not at import time
    from loopproof.engine.policy.pin import PolicyPin


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


def traces(files: Iterable[Path]) -> list[Path]:
    """Where else the bytes of `files` are kept, readable by name: the bytecode Python cached
    for a module (`__pycache__/<name>.*.pyc`), and the git repository holding a file (its
    `.git` folder; for a linked worktree, the `.git` file, its folder and the common one)."""
    out: list[Path] = []
    seen: set[Path] = set()
    for f in map(Path, files):
        if f.suffix == ".py":
            out += map(Path, sorted(glob.glob(glob.escape(str(f.parent / "__pycache__" / f.stem))
                                              + ".*.pyc")))
        for d in (f.parent, *f.parent.parents):
            if d in seen:
                break
            seen.add(d)
            dot = d / ".git"
            if dot.is_dir():
                out.append(dot)
                break
            if dot.is_file():
                out += [dot, *_linked_git(dot)]
                break
    return list(dict.fromkeys(out))


def _linked_git(dot: Path) -> list[Path]:
    """The folders a `.git` file (`gitdir: <path>`) points at: its own and the shared one."""
    try:
        text = dot.read_text(errors="replace").strip()
    except OSError:
        return []
    if not text.startswith("gitdir:"):
        return []
    gitdir = (dot.parent / text.removeprefix("gitdir:").strip()).resolve()
    out = [gitdir]
    with contextlib.suppress(OSError):
        common = (gitdir / "commondir").read_text(errors="replace").strip()
        out.append((gitdir / common).resolve())
    return out


def argv_paths(argv: Iterable[str]) -> list[Path]:
    """Absolute existing files and folders named in argv (a worker script, a data file)."""
    return [Path(a) for a in argv if os.path.isabs(a) and os.path.exists(a)]


def _argv_of(obj: object) -> tuple[str, ...]:
    argv = getattr(obj, "argv", ())
    return tuple(argv) if isinstance(argv, tuple | list) else ()


def sandbox_backend(spec: Spec) -> Sandbox:
    """The backend `sandbox = "..."` names; BadInput (exit 2, nothing written) if it cannot
    run on this machine, with the fix (install bubblewrap, or set sandbox = "none")."""
    box = backend(spec.sandbox)
    why = box.problem()
    if why is not None:
        problem, _, fix = why.partition("; fix: ")
        raise BadInput(str(spec.path), "[graph] sandbox", problem,
                       fix or 'install bubblewrap, or set sandbox = "none"')
    return box


def policy_secrets(pin: PolicyPin | None) -> list[Path]:
    """The policy file and its signing keys: hidden from every command of the run."""
    if pin is None:
        return []
    path = Path(pin.path)
    out = [path]
    policy = getattr(pin, "policy", None)
    if policy is None:
        try:
            from loopproof.engine.policy.pin import parse_policy
            policy = parse_policy(path.read_bytes(), path)
        except Exception:  # a changed or unreadable policy is integrity's to report
            return out
    out += [p for p in policy.key_paths() if p is not None]
    return out


def gate_installations(spec: Spec) -> list[Path]:
    """The installations of the gates' installed programs (a venv, a pyenv version, /usr): code
    there runs in the gate without being pinned (a `.pth` file in its site-packages)."""
    out: list[Path] = []
    for cfg in spec.nodes.values():
        argv = _argv_of(cfg.gate)
        if argv and installed(argv[0]):
            out += [Path(os.path.realpath(p)) for p in installation(argv[0])]
    return [p for p in dict.fromkeys(out) if p != Path("/")]


def refuse_unsafe_writable(spec: Spec, ledger: Path, stop_file: Path,
                           secret_files: Iterable[Path]) -> None:
    """BadInput (exit 2) if a node's `writable` path holds something of the run (the ledger, its
    side folders, the stop file, the policy, a key, a gate's file or program), lies inside the
    run's folders, or holds or lies inside a gate program's installation: a worker could then
    change what it is judged by, or by what."""
    ledger = Path(ledger).absolute()
    guarded = [ledger, Path(stop_file), *map(Path, secret_files),
               *(p for cfg in spec.nodes.values() for p in cfg.pinned_files())]
    installs = gate_installations(spec)
    side = Path(f"{ledger}.")
    for name, cfg in spec.nodes.items():
        for w in cfg.writable:
            real = Path(os.path.realpath(w))
            inside_run = str(real).startswith(str(side))
            held = [g for g in guarded if Path(os.path.realpath(g)).is_relative_to(real)]
            near = [i for i in installs if real.is_relative_to(i) or i.is_relative_to(real)]
            if inside_run or held or near:
                what = ("lies inside the run's folders" if inside_run else f"holds {held[0]}"
                        if held else f"shares {near[0]}, the installation of a gate's program")
                raise BadInput(str(spec.path), f"node {name!r}, field 'writable'",
                               f"{w} {what}", "give a folder of its own, outside the run's "
                               "folders and away from the ledger, gates, their interpreters "
                               "and keys")


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
        for prog in sorted(programs | {sys.executable}):  # the engine's own: the proxy bridge
            readable += installation(prog)
        self.readable = tuple(dict.fromkeys(readable))
        gate_files = {Path(p) for cfg in spec.nodes.values() for p in cfg.pinned_files()}
        shown = {Path(p) for p in programs if installed(p)}  # interpreters, system tools
        files = sorted(gate_files - shown)
        # hidden from workers: the gate's files (its own script too), the spec file (an inline
        # gate's words are in it), and the other places their bytes are kept (a bytecode cache,
        # the git repository they are committed in)
        files.append(Path(os.path.abspath(spec.path)))
        self.gate_files = tuple(dict.fromkeys([*files, *traces(files)]))

    def bind_socket(self, path: Path) -> None:
        """Make a Unix socket reachable from every later worker sandbox of the run (the hook a
        metered model proxy uses: with the network off, a socket bound in is the way out)."""
        self.sockets = (*self.sockets, Path(path))

    def run_paths(self) -> tuple[Path, ...]:
        """The ledger, its side folders as they exist now, the stop file, the policy's keys."""
        siblings = glob.glob(glob.escape(str(self.ledger)) + ".*")
        return (self.ledger, *map(Path, sorted(siblings)), self.stop_file, *self.secret_files)

    def node(self, name: str, workspace: Path) -> NodeSandbox:
        cfg = self.spec.nodes[name]
        hidden = self.run_paths()
        named = argv_paths(_argv_of(cfg.worker))  # this worker's own files (a shared input)
        own = {*named, *(Path(os.path.realpath(p)) for p in named)}
        inputs = Path(workspace) / "inputs"  # what predecessors handed off: a read-only mount
        handed = (inputs,) if os.path.isdir(inputs) and not os.path.islink(inputs) else ()
        worker = View(writable=(Path(workspace), *cfg.writable),
                      readable=(*self.readable, *named, *handed),
                      hidden=(*hidden, *(p for p in self.gate_files if p not in own)),
                      sockets=self.sockets, network=cfg.network)
        gate = View(readable=(*self.readable, *cfg.pinned_files()), hidden=hidden,
                    private_home=True)
        # where a judge kind runs the judged code: what the worker sees, less its workspace
        candidate = View(readable=self.readable, hidden=(*hidden, *self.gate_files),
                         private_home=True)
        # the node's resource limits (engine/system/limits/): the worker's workspace is watched
        # while it runs; a gate's judged copy is read-only
        owner = owner_of(self.ledger)
        worker_hold = Hold(cfg.resources, owner, f"{name}.worker", Path(workspace))
        gate_hold = Hold(dataclasses.replace(cfg.resources, workspace_bytes=None), owner,
                         f"{name}.gate")
        return NodeSandbox(Confinement(self.backend, worker, hold=worker_hold),
                           Confinement(self.backend, gate, candidate, gate_hold))



def refuse_at_start(spec: Spec, box: Sandbox, ledger: Path, stop_file: Path,
                    secret_files: list[Path]) -> None:
    """What `run` refuses before it writes anything, past the spec itself: an unsafe
    `writable` path (refuse_unsafe_writable), and a gate whose own check fails
    (`Gate.check_start`, in the sandbox its node's gate runs in: a pytest gate's tests do not
    collect, or its `select` is not among them). BadInput, exit 2."""
    refuse_unsafe_writable(spec, ledger, stop_file, secret_files)
    sandbox = RunSandbox(spec, box, ledger=ledger, stop_file=stop_file,
                         secret_files=secret_files)
    root = Path(f"{Path(ledger).absolute()}.work")  # where the workspaces will be
    for name, cfg in spec.nodes.items():
        cfg.gate.check_start(sandbox.node(name, root / name).gate)
