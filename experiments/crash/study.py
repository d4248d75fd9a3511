"""The crash experiment: SIGKILL a real run at every commit boundary, resume it, and compare.

For each seed the deterministic crash graph (experiments/crash/graph) is run once without a crash
(the baseline). Then for each crash site and each chosen occurrence index n, a fresh copy of the
run is started as a child process (`loopproof run`) with LOOPPROOF_CRASH_AT=site:n, so it is
SIGKILLed at the n-th time it reaches that site; it is then resumed (`loopproof resume`) until it
ends. "During a resume" cases also kill the first resume at a resume-time site, then resume again.

Each case is compared with its seed's baseline on three separate observables (docs/crash.md):

(a) scientific state — the run's outcome, each node's status and activation, the repairs used,
    the content hash of each node's workspace, the snapshot hash each PASS verdict judged, and
    settled spend <= B with nothing left reserved;
(b) normalized trace identity — the ledger's record sequence with recovery bookkeeping and
    volatile fields (wall-clock amounts, timings, paths, chain hashes) removed;
(c) repeated worker calls — worker invocations (counted by the workers themselves, in a file
    outside every workspace) beyond the baseline's.

Every prefix of every recovered ledger is also checked for settled + reserved <= B, and every
node that was DONE in the baseline must be DONE after recovery (no lost verdict).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.record.ledger import Ledger
from engine.record.replay import Replayed, replay
from engine.run.runner import workspace_root
from engine.system.trees import remove_tree
from experiments import results
from experiments.crash import graph as crashgraph
from experiments.results import write_csv, write_json
from model.transitions import EPS

LEDGER_SITES = ("ledger.before_append", "ledger.torn_write", "ledger.after_append")
# Sites a resume reaches early; a "during a resume" case kills the first resume at one of them.
RESUME_SITES = ("runner.resume", "ledger.before_append", "ledger.torn_write",
                "ledger.after_append")
# Sites inside an attempt (after its Begin is recorded, before its verdict is).
INSIDE_ATTEMPT = ("runner.after_worker", "meter.before_settle", "runner.before_worker",
                  "meter.after_reserve", "runner.before_verdict")
RESULTS = Path("results") / "crash"


@dataclass(frozen=True)
class Scale:
    """How many seeds; which sites, at how many occurrence indices; which resume crashes."""

    seeds: int
    per_site: int                       # occurrence indices n per site, spread over the run
    sites: tuple[str, ...] | None = None  # None: every engine site
    resume_sites: tuple[str, ...] = RESUME_SITES
    resume_cases: int = 1               # primary crashes per resume site whose resume is killed


SCALES: dict[str, Scale] = {
    # a torn ledger write, a crash between a worker's call and its record, and a killed
    # resume, each at the last occurrence: small enough for the test suite
    "smoke": Scale(seeds=1, per_site=1, sites=("ledger.torn_write", "runner.after_worker"),
                   resume_sites=("runner.resume",)),
    "default": Scale(seeds=2, per_site=2),
    "paper": Scale(seeds=10, per_site=2),
}


def engine_sites() -> tuple[str, ...]:
    """The engine's commit boundaries, read from the modules that own them."""
    from engine.run import meter, runner
    sites = LEDGER_SITES + tuple(meter.METER_SITES) + tuple(runner.CRASH_SITES)
    return tuple(dict.fromkeys(s for s in sites if s != "runner.resume"))  # once each, in order


# ---- child processes ------------------------------------------------------------------------

# The baseline child counts how often each crashpoint is reached (nothing is killed): it wraps
# engine.system.faults.crashpoint before the engine imports it, runs the CLI, and writes the counts.
_COUNTING_CHILD = """
import json, sys
import engine.system.faults as faults
counts = {}
_real = faults.crashpoint
def crashpoint(site):
    counts[site] = counts.get(site, 0) + 1
    _real(site)
faults.crashpoint = crashpoint
from engine.cli import main
try:
    rc = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w") as f:
        json.dump(counts, f, sort_keys=True)
sys.exit(rc)
"""


def _cli(args: Sequence[str], cwd: Path, crash_at: str | None = None,
         count_into: Path | None = None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPPROOF_")}
    env["PYTHONHASHSEED"] = "0"
    if crash_at:
        env["LOOPPROOF_CRASH_AT"] = crash_at
    if count_into is not None:
        argv = [sys.executable, "-c", _COUNTING_CHILD, str(count_into), *args]
    else:
        argv = [sys.executable, "-m", "engine.cli", *args]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=300)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


