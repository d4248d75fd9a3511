"""Load a graph spec (graph.toml) into a validated model graph plus one worker and one gate per node.

Why here: every bad spec must be refused before anything is written, with one line naming the
file, the node, the field and the fix. Structural rules (cycles, unknown nodes, repair targets,
attempts, budgets) are the model's (`model.graph` validation); this module checks only the TOML
shape and types, then turns `GraphError` into `BadInput` with the file name.

Every number has a range (a huge integer or a `1.7e308` ceiling would otherwise overflow the
bounds or the ledger's 64-bit integers), every string is free of NUL bytes, and a node name is
one safe path component (`engine.run.values.NAME_RULE`): names become folder names under the run's folders.

A node's `kind` (default "command") picks a factory from `KINDS`; another module adds a kind
with `register_kind` without editing this file. A factory is called as
`factory(node_table, spec_dir) -> (Worker, Gate)` and rejects its own bad fields with
`node_table.error(field, problem, fix)`.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import math
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.run.gate import CommandGate, Gate
from engine.run.proxy.config import LlmConfig
from engine.run.proxy.config import parse as parse_llm
from engine.run.values import (
    MAX_COUNT,
    MAX_PRICE,
    MAX_SECONDS,
    MAX_SPEC_BYTES,
    MAX_SPEND,
    MIN_PRICE,
    NAME_FIX,
    SIZE_FLAG,
    check_table,
    exists,
    file_or_none,
    name_problem,
    number_in,
    short,
)
from engine.run.worker import CommandWorker, Worker
from engine.system import collector, toml_reader
from engine.system import programs as programs_mod
from engine.system.errors import BadInput
from engine.system.judged import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES, Limits
from engine.system.sandbox import BACKENDS, DEFAULT
from model import GraphError, LoopGraph, NodeSpec
from model.bounds import attempt_bound, spend_bound

# ---- the fields --------------------------------------------------------------------------------

GRAPH_FIELDS: dict[str, str] = {
    "repair_budget": "K: global repair budget, an integer >= 0, never reset (default 0)",
    "spend_budget": "B: run-wide spend budget in spend units, a number >= 0 (required)",
    "strict_bound": "true: refuse to start when the pre-run spend bound W_c exceeds B (default false)",
    "policy": "optional path to a policy TOML, hash-pinned at start and re-checked before every stage",
    "stop_file": "optional kill-switch path; default <ledger>.stop",
    "price": "spend units per wall-clock second of command workers and gates, a number > 0 "
             "(default 1.0); `loopproof resume --price P` changes it",
    "sandbox": "\"bwrap\" (default): every worker and gate command runs in a bubblewrap sandbox; "
               "\"none\": no sandbox (recorded and warned; see docs/threat-model.md)",
    "max_files": f"every node's default for max_files (default {DEFAULT_MAX_FILES})",
    "max_workspace_bytes": f"every node's default for max_workspace_bytes (default "
                           f"{DEFAULT_MAX_BYTES})",
}
LIMIT_FIELDS: dict[str, tuple[int, int]] = {  # field -> (lowest, highest)
    "max_files": (1, 10_000_000),
    "max_workspace_bytes": (0, 1 << 40),
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
           "proxy (upstream, api_key_env, price_prompt_per_1k, price_completion_per_1k, "
           "max_tokens, timeout_s; docs/proxy.md)",
    "network": "true: the node's worker shares the host's network (default false: none; see "
               "docs/threat-model.md for what it opens)",
    "writable": "existing files or folders (relative to the spec) the worker may write besides "
                "its workspace, e.g. a cache or a counter: outside every judged tree, and not "
                "confined (see docs/threat-model.md); default []",
    "max_files": "entries (files and folders) the workspace may hold when it is judged; more is "
                 "an error verdict, checked before anything is copied",
    "max_workspace_bytes": "bytes the workspace's files may add up to when it is judged (sparse "
                           "files at their full size); more is an error verdict, checked before "
                           "anything is copied",
}
COMMAND_FIELDS: dict[str, str] = {
    "worker": "argv list; runs with the node's workspace as working directory",
    "gate": "argv list; runs with a read-only snapshot copy of the workspace as working directory",
}
DEFAULT_TIMEOUT_S = 60.0
GATE_ERRORS = ("retry", "stop")


Factory = Callable[["NodeTable", Path], tuple[Worker, Gate]]


@dataclass(frozen=True)
class Kind:
    """A node kind: its factory and the extra fields it reads (for unknown-field errors)."""

    factory: Factory
    fields: frozenset[str]


KINDS: dict[str, Kind] = {}
# Kinds defined in other engine modules, imported the first time a spec names them.
KIND_MODULES: dict[str, str] = {"revision": "engine.admission.revision"}


def register_kind(name: str, factory: Factory, fields: Sequence[str] = ()) -> None:
    """Make `kind = name` available in graph.toml. `fields` are the kind's own node fields."""
    KINDS[name] = Kind(factory, frozenset(fields))


