"""The sandbox's cost per attempt: the same graph run by the engine with `sandbox = "bwrap"` and
with `sandbox = "none"`, side by side in the same process, alternating, best of `ROUNDS`.

Why a difference of two engine runs: everything else an attempt costs (ledger records, the
snapshot copy, hashing, the pin checks, the meter) is the same in both, so what is left is what
the sandbox adds: two bubblewrap launches per attempt (the worker's and the gate's), each with
its mount, PID, IPC and network namespaces, and the wait for its PID namespace to empty. It is
measured per attempt (both commands together), against `TARGET_MS`. The worker and gate are
the ones of bench/attempt.py. Registered in bench.registry as "sandbox_overhead".

A second figure is less sensitive to a loaded machine: the fastest of `LAUNCHES` runs of
`true` through `run_command` in a worker's sandbox, against the fastest without one (a minimum
sheds the time a busy machine adds); twice the difference estimates an attempt's cost.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.attempt import FILES, GATE, WORKER
from bench.registry import register
from bench.targets import figure

ATTEMPTS = 40
ROUNDS = 3
LAUNCHES = 30
TARGET_MS = 15.0


def attempt_graph(folder: Path, sandbox: str) -> Path:
    """bench/attempt.py's node for `ATTEMPTS` attempts, in the sandbox named."""
    spec = folder / f"graph-{sandbox}.toml"
    spec.write_text(
        f'[graph]\nspend_budget = 1000000.0\nsandbox = "{sandbox}"\n[node.bench]\n'
        f"worker = {WORKER!r}\ngate = {GATE!r}\n".replace("'", '"')
        + f"attempts = {ATTEMPTS}\nspend_ceiling = 10.0\ntimeout_s = 10\ngate_timeout_s = 10\n")
    return spec


def _run(folder: Path, sandbox: str, i: int) -> float:
    from loopproof.engine.run.runner import Runner
    from loopproof.engine.run.spec import load

    spec = load(attempt_graph(folder, sandbox))
    runner = Runner.start(spec, folder / f"{sandbox}-{i}.jsonl")
    t = time.perf_counter()
    runner.run()
    seconds = time.perf_counter() - t
    runner.close()
    if runner.state.attempts_total != ATTEMPTS:
        raise RuntimeError(f"bench graph ran {runner.state.attempts_total} attempts")
    return seconds


def _fastest_launch(folder: Path) -> tuple[float, float]:
    """(fastest seconds with the sandbox, fastest without) of `true` in a workspace."""
    from loopproof.engine.system.process import run_command, safe_environment
    from loopproof.engine.system.sandbox import Confinement, View, backend

    ws = folder / "launch-ws"
    ws.mkdir()
    box = Confinement(backend("bwrap"), View(writable=(ws,), readable=(folder,)))
    best = [float("inf"), float("inf")]
    for _ in range(LAUNCHES):
        for k, confine in enumerate((box, None)):
            t = time.perf_counter()
            run_command(["true"], ws, 10, env=safe_environment(), confine=confine)
            best[k] = min(best[k], time.perf_counter() - t)
    return best[0], best[1]


def bench_sandbox(args: argparse.Namespace) -> dict:
    from loopproof.engine.system.sandbox import backend

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
        launch_with, launch_without = _fastest_launch(folder)
    with_ms, without_ms = (1000 * best[s] / ATTEMPTS for s in ("bwrap", "none"))
    cost = with_ms - without_ms
    return {
        "attempts": ATTEMPTS, "rounds": ROUNDS, "workspace_files": FILES,
        "commands_per_attempt": 2,
        "with_sandbox_ms_per_attempt": round(with_ms, 2),
        "without_sandbox_ms_per_attempt": round(without_ms, 2),
        "sandbox_ms_per_attempt": figure(cost, TARGET_MS, "ms",
                                         baseline_ms_per_attempt=round(without_ms, 2)),
        "ratio_with_to_without": round(with_ms / without_ms, 2) if without_ms > 0 else None,
        "fastest_launch_with_ms": round(1000 * launch_with, 2),
        "fastest_launch_without_ms": round(1000 * launch_without, 2),
        "estimated_ms_per_attempt_from_fastest": figure(
            2000 * (launch_with - launch_without), TARGET_MS, "ms",
            launch_with_ms=round(1000 * launch_with, 2),
            launch_without_ms=round(1000 * launch_without, 2)),
        "note": "same graph, same process, alternating order, best of rounds; the difference "
                "is two bubblewrap launches (worker and gate) per attempt",
    }


register("sandbox_overhead", bench_sandbox)
