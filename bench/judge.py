"""What a gate the judged code cannot fool costs: the `calls` judge kind against a command gate
on the same 100 cases, through the engine's own gate interface, in the run's sandbox views.

The task is examples/median's: `median.py` (the correct one) and 100 cases. The command gate is
the style the issue found foolable: a check script that imports `median.py` into its own process
and compares the 100 results there (one bubblewrap launch). The `calls` judge makes one scratch
copy, one bubblewrap launch of its harness for all 100 cases (they are one batch), and parses
and compares the results in the engine. Each is timed as `Gate.judge` of the same tree, both
with their snapshot copy and hashing, alternating, best of `--repeat`; the figure is their ratio
against `TARGET_RATIO`. The `program` kind (one launch per case: it cannot batch) is timed once
beside them, without a target, and left out of `--quick`. Registered as "judge_vs_command".
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from bench.registry import register
from bench.targets import figure

CASES = 100
TARGET_RATIO = 2.0
MEDIAN = '''def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


if __name__ == "__main__":
    import json, sys
    print(json.dumps(median(json.load(sys.stdin))))
'''
CHECK = '''import json, sys
sys.path.insert(0, ".")
from median import median
cases = [json.loads(line) for line in open(sys.argv[1])]
sys.exit(0 if all(median(*c["args"]) == c["expect"] for c in cases) else 1)
'''


def _cases(seed: int) -> list[tuple[list[int], float | int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(CASES):
        xs = [rng.randint(-50, 50) for _ in range(rng.randint(1, 9))]
        s, n = sorted(xs), len(xs)
        out.append((xs, s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2))
    return out


def _write(folder: Path, seed: int) -> Path:
    cases = _cases(seed)
    (folder / "cases.jsonl").write_text("".join(
        json.dumps({"args": [xs], "expect": m}) + "\n" for xs, m in cases))
    (folder / "io.jsonl").write_text("".join(
        json.dumps({"input": xs, "output": m}) + "\n" for xs, m in cases))
    (folder / "check_median.py").write_text(CHECK)
    (folder / "worker.py").write_text("pass\n")
    py = sys.executable
    node = f'worker = ["{py}", "worker.py"]\nspend_ceiling = 100.0\ngate_timeout_s = 120\n'
    (folder / "graph.toml").write_text(
        f"[graph]\nspend_budget = 1000.0\n\n[node.command]\n{node}"
        f'gate = ["{py}", "check_median.py", "cases.jsonl"]\n\n[node.calls]\n{node}'
        f'[node.calls.gate]\nkind = "calls"\nmodule = "median"\nfunction = "median"\n'
        f'cases = "cases.jsonl"\npython = "{py}"\n\n[node.program]\n{node}'
        f'[node.program.gate]\nkind = "program"\nrun = ["{py}", "median.py"]\n'
        f'cases = "io.jsonl"\n')
    return folder / "graph.toml"


def bench_judge(args: argparse.Namespace) -> dict:
    from loopproof.engine.run.confine import RunSandbox
    from loopproof.engine.run.spec import load
    from loopproof.engine.system.sandbox import backend

    why = backend("bwrap").problem()
    if why is not None:
        return {"skipped": why}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix="judge-") as tmp:
        folder = Path(tmp)
        spec = load(_write(folder, getattr(args, "seed", 0) or 0))
        run = RunSandbox(spec, backend("bwrap"), ledger=folder / "L.jsonl",
                         stop_file=folder / "L.stop")
        tree = folder / "tree"
        tree.mkdir()
        (tree / "median.py").write_text(MEDIAN)
        boxes = {name: run.node(name, tree).gate for name in spec.nodes}

        def timed(name: str) -> float:
            t = time.perf_counter()
            result = spec.nodes[name].gate.judge(tree, boxes[name])
            seconds = time.perf_counter() - t
            if not result.accepted:
                raise RuntimeError(f"bench: the {name} gate rejected the correct median: "
                                   f"{result.detail}")
            return seconds

        best = {"command": float("inf"), "calls": float("inf")}
        for i in range(max(1, args.repeat)):
            for name in ("command", "calls") if i % 2 == 0 else ("calls", "command"):
                best[name] = min(best[name], timed(name))
        program = None if getattr(args, "quick", False) else timed("program")
    ratio = best["calls"] / best["command"]
    result: dict = {
        "cases": CASES, "repeat": max(1, args.repeat),
        "command_gate_ms": round(1000 * best["command"], 2),
        "calls_ms": round(1000 * best["calls"], 2),
        "calls_to_command": figure(ratio, TARGET_RATIO, "x",
                                   calls_ms=round(1000 * best["calls"], 2),
                                   command_ms=round(1000 * best["command"], 2)),
        "note": "the same 100 cases and tree, Gate.judge in the run's sandbox views, best of "
                "repeat, alternating; calls: one harness launch for the batch, the comparison "
                "in the engine; command: one launch, the comparison in the judged code's process",
    }
    if program is not None:
        result["program_ms"] = round(1000 * program, 2)
        result["program_ms_per_case"] = round(1000 * program / CASES, 2)
    return result


register("judge_vs_command", bench_judge)
