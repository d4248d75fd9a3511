"""The baseline of a seed and the crash cases against it: each case runs `loopproof run` as a
child process that is SIGKILLed at one site, resumes it until it ends, and compares.

Cases with several attempts in flight (a crash graph of width 2 or 4, experiments/crash/graph):
the baseline child also records, at each crossing of each site, how many attempts the ledger
has open then; each site is killed at its first crossing with the most in flight. The engine
begins a whole wave before any of its workers starts (engine/run/flight.py), so that crossing
has the same attempts in flight in every run of the seed. Records of attempts in flight
interleave in an order thread timing decides, so at width > 1 the traces are compared per node
(each node's records in order, and the records of no node in order).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.crash import graph as crashgraph
from experiments.crash.observables import (
    normalized_trace,
    prefix_excess,
    read_records,
    scientific_state,
    worker_calls,
)
from experiments.crash.sites import INSIDE_ATTEMPT, Scale
from loopproof.engine.record.replay import replay
from loopproof.engine.run.runner import workspace_root
from loopproof.engine.system.trees import remove_tree
from loopproof.model.transitions import EPS

# ---- child processes ------------------------------------------------------------------------

# The baseline child counts how often each crashpoint is reached (nothing is killed): it wraps
# engine.system.faults.crashpoint before the engine imports it, runs the CLI, and writes the counts.
# With "--flying", it also records per site the attempts open in the ledger at each crossing.
_COUNTING_CHILD = """
import json, sys, threading
import loopproof.engine.system.faults as faults
counts, flying, lock = {}, {}, threading.Lock()
watch = sys.argv[2] == "--flying"
args = sys.argv[3:] if watch else sys.argv[2:]
ledger = args[args.index("--ledger") + 1]
def open_attempts():
    open_ = set()
    try:
        lines = open(ledger, "rb").read().splitlines()
    except OSError:
        return 0
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("type") == "begin":
            open_.add(r.get("node"))
        elif r.get("type") in ("verdict", "overrun", "abandon"):
            open_.discard(r.get("node"))
    return len(open_)
_real = faults.crashpoint
def crashpoint(site):
    with lock:
        counts[site] = counts.get(site, 0) + 1
        if watch:
            flying.setdefault(site, []).append(open_attempts())
    _real(site)
faults.crashpoint = crashpoint
from loopproof.engine.cli import main
try:
    rc = main(args)
finally:
    with open(sys.argv[1], "w") as f:
        json.dump({"counts": counts, "flying": flying}, f, sort_keys=True)
sys.exit(rc)
"""


def _cli(args: Sequence[str], cwd: Path, crash_at: str | None = None,
         count_into: Path | None = None, flying: bool = False) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPPROOF_")}
    env["PYTHONHASHSEED"] = "0"
    if crash_at:
        env["LOOPPROOF_CRASH_AT"] = crash_at
    if count_into is not None:
        argv = [sys.executable, "-c", _COUNTING_CHILD, str(count_into),
                *(["--flying"] if flying else []), *args]
    else:
        argv = [sys.executable, "-m", "loopproof.engine.cli", *args]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=300)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


def _prepare(folder: Path, seed: int, width: int = 1) -> tuple[Path, Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    calls = folder / "calls.txt"
    calls.touch()
    spec = crashgraph.write_graph(folder / "spec", seed, calls, width)
    return spec, folder / "ledger.jsonl", calls


# ---- baseline and cases -----------------------------------------------------------------------

@dataclass
class Baseline:
    seed: int
    counts: dict[str, int]
    calls: int
    exit_code: int
    state: dict[str, Any]
    trace: Any
    width: int = 1
    flying: dict[str, list[int]] = field(default_factory=dict)  # site -> open at each crossing


@dataclass(frozen=True)
class Case:
    seed: int
    site: str
    n: int
    resume_site: str = ""   # non-empty: the first resume is killed at resume_site:1
    width: int = 1          # > 1: the crash graph with that many builds in flight at once

    @property
    def id(self) -> str:
        tail = f"+resume@{self.resume_site}" if self.resume_site else ""
        wide = f"w{self.width}/" if self.width > 1 else ""
        return f"{wide}s{self.seed}/{self.site}:{self.n}{tail}"


@dataclass
class Row:
    """One case's result: plain data, no timings, so the same seed gives the same bytes."""

    case: str
    seed: int
    site: str
    n: int
    resume_site: str
    crashed: bool
    resumes: int
    restarted: bool      # the crash left no complete record; the run was started again
    exit_code: int
    outcome: str
    outcome_recovered: bool
    trace_identical: bool
    first_difference: int   # index of the first differing normalized record; -1 if identical
    worker_calls: int
    repeated_calls: int     # worker calls beyond the uncrashed run's
    abandoned: int          # attempts recovered as outcome-unknown (abandon records)
    budget_ok: bool         # settled + reserved <= B at every prefix of the recovered ledger
    lost_verdicts: int
    mismatch: str = ""
    width: int = 1
    in_flight: int = 0      # attempts open in the ledger the crash left (each one an abandon)


