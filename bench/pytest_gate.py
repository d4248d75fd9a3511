"""What a `pytest` gate's own process costs against plain pytest on the same tests: the
collection of the pinned tests alone (once per run, at run start) and the judged run (once per
attempt), on the generated project of bench/audit_tree.py (17 modules, a 100-test suite).

The gate is the one a spec builds (`kind = "pytest"`, the judged code by default), run without a
sandbox so that its harness is a child of this process and its CPU time (user + system) is
counted whole; plain pytest is `python -I -B` running `pytest.main` with the same options the
harness passes (no plugin autoload, `--import-mode=importlib`, no cache provider), the tree's
root on `sys.path`, as on a fresh checkout: no bytecode of the tree or of the tests is kept
between its runs (a judged tree's never is). Each is run `--repeat` times, alternating, best of them. The figures are the
gate's CPU time over plain pytest's: what the harness adds (its guards, the canaries, the load
report) or saves (it lays the collection's rewrite of each test module in the run, and keeps the
garbage collector off what exists before any test runs). Registered as "pytest_gate".
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.audit_tree import write
from bench.registry import register
from bench.targets import figure

TARGET_COLLECTION = 1.1  # the gate's collection over plain `pytest --collect-only`
TARGET_RUN = 0.7  # the gate's judged run over plain pytest (it lays the rewrites, freezes the gc)
PLAIN = ("import sys; sys.path.insert(0, sys.argv[1]); import pytest; "
         "sys.exit(pytest.main(sys.argv[2:]))")
OPTIONS = ("-p", "no:cacheprovider", "-q", "--tb=no", "--import-mode=importlib")


def _children_cpu(fn: Callable[[], object]) -> float:
    """CPU seconds (user + system) of the child processes `fn` runs and waits for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    fn()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_pytest_gate(args: argparse.Namespace) -> dict:
    from loopproof.engine.run.spec import load

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    repeat = max(1, args.repeat)
    with tempfile.TemporaryDirectory(dir=out, prefix="pytest-gate-") as tmp:
        folder = Path(tmp).absolute()
        size = write(folder, getattr(args, "seed", 0) or 0)
        (folder / "w.py").write_text("pass\n")
        py = sys.executable
        (folder / "graph.toml").write_text(
            f'[graph]\nspend_budget = 10.0\n\n[node.p]\nworker = ["{py}", "w.py"]\n'
            f'spend_ceiling = 1.0\n\n[node.p.gate]\nkind = "pytest"\ntests = ["tests"]\n'
            f'python = "{py}"\n')
        gate = load(folder / "graph.toml").nodes["p"].gate
        plain_tree = folder / "plain"  # the tree with the tests laid, as pytest sees it
        shutil.copytree(folder / "tree", plain_tree)
        shutil.copytree(folder / "tests", plain_tree / "tests")
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": os.defpath}

        def plain(*extra: str) -> None:
            subprocess.run([py, "-I", "-B", "-c", PLAIN, str(plain_tree), *OPTIONS, *extra,
                            "tests"],
                           cwd=plain_tree, env=env, check=True, capture_output=True)

        def collect() -> None:
            gate.collected.clear()  # a run's first collection, every time
            ids = gate.test_ids(300.0, None)
            if isinstance(ids, str) or len(ids) != size["tests"]:
                raise RuntimeError(f"bench: the gate's collection gave {ids!r:.300}")

        def judge() -> None:
            result = gate.judge(folder / "tree", None)
            if not result.accepted:
                raise RuntimeError(f"bench: the gate rejected the generated tree: "
                                   f"{result.detail}")

        collect()  # warm: the page cache, and the rewrites a judged run lays
        best = dict.fromkeys(("plain_collect", "gate_collect", "plain_run", "gate_run"),
                             float("inf"))
        jobs: dict[str, Callable[[], object]] = {
            "plain_collect": lambda: plain("--collect-only"), "gate_collect": collect,
            "plain_run": plain, "gate_run": judge}
        for i in range(repeat):
            for name in (list(jobs) if i % 2 == 0 else list(reversed(jobs))):
                best[name] = min(best[name], _children_cpu(jobs[name]))
    cpu = {k: round(v, 3) for k, v in best.items()}
    return {
        "subject": {**size, "made": "generated (bench/audit_tree.py), seed 0"},
        "repeat": repeat, "cpu_s": cpu,
        "collection_to_plain": figure(best["gate_collect"] / best["plain_collect"],
                                      TARGET_COLLECTION, "x"),
        "run_to_plain": figure(best["gate_run"] / best["plain_run"], TARGET_RUN, "x"),
        "note": "CPU seconds (user+system) of the gate's own pytest process (no sandbox, the "
                "harness a child of the bench) against plain pytest on the same tests, best of "
                "repeat, alternating",
    }


register("pytest_gate", bench_pytest_gate)
