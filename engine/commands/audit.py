"""`loopproof audit CATALOG_DIR` or `loopproof audit GRAPH.toml --ledger L`: measure gates with
mutants: every gate of a catalogue, or a graph's own gates against the trees they accepted in a
run (engine/commands/_graph_loops.py; no catalogue to build).

Per gate: vacuous, self-attesting, and per tier the false accepts among the destroying mutants,
with the equivalent and undetermined ones counted apart. A loop without an oracle has its Python
mutants judged by the differential oracle (engine/audit/differential.py).

A graph's gates are audited whatever their kind (a command, `calls`, `program`, `pytest`), each
as the run judges with it; the exploit probes' control counts as vacuity too. Progress goes to
stderr (engine/audit/progress.py); `--max-seconds` ends the audit with what it has and says so.

Exit 0 whenever the audit ran, whatever it found (a vacuous gate is a finding, not a failure);
exit 2 for a malformed catalogue or a graph and ledger that do not go together, naming the file
and the field.
"""

from __future__ import annotations

import argparse
import json
import os
from contextlib import ExitStack
from pathlib import Path

from loopproof.engine.audit import exploits
from loopproof.engine.audit.catalogue import GATE_DIR, Loop, load_catalogue
from loopproof.engine.audit.exploits.base import Files
from loopproof.engine.audit.exploits.run import Known, Probed, Target, accepted_families, probe
from loopproof.engine.audit.instrument import audit
from loopproof.engine.audit.judge import Deadline, Judge
from loopproof.engine.audit.progress import on_stderr
from loopproof.engine.run.values import add_size_argument
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.sandbox import BACKENDS, DEFAULT

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
    parser.add_argument("--max-seconds", type=float, default=None, metavar="S",
                        help="end the audit after S seconds with what it has judged (the "
                             "report says what was left; absence mutants and probes first)")
    add_size_argument(parser)
    parser.add_argument("--gate-dir", default=GATE_DIR,
                        help="audit <loop>/<GATE_DIR> where present (e.g. gate.repaired)")
    parser.add_argument("--no-mutants", action="store_true",
                        help="with GRAPH.toml: exploit probes only, no mutants")
    parser.add_argument("--exploits", default="all", metavar="all|none|FAMILY[/PROBE],...",
                        help="with GRAPH.toml: which exploit probes to plant in each accepted "
                             "tree (default all; families: " + ", ".join(exploits.FAMILIES)
                             + ")")


def _cell(s: dict | None) -> str:
    """A tier's cell: false accepts / destroying, then equivalent and undetermined mutants."""
    return f"{s['false_accepts']}/{s['destroying']} ({s['equivalent']}, {s['undetermined']})" \
        if s else "-"


# What to do about a vacuous gate, by its kind (the text report names it).
VACUITY_FIX = {
    "command": "the gate accepts the tree with its code gone, so it does not judge the tree: "
               "make it fail when the judged code is absent or wrong, or use a judge kind "
               "(`calls`, `program`, `pytest`: docs/gates.md)",
    "pytest": "the pinned tests pass with the judged code gone: they test another copy (an "
              "installed package: declare the judged packages with `code = [...]`) or nothing "
              "of it; add tests that import and call the tree's code",
    "calls": "the cases pass with the function's body gone: their expectations hold for an "
             "empty result (e.g. null); add cases whose answers the code must compute",
    "program": "the cases pass with the program's code gone: their expected outputs are what "
               "an empty program prints; add cases whose output the program must compute",
}


