"""`loopproof audit GRAPH.toml --ledger L`: a graph's own gates as audit loops, each against the
tree it accepted in the run, so a harness builder audits the gates they run without rebuilding
them as a catalogue.

Why from the ledger and its accepted snapshots: the reference an audit mutates must be a tree the
gate is known to accept, and the run recorded exactly that (`accepted_tree` in the accepting
verdict, the copy in `<ledger>.accepted/`). The copy is hashed again and must match; the graph
file must be the one the run started from, and the gate's pinned files unchanged since, or the
audit would judge another gate than the one that ran. A node with no accepted tree (it never
passed), or of another kind than `command`, is skipped and says why.

The loop's artifact is every file of the accepted tree outside `inputs/` (what the predecessors
handed on stays as it was in every mutant); there are no claim files. With no oracle, tier-2
mutants of Python files are judged by the differential oracle (engine/audit/differential.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.audit.catalogue import Command, Loop, workspace_files
from engine.record.replay import replay
from engine.record.timeline import read_records
from engine.run.gate import CommandGate
from engine.run.handoff import INPUTS, accepted_root
from engine.run.spec import load
from engine.run.values import MAX_SPEC_BYTES
from engine.system.errors import BadInput
from engine.system.trees import file_digest, tree_digest


@dataclass(frozen=True)
class Skipped:
    node: str
    why: str


def graph_loops(graph: Path, ledger: Path,
                max_spec_bytes: int = MAX_SPEC_BYTES) -> tuple[list[Loop], list[Skipped]]:
    """The audit loops of `graph`'s command nodes that accepted a tree in the run of `ledger`."""
    spec = load(graph, max_spec_bytes)
    check, records = read_records(ledger)
    if not records or records[0].get("type") != "run":
        raise BadInput(str(ledger), "--ledger", "is not a run's ledger",
                       "give the ledger `loopproof run` wrote for this graph")
    first = records[0]
    if first.get("spec", {}).get("sha256") != spec.sha256:
        raise BadInput(str(graph), "GRAPH.toml", f"is not the graph the run in {ledger} started "
                       f"from (its SHA-256 differs from the one record 0 holds)",
                       "give the graph file the run used, unchanged, or audit another run")
    r = replay(records)
    loops: list[Loop] = []
    skipped: list[Skipped] = []
    pins = first.get("pins", {})
    for name, cfg in spec.nodes.items():
        gate = cfg.gate
        if cfg.kind != "command" or not isinstance(gate, CommandGate):
            skipped.append(Skipped(name, f"kind {cfg.kind!r}: only command gates are audited"))
            continue
        changed = [str(p) for p in cfg.pinned_files()
                   if str(p) in pins and file_digest(p) != pins[str(p)]]
        if changed:
            skipped.append(Skipped(name, f"the gate's file {changed[0]} changed since the run"))
            continue
        rec = r.accepted.get(name)
        if rec is None:
            skipped.append(Skipped(name, "its gate accepted no tree in this run"))
            continue
        tree = accepted_root(ledger.absolute()) / name / f"{rec['activation']}-{rec['attempt']}"
        if not tree.is_dir() or tree_digest(tree) != rec.get("accepted_tree"):
            skipped.append(Skipped(name, f"{tree}: not the tree the verdict recorded (missing "
                                         f"or changed since)"))
            continue
        files = tuple(f for f in workspace_files(tree) if not f.startswith(f"{INPUTS}/"))
        if not files:
            skipped.append(Skipped(name, "the accepted tree has no file of its own"))
            continue
        loops.append(Loop(
            id=name, description=f"the gate of node {name!r} of {graph.name}, against the tree it "
                                 f"accepted (activation {rec['activation']}, attempt "
                                 f"{rec['attempt']})",
            root=spec.dir, workspace=tree, gate_dir=spec.dir,
            gate=Command(tuple(gate.argv), cfg.gate_timeout_s, literal=True),
            artifact_files=files, oracle=None, gate_code=_inline_code(gate.argv),
            gate_files=tuple(Path(a) for a in gate.argv[1:] if Path(a).suffix == ".py"
                             and Path(a).is_file())))
    return loops, skipped


def _inline_code(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The program text of `python -c CODE` (and `sh -c CODE`) in a gate's argv."""
    return tuple(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-c")


def describe(skipped: list[Skipped]) -> list[dict[str, str]]:
    return [{"node": s.node, "why": s.why} for s in skipped]
