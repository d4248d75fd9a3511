"""CLI start-up: `loopproof --help` and `loopproof verify` of a small ledger, each beside a bare
`python -c pass` run in the same loop (what the interpreter alone costs on this machine).

Best of `--repeat` (at least 5) runs each, alternating. Registered as "startup".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench.child import measure
from bench.registry import register
from bench.targets import figure

TARGET_MS = 200.0
# Rounds at the least, whatever --repeat says: a start-up of ~100 ms is noisy (the tests take 1).
MIN_ROUNDS = 5


def bench_startup(args: argparse.Namespace) -> dict:
    from loopproof.engine.record.ledger import Ledger

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix="startup-") as tmp:
        ledger = Path(tmp) / "small.jsonl"
        with Ledger.create(ledger, {"type": "run"}) as led:
            for i in range(100):
                led.append({"type": "tick", "i": i})
        commands = {
            "python": [sys.executable, "-c", "pass"],
            "help": [sys.executable, "-m", "loopproof.engine.cli", "--help"],
            "verify": [sys.executable, "-m", "loopproof.engine.cli", "verify", str(ledger)],
        }
        best = dict.fromkeys(commands, float("inf"))
        for _ in range(max(MIN_ROUNDS, args.repeat)):
            for name, argv in commands.items():
                m = measure(argv)
                if m.returncode != 0:
                    raise RuntimeError(f"{name} exited {m.returncode}")
                best[name] = min(best[name], 1000 * m.wall_s)
    bare = best["python"]
    return {
        "python_ms": round(bare, 1),
        **{name: figure(best[name], TARGET_MS, "ms",
                        ratio_to_bare_python=round(best[name] / bare, 2))
           for name in ("help", "verify")},
        "note": "best of runs, alternating with a bare interpreter start",
    }


register("startup", bench_startup)
