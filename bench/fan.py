"""Parallel attempts under one budget: a fan of independent nodes whose workers wait (as an agent
waits on its model), run at `--jobs` 1, 4 and 8.

Why a fan of waiting workers: a worker that waits costs the machine nothing, so on 2 cores the
wall clock should fall with the number of attempts in flight (target: a speed-up of at least
0.8 x jobs over the serial run, up to 8), and what the engine itself adds per attempt (its own
CPU: records, fsyncs, snapshots, hashing, sandbox set-up; children excluded) should not grow
with the number in flight (target: at --jobs 8 within 1.5 x the serial run's). Every run's
ledger is verified (the whole chain) and its spend checked at every prefix (G3: settled +
every open reservation <= B, each attempt within its c_v, read from `loopproof show`'s fold of
the ledger). The issue's done-when line is `done_when`: --jobs 8 under 1/6 of the serial time.

Each node's worker is `sleep S` and its gate `true`, in the graph's default sandbox (bwrap, as a
fresh clone runs it). Registered in bench.registry as "fan"; `--fan-nodes`, `--fan-sleep` and
`--fan-jobs` size it (40 nodes, 1 s, 1,4,8).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.registry import register
from bench.targets import figure

NODES = 40
SLEEP_S = 1.0
JOBS = (1, 4, 8)
SPEEDUP_PER_JOB = 0.8  # target: speed-up >= 0.8 x jobs
OVERHEAD_RATIO = 1.5  # target: engine CPU per attempt at the most jobs <= 1.5 x serial's
DONE_WHEN = 6.0  # the issue: --jobs 8 under 1/6 of the serial wall clock


def fan_graph(folder: Path, nodes: int, sleep_s: float) -> Path:
    """`nodes` independent nodes, each `sleep sleep_s` judged by `true`, B large enough for all."""
    lines = ["[graph]", f"spend_budget = {nodes * (sleep_s + 20.0)}"]
    for i in range(nodes):
        lines += [f"[node.w{i:03d}]", f'worker = ["sleep", "{sleep_s:g}"]', 'gate = ["true"]',
                  f"spend_ceiling = {sleep_s + 20.0}", f"timeout_s = {sleep_s + 10.0}",
                  "gate_timeout_s = 10"]
    spec = folder / "graph.toml"
    spec.write_text("\n".join(lines) + "\n")
    return spec


def checked(ledger: Path) -> dict[str, Any]:
    """The whole chain verified, and G3 at every prefix of the model's fold of the ledger."""
    from loopproof.engine.record.ledger import verify
    from loopproof.engine.record.timeline import build

    check = verify(ledger)
    timeline = build(ledger)
    budget = timeline.replayed.graph.spend_budget
    worst = max(committed for _seq, _settled, committed in timeline.curve)
    over_ceiling = [a.node for a in timeline.attempts if a.spend > a.spend_ceiling + 1e-9]
    return {"verified": check.status == "verified", "records": check.records,
            "g3_every_prefix": worst <= budget + 1e-9 and not over_ceiling,
            "most_committed": round(worst, 6), "budget": budget,
            "outcome": timeline.replayed.state.outcome.value}


def run_fan(folder: Path, jobs: int, nodes: int, sleep_s: float) -> dict[str, Any]:
    """One run of the fan at `jobs`, in this process: wall clock, engine CPU, the checks."""
    from loopproof.engine.run.runner import Runner
    from loopproof.engine.run.spec import load

    spec = load(fan_graph(folder, nodes, sleep_s))
    ledger = folder / f"fan-jobs{jobs}.jsonl"
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    runner = Runner.start(spec, ledger, jobs=jobs)
    try:
        code = runner.run()
    finally:
        runner.close()
    wall = time.perf_counter() - t
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"jobs": jobs, "exit": code, "wall_s": round(wall, 3),
            "engine_cpu_ms_per_attempt": round(1000 * cpu / nodes, 2), **checked(ledger)}


def bench_fan(args: argparse.Namespace) -> dict[str, Any]:
    nodes = getattr(args, "fan_nodes", NODES)
    sleep_s = getattr(args, "fan_sleep", SLEEP_S)
    jobs = tuple(getattr(args, "fan_jobs", JOBS))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix="fan-") as tmp:
        runs = {}
        for j in jobs:
            folder = Path(tmp) / f"jobs{j}"
            folder.mkdir()
            runs[j] = run_fan(folder, j, nodes, sleep_s)
    serial = runs[jobs[0]]
    result: dict[str, Any] = {"nodes": nodes, "sleep_s": sleep_s, "runs": list(runs.values())}
    for j in jobs[1:]:
        speedup = serial["wall_s"] / runs[j]["wall_s"]
        result[f"speedup_jobs{j}"] = figure(speedup, SPEEDUP_PER_JOB * j,
                                            "x the serial wall clock", "higher")
    top = jobs[-1]
    result[f"overhead_jobs{top}"] = figure(
        runs[top]["engine_cpu_ms_per_attempt"] / max(serial["engine_cpu_ms_per_attempt"], 1e-9),
        OVERHEAD_RATIO, "x the serial engine CPU per attempt")
    result["done_when"] = figure(serial["wall_s"] / runs[top]["wall_s"], DONE_WHEN,
                                 f"x faster at --jobs {top} than serial", "higher",
                                 every_ledger_verified=all(r["verified"] for r in runs.values()),
                                 g3_every_prefix=all(r["g3_every_prefix"]
                                                     for r in runs.values()),
                                 every_run_done=all(r["outcome"] == "DONE"
                                                    for r in runs.values()))
    return result


register("fan", bench_fan)
