"""Remote attempts without Dask: the parts of engine/run/remote/ that do not need a cluster, held
to their promises here in one process (tests/engine/run/remote/test_dask_cluster.py runs them
on a real one).

- parcel: a tree travels and lands as the same tree (`tree_digest`), bytes that do not hash to
  their name are never used, an entry cannot climb out, excluded files never travel;
- far: the worker host's side in the node's real sandbox: the host's scratch folder is hidden
  from the command, a workspace over the node's limits does not travel back, blobs it lacks are
  asked for, a gate whose installed program differs on the host does not judge, and a run's
  leftovers on a host are reaped;
- adapters: a graph run through `RemoteWorker`/`RemoteGate` on an in-process stand-in for the
  cluster ends as the local run does, and a host lost mid-worker or mid-gate gives the attempt
  back, charged its open reservation, without counting it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from loopproof.engine import cli
from loopproof.engine.run.gate import CommandGate, GateResult
from loopproof.engine.run.remote import checks, far
from loopproof.engine.run.remote.adapters import Slot
from loopproof.engine.run.remote.parcel import (
    BlobStore,
    Corrupt,
    TreeRefused,
    materialize,
    mirror,
    pack,
    read_blobs,
    sync,
)
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load
from loopproof.engine.run.worker import OutcomeUnknown
from loopproof.engine.system import limits
from loopproof.engine.system.judged import Limits
from loopproof.engine.system.sandbox import View
from loopproof.engine.system.trees import tree_digest
from tests.support.dask_cluster import until
from tests.support.example_runs import example_run
from tests.support.launchers import python_asked_once  # noqa: F401  (a fixture)
from tests.support.oracles import assert_g3, records
from tests.support.paths import REPO

# the graphs' `python3` (pyenv's shim here, ~0.2 CPU-s a question) asked once per launcher
# (tests/support/launchers.py; how a launcher is asked is tested where it is the point)
pytestmark = pytest.mark.usefixtures("python_asked_once")

OWNER = "0123456789abcdef"


def tree_of(root: Path) -> Path:
    (root / "sub" / "empty").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "sub" / "run.sh").chmod(0o755)
    (root / "same.txt").write_text("alpha")  # the same bytes under another name and mode
    (root / "same.txt").chmod(0o600)
    (root / os.fsdecode(b"caf\xe9.bin")).write_bytes(b"\x00\xff")  # not UTF-8
    (root / "sub").chmod(0o750)
    return root


# ---- parcel ---------------------------------------------------------------------------------

def test_a_tree_lands_as_the_same_tree(tmp_path: Path) -> None:
    src = tree_of(tmp_path / "src")
    want = tree_digest(src)
    tree, where = pack(src)
    store = BlobStore(tmp_path / "blobs")
    store.put_all(read_blobs(tree.digests(), where))
    materialize(tree, tmp_path / "dst", store.path)
    assert tree_digest(tmp_path / "dst") == want


def test_a_folder_synced_to_a_tree_holds_it_and_writes_only_what_differs(tmp_path: Path
                                                                        ) -> None:
    src = tree_of(tmp_path / "src")
    before, where = pack(src)
    dst = tmp_path / "dst"
    materialize(before, dst, lambda d: Path(os.fsdecode(where[d])))
    kept = os.stat(dst / "sub" / "run.sh").st_ino
    # the worker changed a file, removed one, added one, turned a folder into a file and
    # changed a mode
    (src / "a.txt").write_text("beta")
    (src / "same.txt").unlink()
    (src / "new.txt").write_text("new")
    (src / "sub" / "empty").rmdir()
    (src / "sub" / "empty").write_text("now a file")
    (src / "sub").chmod(0o700)
    (src / os.fsdecode(b"caf\xe9.bin")).chmod(0o600)
    after, found = pack(src)
    store = BlobStore(tmp_path / "blobs")
    store.put_all(read_blobs(after.digests(), found))
    sync(after, dst, store.path, before)
    assert tree_digest(dst) == tree_digest(src)
    assert os.stat(dst / "sub" / "run.sh").st_ino == kept  # unchanged: not written again
    sync(after, dst, store.path, None)  # nothing known: built anew, the same tree
    assert tree_digest(dst) == tree_digest(src)


def test_bytes_that_do_not_hash_to_their_name_are_never_used(tmp_path: Path) -> None:
    src = tree_of(tmp_path / "src")
    tree, where = pack(src)
    store = BlobStore(tmp_path / "blobs")
    digest = next(iter(tree.digests()))
    with pytest.raises(Corrupt):
        store.put(digest, b"forged")
    assert not store.has(digest)
    with pytest.raises(Corrupt):  # a source that changed since it was packed
        materialize(tree, tmp_path / "dst", lambda d: b"forged")
    with pytest.raises(Corrupt):
        store.path("../../etc/passwd")


def test_an_entry_cannot_climb_out_of_its_tree(tmp_path: Path) -> None:
    tree, _ = pack(tree_of(tmp_path / "src"))
    bad = dataclasses.replace(tree, entries=(*tree.entries, (b"../out", "d", 0o755, "")))
    with pytest.raises(Corrupt):
        materialize(bad, tmp_path / "dst", lambda d: b"")
    assert not (tmp_path / "out").exists()


def test_what_a_command_must_not_see_never_travels(tmp_path: Path) -> None:
    spec = tree_of(tmp_path / "spec")
    (spec / "gate_files").mkdir()
    (spec / "gate_files" / "answers.txt").write_text("42")
    tree, _ = mirror([spec], exclude=[spec / "gate_files", spec / "a.txt"])
    names = {os.fsdecode(p).rsplit("/", 1)[-1] for p in tree.paths()}
    assert "run.sh" in names and "answers.txt" not in names and "a.txt" not in names
    assert "gate_files" not in names


def test_a_tree_over_its_limits_is_refused_before_it_travels(tmp_path: Path) -> None:
    src = tree_of(tmp_path / "src")
    with pytest.raises(TreeRefused, match="max_files"):
        pack(src, Limits(max_files=2))


# ---- far: the worker host's side, in the real sandbox --------------------------------------

def host(tmp_path: Path) -> far.Host:
    scratch = tmp_path / "host"
    scratch.mkdir(exist_ok=True)
    return far.Host(scratch, "tcp://test:1")


def confine(workspace: Path | None = None) -> far.Confine:
    hold = limits.Hold(limits.ResourceLimits(1 << 30, 256, 64 << 20, 64 << 20), OWNER,
                       "n.worker", workspace)
    return far.Confine("bwrap", View(private_home=workspace is None), View(private_home=True),
                       hold)


def worker_job(workspace: Path, argv: tuple[str, ...], **kw: Any) -> far.WorkerJob:
    tree, _ = pack(workspace)
    files, _ = mirror([])
    return far.WorkerJob(OWNER, "n", f"n-0-1-{time.monotonic_ns()}", argv, {}, 30.0, tree, files, (),
                         confine(workspace), kw.pop("limits", Limits()), **kw)


def send(job: far.WorkerJob, where: Mapping[str, bytes]) -> dict[str, bytes]:
    return read_blobs(job.workspace.digests() | job.files.digests(), where)


def test_the_host_runs_the_worker_sandboxed_and_hides_its_scratch(tmp_path: Path) -> None:
    ws = tree_of(tmp_path / "ws")
    h = host(tmp_path)
    store = BlobStore(far.owner_root(h.scratch, OWNER) / "blobs")
    secret = hashlib.sha256(b"the answers").hexdigest()
    store.put(secret, b"the answers")  # a gate file's bytes, cached by an earlier attempt
    script = ("ls -a \"$(dirname \"$(dirname \"$PWD\")\")\" > up.txt; "
              f"cat {store.path(secret)} > seen.txt 2>/dev/null; echo done > out.txt")
    job = worker_job(ws, ("/bin/sh", "-c", script))
    done = far.run_worker(job, send(job, pack(ws)[1]), h)
    assert isinstance(done, far.WorkerDone) and done.result is not None
    assert done.result.returncode == 0, done.result.stderr
    assert done.tree is not None
    back = tmp_path / "back"
    materialize(done.tree, back, lambda d: done.blobs[d] if d in done.blobs
                else Path(os.fsdecode(pack(ws)[1][d])))
    assert (back / "out.txt").read_text() == "done\n"
    # the run's blobs (a gate file's bytes among them) and other attempts are out of sight
    assert (back / "seen.txt").read_text() == ""
    up = set((back / "up.txt").read_text().split())  # the run's folder on the host
    assert "blobs" not in up and "ws" in up, up
    # what was sent came back unchanged, and only the new files' blobs travelled back
    assert set(done.blobs) == {d for d in done.tree.digests()} - job.workspace.digests()
    assert not list(far.owner_root(h.scratch, OWNER).glob("n-*"))  # the attempt's folder goes


def test_a_workspace_over_its_limits_does_not_travel_back(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    job = worker_job(ws, ("/bin/sh", "-c", "for i in 1 2 3 4 5; do echo $i > f$i; done"),
                     limits=Limits(max_files=3))
    done = far.run_worker(job, {}, host(tmp_path))
    assert isinstance(done, far.WorkerDone) and done.tree is None
    assert "max_files = 3" in done.refused


def test_a_host_asks_for_the_blobs_it_lacks(tmp_path: Path) -> None:
    ws = tree_of(tmp_path / "ws")
    job = worker_job(ws, ("/bin/true",))
    got = far.run_worker(job, {}, host(tmp_path))
    assert isinstance(got, far.Missing) and set(got.digests) == job.workspace.digests()


def test_a_gate_judges_on_the_host_what_the_engine_staged(tmp_path: Path) -> None:
    judged = tree_of(tmp_path / "judged")
    gate_file = tmp_path / "spec" / "check.py"
    gate_file.parent.mkdir()
    gate_file.write_text("import pathlib, sys\n"
                         "sys.exit(0 if pathlib.Path('a.txt').read_text() == 'alpha' else 1)\n")
    python = os.path.realpath("/usr/bin/python3")
    gate = CommandGate((python, str(gate_file)), 30.0)
    tree, where = pack(judged)
    files, found = mirror([gate_file])
    pins = {python: checks.pinned_digest(python)}
    job = far.GateJob(OWNER, "n", "n-0-1-gate", gate, tree, files, (str(gate_file),), pins,
                      confine())
    h = host(tmp_path)
    result = far.run_gate(job, read_blobs(tree.digests() | files.digests(), {**where, **found}),
                          h)
    assert isinstance(result, GateResult) and result.accepted, result.detail
    assert result.copied == tree_digest(judged)  # what the attempt compares with its staging
    # an interpreter on the host that is not the one pinned: no verdict from it
    other = dataclasses.replace(job, pins={python: "0" * 64})
    refused = far.run_gate(other, {}, h)
    assert isinstance(refused, GateResult) and not refused.accepted
    assert refused.facts["error"] == "not judged" and "pinned" in refused.detail


def test_a_runs_leftovers_on_a_host_are_reaped(tmp_path: Path) -> None:
    h = host(tmp_path)
    root = far.owner_root(h.scratch, OWNER)
    (root / "n-0-1-x" / "work").mkdir(parents=True)
    cell = limits.Cell(limits.Hold(limits.ResourceLimits(processes=16), OWNER, "n.worker"))
    proc = subprocess.Popen(cell.wrap(["sleep", "600"]), start_new_session=True)
    try:
        until("the sleeper to join the run's cgroup", cell.pids)
        assert far.reap(h.scratch, OWNER) >= 1
        assert proc.wait(30) != 0
        assert not root.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cell.end()


# ---- adapters: the engine's side, on an in-process stand-in for the cluster ------------------

class InProcess:
    """The `Cluster` protocol of engine/run/remote/adapters.py, calling the far side in this
    process (its own scratch folders: two hosts), with faults to plant: `lose(k)` makes the
    k-th call (1-based) lose its host, `forget(k)` clears a host's blobs before it."""

    def __init__(self, root: Path) -> None:
        self.hosts = {f"tcp://h{i}:1": far.Host(root / f"h{i}", f"tcp://h{i}:1") for i in (1, 2)}
        for h in self.hosts.values():
            h.scratch.mkdir(parents=True)
        self.listen = "127.0.0.1"
        self.known: dict[str, set[str]] = {a: set() for a in self.hosts}
        self.calls: list[str] = []
        self.lost: set[int] = set()
        self.forgotten: set[int] = set()
        self.last: dict[str, str] = {}
        self.watch: Path | None = None
        self.transfer_s = 0.0
        self.watched: list[list[str]] = []

    def check(self, programs: Iterable[str], pins: Mapping[str, str], sandbox: str,
              where: str) -> None:
        got = checks.probe(programs, dict(pins), sandbox)  # every host here is this machine
        assert not got["missing"] and not got["changed"] and got["sandbox"] is None, got

    def acquire(self, prefer: str | None = None) -> Slot:
        address = prefer or sorted(self.hosts)[len(self.calls) % 2]
        return Slot(address, address)

    def release(self, slot: Slot) -> None:
        pass

    def last_host(self, node: str, address: str | None = None) -> str | None:
        if address is not None:
            self.last[node] = address
        return self.last.get(node)

    def learn(self, slot: Slot, digests: Iterable[str]) -> None:
        self.known[slot.address] |= set(digests)

    def call(self, slot: Slot, fn: str, job: Any, digests: set[str],
             sources: Mapping[str, bytes], *, within_s: float,
             stop: Callable[[], str | None] | None = None) -> Any:
        self.calls.append(fn)
        n = len(self.calls)
        time.sleep(self.transfer_s)  # the way there and back, which the engine's clock sees
        if self.watch is not None:  # what the engine's folder holds as each call starts
            self.watched.append(sorted(os.listdir(self.watch)) if self.watch.is_dir() else [])
        if n in self.lost:
            raise OutcomeUnknown(f"the Dask worker {slot.address} running it was lost")
        h = self.hosts[slot.address]
        if n in self.forgotten:
            for p in (far.owner_root(h.scratch, job.owner) / "blobs").glob("*"):
                p.unlink()
        need = digests - self.known[slot.address]
        out = getattr(far, fn)(job, read_blobs(need, sources), h)
        self.learn(slot, need)
        if isinstance(out, far.Missing):
            self.known[slot.address] -= set(out.digests)
            out = getattr(far, fn)(job, read_blobs(set(out.digests), sources), h)
        return out