def _workspaces(folder: Path) -> Path:
    """Where the runner keeps node workspaces for the ledger in `folder` (<ledger>.work/)."""
    return workspace_root(folder / "ledger.jsonl")


def trace_of(records: Sequence[dict[str, Any]], root: str, width: int) -> Any:
    """The normalized trace; at width > 1, per node (records of no node under "")."""
    trace = normalized_trace(records, root)
    if width == 1:
        return trace
    by_node: dict[str, list[Any]] = {}
    for rec in trace:
        by_node.setdefault(str(rec.get("node") or ""), []).append(rec)
    return dict(sorted(by_node.items()))


def open_attempts(records: Sequence[dict[str, Any]]) -> int:
    """Attempts begun and not ended (no verdict, overrun or abandon) in `records`."""
    flying: set[str] = set()
    for r in records:
        if r.get("type") == "begin":
            flying.add(r["node"])
        elif r.get("type") in ("verdict", "overrun", "abandon"):
            flying.discard(r.get("node"))
    return len(flying)


def run_baseline(seed: int, root: Path, width: int = 1) -> Baseline:
    folder = root / (f"baseline-{seed}" if width == 1 else f"baseline-w{width}-{seed}")
    remove_tree(folder)
    spec, ledger, calls = _prepare(folder, seed, width)
    counts_file = folder / "counts.json"
    code, err = _cli(["run", str(spec), "--ledger", str(ledger), "--json"], folder,
                     count_into=counts_file, flying=width > 1)
    if code not in (0, 3, 4):
        raise RuntimeError(f"the uncrashed run of seed {seed} exited {code}: {err.strip()}")
    got = json.loads(counts_file.read_text())
    counts = got["counts"]
    # The torn write is a branch of the append that only a crash request takes: every append
    # is a place it can happen.
    counts["ledger.torn_write"] = counts.get("ledger.before_append", 0)
    records = read_records(ledger)
    rep = replay(records)
    return Baseline(seed, counts, worker_calls(calls), code,
                    scientific_state(rep, records, _workspaces(folder)),
                    trace_of(records, str(folder), width), width, got["flying"])


def spread(count: int, k: int) -> list[int]:
    """k occurrence indices spread evenly over 1..count (the last always included)."""
    if count <= 0 or k <= 0:
        return []
    if k == 1:
        return [count]
    return sorted({1 + round(j * (count - 1) / (k - 1)) for j in range(k)})


def plan_wide(base: Baseline, sites: Sequence[str]) -> list[Case]:
    """The cases of a wide baseline: each site once, at its first crossing with the most
    attempts in flight (the torn write at the append's)."""
    out = []
    for site in sites:
        seen = base.flying.get("ledger.before_append" if site == "ledger.torn_write" else site)
        if seen:
            out.append(Case(base.seed, site, 1 + seen.index(max(seen)), width=base.width))
    return out


def plan(base: Baseline, scale: Scale, sites: Sequence[str]) -> list[Case]:
    """The cases for one seed: each site at spread occurrence indices, then resume crashes."""
    if base.width > 1:
        return plan_wide(base, sites)
    cases = [Case(base.seed, site, n) for site in sites
             for n in spread(base.counts.get(site, 0), scale.per_site)]
    # Crashes whose resume is killed too: the first crash is taken inside an attempt, so the
    # resume has an attempt with no recorded end to recover when it is itself killed.
    primaries = [c for c in cases if c.site in INSIDE_ATTEMPT] or cases
    for i, rsite in enumerate(scale.resume_sites):
        for j in range(scale.resume_cases):
            p = primaries[(i * scale.resume_cases + j) % len(primaries)]
            cases.append(Case(p.seed, p.site, p.n, rsite))
    return cases


