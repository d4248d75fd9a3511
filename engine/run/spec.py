"""Load a graph spec (graph.toml) into a validated model graph plus one worker and one gate per node.

Why here: every bad spec must be refused before anything is written, with one line naming the
file, the node, the field and the fix. Structural rules (cycles, unknown nodes, repair targets,
attempts, budgets) are the model's (`model.graph` validation); this module checks only the TOML
shape and types, then turns `GraphError` into `BadInput` with the file name.

Every number has a range (a huge integer or a `1.7e308` ceiling would otherwise overflow the
bounds or the ledger's 64-bit integers), every string is free of NUL bytes, and a node name is
one safe path component (`engine.run.values.NAME_RULE`): names become folder names under the run's folders.

A node's `kind` (default "command") picks a factory from `KINDS`; another module adds a kind
with `register_kind` without editing this file (both in engine/run/kinds.py, with `NodeTable`,
the table a factory reads). What each field may hold is declared once in
engine/run/spec_checks.py (engine/system/fields.py's `Table`s); this module decides which tables
are read, in what order (the order a bad spec's first error is found), and builds the `Spec`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.run.gate import Gate
from loopproof.engine.run.kinds import (
    COMMAND_FIELDS,
    KINDS,
    Factory,
    Kind,
    NodeTable,
    register_kind,
    resolve_arg,
)
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.spec_checks import (
    DEFAULT_RESOURCES,
    GATE_ERRORS,
    GRAPH,
    LIMIT_FIELDS,
    NODE,
    PLANNER,
    TOP,
    eval_reserve_within,
    is_price,
    listed_paths,
    llm_table,
    optional_path,
    resource_limits,
    worker_env,
)
from loopproof.engine.run.values import (
    MAX_SPEC_BYTES,
    NAME_FIX,
    SIZE_FLAG,
    check_table,
    name_problem,
)
from loopproof.engine.run.worker import Worker
from loopproof.engine.system import collector, toml_reader
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.fields import Table, bad_input, short
from loopproof.engine.system.judged import Limits
from loopproof.engine.system.limits import ResourceLimits
from loopproof.engine.system.sandbox import DEFAULT
from loopproof.model import GraphError, LoopGraph, NodeSpec
from loopproof.model.bounds import attempt_bound, spend_bound

# Names that live in engine.run.kinds and engine.run.spec_checks, importable from here as before.
__all__ = [
    "COMMAND_FIELDS", "DEFAULT_RESOURCES", "GATE_ERRORS", "GRAPH", "KINDS", "NODE", "PLANNER",
    "BadInput", "Factory", "Kind", "NodeConfig", "NodeTable", "PlannerConfig", "Spec", "is_price",
    "load", "register_kind", "resolve_arg",
]


# ---- the loaded spec ---------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeConfig:
    """The engine-side settings of one node (the model's part is in `Spec.graph`)."""

    name: str
    kind: str
    timeout_s: float
    gate_timeout_s: float
    gate_files: tuple[Path, ...]
    worker: Worker = field(compare=False)
    gate: Gate = field(compare=False)
    eval_reserve: float = 0.0  # spend units of c_v held back for the gate run
    llm: LlmConfig | None = None  # model access through the attempt's proxy (docs/proxy.md)
    network: bool = False  # the worker shares the host's network
    writable: tuple[Path, ...] = ()  # paths the worker may write besides its workspace
    limits: Limits = Limits()  # what the judged workspace may hold (engine/system/judged.py)
    gate_errors: str = "retry"  # "retry" | "stop": what a gate error does (GATE_ERRORS)
    # what its commands may use while they run (engine/system/limits/)
    resources: ResourceLimits = ResourceLimits()
    env: tuple[tuple[str, str], ...] = ()  # the command worker's own variables (never the gate's)

    def pinned_files(self) -> tuple[Path, ...]:
        """Files whose content the gate's verdict depends on: its argv files and gate_files."""
        files = {Path(p) for p in self.gate.pinned_files()} | set(self.gate_files)
        return tuple(sorted(files))


@dataclass(frozen=True)
class PlannerConfig:
    """The optional `[planner]` table: a command that names catalogue entries between rounds
    (engine/policy/evolution.py; wired in engine/run/planner.py)."""

    argv: tuple[str, ...]
    timeout_s: float = 30.0


@dataclass(frozen=True)
class Spec:
    """A validated graph spec: the model graph and, per node, its worker, gate and limits."""

    path: Path
    dir: Path
    table: dict[str, Any]
    sha256: str
    graph: LoopGraph
    nodes: dict[str, NodeConfig]
    strict_bound: bool = False
    policy: Path | None = None
    stop_file: Path | None = None
    price: float = 1.0  # spend units per wall-clock second (the run's price at start)
    planner: PlannerConfig | None = None  # the optional [planner] table
    sandbox: str = DEFAULT  # the sandbox backend every command runs in (engine/system/sandbox)
    programs: dict[str, str] = field(default_factory=dict)  # argv[0] as written -> absolute

    def record(self) -> dict[str, Any]:
        """What the first ledger record keeps so that `resume` can rebuild this spec (the
        programs as resolved at start, so resume runs the same files, or stops if they
        changed)."""
        return {"path": str(self.path), "dir": str(self.dir), "sha256": self.sha256,
                "table": self.table, "programs": dict(sorted(self.programs.items()))}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], ledger_name: str = "ledger") -> Spec:
        """Rebuild the spec stored in a ledger's first record (the spec file may have moved)."""
        try:
            path, spec_dir, table, digest = (Path(rec["path"]), Path(rec["dir"]), rec["table"],
                                             rec["sha256"])
        except (KeyError, TypeError) as exc:
            raise BadInput(ledger_name, "records[0].spec", f"missing {exc}",
                           "start the run with `loopproof run`") from exc
        programs = rec.get("programs", {})
        if not isinstance(programs, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and os.path.isabs(v)
                for k, v in programs.items()):
            raise BadInput(ledger_name, "records[0].spec.programs", "is not a map of program "
                           "names to absolute paths", "restore the ledger from a trusted copy")
        with collector.paused():
            return _build(path, spec_dir, table, digest, dict(programs))

    def bounds(self) -> dict[str, Any]:
        """W and W_c (model.bounds.GLOSS), the budget B, and whether W_c fits B."""
        w_c = spend_bound(self.graph)
        return {"W": attempt_bound(self.graph), "W_c": w_c, "B": self.graph.spend_budget,
                "fits": w_c <= self.graph.spend_budget + 1e-9}