class NodeTable(dict):
    """One `[node.NAME]` table, with the node's name and file for error messages."""

    def __init__(self, name: str, table: Mapping[str, Any], spec_path: Path,
                 programs: dict[str, str] | None = None,
                 args: dict[tuple[str, Path], str] | None = None) -> None:
        super().__init__(table)
        self.name = name
        self.spec_path = spec_path
        # program as written -> the absolute file it was resolved to at run start (shared by the
        # spec's nodes; given from the ledger's first record on resume, never looked up again)
        self.programs = programs if programs is not None else {}
        # (argv item, spec folder) -> resolve_arg's answer, shared by one load's nodes: a
        # 100,000-node graph names the same few items 200,000 times, one stat each otherwise
        self.args = args if args is not None else {}

    def error(self, field_name: str, problem: str, fix: str) -> BadInput:
        return BadInput(str(self.spec_path), f"node {self.name!r}, field {field_name!r}",
                        problem, fix)

    def seconds(self, key: str, default: float = DEFAULT_TIMEOUT_S) -> float:
        """A wall-clock limit: a finite number of seconds > 0."""
        v = self.get(key, default)
        if not number_in(v, 0.0, MAX_SECONDS) or v <= 0:
            raise self.error(key, f"must be a number of seconds > 0 and at most "
                             f"{MAX_SECONDS:g}, got {short(v)}", f"set {key} = 20")
        return float(v)

    def argv(self, field_name: str, spec_dir: Path, *, required: bool = True) -> tuple[str, ...]:
        """A non-empty list of strings, with items that name a file under the spec's folder
        made absolute, and a first item resolved to one absolute file (engine/system/programs.py:
        on the engine's PATH without relative entries, through Python shims)."""
        if field_name not in self:
            if not required:
                return ()
            raise self.error(field_name, "is missing",
                             f'add {field_name} = ["program", "arg", ...] to [node.{self.name}]')
        raw = self[field_name]
        if not isinstance(raw, list) or not raw or not all(isinstance(a, str) and a for a in raw):
            raise self.error(field_name, f"must be a non-empty list of non-empty strings, got {raw!r}",
                             f'write {field_name} = ["program", "arg", ...]')
        args = self.args
        argv = tuple(args[(a, spec_dir)] if (a, spec_dir) in args
                     else args.setdefault((a, spec_dir), resolve_arg(a, spec_dir)) for a in raw)
        prog = argv[0]
        if prog not in self.programs:
            try:
                self.programs[prog] = programs_mod.resolve(prog, spec_dir)
            except programs_mod.ProgramNotFound:
                raise self.error(field_name, f"program {raw[0]!r} is not on PATH or under "
                                 f"{spec_dir}", "give an installed program or a path relative "
                                 "to the spec's folder") from None
        return (self.programs[prog], *argv[1:])


def resolve_arg(arg: str, spec_dir: Path) -> str:
    """An argv item that names an existing file or folder relative to the spec's folder becomes
    its absolute path; anything else (a program on PATH, a flag, a literal) is kept as written."""
    if Path(arg).is_absolute():
        return arg
    candidate = spec_dir / arg
    # absolute, symlinks kept: a venv's bin/python is a link, and following it would run the
    # base interpreter without the venv's packages
    return os.path.normpath(candidate.absolute()) if exists(candidate) else arg


