"""Engine overhead per attempt as the graph grows: a run of a `--chain-nodes` chain (default
10,000) of trivial nodes against a run of a 100-node chain (half the large one when that is
smaller, as in the tests' tiny runs), each beside a bare loop that spawns
the same worker and gate with `subprocess.run`.

Overhead per attempt = engine seconds per attempt - bare seconds per attempt, measured in the
same run; the figure is overhead(N) / overhead(100), which must stay within 1.5 (an engine whose
scheduling or replay grows with the graph shows it here). Registered as "chain".
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from bench.registry import register
from bench.targets import figure

TARGET_RATIO = 1.5
SMALL = 100
BARE_ATTEMPTS = 200
WORKER, GATE = ["true"], ["true"]


def _spec(folder: Path, n: int) -> Path:
    spec = folder / f"chain{n}.toml"
    body = ['[graph]\nspend_budget = 1e12\n']
    for i in range(n):
        needs = f'["n{i - 1}"]' if i else "[]"
        body.append(f'[node.n{i}]\nworker = ["true"]\ngate = ["true"]\nspend_ceiling = 10.0\n'
                    f'timeout_s = 30\ngate_timeout_s = 30\nneeds = {needs}\n')
    spec.write_text("".join(body))
    return spec


def _engine_per_attempt(folder: Path, n: int) -> float:
    from loopproof.engine.run.runner import Runner
    from loopproof.engine.run.spec import load

    path = _spec(folder, n)
    spec = load(path, path.stat().st_size)  # 10,000 nodes: over the 1 MiB default
    t = time.perf_counter()
    runner = Runner.start(spec, folder / f"run{n}.jsonl")
    code = runner.run()
    runner.close()
    seconds = time.perf_counter() - t
    if code != 0 or runner.state.attempts_total != n:
        raise RuntimeError(f"the {n}-node chain ended {code} after "
                           f"{runner.state.attempts_total} attempts")
    return seconds / n


def _bare_per_attempt(folder: Path, attempts: int) -> float:
    t = time.perf_counter()
    for _ in range(attempts):
        subprocess.run(WORKER, cwd=folder, check=True)
        subprocess.run(GATE, cwd=folder, check=True)
    return (time.perf_counter() - t) / attempts


def bench_chain(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix="chain-") as tmp:
        folder = Path(tmp)
        bare_runs = min(BARE_ATTEMPTS, max(20, args.chain_nodes))
        bare_a = _bare_per_attempt(folder, bare_runs)
        small_nodes = min(SMALL, max(1, args.chain_nodes // 2))
        small = _engine_per_attempt(folder, small_nodes)
        large = _engine_per_attempt(folder, args.chain_nodes)
        bare_b = _bare_per_attempt(folder, bare_runs)
    bare = min(bare_a, bare_b)
    over_small, over_large = small - bare, large - bare
    ratio = over_large / over_small if over_small > 0 else float("inf")
    return {
        "nodes": args.chain_nodes, "small_nodes": small_nodes,
        "engine_ms_per_attempt": {"small": round(1000 * small, 2), "large": round(1000 * large, 2)},
        "bare_ms_per_attempt": round(1000 * bare, 2),
        "overhead_ms_per_attempt": {"small": round(1000 * over_small, 2),
                                    "large": round(1000 * over_large, 2)},
        "overhead_ratio": figure(ratio, TARGET_RATIO, "x"),
        "note": "bare loop timed before and after the engine runs (best of the two)",
    }


register("chain", bench_chain)