def run_case(case: Case, root: Path, base: Baseline) -> Row:
    folder = root / "cases" / case.id.replace("/", "_").replace(":", "_").replace("@", "_")
    remove_tree(folder)
    spec, ledger, calls = _prepare(folder, case.seed, case.width)
    run = ["run", str(spec), "--ledger", str(ledger), "--json"]
    resume = ["resume", "--ledger", str(ledger), "--json"]
    code, _ = _cli(run, folder, crash_at=f"{case.site}:{case.n}")
    crashed = code == -9
    in_flight = open_attempts(_readable(ledger)) if crashed else 0
    resumes = 0
    if crashed and case.resume_site:
        code, _ = _cli(resume, folder, crash_at=f"{case.resume_site}:1")
        resumes += 1
        crashed = code == -9
    restarted = False
    while code == -9 and resumes < 5:
        code, _ = _cli(resume, folder)
        resumes += 1
        if code == 2 and not ledger.exists():
            # The crash came before record 0 was linked into place: no run exists (the ledger
            # is created atomically), so `resume` refuses it as bad input and the operator's
            # move is to start the run again.
            remove_tree(workspace_root(ledger))
            code, _ = _cli(run, folder)
            restarted = True
    row = compare(case, folder, ledger, calls, base, crashed, resumes, code, restarted)
    row.width, row.in_flight = case.width, in_flight
    return row


def _readable(ledger: Path) -> list[dict[str, Any]]:
    """The complete lines of a crashed ledger, unverified (a torn tail is left out)."""
    if not ledger.exists():
        return []
    out = []
    for line in ledger.read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out




def compare(case: Case, folder: Path, ledger: Path, calls: Path, base: Baseline,
            crashed: bool, resumes: int, code: int, restarted: bool = False) -> Row:
    mismatch = ""
    n_calls = worker_calls(calls)
    try:
        records = read_records(ledger)
        rep = replay(records)
    except Exception as exc:  # noqa: BLE001 - an unrecoverable ledger is a result, not a crash
        return Row(case.id, case.seed, case.site, case.n, case.resume_site, crashed, resumes,
                   restarted, code, "UNRECOVERED", False, False, 0, n_calls,
                   max(0, n_calls - base.calls), 0, True, len(base.state["nodes"]),
                   f"{type(exc).__name__}: {str(exc).replace(str(folder), '<case>')[:300]}")
    state = scientific_state(rep, records, _workspaces(folder))
    trace = trace_of(records, str(folder), base.width)
    recovered = state == base.state and code == base.exit_code
    if not recovered:
        diff = sorted(k for k in state if state[k] != base.state.get(k))
        mismatch = f"state differs in {diff}" if diff else f"exit {code} != {base.exit_code}"
    # at width > 1 where a node's records first differ depends on thread timing (how far the
    # other attempts in flight got before the kill), so only "they differ" (0) is kept
    first = _first_difference(trace, base.trace) if base.width == 1 else 0
    identical = trace == base.trace
    lost = sum(1 for n, v in base.state["nodes"].items()
               if v["status"] == "DONE" and state["nodes"].get(n, {}).get("status") != "DONE")
    abandoned = sum(1 for r in records if r.get("type") == "abandon")
    return Row(case.id, case.seed, case.site, case.n, case.resume_site, crashed, resumes,
               restarted, code, state["outcome"], recovered, identical,
               -1 if identical else first, n_calls, max(0, n_calls - base.calls), abandoned,
               prefix_excess(records) <= EPS, lost, mismatch)


def _first_difference(trace: Any, base: Any) -> int:
    """Index of the first differing normalized record; the shorter length when one is a prefix
    of the other."""
    return next((i for i, (a, b) in enumerate(zip(trace, base, strict=False)) if a != b),
                min(len(trace), len(base)))
