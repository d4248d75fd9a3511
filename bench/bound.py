"""`loopproof bound` on large graphs (`--bound-nodes`, default 100,000): a chain, a fan and a
random DAG, each with a dense repair relation; seconds and peak memory of the whole command.

Why TOML parsing is measured beside it: `loopproof bound` reads graph.toml with
engine/system/toml_reader.py (tomllib's answers, rtoml's speed where it can vouch for them); the
same file parsed alone by it and by tomllib, side by side, says how much of the command's time is
the parser's and how much the engine's (validation and W, W_c), and what the reader saves.

Shapes (seeded, so the same files every run): chain n0 -> n1 -> ... (each node repairs the node
five before it); fan: one source, n - 2 middle nodes needing it, one sink needing them all (every
node repairs the source); random: each node needs 1..3 of the 64 nodes before it and repairs
itself and one of its needs. Each file is ~100 bytes a node (12 MB at 100,000 nodes), over the
1 MiB limit a graph.toml has by default, so the command is given `--max-spec-bytes` its size,
as a user with a generated graph would. Registered as "bound".
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

from bench.child import best
from bench.registry import register
from bench.targets import figure

TARGET_S = 5.0
TARGET_MIB = 500.0
HEAD = '[graph]\nspend_budget = 1e12\nrepair_budget = 3\n'
BODY = 'worker = ["true"]\ngate = ["true"]\n'


def _node(name: str, attempts: int, ceiling: float, needs: list[str], repairs: list[str]) -> str:
    return (f"[node.{name}]\n{BODY}spend_ceiling = {ceiling}\nattempts = {attempts}\n"
            f"needs = {json.dumps(needs)}\nrepairs = {json.dumps(repairs)}\n")


def chain(n: int) -> str:
    return HEAD + "".join(
        _node(f"n{i}", 1 + i % 3, 1.5, [f"n{i - 1}"] if i else [], [f"n{max(0, i - 5)}"])
        for i in range(n))


def fan(n: int) -> str:
    middle = [f"m{i}" for i in range(n - 2)]
    return HEAD + _node("src", 2, 1.0, [], ["src"]) + "".join(
        _node(m, 1 + i % 3, 0.5, ["src"], ["src", m]) for i, m in enumerate(middle)
    ) + _node("sink", 1, 2.0, middle, ["src"])


def random_dag(n: int, seed: int = 0, window: int = 64) -> str:
    rng = random.Random(seed)
    parts = [HEAD]
    for i in range(n):
        needs = sorted(rng.sample(range(max(0, i - window), i), min(i, rng.randint(1, 3))))
        names = [f"r{p}" for p in needs]
        repairs = [f"r{i}"] + ([rng.choice(names)] if names else [])
        parts.append(_node(f"r{i}", rng.randint(1, 3), rng.choice([0.5, 1.0, 2.0]), names,
                           repairs))
    return "".join(parts)


SHAPES = {"chain": chain, "fan": fan, "random": random_dag}


def bench_bound(args: argparse.Namespace) -> dict:
    n = args.bound_nodes
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, object] = {"nodes": n}
    with tempfile.TemporaryDirectory(dir=out, prefix="bound-") as tmp:
        for name, make in SHAPES.items():
            spec = Path(tmp) / f"{name}.toml"
            spec.write_text(make(n))
            size = spec.stat().st_size  # over the 1 MiB a user gets: asked for, as a user would
            cmd = best([sys.executable, "-m", "loopproof.engine.cli", "bound", str(spec), "--json",
                        "--max-spec-bytes", str(size)], args.repeat)
            if cmd.returncode != 0:
                raise RuntimeError(f"loopproof bound {spec.name} exited {cmd.returncode}")
            toml = best([sys.executable, "-c", "import sys; from engine.system import "
                         "toml_reader; toml_reader.loads(open(sys.argv[1]).read())", str(spec)],
                        args.repeat)
            stdlib = best([sys.executable, "-c", "import sys, tomllib; "
                           "tomllib.load(open(sys.argv[1], 'rb'))", str(spec)], 1)
            result[name] = {
                "seconds": figure(cmd.wall_s, TARGET_S, "s"),
                "peak_memory": figure(cmd.peak_mib, TARGET_MIB, "MiB"),
                "cpu_s": round(cmd.cpu_s, 3),
                "toml_parse_s": round(toml.wall_s, 3),
                "toml_parse_cpu_s": round(toml.cpu_s, 3),
                "toml_share": round(toml.wall_s / cmd.wall_s, 3) if cmd.wall_s else None,
                "tomllib_parse_cpu_s": round(stdlib.cpu_s, 3),
                "tomllib_parse_mib": round(stdlib.peak_mib, 1),
                "bounds": json.loads(cmd.stdout),
                "spec_bytes": size,
            }
    return result


register("bound", bench_bound)
