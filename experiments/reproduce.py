"""`make reproduce`: every result of the project, one step at a time, with an estimate first
and one line per step with its elapsed time.

    python -m experiments.reproduce [--scale default] [--seed 0] [--dry-run]

Why a driver instead of a list of Make lines: the estimate needs the steps as data, and each
step's line needs its time. Estimates are seconds on two idle cores at default scale, replaced by
the durations of the last completed run when results/reproduce.json exists. A step that fails
stops the run (exit 1) after saying which; `--dry-run` prints the plan only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
TIMES = Path("results/reproduce.json")


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]
    estimate_s: float
    ok_codes: tuple[int, ...] = (0,)


def steps(scale: str, seed: int) -> list[Step]:
    py, lp = str(BIN / "python"), str(BIN / "loopproof")
    s = ("--scale", scale, "--seed", str(seed), "--json")
    ex = "results/examples"
    run = [Step(f"example {name}", (lp, "run", f"examples/{name}/graph.toml", "--ledger",
                                    f"{ex}/{name}.jsonl", "--json"), 3, codes)
           for name, codes in (("pipeline", (0,)), ("repair", (0,)), ("budget", (0, 4)),
                               ("regress-restore", (0,)), ("median", (0,)))]
    return [
        Step("proofs", (py, "-m", "proofs", "--json", "--out", "results/proofs/proofs.json"), 10),
        Step("bounds (explorer, random graphs)", (py, "-m", "experiments.bounds", *s), 120),
        *run,
        Step("integrity", (py, "-m", "experiments.integrity", *s), 60),
        Step("crash", (py, "-m", "experiments.crash", *s), 150),
        Step("transition", (py, "-m", "experiments.transition", *s), 90),
        Step("mutants", (py, "-m", "experiments.mutants", *s), 150),
        Step("growth", (py, "-m", "experiments.growth", *s), 120),
        Step("bench", (py, "-m", "bench", "--json", "--chain-nodes", "2000",
                       "--skip", "explorer"), 240),
    ]


def _estimates(plan: list[Step]) -> dict[str, float]:
    try:
        last = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        last = {}
    return {st.name: float(last.get(st.name, st.estimate_s)) for st in plan}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.reproduce", description=__doc__.split(
        "\n")[0])
    p.add_argument("--scale", default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true", help="print the plan and the estimate only")
    args = p.parse_args(argv)
    plan = steps(args.scale, args.seed)
    est = _estimates(plan)
    total = sum(est.values())
    print(f"reproduce: {len(plan)} steps, about {total / 60:.0f} min on 2 idle cores "
          f"({'last run' if TIMES.exists() else 'estimate'}); scale {args.scale}, seed {args.seed}",
          flush=True)
    if args.dry_run:
        for st in plan:
            print(f"  {st.name:36s} ~{est[st.name]:6.0f} s  {' '.join(st.argv)}")
        return 0
    shutil.rmtree("results/examples", ignore_errors=True)
    Path("results/examples").mkdir(parents=True)
    took: dict[str, float] = {}
    start = time.perf_counter()
    for i, st in enumerate(plan, 1):
        t = time.perf_counter()
        done = subprocess.run(st.argv, stdout=subprocess.DEVNULL)
        took[st.name] = round(time.perf_counter() - t, 1)
        mark = "ok" if done.returncode in st.ok_codes else f"FAILED (exit {done.returncode})"
        print(f"[{i:2d}/{len(plan)}] {st.name:36s} {took[st.name]:7.1f} s "
              f"(est. {est[st.name]:.0f} s)  {mark}", flush=True)
        if done.returncode not in st.ok_codes:
            print(f"reproduce: stopped at {st.name!r}; rerun: {' '.join(st.argv)}",
                  file=sys.stderr)
            return 1
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    TIMES.write_text(json.dumps(took, indent=2, sort_keys=True) + "\n")
    print(f"reproduce: all {len(plan)} steps in {(time.perf_counter() - start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
