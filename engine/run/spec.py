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
the table a factory reads). What one field may hold is checked in engine/run/spec_checks.py;
this module decides which tables are read, in what order, and builds the `Spec`.

Why one module: over 400 lines since `_build` is its named phases (`_graph_settings`, `_node`,
`_graph`, `_planner`): the order they run in is the order a bad spec's first error is found,
which the tests of careless input pin, so the phases and the `Spec` they make are read together.
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
    DEFAULT_TIMEOUT_S,
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
    LIMIT_FIELDS,
    RESOURCE_FIELDS,
    eval_reserve_of,
    graph_ranges,
    is_price,
    listed_paths,
    llm_table,
    node_names,
    node_ranges,
    optional_path,
    required,
    resource_limits,
    tree_limit,
    unknown_keys,
    worker_env,
)
from loopproof.engine.run.values import (
    MAX_PRICE,
    MAX_SPEC_BYTES,
    MIN_PRICE,
    NAME_FIX,
    SIZE_FLAG,
    check_table,
    name_problem,
    short,
)
from loopproof.engine.run.worker import Worker
from loopproof.engine.system import collector, toml_reader
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.judged import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES, Limits
from loopproof.engine.system.limits import ResourceLimits, size_text
from loopproof.engine.system.sandbox import BACKENDS, DEFAULT
from loopproof.model import GraphError, LoopGraph, NodeSpec
from loopproof.model.bounds import attempt_bound, spend_bound

# Names that live in engine.run.kinds and engine.run.spec_checks, importable from here as before.
__all__ = [
    "COMMAND_FIELDS", "GATE_ERRORS", "GRAPH_FIELDS", "KINDS", "LIMIT_FIELDS",
    "NODE_FIELDS", "BadInput", "Factory", "Kind", "NodeConfig", "NodeTable", "PlannerConfig",
    "DEFAULT_RESOURCES", "Spec", "is_price", "load", "register_kind", "resolve_arg",
]

# ---- the fields --------------------------------------------------------------------------------


