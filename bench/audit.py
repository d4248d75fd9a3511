"""The audit on a real-sized tree: `loopproof audit` of a run whose node has a `pytest` gate, on
the generated project of bench/audit_tree.py (17 modules, about 12,000 lines, a 100-test suite),
against issue 35's target: under 3 minutes on 2 cores.

What is timed is the command a user types, `loopproof audit GRAPH.toml --ledger L --json`, with
its defaults (every tier, the differential oracle, every exploit probe, tier 2 sampled at
`--max-tier2`'s default, `--jobs` the cores), as a child process, wall clock, after the run that
made the ledger. The figure is that time against `TARGET_S`. The node keeps the default gate
timeout (60 s): an exploit probe whose payload keeps the suite busy runs until it. Beside it:
the audit's own counts (mutants, gate runs, the files mutated of the tree's), so a fast audit
that audited nothing shows. Registered as "audit_real_tree".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.audit_tree import write
from bench.registry import register
from bench.targets import figure

TARGET_S = 180.0
WORKER = '''import shutil, sys
shutil.copytree(sys.argv[1], "kit")
'''


def subject(folder: Path, seed: int = 0) -> tuple[Path, dict[str, int]]:
    """The generated project, a worker that writes its package into the workspace and a graph
    whose node is judged by its pinned tests (`kind = "pytest"`)."""
    folder = folder.absolute()  # the worker runs in its workspace: it is given absolute paths
    size = write(folder, seed)
    (folder / "worker.py").write_text(WORKER)
    py = sys.executable
    (folder / "graph.toml").write_text(
        f'[graph]\nspend_budget = 100.0\n\n[node.fix]\n'
        f'worker = ["{py}", "worker.py", "{folder / "tree" / "kit"}"]\n'
        f'attempts = 3\nspend_ceiling = 50.0\ntimeout_s = 300\n\n'  # gate: the default 60 s
        f'[node.fix.gate]\nkind = "pytest"\ntests = ["tests"]\npython = "{py}"\n')
    return folder / "graph.toml", size


def bench_audit(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix="audit-") as tmp:
        folder = Path(tmp)
        graph, size = subject(folder, getattr(args, "seed", 0) or 0)
        ledger = folder / "L.jsonl"
        cli = [sys.executable, "-m", "loopproof.engine.cli"]
        ran = subprocess.run([*cli, "run", str(graph), "--ledger", str(ledger), "--json"],
                             capture_output=True, text=True, check=False)
        if ran.returncode != 0:
            said = [json.loads(line).get("detail", "") for line in ledger.read_text().splitlines()
                    if '"verdict"' in line] if ledger.exists() else []
            raise RuntimeError(f"bench: the run of the audit subject failed: {said}; "
                               f"{ran.stderr[-500:]}")
        start = time.perf_counter()
        audit = subprocess.run([*cli, "audit", str(graph), "--ledger", str(ledger), "--json",
                                "--jobs", str(os.cpu_count() or 1)],
                               stdout=subprocess.PIPE, stderr=None, text=True, check=False)
        seconds = time.perf_counter() - start
    if audit.returncode != 0:
        raise RuntimeError(f"bench: the audit failed (exit {audit.returncode})")
    report = json.loads(audit.stdout)
    (gate,) = report["gates"]
    s = report["summary"]
    return {
        "subject": {**size, "made": "generated (bench/audit_tree.py), seed 0"},
        "audit_wall_s": figure(seconds, TARGET_S, "s", cores=os.cpu_count()),
        "kind": gate["kind"], "status": gate["status"], "vacuous": gate["vacuous"],
        "mutated_files": gate["artifact"]["mutated"], "tree_files": gate["artifact"]["tree"],
        "mutants": s["mutants_judged"], "gate_runs": s["gate_runs"],
        "exploit_probes": len(report.get("exploits", [])),
        "tiers": {t: {k: row[k] for k in ("mutants", "destroying", "false_accepts",
                                          "equivalent", "undetermined")}
                  for t, row in s["tiers"].items()},
        "cpu_s": s["cpu_s"], "loadavg_1m": s["loadavg_1m"],
        "note": "loopproof audit with its defaults, wall clock of the command; target: issue "
                "35's 3 minutes on 2 cores",
    }


register("audit_real_tree", bench_audit)
