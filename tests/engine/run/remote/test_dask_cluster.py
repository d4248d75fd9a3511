"""Attempts on a real Dask cluster (`loopproof run|resume --dask`), issue 38's done-when: a real
`dask scheduler` and `dask worker` processes on this machine, each with its own scratch folder
and none of the run's folders (tests/support/dask_cluster.py masks the spec's folder and the ledger's
for every worker: what they need must travel), a graph with two judge kinds, a command gate and
an `llm` node, and workers SIGKILLed mid-attempt.

What must hold, read from the ledger file (tests/oracles.py): the run ends DONE (the outcome the
model allows: each node passes on its first counted attempt); each attempt lost with its worker
is an `abandon` charged exactly its open reservation and given back, so no attempt is counted
twice and none is lost; the chain verifies; G3 holds at every prefix. The upstream key reaches
the upstream and never a worker host.

Every step waits for a condition the test controls (a worker blocks on a file in its remote
workspace until the test writes it; the gate blocks on a file the worker left; the test kills a
Dask worker once it sees its attempt's command running there), never on timing.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopproof.engine import cli
from tests.support.dask_cluster import Cluster, Scheduler, cluster, processes_with, until
from tests.support.engine_child import Child, started
from tests.support.fake_openai import fake_openai
from tests.support.oracles import assert_g3, records
from tests.support.paths import REPO

KEY = "sk-upstream-secret-0123456789"
REPLY = "hello from upstream"

WORK = '''import json, os, pathlib, sys, time, urllib.request
role, ws = sys.argv[1], pathlib.Path.cwd()
for name in ("started", "go", "go-block-gate", "gate-wait"):
    (ws / name).unlink(missing_ok=True)


def wait_for_go():
    """Block until the test writes `go` (or `go-block-gate`) into this remote workspace."""
    (ws / "started").write_text(os.environ["LOOPPROOF_NODE"])
    while True:
        for name in ("go", "go-block-gate"):
            if (ws / name).exists():
                (ws / name).unlink()
                (ws / "started").unlink()
                return name
        time.sleep(0.05)


if role == "a":
    wait_for_go()
    (ws / "solution.py").write_text("def double(x):\\n    return 2 * x\\n")
elif role == "b":
    # what a hostile worker looks for on its host: the blobs of the run (gate files among
    # them), other attempts' files, the gates' files; walked from every folder above its own
    found, here = [], ws.resolve()
    hosts = os.environ["HOSTS_ROOT"] + "/"  # below it, a folder per worker (a stand-in host)
    for top in [p for p in here.parents if str(p).startswith(hosts)]:
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) != str(here)]
            found += [os.path.join(folder, f) for f in files
                      if len(f) == 64 or f.startswith(("cases_", "gate_", "L.jsonl"))]
    (ws / "found.txt").write_text("\\n".join(sorted(set(found))))
    src = (ws / "inputs" / "a" / "solution.py").read_text()
    (ws / "prog.py").write_text(src + "import json, sys\\n"
                                "print(json.dumps(double(json.load(sys.stdin))))\\n")
elif role == "c":
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": "m", "max_tokens": 16,
                         "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    reply = json.load(urllib.request.urlopen(req, timeout=120))
    (ws / "reply.txt").write_text(reply["choices"][0]["message"]["content"])
    (ws / "env.txt").write_text("\\n".join(f"{k}={v}" for k, v in sorted(os.environ.items())))
elif role == "d":
    if wait_for_go() == "go-block-gate":
        (ws / "gate-wait").write_text("the gate blocks")
    (ws / "report.txt").write_text("ok")
'''
GATE_C = f'''import pathlib, sys
sys.exit(0 if pathlib.Path("reply.txt").read_text() == {REPLY!r} else 1)
'''
GATE_D = '''import pathlib, sys, time
if pathlib.Path("gate-wait").exists():
    time.sleep(600)
sys.exit(0 if pathlib.Path("report.txt").read_text() == "ok" else 1)
'''


def graph(spec: Path, upstream: str, hosts: Path) -> Path:
    """a (calls judge) -> b (program judge); a -> c (llm node, command gate); b, c -> d."""
    spec.mkdir(parents=True)
    (spec / "work.py").write_text(WORK)
    (spec / "gate_c.py").write_text(GATE_C)
    (spec / "gate_d.py").write_text(GATE_D)
    (spec / "cases_a.jsonl").write_text('{"args": [2], "expect": 4}\n'
                                        '{"args": [-3], "expect": -6}\n')
    (spec / "cases_b.jsonl").write_text('{"input": 5, "output": 10}\n')
    # limits far beyond what any step takes: a step ends when the test says, never at a limit
    node = 'worker = ["python3", "work.py", "{0}"]\nspend_ceiling = 700.0\ntimeout_s = 300\n' \
           'gate_timeout_s = 300\n'
    (spec / "graph.toml").write_text(
        "[graph]\nspend_budget = 3000.0\n"
        "[node.a]\n" + node.format("a") +
        '[node.a.gate]\nkind = "calls"\nmodule = "solution"\nfunction = "double"\n'
        'cases = "cases_a.jsonl"\n'
        '[node.b]\nneeds = ["a"]\n' + node.format("b") + f'env = {{ HOSTS_ROOT = "{hosts}" }}\n'
        +
        '[node.b.gate]\nkind = "program"\nrun = ["python3", "prog.py"]\ncases = "cases_b.jsonl"\n'
        '[node.c]\nneeds = ["a"]\n' + node.format("c") + 'gate = ["python3", "gate_c.py"]\n'
        f'[node.c.llm]\nupstream = "{upstream}"\napi_key_env = "UPSTREAM_KEY"\n'
        "price_prompt_per_1k = 0.15\nprice_completion_per_1k = 0.60\nmax_tokens = 64\n"
        '[node.d]\nneeds = ["b", "c"]\n' + node.format("d") + 'gate = ["python3", "gate_d.py"]\n')
    return spec / "graph.toml"


class Engine:
    """`loopproof ARGV` in a process of its own (forked warm: tests/support/engine_child.py), read
    as `until` reads a Popen: `poll`, `communicate`, `returncode`, `kill` (SIGKILL)."""

    def __init__(self, child: Child) -> None:
        self.child = child

    def poll(self) -> int | None:
        return self.child.poll()

    @property
    def returncode(self) -> int | None:
        return self.child.poll()

    def communicate(self, timeout: float = 120.0) -> tuple[str, str]:
        self.child.wait(timeout)
        return self.child.stdout(), self.child.stderr()

    def kill(self) -> None:
        self.child.kill()


@contextlib.contextmanager
def engine(*argv: str) -> Iterator[Engine]:
    """`loopproof ARGV` with the upstream key in its environment, killed if it still runs when
    the block ends."""
    with started(["cli", *argv], env={**os.environ, "UPSTREAM_KEY": KEY}) as child:
        yield Engine(child)


def started_on(c: Cluster, node: str) -> tuple[Path, object] | None:
    """A marker `started` written by `node`'s worker in its workspace on a host (engine/run/
    remote/far.py: `loopproof/<owner>/ws/<node>/`), and that host's worker."""
    for w in c.live():
        for folder, _dirs, files in os.walk(w.scratch):  # folders come and go meanwhile
            if "started" in files and os.path.basename(os.path.dirname(folder)) == "ws":
                marker = Path(folder) / "started"
                try:
                    if marker.read_text() == node:
                        return marker, w
                except OSError:
                    continue
    return None


