"""Attempts on a Dask cluster (`loopproof run --dask`) against the same attempts run locally, side
by side in one process, alternating, best of `ROUNDS` (`make bench-dask`).

Two figures, issue 38's:

- *The fan*: bench/fan.py's 40 independent nodes of 1-second workers (bwrap, as a fresh clone
  runs them) at `--jobs 16`, on a real cluster of 2 Dask workers x 8 threads (a `dask scheduler`
  and two `dask worker` processes, each its own scratch folder, on this machine's cores) against
  `--jobs 16` in the engine's process. Target: the cluster's wall clock within 1.25 x the local one. Every
  ledger is verified and G3 checked at every prefix (bench/fan.py's `checked`).
- *The engine's overhead per sandboxed attempt*: bench/attempt.py's node (a worker writes 20
  files, a gate reads them and rejects) for 40 attempts with `sandbox = "bwrap"`, run by the
  engine locally and on the cluster, against a bare loop of the same two commands launched in
  the same bubblewrap sandboxes and resource limits by `run_command` (no ledger, no staging, no
  hashing, no Dask).
  Targets: the local overhead at most 15 ms per attempt over the bare launches, and the remote
  overhead (the content-addressed transfers, the Dask round trips, the hashing on both sides)
  within 2 x the local one.

Registered in bench.registry as "dask"; left out of `--quick` (it starts a cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.attempt import ATTEMPTS, FILES, GATE, WORKER
from bench.fan import checked, fan_graph
from bench.registry import register
from bench.sandbox import attempt_graph
from bench.targets import figure

ROUNDS = 2
NODES, SLEEP_S, JOBS = 40, 1.0, 16
DASK_WORKERS, THREADS = 2, 8
FAN_RATIO = 1.25  # the cluster's fan wall clock within 1.25 x the local one
LOCAL_MS = 15.0  # the local engine's overhead per sandboxed attempt over the bare launches
REMOTE_RATIO = 2.0  # the remote overhead within 2 x the local one


@contextlib.contextmanager
def local_cluster(folder: Path) -> Iterator[str]:
    """A `dask scheduler` and `DASK_WORKERS` `dask worker` processes of `THREADS` threads on
    this machine, each worker with its own scratch folder (processes of their own, as on a
    real cluster: a scheduler inside the engine's process would share its interpreter)."""
    from distributed import Client

    info = folder / "scheduler.json"
    python = [sys.executable, "-m"]
    procs = [subprocess.Popen([*python, "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(info)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        while not (info.is_file() and info.stat().st_size):
            time.sleep(0.05)
        address = json.loads(info.read_text())["address"]
        for i in range(DASK_WORKERS):
            procs.append(subprocess.Popen(
                [*python, "distributed.cli.dask_worker", address, "--nthreads", str(THREADS),
                 "--no-nanny", "--no-dashboard", "--local-directory", str(folder / f"w{i}")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, set_as_default=False) as client:
            client.wait_for_workers(DASK_WORKERS, timeout=300)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _run(spec_path: Path, ledger: Path, jobs: int, address: str | None) -> tuple[float, Any]:
    """Seconds of one engine run (from its first attempt to its end) and the runner."""
    from loopproof.engine.run.remote.cluster import connect
    from loopproof.engine.run.runner import Runner
    from loopproof.engine.run.spec import load
    from loopproof.engine.system.limits import owner_of

    cluster = connect(address) if address is not None else None
    try:
        runner = Runner.start(load(spec_path), ledger, jobs=jobs, cluster=cluster)
        t = time.perf_counter()
        try:
            code = runner.run()
        finally:
            runner.close()
        seconds = time.perf_counter() - t
    finally:
        if cluster is not None:
            cluster.close(owner_of(ledger.absolute()))
    if code != 0 and runner.state.attempts_total != ATTEMPTS:
        raise RuntimeError(f"{spec_path}: exit {code}, {runner.state.attempts_total} attempts")
    return seconds, runner


def _bare(folder: Path, i: int) -> float:
    """The two commands of each attempt, launched in the sandboxes the engine gives them (the
    worker's workspace writable; the gate's copy read-only) and nothing else."""
    from loopproof.engine.system.limits import Hold, ResourceLimits
    from loopproof.engine.system.process import gate_environment, run_command, safe_environment
    from loopproof.engine.system.sandbox import Confinement, View, backend

    ws = folder / f"bare{i}"
    ws.mkdir()
    box = backend("bwrap")
    held = ResourceLimits(4 << 30, 1024, 1 << 30, 256 << 20)  # a node's default limits
    worker = Confinement(box, View(writable=(ws,)),
                         hold=Hold(held, "bare", "bench.worker", ws))
    gate = Confinement(box, View(readable=(ws,), private_home=True),
                       hold=Hold(held, "bare", "bench.gate"))
    t = time.perf_counter()
    for _ in range(ATTEMPTS):
        run_command(WORKER, ws, 10, env=safe_environment(home=ws), confine=worker)
        run_command(GATE, ws, 10, env=gate_environment(), confine=gate)
    return time.perf_counter() - t


def bench_dask(args: argparse.Namespace) -> dict[str, Any]:
    from loopproof.engine.system.sandbox import backend

    why = backend("bwrap").problem()
    if why is not None:
        return {"skipped": why}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fan: dict[str, list[float]] = {"local": [], "remote": []}
    fan_checks: list[dict[str, Any]] = []
    per: dict[str, list[float]] = {"bare": [], "local": [], "remote": []}
    with tempfile.TemporaryDirectory(dir=out, prefix="dask-") as tmp:
        folder = Path(tmp)
        with local_cluster(folder) as address:
            # each spec in a folder of its own (a spec's folder travels with its commands, and
            # the runs' ledgers and the workers' scratch folders are not theirs to see)
            for name in ("fan", "one"):
                (folder / name).mkdir()
            fan_spec = fan_graph(folder / "fan", NODES, SLEEP_S)
            one = attempt_graph(folder / "one", "bwrap")
            for i in range(ROUNDS):
                for where in ("local", "remote") if i % 2 == 0 else ("remote", "local"):
                    ledger = folder / f"fan-{where}-{i}.jsonl"
                    seconds, _ = _run(fan_spec, ledger, JOBS,
                                      address if where == "remote" else None)
                    fan[where].append(seconds)
                    fan_checks.append({"where": where, **checked(ledger)})
            for i in range(ROUNDS + 1):
                per["bare"].append(_bare(folder, i))
                for where in ("local", "remote") if i % 2 == 0 else ("remote", "local"):
                    seconds, _ = _run(one, folder / f"one-{where}-{i}.jsonl", 1,
                                      address if where == "remote" else None)
                    per[where].append(seconds)
    ms = {k: 1000 * min(v) / ATTEMPTS for k, v in per.items()}
    local_over, remote_over = ms["local"] - ms["bare"], ms["remote"] - ms["bare"]
    return {
        "fan": {"nodes": NODES, "sleep_s": SLEEP_S, "jobs": JOBS,
                "dask_workers": DASK_WORKERS, "threads": THREADS,
                "local_wall_s": round(min(fan["local"]), 3),
                "remote_wall_s": round(min(fan["remote"]), 3),
                "runs": fan_checks,
                "ratio": figure(min(fan["remote"]) / min(fan["local"]), FAN_RATIO,
                                "x the local wall clock",
                                every_ledger_verified=all(c["verified"] for c in fan_checks),
                                g3_every_prefix=all(c["g3_every_prefix"] for c in fan_checks),
                                every_run_done=all(c["outcome"] == "DONE"
                                                   for c in fan_checks))},
        "attempt": {"attempts": ATTEMPTS, "workspace_files": FILES, "sandbox": "bwrap",
                    "bare_ms_per_attempt": round(ms["bare"], 2),
                    "local_ms_per_attempt": round(ms["local"], 2),
                    "remote_ms_per_attempt": round(ms["remote"], 2),
                    "local_overhead": figure(local_over, LOCAL_MS, "ms per attempt"),
                    "remote_overhead_ms": round(remote_over, 2),
                    "remote_to_local": figure(remote_over / max(local_over, 1e-9),
                                              REMOTE_RATIO, "x the local overhead")},
        "note": "same engine process, alternating order, best of rounds; the cluster is a "
                "dask scheduler and two dask worker processes on this machine",
    }


register("dask", bench_dask)
