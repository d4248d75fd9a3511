"""`loopproof audit CATALOG_DIR` or `loopproof audit GRAPH.toml --ledger L`: measure gates with
mutants: every gate of a catalogue, or a graph's own gates against the trees they accepted in a
run (engine/commands/_graph_loops.py; no catalogue to build).

Per gate: vacuous, self-attesting, and per tier the false accepts among the destroying mutants,
with the equivalent and undetermined ones counted apart. A loop without an oracle has its Python
mutants judged by the differential oracle (engine/audit/differential.py).

Exit 0 whenever the audit ran, whatever it found (a vacuous gate is a finding, not a failure);
exit 2 for a malformed catalogue or a graph and ledger that do not go together, naming the file
and the field.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path

from engine.audit.catalogue import GATE_DIR, load_catalogue
from engine.audit.instrument import audit
from engine.audit.judge import Judge
from engine.run.values import add_size_argument
from engine.system.errors import BadInput
from engine.system.sandbox import BACKENDS, DEFAULT

DEFAULT_TIER2_CAP = 15


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("catalog", metavar="CATALOG_DIR | GRAPH.toml", type=Path,
                        help="folder of loops (<loop>/loop.toml, workspace/, gate/), or a graph "
                             "whose own gates to audit (with --ledger)")
    parser.add_argument("--ledger", type=Path, default=None, metavar="L",
                        help="with GRAPH.toml: the run whose accepted trees are the references")
    parser.add_argument("--no-differential", action="store_true",
                        help="no differential oracle: Python mutants of loops without an "
                             "oracle stay undetermined")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--tier", choices=("1", "2", "all"), default="all",
                        help="which mutant tier to run (vacuity and self-attestation always run)")
    parser.add_argument("--seed", type=int, default=0, help="seed for sampling tier-2 mutants")
    parser.add_argument("--sandbox", choices=sorted(BACKENDS), default=DEFAULT,
                        help="where each gate run runs (default bwrap; none: unconfined, "
                             "the mutants' code runs with your rights)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="gates run in parallel (default: the number of cores)")
    parser.add_argument("--max-tier2", type=int, default=DEFAULT_TIER2_CAP, metavar="N",
                        help=f"at most N tier-2 mutants per loop, a seeded sample "
                             f"(default {DEFAULT_TIER2_CAP}; 0 for all)")
    add_size_argument(parser)
    parser.add_argument("--gate-dir", default=GATE_DIR,
                        help="audit <loop>/<GATE_DIR> where present (e.g. gate.repaired)")


def _progress_factory(stack: ExitStack):
    """A rich progress bar per phase on a terminal; nothing otherwise (and never under --json)."""
    from rich.console import Console
    from rich.progress import Progress

    bar = stack.enter_context(Progress(transient=True, console=Console(stderr=True)))

    def start(phase: str, total: int):
        task = bar.add_task(phase, total=total)
        return lambda: bar.advance(task)

    return start


def _cell(s: dict | None) -> str:
    """A tier's cell: false accepts / destroying, then equivalent and undetermined mutants."""
    return f"{s['false_accepts']}/{s['destroying']} ({s['equivalent']}, {s['undetermined']})" \
        if s else "-"


def _table(result) -> str:
    lines = [f"{'gate':32} {'status':8} {'vacuous':8} {'self-att':8} {'oracle':12} "
             f"{'t1 FA/destr (eq, und)':22} {'t2 FA/destr (eq, und)':22}"]
    for g in result["gates"]:
        tiers = g["tiers"]
        lines.append(f"{g['gate'][:32]:32} {g['status']:8} {str(g['vacuous']):8} "
                     f"{str(g['self_attesting']):8} {g.get('oracle', '-'):12} "
                     f"{_cell(tiers.get('1')):22} {_cell(tiers.get('2')):22}")
    s = result["summary"]
    lines.append(f"{s['loops']} loops: {s['broken']} broken, {s['vacuous']} vacuous, "
                 f"{s['self_attesting']} self-attesting, {s['neither']} neither; "
                 f"{s['mutants_judged']} mutants in {s['wall_s']} s "
                 f"({s['mutants_per_s']} mutants/s, {s['jobs']} jobs; "
                 f"{s['mutants_per_cpu_s']} mutants per CPU-second; load {s['loadavg_1m']})")
    for t, row in s["tiers"].items():
        lines.append(f"tier {t}: {row['false_accepts']} false accepts / {row['destroying']} "
                     f"destroying, {row['equivalent']} equivalent, {row['undetermined']} "
                     f"undetermined; alpha={row['alpha']} (Wilson 95% upper "
                     f"{row['alpha_upper95']})")
    for g in result["gates"]:
        for t, row in sorted(g["tiers"].items()):
            for label, why in sorted(row.get("false_accept_why", {}).items()):
                lines.append(f"false accept ({g['gate']}, tier {t}, {label}): {why}")
    for skip in result.get("skipped", []):
        lines.append(f"not audited: {skip['node']}: {skip['why']}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise BadInput("--jobs", "jobs", f"must be at least 1, got {args.jobs}", "pass --jobs 1 or more")
    if args.max_tier2 < 0:
        raise BadInput("--max-tier2", "max-tier2", "must be 0 or more", "pass --max-tier2 0 for all")
    skipped: list[dict] = []
    if args.catalog.is_file():
        if args.ledger is None:
            raise BadInput(str(args.catalog), "--ledger", "a graph is audited against a run",
                           "give --ledger L: the run whose accepted trees are the references")
        from engine.commands._graph_loops import graph_loops
        loops, skips = graph_loops(args.catalog, args.ledger, args.max_spec_bytes)
        skipped = [{"node": k.node, "why": k.why} for k in skips]
        if not loops:
            raise BadInput(str(args.ledger), "--ledger", "nothing to audit in this graph and run: "
                           + "; ".join(f"{k.node}: {k.why}" for k in skips),
                           "audit a run in which a command node's gate accepted a tree")
    else:
        if args.ledger is not None:
            raise BadInput(str(args.catalog), "--ledger", "a catalogue holds its own references",
                           "leave out --ledger, or give a GRAPH.toml")
        loops = load_catalogue(args.catalog, args.gate_dir)
    tiers = (1, 2) if args.tier == "all" else (int(args.tier),)
    with ExitStack() as stack:
        progress = (_progress_factory(stack) if sys.stderr.isatty() and not args.json
                    else (lambda phase, total: (lambda: None)))
        result = audit(loops, tiers=tiers, seed=args.seed, jobs=args.jobs,
                       cap={2: args.max_tier2 or None}, progress=progress,
                       judge=Judge(args.jobs, args.sandbox),
                       differential=not args.no_differential).as_json()
    if skipped:
        result["skipped"] = skipped
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(_table(result))
    return 0