def load(path: str | Path, max_bytes: int = MAX_SPEC_BYTES) -> Spec:
    """Read and validate graph.toml; `BadInput` (exit 2) on any problem, before any write.
    A file over `max_bytes` is refused unread past the limit: a hand-written graph is a few
    lines, so a larger one is almost surely the wrong file; a generated graph of many thousand
    nodes asks for more with `--max-spec-bytes` (`values.add_size_argument`).
    (The cyclic GC is paused meanwhile: a large spec is millions of new objects, no cycles.)"""
    with collector.paused():
        return _load(Path(path), max_bytes)


def _load(path: Path, max_bytes: int) -> Spec:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or /dev/zero would never end
            raise BadInput(str(path), "(file)", "is not a regular file",
                           "give the path of a graph.toml file")
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
        resolved = path.resolve()
    except (OSError, ValueError) as exc:
        raise BadInput(str(path), "(file)", f"cannot read the spec: "
                       f"{getattr(exc, 'strerror', None) or exc}",
                       "give the path of an existing graph.toml") from None
    if len(raw) > max_bytes:
        raise BadInput(str(path), "(file)", f"is larger than the limit of {max_bytes} bytes",
                       f"a graph.toml is a few lines, so give the right file; a generated graph "
                       f"this large needs {SIZE_FLAG} N on the command line")
    try:
        table = toml_reader.loads(raw.decode("utf-8"))
    except (toml_reader.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(str(path), "(toml)", f"malformed TOML: {exc}",
                       "fix the syntax at the position given") from None
    except RecursionError:
        raise BadInput(str(path), "(toml)", "values are nested too deeply",
                       "flatten the nested arrays or tables") from None
    return _build(resolved, resolved.parent, table, hashlib.sha256(raw).hexdigest())


def _build(path: Path, spec_dir: Path, table: Any, digest: str,
           programs: dict[str, str] | None = None) -> Spec:
    """Phases: the file's tables, [graph], each node's spec and config, the model graph, the
    [planner]; each raises BadInput at the first bad field, in that order."""
    name, programs = str(path), {} if programs is None else programs
    args: dict[tuple[Any, Path], Any] = {}
    if not isinstance(table, dict):
        raise BadInput(name, "(toml)", "the spec is not a table",
                       "write [graph] and [node.NAME] tables")
    check_table(table, name)
    TOP.read(table, bad_input(name, "[{}]"))
    if not table["node"]:
        raise BadInput(name, "[node]", "the graph has no nodes",
                       "declare at least one [node.NAME] table")
    g = GRAPH.read(table["graph"], bad_input(name, "[graph] {}"))
    policy = optional_path(g, "policy", spec_dir, name, must_exist=True)
    stop_file = optional_path(g, "stop_file", spec_dir, name, must_exist=False)
    limits = Limits(*(g[key] for key in LIMIT_FIELDS))  # of a node without its own
    tables: dict[str, Table] = {}  # kind -> the table its nodes are read with
    specs: list[NodeSpec] = []
    configs: dict[str, NodeConfig] = {}
    for node_name, nt in table["node"].items():
        node_spec, configs[node_name] = _node(node_name, nt, path, spec_dir, programs, args,
                                              g, limits, tables)
        specs.append(node_spec)
    return Spec(path, spec_dir, table, digest, _graph(specs, g, name), configs,
                g["strict_bound"], policy, stop_file, float(g["price"]),
                _planner(table.get("planner"), spec_dir, name), g["sandbox"], programs)


def _node(node_name: Any, nt: Any, path: Path, spec_dir: Path, programs: dict[str, str],
          args: dict[tuple[Any, Path], Any], g: dict[str, Any], graph_limits: Limits,
          tables: dict[str, Table]) -> tuple[NodeSpec, NodeConfig]:
    """Phase 2: one [node.NAME] table, checked: its model spec and its engine config."""
    name = str(path)
    if (why := name_problem(node_name)) is not None:
        raise BadInput(name, f"node {short(node_name)}", why, NAME_FIX)
    if not isinstance(nt, dict):
        raise BadInput(name, f"node {node_name!r}", "must be a table", f"write [node.{node_name}]")
    fail = bad_input(name, f"node {node_name!r}, field {{!r}}")
    kind_name = nt.get("kind", "command")
    if type(kind_name) is not str or kind_name not in tables:  # read first: it picks the table
        NODE.check("kind", kind_name, fail)
        tables[kind_name] = NODE.plus(f'[node.NAME] of kind = "{kind_name}"',
                                      KINDS[kind_name].fields)
    kind = KINDS[kind_name]
    v = tables[kind_name].read(nt, fail, title=f"[node.{node_name}]")
    node = NodeTable(node_name, nt, path, programs, args, v)
    node_spec = NodeSpec(name=node_name, attempts=v["attempts"], spend_ceiling=v["spend_ceiling"],
                         needs=tuple(v["needs"]), repairs=tuple(v["repairs"]))
    gate_files = listed_paths(node, spec_dir, "gate_files") if v["gate_files"] else ()
    writable = listed_paths(node, spec_dir, "writable", folders=True) if v["writable"] else ()
    eval_reserve = float(v["eval_reserve"])
    eval_reserve_within(node, eval_reserve)
    limits = (Limits(*(v.get(key, g[key]) for key in LIMIT_FIELDS))
              if "max_files" in nt or "max_workspace_bytes" in nt else graph_limits)
    resources = resource_limits(v, g, limits.max_bytes)
    worker, gate = kind.factory(node, spec_dir)
    llm = llm_table(node, worker)
    return node_spec, NodeConfig(node_name, kind_name, float(v["timeout_s"]),
                                 float(v["gate_timeout_s"]), gate_files, worker, gate,
                                 eval_reserve, llm, v["network"], writable, limits,
                                 v["gate_errors"], resources, worker_env(node, worker, g))


def _graph(specs: list[NodeSpec], g: dict[str, Any], name: str) -> LoopGraph:
    """Phase 3: the model graph of the nodes; its error names the node and field."""
    try:
        return LoopGraph.build(specs, repair_budget=g["repair_budget"],
                               spend_budget=g["spend_budget"], max_parallel=g["max_parallel"])
    except GraphError as exc:
        where = (f"node {exc.node!r}, field {exc.field!r}" if exc.node is not None
                 else f"[graph] {exc.field}")
        text = str(exc)
        problem = text.split(": ", 1)[1].rsplit("; fix: ", 1)[0] if ": " in text else text
        raise BadInput(name, where, problem, exc.fix) from exc


def _planner(t: Any, spec_dir: Path, name: str) -> PlannerConfig | None:
    if t is None:
        return None
    v = PLANNER.read(t, bad_input(name, "[planner] {}"))
    return PlannerConfig(tuple(resolve_arg(a, spec_dir) for a in v["command"]),
                         float(v["timeout_s"]))