def scratch_root(name: str) -> Path:
    """Where the Dask workers keep their scratch folders: outside every folder a sandbox masks
    anyway (/tmp, the home), so that what hides a host's scratch from the commands it runs is
    the far side's own view, and a test can see it fail."""
    root = REPO / "build" / "test-dask" / name
    shutil.rmtree(root, ignore_errors=True)
    return root


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scheduler]:
    """One `dask scheduler` for the module's tests (its start is a second of CPU); each test
    brings its own workers and lets them go (tests/support/dask_cluster.py: `Cluster`)."""
    root = scratch_root(tmp_path_factory.mktemp("scheduler").name)
    try:
        with Scheduler(root) as s:
            yield s
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_graph_runs_on_a_dask_cluster_through_lost_workers(scheduler: Scheduler,
                                                             tmp_path: Path) -> None:
    run = tmp_path / "run"  # the spec's folder and the ledger's: no Dask worker sees them
    root = scratch_root(tmp_path.name)
    try:
        run_through_lost_workers(scheduler, run, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_through_lost_workers(scheduler: Scheduler, run: Path, root: Path) -> None:
    with fake_openai([REPLY]) as upstream, cluster(scheduler, root, hidden=[run]) as c:
        spec = graph(run / "spec", upstream.base_url, root)
        ledger = run / "L.jsonl"
        # the wall is real: a worker cannot see the spec's folder
        seen = c.client.run(lambda: os.listdir(str(run)))
        assert all(v == [] for v in seen.values()), seen
        with engine("run", str(spec), "--ledger", str(ledger), "--jobs", "2", "--dask",
                    c.address, "--json") as eng:
            # a: its first host dies while its worker runs
            _marker, first = until("a's worker to start", lambda: started_on(c, "a"), engine=eng)
            c.kill(first)  # type: ignore[arg-type]  # until() returns the walrus' tuple, typed object
            marker, _ = until("a's worker to start again",
                              lambda: (got := started_on(c, "a")) and got[1] is not first and got,
                              engine=eng)
            (marker.parent / "go").write_text("")
            # d: its worker leaves a file that makes its gate block, then its host dies there
            marker, _ = until("d's worker to start", lambda: started_on(c, "d"), engine=eng)
            (marker.parent / "go-block-gate").write_text("")
            gate_pid = until("d's gate to run",
                             lambda: (processes_with("gate_d.py") or [None])[0], engine=eng)
            host = c.of_pid(gate_pid)
            assert host is not None, "d's gate runs under no Dask worker"
            c.kill(host)
            assert not c.live()  # no worker left: the run waits for one
            c.add_worker("w3")
            marker, _ = until("d's worker to start again", lambda: started_on(c, "d"), engine=eng)
            (marker.parent / "go").write_text("")
            out, err = eng.communicate(timeout=300)
        assert eng.returncode == 0, err
        report = json.loads(out)
        assert report["outcome"] == "DONE" and report["attempts_total"] == 4, report
        # the run left nothing on the live host (a dead one's folder goes with its host)
        assert not [p for w in c.live() for p in w.scratch.rglob("loopproof/*")]

    recs = records(ledger)
    assert_g3(recs)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # `loopproof verify`, in this process
        cli.main(["verify", str(ledger), "--json"])
    assert json.loads(out.getvalue())["status"] == "verified", out.getvalue()
    kinds = [(r["type"], r.get("node")) for r in recs]
    # each node began once more for every attempt given back, and passed once
    assert [n for t, n in kinds if t == "begin"] .count("a") == 2
    assert [n for t, n in kinds if t == "begin"].count("d") == 2
    assert sorted(n for t, n in kinds if t == "abandon") == ["a", "d"]
    assert sorted(n for t, n in kinds if t == "verdict") == ["a", "b", "c", "d"]
    assert all(r["passed"] for r in recs if r["type"] == "verdict")
    by = {n: [r for r in recs if r.get("node") == n] for n in "abcd"}
    # a was lost inside its worker: reserved, no claim, given back charged that reservation
    a_lost = next(r for r in by["a"] if r["type"] == "abandon")
    before = by["a"][:by["a"].index(a_lost)]
    assert [r["type"] for r in before] == ["begin", "reserve"]
    assert a_lost["charged"] == before[-1]["amount"] > 0 and a_lost["outcome"] == "unknown"
    assert "Dask worker" in a_lost["why"]
    # d was lost inside its gate: its claim recorded, the evaluation reserved, given back
    d_lost = next(r for r in by["d"] if r["type"] == "abandon")
    before = by["d"][:by["d"].index(d_lost)]
    assert [r["type"] for r in before][-2:] == ["claim", "reserve"]
    assert before[-1]["what"] == "evaluation" and d_lost["charged"] == before[-1]["amount"]
    # every worker and gate ran on a Dask worker, the hosts named in the records
    hosts = {w.address for w in c.workers}
    assert all(r["claims"]["host"] in hosts for r in recs if r["type"] == "claim")
    assert all(r["host"] in hosts for r in recs if r["type"] == "verdict")
    # the llm node's call went through the engine's proxy, metered, with the upstream key
    (call,) = [r for r in recs if r["type"] == "llm_call"]
    assert call["node"] == "c" and not call["refused"] and call["charged"] > 0
    assert [q["auth"] for q in upstream.requests] == [f"Bearer {KEY}"]
    # and the key never reached a worker host: not in what came back, nor in any scratch
    env = (accepted(ledger, "c") / "env.txt").read_text()
    assert KEY not in env and "OPENAI_API_KEY=lp-" in env
    assert not [p for w in c.workers for p in w.scratch.rglob("*")
                if p.is_file() and KEY.encode() in p.read_bytes()]
    # b's worker found nothing of the run on its host but its own files
    assert (accepted(ledger, "b") / "found.txt").read_text() == ""


def accepted(ledger: Path, node: str) -> Path:
    (tree,) = (Path(f"{ledger}.accepted") / node).iterdir()
    return tree


def test_an_engine_killed_mid_run_resumes_and_its_remote_attempt_ends(scheduler: Scheduler,
                                                                      tmp_path: Path) -> None:
    """SIGKILL the engine while a remote worker runs: the host sees that no one waits and kills
    the command there; `resume --dask` reaps what the run left on the hosts, gives the attempt
    back (charged its reservation) and runs it again to DONE."""
    run = tmp_path / "run"
    root = scratch_root(tmp_path.name)
    try:
        with fake_openai([REPLY]) as upstream, \
                cluster(scheduler, root, hidden=[run], workers=1) as c:
            spec = graph(run / "spec", upstream.base_url, root)
            ledger = run / "L.jsonl"
            with engine("run", str(spec), "--ledger", str(ledger), "--dask", c.address,
                        "--json") as eng:
                marker, _ = until("a's worker to start", lambda: started_on(c, "a"), engine=eng)
                remote = [p for p in processes_with("work.py") if c.of_pid(p)]
                assert remote, "a's command runs under no Dask worker"
                eng.kill()  # SIGKILL, mid-attempt
            until("a's command on the host to end",
                  lambda: not [p for p in processes_with("work.py") if c.of_pid(p)])
            # and its workspace there with it: no one knows what it holds
            until("a's workspace on the host to go", lambda: not marker.exists())
            with engine("resume", "--ledger", str(ledger), "--dask", c.address,
                        "--json") as res:
                for node in "ad":
                    marker, _ = until(f"{node}'s worker to start", lambda n=node: started_on(c, n),
                                      engine=res)
                    (marker.parent / "go").write_text("")
                out, err = res.communicate(timeout=300)
        assert res.returncode == 0, err
        assert json.loads(out)["outcome"] == "DONE"
    finally:
        shutil.rmtree(root, ignore_errors=True)
    recs = records(ledger)
    assert_g3(recs)
    (resumed,) = [r for r in recs if r["type"] == "resumed"]
    assert isinstance(resumed["remote_reaped"], int)
    (lost,) = [r for r in recs if r["type"] == "abandon"]
    assert lost["node"] == "a" and lost["charged"] > 0
    assert sorted(r["node"] for r in recs if r["type"] == "verdict" and r["passed"]) == \
        list("abcd")


def test_a_scheduler_that_does_not_answer_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`loopproof run|resume --dask` at an address where nothing listens, in this process (the
    command's exit code and stderr are what is checked), trying to connect for half a second
    instead of the engine's ten (a refused connection is refused however long one tries)."""
    monkeypatch.setattr("loopproof.engine.run.remote.cluster.CONNECT_S", 0.5)
    spec = graph(tmp_path / "spec", "http://127.0.0.1:9/v1", tmp_path)
    ledger = tmp_path / "L.jsonl"
    for argv in (["run", str(spec), "--ledger", str(ledger)], ["resume", "--ledger", str(ledger)]):
        capsys.readouterr()
        code = cli.main([*argv, "--dask", "tcp://127.0.0.1:9"])
        out, err = capsys.readouterr()
        assert code == 2, (out, err)
        assert err.count("\n") == 1 and "--dask" in err and "no Dask scheduler" in err, err
    assert not list(tmp_path.glob("L.jsonl*"))
