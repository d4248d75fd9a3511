"""The far side: what runs on a Dask worker's host for one attempt (engine/run/remote/cluster.py
calls it there). It never sees the engine's files: everything arrives as a content-addressed
`Tree` and blobs (engine/run/remote/parcel.py), and everything it hands back travels the same
way.

Why the same sandbox and limits as at home: the worker host is trusted like the engine's machine
(it runs the gate), the code a worker runs is not (docs/threat-model.md). So a worker command and
a gate run here exactly as they would in the engine (engine/system/process.py `run_command`, the
node's bubblewrap view and resource limits, the judge kinds' candidate view), with the engine's
view of each (`Confine`, built by engine/run/confine.py) rebuilt around this host's folders: the
attempt's workspace writable, its `inputs/` and the files its argv names read-only, and this
host's whole scratch folder hidden (its blob cache, other attempts' workspaces, the gate files).

Where things live on the host, below the Dask worker's local directory:

    loopproof/<owner>/blobs/<sha256>              the run's blobs, each checked on arrival
    loopproof/<owner>/ws/<node>/                  the node's workspace here, kept between its
                                                  attempts (only what differs is written)
    loopproof/<owner>/<node>-<act>-<att>-<key>/   one attempt: files/ (what its argv names, at
                                                  their engine paths), judged/ (the tree the
                                                  engine staged, unless it is the workspace's)

`<owner>` is the run's key (engine/system/limits: from its ledger's path); `reap` removes it and
kills what is left in the run's cgroups on this host.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.run.confine import argv_paths
from loopproof.engine.run.gate import Gate, GateResult
from loopproof.engine.run.proxy.access import Access
from loopproof.engine.run.remote.checks import pinned_digest
from loopproof.engine.run.remote.parcel import (
    BlobStore,
    Corrupt,
    Tree,
    TreeRefused,
    materialize,
    pack,
    sync,
)
from loopproof.engine.run.remote.relay import UnixToTcp
from loopproof.engine.system import limits
from loopproof.engine.system.judged import Limits
from loopproof.engine.system.process import (
    ProcessError,
    ProcessResult,
    run_command,
    safe_environment,
)
from loopproof.engine.system.sandbox import Confinement, View, backend
from loopproof.engine.system.sandbox.bwrap import masked_roots
from loopproof.engine.system.trees import remove_tree

ROOT = "loopproof"
OWNER = re.compile(r"[0-9a-f]{16}")
SOCKET_PATH_MAX = 100  # AF_UNIX paths hold about 108 bytes


@dataclass(frozen=True)
class Confine:
    """The engine's confinement of one command (engine/run/confine.py), as it travels: the
    backend's name, the view, the judge kinds' candidate view and the resource limits."""

    backend: str
    view: View
    candidate: View | None = None
    hold: limits.Hold | None = None

    @classmethod
    def of(cls, c: Confinement) -> Confine:
        return cls(c.sandbox.name, c.view, c.candidate, c.hold)


@dataclass(frozen=True)
class Host:
    """This host as one call sees it: where its scratch folders are, its Dask address, why the
    command in flight must stop now (the engine asked, or no one waits for the answer any more:
    `gone`), else None."""

    scratch: Path
    address: str
    stop: Callable[[], str | None] = lambda: None
    gone: Callable[[], bool] = lambda: False

    @property
    def hidden(self) -> tuple[Path, ...]:
        """What no command here may see: this worker's scratch folder; Dask's folder of the
        scratch folders of every worker of this host that uses the default layout (their
        attempts and blobs); this process's temp folder (the gates' snapshots, the judged
        code's copies) unless the sandbox masks it anyway (/tmp: there it is each command's own
        private temp folder, which must stay writable)."""
        out = [self.scratch]
        if self.scratch.parent.name == "dask-scratch-space":
            out.append(self.scratch.parent)
        tmp = os.path.realpath(tempfile.gettempdir())
        if not any(tmp == m or tmp.startswith(m.rstrip("/") + "/") for m in masked_roots()):
            out.append(Path(tmp))
        return tuple(out)


@dataclass(frozen=True)
class WorkerJob:
    """One attempt's worker command: what the engine's `CommandWorker` would run, and the trees
    it needs."""

    owner: str
    node: str
    label: str  # <node>-<activation>-<attempt>-<key>: the attempt's folder here
    argv: tuple[str, ...]
    env: dict[str, str]
    limit_s: float  # the wall clock the engine reserved, at the run's price
    workspace: Tree
    files: Tree  # what the argv names, mirrored at its engine paths (`shipped`)
    shipped: tuple[str, ...]
    confine: Confine
    limits: Limits  # the node's judged-tree limits: what may travel back
    proxy: tuple[str, int] | None = None  # the engine's relay to the attempt's proxy


@dataclass(frozen=True)
class GateJob:
    """One attempt's gate run on the tree the engine staged."""

    owner: str
    node: str
    label: str
    gate: Gate
    tree: Tree
    files: Tree
    shipped: tuple[str, ...]
    pins: dict[str, str]  # installed programs the gate runs -> their sha256 at run start
    confine: Confine


