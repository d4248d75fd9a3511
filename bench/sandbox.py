"""The sandbox's cost per attempt: the same graph run by the engine with `sandbox = "bwrap"` and
with `sandbox = "none"`, side by side in the same process, alternating, best of `ROUNDS`.

Why a difference of two engine runs: everything else an attempt costs (ledger records, the
snapshot copy, hashing, the pin checks, the meter) is the same in both, so what is left is what
the sandbox adds: two bubblewrap launches per attempt (the worker's and the gate's), each with
its mount, PID, IPC and network namespaces, and the wait for its PID namespace to empty. It is
measured per attempt (both commands together), against `TARGET_MS`. The worker and gate are
the ones of bench/attempt.py. Registered in bench.registry as "sandbox_overhead".
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.attempt import FILES, GATE, WORKER
from bench.registry import register

ATTEMPTS = 40
ROUNDS = 3
TARGET_MS = 15.0


def _graph(folder: Path, sandbox: str) -> Path:
    spec = folder / f"graph-{sandbox}.toml"
    spec.write_text(
        f'[graph]\nspend_budget = 1000000.0\nsandbox = "{sandbox}"\n[node.bench]\n'
        f"worker = {WORKER!r}\ngate = {GATE!r}\n".replace("'", '"')
        + f"attempts = {ATTEMPTS}\nspend_ceiling = 10.0\ntimeout_s = 10\ngate_timeout_s = 10\n")
    return spec


def _run(folder: Path, sandbox: str, i: int) -> float:
    from engine.run.runner import Runner
    from engine.run.spec import load

    spec = load(_graph(folder, sandbox))
    runner = Runner.start(spec, folder / f"{sandbox}-{i}.jsonl")
    t = time.perf_counter()
    runner.run()
    seconds = time.perf_counter() - t
    runner.close()
    if runner.state.attempts_total != ATTEMPTS:
        raise RuntimeError(f"bench graph ran {runner.state.attempts_total} attempts")
    return seconds


def bench_sandbox(args: argparse.Namespace) -> dict:
    from engine.system.sandbox import backend

    why = backend("bwrap").problem()
    if why is not None:
        return {"skipped": why}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    best = {"bwrap": float("inf"), "none": float("inf")}
    with tempfile.TemporaryDirectory(dir=out, prefix="sandbox-") as tmp:
        folder = Path(tmp)
        for i in range(ROUNDS):
            for sandbox in ("none", "bwrap") if i % 2 == 0 else ("bwrap", "none"):
                best[sandbox] = min(best[sandbox], _run(folder, sandbox, i))
    with_ms, without_ms = (1000 * best[s] / ATTEMPTS for s in ("bwrap", "none"))
    cost = with_ms - without_ms
    return {
        "attempts": ATTEMPTS, "rounds": ROUNDS, "workspace_files": FILES,
        "commands_per_attempt": 2,
        "with_sandbox_ms_per_attempt": round(with_ms, 2),
        "without_sandbox_ms_per_attempt": round(without_ms, 2),
        "sandbox_ms_per_attempt": round(cost, 2),
        "ratio_with_to_without": round(with_ms / without_ms, 2) if without_ms > 0 else None,
        "target_ms": TARGET_MS,
        "target_met": cost < TARGET_MS,
        "note": "same graph, same process, alternating order, best of rounds; the difference "
                "is two bubblewrap launches (worker and gate) per attempt",
    }


register("sandbox_overhead", bench_sandbox)
