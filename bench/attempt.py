"""Engine overhead per attempt: the runner against a bare loop calling the same worker and gate.

Why a ratio measured in the same run: the cost of spawning a process varies several-fold between
machines and with load; what the engine adds (ledger records with group commit and an fsync per
reservation, the workspace snapshot copy, content hashing before and after the gate, pinned-file
checks, process-group handling, replay folding) is the difference between the two loops, timed
side by side, alternating, best of `ROUNDS`.

The worker writes a few files into its workspace; the gate reads them and rejects, so one node
with `ATTEMPTS` attempts runs that many full attempts. The bare loop runs the same two argv with
`subprocess.run` in a plain folder. Registered in bench.registry as "attempt_overhead".
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from bench.registry import register
from bench.targets import figure

ATTEMPTS = 40
ROUNDS = 3
FILES = 20  # files the worker keeps in its workspace (what the snapshot copies and hashes)
TARGET_MS = 20.0
WORKER = ["sh", "-c", f"for i in $(seq 1 {FILES}); do echo line $i > f$i.txt; done"]
GATE = ["sh", "-c", "cat f*.txt > /dev/null; exit 1"]


def _graph(folder: Path) -> Path:
    spec = folder / "graph.toml"
    spec.write_text(
        "[graph]\nspend_budget = 1000000.0\nsandbox = \"none\"\n[node.bench]\n"
        f"worker = {WORKER!r}\ngate = {GATE!r}\n".replace("'", '"')
        + f"attempts = {ATTEMPTS}\nspend_ceiling = 10.0\ntimeout_s = 10\ngate_timeout_s = 10\n")
    return spec


def _engine_loop(folder: Path, i: int) -> float:
    from loopproof.engine.run.runner import Runner
    from loopproof.engine.run.spec import load

    spec = load(_graph(folder))
    t = time.perf_counter()
    runner = Runner.start(spec, folder / f"run{i}.jsonl")
    runner.run()
    runner.close()
    seconds = time.perf_counter() - t
    if runner.state.attempts_total != ATTEMPTS:
        raise RuntimeError(f"bench graph ran {runner.state.attempts_total} attempts")
    return seconds


def _bare_loop(folder: Path, i: int) -> float:
    ws = folder / f"bare{i}"
    ws.mkdir()
    t = time.perf_counter()
    for _ in range(ATTEMPTS):
        subprocess.run(WORKER, cwd=ws, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(GATE, cwd=ws, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def bench_attempt(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    engine_s = bare_s = float("inf")
    records = 0
    with tempfile.TemporaryDirectory(dir=out, prefix="attempts-") as tmp:
        folder = Path(tmp)
        for i in range(ROUNDS):
            bare_s = min(bare_s, _bare_loop(folder, i))
            engine_s = min(engine_s, _engine_loop(folder, i))
        records = len((folder / "run0.jsonl").read_text().splitlines())
    engine_ms, bare_ms = 1000 * engine_s / ATTEMPTS, 1000 * bare_s / ATTEMPTS
    overhead = engine_ms - bare_ms
    return {
        "attempts": ATTEMPTS, "rounds": ROUNDS, "workspace_files": FILES,
        "engine_ms_per_attempt": round(engine_ms, 2),
        "bare_ms_per_attempt": round(bare_ms, 2),
        "overhead_ms_per_attempt": round(overhead, 2),
        "ratio_engine_to_bare": round(engine_ms / bare_ms, 2) if bare_ms > 0 else None,
        "ledger_records_per_attempt": round(records / ATTEMPTS, 2),
        "overhead": figure(overhead, TARGET_MS, "ms per attempt"),
        "note": "same worker and gate argv in both loops; best of rounds; alternating",
    }


register("attempt_overhead", bench_attempt)