GRAPH_FIELDS: dict[str, str] = {
    "repair_budget": "K: global repair budget, an integer >= 0, never reset (default 0)",
    "spend_budget": "B: run-wide spend budget in spend units, a number >= 0 (required)",
    "strict_bound": "true: refuse to start when the pre-run spend bound W_c exceeds B (default false)",
    "max_parallel": "attempts in flight at once, an integer >= 1 (default 1); `run --jobs N` wins",
    "policy": "optional path to a policy TOML, hash-pinned at start and re-checked before every stage",
    "stop_file": "optional kill-switch path; default <ledger>.stop",
    "price": "spend units per wall-clock second of command workers and gates, a number > 0 "
             "(default 1.0); `loopproof resume --price P` changes it",
    "sandbox": "\"bwrap\" (default): every worker and gate command runs in a bubblewrap sandbox; "
               "\"none\": no sandbox (recorded and warned; see docs/threat-model.md)",
    "max_files": f"every node's default for max_files (default {DEFAULT_MAX_FILES})",
    "max_workspace_bytes": f"every node's default for max_workspace_bytes (default "
                           f"{DEFAULT_MAX_BYTES})",
    "max_memory_bytes": f"every node's default for max_memory_bytes (default "
                        f"{size_text(DEFAULT_RESOURCES['max_memory_bytes'])})",
    "max_processes": f"every node's default for max_processes (default "
                     f"{DEFAULT_RESOURCES['max_processes']})",
    "max_tmp_bytes": f"every node's default for max_tmp_bytes (default "
                     f"{size_text(DEFAULT_RESOURCES['max_tmp_bytes'])})",
    "env": "every command worker's default variables (a node's own `env` wins per name)",
}
NODE_FIELDS: dict[str, str] = {
    "kind": "which adapter runs the node (default \"command\"); see engine.run.spec.KINDS",
    "attempts": "a_v: attempts per activation, an integer >= 1 (default 1)",
    "spend_ceiling": "c_v: spend ceiling per attempt, a number >= 0 (required)",
    "timeout_s": "wall-clock limit per worker run, seconds > 0 (default 60)",
    "gate_timeout_s": "wall-clock limit per gate run, seconds > 0 (default 60)",
    "eval_reserve": "spend units of c_v held back for the gate run, 0 <= eval_reserve <= "
                    "spend_ceiling (default 0)",
    "needs": "predecessor node names (default [])",
    "repairs": "repair targets: the node itself or its ancestors; the first listed is used (default [])",
    "gate_files": "extra files the gate depends on, hashed at start, re-checked before each gate run",
    "gate_errors": "what a gate error (the gate did not judge: it crashed, timed out, exited 2 or "
                   "more or by a signal, changed its snapshot) does: \"retry\" (default: it "
                   "fails the attempt like a reject; the node tries again) or \"stop\" (the run "
                   "stops after recording it, exit 6; fix what broke the gate, then resume)",
    "llm": "a table: the model calls a command worker may make through the attempt's metered "
           "proxy, in the OpenAI chat, OpenAI Responses or Anthropic Messages API (upstream, "
           "api_key_env, price_prompt_per_1k, price_completion_per_1k, price_cache_read_per_1k, "
           "price_cache_write_per_1k, max_tokens, timeout_s; docs/proxy.md)",
    "network": "true: the node's worker shares the host's network (default false: none; see "
               "docs/threat-model.md for what it opens)",
    "writable": "existing files or folders (relative to the spec) the worker may write besides "
                "its workspace, e.g. a cache or a counter: outside every judged tree, and not "
                "confined (see docs/threat-model.md); default []",
    "env": "the command worker's own variables (never its gate's), names to strings; no PATH, "
           "HOME, TMPDIR, OPENAI_*, ANTHROPIC_BASE_URL, LOOPPROOF_*, LD_* or secret-looking name "
           "(docs/proxy.md)",
    "max_files": "entries (files and folders) the workspace may hold when it is judged; more is "
                 "an error verdict, checked before anything is copied",
    "max_workspace_bytes": "bytes the workspace's files may add up to while the worker runs "
                           "(more: it is killed, at the workspace limit) and when it is judged "
                           "(sparse files at their full size; more is an error verdict, checked "
                           "before anything is copied)",
    "max_memory_bytes": "memory of all the processes of one worker or gate command together, "
                        "its private temp folders included (more: killed, at the memory limit)",
    "max_processes": "processes and threads of one command alive at once (a fork past it is "
                     "refused and the command is killed, at the process limit)",
    "max_tmp_bytes": "size of each private temp folder (/tmp, /var/tmp, /dev/shm, ...) of a "
                     "sandboxed command (full: killed, at the tmp limit)",
}
GATE_ERRORS = ("retry", "stop")


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


@dataclass(frozen=True)
class _GraphSettings:
    """Phase 1 of `_build`: the [graph] table, checked, and what every node takes from it."""

    g: dict[str, Any]
    strict: bool
    policy: Path | None
    stop_file: Path | None
    price: float
    sandbox: str
    defaults: dict[str, int]  # the tree limits a node without its own has
    limits: Limits
    resources: dict[str, int]