@dataclass(frozen=True)
class Missing:
    """Blobs the engine thought this host had and it has not (its cache was cleared)."""

    digests: tuple[str, ...]


@dataclass(frozen=True)
class WorkerDone:
    """What the worker command did, and its workspace after it. `error`: it never started.
    `refused`: the workspace cannot travel back (over the node's limits, unreadable)."""

    result: ProcessResult | None
    host: str
    error: str = ""
    tree: Tree | None = None
    refused: str = ""
    blobs: dict[str, bytes] = field(default_factory=dict, repr=False)


def owner_root(scratch: Path, owner: str) -> Path:
    if not OWNER.fullmatch(owner):
        raise Corrupt(f"{owner[:40]!r} is not a run's key")
    return Path(scratch) / ROOT / owner


def _name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,160}", name) or name.startswith("."):
        raise Corrupt(f"{name[:80]!r} is not a node's name or an attempt's label")
    return name


def _attempt_dir(root: Path, label: str, needed: bool = True) -> Path:
    """The attempt's own folder (its files, its socket, a judged tree built for its gate);
    made only when `needed` (a folder made and removed per attempt costs two writes)."""
    path = root / _name(label)
    if needed:
        remove_tree(path, within=root)  # a worker lost half-way left it
        path.mkdir(parents=True)
    return path


# A node's workspace here -> the tree it holds, as packed after its last worker here (nothing
# runs in it between attempts: the sandbox's processes are gone, a gate reads it only). The next
# attempt of the node here then writes only what differs, and its gate judges it in place when
# the engine staged exactly that tree. Dropped while a worker runs (a failure leaves it unknown:
# built anew).
_HELD: dict[Path, Tree] = {}
# A node's workspace here -> the attempt that now has it: a call the engine gave up on (its
# command killed by a resumed engine's reap) may still be finishing while the node's next
# attempt takes the folder; only the attempt that has it changes or records it
_USING: dict[Path, str] = {}


def _workspace(root: Path, node: str) -> Path:
    return root / "ws" / _name(node)


def _received(root: Path, blobs: dict[str, bytes], trees: Iterable[Tree]) -> tuple[
        BlobStore, Missing | None]:
    store = BlobStore(root / "blobs")
    store.put_all(blobs)  # each checked against its digest
    need = store.missing(set().union(*(t.digests() for t in trees)))
    return store, (Missing(tuple(need)) if need else None)


def moved(shipped: Iterable[str], files: Path) -> Callable[[str], str]:
    """Where an engine path named by a command lies here: below `files` if it was shipped (a
    file, or anything inside a shipped folder), else unchanged (an installed program)."""
    exact = set(shipped)
    folders = tuple(s.rstrip("/") + "/" for s in exact)

    def where(p: str) -> str:
        if os.path.isabs(p) and (p in exact or p.startswith(folders)):
            return str(files) + os.path.abspath(p)
        return p

    return where


def relocate(obj: Any, where: Callable[[str], str]) -> Any:
    """`obj` (a gate) with every path it names moved by `where`: `Path` values and absolute
    path strings, in its fields, tuples and lists, recursively. A judge kind's `cases` are data,
    not paths, and are left as they are."""
    if isinstance(obj, Path):
        return Path(where(str(obj)))
    if isinstance(obj, str):
        return where(obj)
    if isinstance(obj, tuple | list):
        return type(obj)(relocate(x, where) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: relocate(getattr(obj, f.name), where)
                   for f in dataclasses.fields(obj) if f.init and f.name != "cases"}
        return dataclasses.replace(obj, **changes)
    return obj


def _confinement(c: Confine, host: Host, *, writable: tuple[Path, ...] = (),
                 readable: tuple[Path, ...] = (), sockets: tuple[Path, ...] = (),
                 workspace: Path | None = None) -> Confinement:
    """The engine's confinement rebuilt here: its view's readable paths (the programs'
    installations) and hidden paths (the run's own, should this host be the engine's), plus
    this attempt's folders, with this host's whole scratch folder hidden."""
    def view(v: View, extra_readable: tuple[Path, ...]) -> View:
        return View(writable=writable, readable=(*extra_readable, *v.readable),
                    hidden=(*host.hidden, *v.hidden), sockets=sockets,
                    network=v.network,
                    private_home=v.private_home, tmp_bytes=v.tmp_bytes)

    hold = (dataclasses.replace(c.hold, workspace=workspace) if c.hold is not None else None)
    candidate = view(c.candidate, ()) if c.candidate is not None else None
    return Confinement(backend(c.backend), view(c.view, readable), candidate, hold)


def _socket_path(folder: Path) -> Path:
    """The attempt's socket: in its folder, or (a long path: AF_UNIX's limit) a folder of its
    own in the temp folder, inside `folder`'s lifetime (the caller removes it)."""
    path = folder / "llm.sock"
    if len(os.fsencode(path)) <= SOCKET_PATH_MAX:
        return path
    return Path(tempfile.mkdtemp(prefix="lp-")) / "llm.sock"