def _prepare(folder: Path, seed: int) -> tuple[Path, Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    calls = folder / "calls.txt"
    calls.touch()
    spec = crashgraph.write_graph(folder / "spec", seed, calls)
    return spec, folder / "ledger.jsonl", calls


# ---- observables ------------------------------------------------------------------------------

# Fields whose values are not part of what a run decided: chain fields (they hash volatile
# content), wall-clock measurements and process facts. Removed at any depth.
VOLATILE_KEYS = frozenset({"hash", "prev", "seq", "seconds", "elapsed", "pid", "pgid", "time",
                           "duration"})
# Fields that accumulate measured wall clock: kept, with the value replaced by "~".
MEASURED_KEYS = frozenset({"settled"})
# Records that exist only because a run was interrupted and resumed (bookkeeping, not execution).
RECOVERY_TYPES = frozenset({"resumed"})
WALL_CLOCK = "wall_clock"
EVALUATION = "evaluation"  # a gate run's reservation and settlement (engine.run.meter)


def _strip(obj: Any, root: str) -> Any:
    if isinstance(obj, dict):
        out = {k: ("~" if k in MEASURED_KEYS else _strip(v, root))
               for k, v in obj.items() if k not in VOLATILE_KEYS}
        if obj.get("type") == "settle" and obj.get("what") in (WALL_CLOCK, EVALUATION):
            out["amount"] = "~"  # seconds a command took: a measurement, not a decision
        if obj.get("what") == EVALUATION and obj.get("type") in ("reserve", "overrun", "settle"):
            out["amount"] = "~"  # a gate's hold is what the measured worker left of c_v
            for key in ("reserved", "of"):  # `of`: the reservation a settle releases
                if key in out:
                    out[key] = "~"
        if obj.get("type") == "run" and isinstance(out.get("spec"), dict):
            out["spec"].pop("sha256", None)  # the spec file's bytes embed the case folder
        return out
    if isinstance(obj, list):
        return [_strip(v, root) for v in obj]
    if isinstance(obj, str) and root and root in obj:
        return obj.replace(root, "<case>")
    return obj


def normalized_trace(records: Iterable[Mapping[str, Any]], root: str) -> list[Any]:
    """The record sequence with recovery bookkeeping and volatile fields removed (docs/crash.md)."""
    return [_strip(dict(r), root) for r in records if r.get("type") not in RECOVERY_TYPES]


def tree_hash(folder: Path) -> str:
    """SHA-256 over sorted relative paths and file contents (empty string if no folder)."""
    if not folder.is_dir():
        return ""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def scientific_state(rep: Replayed, records: Sequence[Mapping[str, Any]],
                     workspaces: Path) -> dict[str, Any]:
    """Outcome, node statuses and activations, repairs, workspace and PASS-snapshot hashes."""
    g, s = rep.graph, rep.state
    passes = sorted({(r["node"], int(r.get("activation", -1)), str(r.get("snapshot", "")))
                     for r in records if r.get("type") == "verdict" and r.get("passed")})
    ws = {n: tree_hash(workspaces / n) for n in g.names}
    return {
        "outcome": s.outcome.value,
        "nodes": {n: {"status": s.status_of(g, n).value, "activation": s.activation_of(g, n)}
                  for n in g.names},
        "repairs_used": s.repairs_used,
        "pass_snapshots": [list(p) for p in passes],
        "workspaces": ws,
        "settled_within_budget": s.settled <= g.spend_budget + EPS,
        "reserved_left": round(s.reserved, 9),
    }


def prefix_excess(records: Sequence[Mapping[str, Any]]) -> float:
    """max over every prefix of (settled + reserved - B); <= EPS means no budget violation.

    Computed from the records' own amounts, not through the engine's replay, so the check does
    not rest on the code it checks: `reserve` holds its amount, `settle` charges its amount and
    releases its reservation, `abandon` charges what it says it charged and releases the rest.
    """
    if not records:
        return 0.0
    budget = float(records[0]["graph"]["spend_budget"])
    settled = reserved = 0.0
    worst = -budget
    for rec in records[1:]:
        t = rec.get("type")
        if t == "reserve":
            reserved += float(rec["amount"])
        elif t == "settle":
            settled += float(rec["amount"])
            reserved = max(0.0, reserved - float(rec["reserved"]))
        elif t == "abandon":
            settled += float(rec.get("charged", 0.0))
            reserved = 0.0
        worst = max(worst, settled + reserved - budget)
    return worst


def _read(ledger: Path) -> list[dict[str, Any]]:
    with Ledger.open(ledger) as led:
        return [dict(r) for r in led.records]


def _calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


# ---- baseline and cases -----------------------------------------------------------------------

@dataclass
class Baseline:
    seed: int
    counts: dict[str, int]
    calls: int
    exit_code: int
    state: dict[str, Any]
    trace: list[Any]


@dataclass(frozen=True)
class Case:
    seed: int
    site: str
    n: int
    resume_site: str = ""   # non-empty: the first resume is killed at resume_site:1

    @property
    def id(self) -> str:
        tail = f"+resume@{self.resume_site}" if self.resume_site else ""
        return f"s{self.seed}/{self.site}:{self.n}{tail}"


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


def _workspaces(folder: Path) -> Path:
    """Where the runner keeps node workspaces for the ledger in `folder` (<ledger>.work/)."""
    return workspace_root(folder / "ledger.jsonl")


def run_baseline(seed: int, root: Path) -> Baseline:
    folder = root / f"baseline-{seed}"
    remove_tree(folder)
    spec, ledger, calls = _prepare(folder, seed)
    counts_file = folder / "counts.json"
    code, err = _cli(["run", str(spec), "--ledger", str(ledger), "--json"], folder,
                     count_into=counts_file)
    if code not in (0, 3, 4):
        raise RuntimeError(f"the uncrashed run of seed {seed} exited {code}: {err.strip()}")
    counts = json.loads(counts_file.read_text())
    # The torn write is a branch of the append that only a crash request takes: every append
    # is a place it can happen.
    counts["ledger.torn_write"] = counts.get("ledger.before_append", 0)
    records = _read(ledger)
    rep = replay(records)
    return Baseline(seed, counts, _calls(calls), code,
                    scientific_state(rep, records, _workspaces(folder)),
                    normalized_trace(records, str(folder)))


def spread(count: int, k: int) -> list[int]:
    """k occurrence indices spread evenly over 1..count (the last always included)."""
    if count <= 0 or k <= 0:
        return []
    if k == 1:
        return [count]
    return sorted({1 + round(j * (count - 1) / (k - 1)) for j in range(k)})


def plan(base: Baseline, scale: Scale, sites: Sequence[str]) -> list[Case]:
    """The cases for one seed: each site at spread occurrence indices, then resume crashes."""
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
    spec, ledger, calls = _prepare(folder, case.seed)
    run = ["run", str(spec), "--ledger", str(ledger), "--json"]
    resume = ["resume", "--ledger", str(ledger), "--json"]
    code, _ = _cli(run, folder, crash_at=f"{case.site}:{case.n}")
    crashed = code == -9
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
    return compare(case, folder, ledger, calls, base, crashed, resumes, code, restarted)




def compare(case: Case, folder: Path, ledger: Path, calls: Path, base: Baseline,
            crashed: bool, resumes: int, code: int, restarted: bool = False) -> Row:
    mismatch = ""
    n_calls = _calls(calls)
    try:
        records = _read(ledger)
        rep = replay(records)
    except Exception as exc:  # noqa: BLE001 - an unrecoverable ledger is a result, not a crash
        return Row(case.id, case.seed, case.site, case.n, case.resume_site, crashed, resumes,
                   restarted, code, "UNRECOVERED", False, False, 0, n_calls,
                   max(0, n_calls - base.calls), 0, True, len(base.state["nodes"]),
                   f"{type(exc).__name__}: {str(exc).replace(str(folder), '<case>')[:300]}")
    state = scientific_state(rep, records, _workspaces(folder))
    trace = normalized_trace(records, str(folder))
    recovered = state == base.state and code == base.exit_code
    if not recovered:
        diff = sorted(k for k in state if state[k] != base.state.get(k))
        mismatch = f"state differs in {diff}" if diff else f"exit {code} != {base.exit_code}"
    first = next((i for i, (a, b) in enumerate(zip(trace, base.trace, strict=False)) if a != b),
                 min(len(trace), len(base.trace)))
    identical = trace == base.trace
    lost = sum(1 for n, v in base.state["nodes"].items()
               if v["status"] == "DONE" and state["nodes"].get(n, {}).get("status") != "DONE")
    abandoned = sum(1 for r in records if r.get("type") == "abandon")
    return Row(case.id, case.seed, case.site, case.n, case.resume_site, crashed, resumes,
               restarted, code, state["outcome"], recovered, identical,
               -1 if identical else first, n_calls, max(0, n_calls - base.calls), abandoned,
               prefix_excess(records) <= EPS, lost, mismatch)


# ---- the experiment ---------------------------------------------------------------------------

def run_experiment(scale: str, seed: int, out: Path, jobs: int = 2,
                   work: Path | None = None) -> dict[str, Any]:
    sc = SCALES[scale]
    sites = sc.sites or engine_sites()
    tmp = Path(tempfile.mkdtemp(prefix="loopproof-crash-")) if work is None else work
    try:
        seeds = [seed + i for i in range(sc.seeds)]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            bases = dict(zip(seeds, pool.map(lambda s: run_baseline(s, tmp), seeds), strict=True))
            cases = [c for s in seeds for c in plan(bases[s], sc, sites)]
            rows = list(pool.map(lambda c: run_case(c, tmp, bases[c.seed]), cases))
    finally:
        if work is None:
            remove_tree(tmp)
    rows = [r for r in rows if r.crashed]   # a site not reached is not a case
    rows.sort(key=lambda r: r.case)
    summary = summarise(rows)
    write(out, rows, summary, scale, seed)
    return summary


def summarise(rows: Sequence[Row]) -> dict[str, Any]:
    return {
        "cases": len(rows),
        "outcome_recovered": sum(r.outcome_recovered for r in rows),
        "trace_identical": sum(r.trace_identical for r in rows),
        "repeated_calls": sum(r.repeated_calls for r in rows),
        "budget_violations": sum(not r.budget_ok for r in rows),
        "lost_verdicts": sum(r.lost_verdicts for r in rows),
    }


def by_site(rows: Sequence[Row]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter] = {}
    for r in rows:
        key = f"{r.site}+resume@{r.resume_site}" if r.resume_site else r.site
        c = out.setdefault(key, Counter())
        c["cases"] += 1
        c["outcome_recovered"] += r.outcome_recovered
        c["trace_identical"] += r.trace_identical
        c["repeated_calls"] += r.repeated_calls
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def load_results(folder: Path) -> dict[str, Any]:
    """What the notebook reads: the summary and the per-case rows (typed back from the CSV)."""
    summary = json.loads((folder / "summary.json").read_text())
    ints = {"seed", "n", "resumes", "restarted", "exit_code", "outcome_recovered",
            "trace_identical", "first_difference", "worker_calls", "repeated_calls",
            "abandoned", "budget_ok", "lost_verdicts"}
    with open(folder / "cases.csv", newline="") as f:
        rows = [{k: int(v) if k in ints else v for k, v in r.items()}
                for r in csv.DictReader(f)]
    return {"summary": summary, "rows": rows}


def site_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per crash site (a killed resume is its own row): cases, the share whose outcome was
    recovered, the share whose normalized trace was identical, and the repeated worker calls."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        key = f"{r['site']} + resume@{r['resume_site']}" if r["resume_site"] else r["site"]
        groups.setdefault(key, []).append(r)
    out = []
    for key, rs in groups.items():
        n = len(rs)
        out.append({"site": key, "cases": n,
                    "outcome_recovered": round(sum(r["outcome_recovered"] for r in rs) / n, 4),
                    "trace_identical": round(sum(r["trace_identical"] for r in rs) / n, 4),
                    "repeated_calls": sum(r["repeated_calls"] for r in rs),
                    "abandoned": sum(r["abandoned"] for r in rs)})
    return sorted(out, key=lambda d: (d["trace_identical"], d["site"]))


COLUMNS = ("case", "seed", "site", "n", "resume_site", "resumes", "restarted", "exit_code",
           "outcome", "outcome_recovered", "trace_identical", "first_difference", "worker_calls",
           "repeated_calls", "abandoned", "budget_ok", "lost_verdicts", "mismatch")


def write(out: Path, rows: Sequence[Row], summary: Mapping[str, Any], scale: str,
          seed: int) -> None:
    write_csv(out / "cases.csv", (asdict(r) for r in rows), COLUMNS)
    write_json(out / "summary.json", {"scale": scale, "seed": seed, **summary,
                                      "by_site": by_site(rows)})


def main(argv: Sequence[str] | None = None) -> int:
    p = results.parser("crash", __doc__.splitlines()[0], SCALES)
    p.add_argument("--jobs", type=int, default=2, help="cases run in parallel (default 2)")
    args = results.parse(p, argv)
    if args is None:
        return 2
    summary = run_experiment(args.scale, args.seed, args.out, args.jobs)
    results.print_summary(summary, args.json)
    ok = (summary["outcome_recovered"] == summary["cases"] and summary["budget_violations"] == 0
          and summary["lost_verdicts"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
