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

from loopproof.engine.audit.catalogue import Command, Loop, workspace_files
from loopproof.engine.audit.exploits.run import Target
from loopproof.engine.record.replay import replay
from loopproof.engine.record.timeline import read_records
from loopproof.engine.run.attempt import judge_within
from loopproof.engine.run.confine import RunSandbox
from loopproof.engine.run.gate import CommandGate
from loopproof.engine.run.handoff import INPUTS, accepted_root
from loopproof.engine.run.runner import default_stop_file
from loopproof.engine.run.spec import NodeConfig, Spec, load
from loopproof.engine.run.values import MAX_SPEC_BYTES
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.sandbox import Confinement, Sandbox
from loopproof.engine.system.trees import file_digest, tree_digest


@dataclass(frozen=True)
class Skipped:
    node: str
    why: str


@dataclass(frozen=True)
class Reference:
    """A node whose gate accepted a tree in the run: the node, its config, that tree."""

    node: str
    cfg: NodeConfig
    tree: Path
    where: str  # "activation A, attempt N"


def accepted_references(graph: Path, ledger: Path, max_spec_bytes: int = MAX_SPEC_BYTES
                        ) -> tuple[Spec, list[Reference], list[Skipped]]:
    """Every command node of `graph` whose gate accepted a tree in the run of `ledger`, whatever
    its gate's kind, with that tree (hashed again: it must be the verdict's `accepted_tree`)."""
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
    r = replay(records, ledger)
    refs: list[Reference] = []
    skipped: list[Skipped] = []
    pins = first.get("pins", {})
    for name, cfg in spec.nodes.items():
        if cfg.kind != "command":  # a revision node's gate admits proposals, not trees
            skipped.append(Skipped(name, f"kind {cfg.kind!r}: only command nodes are audited"))
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
        if not any(not f.startswith(f"{INPUTS}/") for f in workspace_files(tree)):
            skipped.append(Skipped(name, "the accepted tree has no file of its own"))
            continue
        refs.append(Reference(name, cfg, tree,
                              f"activation {rec['activation']}, attempt {rec['attempt']}"))
    return spec, refs, skipped


def graph_loops(graph: Path, ledger: Path,
                max_spec_bytes: int = MAX_SPEC_BYTES) -> tuple[list[Loop], list[Skipped]]:
    """The audit loops of `graph`'s command nodes that accepted a tree in the run of `ledger`."""
    spec, refs, skipped = accepted_references(graph, ledger, max_spec_bytes)
    return mutant_loops(spec, refs, skipped)


def mutant_loops(spec: Spec, refs: list[Reference], skipped: list[Skipped]
                 ) -> tuple[list[Loop], list[Skipped]]:
    """The references whose gate is a command: mutants are run by argv (engine/audit/judge.py)."""
    loops: list[Loop] = []
    skipped = list(skipped)
    for ref in refs:
        cfg, gate = ref.cfg, ref.cfg.gate
        if not isinstance(gate, CommandGate):
            skipped.append(Skipped(ref.node, f"its gate is a {type(gate).__name__}, not a "
                                             f"command: exploit probes only, no mutants"))
            continue
        files = tuple(f for f in workspace_files(ref.tree) if not f.startswith(f"{INPUTS}/"))
        loops.append(Loop(
            id=ref.node, description=f"the gate of node {ref.node!r} of {spec.path.name}, "
                                     f"against the tree it accepted ({ref.where})",
            root=spec.dir, workspace=ref.tree, gate_dir=spec.dir,
            gate=Command(tuple(gate.argv), cfg.gate_timeout_s, literal=True),
            artifact_files=files, oracle=None, gate_code=_inline_code(gate.argv),
            gate_files=tuple(Path(a) for a in gate.argv[1:] if Path(a).suffix == ".py"
                             and Path(a).is_file())))
    return loops, skipped


def exploit_targets(spec: Spec, refs: list[Reference], ledger: Path, backend: Sandbox
                    ) -> list[Target]:
    """Each reference's gate as the run judges with it: the node's own gate object (whatever
    its kind), in the node's gate sandbox, within its gate time limit."""
    ledger = ledger.absolute()
    box = RunSandbox(spec, backend, ledger=ledger, stop_file=default_stop_file(ledger))
    targets = []
    for ref in refs:
        confine = box.node(ref.node, ref.tree).gate

        def judge(tree: Path, cfg: NodeConfig = ref.cfg, confine: Confinement = confine
                  ) -> tuple[str, str]:
            result = judge_within(cfg.gate, tree, cfg.gate_timeout_s, confine)
            return result.verdict, result.detail

        targets.append(Target(ref.node, {f: (ref.tree / f).read_bytes()
                                         for f in workspace_files(ref.tree)}, judge))
    return targets


def _inline_code(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The program text of `python -c CODE` (and `sh -c CODE`) in a gate's argv."""
    return tuple(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-c")


def describe(skipped: list[Skipped]) -> list[dict[str, str]]:
    return [{"node": s.node, "why": s.why} for s in skipped]