def _command_factory(node: NodeTable, spec_dir: Path) -> tuple[Worker, Gate]:
    worker = CommandWorker(node.argv("worker", spec_dir), node.seconds("timeout_s"))
    gate = CommandGate(node.argv("gate", spec_dir), node.seconds("gate_timeout_s"))
    return worker, gate


register_kind("command", _command_factory, COMMAND_FIELDS)


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
    name = str(path)
    programs = {} if programs is None else programs
    args: dict[tuple[str, Path], str] = {}

    def bad(where: str, problem: str, fix: str) -> BadInput:
        return BadInput(name, where, problem, fix)

    if not isinstance(table, dict):
        raise bad("(toml)", "the spec is not a table", "write [graph] and [node.NAME] tables")
    check_table(table, name)
    _unknown(table, {"graph", "node", "planner"}, "top-level table", name, "")
    g = table.get("graph")
    if not isinstance(g, dict):
        raise bad("[graph]", "the [graph] table is missing", "add [graph] with spend_budget = B")
    _unknown(g, set(GRAPH_FIELDS), "[graph] field", name, "")
    if "spend_budget" not in g:
        raise bad("[graph] spend_budget", "is missing", "add spend_budget = B (spend units)")
    strict = g.get("strict_bound", False)
    if not isinstance(strict, bool):
        raise bad("[graph] strict_bound", f"must be true or false, got {strict!r}",
                  "write strict_bound = true or false")
    policy = _opt_path(g, "policy", spec_dir, name, must_exist=True)
    stop_file = _opt_path(g, "stop_file", spec_dir, name, must_exist=False)
    price = g.get("price", 1.0)
    if not is_price(price):
        raise bad("[graph] price", f"must be a number of spend units per second > 0 "
                  f"(from {MIN_PRICE:g} to {MAX_PRICE:g}), got {short(price)}",
                  "set price = 1.0 (or leave it out)")
    _ranges(g, name)
    sandbox = g.get("sandbox", DEFAULT)
    if not isinstance(sandbox, str) or sandbox not in BACKENDS:
        raise bad("[graph] sandbox", f"must be one of {sorted(BACKENDS)}, got {short(sandbox)}",
                  f'write sandbox = "{DEFAULT}" (or leave it out)')
    graph_table = NodeTable("", g, path)
    defaults = {key: _limit(graph_table, key, default) for key, default in
                (("max_files", DEFAULT_MAX_FILES), ("max_workspace_bytes", DEFAULT_MAX_BYTES))}

    nodes_t = table.get("node")
    if not isinstance(nodes_t, dict) or not nodes_t:
        raise bad("[node]", "the graph has no nodes", "declare at least one [node.NAME] table")
    specs: list[NodeSpec] = []
    configs: dict[str, NodeConfig] = {}
    for node_name, nt in nodes_t.items():
        if (why := name_problem(node_name)) is not None:
            raise bad(f"node {short(node_name)}", why, NAME_FIX)
        if not isinstance(nt, dict):
            raise bad(f"node {node_name!r}", "must be a table", f"write [node.{node_name}]")
        node = NodeTable(node_name, nt, path, programs, args)
        kind_name = nt.get("kind", "command")
        if isinstance(kind_name, str) and kind_name in KIND_MODULES and kind_name not in KINDS:
            importlib.import_module(KIND_MODULES[kind_name])  # registers itself on import
        if not isinstance(kind_name, str) or kind_name not in KINDS:
            raise node.error("kind", f"unknown kind {kind_name!r}",
                             f"use one of {sorted(set(KINDS) | set(KIND_MODULES))}")
        kind = KINDS[kind_name]
        _unknown(nt, set(NODE_FIELDS) | kind.fields, "field", name, node_name)
        _node_ranges(node)
        names = _names(node, "needs"), _names(node, "repairs")
        specs.append(NodeSpec(name=node_name, attempts=nt.get("attempts", 1),
                              spend_ceiling=_required(node, "spend_ceiling"),
                              needs=names[0], repairs=names[1]))
        timeout_s = node.seconds("timeout_s", DEFAULT_TIMEOUT_S)
        gate_timeout_s = node.seconds("gate_timeout_s", DEFAULT_TIMEOUT_S)
        gate_files = _files(node, spec_dir)
        writable = _files(node, spec_dir, "writable", folders=True)
        eval_reserve = _eval_reserve(node)
        network = nt.get("network", False)
        if not isinstance(network, bool):
            raise node.error("network", f"must be true or false, got {network!r}",
                             "write network = true (or leave it out: no network)")
        limits = Limits(*(_limit(node, key, defaults[key]) for key in LIMIT_FIELDS))
        gate_errors = nt.get("gate_errors", "retry")
        if gate_errors not in GATE_ERRORS:
            raise node.error("gate_errors", f"must be one of {list(GATE_ERRORS)}, got "
                             f"{gate_errors!r}", 'write gate_errors = "stop" (or leave it out: '
                             '"retry")')
        worker, gate = kind.factory(node, spec_dir)
        llm = _llm(node, worker)
        configs[node_name] = NodeConfig(node_name, kind_name, timeout_s, gate_timeout_s,
                                        gate_files, worker, gate, eval_reserve, llm, network,
                                        writable, limits, gate_errors)
    try:
        graph = LoopGraph.build(specs, repair_budget=g.get("repair_budget", 0),
                                spend_budget=g["spend_budget"])
    except GraphError as exc:
        where = (f"node {exc.node!r}, field {exc.field!r}" if exc.node is not None
                 else f"[graph] {exc.field}")
        text = str(exc)
        problem = text.split(": ", 1)[1].rsplit("; fix: ", 1)[0] if ": " in text else text
        raise BadInput(name, where, problem, exc.fix) from exc
    return Spec(path, spec_dir, table, digest, graph, configs, strict, policy, stop_file,
                float(price), _planner(table.get("planner"), spec_dir, name), sandbox,
                programs)