def _table(result) -> str:
    if not result["gates"] and "exploits" in result:  # no mutants (--no-mutants)
        return "\n".join([*(f"not audited: {k['node']}: {k['why']}"
                             for k in result.get("skipped", [])),
                           *_vacuity_lines(result), *_exploit_lines(result["exploits"]),
                           *_stopped_lines(result)])
    lines = [f"{'gate':32} {'kind':8} {'status':8} {'vacuous':8} {'self-att':8} {'oracle':12} "
             f"{'t1 FA/destr (eq, und)':22} {'t2 FA/destr (eq, und)':22}"]
    for g in result["gates"]:
        tiers = g["tiers"]
        lines.append(f"{g['gate'][:32]:32} {g.get('kind', '-'):8} {g['status']:8} "
                     f"{str(g['vacuous']):8} {str(g['self_attesting']):8} "
                     f"{g.get('oracle', '-'):12} {_cell(tiers.get('1')):22} "
                     f"{_cell(tiers.get('2')):22}")
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
    for g in result["gates"]:
        if "artifact" in g:
            lines.append(f"mutated ({g['gate']}): {g['artifact']['mutated']} of "
                         f"{g['artifact']['tree']} files, {g['artifact']['how']}")
    for skip in result.get("skipped", []):
        lines.append(f"not audited: {skip['node']}: {skip['why']}")
    lines += _vacuity_lines(result)
    if "exploits" in result:
        lines += _exploit_lines(result["exploits"])
    return "\n".join(lines + _stopped_lines(result))


def _vacuity_lines(result: dict) -> list[str]:
    """One line per vacuous gate: what showed it and the fix for its kind."""
    out = []
    for g in result["gates"]:
        if g["vacuous"]:
            fix = VACUITY_FIX.get(g.get("kind", ""), "the gate must reject what it is meant "
                                  "to check when that is absent")
            out.append(f"vacuous ({g['gate']}): accepted {', '.join(g['vacuous_by'])}; fix: "
                       f"{fix}")
    for node, words in sorted(result.get("vacuous_nodes", {}).items()):
        if not any(g["gate"] == node for g in result["gates"]):
            out.append(f"vacuous ({node}): accepted the exploit probes' control (the wrong tree "
                       f"with no payload: {words}); fix: the gate must fail on a tree whose "
                       f"code is gone")
    return out


def _stopped_lines(result: dict) -> list[str]:
    stopped = result["summary"].get("stopped")
    if not stopped:
        return []
    return [f"stopped: {stopped['why']}: {stopped['loops_not_run']} gates, "
            f"{stopped['mutants_not_run']} mutants and {stopped.get('probes_not_run', 0)} "
            f"exploit probes not judged; every figure above counts only what was judged"]


def merge_probes(result: dict, probed: Probed) -> None:
    """The probes' findings into the report: their entries, and a gate that accepted their
    control (the wrong tree with no payload) is vacuous, in its entry and in the summary."""
    result["exploits"] = probed.entries
    result["vacuous_nodes"] = dict(probed.vacuous)
    for g in result["gates"]:
        if g["gate"] in probed.vacuous and g["status"] == "audited":
            g["vacuous"] = True
            g["vacuous_by"] = sorted({*g["vacuous_by"], "exploit-control"})
            g["flagged"] = True
    s = result["summary"]
    audited = [g for g in result["gates"] if g["status"] == "audited"]
    s["vacuous"] = len({g["gate"] for g in audited if g["vacuous"]} | set(probed.vacuous))
    s["neither"] = sum(g["vacuous"] is False and g["self_attesting"] is False for g in audited)
    s["flagged"] = sum(g["flagged"] for g in result["gates"])


def _exploit_lines(entries: list[dict]) -> list[str]:
    """One line per node, then each accepted family with its payloads and the fix."""
    lines = []
    for node, families in accepted_families(entries).items():
        ran = [e for e in entries if e["node"] == node]
        took = [e for e in ran if e["accepted"]]
        lines.append(f"exploits ({node}): {len(took)} of {len(ran)} probes accepted a wrong tree"
                     + (f"; fooled by {', '.join(families)}" if families else "; none fooled it"))
        for family in families:
            names = [e["probe"] for e in took if e["family"] == family]
            docs = [p.doc for p in exploits.PROBES if p.family == family and p.name in names]
            lines.append(f"exploit accepted ({node}, {family}): {', '.join(names)} "
                         f"({'; '.join(docs)}); fix: {exploits.FIXES[family]}")
    return lines


