"""The differential oracle alone, on examples/median-command's accepted tree: its tier-2 mutants
(the CLI's default cap) judged one child per mutant (batches of one: a Python start and an import
of Hypothesis each, what every comparison cost before batching) and all in one child (a loop's
mutants share a child that forks a process per comparison), the two ways alternately.

    python -m bench.audit_differential [--rounds N] [--json]

Printed: each way's CPU seconds per round, this process and every child and sandbox included
(cgroup v1 cpuacct when this process may make a group there, else getrusage of the reaped
children, which misses what a sandbox does not reap), the ratio of their medians (batched over one
per mutant), and whether both gave every mutant the same verdict and words.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import runpy
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from loopproof.engine.audit import differential
from loopproof.engine.audit.catalogue import Command, Loop
from loopproof.engine.audit.mutants import corpus, read_reference
from loopproof.engine.system.sandbox import DEFAULT, backend

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "median-command"
DEFAULT_CAP = 15  # engine/commands/audit.py's DEFAULT_TIER2_CAP
CGROUP = Path("/sys/fs/cgroup/cpuacct/loopproof-bench-differential")


def _clock() -> Callable[[], float]:
    """CPU seconds so far of this process and everything it started."""
    try:
        CGROUP.mkdir(exist_ok=True)
        (CGROUP / "tasks").write_text(str(os.getpid()))
        return lambda: int((CGROUP / "cpuacct.usage").read_text()) / 1e9
    except OSError:
        def rusage() -> float:
            own = resource.getrusage(resource.RUSAGE_SELF)
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
        return rusage


def measure(rounds: int) -> dict:
    tree = Path(tempfile.mkdtemp(prefix="bench-differential-"))
    here = os.getcwd()
    os.chdir(tree)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(EXAMPLE / "write_median.py"))
    finally:
        os.chdir(here)
    loop = Loop("median", "examples/median-command's gate", tree, tree, EXAMPLE,
                Command(("true",), 5.0, literal=True), ("median.py",), None,
                gate_files=(EXAMPLE / "check_median.py",))
    reference = read_reference(loop)
    mutants = [m for m in corpus(loop, reference, 2, 0, DEFAULT_CAP)
               if differential.applies(loop, m)]
    sources = differential.gate_sources(loop)
    box = backend(DEFAULT)
    clock = _clock()
    ways = {
        "one_child_per_mutant": lambda root: [differential.compare(loop, reference, m, sources,
                                                                   box, root) for m in mutants],
        "one_child_for_all": lambda root: differential.compare_many(loop, reference, mutants,
                                                                    sources, box, root),
    }
    cpu: dict[str, list[float]] = {way: [] for way in ways}
    said: dict[str, list[tuple[str, str]]] = {}
    for _ in range(rounds):
        for way, judge in ways.items():
            with tempfile.TemporaryDirectory(prefix="bench-differential-") as root:
                start = clock()
                replies = judge(Path(root))
                cpu[way].append(round(clock() - start, 2))
            said.setdefault(way, [(r.outcome, r.detail) for r in replies])
    medians = {way: statistics.median(v) for way, v in cpu.items()}
    return {"mutants": len(mutants), "cpu_s": cpu,
            "ratio": round(medians["one_child_for_all"] / medians["one_child_per_mutant"], 2),
            "same_verdicts": said["one_child_for_all"] == said["one_child_per_mutant"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_differential",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both ways (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    got = measure(max(1, args.rounds))
    if args.json:
        print(json.dumps(got, indent=2, sort_keys=True))
    else:
        print(f"{got['mutants']} mutants; CPU s per round: {got['cpu_s']}; one child for all / "
              f"one per mutant: {got['ratio']}x (medians); same verdicts: {got['same_verdicts']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