def _planner(t: Any, spec_dir: Path, name: str) -> PlannerConfig | None:
    if t is None:
        return None
    if not isinstance(t, dict):
        raise BadInput(name, "[planner]", "must be a table",
                       'write [planner] with command = ["program", ...]')
    _unknown(t, {"command", "timeout_s"}, "[planner] field", name, "")
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


def is_price(v: Any) -> bool:
    """A price: a number of spend units per second in [MIN_PRICE, MAX_PRICE] (booleans are not
    numbers)."""
    return number_in(v, MIN_PRICE, MAX_PRICE)


def _ranges(g: Mapping[str, Any], file: str) -> None:
    """[graph] numbers within their ranges (their types and signs are the model's to check)."""
    for key, high in (("spend_budget", MAX_SPEND), ("repair_budget", MAX_COUNT)):
        v = g.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and not number_in(v, -math.inf, high):
            raise BadInput(file, f"[graph] {key}", f"{short(v)} is out of range (at most "
                           f"{high:g})", f"set {key} to a number up to {high:g}")


def _node_ranges(node: NodeTable) -> None:
    """A node's numbers within their ranges (their types and signs are the model's to check)."""
    for key, high in (("spend_ceiling", MAX_SPEND), ("attempts", MAX_COUNT)):
        v = node.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and not number_in(v, -math.inf, high):
            raise node.error(key, f"{short(v)} is out of range (at most {high:g})",
                             f"set {key} to a number up to {high:g}")



def _llm(node: NodeTable, worker: Worker) -> LlmConfig | None:
    """The node's `llm` table, for a command worker only; its key variable must be set now."""
    if "llm" not in node:
        return None
    cfg = parse_llm(node["llm"], node.error)
    if not isinstance(worker, CommandWorker):
        raise node.error("llm", "model access is given to command workers only",
                         'use kind = "command" with a worker argv, or remove [llm]')
    if cfg.api_key_env is not None and cfg.key() is None:
        raise node.error("llm.api_key_env", f"{cfg.api_key_env} is not set in the engine's "
                         "environment", f"export {cfg.api_key_env}=<the upstream key> before "
                         "`loopproof run` / `resume`")
    return cfg