def _known_to(judge: Judge, loops: list[Loop]) -> Known:
    """What the audit's judge already said of a tree, for the probes: a loop's gate is the
    probed node's own gate (the same `NodeGate`), so a tree it judged is not judged again."""
    by_node = {lp.id: lp for lp in loops}

    def known(target: Target, files: Files) -> tuple[str, str] | None:
        lp = by_node.get(target.node)
        reply = judge.known(lp, files) if lp is not None and lp.gate is target.judge else None
        return None if reply is None else (reply.outcome, reply.detail)

    return known


def main(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise BadInput("--jobs", "jobs", f"must be at least 1, got {args.jobs}", "pass --jobs 1 or more")
    if args.max_tier2 < 0:
        raise BadInput("--max-tier2", "max-tier2", "must be 0 or more", "pass --max-tier2 0 for all")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise BadInput("--max-seconds", "max-seconds", f"must be more than 0, got "
                       f"{args.max_seconds:g}", "pass the audit's time in seconds, e.g. 600")
    try:
        chosen = exploits.select(args.exploits)
    except KeyError as exc:
        raise BadInput("--exploits", "exploits", f"no family or probe {exc.args[0]!r}",
                       "give all, none, or families among " + ", ".join(exploits.FAMILIES)
                       + " (FAMILY/PROBE for one probe)") from None
    deadline = Deadline.after(args.max_seconds, f"--max-seconds {args.max_seconds} ran out")
    skipped: list[dict] = []
    graph = args.catalog.is_file()
    if graph:
        if args.ledger is None:
            raise BadInput(str(args.catalog), "--ledger", "a graph is audited against a run",
                           "give --ledger L: the run whose accepted trees are the references")
        from loopproof.engine.commands._graph_loops import accepted_references
        spec, refs, skips = accepted_references(args.catalog, args.ledger, args.max_spec_bytes)
        skipped = [{"node": k.node, "why": k.why} for k in skips]
        if not refs:
            raise BadInput(str(args.ledger), "--ledger", "nothing to audit in this graph and run: "
                           + "; ".join(f"{k.node}: {k.why}" for k in skips),
                           "audit a run in which a node's gate accepted a tree")
    else:
        if args.ledger is not None:
            raise BadInput(str(args.catalog), "--ledger", "a catalogue holds its own references",
                           "leave out --ledger, or give a GRAPH.toml")
        if args.exploits != "all" or args.no_mutants:
            raise BadInput(str(args.catalog), "--exploits", "exploit probes run on a graph's "
                           "own gates", "give GRAPH.toml --ledger L, or leave out --exploits "
                           "and --no-mutants")
        loops = load_catalogue(args.catalog, args.gate_dir)
    tiers = (1, 2) if args.tier == "all" else (int(args.tier),)
    judge = Judge(args.jobs, args.sandbox, deadline=deadline)
    with ExitStack() as stack:
        progress = on_stderr(stack)
        if graph:
            from loopproof.engine.commands._graph_loops import (
                exploit_targets,
                mutant_loops,
                node_gates,
            )
            gates = node_gates(spec, refs, args.ledger, judge.sandbox)
            loops = [] if args.no_mutants else mutant_loops(spec, refs, gates, progress)
        result = audit(loops, tiers=tiers, seed=args.seed, jobs=args.jobs,
                       cap={2: args.max_tier2 or None}, progress=progress, judge=judge,
                       differential=not args.no_differential).as_json()
        if graph:
            probed = probe(exploit_targets(refs, gates), chosen, args.jobs, progress, deadline,
                           _known_to(judge, loops))
            merge_probes(result, probed)
            skipped += [{"node": k.node, "why": k.why} for k in probed.skipped]
            if deadline.passed():
                result["summary"].setdefault("stopped", {"why": deadline.why, "loops_not_run": 0,
                                                         "mutants_not_run": 0})
                result["summary"]["stopped"]["probes_not_run"] = probed.not_run
    if skipped:
        result["skipped"] = skipped
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(_table(result))
    return 0
