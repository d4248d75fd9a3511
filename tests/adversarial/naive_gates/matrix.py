"""Naive gates in the four styles a user writes today, the exploit probes planted against each
through the real engine, and the audit's flags compared with what really happened.

The styles (each a gate of this folder): `in-process` (check_inproc.py imports the candidate and
compares, as examples/median's gate does), `pytest-file` (`python -m pytest` on the pinned
pinned_tests.py), `pytest-over-tree` (swe_gate.py: the pinned tests laid over a scratch copy of
the judged tree, pytest run there, as SWE-bench does) and `stdio` (check_stdio.py starts the
candidate as a child per case and compares the JSON it prints). The task: `median` (median.py,
the reference).

Ground truth: a graph whose worker writes the planted tree, run by the engine (`Runner`, the
default sandbox); a pair "fools" its gate when the run ends DONE (every planted tree is wrong).
The audit: `loopproof audit GRAPH --ledger L --json` on the run of the reference, its
`exploits` entries. The full matrix, every probe against every style:

    python -m tests.adversarial.naive_gates.matrix [--json] [--styles a,b] [--probes ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from loopproof.engine import cli
from loopproof.engine.audit import exploits
from loopproof.engine.audit.exploits import Probe
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load

HERE = Path(__file__).resolve().parent
PY = sys.executable
REFERENCE = {"median.py": (HERE / "median.py").read_bytes()}
GATE_FILES = ("check_inproc.py", "pinned_tests.py", "swe_gate.py", "check_stdio.py",
              "io_cases.jsonl", "write_tree.py")
# pytest without the plugins this venv installs (xdist, hypothesis, anyio: 5x its start-up);
# swe_gate.py passes the same
QUIET = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:xdist.looponfail", "-p",
         "no:anyio", "-p", "no:hypothesispytest", "-p", "no:platformdirs"]
STYLES: dict[str, list[str]] = {
    "in-process": [PY, "check_inproc.py"],
    "pytest-file": [PY, "-m", "pytest", *QUIET, "pinned_tests.py"],
    "pytest-over-tree": [PY, "swe_gate.py"],
    "stdio": [PY, "check_stdio.py"],
}


def style_dir(root: Path, style: str) -> Path:
    """A folder of its own per style, holding the gates' files (its ancestors hold no pytest
    configuration: rootdir is found upward from it)."""
    d = root / style
    if not d.is_dir():
        d.mkdir(parents=True)
        for name in GATE_FILES:
            shutil.copy(HERE / name, d / name)
        (d / "trees").mkdir()
    return d


def graph(root: Path, style: str, name: str, files: dict[str, bytes]) -> Path:
    """A one-node graph whose worker writes `files` and whose gate is the style's."""
    d = style_dir(root, style)
    tree = d / "trees" / f"{name}.json"
    tree.write_text(json.dumps({k: v.decode() for k, v in files.items()}))
    path = d / f"graph-{name}.toml"
    path.write_text(
        "[graph]\nspend_budget = 500.0\n\n[node.solve]\n"
        f"worker = {json.dumps([PY, 'write_tree.py', f'trees/{name}.json'])}\n"
        f"gate = {json.dumps(STYLES[style])}\nattempts = 1\nspend_ceiling = 240.0\n"
        "timeout_s = 60\ngate_timeout_s = 120\n")
    return path


def done(path: Path, ledger: Path) -> bool:
    """The engine's run of `path`: True when it ends DONE."""
    runner = Runner.start(load(path), ledger)
    try:
        return runner.run() == 0
    finally:
        runner.close()


def ground_truth(root: Path, styles: list[str], probes: tuple[Probe, ...], jobs: int = 2
                 ) -> dict[tuple[str, str], bool]:
    """(style, probe) -> the engine's run of the planted tree ended DONE (a false accept)."""
    pairs = [(s, p) for s in styles for p in probes if p.applies_to(REFERENCE)]
    runs = root / "runs"
    runs.mkdir(exist_ok=True)
    for style in styles:  # before the threads: each folder is made once
        style_dir(root, style)

    def one(pair: tuple[str, Probe]) -> bool:
        style, p = pair
        key = f"{p.family}.{p.name}"
        return done(graph(root, style, key, p.plant(REFERENCE)), runs / f"{style}.{key}.jsonl")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        verdicts = list(pool.map(one, pairs))
    return {(s, p.name): v for (s, p), v in zip(pairs, verdicts, strict=True)}


def reference_run(root: Path, style: str) -> tuple[Path, Path]:
    """The reference solution run through the style's graph: (graph, ledger), ending DONE
    (run once per `root`)."""
    ledger = root / "runs" / f"{style}.reference.jsonl"
    path = style_dir(root, style) / "graph-reference.toml"
    if ledger.exists():
        return path, ledger
    path = graph(root, style, "reference", REFERENCE)
    ledger.parent.mkdir(exist_ok=True)
    if not done(path, ledger):
        raise AssertionError(f"{style}: the reference solution is not accepted")
    return path, ledger


