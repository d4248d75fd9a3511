"""A node's worker and gate, run on a Dask worker: the same protocols (engine/run/worker.py,
engine/run/gate.py), so the attempt (engine/run/attempt.py) meters, records, stages and hashes a
remote attempt exactly as a local one.

Why adapters and not a second attempt: everything that makes an attempt trustworthy stays in the
engine's process (the model's guards, the meter, the proxy, the journal, the staging of what
comes back, the hashes the verdict is checked against); only the two commands move. So:

- `RemoteWorker.run` sends the workspace (as the engine prepared it: `inputs/` handed off and
  hashed) and the files its argv names, content-addressed; the engine's meter reserves its wall
  clock first and charges what the engine's own clock measured from sending to the answer
  (transfers included; never more than reserved); the workspace that comes back replaces the
  local one, which the attempt then stages and hashes as it stages a local workspace.
- `RemoteGate.judge` sends the tree the engine staged (its blobs are on the host already when
  the worker ran there) and the gate's files; the host's gate run reports `copied`, its hash of
  what it judged, which the attempt compares with the staged tree, as for any gate.
- A host lost mid-attempt (the Dask worker died, or no answer within the engine's clock) raises
  `OutcomeUnknown`: the attempt gives the attempt back, charged its open reservations.

The cluster (engine/run/remote/cluster.py, the one module that imports Dask) is reached through
the small `Cluster` protocol below, so nothing here needs Dask.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopproof.engine.run.confine import argv_paths, installation
from loopproof.engine.run.gate import Gate, GateResult, TimedGate
from loopproof.engine.run.remote.far import Confine, GateJob, WorkerDone, WorkerJob
from loopproof.engine.run.remote.parcel import Tree, TreeRefused, mirror, pack, sync
from loopproof.engine.run.remote.relay import TcpToUnix
from loopproof.engine.run.spec import Spec
from loopproof.engine.run.worker import AttemptContext, CommandWorker, Wrap, command_claims
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.judged import Limits
from loopproof.engine.system.process import ProcessError
from loopproof.engine.system.programs import installed
from loopproof.engine.system.sandbox import Confinement
from loopproof.engine.system.trees import file_digest


@dataclass(frozen=True)
class Slot:
    """One thread of one Dask worker process, held by one attempt's worker or gate run."""

    address: str
    worker_id: str  # the process: a worker restarted at the same address is another one


class Cluster(Protocol):
    """What the adapters ask of the cluster (engine/run/remote/cluster.py)."""

    listen: str  # the engine's address as the workers reach it (for model calls)

    def acquire(self, prefer: str | None = None) -> Slot: ...

    def release(self, slot: Slot) -> None: ...

    def call(self, slot: Slot, fn: str, job: Any, digests: set[str],
             sources: Mapping[str, bytes], *, within_s: float,
             stop: Callable[[], str | None] | None = None) -> Any: ...

    def learn(self, slot: Slot, digests: Iterable[str]) -> None: ...

    def check(self, programs: Iterable[str], pins: Mapping[str, str], sandbox: str,
              where: str) -> None: ...

    def last_host(self, node: str, address: str | None = None) -> str | None: ...


def shipped(argv: Iterable[str], extra: Iterable[Path | str] = ()) -> tuple[str, ...]:
    """The engine files a command names that travel with it: its absolute files and folders
    (a script, a data file, a gate's pinned files) and `extra` (the spec's folder, which every
    command sees at home), not installed programs (an interpreter, a system tool), which must be
    at the same path on every worker host."""
    named = [*map(str, argv_paths(argv)), *map(str, extra)]
    return tuple(sorted({p for p in named if os.path.exists(p) and not installed(p)}))


def installations(spec: Spec) -> tuple[str, ...]:
    """The folders of the installed programs the spec runs, and of the engine's interpreter (a
    venv inside the spec's folder): never shipped, they must be on every worker host."""
    progs = [p for p in spec.programs.values() if installed(p)] + [sys.executable]
    return tuple(sorted({str(i) for p in progs for i in installation(p)} - {"/"}))


def label(node: str, *parts: object) -> str:
    """An attempt's folder name on the host: unique per call (an attempt given back runs again
    with the same node, activation and attempt numbers)."""
    return "-".join([node, *map(str, parts), secrets.token_hex(4)])


def _source(blobs: Mapping[str, bytes], where: Mapping[str, bytes]) -> Callable[[str], bytes | Path]:
    def get(digest: str) -> bytes | Path:
        return blobs[digest] if digest in blobs else Path(os.fsdecode(where[digest]))
    return get


