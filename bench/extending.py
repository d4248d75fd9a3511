"""The newcomer's path to a new guarantee, step by step, timed: on a copy of the tree, the
skeleton is written (`python -m loopproof.proofs new`), its obligations run and fail, the example below is
filled in, they run and pass, the written test passes, every obligation runs, and the
differential test runs. Registered in bench.registry as "extending_path".

    python -m bench.extending --write README.md   # time the steps, write the README's block

Each step's wall-clock and CPU seconds (its child processes' user + system time) are recorded;
the load average at the start says how busy the machine was (a shared machine stretches the
wall clock, not the CPU time).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.registry import register

REPO = Path(__file__).resolve().parent.parent
NEW = ("G3-node-cap", "G3-broken-node-cap")
BEGIN = "<!-- timings:begin (python -m bench.extending --write README.md) -->"
END = "<!-- timings:end -->"

# What a newcomer writes into the skeleton (tests/proofs/test_scaffold.py fills it in the same way):
# no attempt counter passes a_v, broken by a rule that retries every failed attempt.
INVARIANT = '''    a = enc.params.attempts
    return z3.And(structural(enc, s), *[s.attempts(v) <= a[v] for v in enc.graph.names])'''
BROKEN = '''    name = "a failed attempt always retries"

    def effect_verdict(self, s, ev, u):
        super().effect_verdict(s, ev, u)
        if not ev.passed:
            u.set_status(ev.node, s.PENDING)
'''


def fill_in(text: str) -> str:
    """The skeleton proofs/g3_node_cap.py with the example written into it."""
    start = text.index('    raise NotImplementedError("write invariant()')
    text = text[:start] + INVARIANT + text[text.index("\n", start):]
    text = text.replace('    name = "TODO: the bug, in a few words"\n', BROKEN)
    return text.replace("from loopproof.proofs.family import shapes\n",
                        "from loopproof.proofs.family import shapes\n"
                        "from loopproof.proofs.g1_finishes import structural\n")


def copy_tree(root: Path) -> None:
    """The parts of the repository the path touches (model/, proofs/, the differential test)."""
    (root / "tests" / "proofs").mkdir(parents=True)
    (root / "tests" / "support").mkdir()
    for part in ("model", "proofs"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    # the copy's own `loopproof` (links to its model/ and proofs/), found before the installed one
    shutil.copytree(REPO / "loopproof", root / "loopproof", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "engine"))
    for name in ("__init__.py", "conftest.py", "support/__init__.py", "support/leftover_processes.py",
                 "support/encoding_steps.py", "support/example_counts.py", "support/strategies.py",
                 "proofs/__init__.py",
                 "proofs/test_encoding.py"):
        shutil.copy(REPO / "tests" / name, root / "tests" / name)
    shutil.copy(REPO / "pyproject.toml", root)


def _timed(root: Path, argv: list[str], want: int) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=root, capture_output=True, text=True,
                          env=dict(os.environ, CI="1"), timeout=1800, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != want:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}, expected {want}:\n"
                           f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)}


STEPS: tuple[tuple[str, str, list[str], int], ...] = (
    ("scaffold", "write the skeleton", ["-m", "loopproof.proofs", "new", "node_cap", "--guarantee", "G3"],
     0),
    ("fresh", "its two obligations, still unwritten (they fail)",
     ["-m", "loopproof.proofs", "--only", *NEW], 1),
    ("filled", "its two obligations, filled in (proved, refuted)",
     ["-m", "loopproof.proofs", "--only", *NEW], 0),
    ("test", "the test it wrote", ["-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   "tests/proofs/test_g3_node_cap.py"], 0),
    ("proofs", "every obligation (`python -m loopproof.proofs`)", ["-m", "loopproof.proofs"], 0),
    ("differential", "the differential test of the encodings (a new rule's check)",
     ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/proofs/test_encoding.py"], 0),
)


def path(args: argparse.Namespace | None = None) -> dict[str, Any]:
    """Time every step of the path on a fresh copy of the tree."""
    out: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2),
                           "cpus": os.cpu_count(), "steps": {}}
    with tempfile.TemporaryDirectory(prefix="loopproof-extending-") as tmp:
        root = Path(tmp) / "repo"
        copy_tree(root)
        for name, what, argv, want in STEPS:
            if name == "filled":
                module = root / "proofs" / "g3_node_cap.py"
                module.write_text(fill_in(module.read_text()))
            out["steps"][name] = {"what": what, **_timed(root, argv, want)}
    return out


def block(result: dict[str, Any]) -> str:
    """The README's table of the measured steps."""
    lines = [BEGIN, "",
             f"Measured by `python -m bench.extending` on {result['cpus']} cores with a load "
             f"average of {result['load_average']:g} at the start (a shared machine stretches "
             "the wall clock most; the CPU time is closer to what an idle machine needs):", "",
             "| step | wall clock | CPU |", "|---|---|---|"]
    for step in result["steps"].values():
        lines.append(f"| {step['what']} | {step['seconds']:.1f} s | {step['cpu_seconds']:.1f} s |")
    return "\n".join([*lines, "", END])


def write(doc: Path, result: dict[str, Any]) -> None:
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: no timings block ({BEGIN} ... {END}); fix: add the two lines")
    head, rest = text.split(BEGIN, 1)
    doc.write_text(head + block(result) + rest.split(END, 1)[1])


register("extending_path", path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.extending", description=__doc__.split(
        "\n")[0])
    p.add_argument("--write", type=Path, metavar="DOC", help="rewrite DOC's timings block")
    p.add_argument("--out", type=Path, default=Path("results/extending"), help="results folder")
    args = p.parse_args(argv)
    result = path()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "timings.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if args.write is not None:
        write(args.write, result)
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