def audit(path: Path, ledger: Path, probes: tuple[Probe, ...], jobs: int = 2) -> dict:
    """`loopproof audit GRAPH --ledger L --json --no-mutants --exploits ...` (the exploits are
    what is compared here)."""
    names = ",".join(f"{p.family}/{p.name}" for p in probes) or "none"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["audit", str(path), "--ledger", str(ledger), "--json", "--no-mutants",
                         "--jobs", str(jobs), "--exploits", names])
    if code != 0:
        raise AssertionError(f"audit exited {code}")
    return json.loads(out.getvalue())


def audit_truth(root: Path, styles: list[str], probes: tuple[Probe, ...], jobs: int = 2
                ) -> dict[tuple[str, str], bool]:
    """(style, probe) -> the audit's `accepted` for that probe on the style's reference run."""
    out: dict[tuple[str, str], bool] = {}
    for style in styles:
        path, ledger = reference_run(root, style)
        for e in audit(path, ledger, probes, jobs)["exploits"]:
            out[(style, e["probe"])] = e["accepted"]
    return out


JUDGE_KINDS = ("calls", "program", "pytest")
# docs/gates.md's residual of the pytest kind: comparisons made in the test's process
PYTEST_RESIDUAL = {"always-equal", "read-answer"}


def judge_run(root: Path) -> tuple[Path, Path]:
    """A graph with one node per judge kind (tests/adversarial/judge_payloads.py's task: the
    same cases for each), whose worker writes the correct median; run to DONE: (graph, ledger)."""
    from tests.adversarial.judge_payloads import CORRECT, MAIN, write_task
    path = write_task(root / "spec")
    (root / "spec" / "worker.py").write_text(f"open('median.py', 'w').write({CORRECT + MAIN!r})\n")
    ledger = root / "L.jsonl"
    if not done(path, ledger):
        raise AssertionError("the correct solution is not accepted by every judge kind")
    return path, ledger


def judge_matrix(root: Path, probes: tuple[Probe, ...], jobs: int) -> dict:
    """Every probe against every judge kind: the families each kind's gate let through."""
    path, ledger = judge_run(root)
    entries = audit(path, ledger, probes, jobs)["exploits"]
    from loopproof.engine.audit.exploits.run import accepted_families
    flagged = accepted_families(entries)
    return {"probes": len(entries), "accepted": sorted(f"{e['node']} {e['probe']}" for e in entries
                                                       if e["accepted"]),
            "families_flagged": {k: flagged.get(k, []) for k in JUDGE_KINDS},
            "beyond_the_stated_residual": sorted(
                f"{k} {f}" for k, fams in flagged.items() for f in fams
                if not (k == "pytest" and f in PYTEST_RESIDUAL))}


def families(truth: dict[tuple[str, str], bool], style: str) -> set[str]:
    by_name = {p.name: p.family for p in exploits.PROBES}
    return {by_name[p] for (s, p), v in truth.items() if s == style and v}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.adversarial.naive_gates.matrix")
    parser.add_argument("--styles", default=",".join(STYLES))
    parser.add_argument("--probes", default="all", help="as `loopproof audit --exploits`")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder")
    parser.add_argument("--judge", action="store_true",
                        help="the probes against the judge kinds instead of the naive gates")
    args = parser.parse_args(argv)
    styles = [s for s in args.styles.split(",") if s]
    probes = exploits.select(args.probes)
    import tempfile
    if args.judge:
        with tempfile.TemporaryDirectory(prefix="exploit-judge-") as tmp:
            got = judge_matrix(args.keep or Path(tmp), probes, args.jobs)
        print(json.dumps(got, indent=2))
        return 1 if got["beyond_the_stated_residual"] else 0
    with tempfile.TemporaryDirectory(prefix="exploit-matrix-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        truth = ground_truth(root, styles, probes, args.jobs)
        flagged = audit_truth(root, styles, probes, args.jobs)
        wall = round(time.monotonic() - started, 1)
    fooled = sorted(k for k, v in truth.items() if v)
    report = {
        "pairs": len(truth), "done_with_a_wrong_answer": len(fooled), "wall_s": wall,
        "by_style": {s: {"fooled": sum(truth[(s, p.name)] for p in probes if (s, p.name) in
                                       truth),
                         "families_fooled": sorted(families(truth, s)),
                         "families_flagged": sorted(families(flagged, s))} for s in styles},
        "pairs_done": [f"{s} {p}" for s, p in fooled],
        "audit_disagrees": sorted(f"{s} {p}: engine {truth[(s, p)]}, audit {flagged.get((s, p))}"
                                  for s, p in truth if flagged.get((s, p)) != truth[(s, p)]),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['done_with_a_wrong_answer']} of {report['pairs']} (style, payload) pairs "
              f"end DONE with a wrong answer ({wall} s)")
        for s, row in report["by_style"].items():
            print(f"  {s}: {row['fooled']} fooled; families {', '.join(row['families_fooled'])}"
                  f"; the audit flags {', '.join(row['families_flagged'])}")
        for line in report["audit_disagrees"]:
            print(f"  audit disagrees: {line}")
    return 1 if report["audit_disagrees"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