def run_graph(spec_path: Path, ledger: Path, cluster: Any = None) -> Runner:
    runner = Runner.start(load(spec_path), ledger, cluster=cluster)
    try:
        runner.run()
    finally:
        runner.close()
    return runner




# median: a calls judge; pipeline: a hand-off; repair: a repair; real-repo: the pytest kind on a
# real project's suite, its worker a script that imports a helper module beside it in the spec's
# folder (which travels, as every command sees it at home)
@pytest.mark.parametrize("example", ["median", "pipeline", "repair", "real-repo"])
def test_a_graph_on_the_stand_in_cluster_ends_as_it_does_locally(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, example: str) -> None:
    graph = REPO / "examples" / example / "graph.toml"
    _, here, _ = example_run(tmp_path_factory, example)  # the local run, shared by the session
    cluster = InProcess(tmp_path / "hosts")
    there = run_graph(graph, tmp_path / "remote.jsonl", cluster)
    assert there.report()["outcome"] == here["outcome"]
    assert there.report()["nodes"] == here["nodes"]
    assert {"run_worker", "run_gate"} <= set(cluster.calls)
    recs = records(tmp_path / "remote.jsonl")
    assert_g3(recs)
    assert all(r["claims"]["host"] in cluster.hosts for r in recs if r["type"] == "claim")