def _limit(node: NodeTable, key: str, default: int) -> int:
    """A tree limit: an integer in its range (`LIMIT_FIELDS`); `node` may be the [graph] table,
    whose value is every node's default."""
    low, high = LIMIT_FIELDS[key]
    v = node.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        where = f"node {node.name!r}, field {key!r}" if node.name else f"[graph] {key}"
        raise BadInput(str(node.spec_path), where, f"must be an integer from {low} to {high}, "
                       f"got {short(v)}", f"set {key} = {default} (the default) or leave it out")
    return v


def _eval_reserve(node: NodeTable) -> float:
    """The part of c_v held back for the gate: a number in [0, spend_ceiling]. (A non-number
    spend_ceiling is left for the model's check, which names it.)"""
    v = node.get("eval_reserve", 0.0)
    ceiling = node.get("spend_ceiling")
    if not number_in(v, 0.0, MAX_SPEND):
        raise node.error("eval_reserve", f"must be a number of spend units >= 0, got {v!r}",
                         "set eval_reserve = 0 (nothing held back) or the gate's expected cost")
    if isinstance(ceiling, int | float) and not isinstance(ceiling, bool) and 0 <= ceiling < v:
        raise node.error("eval_reserve", f"{v!r} exceeds spend_ceiling = {ceiling!r}",
                         "lower eval_reserve or raise spend_ceiling")
    return float(v)


def _unknown(t: Mapping[str, Any], allowed: set[str], what: str, file: str, node: str) -> None:
    for key in t:
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            fix = f"did you mean {close[0]!r}?" if close else f"use one of {sorted(allowed)}"
            where = f"node {node!r}, field {key!r}" if node else f"{what} {key!r}"
            raise BadInput(file, where, f"unknown {what}", fix)


def _required(node: NodeTable, key: str) -> Any:
    if key not in node:
        raise node.error(key, "is missing", f"add {key} = <number> to [node.{node.name}]")
    return node[key]


def _names(node: NodeTable, key: str) -> tuple[str, ...]:
    v = node.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise node.error(key, f"must be a list of node names, got {v!r}",
                         f'write {key} = ["other_node"]')
    return tuple(v)


def _files(node: NodeTable, spec_dir: Path, key: str = "gate_files", *,
           folders: bool = False) -> tuple[Path, ...]:
    v = node.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise node.error(key, f"must be a list of paths, got {v!r}",
                         f'write {key} = ["path/relative/to/spec"]')
    out = []
    for f in v:
        try:  # a path that cannot exist (too long, a NUL byte, a link loop) is not one
            p = (spec_dir / f).resolve()
            found = p.is_file() or (folders and p.is_dir())
        except (OSError, ValueError, RuntimeError):
            found = False
        if not found:
            kind = "a file or folder" if folders else "a file"
            raise node.error(key, f"{short(f)} is not {kind} under {spec_dir}",
                             f"list existing {'paths' if folders else 'files'}, relative to "
                             "the spec's folder")
        out.append(p)
    return tuple(out)


def _opt_path(g: Mapping[str, Any], key: str, spec_dir: Path, file: str, *,
              must_exist: bool) -> Path | None:
    if key not in g:
        return None
    v = g[key]
    if not isinstance(v, str) or not v:
        raise BadInput(file, f"[graph] {key}", f"must be a path string, got {v!r}",
                       f'write {key} = "relative/to/spec"')
    found = file_or_none(spec_dir / v)
    if must_exist and found is None:
        raise BadInput(file, f"[graph] {key}", f"{short(v)} is not a file under {spec_dir}",
                       "give an existing file, relative to the spec's folder")
    try:
        return found or (spec_dir / v).resolve()
    except (OSError, RuntimeError) as exc:
        raise BadInput(file, f"[graph] {key}", f"{short(v)} is not a usable path ({exc})",
                       "give a short path, relative to the spec's folder") from None