def run_worker(job: WorkerJob, blobs: dict[str, bytes], host: Host) -> WorkerDone | Missing:
    """Run the attempt's worker command here: its workspace and files materialized (checked),
    the node's sandbox and limits, the bridge to the engine's proxy when it has model calls;
    then the workspace as it travels back (only blobs the engine has not got)."""
    root = owner_root(host.scratch, job.owner)
    store, missing = _received(root, blobs, (job.workspace, job.files))
    if missing is not None:
        return missing
    at = _attempt_dir(root, job.label, bool(job.files.entries) or job.proxy is not None)
    relay: UnixToTcp | None = None
    try:
        work, files = _workspace(root, job.node), at / "files"
        _USING[work] = job.label
        held = _HELD.pop(work, None)
        work.parent.mkdir(parents=True, exist_ok=True)
        sync(job.workspace, work, store.path, held)
        if job.files.entries:
            materialize(job.files, files, store.path)
        argv = tuple(moved(job.shipped, files)(a) for a in job.argv)
        sockets: tuple[Path, ...] = ()
        if job.proxy is not None:
            sock = _socket_path(at)
            relay = UnixToTcp(sock, job.proxy)
            argv = Access({}, sock).wrap(argv)  # this host's interpreter and bridge
            sockets = (sock,)
        inputs = work / "inputs"  # and what the argv names (the bridge: this host's file)
        confine = _confinement(job.confine, host, writable=(work,),
                               readable=(files, *([inputs] if inputs.is_dir() else []),
                                         *argv_paths(argv)),
                               sockets=sockets, workspace=work)
        env = safe_environment(extra=job.env, home=work)
        try:
            res = run_command(argv, work, job.limit_s, env=env, confine=confine,
                              stop=host.stop)
        except ProcessError as exc:
            return WorkerDone(None, host.address, error=str(exc))
        res = dataclasses.replace(res, argv=job.argv)  # as the engine named it
        if host.gone():  # the engine cancelled it or is gone: nothing travels back, and what
            if _USING.get(work) == job.label:  # the workspace holds is no one's to know
                remove_tree(work, within=root)
            return WorkerDone(res, host.address)
        try:
            tree, _where = pack(work, job.limits)
        except TreeRefused as exc:
            return WorkerDone(res, host.address, refused=str(exc))
        store.adopt(tree, work)
        if _USING.get(work) == job.label:
            _HELD[work] = tree
        back = job.workspace.digests()
        out = {d: store.path(d).read_bytes() for d in tree.digests() - back}
        return WorkerDone(res, host.address, tree=tree, blobs=out)
    finally:
        if relay is not None:
            relay.stop()
            if relay.path.parent != at:
                remove_tree(relay.path.parent)
        remove_tree(at, within=root)
        if _USING.get(_workspace(root, job.node)) == job.label:
            del _USING[_workspace(root, job.node)]


def run_gate(job: GateJob, blobs: dict[str, bytes], host: Host) -> GateResult | Missing:
    """Judge the staged tree here with the node's gate (any kind), its files materialized at
    their engine paths below the attempt's folder, in the node's gate sandbox; the gate's own
    checks (its snapshot's hash before and after, `copied`) run here as at home."""
    root = owner_root(host.scratch, job.owner)
    store, missing = _received(root, blobs, (job.tree, job.files))
    if missing is not None:
        return missing
    judged = _workspace(root, job.node)
    in_place = _HELD.get(judged) == job.tree  # what its worker here left: judged as it is
    at = _attempt_dir(root, job.label, bool(job.files.entries) or not in_place)
    try:
        files = at / "files"
        if not in_place:
            judged = at / "judged"
            materialize(job.tree, judged, store.path)
        if job.files.entries:
            materialize(job.files, files, store.path)
        changed = sorted(p for p, sha in job.pins.items() if pinned_digest(p) != sha)
        if changed:
            return GateResult.not_judged(f"the gate's program {changed[0]} on the Dask worker "
                                         f"{host.address} is not the file pinned at run start")
        gate = relocate(job.gate, moved(job.shipped, files))
        confine = _confinement(job.confine, host, readable=(files,))
        result = gate.judge(judged, confine)
        return dataclasses.replace(result, facts={**result.facts, "host": host.address})
    finally:
        remove_tree(at, within=root)


def reap(scratch: Path, owner: str) -> int:
    """End what a run left on this host: kill every process in its cgroups (a sandbox whose
    attempt the engine gave up on), remove its folders. The processes found."""
    found = limits.reap(owner)
    root = owner_root(scratch, owner)
    for known in (_HELD, _USING):
        for p in [p for p in known if p.is_relative_to(root)]:
            del known[p]
    remove_tree(root, within=root.parent, best_effort=True)
    return found
