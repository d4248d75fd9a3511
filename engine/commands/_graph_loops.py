"""`loopproof audit GRAPH.toml --ledger L`: a graph's own gates as audit loops, each against the
tree it accepted in the run, so a harness builder audits the gates they run without rebuilding
them as a catalogue.

Why from the ledger and its accepted snapshots: the reference an audit mutates must be a tree the
gate is known to accept, and the run recorded exactly that (`accepted_tree` in the accepting
verdict, the copy in `<ledger>.accepted/`). The copy is hashed again and must match; the graph
file must be the one the run started from, and the gate's pinned files unchanged since, or the
audit would judge another gate than the one that ran. A node with no accepted tree (it never
passed), or of another kind than `command`, is skipped and says why.

Every gate is audited as the run judges with it (`NodeGate`): the node's own gate object,
whatever its kind (a command, `calls`, `program`, `pytest`), in the node's gate sandbox, within
its gate time limit; mutants, probes and the reference alike.

The loop's artifact is the files of the accepted tree outside `inputs/` (what the predecessors
handed on stays as it was in every mutant) that the gate's run on that tree opened
(engine/audit/loaded.py: a file it never reads cannot change its verdict, so a mutant there says
nothing about the gate), every such file when that cannot be known; there are no claim files.
With no oracle, mutants of Python files are judged by the differential oracle
(engine/audit/differential.py), its inputs drawn from what the gate holds: a command gate's
Python, a `calls` gate's case arguments, a `program` gate's case inputs, a `pytest` gate's
pinned tests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from loopproof.engine.audit.catalogue import Loop, workspace_files
from loopproof.engine.audit.exploits.run import Target
from loopproof.engine.audit.loaded import loaded_files
from loopproof.engine.audit.progress import Progress
from loopproof.engine.record.replay import replay
from loopproof.engine.record.timeline import read_records
from loopproof.engine.run.attempt import judge_within
from loopproof.engine.run.confine import RunSandbox
from loopproof.engine.run.gate import CommandGate, Gate, GateResult
from loopproof.engine.run.handoff import INPUTS, accepted_root
from loopproof.engine.run.judge.calls import CallsGate
from loopproof.engine.run.judge.program import ProgramGate
from loopproof.engine.run.judge.pytest_gate import PytestGate
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


@dataclass(frozen=True)
class NodeGate:
    """A node's own gate as the run judges with it: its gate object (whatever its kind) on a
    copy of the tree, in the node's gate sandbox, within the node's gate time limit (or less:
    `limit_s`, the audit's deadline). The audit's `GateCall`."""

    cfg: NodeConfig
    confine: Confinement

    def __call__(self, tree: Path, limit_s: float | None = None) -> tuple[str, str]:
        return self.verdict(tree, self.confine, limit_s)

    def verdict(self, tree: Path, confine: Confinement, limit_s: float | None = None
                ) -> tuple[str, str]:
        result = self.result(tree, confine, limit_s)
        return result.verdict, result.detail

    def result(self, tree: Path, confine: Confinement, limit_s: float | None = None
               ) -> GateResult:
        timeout = self.cfg.gate_timeout_s if limit_s is None else min(limit_s,
                                                                       self.cfg.gate_timeout_s)
        return judge_within(self.cfg.gate, tree, timeout, confine)


def node_gates(spec: Spec, refs: list[Reference], ledger: Path, backend: Sandbox
               ) -> dict[str, NodeGate]:
    """Each reference's gate, in the node's gate sandbox (engine/run/confine.py)."""
    ledger = ledger.absolute()
    box = RunSandbox(spec, backend, ledger=ledger, stop_file=default_stop_file(ledger))
    return {ref.node: NodeGate(_deciding_early(ref.cfg), box.node(ref.node, ref.tree).gate)
            for ref in refs}


def _deciding_early(cfg: NodeConfig) -> NodeConfig:
    """The node's config, its `pytest` gate stopping at the first test that does not pass: the
    audit asks accept or not of each mutant, a reject is decided there, and most mutants are
    rejected (a third of a 100-test suite's run, bench/audit.py). An accept runs every test."""
    if isinstance(cfg.gate, PytestGate):
        return replace(cfg, gate=replace(cfg.gate, stop_at_failure=True))
    return cfg


GATE_KINDS = {CommandGate: "command", CallsGate: "calls", ProgramGate: "program",
              PytestGate: "pytest"}


def kind_of_gate(gate: Gate) -> str:
    return next((k for cls, k in GATE_KINDS.items() if isinstance(gate, cls)),
                type(gate).__name__)


def gate_sources(gate: Gate) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """What the differential oracle reads for its inputs and the functions to compare: a
    command's Python files and `-c` code; a `calls` gate's cases as calls of its function (their
    arguments, never their expectations); a `program` gate's case inputs as calls of arity one
    (the program's entry takes one value); a `pytest` gate's pinned test files."""
    if isinstance(gate, CommandGate):
        return (tuple(Path(a) for a in gate.argv[1:] if Path(a).suffix == ".py"
                      and Path(a).is_file()), _inline_code(gate.argv))
    if isinstance(gate, CallsGate):
        calls = [f"{gate.function}({', '.join(map(repr, c.given[0]))})" for c in gate.cases
                 if not c.given[1]]
        return (), ("\n".join(calls),)
    if isinstance(gate, ProgramGate):
        return (), ("\n".join(f"case({c.given!r})" for c in gate.cases),)
    if isinstance(gate, PytestGate):
        return tuple(p for _, p in gate.laid if p.suffix == ".py"), ()
    return (), ()


def laid_names(gate: Gate) -> tuple[str, ...]:
    """The names a gate lays over the judged tree itself (a `pytest` gate's pinned tests): its
    own files, never the worker's, whatever the tree held there."""
    return tuple(name for name, _ in gate.laid) if isinstance(gate, PytestGate) else ()


def mutant_loops(spec: Spec, refs: list[Reference], gates: dict[str, NodeGate],
                 progress: Progress | None = None) -> list[Loop]:
    """One audit loop per reference, whatever its gate's kind, judged by its `NodeGate`; its
    artifact is what the gate's run on the reference loaded (engine/audit/loaded.py)."""
    loops: list[Loop] = []
    tick = progress("loaded files", len(refs)) if progress is not None else (lambda: None)
    for ref in refs:
        gate, node_gate = ref.cfg.gate, gates[ref.node]
        files = tuple(f for f in workspace_files(ref.tree) if not f.startswith(f"{INPUTS}/"))
        laid = laid_names(gate)
        loaded = loaded_files(_verdict_and_facts(node_gate), node_gate.confine, ref.tree, files,
                              laid)
        chosen = tuple(f for f in files if f in loaded.files) if loaded.files else tuple(
            f for f in files if f not in laid) or files
        gate_files, gate_code = gate_sources(gate)
        loops.append(Loop(
            id=ref.node, description=f"the gate of node {ref.node!r} of {spec.path.name}, "
                                     f"against the tree it accepted ({ref.where})",
            root=spec.dir, workspace=ref.tree, gate_dir=spec.dir, gate=node_gate,
            artifact_files=chosen, oracle=None, gate_code=gate_code, gate_files=gate_files,
            kind=kind_of_gate(gate), loaded={**loaded.as_json(), "mutated": len(chosen),
                                             "tree": len(files)}))
        tick()
    return loops


def _verdict_and_facts(gate: NodeGate):
    def judge(tree: Path, confine: Confinement) -> tuple[str, dict]:
        result = gate.result(tree, confine)
        return result.verdict, result.facts
    return judge


def exploit_targets(refs: list[Reference], gates: dict[str, NodeGate]) -> list[Target]:
    """Each reference's gate as the run judges with it (its `NodeGate`)."""
    return [Target(ref.node, {f: (ref.tree / f).read_bytes() for f in workspace_files(ref.tree)},
                   gates[ref.node]) for ref in refs]


def _inline_code(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The program text of `python -c CODE` (and `sh -c CODE`) in a gate's argv."""
    return tuple(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-c")