def replace_workspace(ws: Path, tree: Tree, sent: Tree, blobs: Mapping[str, bytes],
                      where: Mapping[str, bytes]) -> None:
    """Make the local workspace the tree that came back. It still holds `sent` (nothing runs
    in it while its attempt is away), so only what the worker changed is written, each blob
    that came checked as it is written."""
    sync(tree, ws, _source(blobs, where), sent)


@dataclass(frozen=True)
class RemoteWorker(CommandWorker):
    """A command worker whose command runs on a Dask worker (see the module docstring)."""

    cluster: Any = field(default=None, compare=False, repr=False)
    limits: Limits = Limits()  # the node's judged-tree limits: what may travel back
    bridged: bool = False  # behind the attempt's model-call proxy
    spec_dir: str = ""  # the spec's folder: it travels too (a helper module beside a script)
    installs: tuple[str, ...] = ()  # never shipped (`installations`)

    def behind_proxy(self, wrap: Wrap) -> RemoteWorker:
        return dataclasses.replace(self, bridged=True)  # the host wraps it in its own bridge

    def run(self, ctx: AttemptContext) -> dict[str, Any]:
        box = ctx.worker_sandbox
        if box is None:
            raise RuntimeError("a remote worker runs in the node's sandbox: none was given")
        cluster: Cluster = self.cluster
        names = shipped(self.argv, [self.spec_dir] if self.spec_dir else [])
        try:
            files, found = mirror(names, self.limits, exclude=(*box.view.hidden, *self.installs))
        except TreeRefused as exc:  # the spec's folder grew past the node's limits since start
            return {"argv": list(self.argv), "started": False,
                    "error": f"what the worker sees of the engine's files cannot travel: {exc}"}
        slot = cluster.acquire(prefer=cluster.last_host(ctx.node))  # its workspace is there
        gateway = (TcpToUnix(cluster.listen, ctx.sockets[0])
                   if self.bridged and ctx.sockets else None)
        try:
            cluster.last_host(ctx.node, slot.address)
            tree, where = pack(ctx.workspace)  # the engine's own folder, as it prepared it
            owner = box.hold.owner if box.hold is not None else "0" * 16
            job = WorkerJob(owner, ctx.node, label(ctx.node, ctx.activation, ctx.attempt),
                            self.argv,
                            dict(ctx.env), 0.0, tree, files, names, Confine.of(box),
                            self.limits, gateway.address if gateway is not None else None)
            came: list[WorkerDone] = []

            def remote(limit_s: float) -> Any:
                start = time.monotonic()
                done = cluster.call(slot, "run_worker", dataclasses.replace(job, limit_s=limit_s),
                                    tree.digests() | files.digests(), {**where, **found},
                                    within_s=limit_s, stop=ctx.stop)
                came.append(done)
                if done.result is None:
                    raise ProcessError(f"on the Dask worker {done.host}: {done.error}")
                # charged by the engine's clock (sending, running, answering), never by less
                # than the host measured; the meter caps it at the reservation
                took = max(done.result.seconds, time.monotonic() - start)
                return dataclasses.replace(done.result, seconds=took)

            try:
                m = ctx.meter.metered(self.timeout_s, remote)
            except ProcessError as exc:
                return {"argv": list(self.argv), "started": False, "error": str(exc),
                        "host": slot.address}
            done = came[-1]
            if done.refused:
                ctx.unstaged = f"the workspace on the Dask worker {done.host}: {done.refused}"
            elif done.tree is not None:
                replace_workspace(ctx.workspace, done.tree, tree, done.blobs, where)
                cluster.learn(slot, done.tree.digests())
            return {**command_claims(self.argv, m), "host": done.host}
        finally:
            if gateway is not None:
                gateway.stop()
            cluster.release(slot)