def test_a_host_that_forgot_its_blobs_is_sent_them_again(tmp_path: Path) -> None:
    cluster = InProcess(tmp_path / "hosts")
    cluster.forgotten = {2, 3, 4}  # every call after the first finds an empty cache
    run = run_graph(REPO / "examples" / "pipeline" / "graph.toml", tmp_path / "L.jsonl", cluster)
    assert run.report()["outcome"] == "DONE"


@pytest.mark.parametrize("lost, phase", [(1, "worker"), (2, "gate")])
def test_a_host_lost_mid_attempt_gives_the_attempt_back_charged(tmp_path: Path, lost: int,
                                                                phase: str) -> None:
    cluster = InProcess(tmp_path / "hosts")
    cluster.lost = {lost}
    cluster.watch = Path(f"{tmp_path / 'L.jsonl'}.accepted") / "median"
    run = run_graph(REPO / "examples" / "median" / "graph.toml", tmp_path / "L.jsonl", cluster)
    report = run.report()
    assert report["outcome"] == "DONE" and report["outcome_unknown"] == 1
    assert report["attempts_total"] == 1  # the lost attempt does not count
    recs = records(tmp_path / "L.jsonl")
    assert_g3(recs)
    i = next(i for i, r in enumerate(recs) if r["type"] == "abandon")
    reserve = recs[i - 1]
    assert reserve["type"] == "reserve" and recs[i]["charged"] == reserve["amount"] > 0
    assert reserve["what"] == ("wall_clock" if phase == "worker" else "evaluation")
    assert ("claim" in [r["type"] for r in recs[:i]]) == (phase == "gate")
    assert "was lost" in recs[i]["why"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # `loopproof show`, in this process
        cli.main(["show", str(tmp_path / "L.jsonl")])
    shown = out.getvalue()
    assert "outcome unknown (its Dask worker was lost): charged its open reservation" in shown
    # the lost attempt's judged copy is gone before the attempt runs again
    assert cluster.watched[lost] == []
    assert sorted(os.listdir(cluster.watch)) == ["0-1"]  # the accepted one


def test_nodes_that_cannot_run_on_a_cluster_are_refused_before_anything_is_written(
        tmp_path: Path) -> None:
    from loopproof.engine.system.errors import BadInput

    revision = REPO / "examples" / "regress-restore" / "graph.toml"  # runs in the engine
    with pytest.raises(BadInput, match="cannot run on a Dask cluster"):
        Runner.start(load(revision), tmp_path / "R.jsonl", cluster=InProcess(tmp_path / "r"))
    assert not (tmp_path / "R.jsonl").exists()
    spec = tmp_path / "graph.toml"
    (tmp_path / "out").mkdir()
    spec.write_text('[graph]\nspend_budget = 10.0\n[node.a]\nworker = ["true"]\n'
                    'gate = ["true"]\nspend_ceiling = 1.0\nwritable = ["out"]\n')
    with pytest.raises(BadInput, match="writable"):
        Runner.start(load(spec), tmp_path / "L.jsonl", cluster=InProcess(tmp_path / "h"))
    assert not (tmp_path / "L.jsonl").exists()


def test_a_remote_worker_is_charged_by_the_engines_clock(tmp_path: Path) -> None:
    """The host measures its command; the engine charges what its own clock saw from sending
    the attempt to its answer (here a slow way there and back), within the reservation."""
    cluster = InProcess(tmp_path / "hosts")
    cluster.transfer_s = 2.0
    run_graph(REPO / "examples" / "median" / "graph.toml", tmp_path / "L.jsonl", cluster)
    recs = records(tmp_path / "L.jsonl")
    (settle,) = [r for r in recs if r["type"] == "settle" and r["what"] == "wall_clock"]
    (claim,) = [r for r in recs if r["type"] == "claim"]
    assert settle["seconds"] >= 2.0 and settle["amount"] >= 2.0
    assert settle["amount"] <= settle["reserved"] and claim["claims"]["seconds"] >= 2.0