def _build(path: Path, spec_dir: Path, table: Any, digest: str,
           programs: dict[str, str] | None = None) -> Spec:
    """Phases: the [graph] settings, each node's spec and config, the model graph, the
    [planner]; each raises BadInput at the first bad field, in that order."""
    name, programs = str(path), {} if programs is None else programs
    args: dict[tuple[Any, Path], Any] = {}
    if not isinstance(table, dict):
        raise BadInput(name, "(toml)", "the spec is not a table",
                       "write [graph] and [node.NAME] tables")
    check_table(table, name)
    unknown_keys(table, {"graph", "node", "planner"}, "top-level table", name, "")
    settings = _graph_settings(table.get("graph"), path, spec_dir)
    allowed: dict[str, frozenset[str]] = {}  # kind -> its node fields (checked for every node)
    nodes_t = table.get("node")
    if not isinstance(nodes_t, dict) or not nodes_t:
        raise BadInput(name, "[node]", "the graph has no nodes",
                       "declare at least one [node.NAME] table")
    specs: list[NodeSpec] = []
    configs: dict[str, NodeConfig] = {}
    for node_name, nt in nodes_t.items():
        node_spec, configs[node_name] = _node(node_name, nt, path, spec_dir, programs, args,
                                              settings, allowed)
        specs.append(node_spec)
    graph = _graph(specs, settings.g, name)
    return Spec(path, spec_dir, table, digest, graph, configs, settings.strict, settings.policy,
                settings.stop_file, float(settings.price),
                _planner(table.get("planner"), spec_dir, name), settings.sandbox, programs)


def _graph_settings(g: Any, path: Path, spec_dir: Path) -> _GraphSettings:
    name = str(path)
    if not isinstance(g, dict):
        raise BadInput(name, "[graph]", "the [graph] table is missing",
                       "add [graph] with spend_budget = B")
    unknown_keys(g, set(GRAPH_FIELDS), "[graph] field", name, "")
    if "spend_budget" not in g:
        raise BadInput(name, "[graph] spend_budget", "is missing",
                       "add spend_budget = B (spend units)")
    strict = g.get("strict_bound", False)
    if not isinstance(strict, bool):
        raise BadInput(name, "[graph] strict_bound", f"must be true or false, got {strict!r}",
                       "write strict_bound = true or false")
    policy = optional_path(g, "policy", spec_dir, name, must_exist=True)
    stop_file = optional_path(g, "stop_file", spec_dir, name, must_exist=False)
    price = g.get("price", 1.0)
    if not is_price(price):
        raise BadInput(name, "[graph] price", f"must be a number of spend units per second > 0 "
                       f"(from {MIN_PRICE:g} to {MAX_PRICE:g}), got {short(price)}",
                       "set price = 1.0 (or leave it out)")
    graph_ranges(g, name)
    sandbox = g.get("sandbox", DEFAULT)
    if not isinstance(sandbox, str) or sandbox not in BACKENDS:
        raise BadInput(name, "[graph] sandbox", f"must be one of {sorted(BACKENDS)}, got "
                       f"{short(sandbox)}", f'write sandbox = "{DEFAULT}" (or leave it out)')
    graph_table = NodeTable("", g, path)
    defaults = {key: tree_limit(graph_table, key, default) for key, default in
                (("max_files", DEFAULT_MAX_FILES), ("max_workspace_bytes", DEFAULT_MAX_BYTES))}
    resource_defaults = {key: tree_limit(graph_table, key, DEFAULT_RESOURCES[key])
                         for key in RESOURCE_FIELDS}
    return _GraphSettings(g, strict, policy, stop_file, price, sandbox, defaults,
                          Limits(*(defaults[key] for key in LIMIT_FIELDS)), resource_defaults)


