"""`python -m loopproof.proofs` (the default family): wall seconds of the whole command, beside the
time the same interpreter takes to import z3 alone (the part no proof can avoid).

Registered as "proofs".
"""

from __future__ import annotations

import argparse
import sys

from bench.child import best
from bench.registry import register
from bench.targets import figure

TARGET_S = 10.0


def bench_proofs(args: argparse.Namespace) -> dict:
    run = best([sys.executable, "-m", "loopproof.proofs", "--json"], 1)
    if run.returncode != 0:
        raise RuntimeError(f"python -m loopproof.proofs exited {run.returncode}")
    z3 = best([sys.executable, "-c", "import z3"], 3)
    return {"seconds": figure(run.wall_s, TARGET_S, "s"), "cpu_s": round(run.cpu_s, 2),
            "import_z3_s": round(z3.wall_s, 3)}


register("proofs", bench_proofs)