@dataclass(frozen=True)
class RemoteGate(Gate):
    """A node's gate (a command gate or a judge kind) run on a Dask worker: preferably the one
    its attempt's worker ran on, which has the tree's blobs already."""

    inner: Any  # the node's own gate (a TimedGate: it can be stopped at its time limit)
    node: str
    cluster: Any = field(default=None, compare=False, repr=False)
    # the installed programs it runs -> their sha256 here at run start (the engine's pins are
    # checked before every gate run; each host's file must be the same)
    pins: dict[str, str] = field(default_factory=dict)
    limits: Limits = Limits()
    spec_dir: str = ""
    installs: tuple[str, ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        argv = getattr(self.inner, "argv", ())
        return tuple(argv)

    def pinned_files(self) -> tuple[Path, ...]:
        return tuple(self.inner.pinned_files())

    def within(self, limit_s: float) -> Gate:
        return dataclasses.replace(self, inner=self.inner.within(limit_s))

    def receipt_anchor(self) -> dict[str, Any] | None:
        return self.inner.receipt_anchor()  # type: ignore[no-any-return]  # the wrapped gate is typed Gate, whose anchor is Any

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        if confine is None:
            raise RuntimeError("a remote gate runs in the node's gate sandbox: none was given")
        cluster: Cluster = self.cluster
        names = shipped(self.argv, [*self.pinned_files(), *([self.spec_dir] if self.spec_dir
                                                            else [])])
        files, found = mirror(names, exclude=(*confine.view.hidden, *self.installs))
        tree, where = pack(workspace)  # the staged copy: the engine's, its hash recorded
        owner = confine.hold.owner if confine.hold is not None else "0" * 16
        job = GateJob(owner, self.node, label(self.node, workspace.name, "gate"), self.inner,
                      tree, files, names, self.pins, Confine.of(confine))
        slot = cluster.acquire(prefer=cluster.last_host(self.node))
        try:
            result: GateResult = cluster.call(
                slot, "run_gate", job, tree.digests() | files.digests(), {**where, **found},
                within_s=float(getattr(self.inner, "timeout_s", 60.0)))
            cluster.learn(slot, tree.digests())
            return result
        finally:
            cluster.release(slot)


def gate_pins(gate: Gate) -> dict[str, str]:
    """The installed programs a gate runs (its interpreter), by sha256 as they are here."""
    named = [*getattr(gate, "argv", ()), *map(str, gate.pinned_files())]
    return {p: file_digest(Path(p)) for p in sorted(set(named))
            if os.path.isabs(p) and installed(p) and os.path.isfile(p)}


def adopt(spec: Spec, cluster: Any, where: str, ledger: Path) -> Spec:
    """`spec` with every node's worker and gate run on `cluster`, after checking that each can
    be (`BadInput`, exit 2, nothing written) and that every worker there now can run them."""
    nodes = {}
    programs: set[str] = set()
    pins: dict[str, str] = {}
    installs = installations(spec)
    spec_dir = str(Path(spec.dir).absolute())
    # what no worker sees of the spec's folder (its hidden files: engine/run/confine.py), so
    # what of it travels must fit the node's limits without them
    unseen = [*installs, os.path.abspath(spec.path), str(ledger),
              *glob.glob(glob.escape(str(ledger)) + ".*"),
              *(str(p) for c in spec.nodes.values() for p in c.pinned_files())]
    for name, cfg in spec.nodes.items():
        def refuse(problem: str, fix: str, node: str = name) -> BadInput:
            return BadInput(str(spec.path), f"node {node!r}", problem, fix)

        if (cfg.kind != "command" or type(cfg.worker) is not CommandWorker
                or not isinstance(cfg.gate, TimedGate)):
            raise refuse(f"a node of kind {cfg.kind!r} (worker {type(cfg.worker).__name__}, "
                         f"gate {type(cfg.gate).__name__}) cannot run on a Dask cluster: only "
                         f"a command worker with a command gate or a judge kind can",
                         "run this graph without --dask")
        if cfg.writable:
            raise refuse("`writable` names paths on the engine's machine, which a worker on a "
                         "Dask cluster cannot write", "remove `writable`, or run without --dask")
        try:
            mirror(shipped(cfg.worker.argv, [spec_dir]), cfg.limits, exclude=unseen)
        except (OSError, TreeRefused) as exc:
            raise refuse(f"what its worker sees of the engine's files (the spec's folder, what "
                         f"its argv names) cannot travel to the cluster: {exc}",
                         "keep large files out of the spec's folder, name smaller ones in the "
                         "worker's argv, or raise the node's limits") from None
        gate_pinned = gate_pins(cfg.gate)
        pins.update(gate_pinned)
        programs |= {p for p in (*cfg.worker.argv, *getattr(cfg.gate, "argv", ()))
                     if os.path.isabs(p) and installed(p)}
        nodes[name] = dataclasses.replace(
            cfg, worker=RemoteWorker(cfg.worker.argv, cfg.worker.timeout_s, cluster=cluster,
                                     limits=cfg.limits, spec_dir=spec_dir, installs=installs),
            gate=RemoteGate(cfg.gate, name, cluster, gate_pinned, cfg.limits, spec_dir,
                            installs))
    programs |= {p for p in spec.programs.values() if installed(p)}
    cluster.check(sorted(programs), pins, spec.sandbox, where)
    return dataclasses.replace(spec, nodes=nodes)