def _node(node_name: Any, nt: Any, path: Path, spec_dir: Path, programs: dict[str, str],
          args: dict[tuple[Any, Path], Any], settings: _GraphSettings,
          allowed: dict[str, frozenset[str]]) -> tuple[NodeSpec, NodeConfig]:
    """Phase 2: one [node.NAME] table, checked: its model spec and its engine config."""
    name = str(path)
    if (why := name_problem(node_name)) is not None:
        raise BadInput(name, f"node {short(node_name)}", why, NAME_FIX)
    if not isinstance(nt, dict):
        raise BadInput(name, f"node {node_name!r}", "must be a table", f"write [node.{node_name}]")
    node = NodeTable(node_name, nt, path, programs, args)
    kind_name = nt.get("kind", "command")
    if not isinstance(kind_name, str) or kind_name not in KINDS:
        raise node.error("kind", f"unknown kind {kind_name!r}", f"use one of {sorted(KINDS)}"
                         + ("" if len(KINDS) > 1 else " (a program that loads specs itself "
                            "registers the shipped kinds first: engine.kinds.register_builtin())"))
    kind = KINDS[kind_name]
    fields = allowed.get(kind_name) or allowed.setdefault(
        kind_name, frozenset(NODE_FIELDS) | kind.fields)
    if not nt.keys() <= fields:
        unknown_keys(nt, set(fields), "field", name, node_name)
    node_ranges(node)
    names = node_names(node, "needs"), node_names(node, "repairs")
    node_spec = NodeSpec(name=node_name, attempts=nt.get("attempts", 1),
                         spend_ceiling=required(node, "spend_ceiling"),
                         needs=names[0], repairs=names[1])
    timeout_s = node.seconds("timeout_s", DEFAULT_TIMEOUT_S)
    gate_timeout_s = node.seconds("gate_timeout_s", DEFAULT_TIMEOUT_S)
    gate_files = listed_paths(node, spec_dir)
    writable = listed_paths(node, spec_dir, "writable", folders=True)
    eval_reserve = eval_reserve_of(node)
    network = nt.get("network", False)
    if not isinstance(network, bool):
        raise node.error("network", f"must be true or false, got {network!r}",
                         "write network = true (or leave it out: no network)")
    limits = (Limits(*(tree_limit(node, key, settings.defaults[key]) for key in LIMIT_FIELDS))
              if "max_files" in nt or "max_workspace_bytes" in nt else settings.limits)
    resources = resource_limits(node, settings.resources, limits)
    gate_errors = nt.get("gate_errors", "retry")
    if gate_errors not in GATE_ERRORS:
        raise node.error("gate_errors", f"must be one of {list(GATE_ERRORS)}, got "
                         f"{gate_errors!r}", 'write gate_errors = "stop" (or leave it out: '
                         '"retry")')
    worker, gate = kind.factory(node, spec_dir)
    llm = llm_table(node, worker)
    return node_spec, NodeConfig(node_name, kind_name, timeout_s, gate_timeout_s, gate_files,
                                 worker, gate, eval_reserve, llm, network, writable, limits,
                                 gate_errors, resources, worker_env(node, worker, settings.g,
                                                                    name))


def _graph(specs: list[NodeSpec], g: dict[str, Any], name: str) -> LoopGraph:
    """Phase 3: the model graph of the nodes; its error names the node and field."""
    try:
        return LoopGraph.build(specs, repair_budget=g.get("repair_budget", 0),
                               spend_budget=g["spend_budget"],
                               max_parallel=g.get("max_parallel", 1))
    except GraphError as exc:
        where = (f"node {exc.node!r}, field {exc.field!r}" if exc.node is not None
                 else f"[graph] {exc.field}")
        text = str(exc)
        problem = text.split(": ", 1)[1].rsplit("; fix: ", 1)[0] if ": " in text else text
        raise BadInput(name, where, problem, exc.fix) from exc


def _planner(t: Any, spec_dir: Path, name: str) -> PlannerConfig | None:
    if t is None:
        return None
    if not isinstance(t, dict):
        raise BadInput(name, "[planner]", "must be a table",
                       'write [planner] with command = ["program", ...]')
    unknown_keys(t, {"command", "timeout_s"}, "[planner] field", name, "")
    argv = t.get("command")
    if (not isinstance(argv, list) or not argv
            or not all(isinstance(a, str) and a for a in argv)):
        raise BadInput(name, "[planner] command", f"must be a non-empty list of strings, got "
                       f"{argv!r}", 'write command = ["python3", "plan.py"]')
    timeout = t.get("timeout_s", 30.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < 1e9:
        raise BadInput(name, "[planner] timeout_s", f"must be a number of seconds > 0, got "
                       f"{timeout!r}", "write timeout_s = 30")
    return PlannerConfig(tuple(resolve_arg(a, spec_dir) for a in argv), float(timeout))
